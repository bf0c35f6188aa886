// FlashAttention-2's backward pass, float32: the kernels whose CPU mirror is
// flash2_bwd.go.
//
// The forward kept only O and the log-sum-exp L per row. The backward never
// reads an N x N matrix: it recomputes S and P tile by tile from Q, K and L.
//
//   flash2_bwd_pre   one block per q-tile i: D_i = rowsum(dO_i o O_i), one
//                    thread per row, and dQ_i set to zero
//   flash2_bwd_main  one block per kv-tile j: K_j, V_j and the accumulators
//                    dK_j, dV_j stay on chip while it walks the q-tiles:
//                      S = Q_i K_j^T * scale, P = exp(S - L_i)
//                      dV_j += P^T dO_i
//                      dP = dO_i V_j^T, dS = P o (dP - D_i)
//                      dK_j += dS^T Q_i
//                      dQ_i += dS K_j      (atomicAdd: every kv-tile adds)
//                    then writes dK_j * scale and dV_j
//   flash2_bwd_dq    one block per q-tile: dQ_i *= scale, once all have added
//
// Arithmetic order is the mirror's, operation for operation: every product
// and sum rounded on its own (__fmul_rn, __fadd_rn), dot products over d in
// order, dV and dK adding the step's rows in order, dS K_j over the tile's
// columns in order. expf differs from the mirror's (within 2 ulp), the
// order in which the blocks' atomic adds reach dQ is the GPU's, and the
// atomic add (atom.add.f32) flushes subnormal numbers to zero.
//
// Tracing: the pre and dq blocks write one record each; the main kernel has
// a trace slot per (kv-tile, q-tile) step, so a block records the traced
// q-tiles of its walk and skips the rest.
#include "../common/instrument.cuh"

//> pre: D_i = rowsum(dO_i ∘ O_i) to device memory; dQ_i set to zero
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void flash2_bwd_pre(const float *__restrict__ dO, const float *__restrict__ O,
                                               const float *__restrict__ L, float *__restrict__ Delta,
                                               float *__restrict__ dQ, int N FS_TRACE_PARAMS) {
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
    const size_t row = base + (size_t)(r0 + tid) * D;
    float acc = 0.f;
    for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(__ldcg(&dO[row + x]), __ldcg(&O[row + x])));
    Delta[(size_t)bh * N + r0 + tid] = acc;
    FS_TRACED(if (full) fs_payload(cur)[fs_bwd_pre_delta(BR, BC, D, N) + tid] = acc;)
  }
  for (int e = tid; e < rowsValid * D; e += NT) dQ[base + (size_t)r0 * D + e] = 0.f;

  FS_TRACED(if (cur.rec) {
    if (full) {
      float *pl = fs_payload(cur);
      for (int e = tid; e < BR * D; e += NT) {
        const bool in = e / D < rowsValid;
        pl[fs_bwd_pre_do(BR, BC, D, N) + e] = in ? dO[base + (size_t)r0 * D + e] : 0.f;
        pl[fs_bwd_pre_o(BR, BC, D, N) + e] = in ? O[base + (size_t)r0 * D + e] : 0.f;
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
                      2ull * rowsValid * D * 4 + rowsValid * 4ull, rowsValid * 4ull + (unsigned long long)rowsValid * D * 4);
  })
}
//> end

