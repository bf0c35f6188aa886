// FlashAttention-2 forward, float32: the kernel whose CPU mirror is flash2.go.
//
// One block per (batch-head, q-tile i): it loads Q_i once, then walks the
// kv-tiles j in order with K_j and V_j in shared memory, keeping the running
// row max m and sum l (one thread per row) and the output accumulator O (each
// thread a fixed set of elements) in registers:
//
//   S     = Q_i K_j^T * scale            (-inf where masked or padding)
//   m_new = max(m_old, rowmax(S))
//   alpha = exp(m_old - m_new)
//   P     = exp(S - m_new)
//   l     = alpha*l + rowsum(P)
//   O     = alpha*O, then O += P V_j   (the rescaled accumulator takes the tile)
//
// and divides once at the end: O/l, LSE = m + log l. Under a causal mask the
// kv-tiles wholly above the diagonal are never visited.
//
// Arithmetic order is the mirror's, operation for operation: every product
// and sum is rounded on its own (__fmul_rn, __fadd_rn: no contraction into
// fma), dot products run over d in order, row sums and P V over the tile's
// columns in order. Only expf and logf differ from the mirror's (within 2 ulp).
// Each thread works on several elements at once, interleaving their
// independent sums: with one or two blocks per SM, that is what hides latency.
// Global loads go through L2 only (__ldcg): each is used once per block, and
// so every byte the access model counts is a request L2 sees.
#include "../common/instrument.cuh"

template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void flash2_block(const float *__restrict__ Q, const float *__restrict__ K,
                                             const float *__restrict__ V, float *__restrict__ O,
                                             float *__restrict__ LSE, int N, float scale, int causal
                                             FS_TRACE_PARAMS) {
  static_assert(BR <= NT, "one thread per row of the q-tile");
  static_assert((BR * D) % NT == 0, "O divides evenly over the threads");
  constexpr int OPT = BR * D / NT;            // O elements per thread
  constexpr int SPT = (BR * BC + NT - 1) / NT; // S elements per thread
  constexpr int KS = D + 1;        // padded row stride of K: no bank conflicts in S

  extern __shared__ float smem[];
  float *sQ = smem;              // BR x D
  float *sK = sQ + BR * D;       // BC x KS
  float *sV = sK + BC * KS;      // BC x D
  float *sS = sV + BC * D;       // BR x (BC+1): S, then P
  float *sAlpha = sS + BR * (BC + 1);
  float *sL = sAlpha + BR;
  float *sM = sL + BR;
  constexpr int SS = BC + 1;

  const int tid = threadIdx.x;
  const int i = blockIdx.x;
  const int bh = blockIdx.y;
  const int r0 = i * BR;
  const int rowsValid = min(BR, N - r0);
  const size_t base = (size_t)bh * N * D;
  const int Tc = (N + BC - 1) / BC;
  const int jEnd = causal ? min(Tc, (r0 + rowsValid - 1) / BC + 1) : Tc;

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;)

  //> load-q: Q_i from device memory, once per block; m, l and O start empty
  // Q_i, with padding rows zero-filled.
  for (int e = tid; e < BR * D; e += NT) {
    int r = e / D;
    sQ[e] = r < rowsValid ? __ldcg(&Q[base + (size_t)(r0 + r) * D + e % D]) : 0.f;
  }

  float m = FS_NEG_INF, l = 0.f; // row tid's state, for tid < BR
  float o[OPT];
#pragma unroll
  for (int t = 0; t < OPT; t++) o[t] = 0.f;

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    //> load-kv: K_j and V_j from device memory into shared memory
    const int c0 = j * BC;
    const int colsValid = min(BC, N - c0);
    __syncthreads(); // the previous tile is done with sK, sV, sS
    for (int e = tid; e < BC * D; e += NT) {
      int c = e / D, x = e % D;
      bool in = c < colsValid;
      sK[c * KS + x] = in ? __ldcg(&K[base + (size_t)(c0 + c) * D + x]) : 0.f;
      sV[e] = in ? __ldcg(&V[base + (size_t)(c0 + c) * D + x]) : 0.f;
    }
    __syncthreads();

    //> scores: S = Q_i K_jᵀ · scale, masked
    // S = Q K^T * scale. Each thread owns SPT elements and walks d once for
    // all of them: independent sums interleave, each still in order of d.
    {
      float acc[SPT];
#pragma unroll
      for (int k = 0; k < SPT; k++) acc[k] = 0.f;
#pragma unroll 4
      for (int x = 0; x < D; x++) {
#pragma unroll
        for (int k = 0; k < SPT; k++) {
          const int e = tid + k * NT;
          if (e < BR * BC) acc[k] = __fadd_rn(acc[k], __fmul_rn(sQ[(e / BC) * D + x], sK[(e % BC) * KS + x]));
        }
      }
#pragma unroll
      for (int k = 0; k < SPT; k++) {
        const int e = tid + k * NT;
        if (e >= BR * BC) continue;
        const int r = e / BC, c = e % BC;
        const float s = (c >= colsValid || (causal && c0 + c > r0 + r)) ? FS_NEG_INF : __fmul_rn(acc[k], scale);
        sS[r * SS + c] = s;
        FS_TRACED(if (full) fs_payload(cur)[fs_flash_step_s(BR, BC, D, N) + e] = s;)
      }
    }
    __syncthreads();

    //> softmax: row max, α = exp(m_old − m_new), P = exp(S − m_new), l = α·l + Σ P
    // Online softmax, one thread per row.
    if (tid < BR) {
      const int r = tid;
      float rowMax = FS_NEG_INF;
      for (int c = 0; c < BC; c++) rowMax = fmaxf(rowMax, sS[r * SS + c]);
      const float mNew = fmaxf(m, rowMax);
      const float mBase = mNew == FS_NEG_INF ? 0.f : mNew; // a fully masked row: exp(-inf - 0) = 0, never NaN
      const float alpha = expf(__fsub_rn(m, mBase));
      float rowSum = 0.f;
      for (int c = 0; c < BC; c++) {
        float p = expf(__fsub_rn(sS[r * SS + c], mBase));
        sS[r * SS + c] = p;
        rowSum = __fadd_rn(rowSum, p);
      }
      FS_TRACED(if (full) {
        float *pl = fs_payload(cur);
        pl[fs_flash_step_m_old(BR, BC, D, N) + r] = m;
        pl[fs_flash_step_m_new(BR, BC, D, N) + r] = mNew;
        pl[fs_flash_step_alpha(BR, BC, D, N) + r] = alpha;
      })
      l = __fadd_rn(__fmul_rn(alpha, l), rowSum);
      m = mNew;
      sAlpha[r] = alpha;
      FS_TRACED(if (full) fs_payload(cur)[fs_flash_step_l(BR, BC, D, N) + r] = l;)
    }
    __syncthreads();

    //> pv: O = α·O, then O += P·V_j
    // O = alpha*O, then O += P V_j over the tile's columns in order: the
    // accumulator is rescaled, then the tile is added into it. The column
    // loop is outside, so the thread's OPT sums interleave.
