// FlashAttention-2 forward on tensor cores, bf16 in and out, float32
// accumulation: the ladder's fast rung, whose CPU mirror is flash2_fast.go.
//
// One block of NW warps per (batch-head, q-tile of BR rows); each warp owns
// BR/NW rows, MI = BR/(16·NW) row atoms of mma.sync.m16n8k16. A thread holds
// rows g and g+8 of each of its row atoms (g = lane/4) and, of each 8-column
// atom, columns 2t and 2t+1 (t = lane%4). Per kv-tile j of BC columns:
//
//   S     = Q_i K_jᵀ, raw (unscaled), float32: d/16 MMAs, each adding a
//           16-term dot product of bf16 values to the float32 accumulator
//   masks -inf where col ≥ N, or causal and col > row
//   m_new = max(m_old, max_c S)                      raw units, exact
//   mb    = m_new·sl2 (0 while m_new = -inf), sl2 = scale·log2 e in float32
//   α     = 2^(fma(m_old, sl2, -mb))                 ex2.approx
//   p     = 2^(fma(S, sl2, -mb))                     ex2.approx, float32
//   l_t   = fma(l_t, α, Σ (p0 + p1))                 this thread's columns, in
//           atom order; the quad's four partial sums add up, (l0+l1)+(l2+l3),
//           only where a full l is needed (the trace and the epilogue)
//   O     = O·α, then O += bf16(p)·V_j: BC/16 MMAs in order of the kv columns
//
// and once at the end O·(1/l) (rounded to bf16 for the output) and
// LSE = fma(m, scale, log l). The trace is in natural-log units: S·scale,
// m·scale; P is the float32 p before its rounding to bf16.
//
// Shared memory rows are 16-byte chunks XOR-swizzled by the row's low three
// bits, so the eight rows an ldmatrix phase reads fall in eight different
// bank groups. K_{j+1} and V_j arrive by cp.async while the previous product
// runs. Under a causal mask the tiles above the diagonal are never visited
// and only the tiles that cross it are masked; the heaviest q-tiles start
// first. docs/LADDER.md has its measurements and what each choice bought.
#include "../common/instrument.cuh"
#include "../common/mma.cuh"