template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void flash2_bwd_main(const float *__restrict__ Q, const float *__restrict__ K,
                                                const float *__restrict__ V, const float *__restrict__ dO,
                                                const float *__restrict__ L, const float *__restrict__ Delta,
                                                float *__restrict__ dQ, float *__restrict__ dK,
                                                float *__restrict__ dV, int N, float scale,
                                                int causal FS_TRACE_PARAMS) {
  static_assert(BR <= NT, "a thread per row loads L_i and D_i");
  static_assert((BC * D) % NT == 0, "dK_j and dV_j divide evenly over the threads");
  constexpr int KPT = BC * D / NT; // dK_j and dV_j elements per thread
  constexpr int KS = D + 1;        // padded row stride of K_j and V_j: threads of a warp read different rows
  constexpr int PS = BC + 1;       // padded row stride of P and dS

  extern __shared__ float smem[];
  float *sK = smem;             // BC x KS
  float *sV = sK + BC * KS;     // BC x KS
  float *sQ = sV + BC * KS;     // BR x D
  float *sDO = sQ + BR * D;     // BR x D
  float *sP = sDO + BR * D;     // BR x PS
  float *sDS = sP + BR * PS;    // BR x PS
  float *sL = sDS + BR * PS;    // BR
  float *sD = sL + BR;          // BR

  const int tid = threadIdx.x;
  const int j = blockIdx.x, bh = blockIdx.y;
  const int c0 = j * BC;
  const int colsValid = min(BC, N - c0);
  const int Tr = (N + BR - 1) / BR;
  const size_t base = (size_t)bh * N * D;
  // Under a causal mask the q-tiles wholly above column c0 see nothing of
  // this kv-tile: the walk starts at the one holding row c0.
  const int iStart = causal ? c0 / BR : 0;

  //> load-kv: K_j and V_j from device memory, once per block; dK_j and dV_j start at zero
  for (int e = tid; e < BC * D; e += NT) {
    const int c = e / D, x = e % D;
    const bool in = c < colsValid;
    sK[c * KS + x] = in ? __ldcg(&K[base + (size_t)(c0 + c) * D + x]) : 0.f;
    sV[c * KS + x] = in ? __ldcg(&V[base + (size_t)(c0 + c) * D + x]) : 0.f;
  }
  float dk[KPT], dv[KPT]; // element tid + t*NT of BC x D
#pragma unroll
  for (int t = 0; t < KPT; t++) dk[t] = dv[t] = 0.f;

  for (int i = iStart; i < Tr; i++) {
    const int r0 = i * BR;
    const int rowsValid = min(BR, N - r0);
    FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.x + j) * Tr + i);
              const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
              float *pl = cur.rec ? fs_payload(cur) : nullptr;
              if (tid == 0) cur.t_start = fs_globaltimer();)

    //> load-q: Q_i, dO_i, L_i and D_i from device memory, at every q-tile
    __syncthreads(); // the previous q-tile is done with sQ, sDO, sP, sDS
    for (int e = tid; e < BR * D; e += NT) {
      const bool in = e / D < rowsValid;
      sQ[e] = in ? __ldcg(&Q[base + (size_t)r0 * D + e]) : 0.f;
      sDO[e] = in ? __ldcg(&dO[base + (size_t)r0 * D + e]) : 0.f;
    }
    if (tid < BR) {
      sL[tid] = tid < rowsValid ? __ldcg(&L[(size_t)bh * N + r0 + tid]) : 0.f;
      sD[tid] = tid < rowsValid ? __ldcg(&Delta[(size_t)bh * N + r0 + tid]) : 0.f;
    }
    __syncthreads();

    //> recompute: S = Q_i K_jᵀ · scale, masked, and P = exp(S − L_i): no running max, L is final
    for (int e = tid; e < BR * BC; e += NT) {
      const int r = e / BC, c = e % BC;
      float s = 0.f, p = 0.f; // padding rows and columns: zero
      if (r < rowsValid && c < colsValid) {
        if (causal && c0 + c > r0 + r) {
          s = FS_NEG_INF;
        } else {
          float acc = 0.f;
          for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(sQ[r * D + x], sK[c * KS + x]));
          s = __fmul_rn(acc, scale);
        }
        p = expf(__fsub_rn(s, sL[r]));
      }
      sP[r * PS + c] = p;
      FS_TRACED(if (full) {
        pl[fs_bwd_step_s(BR, BC, D, N) + e] = s;
        pl[fs_bwd_step_p(BR, BC, D, N) + e] = p;
      })
    }
    __syncthreads();

    //> dv: dV_j += Pᵀ dO_i, the q-tile's rows in order
#pragma unroll
    for (int t = 0; t < KPT; t++) {
      const int e = tid + t * NT, c = e / D, x = e % D;
      for (int r = 0; r < rowsValid; r++) dv[t] = __fadd_rn(dv[t], __fmul_rn(sP[r * PS + c], sDO[r * D + x]));
    }

    //> dp-ds: dP = dO_i V_jᵀ and dS = P ∘ (dP − D_i)
    for (int e = tid; e < BR * BC; e += NT) {
      const int r = e / BC, c = e % BC;
      float dp = 0.f, ds = 0.f;
      if (r < rowsValid && c < colsValid) {
        for (int x = 0; x < D; x++) dp = __fadd_rn(dp, __fmul_rn(sDO[r * D + x], sV[c * KS + x]));
        ds = __fmul_rn(sP[r * PS + c], __fsub_rn(dp, sD[r]));
      }
      sDS[r * PS + c] = ds;
      FS_TRACED(if (full) {
        pl[fs_bwd_step_dp(BR, BC, D, N) + e] = dp;
        pl[fs_bwd_step_ds(BR, BC, D, N) + e] = ds;
      })
    }
    __syncthreads();

    //> dk: dK_j += dSᵀ Q_i, the q-tile's rows in order
#pragma unroll
    for (int t = 0; t < KPT; t++) {
      const int e = tid + t * NT, c = e / D, x = e % D;
      for (int r = 0; r < rowsValid; r++) dk[t] = __fadd_rn(dk[t], __fmul_rn(sDS[r * PS + c], sQ[r * D + x]));
    }

    //> dq: dQ_i += dS K_j, added into device memory: every kv-tile's block adds to it
    for (int e = tid; e < BR * D; e += NT) {
      const int r = e / D, x = e % D;
      float acc = 0.f;
      if (r < rowsValid) {
        for (int c = 0; c < colsValid; c++) acc = __fadd_rn(acc, __fmul_rn(sDS[r * PS + c], sK[c * KS + x]));
        atomicAdd(&dQ[base + (size_t)(r0 + r) * D + x], acc);
      }
      FS_TRACED(if (full) pl[fs_bwd_step_dq(BR, BC, D, N) + e] = acc;)
    }
    //> end

