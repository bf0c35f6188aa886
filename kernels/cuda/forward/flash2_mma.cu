// FlashAttention-2 forward on tensor cores with nothing tuned, bf16 in and
// out, float32 accumulation: the ladder's rung 5, whose CPU mirror is
// flash2_mma.go.
//
// The loop is flash2's (rung 4): one block per (batch-head, q-tile i) keeps
// m, l and O on chip and walks the kv-tiles j in order, skipping those
// wholly above the diagonal under a causal mask. What changes is who
// multiplies: each of the NW warps owns one 16-row atom of the q-tile
// (BR = 16·NW) and runs both products on the tensor cores as
// mma.sync.m16n8k16, bf16 operands into float32 accumulators, its operands
// fetched from shared memory by ldmatrix. A thread holds rows g and g+8 of
// its warp's atom (g = lane/4) and, of each 8-column atom, columns 2t and
// 2t+1 (t = lane%4). Per kv-tile j of BC columns:
//
//   S_raw = Q_i K_jᵀ, float32: d/16 MMAs, each adding a 16-term dot product
//           of bf16 values to the accumulator
//   x     = S_raw·scale, one float32 multiply; -inf where col ≥ N, or
//           causal and col > row, checked on every tile
//   m_new = max(m_old, max_c x)                  natural-log units, exact
//   mb    = m_new (0 while m_new = -inf)
//   α     = expf(m_old − mb),  p = expf(x − mb)   float32
//   l_t   = fma(l_t, α, Σ (p0 + p1))             this thread's columns, in
//           atom order; the quad's four partial sums add up, (l0+l1)+(l2+l3),
//           only where the full l is needed (the trace and the epilogue)
//   O     = O·α, then O += bf16(p)·V_j: BC/16 MMAs, P straight from the
//           registers that made it, as the A operand
//
// and once at the end O·(1/l) (rounded to bf16 for the output) and
// LSE = m + logf(l). Products and sums are written __fmul_rn, __fadd_rn,
// fmaf, so that nvcc contracts nothing the mirror does not.
//
// What this rung lacks is rung 6's (flash2_fast.cu), left out so that each
// idea's worth shows on its own:
//
//   - Plain row-major shared tiles. A row of D bf16 is a multiple of 128
//     bytes, so the eight rows one ldmatrix phase reads all start in the
//     same four banks: every ldmatrix is an eight-way bank conflict, eight
//     shared-memory wavefronts where one would do.
//   - Loads that wait. Each thread copies 16-byte chunks of K_j and V_j from
//     device memory through a register into shared memory, and the block
//     waits for all of them at a barrier: the tensor cores idle through the
//     whole memory latency of every tile, where cp.async would bring the
//     next tile in while this one is multiplied.
//   - expf in natural units. Each score costs a multiply, a subtraction and
//     expf, some ten instructions (a range reduction, ex2.approx of what is
//     left, a scaling by a power of 2), where folding the scale and log2 e
//     into one fma before ex2.approx costs two.
//   - One row atom per warp. Every K and V fragment a warp loads feeds one
//     mma; with two atoms (128-row tiles) each would feed two, halving the
//     shared-memory reads per product.
//   - q-tiles in launch order. Under a causal mask the last q-tiles have
//     the most kv-tiles and start last, so the grid ends on a tail of a few
//     busy SMs.
#include "../common/instrument.cuh"
#include "../common/mma.cuh"

namespace flash2_mma {

using fast::bf16;

// load_tile copies ROWS rows of D bf16 from row row0 of one batch-head's
// matrix into a plain row-major shared tile: each thread moves 16-byte
// chunks through a register; a row past N is stored as zeros.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile(bf16 *s, const bf16 *__restrict__ src, int row0, int N, int tid) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int c = tid; c < ROWS * CH; c += NT) {
    const int r = c / CH, ch = c % CH;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < N) v = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * D + ch * 8);
    *reinterpret_cast<uint4 *>(s + fast::swz<CH, false>(r, ch) * 8) = v;
  }
}

template <int D, int BR, int BC, int NW>
__device__ __forceinline__ void block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ V,
                                      bf16 *__restrict__ O, float *__restrict__ LSE, int N, float scale,
                                      int causal FS_TRACE_PARAMS) {
  constexpr int NT = NW * 32;
  constexpr int NI = BC / 8; // column atoms of S
  constexpr int DI = D / 8;  // column atoms of O
  constexpr int CH = D / 8;  // 16-byte chunks per row
  static_assert(BR == 16 * NW, "one 16-row atom per warp");
  static_assert(D % 16 == 0 && BC % 16 == 0, "whole mma chunks along d and along the kv-tile");

  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sK = sQ + BR * D;
  bf16 *sV = sK + BC * D;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3; // the mma fragment's row group and column pair
  const int i = blockIdx.x, bh = blockIdx.y;
  const int r0 = i * BR;
  const int wr0 = warp * 16; // the warp's first row in the tile
  const size_t base = (size_t)bh * N * D;

  FS_TRACED(const int Tr = (N + BR - 1) / BR;
            fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * Tr + i);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);)

  //> load-q: Q_i from device memory into a plain shared tile, once per block; m, l and O start empty
  load_tile<BR, D, NT>(sQ, Q + base, r0, N, tid);

  float o[DI][4];
  float m[2], l[2]; // rows g and g+8; l is this thread's part of the row sum
