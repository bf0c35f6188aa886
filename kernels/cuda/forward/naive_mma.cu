// Naive attention on tensor cores, bf16 in and out: the kernels whose CPU
// mirror is naive_mma.go, and the like-for-like partner of flash2_fast. S and
// P still go through device memory, N×N per batch-head (rows padded to a
// whole number of kv-tiles, ldS = Tc·BC, so every tile load is whole and
// 16-byte aligned):
//
//   naive_mma_scores   one block per tile (i, j): S = scale·Q_i K_jᵀ, float32,
//                      d/16 mma.sync chunks, -inf above the diagonal when
//                      causal (every tile is computed, as naive's)
//   naive_mma_softmax  one block per q-tile, one warp per row: naive's three
//                      passes (max, l = Σ expf(S − m) in lanes then a
//                      butterfly, P = expf(S − m)/l), P rounded to bf16, zeros
//                      past N, and the LSE
//   naive_mma_pv       one block per q-tile: O += P_ij V_j, BC/16 mma.sync
//                      chunks per kv-tile in order, P and V through ldmatrix;
//                      O out in bf16
//
// Tiles are BR = 128 rows (4 warps of 32) by the flash kernel's BC, so the
// side by side steps both over the same tiles. The products reuse
// flash2_fast's fragments, loads and swizzle.
#include "../common/instrument.cuh"
#include "../common/mma.cuh"

namespace naive_mma {

using fast::bf16;
constexpr int BR = 128, NT = 128, MI = 2; // 4 warps of 32 rows

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The lanes' partial sums added in the butterfly order the mirror follows.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

//> scores: naive_mma_scores, S = scale·Q_i K_jᵀ on tensor cores to the N×N buffer in device memory
template <int D, int BC, bool CAUSAL>
__device__ __forceinline__ void scores(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, float *__restrict__ S, int N,
                                       float scale FS_TRACE_PARAMS) {
  constexpr int NI = BC / 8, CH = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem), *sK = sQ + BR * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int j = blockIdx.x, i = blockIdx.y, bh = blockIdx.z;
  const int r0 = i * BR, c0 = j * BC, Tc = gridDim.x, ldS = Tc * BC;
  const int rowsValid = min(BR, N - r0), colsValid = min(BC, N - c0);
  const size_t base = (size_t)bh * N * D;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.y + i) * gridDim.x + j);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (tid == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = tid; e < BR * BC; e += NT) fs_payload(cur)[e] = 0.f;)
  fast::load_tile<BR, D, NT, true>(sQ, Q + base, r0, N, tid);
  fast::load_tile<BC, D, NT, true>(sK, K + base, c0, N, tid);
  fast::cp_async_commit();
  fast::cp_async_wait<0>();
  __syncthreads();
  float s[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++) s[mi][ni][0] = s[mi][ni][1] = s[mi][ni][2] = s[mi][ni][3] = 0.f;
  const int wr0 = warp * MI * 16;
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    uint32_t a[MI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
      fast::ldsm_x4(fast::smem_addr(sQ + fast::swz<CH>(wr0 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)) * 8), a[mi][0],
                    a[mi][1], a[mi][2], a[mi][3]);
#pragma unroll
    for (int n2 = 0; n2 < NI / 2; n2++) {
      uint32_t b0, b1, b2, b3;
      fast::ldsm_x4(fast::smem_addr(sK + fast::swz<CH>(n2 * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)) * 8),
                    b0, b1, b2, b3);
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        fast::mma16816(s[mi][2 * n2], a[mi], b0, b1);
        fast::mma16816(s[mi][2 * n2 + 1], a[mi], b2, b3);
      }
    }
  }
  float *out = S + (size_t)bh * N * ldS;
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = wr0 + mi * 16 + g + (e >> 1) * 8, c = ni * 8 + 2 * t + (e & 1);
        if (r >= rowsValid || c >= colsValid) continue;
        const float v = CAUSAL && c0 + c > r0 + r ? -INFINITY : s[mi][ni][e] * scale;
        out[(size_t)(r0 + r) * ldS + c0 + c] = v;
        FS_TRACED(if (full) fs_payload(cur)[fs_scores_s(BR, BC, D, N) + r * BC + c] = v;)
      }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, BR * BC, fs_scores_record_bytes(BR, BC, D, N));
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_SCORES, bh, i, j, rowsValid, colsValid, (unsigned long long)(rowsValid + colsValid) * D * 2,
                      (unsigned long long)rowsValid * colsValid * 4);
  })
}

