// The naive backward, float32: the kernels whose CPU mirror is naive_bwd.go.
// It is naive attention's backward, which stored P (N x N) in device memory:
// it reads P back, and writes dP and dS (N x N each) on the way.
//
//   naive_bwd_dp   one block per tile (i, j): dP = dO_i V_j^T, written out
//   naive_bwd_ds   one block per q-tile, a thread per row: D = sum P dP over
//                  the whole row, then dS = P o (dP - D) written out
//   naive_bwd_dq   one block per q-tile: dQ_i = dS_i K * scale, reading dS
//                  and K one kv-tile at a time
//   naive_bwd_dkv  one block per kv-tile j, walking every q-tile: dV_j +=
//                  P_ij^T dO_i, dK_j += dS_ij^T Q_i (both tiles read back),
//                  then dK_j * scale and dV_j written out
//
// Nothing is skipped under a causal mask: P holds zeros above the diagonal.
// There is no exp: every operation is a float32 product or sum rounded on
// its own (__fmul_rn, __fadd_rn), in the mirror's order, so the GPU's
// numbers are the mirror's bit for bit. Tile sizes and d are run-time
// values, as in naive.cu. Global loads go through L2 only (__ldcg).
#include "../common/instrument.cuh"

#define NAIVE_BWD_THREADS 256
#define NAIVE_BWD_MAXQ 32 // dQ elements a dq thread holds: Br*D <= 32*threads

//> dp: naive_bwd_dp, dP = dO_i V_jᵀ to the N×N buffer in device memory
extern "C" __global__ void __launch_bounds__(NAIVE_BWD_THREADS)
    naive_bwd_dp(const float *__restrict__ dO, const float *__restrict__ V, float *__restrict__ dP, long long N_,
                 long long D_, long long Br_, long long Bc_ FS_TRACE_PARAMS) {
  const int N = (int)N_, D = (int)D_, Br = (int)Br_, Bc = (int)Bc_;
  const int j = blockIdx.x, i = blockIdx.y, bh = blockIdx.z;
  const int r0 = i * Br, c0 = j * Bc;
  const int rowsValid = min(Br, N - r0), colsValid = min(Bc, N - c0);
  const int VS = D + 1; // V_j's rows padded by one
  extern __shared__ float smem[];
  float *sDO = smem;          // Br x D
  float *sV = sDO + Br * D;   // Bc x VS
  const size_t base = (size_t)bh * N * D;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.y + i) * gridDim.x + j);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) fs_payload(cur)[e] = 0.f;)

  for (int e = threadIdx.x; e < rowsValid * D; e += blockDim.x) sDO[e] = __ldcg(&dO[base + (size_t)r0 * D + e]);
  for (int e = threadIdx.x; e < colsValid * D; e += blockDim.x) sV[(e / D) * VS + e % D] = __ldcg(&V[base + (size_t)c0 * D + e]);
  __syncthreads(); // also orders the trace's zero fill before the values
  for (int e = threadIdx.x; e < rowsValid * colsValid; e += blockDim.x) {
    const int r = e / colsValid, c = e % colsValid;
    float acc = 0.f;
    for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(sDO[r * D + x], sV[c * VS + x]));
    dP[((size_t)bh * N + r0 + r) * N + c0 + c] = acc;
    FS_TRACED(if (full) fs_payload(cur)[fs_bwd_dp_dp(Br, Bc, D, N) + r * Bc + c] = acc;)
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, Br * Bc, fs_bwd_dp_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_BWD_DP, bh, i, j, rowsValid, colsValid,
                      (unsigned long long)(rowsValid + colsValid) * D * 4, (unsigned long long)rowsValid * colsValid * 4);
  })
}

