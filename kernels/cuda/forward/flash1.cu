// FlashAttention-1's loop order, float32: the kernel whose CPU mirror is
// flash1.go, the ladder's third rung.
//
// FlashAttention-1 put the kv-tiles in the outer loop: one block per
// batch-head loads K_j and V_j into shared memory once, then walks every
// q-tile i that sees them (inner loop). Each step is the online softmax of
// flash2.cu, but the running state of q-tile i cannot stay in registers
// while the block moves on to q-tile i+1, so it lives in device memory: the
// step reads O_i, m_i and l_i, updates them and writes them back:
//
//   S     = Q_i K_j^T * scale            (-inf where masked or padding)
//   m_new = max(m_old, rowmax(S))
//   alpha = exp(m_old - m_new)
//   P     = exp(S - m_new)
//   l_new = alpha*l_old + rowsum(P)
//   O     = (alpha*l_old*O_old + P V_j) / l_new   normalised at every step
//
// and a q-tile's last kv-tile writes its LSE = m + log l. Under a causal mask
// kv-tile j visits only the q-tiles from the one holding row j*BC on.
//
// What the order costs. The O buffer is the accumulator: a q-tile's O goes
// to device memory and comes back once per kv-tile it sees, without a mask
// Tc writes and Tc - 1 reads of all N*d floats of O where flash2 writes them
// once, and m and l with them. And the grid is only B*H blocks: the order
// saves its loads by giving K_j and V_j to every q-tile of a batch-head from
// one block's shared memory, so a batch-head is one block, its q-tiles one
// after another (FlashAttention-1 parallelised over batch and heads alone).
// A small batch with few heads leaves most SMs idle; flash2 swaps the loops
// and gives each q-tile a block of its own.
//
// The arithmetic is the mirror's, operation for operation, flash2.cu's up to
// O: every product and sum rounded on its own (__fmul_rn, __fadd_rn, and
// __fdiv_rn for the division by l at every step), dot products over d in
// order, row sums and P V over the tile's columns in order, after the old
// sum's rescale. Only expf and logf differ from the mirror's (within 2 ulp).
// Global loads go through L2 only (__ldcg), as flash2's: Q, K and V, and the
// reloads of O, m and l, each by the thread that stored it.
#include "../common/instrument.cuh"

#ifdef FS_TRACE
// flash1_cursor points at record k of the offset table. flash1's records do
// not follow each other block by block (a kv-tile's steps of every
// batch-head come before the next kv-tile's), so each record has its own
// offset: step (i, j) of batch-head bh at k = (bh*Tr + i)*(Tc + 1) + j,
// q-tile i's epilogue at j = Tc. All ones: not traced.
__device__ __forceinline__ fs_cursor flash1_cursor(unsigned char *trace, const unsigned long long *offsets,
                                                   long long mode, size_t k) {
  fs_cursor c;
  const unsigned long long off = offsets[k];
  c.rec = off == ~0ull ? nullptr : trace + off;
  c.mode = mode;
  c.t_start = 0;
  return c;
}
#endif

