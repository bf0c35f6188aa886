// The two ends of the tensor-core backward passes (flash2_bwd_mma.cu and
// the Hopper backward rungs, which share its arithmetic): before the main
// kernel, D_i = rowsum(dO_i ∘ O_i) and the float32 dQ accumulator of each
// q-tile set to zero; after it, dQ_i = accumulator·scale once every
// kv-tile's block has added to it. One block per q-tile for each.
#ifndef FLASHSTEP_BWD_ENDS_CUH
#define FLASHSTEP_BWD_ENDS_CUH

#include "instrument.cuh"
#include "mma.cuh"

namespace bwd_ends {

using fast::bf16;

// pre: D_i = rowsum(dO_i ∘ O_i) from bf16 rows, in float32, one thread per row; the float32 dQ accumulator of q-tile i set to zero.
// TILED (flash3_bwd_tma, whose copy engine reads each q-tile's D_i and L_i
// as one aligned run): D is laid out in whole q-tiles, Tr·BR per
// batch-head with the rows past N zero, and L·log2 e beside it in LT, the
// same way; otherwise D has N rows per batch-head and LT is unused.
template <int BR, int BC, int D, int NT, bool TILED = false>
__device__ __forceinline__ void pre(const bf16 *__restrict__ dO, const bf16 *__restrict__ O, const float *__restrict__ L,
                                    float *__restrict__ Delta, float *__restrict__ dQ, int N FS_TRACE_PARAMS,
                                    float *__restrict__ LT = nullptr) {
  static_assert(BR <= NT, "one thread per row of the q-tile");
  const int tid = threadIdx.x;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * BR;
  const int rowsValid = min(BR, N - r0);
  const size_t base = (size_t)bh * N * D;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (tid == 0) cur.t_start = fs_globaltimer();)

  if (tid < rowsValid) {
    // Eight bf16 at a time; each product of two bf16 is exact in float32,
    // the sum runs over d in order.
    const uint4 *a = reinterpret_cast<const uint4 *>(dO + base + (size_t)(r0 + tid) * D);
    const uint4 *b = reinterpret_cast<const uint4 *>(O + base + (size_t)(r0 + tid) * D);
    float acc = 0.f;
#pragma unroll 4
    for (int c = 0; c < D / 8; c++) {
      const uint4 va = __ldcg(a + c), vb = __ldcg(b + c);
      const bf16 *x = reinterpret_cast<const bf16 *>(&va), *y = reinterpret_cast<const bf16 *>(&vb);
#pragma unroll
      for (int e = 0; e < 8; e++) acc = __fadd_rn(acc, __fmul_rn(__bfloat162float(x[e]), __bfloat162float(y[e])));
    }
    if constexpr (TILED) {
      Delta[(size_t)bh * gridDim.x * BR + r0 + tid] = acc;
      LT[(size_t)bh * gridDim.x * BR + r0 + tid] = __fmul_rn(__ldcg(&L[(size_t)bh * N + r0 + tid]), 1.4426950408889634f);
    } else {
      Delta[(size_t)bh * N + r0 + tid] = acc;
    }
    FS_TRACED(if (full) fs_payload(cur)[fs_bwd_pre_delta(BR, BC, D, N) + tid] = acc;)
  }
  if constexpr (TILED) {
    if (tid >= rowsValid && tid < BR) Delta[(size_t)bh * gridDim.x * BR + r0 + tid] = LT[(size_t)bh * gridDim.x * BR + r0 + tid] = 0.f;
  }
  for (int e = tid; e < rowsValid * D; e += NT) dQ[base + (size_t)r0 * D + e] = 0.f;

  FS_TRACED(if (cur.rec) {
    if (full) {
      float *pl = fs_payload(cur);
      for (int e = tid; e < BR * D; e += NT) {
        const bool in = e / D < rowsValid;
        pl[fs_bwd_pre_do(BR, BC, D, N) + e] = in ? __bfloat162float(dO[base + (size_t)r0 * D + e]) : 0.f;
        pl[fs_bwd_pre_o(BR, BC, D, N) + e] = in ? __bfloat162float(O[base + (size_t)r0 * D + e]) : 0.f;
      }
      if (tid < BR) {
        pl[fs_bwd_pre_lse(BR, BC, D, N) + tid] = tid < rowsValid ? L[(size_t)bh * N + r0 + tid] : 0.f;
        if (tid >= rowsValid) pl[fs_bwd_pre_delta(BR, BC, D, N) + tid] = 0.f;
      }
      if (tid == 0) fs_zero_padding(cur, fs_bwd_pre_delta(BR, BC, D, N) + BR, fs_bwd_pre_record_bytes(BR, BC, D, N));
    }
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_BWD_PRE, bh, i, FS_NO_TILE, rowsValid, 0,
                      2ull * rowsValid * D * 2 + rowsValid * 4ull, rowsValid * 4ull + (unsigned long long)rowsValid * D * 4);
  })
}

// dq_scale: dQ_i = accumulator · scale, once every kv-tile's block has added to it.
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void dq_scale(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  const int tid = threadIdx.x;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int rowsValid = min(BR, N - i * BR);
  float4 *acc = reinterpret_cast<float4 *>(dQ + (size_t)bh * N * D + (size_t)i * BR * D);
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (tid == 0) cur.t_start = fs_globaltimer();)
  for (int e = tid; e < BR * D / 4; e += NT) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (e * 4 / D < rowsValid) {
      v = __ldcg(acc + e);
      v = make_float4(__fmul_rn(v.x, scale), __fmul_rn(v.y, scale), __fmul_rn(v.z, scale), __fmul_rn(v.w, scale));
      acc[e] = v;
    }
    FS_TRACED(if (full) { // a record's payload is 8-byte aligned: four stores
      float *pl = fs_payload(cur) + fs_bwd_dq_dq(BR, BC, D, N) + e * 4;
      pl[0] = v.x, pl[1] = v.y, pl[2] = v.z, pl[3] = v.w;
    })
  }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_bwd_dq_dq(BR, BC, D, N) + BR * D, fs_bwd_dq_record_bytes(BR, BC, D, N));
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_BWD_DQ, bh, i, FS_NO_TILE, rowsValid, 0, (unsigned long long)rowsValid * D * 4,
                      (unsigned long long)rowsValid * D * 4);
  })
}

} // namespace bwd_ends

#endif // FLASHSTEP_BWD_ENDS_CUH