#pragma unroll
  for (int di = 0; di < DI; di++) o[di][0] = o[di][1] = o[di][2] = o[di][3] = 0.f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.f;

  const int Tc = (N + BC - 1) / BC;
  const int jEnd = causal ? min(Tc, (min(N, r0 + BR) - 1) / BC + 1) : Tc;

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    //> load-kv: K_j and V_j through registers into plain shared tiles; the block waits for both
    __syncthreads(); // every warp is done with K_{j-1} and V_{j-1}
    load_tile<BC, D, NT>(sK, K + base, j * BC, N, tid);
    load_tile<BC, D, NT>(sV, V + base, j * BC, N, tid);
    __syncthreads(); // Q_i, K_j and V_j are in

    //> scores: S = Q_i K_jᵀ by mma.sync, fragments by ldmatrix; x = S·scale, masked on every tile
    float s[NI][4];
#pragma unroll
    for (int ni = 0; ni < NI; ni++) s[ni][0] = s[ni][1] = s[ni][2] = s[ni][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[4];
      fast::ldsm_x4(fast::smem_addr(sQ + fast::swz<CH, false>(wr0 + (lane & 15), kk * 2 + (lane >> 4)) * 8), a[0], a[1],
                    a[2], a[3]);
#pragma unroll
      for (int n2 = 0; n2 < NI / 2; n2++) {
        uint32_t b0, b1, b2, b3;
        fast::ldsm_x4(
            fast::smem_addr(sK + fast::swz<CH, false>(n2 * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)) * 8),
            b0, b1, b2, b3);
        fast::mma16816(s[2 * n2], a, b0, b1);
        fast::mma16816(s[2 * n2 + 1], a, b2, b3);
      }
    }
    const int c0 = j * BC;
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = r0 + wr0 + g + (e >> 1) * 8;
        const int col = c0 + ni * 8 + 2 * t + (e & 1);
        s[ni][e] = col >= N || (causal && col > row) ? -INFINITY : __fmul_rn(s[ni][e], scale);
      }

#ifdef FS_TRACE
    if (full) {
      float *pl = fs_payload(cur) + fs_flash_step_s(BR, BC, D, N);
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) pl[(wr0 + g + (e >> 1) * 8) * BC + ni * 8 + 2 * t + (e & 1)] = s[ni][e];
    }
#endif

    //> softmax: row max across the quad, α = expf(m_old − m_new), P = expf(x − m_new), l = α·l + Σ P, O = α·O
    // Each thread holds rows g and g+8; the four threads of a quad share a
    // row. P goes to bf16 pairs as soon as it exists: the A operand of P·V.
    uint32_t pk[NI][2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float mx = m[h];
#pragma unroll
      for (int ni = 0; ni < NI; ni++) mx = fmaxf(mx, fmaxf(s[ni][2 * h], s[ni][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      const float mb = mx == -INFINITY ? 0.f : mx; // a row masked so far: expf(−inf) = 0, never NaN
      const float alpha = expf(__fsub_rn(m[h], mb));
      FS_TRACED(if (full && t == 0) {
        float *pl = fs_payload(cur);
        const int r = wr0 + g + h * 8;
        pl[fs_flash_step_m_old(BR, BC, D, N) + r] = m[h];
        pl[fs_flash_step_m_new(BR, BC, D, N) + r] = mx;
        pl[fs_flash_step_alpha(BR, BC, D, N) + r] = alpha;
      })
      m[h] = mx;
      float rs = 0.f;
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const float p0 = expf(__fsub_rn(s[ni][2 * h], mb));
        const float p1 = expf(__fsub_rn(s[ni][2 * h + 1], mb));
        pk[ni][h] = fast::pack_bf16(p0, p1);
        rs = __fadd_rn(rs, __fadd_rn(p0, p1));
        FS_TRACED(if (full) {
          float *pl = fs_payload(cur) + fs_flash_step_p(BR, BC, D, N) + (wr0 + g + h * 8) * BC + ni * 8 + 2 * t;
          pl[0] = p0;
          pl[1] = p1;
        })
      }
      l[h] = fmaf(l[h], alpha, rs); // this thread's part of the row; the quad adds up at the end
      FS_TRACED(if (full) {
        float lq = __fadd_rn(l[h], __shfl_xor_sync(0xffffffff, l[h], 1));
        lq = __fadd_rn(lq, __shfl_xor_sync(0xffffffff, lq, 2));
        if (t == 0) fs_payload(cur)[fs_flash_step_l(BR, BC, D, N) + wr0 + g + h * 8] = lq;
      })
#pragma unroll
      for (int di = 0; di < DI; di++) {
        o[di][2 * h] = __fmul_rn(o[di][2 * h], alpha);
        o[di][2 * h + 1] = __fmul_rn(o[di][2 * h + 1], alpha);
      }
    }

    //> pv: O += bf16(P)·V_j by mma.sync, P from registers, V through ldmatrix.trans
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
#pragma unroll
      for (int d2 = 0; d2 < DI / 2; d2++) {
        uint32_t b0, b1, b2, b3;
        fast::ldsm_x4_trans(
            fast::smem_addr(sV + fast::swz<CH, false>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), d2 * 2 + (lane >> 4)) * 8),
            b0, b1, b2, b3);
        fast::mma16816(o[2 * d2], a, b0, b1);
        fast::mma16816(o[2 * d2 + 1], a, b2, b3);
      }
    }
    //> end
