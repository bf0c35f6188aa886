// Naive attention, float32: the three kernels whose CPU mirror is naive.go.
// S and P are N x N buffers in device memory, per batch-head.
//
//   naive_scores   one block per tile (i, j): S = Q_i K_j^T * scale, written
//                  out (-inf above the diagonal when causal; nothing skipped)
//   naive_softmax  one block per q-tile, one warp per row: a pass for the row
//                  max, a pass for l = sum exp(S - m), a pass writing
//                  P = exp(S - m)/l and the row's LSE
//   naive_pv       one block per q-tile: O = P V, walking the kv-tiles in order
//                  (it reads the LSE back only to trace it in the epilogue)
//
// Arithmetic order is the mirror's: dot products over d in order; the row
// sum in lanes (lane k sums columns k, k+32, ... in order) then a butterfly
// over the 32 lanes; P V over all columns in order. Tile sizes Br, Bc and the
// head dimension d are runtime values: naive's work per element does not
// depend on them, only what a traced step covers. Global loads go through L2
// only (__ldcg), so the access model's bytes are the requests L2 sees: the
// softmax's three passes over a row are three passes through L2.
#include "../common/instrument.cuh"

#define NAIVE_THREADS 256
#define FULL_MASK 0xffffffffu

//> scores: naive_scores, S = Q_i K_jᵀ · scale to the N×N buffer in device memory
extern "C" __global__ void __launch_bounds__(NAIVE_THREADS)
    naive_scores(const float *__restrict__ Q, const float *__restrict__ K, float *__restrict__ S, long long N_,
                 long long D_, long long Br_, long long Bc_, unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {
  const int N = (int)N_, D = (int)D_, Br = (int)Br_, Bc = (int)Bc_;
  const float scale = __uint_as_float((unsigned)scaleBits);
  const int j = blockIdx.x, i = blockIdx.y, bh = blockIdx.z;
  const int r0 = i * Br, c0 = j * Bc;
  const int rowsValid = min(Br, N - r0), colsValid = min(Bc, N - c0);
  const int KS = D + 1;
  extern __shared__ float smem[];
  float *sQ = smem;          // Br x D
  float *sK = sQ + Br * D;   // Bc x (D+1)
  const float *q = Q + (size_t)bh * N * D;
  const float *k = K + (size_t)bh * N * D;
  float *s = S + (size_t)bh * N * N;

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.y + i) * gridDim.x + j);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) fs_payload(cur)[e] = 0.f;)

  for (int e = threadIdx.x; e < rowsValid * D; e += blockDim.x) sQ[e] = __ldcg(&q[(size_t)r0 * D + e]);
  for (int e = threadIdx.x; e < colsValid * D; e += blockDim.x) sK[(e / D) * KS + e % D] = __ldcg(&k[(size_t)c0 * D + e]);
  __syncthreads(); // also orders the trace's zero fill before the values
  for (int e = threadIdx.x; e < rowsValid * colsValid; e += blockDim.x) {
    const int r = e / colsValid, c = e % colsValid;
    float v;
    if (causal && c0 + c > r0 + r) {
      v = FS_NEG_INF;
    } else {
      float acc = 0.f;
      for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(sQ[r * D + x], sK[c * KS + x]));
      v = __fmul_rn(acc, scale);
    }
    s[(size_t)(r0 + r) * N + c0 + c] = v;
    FS_TRACED(if (full) fs_payload(cur)[fs_scores_s(Br, Bc, D, N) + r * Bc + c] = v;)
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, Br * Bc, fs_scores_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_SCORES, bh, i, j, rowsValid, colsValid,
                      (unsigned long long)(rowsValid + colsValid) * D * 4, (unsigned long long)rowsValid * colsValid * 4);
  })
}

__device__ __forceinline__ float warp_max(float v) {
  for (int k = 16; k >= 1; k >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, k));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int k = 16; k >= 1; k >>= 1) v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, k));
  return v;
}