#pragma unroll
    for (int t = 0; t < OPT; t++) o[t] = __fmul_rn(sAlpha[(tid + t * NT) / D], o[t]);
#pragma unroll 2
    for (int c = 0; c < BC; c++) {
#pragma unroll
      for (int t = 0; t < OPT; t++) {
        const int e = tid + t * NT;
        o[t] = __fadd_rn(o[t], __fmul_rn(sS[(e / D) * SS + c], sV[c * D + e % D]));
      }
    }
    FS_TRACED(if (full) for (int t = 0; t < OPT; t++) fs_payload(cur)[fs_flash_step_o(BR, BC, D, N) + tid + t * NT] = o[t];)

    //> end
    FS_TRACED(if (cur.rec) {
      if (full)
        for (int e = tid; e < BR * BC; e += NT)
          fs_payload(cur)[fs_flash_step_p(BR, BC, D, N) + e] = sS[(e / BC) * SS + e % BC];
      if (full && tid == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        unsigned long long rd = 2ull * colsValid * D * 4 + (j == 0 ? (unsigned long long)rowsValid * D * 4 : 0);
        fs_write_header(cur, FS_KIND_FLASH_STEP, bh, i, j, rowsValid, colsValid, rd, 0);
      }
      cur.rec += stepBytes;
    })
  }

  //> epilogue: O / l and the LSE = m + log l to device memory
  // Epilogue: one division, then O and the LSE to device memory.
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
  if (tid < BR) {
    sL[tid] = l;
    sM[tid] = m;
  }
  __syncthreads();
#pragma unroll
  for (int t = 0; t < OPT; t++) {
    const int e = tid + t * NT;
    const int r = e / D, x = e % D;
    const float lr = sL[r];
    const float out = lr == 0.f ? 0.f : __fdiv_rn(o[t], lr);
    if (r < rowsValid) O[base + (size_t)(r0 + r) * D + x] = out;
    FS_TRACED(if (full) fs_payload(cur)[fs_epilogue_o(BR, BC, D, N) + e] = out;)
  }
  if (tid < BR) {
    const float lse = l == 0.f ? FS_NEG_INF : __fadd_rn(m, logf(l));
    if (tid < rowsValid) LSE[(size_t)bh * N + r0 + tid] = lse;
    FS_TRACED(if (full) fs_payload(cur)[fs_epilogue_lse(BR, BC, D, N) + tid] = lse;)
  }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 4 + (unsigned long long)rowsValid * 4);
  })
}
//> end

// Shared memory of one block, in bytes; the worker reads it back from the
// kernel's name through flash2_smem_bytes in the registry (kernels/registry.go).
#define FLASH2_SMEM(BR, BC, D) (4 * ((BR) * (D) + (BC) * ((D) + 1) + (BC) * (D) + (BR) * ((BC) + 1) + 3 * (BR)))

// Each compiled instantiation is an extern "C" kernel named after its tile
// sizes, so the worker finds it by name in the PTX.
#define FLASH2_INSTANCE(BR, BC, D, NT)                                                                        \
  extern "C" __global__ void __launch_bounds__(NT) flash2_br##BR##_bc##BC##_d##D(                                \
      const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V, float *__restrict__ O, \
      float *__restrict__ LSE, long long N, unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {     \
    flash2_block<BR, BC, D, NT>(Q, K, V, O, LSE, (int)N, __uint_as_float((unsigned)scaleBits), (int)causal        \
                                    FS_TRACED(, fs_trace, fs_offsets, fs_mode));                                \
  }

// The compiled instantiations: keep in step with flash2Instances in
// kernels/registry.go (a test checks the two agree).
FLASH2_INSTANCE(2, 2, 4, 8)
FLASH2_INSTANCE(4, 4, 8, 32)
FLASH2_INSTANCE(16, 16, 32, 64)
FLASH2_INSTANCE(32, 32, 64, 128)
FLASH2_INSTANCE(64, 64, 64, 256)
FLASH2_INSTANCE(64, 64, 128, 256)
FLASH2_INSTANCE(32, 64, 128, 256)