#ifdef FS_TRACE
    if (cur.rec) {
      if (full) {
        float *pl = fs_payload(cur) + fs_flash_step_o(BR, BC, D, N);
#pragma unroll
        for (int di = 0; di < DI; di++)
#pragma unroll
          for (int e = 0; e < 4; e++) pl[(wr0 + g + (e >> 1) * 8) * D + di * 8 + 2 * t + (e & 1)] = o[di][e];
        if (tid == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        const int colsValid = min(BC, N - j * BC);
        const unsigned long long rd = 2ull * colsValid * D * 2 + (j == 0 ? (unsigned long long)rowsValid * D * 2 : 0);
        fs_write_header(cur, FS_KIND_FLASH_STEP, bh, i, j, rowsValid, colsValid, rd, 0);
      }
      cur.rec += stepBytes;
    }
#endif
  }

  //> epilogue: the quad's partial sums make l; O / l in bf16 and the LSE = m + log l to device memory
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float lt = __fadd_rn(l[h], __shfl_xor_sync(0xffffffff, l[h], 1));
    lt = __fadd_rn(lt, __shfl_xor_sync(0xffffffff, lt, 2));
    const float inv = lt == 0.f ? 0.f : __fdiv_rn(1.f, lt);
    const float lse = lt == 0.f ? -INFINITY : __fadd_rn(m[h], logf(lt));
    const int row = r0 + wr0 + g + h * 8;
    if (row < N) {
      bf16 *out = O + base + (size_t)row * D;
#pragma unroll
      for (int di = 0; di < DI; di++)
        *reinterpret_cast<__nv_bfloat162 *>(out + di * 8 + 2 * t) =
            __floats2bfloat162_rn(__fmul_rn(o[di][2 * h], inv), __fmul_rn(o[di][2 * h + 1], inv));
      if (t == 0) LSE[(size_t)bh * N + row] = lse;
    }
#ifdef FS_TRACE
    if (full) {
      float *pl = fs_payload(cur);
      const int r = wr0 + g + h * 8;
#pragma unroll
      for (int di = 0; di < DI; di++) {
        pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * t] = __fmul_rn(o[di][2 * h], inv);
        pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * t + 1] = __fmul_rn(o[di][2 * h + 1], inv);
      }
      if (t == 0) pl[fs_epilogue_lse(BR, BC, D, N) + r] = lse;
    }
#endif
  }
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, i, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
  })
}
//> end

// Shared memory of one block, in bytes: Q_i, K_j and V_j in bf16, unpadded.
constexpr int smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 2 * BC * D); }

} // namespace flash2_mma

// The compiled instantiations, extern "C" so the worker finds each by name:
// keep in step with Flash2MMAInstances in the registry (a test checks). One
// kernel per tile shape; causal is an argument, as in flash2.cu.
#define FLASH2_MMA_INSTANCE(BR, BC, D, NW)                                                                          \
  extern "C" __global__ void __launch_bounds__(NW * 32) flash2_mma_br##BR##_bc##BC##_d##D(                           \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,          \
      fast::bf16 *__restrict__ O, float *__restrict__ LSE, long long N, unsigned long long scaleBits,                \
      long long causal FS_TRACE_PARAMS) {                                                                            \
    flash2_mma::block<D, BR, BC, NW>(Q, K, V, O, LSE, (int)N, __uint_as_float((unsigned)scaleBits), (int)causal     \
                                     FS_TRACED(, fs_trace, fs_offsets, fs_mode));                                   \
  }

FLASH2_MMA_INSTANCE(64, 64, 64, 4)
FLASH2_MMA_INSTANCE(64, 64, 128, 4)