template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void flash1_block(const float *__restrict__ Q, const float *__restrict__ K,
                                             const float *__restrict__ V, float *O, float *__restrict__ LSE,
                                             float *ML, int N, float scale, int causal FS_TRACE_PARAMS) {
  static_assert(BR <= NT, "one thread per row of the q-tile");
  static_assert((BR * D) % NT == 0, "O divides evenly over the threads");
  constexpr int OPT = BR * D / NT;             // O elements per thread
  constexpr int SPT = (BR * BC + NT - 1) / NT; // S elements per thread
  constexpr int KS = D + 1;                    // padded row stride of K: no bank conflicts in S
  constexpr int SS = BC + 1;                   // padded row stride of S and P

  extern __shared__ float smem[];
  float *sQ = smem;              // BR x D
  float *sK = sQ + BR * D;       // BC x KS
  float *sV = sK + BC * KS;      // BC x D
  float *sS = sV + BC * D;       // BR x SS: S, then P
  float *sLOld = sS + BR * SS;   // per row: alpha*l_old, the old sum's weight
  float *sLNew = sLOld + BR;     // per row: l_new

  const int tid = threadIdx.x;
  const int bh = blockIdx.x;
  const size_t base = (size_t)bh * N * D;
  float *mState = ML + (size_t)bh * 2 * N; // m of row r at mState[r]
  float *lState = mState + N;              // l of row r at lState[r]
  const int Tr = (N + BR - 1) / BR;
  const int Tc = (N + BC - 1) / BC;

  FS_TRACED(unsigned long long tKV = 0;)

  for (int j = 0; j < Tc; j++) {
    FS_TRACED(if (tid == 0) tKV = fs_globaltimer();)
    //> load-kv: K_j and V_j into shared memory, once for every q-tile that sees them
    const int c0 = j * BC;
    const int colsValid = min(BC, N - c0);
    __syncthreads(); // the previous kv-tile's last step is done with sK, sV
    for (int e = tid; e < BC * D; e += NT) {
      int c = e / D, x = e % D;
      bool in = c < colsValid;
      sK[c * KS + x] = in ? __ldcg(&K[base + (size_t)(c0 + c) * D + x]) : 0.f;
      sV[e] = in ? __ldcg(&V[base + (size_t)(c0 + c) * D + x]) : 0.f;
    }
    //> end

    // Under a causal mask the q-tiles above the one holding row c0 see none
    // of this kv-tile.
    const int iFirst = causal ? c0 / BR : 0;
    for (int i = iFirst; i < Tr; i++) {
      const int r0 = i * BR;
      const int rowsValid = min(BR, N - r0);
      const int jEnd = causal ? min(Tc, (r0 + rowsValid - 1) / BC + 1) : Tc; // q-tile i's kv-tiles
      FS_TRACED(fs_cursor cur = flash1_cursor(fs_trace, fs_offsets, fs_mode, ((size_t)bh * Tr + i) * (Tc + 1) + j);
                if (tid == 0) cur.t_start = i == iFirst ? tKV : fs_globaltimer(); // the first step loaded K_j, V_j
                const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;)

      //> load-q: Q_i, and O_i, m_i, l_i from device memory (from scratch at kv-tile 0)
      // Q_i, with padding rows zero-filled. Nothing wrote sQ since the
      // previous step's scores, which a barrier closed.
      for (int e = tid; e < BR * D; e += NT) {
        int r = e / D;
        sQ[e] = r < rowsValid ? __ldcg(&Q[base + (size_t)(r0 + r) * D + e % D]) : 0.f;
      }
      // O_i, m_i and l_i as the previous kv-tile left them; this thread
      // stored these very elements then. Padding rows have no place in
      // device memory: they start afresh at every step, as all rows at j = 0.
      float o[OPT];
#pragma unroll
      for (int t = 0; t < OPT; t++) {
        const int e = tid + t * NT;
        const int r = e / D;
        o[t] = j > 0 && r < rowsValid ? __ldcg(&O[base + (size_t)(r0 + r) * D + e % D]) : 0.f;
      }
      float m = FS_NEG_INF, l = 0.f; // row tid's state, for tid < BR
      if (j > 0 && tid < rowsValid) {
        m = __ldcg(&mState[r0 + tid]);
        l = __ldcg(&lState[r0 + tid]);
      }
      __syncthreads(); // sQ, sK, sV are loaded; the previous step is done with sS
      //> scores: S = Q_i K_jᵀ · scale, masked
      // S = Q K^T * scale. Each thread owns SPT elements and walks d once
      // for all of them: independent sums interleave, each in order of d.
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

      //> softmax: row max, α = exp(m_old − m_new), P = exp(S − m_new), l_new = α·l_old + Σ P
      // Online softmax, one thread per row, against the state just loaded.
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
        const float lOld = __fmul_rn(alpha, l); // the old rows' weight against the new max
        l = __fadd_rn(lOld, rowSum);
        m = mNew;
        sLOld[r] = lOld;
        sLNew[r] = l;
        FS_TRACED(if (full) fs_payload(cur)[fs_flash_step_l(BR, BC, D, N) + r] = l;)
      }
      __syncthreads();

      //> pv: O = (α·l_old·O_old + P·V_j) / l_new; O_i, m_i, l_i back to device memory
      // O_old is normalised, so alpha*l_old*O_old is its sum against the new
      // max; the tile's P V_j is added to it over the columns in order, and
      // the whole divided by l_new. The column loop is outside, so the
      // thread's OPT sums interleave.
#pragma unroll
      for (int t = 0; t < OPT; t++) o[t] = __fmul_rn(sLOld[(tid + t * NT) / D], o[t]);
#pragma unroll 2
      for (int c = 0; c < BC; c++) {
#pragma unroll
        for (int t = 0; t < OPT; t++) {
          const int e = tid + t * NT;
          o[t] = __fadd_rn(o[t], __fmul_rn(sS[(e / D) * SS + c], sV[c * D + e % D]));
        }
      }
#pragma unroll
      for (int t = 0; t < OPT; t++) {
        const int e = tid + t * NT;
        const int r = e / D;
        const float lr = sLNew[r];
        o[t] = lr == 0.f ? 0.f : __fdiv_rn(o[t], lr);
        if (r < rowsValid) O[base + (size_t)(r0 + r) * D + e % D] = o[t];
      }
      if (tid < rowsValid) {
        mState[r0 + tid] = m;
        lState[r0 + tid] = l;
      }
      FS_TRACED(if (full) for (int t = 0; t < OPT; t++) fs_payload(cur)[fs_flash_step_o(BR, BC, D, N) + tid + t * NT] = o[t];)
      //> end

      FS_TRACED(if (cur.rec) {
        if (full)
          for (int e = tid; e < BR * BC; e += NT)
            fs_payload(cur)[fs_flash_step_p(BR, BC, D, N) + e] = sS[(e / BC) * SS + e % BC];
        if (full && tid == 0)
          fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, fs_flash_step_record_bytes(BR, BC, D, N));
        __syncthreads(); // the step's work is done: stamp its end
        if (tid == 0) {
          const unsigned long long rows = rowsValid, cols = colsValid;
          unsigned long long rd = rows * D * 4;                        // Q_i
          if (j > 0) rd += rows * D * 4 + 2 * rows * 4;                // O_i, m_i, l_i
          if (i == iFirst) rd += 2 * cols * D * 4;                     // K_j, V_j, counted once
          const unsigned long long wr = rows * D * 4 + 2 * rows * 4;   // O_i, m_i, l_i
          fs_write_header(cur, FS_KIND_FLASH_STEP, bh, i, j, rowsValid, colsValid, rd, wr);
        }
      })

      //> epilogue: q-tile i has seen its last kv-tile: O is final, LSE = m + log l
      if (j == jEnd - 1) {
        FS_TRACED(cur = flash1_cursor(fs_trace, fs_offsets, fs_mode, ((size_t)bh * Tr + i) * (Tc + 1) + Tc);
                  if (tid == 0) cur.t_start = fs_globaltimer();
                  const bool fullEpi = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
                  if (fullEpi) for (int t = 0; t < OPT; t++) fs_payload(cur)[fs_epilogue_o(BR, BC, D, N) + tid + t * NT] = o[t];)
        if (tid < BR) {
          const float lse = l == 0.f ? FS_NEG_INF : __fadd_rn(m, logf(l));
          if (tid < rowsValid) LSE[(size_t)bh * N + r0 + tid] = lse;
          FS_TRACED(if (fullEpi) fs_payload(cur)[fs_epilogue_lse(BR, BC, D, N) + tid] = lse;)
        }
        FS_TRACED(if (cur.rec) {
          if (fullEpi && tid == 0)
            fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, fs_epilogue_record_bytes(BR, BC, D, N));
          __syncthreads();
          if (tid == 0)
            fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0,
                            (unsigned long long)rowsValid * 4);
        })
      }
      //> end
    }
  }
}