//> softmax: naive_mma_softmax, three passes over a row of S: m, l, then P in bf16 to device memory
template <int D, int BC>
__device__ __forceinline__ void softmax(const float *__restrict__ S, bf16 *__restrict__ P, float *__restrict__ LSE, int N,
                                        int Tc FS_TRACE_PARAMS) {
  const int i = blockIdx.x, bh = blockIdx.y, ldS = Tc * BC;
  const int r0 = i * BR, rowsValid = min(BR, N - r0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < 2 * BR; e += blockDim.x) fs_payload(cur)[e] = 0.f;
            __syncthreads();)
  for (int r = warp; r < rowsValid; r += warps) {
    const float *srow = S + ((size_t)bh * N + r0 + r) * ldS;
    bf16 *prow = P + ((size_t)bh * N + r0 + r) * ldS;
    float m = -INFINITY;
    for (int c = lane; c < N; c += 32) m = fmaxf(m, __ldcg(&srow[c]));
    m = warp_max(m);
    const float mBase = m == -INFINITY ? 0.f : m;
    float l = 0.f;
    for (int c = lane; c < N; c += 32) l = __fadd_rn(l, expf(__fsub_rn(__ldcg(&srow[c]), mBase)));
    l = warp_sum(l);
    for (int c = lane; c < ldS; c += 32)
      prow[c] = __float2bfloat16_rn(c < N && l > 0.f ? __fdiv_rn(expf(__fsub_rn(__ldcg(&srow[c]), mBase)), l) : 0.f);
    if (lane == 0) {
      LSE[(size_t)bh * N + r0 + r] = l == 0.f ? -INFINITY : __fadd_rn(m, logf(l));
      FS_TRACED(if (full) {
        fs_payload(cur)[fs_softmax_m(BR, BC, D, N) + r] = m;
        fs_payload(cur)[fs_softmax_l(BR, BC, D, N) + r] = l;
      })
    }
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, 2 * BR, fs_softmax_record_bytes(BR, BC, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_SOFTMAX, bh, i, FS_NO_TILE, rowsValid, 0, 3ull * rowsValid * N * 4,
                      (unsigned long long)rowsValid * N * 2 + (unsigned long long)rowsValid * 4);
  })
}

//> pv: naive_mma_pv, O += P_ij·V_j on tensor cores, P read back from device memory
template <int D, int BC>
__device__ __forceinline__ void pv(const bf16 *__restrict__ P, const bf16 *__restrict__ V, const float *__restrict__ LSE,
                                   bf16 *__restrict__ O, int N FS_TRACE_PARAMS) {
  constexpr int DI = D / 8, PCH = BC / 8, PS = PCH + 1, VCH = D / 8;
  // P's tile rows are padded by one 16-byte chunk (BC = 48 has too few
  // chunks for the swizzle): eight rows' ldmatrix reads then start in eight
  // different bank groups.
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sP = reinterpret_cast<bf16 *>(smem), *sV = sP + BR * PS * 8;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int i = blockIdx.x, bh = blockIdx.y, Tc = (N + BC - 1) / BC, ldS = Tc * BC;
  const int r0 = i * BR, rowsValid = min(BR, N - r0), wr0 = warp * MI * 16;
  const bf16 *p = P + (size_t)bh * N * ldS;
  const size_t base = (size_t)bh * N * D;
  float o[MI][DI][4];
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int di = 0; di < DI; di++) o[mi][di][0] = o[mi][di][1] = o[mi][di][2] = o[mi][di][3] = 0.f;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const unsigned pvBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_pv_record_bytes(BR, BC, D, N);)
  for (int j = 0; j < Tc; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    const int c0 = j * BC, colsValid = min(BC, N - c0);
    __syncthreads(); // every warp is done with the previous tiles
    for (int c = tid; c < BR * PCH; c += NT) {
      const int r = c / PCH, ch = c % PCH;
      const bool ok = r0 + r < N;
      fast::cp_async16(fast::smem_addr(sP + (r * PS + ch) * 8), p + (size_t)(ok ? r0 + r : 0) * ldS + c0 + ch * 8, ok);
    }
    fast::load_tile<BC, D, NT, true>(sV, V + base, c0, N, tid);
    fast::cp_async_commit();
    fast::cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      uint32_t a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
        fast::ldsm_x4(fast::smem_addr(sP + ((wr0 + mi * 16 + (lane & 15)) * PS + kk * 2 + (lane >> 4)) * 8), a[mi][0], a[mi][1],
                      a[mi][2], a[mi][3]);
#pragma unroll
      for (int d2 = 0; d2 < DI / 2; d2++) {
        uint32_t b0, b1, b2, b3;
        fast::ldsm_x4_trans(
            fast::smem_addr(sV + fast::swz<VCH>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), d2 * 2 + (lane >> 4)) * 8), b0, b1,
            b2, b3);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          fast::mma16816(o[mi][2 * d2], a[mi], b0, b1);
          fast::mma16816(o[mi][2 * d2 + 1], a[mi], b2, b3);
        }
      }
    }
