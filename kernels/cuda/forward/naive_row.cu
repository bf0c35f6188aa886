// One thread per query row, float32: the kernel whose CPU mirror is
// naive_row.go, the first rung of the ladder.
//
// It is the first attention kernel a student writes, straight from the
// formula: thread r of the block of q-tile i owns row r0+r, holds its q row
// and its output row in registers, and walks every key twice:
//
//   pass 1  s_c = q·k_c * scale for every key c     m = max_c s_c
//   pass 2  s_c again, p_c = exp(s_c - m)           l = sum p_c, O = sum p_c v_c
//
// then O/l and LSE = m + log l. Knowing the max before the sum starts, it
// never rescales anything; the price is that every row reads all of K twice
// and V once from device memory, and keeps no tile on chip to share: there is
// no shared memory. The block's threads happen to read the same key at the
// same moment, so a warp's load is one request and the other warps of the
// block find the line in L1. Under a causal mask each row stops at its own
// column. Rows past N (the last q-tile's padding) compute nothing: their
// trace rows read as if every key were masked (S = -inf, P = 0, m = -inf,
// l = 0, O = 0, LSE = -inf).
//
// Arithmetic order is the mirror's, operation for operation: every product
// and sum is rounded on its own (__fmul_rn, __fadd_rn: no contraction into
// fma), the dot product runs over d in order, l and O over the keys in order.
// Only expf and logf differ from the mirror's (within 2 ulp).
//
// The trace cuts both passes into kv-tiles of BC keys so the stepper can show
// them: pass 1 leaves a scores record per kv-tile (an S tile that no memory
// ever holds), pass 2 a flash step per kv-tile whose m never changes
// (alpha = 1), then the epilogue. The tile loop changes nothing of the
// arithmetic: within it the keys still go in order.
#include "../common/instrument.cuh"

template <int BR, int BC, int D>
__device__ __forceinline__ void naive_row_block(const float *__restrict__ Q, const float *__restrict__ K,
                                                const float *__restrict__ V, float *__restrict__ O,
                                                float *__restrict__ LSE, int N, float scale, int causal
                                                FS_TRACE_PARAMS) {
  const int r = threadIdx.x; // this thread's row of the q-tile
  const int i = blockIdx.x;
  const int bh = blockIdx.y;
  const int r0 = i * BR;
  const int row = r0 + r;
  const bool live = row < N; // a row of data, not padding
  const int rowsValid = min(BR, N - r0);
  const size_t base = (size_t)bh * N * D;
  const int Tc = (N + BC - 1) / BC;
  const int jEnd = causal ? min(Tc, (r0 + rowsValid - 1) / BC + 1) : Tc;

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * gridDim.x + i);
            const bool timing = fs_mode == FS_MODE_TIMING;
            const unsigned scoresBytes = timing ? FS_RECORD_HEADER_BYTES : fs_scores_record_bytes(BR, BC, D, N);
            const unsigned stepBytes = timing ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = timing ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;)

  //> load-q: the thread's q row from device memory into registers
  float q[D];
#pragma unroll
  for (int x = 0; x < D; x++) q[x] = live ? __ldg(&Q[base + (size_t)row * D + x]) : 0.f;
  //> end

  //> scores: pass 1, s = q·k · scale for every key, and the row max m
  float m = FS_NEG_INF;
  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (r == 0) cur.t_start = fs_globaltimer();)
    const int c0 = j * BC;
    const int colsValid = min(BC, N - c0);
    // The keys of this kv-tile the row sees: none for a padding row, and
    // under a causal mask those at or left of the row's own column.
    const int cEnd = !live ? 0 : causal ? min(colsValid, row - c0 + 1) : colsValid;
    for (int c = 0; c < cEnd; c++) {
      const float *k = &K[base + (size_t)(c0 + c) * D];
      float acc = 0.f;
#pragma unroll
      for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(q[x], __ldg(&k[x])));
      const float s = __fmul_rn(acc, scale);
      m = fmaxf(m, s);
      FS_TRACED(if (full) fs_payload(cur)[fs_scores_s(BR, BC, D, N) + r * BC + c] = s;)
    }
    FS_TRACED(if (cur.rec) {
      if (full)
        for (int c = max(cEnd, 0); c < BC; c++) fs_payload(cur)[fs_scores_s(BR, BC, D, N) + r * BC + c] = FS_NEG_INF;
      if (full && r == 0) fs_zero_padding(cur, fs_scores_s(BR, BC, D, N) + BR * BC, scoresBytes);
      __syncthreads(); // every row's scores of the tile are in: stamp its end
      if (r == 0) {
        unsigned long long rd = (unsigned long long)colsValid * D * 4;
        if (j == 0) rd += (unsigned long long)rowsValid * D * 4; // and Q_i, with the first tile
        fs_write_header(cur, FS_KIND_SCORES, bh, i, j, rowsValid, colsValid, rd, 0);
      }
      cur.rec += scoresBytes;
    })
  }

  //> pv: pass 2, p = exp(s − m), l = Σ p and O = Σ p·v over the keys again
  // A row with no key (padding) has m = -inf: exp(-inf - 0) = 0, never NaN.
  const float mBase = m == FS_NEG_INF ? 0.f : m;
  float l = 0.f;
  float o[D];