//> ds: naive_bwd_ds, whole rows of P and dP read back: D = Σ P·dP, then dS = P ∘ (dP − D) to device memory
extern "C" __global__ void __launch_bounds__(NAIVE_BWD_THREADS)
    naive_bwd_ds(const float *__restrict__ P, const float *__restrict__ dP, float *__restrict__ dS, long long N_,
                 long long D_, long long Br_, long long Bc_ FS_TRACE_PARAMS) {
  const int N = (int)N_, Br = (int)Br_;
  (void)D_;
  (void)Bc_;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * Br;
  const int rowsValid = min(Br, N - r0);
  FS_TRACED(const int D = (int)D_, Bc = (int)Bc_;
            fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < Br; e += blockDim.x) fs_payload(cur)[e] = 0.f;
            __syncthreads();)

  for (int r = threadIdx.x; r < rowsValid; r += blockDim.x) {
    const size_t row = ((size_t)bh * N + r0 + r) * N;
    float d = 0.f;
    for (int c = 0; c < N; c++) d = __fadd_rn(d, __fmul_rn(__ldcg(&P[row + c]), __ldcg(&dP[row + c])));
    for (int c = 0; c < N; c++) dS[row + c] = __fmul_rn(__ldcg(&P[row + c]), __fsub_rn(__ldcg(&dP[row + c]), d));
    FS_TRACED(if (full) fs_payload(cur)[fs_bwd_ds_delta(Br, Bc, D, N) + r] = d;)
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, Br, fs_bwd_ds_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_BWD_DS, bh, i, FS_NO_TILE, rowsValid, 0, 4ull * rowsValid * N * 4,
                      (unsigned long long)rowsValid * N * 4);
  })
}

//> dq: naive_bwd_dq, dQ_i = dS_i K · scale, dS read back one kv-tile at a time
extern "C" __global__ void __launch_bounds__(NAIVE_BWD_THREADS)
    naive_bwd_dq(const float *__restrict__ dS, const float *__restrict__ K, float *__restrict__ dQ, long long N_,
                 long long D_, long long Br_, long long Bc_, unsigned long long scaleBits FS_TRACE_PARAMS) {
  const int N = (int)N_, D = (int)D_, Br = (int)Br_, Bc = (int)Bc_;
  const float scale = __uint_as_float((unsigned)scaleBits);
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * Br;
  const int rowsValid = min(Br, N - r0);
  const int Tc = (N + Bc - 1) / Bc;
  extern __shared__ float smem[];
  float *sDS = smem;          // Br x Bc
  float *sK = sDS + Br * Bc;  // Bc x D
  // Thread tid owns elements tid, tid + threads, ... of dQ_i (Br x D); the
  // unrolled loops keep its sums in registers.
  float acc[NAIVE_BWD_MAXQ];
#pragma unroll
  for (int t = 0; t < NAIVE_BWD_MAXQ; t++) acc[t] = 0.f;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();)

  for (int j = 0; j < Tc; j++) {
    const int c0 = j * Bc, colsValid = min(Bc, N - c0);
    __syncthreads(); // the previous tile is done
    for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) {
      const int r = e / Bc, c = e % Bc;
      sDS[e] = r < rowsValid && c < colsValid ? __ldcg(&dS[((size_t)bh * N + r0 + r) * N + c0 + c]) : 0.f;
    }
    for (int e = threadIdx.x; e < Bc * D; e += blockDim.x)
      sK[e] = e / D < colsValid ? __ldcg(&K[((size_t)bh * N + c0) * D + e]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < NAIVE_BWD_MAXQ; t++) {
      const int e = threadIdx.x + t * blockDim.x;
      if (e < rowsValid * D) {
        const int r = e / D, x = e % D;
        for (int c = 0; c < colsValid; c++) acc[t] = __fadd_rn(acc[t], __fmul_rn(sDS[r * Bc + c], sK[c * D + x]));
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NAIVE_BWD_MAXQ; t++) {
    const int e = threadIdx.x + t * blockDim.x;
    if (e < Br * D) {
      const float v = e < rowsValid * D ? __fmul_rn(acc[t], scale) : 0.f;
      if (e < rowsValid * D) dQ[((size_t)bh * N + r0) * D + e] = v;
      FS_TRACED(if (full) fs_payload(cur)[fs_bwd_dq_dq(Br, Bc, D, N) + e] = v;)
    }
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, Br * D, fs_bwd_dq_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_BWD_DQ, bh, i, FS_NO_TILE, rowsValid, 0,
                      (unsigned long long)rowsValid * N * 4 + (unsigned long long)N * D * 4, (unsigned long long)rowsValid * D * 4);
  })
}