//> softmax: naive_softmax, three passes over a row of S: m, l, then P to device memory
extern "C" __global__ void __launch_bounds__(NAIVE_THREADS)
    naive_softmax(const float *__restrict__ S, float *__restrict__ P, float *__restrict__ LSE, long long N_,
                  long long D_, long long Br_, long long Bc_ FS_TRACE_PARAMS) {
  const int N = (int)N_, Br = (int)Br_;
  (void)D_;
  (void)Bc_;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * Br;
  const int rowsValid = min(Br, N - r0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  FS_TRACED(const int D = (int)D_, Bc = (int)Bc_;
            fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < 2 * Br; e += blockDim.x) fs_payload(cur)[e] = 0.f;
            __syncthreads();)

  for (int r = warp; r < rowsValid; r += warps) {
    const float *srow = S + ((size_t)bh * N + r0 + r) * N;
    float *prow = P + ((size_t)bh * N + r0 + r) * N;
    float m = FS_NEG_INF;
    for (int c = lane; c < N; c += 32) m = fmaxf(m, __ldcg(&srow[c]));
    m = warp_max(m);
    const float mBase = m == FS_NEG_INF ? 0.f : m;
    float l = 0.f;
    for (int c = lane; c < N; c += 32) l = __fadd_rn(l, expf(__fsub_rn(__ldcg(&srow[c]), mBase)));
    l = warp_sum(l);
    for (int c = lane; c < N; c += 32) prow[c] = l > 0.f ? __fdiv_rn(expf(__fsub_rn(__ldcg(&srow[c]), mBase)), l) : 0.f;
    if (lane == 0) {
      LSE[(size_t)bh * N + r0 + r] = l == 0.f ? FS_NEG_INF : __fadd_rn(m, logf(l));
      FS_TRACED(if (full) {
        fs_payload(cur)[fs_softmax_m(Br, Bc, D, N) + r] = m;
        fs_payload(cur)[fs_softmax_l(Br, Bc, D, N) + r] = l;
      })
    }
  }
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, 2 * Br, fs_softmax_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_SOFTMAX, bh, i, FS_NO_TILE, rowsValid, 0, 3ull * rowsValid * N * 4,
                      (unsigned long long)rowsValid * N * 4 + (unsigned long long)rowsValid * 4);
  })
}