namespace fast {

// The switches after CAUSAL take one of the rung's ideas away, for the
// ladder bench to measure each apart (docs/LADDER.md): QREG keeps Q's
// fragments in registers (an idea that lost), SW = false lays shared tiles
// out plainly, EXP2 = false computes exp of the scaled scores instead of
// exp2 with the scale folded in, SKIP = false visits the causal tiles above
// the diagonal (masked whole), ASYNC = false loads tiles through registers
// instead of cp.async. The shipped kernels take the defaults.
template <int D, int BR, int BC, int NW, bool CAUSAL, bool QREG = false, bool SW = true, bool EXP2 = true, bool SKIP = true,
          bool ASYNC = true>
__device__ __forceinline__ void flash2_fast_block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K,
                                                       const bf16 *__restrict__ V, bf16 *__restrict__ O,
                                                       float *__restrict__ LSE, int N, float scale FS_TRACE_PARAMS) {
  constexpr int NT = NW * 32;
  constexpr int MI = BR / (16 * NW); // row atoms per warp
  constexpr int NI = BC / 8;         // column atoms of S
  constexpr int DI = D / 8;          // column atoms of O
  constexpr int CH = D / 8;          // 16-byte chunks per row
  static_assert(MI >= 1 && BR == MI * 16 * NW, "BR is a whole number of row atoms per warp");
  static_assert(D % 64 == 0 && BC % 16 == 0, "the swizzle needs rows of at least 8 chunks");
  static_assert(NI % 2 == 0, "kv columns go in pairs of 8-column atoms");

  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sK = sQ + BR * D;
  bf16 *sV = sK + BC * D;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3; // the mma fragment's row group and column pair
  const int Tr = (N + BR - 1) / BR;
  const int qtile = CAUSAL ? Tr - 1 - blockIdx.x : blockIdx.x; // heaviest first
  const int bh = blockIdx.y;
  const int r0 = qtile * BR;
  const size_t base = (size_t)bh * N * D;
  const float sl2 = scale * 1.4426950408889634f; // scale·log2 e: exp becomes exp2

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);)

  //> load-q: Q_i (and K_0) by cp.async into swizzled shared memory; m, l and O start empty
  load_tile<BR, D, NT, SW, ASYNC>(sQ, Q + base, r0, N, tid);
  load_tile<BC, D, NT, SW, ASYNC>(sK, K + base, 0, N, tid);
  cp_async_commit();

  float o[MI][DI][4];
  float m[MI][2], l[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; mi++) {
#pragma unroll
    for (int di = 0; di < DI; di++) o[mi][di][0] = o[mi][di][1] = o[mi][di][2] = o[mi][di][3] = 0.f;
    m[mi][0] = m[mi][1] = -INFINITY;
    l[mi][0] = l[mi][1] = 0.f;
  }

  const int Tc = (N + BC - 1) / BC;
  const int jEnd = CAUSAL && SKIP ? min(Tc, (min(N, r0 + BR) - 1) / BC + 1) : Tc;
  const int wr0 = warp * MI * 16; // the warp's first row in the tile

  // With QREG the warp's Q fragments are read from shared memory once and
  // kept in registers for every kv-tile.
  uint32_t qf[QREG ? MI : 1][QREG ? D / 16 : 1][4];
  bool qLoaded = false;

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    __syncthreads(); // every warp is done with V_{j-1}
    //> load-kv: V_j by cp.async, while S = Q_i K_jᵀ runs
    load_tile<BC, D, NT, SW, ASYNC>(sV, V + base, j * BC, N, tid);
    cp_async_commit();
    cp_async_wait<1>(); // Q and K_j are in
    __syncthreads();

    //> scores: S = Q_i K_jᵀ, mma.sync with Q and K fragments from ldmatrix
    float s[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++) s[mi][ni][0] = s[mi][ni][1] = s[mi][ni][2] = s[mi][ni][3] = 0.f;

    if (QREG && !qLoaded) {
#pragma unroll
      for (int kk = 0; kk < (QREG ? D / 16 : 1); kk++)
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
          ldsm_x4(smem_addr(sQ + swz<CH, SW>(wr0 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)) * 8), qf[mi][kk][0],
                  qf[mi][kk][1], qf[mi][kk][2], qf[mi][kk][3]);
      qLoaded = true;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        if (QREG) {
#pragma unroll
          for (int x = 0; x < 4; x++) a[mi][x] = qf[mi][QREG ? kk : 0][x];
        } else {
          ldsm_x4(smem_addr(sQ + swz<CH, SW>(wr0 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)) * 8), a[mi][0], a[mi][1],
                  a[mi][2], a[mi][3]);
        }
      }
#pragma unroll
      for (int n2 = 0; n2 < NI / 2; n2++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(smem_addr(sK + swz<CH, SW>(n2 * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)) * 8), b0,
                b1, b2, b3);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          mma16816(s[mi][2 * n2], a[mi], b0, b1);
          mma16816(s[mi][2 * n2 + 1], a[mi], b2, b3);
        }
      }
    }
    __syncthreads(); // every warp is done with K_j
    //> load-kv: K_{j+1} by cp.async, while the softmax and P·V_j run
    if (j + 1 < jEnd) load_tile<BC, D, NT, SW, ASYNC>(sK, K + base, (j + 1) * BC, N, tid);
    cp_async_commit();

    //> scores: masks on the ragged last tile and on the tiles that cross the diagonal
    // Masks: the ragged last tile, and the tiles that cross the diagonal.
    const int c0 = j * BC;
    if (c0 + BC > N || (CAUSAL && c0 + BC - 1 > r0)) {
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int row = r0 + wr0 + mi * 16 + g + (e >> 1) * 8;
            const int col = c0 + ni * 8 + 2 * t + (e & 1);
            if (col >= N || (CAUSAL && col > row)) s[mi][ni][e] = -INFINITY;
          }
    }

#ifdef FS_TRACE
    if (full) {
      float *pl = fs_payload(cur) + fs_flash_step_s(BR, BC, D, N);
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            pl[(wr0 + mi * 16 + g + (e >> 1) * 8) * BC + ni * 8 + 2 * t + (e & 1)] = s[mi][ni][e] * scale;
    }