#ifdef FS_TRACE
    if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur);
        for (int e = tid; e < BR * BC; e += NT) {
          const int r = e / BC, c = e % BC;
          pl[fs_pv_p(BR, BC, D, N) + e] = r < rowsValid && c < colsValid ? __bfloat162float(sP[(r * PS) * 8 + c]) : 0.f;
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int di = 0; di < DI; di++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int r = wr0 + mi * 16 + g + (e >> 1) * 8;
              pl[fs_pv_o(BR, BC, D, N) + r * D + di * 8 + 2 * t + (e & 1)] = r < rowsValid ? o[mi][di][e] : 0.f;
            }
        if (tid == 0) fs_zero_padding(cur, BR * BC + BR * D, pvBytes);
      }
      __syncthreads();
      if (tid == 0)
        fs_write_header(cur, FS_KIND_PV, bh, i, j, rowsValid, colsValid,
                        (unsigned long long)rowsValid * colsValid * 2 + (unsigned long long)colsValid * D * 2, 0);
      cur.rec += pvBytes;
    }
#endif
  }
  //> epilogue: the finished rows of O to device memory, in bf16
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = wr0 + mi * 16 + g + h * 8;
      if (r >= rowsValid) continue;
#pragma unroll
      for (int di = 0; di < DI; di++)
        *reinterpret_cast<__nv_bfloat162 *>(O + base + (size_t)(r0 + r) * D + di * 8 + 2 * t) =
            __floats2bfloat162_rn(o[mi][di][2 * h], o[mi][di][2 * h + 1]);
    }
#ifdef FS_TRACE
  if (full) {
    float *pl = fs_payload(cur);
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int di = 0; di < DI; di++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = wr0 + mi * 16 + g + (e >> 1) * 8;
          pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * t + (e & 1)] = r < rowsValid ? o[mi][di][e] : 0.f;
        }
    for (int r = tid; r < BR; r += NT) pl[fs_epilogue_lse(BR, BC, D, N) + r] = r < rowsValid ? LSE[(size_t)bh * N + r0 + r] : 0.f;
  }
  if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, BR * D + BR, fs_epilogue_record_bytes(BR, BC, D, N));
    __syncthreads();
    if (tid == 0) fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0, (unsigned long long)rowsValid * D * 2);
  }
#endif
}
//> end

// Shared memory of each kernel, in bytes (NaiveMMAInstance in kernels/gpu.go).
constexpr int scores_smem(int D, int BC) { return 2 * (BR * D + BC * D); }
constexpr int pv_smem(int D, int BC) { return 2 * (BR * (BC + 8) + BC * D); }

} // namespace naive_mma

// The compiled instantiations, at flash2_fast's tiles: keep in step with
// NaiveMMAInstances in kernels/gpu.go (a test checks).
#define NAIVE_MMA_INSTANCE(BC, D)                                                                                   \
  extern "C" __global__ void __launch_bounds__(128) naive_mma_scores_bc##BC##_d##D(                                   \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, float *__restrict__ S, long long N,            \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                              \
    if (causal)                                                                                                      \
      naive_mma::scores<D, BC, true>(Q, K, S, (int)N, __uint_as_float((unsigned)scaleBits) FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
    else                                                                                                             \
      naive_mma::scores<D, BC, false>(Q, K, S, (int)N, __uint_as_float((unsigned)scaleBits) FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(256) naive_mma_softmax_bc##BC##_d##D(                                  \
      const float *__restrict__ S, fast::bf16 *__restrict__ P, float *__restrict__ LSE, long long N,                   \
      long long Tc FS_TRACE_PARAMS) {                                                                                \
    naive_mma::softmax<D, BC>(S, P, LSE, (int)N, (int)Tc FS_TRACED(, fs_trace, fs_offsets, fs_mode));                 \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(128) naive_mma_pv_bc##BC##_d##D(                                       \
      const fast::bf16 *__restrict__ P, const fast::bf16 *__restrict__ V, const float *__restrict__ LSE,               \
      fast::bf16 *__restrict__ O, long long N FS_TRACE_PARAMS) {                                                      \
    naive_mma::pv<D, BC>(P, V, LSE, O, (int)N FS_TRACED(, fs_trace, fs_offsets, fs_mode));                            \
  }

NAIVE_MMA_INSTANCE(128, 64)
NAIVE_MMA_INSTANCE(48, 128)