// Shared memory of one block, in bytes: Q_i, K_j (rows padded by one), V_j,
// the S/P tile (rows padded by one), and two per-row arrays (alpha*l_old and
// l_new). The worker mirrors it (Flash1SharedBytes in package launch).
#define FLASH1_SMEM(BR, BC, D) (4 * ((BR) * (D) + (BC) * ((D) + 1) + (BC) * (D) + (BR) * ((BC) + 1) + 2 * (BR)))

// Each compiled instantiation is an extern "C" kernel named after its tile
// sizes, so the worker finds it by name in the PTX. Grid (B*H, 1, 1). O and
// ML are read back after being written, so they are not __restrict__.
#define FLASH1_INSTANCE(BR, BC, D, NT)                                                                        \
  extern "C" __global__ void __launch_bounds__(NT) flash1_br##BR##_bc##BC##_d##D(                                \
      const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V, float *O,           \
      float *__restrict__ LSE, float *ML, long long N, unsigned long long scaleBits,                             \
      long long causal FS_TRACE_PARAMS) {                                                                       \
    flash1_block<BR, BC, D, NT>(Q, K, V, O, LSE, ML, (int)N, __uint_as_float((unsigned)scaleBits), (int)causal \
                                    FS_TRACED(, fs_trace, fs_offsets, fs_mode));                                \
  }

// The compiled instantiations: flash2's tiles, so that the float32 rungs
// step over the same tiles (keep in step with flash2.cu's list).
FLASH1_INSTANCE(2, 2, 4, 8)
FLASH1_INSTANCE(4, 4, 8, 32)
FLASH1_INSTANCE(16, 16, 32, 64)
FLASH1_INSTANCE(32, 32, 64, 128)
FLASH1_INSTANCE(64, 64, 64, 256)
FLASH1_INSTANCE(64, 64, 128, 256)
FLASH1_INSTANCE(32, 64, 128, 256)