#pragma unroll
  for (int x = 0; x < D; x++) o[x] = 0.f;
  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (r == 0) cur.t_start = fs_globaltimer();)
    const int c0 = j * BC;
    const int colsValid = min(BC, N - c0);
    const int cEnd = !live ? 0 : causal ? min(colsValid, row - c0 + 1) : colsValid;
    for (int c = 0; c < cEnd; c++) {
      const float *k = &K[base + (size_t)(c0 + c) * D];
      const float *v = &V[base + (size_t)(c0 + c) * D];
      float acc = 0.f;
#pragma unroll
      for (int x = 0; x < D; x++) acc = __fadd_rn(acc, __fmul_rn(q[x], __ldg(&k[x])));
      const float s = __fmul_rn(acc, scale); // the same score as pass 1, bit for bit
      const float p = expf(__fsub_rn(s, mBase));
      l = __fadd_rn(l, p);
#pragma unroll
      for (int x = 0; x < D; x++) o[x] = __fadd_rn(o[x], __fmul_rn(p, __ldg(&v[x])));
      FS_TRACED(if (full) {
        fs_payload(cur)[fs_flash_step_s(BR, BC, D, N) + r * BC + c] = s;
        fs_payload(cur)[fs_flash_step_p(BR, BC, D, N) + r * BC + c] = p;
      })
    }
#ifdef FS_TRACE
    if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur);
        for (int c = max(cEnd, 0); c < BC; c++) {
          pl[fs_flash_step_s(BR, BC, D, N) + r * BC + c] = FS_NEG_INF;
          pl[fs_flash_step_p(BR, BC, D, N) + r * BC + c] = 0.f;
        }
        pl[fs_flash_step_m_old(BR, BC, D, N) + r] = m;
        pl[fs_flash_step_m_new(BR, BC, D, N) + r] = m;
        pl[fs_flash_step_alpha(BR, BC, D, N) + r] = 1.f;
        pl[fs_flash_step_l(BR, BC, D, N) + r] = l;
#pragma unroll
        for (int x = 0; x < D; x++) pl[fs_flash_step_o(BR, BC, D, N) + r * D + x] = o[x];
      }
      if (full && r == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
      __syncthreads(); // every row's step is done: stamp its end
      if (r == 0)
        fs_write_header(cur, FS_KIND_FLASH_STEP, bh, i, j, rowsValid, colsValid, 2ull * colsValid * D * 4, 0);
      cur.rec += stepBytes;
    }
#endif
  }

  //> epilogue: O / l and the LSE = m + log l to device memory
  FS_TRACED(if (r == 0) cur.t_start = fs_globaltimer();)
#pragma unroll
  for (int x = 0; x < D; x++) {
    const float out = l == 0.f ? 0.f : __fdiv_rn(o[x], l);
    if (live) O[base + (size_t)row * D + x] = out;
    FS_TRACED(if (full) fs_payload(cur)[fs_epilogue_o(BR, BC, D, N) + r * D + x] = out;)
  }
  const float lse = l == 0.f ? FS_NEG_INF : __fadd_rn(m, logf(l));
  if (live) LSE[(size_t)bh * N + row] = lse;
  FS_TRACED(if (cur.rec) {
    if (full) fs_payload(cur)[fs_epilogue_lse(BR, BC, D, N) + r] = lse;
    if (full && r == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
    __syncthreads();
    if (r == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 4 + (unsigned long long)rowsValid * 4);
  })
}
//> end

// Each compiled instantiation is an extern "C" kernel named after its tile
// sizes, so the worker finds it by name in the PTX. BR threads a block, one a
// row; BC only cuts the trace into steps. No dynamic shared memory.
#define NAIVE_ROW_INSTANCE(BR, BC, D)                                                                           \
  extern "C" __global__ void __launch_bounds__(BR) naive_row_br##BR##_bc##BC##_d##D(                            \
      const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V, float *__restrict__ O, \
      float *__restrict__ LSE, long long N, unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {     \
    naive_row_block<BR, BC, D>(Q, K, V, O, LSE, (int)N, __uint_as_float((unsigned)scaleBits), (int)causal       \
                                   FS_TRACED(, fs_trace, fs_offsets, fs_mode));                                 \
  }

// The compiled instantiations (BR, BC, D): flash2's tile sizes, so the two
// step over the same tiles.
NAIVE_ROW_INSTANCE(2, 2, 4)
NAIVE_ROW_INSTANCE(4, 4, 8)
NAIVE_ROW_INSTANCE(16, 16, 32)
NAIVE_ROW_INSTANCE(32, 32, 64)
NAIVE_ROW_INSTANCE(64, 64, 64)
NAIVE_ROW_INSTANCE(64, 64, 128)
NAIVE_ROW_INSTANCE(32, 64, 128)