#ifdef FS_TRACE // (a pragma cannot sit inside FS_TRACED's parentheses)
    if (cur.rec) {
      if (full) {
#pragma unroll
        for (int t = 0; t < KPT; t++) {
          pl[fs_bwd_step_dv(BR, BC, D, N) + tid + t * NT] = dv[t];
          pl[fs_bwd_step_dk(BR, BC, D, N) + tid + t * NT] = dk[t];
        }
        if (tid == 0) fs_zero_padding(cur, fs_bwd_step_dq(BR, BC, D, N) + BR * D, fs_bwd_step_record_bytes(BR, BC, D, N));
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        unsigned long long rd = 2ull * rowsValid * D * 4 + 2ull * rowsValid * 4;
        unsigned long long wr = (unsigned long long)rowsValid * D * 4;
        if (i == iStart) rd += 2ull * colsValid * D * 4;
        if (i == Tr - 1) wr += 2ull * colsValid * D * 4;
        fs_write_header(cur, FS_KIND_BWD_STEP, bh, i, j, rowsValid, colsValid, rd, wr);
      }
    }
#endif
  }

  //> write-dkdv: dK_j · scale and dV_j to device memory, once
#pragma unroll
  for (int t = 0; t < KPT; t++) {
    const int e = tid + t * NT, c = e / D;
    if (c < colsValid) {
      dK[base + (size_t)c0 * D + e] = __fmul_rn(dk[t], scale);
      dV[base + (size_t)c0 * D + e] = dv[t];
    }
  }
}
//> end

//> dq-scale: dQ_i · scale, once every kv-tile's block has added to it
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void flash2_bwd_dq(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  const int tid = threadIdx.x;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * BR;
  const int rowsValid = min(BR, N - r0);
  const size_t base = (size_t)bh * N * D + (size_t)r0 * D;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (tid == 0) cur.t_start = fs_globaltimer();)
  for (int e = tid; e < BR * D; e += NT) {
    float v = 0.f;
    if (e / D < rowsValid) {
      v = __fmul_rn(__ldcg(&dQ[base + e]), scale);
      dQ[base + e] = v;
    }
    FS_TRACED(if (full) fs_payload(cur)[fs_bwd_dq_dq(BR, BC, D, N) + e] = v;)
  }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_bwd_dq_dq(BR, BC, D, N) + BR * D, fs_bwd_dq_record_bytes(BR, BC, D, N));
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_BWD_DQ, bh, i, FS_NO_TILE, rowsValid, 0, (unsigned long long)rowsValid * D * 4,
                      (unsigned long long)rowsValid * D * 4);
  })
}
//> end

// The main kernel's dynamic shared memory, in bytes (flash2BwdSharedBytes in
// flash2_bwd.go): K_j and V_j (rows padded by one), Q_i and dO_i, P and dS
// (rows padded by one), L_i and D_i.
#define FLASH2_BWD_SMEM(BR, BC, D) (4 * (2 * (BC) * ((D) + 1) + 2 * (BR) * (D) + 2 * (BR) * ((BC) + 1) + 2 * (BR)))

// Each compiled tile is three extern "C" kernels named after it.
#define FLASH2_BWD_INSTANCE(BR, BC, D, NT)                                                                          \
  extern "C" __global__ void __launch_bounds__(NT) flash2_bwd_pre_br##BR##_bc##BC##_d##D(                          \
      const float *__restrict__ dO, const float *__restrict__ O, const float *__restrict__ L,                        \
      float *__restrict__ Delta, float *__restrict__ dQ, long long N FS_TRACE_PARAMS) {                               \
    flash2_bwd_pre<BR, BC, D, NT>(dO, O, L, Delta, dQ, (int)N FS_TRACED(, fs_trace, fs_offsets, fs_mode));          \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(NT) flash2_bwd_main_br##BR##_bc##BC##_d##D(                         \
      const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,                         \
      const float *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ Delta,                   \
      float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, long long N,                          \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                               \
    flash2_bwd_main<BR, BC, D, NT>(Q, K, V, dO, L, Delta, dQ, dK, dV, (int)N, __uint_as_float((unsigned)scaleBits), \
                                   (int)causal FS_TRACED(, fs_trace, fs_offsets, fs_mode));                           \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(NT) flash2_bwd_dq_br##BR##_bc##BC##_d##D(                           \
      float *__restrict__ dQ, long long N, unsigned long long scaleBits FS_TRACE_PARAMS) {                            \
    flash2_bwd_dq<BR, BC, D, NT>(dQ, (int)N, __uint_as_float((unsigned)scaleBits)                                   \
                                 FS_TRACED(, fs_trace, fs_offsets, fs_mode));                                         \
  }

// The compiled tiles: kernels.Float32Tiles, as every float32 rung's.
FLASH2_BWD_INSTANCE(2, 2, 4, 8)
FLASH2_BWD_INSTANCE(4, 4, 8, 32)
FLASH2_BWD_INSTANCE(16, 16, 32, 64)
FLASH2_BWD_INSTANCE(32, 32, 64, 128)
FLASH2_BWD_INSTANCE(64, 64, 64, 256)
FLASH2_BWD_INSTANCE(64, 64, 128, 256)
FLASH2_BWD_INSTANCE(32, 64, 128, 256)