#endif

    //> softmax: row max across the quad, α = 2^((m_old − m_new)·scale·log2 e), P = 2^(…), l = α·l + Σ P, O = α·O
    // Online softmax: each thread holds rows g and g+8 of each row atom;
    // the four threads of a quad share a row. P goes to bf16 pairs as soon
    // as it exists, so the float S need not live through P·V.
    uint32_t pk[MI][NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float mx = m[mi][h];
#pragma unroll
        for (int ni = 0; ni < NI; ni++) mx = fmaxf(mx, fmaxf(s[mi][ni][2 * h], s[mi][ni][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        const float mb = mx == -INFINITY ? 0.f : mx * sl2; // a row masked so far: exp2(−inf) = 0, never NaN
        // Without EXP2: exp of the scaled scores, less the scaled max.
        const float ms = mx == -INFINITY ? 0.f : mx * scale;
        const float alpha = EXP2 ? ex2(fmaf(m[mi][h], sl2, -mb)) : __expf(m[mi][h] * scale - ms);
        FS_TRACED(if (full && t == 0) {
          float *pl = fs_payload(cur);
          const int r = wr0 + mi * 16 + g + h * 8;
          pl[fs_flash_step_m_old(BR, BC, D, N) + r] = m[mi][h] * scale;
          pl[fs_flash_step_m_new(BR, BC, D, N) + r] = mx * scale;
          pl[fs_flash_step_alpha(BR, BC, D, N) + r] = alpha;
        })
        m[mi][h] = mx;
        float rs = 0.f;
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
          const float p0 = EXP2 ? ex2(fmaf(s[mi][ni][2 * h], sl2, -mb)) : __expf(s[mi][ni][2 * h] * scale - ms);
          const float p1 = EXP2 ? ex2(fmaf(s[mi][ni][2 * h + 1], sl2, -mb)) : __expf(s[mi][ni][2 * h + 1] * scale - ms);
          pk[mi][ni][h] = pack_bf16(p0, p1);
          rs += p0 + p1;
          FS_TRACED(if (full) {
            float *pl = fs_payload(cur) + fs_flash_step_p(BR, BC, D, N) + (wr0 + mi * 16 + g + h * 8) * BC + ni * 8 + 2 * t;
            pl[0] = p0;
            pl[1] = p1;
          })
        }
        l[mi][h] = fmaf(l[mi][h], alpha, rs); // this thread's part of the row; the quad adds up at the end
        FS_TRACED(if (full) {
          float lq = l[mi][h] + __shfl_xor_sync(0xffffffff, l[mi][h], 1);
          lq += __shfl_xor_sync(0xffffffff, lq, 2);
          if (t == 0) fs_payload(cur)[fs_flash_step_l(BR, BC, D, N) + wr0 + mi * 16 + g + h * 8] = lq;
        })
        // Rescaled every tile, α = 1 or not: skipping it when a warp vote
        // finds every α = 1 measured 4–9% slower (docs/LADDER.md, run c).
#pragma unroll
        for (int di = 0; di < DI; di++) {
          o[mi][di][2 * h] *= alpha;
          o[mi][di][2 * h + 1] *= alpha;
        }
      }

    //> pv: O += bf16(P)·V_j, P from registers, V through ldmatrix.trans
    cp_async_wait<1>(); // V_j is in
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      uint32_t a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        a[mi][0] = pk[mi][2 * kk][0];
        a[mi][1] = pk[mi][2 * kk][1];
        a[mi][2] = pk[mi][2 * kk + 1][0];
        a[mi][3] = pk[mi][2 * kk + 1][1];
      }
#pragma unroll
      for (int d2 = 0; d2 < DI / 2; d2++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_trans(smem_addr(sV + swz<CH, SW>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), d2 * 2 + (lane >> 4)) * 8),
                      b0, b1, b2, b3);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          mma16816(o[mi][2 * d2], a[mi], b0, b1);
          mma16816(o[mi][2 * d2 + 1], a[mi], b2, b3);
        }
      }
    }
    //> end