//> dkv: naive_bwd_dkv, P_ij and dS_ij read back: dV_j += P_ijᵀ dO_i, dK_j += dS_ijᵀ Q_i
extern "C" __global__ void __launch_bounds__(NAIVE_BWD_THREADS)
    naive_bwd_dkv(const float *__restrict__ P, const float *__restrict__ dS, const float *__restrict__ Q,
                  const float *__restrict__ dO, float *__restrict__ dK, float *__restrict__ dV, long long N_,
                  long long D_, long long Br_, long long Bc_, unsigned long long scaleBits FS_TRACE_PARAMS) {
  const int N = (int)N_, D = (int)D_, Br = (int)Br_, Bc = (int)Bc_;
  const float scale = __uint_as_float((unsigned)scaleBits);
  const int j = blockIdx.x, bh = blockIdx.y;
  const int c0 = j * Bc;
  const int colsValid = min(Bc, N - c0);
  const int Tr = (N + Br - 1) / Br;
  const size_t base = (size_t)bh * N * D;
  extern __shared__ float smem[];
  float *sP = smem;            // Br x Bc
  float *sDS = sP + Br * Bc;   // Br x Bc
  float *sQ = sDS + Br * Bc;   // Br x D
  float *sDO = sQ + Br * D;    // Br x D
  float *sDK = sDO + Br * D;   // Bc x D, the accumulators: each element one thread's
  float *sDV = sDK + Bc * D;   // Bc x D
  for (int e = threadIdx.x; e < Bc * D; e += blockDim.x) sDK[e] = sDV[e] = 0.f;

  for (int i = 0; i < Tr; i++) {
    const int r0 = i * Br, rowsValid = min(Br, N - r0);
    FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.x + j) * Tr + i);
              const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
              if (threadIdx.x == 0) cur.t_start = fs_globaltimer();)
    __syncthreads(); // the previous q-tile is done with the tiles
    for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) {
      const int r = e / Bc, c = e % Bc;
      const bool in = r < rowsValid && c < colsValid;
      const size_t at = ((size_t)bh * N + r0 + r) * N + c0 + c;
      sP[e] = in ? __ldcg(&P[at]) : 0.f;
      sDS[e] = in ? __ldcg(&dS[at]) : 0.f;
    }
    for (int e = threadIdx.x; e < Br * D; e += blockDim.x) {
      const bool in = e / D < rowsValid;
      sQ[e] = in ? __ldcg(&Q[base + (size_t)r0 * D + e]) : 0.f;
      sDO[e] = in ? __ldcg(&dO[base + (size_t)r0 * D + e]) : 0.f;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < colsValid * D; e += blockDim.x) {
      const int c = e / D, x = e % D;
      float v = sDV[e], k = sDK[e];
      for (int r = 0; r < rowsValid; r++) {
        v = __fadd_rn(v, __fmul_rn(sP[r * Bc + c], sDO[r * D + x]));
        k = __fadd_rn(k, __fmul_rn(sDS[r * Bc + c], sQ[r * D + x]));
      }
      sDV[e] = v;
      sDK[e] = k;
    }
    FS_TRACED(if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur);
        for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) {
          pl[fs_bwd_kv_p(Br, Bc, D, N) + e] = sP[e];
          pl[fs_bwd_kv_ds(Br, Bc, D, N) + e] = sDS[e];
        }
        for (int e = threadIdx.x; e < Bc * D; e += blockDim.x) {
          pl[fs_bwd_kv_dv(Br, Bc, D, N) + e] = sDV[e];
          pl[fs_bwd_kv_dk(Br, Bc, D, N) + e] = sDK[e];
        }
        if (threadIdx.x == 0) fs_zero_padding(cur, fs_bwd_kv_dk(Br, Bc, D, N) + Bc * D, fs_bwd_kv_record_bytes(Br, Bc, D, N));
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (threadIdx.x == 0)
        fs_write_header(cur, FS_KIND_BWD_KV, bh, i, j, rowsValid, colsValid,
                        2ull * rowsValid * colsValid * 4 + 2ull * rowsValid * D * 4,
                        i == Tr - 1 ? 2ull * colsValid * D * 4 : 0ull);
    })
  }
  __syncthreads();
  for (int e = threadIdx.x; e < colsValid * D; e += blockDim.x) {
    dK[base + (size_t)c0 * D + e] = __fmul_rn(sDK[e], scale);
    dV[base + (size_t)c0 * D + e] = sDV[e];
  }
}
//> end
