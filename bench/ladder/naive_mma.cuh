// Naive attention on tensor cores, bf16 in and out: the like-for-like
// partner of flash2_fast for the side by side and the sweep, measured here
// before it joins kernels/ with its mirror and traced build. Three kernels,
// S and P through device memory:
//
//   naive_mma_scores   S = scale·QKᵀ, float32, N×N per batch-head (−inf above
//                      the diagonal under a causal mask; every tile computed)
//   naive_mma_softmax  one warp per row: m = max S, l = Σ exp(S − m),
//                      P = bf16(exp(S − m)/l), N×N per batch-head, and the LSE
//   naive_mma_pv       O = P·V, bf16 out
//
// The products use the same fragments as flash2_fast (mma.sync m16n8k16,
// ldmatrix from swizzled shared memory, cp.async loads).
#pragma once
#include "../../kernels/flash2_fast.cu"

namespace naive_mma {

using fast::bf16;

// S = scale·Q Kᵀ for one 128×128 tile of one batch-head; 4 warps of 32 rows.
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128) scores(const bf16 *__restrict__ Q, const bf16 *__restrict__ K,
                                              float *__restrict__ S, int N, float scale) {
  constexpr int BR = 128, BC = 128, MI = 2, NI = BC / 8, CH = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem), *sK = sQ + BR * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int r0 = blockIdx.y * BR, c0 = blockIdx.x * BC, bh = blockIdx.z;
  const size_t base = (size_t)bh * N * D;
  fast::load_tile<BR, D, 128, true>(sQ, Q + base, r0, N, tid);
  fast::load_tile<BC, D, 128, true>(sK, K + base, c0, N, tid);
  fast::cp_async_commit();
  fast::cp_async_wait<0>();
  __syncthreads();
  float s[MI][NI][4] = {};
  const int wr0 = warp * 32;
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
  float *out = S + (size_t)bh * N * N;
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = r0 + wr0 + mi * 16 + g + h * 8;
      if (row >= N) continue;
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const int col = c0 + ni * 8 + 2 * t;
        float v0 = s[mi][ni][2 * h] * scale, v1 = s[mi][ni][2 * h + 1] * scale;
        if (CAUSAL && col > row) v0 = -INFINITY;
        if (CAUSAL && col + 1 > row) v1 = -INFINITY;
        if (col + 1 < N) *reinterpret_cast<float2 *>(out + (size_t)row * N + col) = make_float2(v0, v1);
        else if (col < N) out[(size_t)row * N + col] = v0;
      }
    }
}

// One warp per row: three passes over S in device memory (max, sum, write P).
__global__ void __launch_bounds__(256) softmax(const float *__restrict__ S, bf16 *__restrict__ P, float *__restrict__ LSE,
                                               int N, int rows) {
  const int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float *s = S + (size_t)row * N;
  float m = -INFINITY;
  for (int c = lane * 4; c < N; c += 128) {
    float4 v = __ldcg(reinterpret_cast<const float4 *>(s + c));
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  float l = 0.f;
  for (int c = lane * 4; c < N; c += 128) {
    float4 v = __ldcg(reinterpret_cast<const float4 *>(s + c));
    l += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) l += __shfl_xor_sync(0xffffffff, l, o);
  const float inv = 1.f / l;
  bf16 *p = P + (size_t)row * N;
  for (int c = lane * 4; c < N; c += 128) {
    float4 v = __ldcg(reinterpret_cast<const float4 *>(s + c));
    __nv_bfloat162 a = __floats2bfloat162_rn(__expf(v.x - m) * inv, __expf(v.y - m) * inv);
    __nv_bfloat162 b = __floats2bfloat162_rn(__expf(v.z - m) * inv, __expf(v.w - m) * inv);
    uint2 w;
    w.x = *reinterpret_cast<uint32_t *>(&a);
    w.y = *reinterpret_cast<uint32_t *>(&b);
    *reinterpret_cast<uint2 *>(p + c) = w;
  }
  if (lane == 0) LSE[row] = m + logf(l);
}

// O = P V for 128 rows of one batch-head, the kv columns in chunks of 64.
template <int D>
__global__ void __launch_bounds__(128) pv(const bf16 *__restrict__ P, const bf16 *__restrict__ V, bf16 *__restrict__ O, int N) {
  constexpr int BR = 128, BK = 64, MI = 2, DI = D / 8, PCH = BK / 8, VCH = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sP = reinterpret_cast<bf16 *>(smem), *sV = sP + BR * BK;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int r0 = blockIdx.x * BR, bh = blockIdx.y;
  const bf16 *p = P + (size_t)bh * N * N;
  const size_t base = (size_t)bh * N * D;
  float o[MI][DI][4] = {};
  const int wr0 = warp * 32;
  for (int c0 = 0; c0 < N; c0 += BK) {
    __syncthreads();
    // P tile: 128 rows of 64 columns (8 chunks of 16 bytes), swizzled.
    for (int c = tid; c < BR * PCH; c += 128) {
      const int r = c / PCH, ch = c % PCH;
      const bool ok = r0 + r < N;
      fast::cp_async16(fast::smem_addr(sP + fast::swz<PCH>(r, ch) * 8), p + (size_t)(ok ? r0 + r : 0) * N + c0 + ch * 8, ok);
    }
    fast::load_tile<BK, D, 128, true>(sV, V + base, c0, N, tid);
    fast::cp_async_commit();
    fast::cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
        fast::ldsm_x4(fast::smem_addr(sP + fast::swz<PCH>(wr0 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)) * 8), a[mi][0],
                      a[mi][1], a[mi][2], a[mi][3]);
#pragma unroll
      for (int d2 = 0; d2 < DI / 2; d2++) {
        uint32_t b0, b1, b2, b3;
        fast::ldsm_x4_trans(
            fast::smem_addr(sV + fast::swz<VCH>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), d2 * 2 + (lane >> 4)) * 8), b0,
            b1, b2, b3);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          fast::mma16816(o[mi][2 * d2], a[mi], b0, b1);
          fast::mma16816(o[mi][2 * d2 + 1], a[mi], b2, b3);
        }
      }
    }
  }
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = r0 + wr0 + mi * 16 + g + h * 8;
      if (row >= N) continue;
#pragma unroll
      for (int di = 0; di < DI; di++)
        *reinterpret_cast<__nv_bfloat162 *>(O + base + (size_t)row * D + di * 8 + 2 * t) =
            __floats2bfloat162_rn(o[mi][di][2 * h], o[mi][di][2 * h + 1]);
    }
}

} // namespace naive_mma