#ifdef FS_TRACE
    if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur) + fs_flash_step_o(BR, BC, D, N);
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int di = 0; di < DI; di++)
#pragma unroll
            for (int e = 0; e < 4; e++) pl[(wr0 + mi * 16 + g + (e >> 1) * 8) * D + di * 8 + 2 * t + (e & 1)] = o[mi][di][e];
        if (tid == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        const int colsValid = min(BC, N - j * BC);
        const unsigned long long rd = 2ull * colsValid * D * 2 + (j == 0 ? (unsigned long long)rowsValid * D * 2 : 0);
        fs_write_header(cur, FS_KIND_FLASH_STEP, bh, qtile, j, rowsValid, colsValid, rd, 0);
      }
      cur.rec += stepBytes;
    }
#endif
  }

  //> epilogue: the quad's partial sums make l; O / l in bf16 and the LSE to device memory
  // Epilogue: the quad's sums make l; one division per row; O in bf16 and
  // the LSE in natural-log units.
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float lt = l[mi][h];
      lt += __shfl_xor_sync(0xffffffff, lt, 1);
      lt += __shfl_xor_sync(0xffffffff, lt, 2);
      const float inv = lt == 0.f ? 0.f : 1.f / lt;
      const int row = r0 + wr0 + mi * 16 + g + h * 8;
      const float lse = lt == 0.f ? -INFINITY : fmaf(m[mi][h], scale, logf(lt));
      if (row < N) {
        bf16 *out = O + base + (size_t)row * D;
#pragma unroll
        for (int di = 0; di < DI; di++)
          *reinterpret_cast<__nv_bfloat162 *>(out + di * 8 + 2 * t) =
              __floats2bfloat162_rn(o[mi][di][2 * h] * inv, o[mi][di][2 * h + 1] * inv);
        if (t == 0) LSE[(size_t)bh * N + row] = lse;
      }
#ifdef FS_TRACE
      if (full) {
        float *pl = fs_payload(cur);
        const int r = wr0 + mi * 16 + g + h * 8;
#pragma unroll
        for (int di = 0; di < DI; di++) {
          pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * t] = o[mi][di][2 * h] * inv;
          pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * t + 1] = o[mi][di][2 * h + 1] * inv;
        }
        if (t == 0) pl[fs_epilogue_lse(BR, BC, D, N) + r] = lse;
      }
#endif
    }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, qtile, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
  })
}
//> end

// Shared memory of one block, in bytes: Q_i, K_j and V_j in bf16.
constexpr int smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 2 * BC * D); }

} // namespace fast

// The compiled instantiations, extern "C" so the worker finds each by name:
// keep in step with Flash2FastInstances in kernels/gpu.go (a test checks).
// Tiles and warps per head dim are the fastest measured (docs/LADDER.md).
// A causal and a plain kernel each: one function holding both needs the
// registers of the larger and spilled at d=128.
// N is an int and the scale a float, as the block takes them: the worker
// passes each argument in 8 bytes, of which the driver copies the
// parameter's own size. Taking N as a long long and casting it cost 5% at
// d=128 on the H100 (1.817 ms against 1.729, the scale's bits 1.3% more;
// docs/LADDER.md, run j).
#define FLASH2_FAST_KERNEL(NAME, BR, BC, D, NW, CAUSAL)                                                             \
  extern "C" __global__ void __launch_bounds__(NW * 32)                                                              \
      NAME(const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,     \
           fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N, float scale FS_TRACE_PARAMS) {                \
    fast::flash2_fast_block<D, BR, BC, NW, CAUSAL>(Q, K, V, O, LSE, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }
#define FLASH2_FAST_INSTANCE(BR, BC, D, NW)                                                                        \
  FLASH2_FAST_KERNEL(flash2_fast_br##BR##_bc##BC##_d##D, BR, BC, D, NW, false)                                       \
  FLASH2_FAST_KERNEL(flash2_fast_br##BR##_bc##BC##_d##D##_causal, BR, BC, D, NW, true)

FLASH2_FAST_INSTANCE(128, 128, 64, 4)
FLASH2_FAST_INSTANCE(128, 48, 128, 4)