// naive_pv: each thread owns output elements e = tid, tid + blockDim, ... of
// the q-tile and accumulates them over every column in order, one kv-tile at
// a time through shared memory. The accumulators are indexed only by
// unrolled loops with compile-time bounds, so they stay in registers: a
// run-time index would put them in local memory, whose traffic spills
// through L2 to DRAM (measured: 1.8 GB of writes at N=4096, docs/TRAFFIC.md).
//> pv: naive_pv, O += P_ij · V_j, P read back from device memory
extern "C" __global__ void __launch_bounds__(NAIVE_THREADS)
    naive_pv(const float *__restrict__ P, const float *__restrict__ V, const float *__restrict__ LSE,
             float *__restrict__ O, long long N_,
             long long D_, long long Br_, long long Bc_ FS_TRACE_PARAMS) {
  const int N = (int)N_, D = (int)D_, Br = (int)Br_, Bc = (int)Bc_;
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * Br;
  const int rowsValid = min(Br, N - r0);
  const int Tc = (N + Bc - 1) / Bc;
  extern __shared__ float smem[];
  float *sP = smem;        // Br x Bc
  float *sV = sP + Br * Bc; // Bc x D
  constexpr int MAXO = 32; // output elements per thread: Br*D <= 32*NAIVE_THREADS
  float o[MAXO];
  // Which outputs this thread owns. When d divides the block, thread tid
  // takes column x0 = tid % d of rows rb, rb + rstep, ... (rstep = threads/d);
  // otherwise elements tid, tid + threads, ... of the tile, row-major.
  const bool colMajor = blockDim.x % D == 0;
  const int x0 = threadIdx.x % D, rb = threadIdx.x / D, rstep = blockDim.x / D;
  const int nOwn = colMajor ? (rb < rowsValid ? (rowsValid - rb + rstep - 1) / rstep : 0)
                            : (rowsValid * D + blockDim.x - 1 - threadIdx.x) / blockDim.x;
  // own is the tile element (row-major, Br×D) of accumulator t.
#define own(t) (colMajor ? (rb + (t) * rstep) * D + x0 : threadIdx.x + (t) * blockDim.x)
#pragma unroll
  for (int t = 0; t < MAXO; t++) o[t] = 0.f;
  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const unsigned pvBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_pv_record_bytes(Br, Bc, D, N);)

  for (int j = 0; j < Tc; j++) {
    FS_TRACED(if (threadIdx.x == 0) cur.t_start = fs_globaltimer();)
    const int c0 = j * Bc, colsValid = min(Bc, N - c0);
    __syncthreads();
    for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) {
      const int r = e / Bc, c = e % Bc;
      sP[e] = r < rowsValid && c < colsValid ? __ldcg(&P[((size_t)bh * N + r0 + r) * N + c0 + c]) : 0.f;
    }
    for (int e = threadIdx.x; e < Bc * D; e += blockDim.x)
      sV[e] = e / D < colsValid ? __ldcg(&V[((size_t)bh * N + c0) * D + e]) : 0.f;
    __syncthreads();
    if (colMajor) {
      // Column x of O, rows rb, rb + rstep, ...: the columns c outside, so
      // the thread's sums interleave, each still in order of c. P comes four
      // columns at a time (one 16-byte load), V one value per column.
      int c = 0;
      if (Bc % 4 == 0) {
        for (; c + 4 <= colsValid; c += 4) {
          const float v0 = sV[c * D + x0], v1 = sV[(c + 1) * D + x0], v2 = sV[(c + 2) * D + x0], v3 = sV[(c + 3) * D + x0];
#pragma unroll
          for (int t = 0; t < MAXO; t++) {
            if (t < nOwn) {
              const float4 p = *reinterpret_cast<const float4 *>(&sP[(rb + t * rstep) * Bc + c]);
              float a = __fadd_rn(o[t], __fmul_rn(p.x, v0));
              a = __fadd_rn(a, __fmul_rn(p.y, v1));
              a = __fadd_rn(a, __fmul_rn(p.z, v2));
              o[t] = __fadd_rn(a, __fmul_rn(p.w, v3));
            }
          }
        }
      }
      for (; c < colsValid; c++) {
        const float v = sV[c * D + x0];
#pragma unroll
        for (int t = 0; t < MAXO; t++)
          if (t < nOwn) o[t] = __fadd_rn(o[t], __fmul_rn(sP[(rb + t * rstep) * Bc + c], v));
      }
    } else {
#pragma unroll
      for (int t = 0; t < MAXO; t++) {
        if (t >= nOwn) break;
        const int e = threadIdx.x + t * blockDim.x;
        const int r = e / D, x = e % D;
        float acc = o[t];
        for (int c = 0; c < colsValid; c++) acc = __fadd_rn(acc, __fmul_rn(sP[r * Bc + c], sV[c * D + x]));
        o[t] = acc;
      }
    }
    FS_TRACED(if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur);
        for (int e = threadIdx.x; e < Br * Bc; e += blockDim.x) pl[fs_pv_p(Br, Bc, D, N) + e] = sP[e];
        for (int e = threadIdx.x; e < Br * D; e += blockDim.x) pl[fs_pv_o(Br, Bc, D, N) + e] = 0.f;
        __syncthreads();
        for (int t = 0; t < MAXO; t++) // compile-time bounds: unrolled, o stays in registers
          if (t < nOwn) pl[fs_pv_o(Br, Bc, D, N) + own(t)] = o[t];
        if (threadIdx.x == 0) fs_zero_padding(cur, Br * Bc + Br * D, pvBytes);
      }
      __syncthreads();
      if (threadIdx.x == 0)
        fs_write_header(cur, FS_KIND_PV, bh, i, j, rowsValid, colsValid,
                        (unsigned long long)rowsValid * colsValid * 4 + (unsigned long long)colsValid * D * 4, 0);
      cur.rec += pvBytes;
    })
  }

  //> epilogue: the finished rows of O to device memory
  FS_TRACED(if (threadIdx.x == 0) cur.t_start = fs_globaltimer();
            if (full) for (int e = threadIdx.x; e < Br * D + Br; e += blockDim.x) fs_payload(cur)[e] = 0.f;
            __syncthreads();)
#pragma unroll
  for (int t = 0; t < MAXO; t++) {
    if (t >= nOwn) break;
    const int e = own(t);
    O[((size_t)bh * N + r0) * D + e] = o[t];
    FS_TRACED(if (full) fs_payload(cur)[fs_epilogue_o(Br, Bc, D, N) + e] = o[t];)
  }
#undef own
  FS_TRACED(if (full) for (int r = threadIdx.x; r < rowsValid; r += blockDim.x)
                fs_payload(cur)[fs_epilogue_lse(Br, Bc, D, N) + r] = LSE[(size_t)bh * N + r0 + r];)
  FS_TRACED(if (cur.rec) {
    if (full && threadIdx.x == 0) fs_zero_padding(cur, Br * D + Br, fs_epilogue_record_bytes(Br, Bc, D, N));
    __syncthreads();
    if (threadIdx.x == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0, (unsigned long long)rowsValid * D * 4);
  })
}
