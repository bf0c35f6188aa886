// What every Hopper rung does to its rows once a product has landed
// (flash3_wgmma.cu to flash3_overlap.cu): the masks, rung 6's online
// softmax in exp2 form, the rescale of O, the trace writes of a step and the
// epilogue. The Hopper rungs differ in how their operands reach shared memory
// and who waits for whom; what a thread computes of its rows is the same in
// all of them, so it lives here once, and each rung's source shows only its
// own idea.
//
// A thread of a warpgroup holds, after a wgmma m64nN, two rows of the
// warpgroup's 64: wr0 + g and wr0 + g + 8 of the tile (wr0 = 16 × its warp
// in the group, g = lane/4), and in each 8-column atom ni the columns
// 8ni + 2t and 8ni + 2t + 1 (t = lane%4): element 4ni + e of an accumulator
// is row wr0 + g + 8(e/2), column 8ni + 2t + e%2. The four threads of a quad
// (same g) share a row, so a row's max and sum end with two shuffles. This is
// the layout of a rung-6 thread with one 16-row atom, which is why the Hopper
// rungs' CPU mirror is rung 6's.
#ifndef FLASHSTEP_HOPPER_TILE_CUH
#define FLASHSTEP_HOPPER_TILE_CUH

#include "../common/instrument.cuh"
#include "../common/mma.cuh"

namespace hopper {

using fast::bf16;

// Rows is where a thread's two rows and its columns sit in its block's tile.
struct Rows {
  int r0;  // the q-tile's first row in the head
  int wr0; // the thread's warp's first row in the tile
  int g, t;
};

// mask_scores sets S to −inf where col ≥ N, or causal and col > row, in the
// kv-tile starting at column c0 (only the ragged last tile and the tiles
// that cross the diagonal have any).
template <int NI, bool CAUSAL>
__device__ __forceinline__ void mask_scores(float (&s)[NI * 4], const Rows &w, int c0, int N) {
  if (c0 + NI * 8 > N || (CAUSAL && c0 + NI * 8 - 1 > w.r0)) {
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = w.r0 + w.wr0 + w.g + (e >> 1) * 8;
        const int col = c0 + ni * 8 + 2 * w.t + (e & 1);
        if (col >= N || (CAUSAL && col > row)) s[ni * 4 + e] = -INFINITY;
      }
  }
}

// softmax_row_with is rung 6's softmax on row h (0: wr0 + g, 1: wr0 + g + 8)
// of a thread's two rows of a kv-tile: the row's new max across the quad,
// α = 2^((m_old − m_new)·scale·log2 e), P = 2^(S·scale·log2 e −
// m_new·scale·log2 e), handed pair by pair to put(ni, p0, p1), and
// l = α·l + ΣP (this thread's part of the row; the quad adds up in the
// epilogue). It returns α, by which O's row is still to be scaled. sl2 is
// scale·log2 e. A traced build passes the step's payload (null when the
// step is not traced in full) and writes m_old, m_new, α, P and the quad's
// l into it.
template <int NI, int BR, int BC, int D, class Put>
__device__ __forceinline__ float softmax_row_with(int h, const float (&s)[NI * 4], float (&m)[2], float (&l)[2], Put put,
                                                  float sl2, const Rows &w, float scale FS_TRACED(, float *pl, int N)) {
  float mx = m[h];
#pragma unroll
  for (int ni = 0; ni < NI; ni++) mx = fmaxf(mx, fmaxf(s[ni * 4 + 2 * h], s[ni * 4 + 2 * h + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
  const float mb = mx == -INFINITY ? 0.f : mx * sl2; // a row masked so far: exp2(−inf) = 0, never NaN
  const float alpha = fast::ex2(fmaf(m[h], sl2, -mb));
  FS_TRACED(const int r = w.wr0 + w.g + h * 8; if (pl && w.t == 0) {
    pl[fs_flash_step_m_old(BR, BC, D, N) + r] = m[h] * scale;
    pl[fs_flash_step_m_new(BR, BC, D, N) + r] = mx * scale;
    pl[fs_flash_step_alpha(BR, BC, D, N) + r] = alpha;
  })
  m[h] = mx;
  float rs = 0.f;
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    const float p0 = fast::ex2(fmaf(s[ni * 4 + 2 * h], sl2, -mb));
    const float p1 = fast::ex2(fmaf(s[ni * 4 + 2 * h + 1], sl2, -mb));
    put(ni, p0, p1);
    rs += p0 + p1;
    FS_TRACED(if (pl) {
      float *pp = pl + fs_flash_step_p(BR, BC, D, N) + r * BC + ni * 8 + 2 * w.t;
      pp[0] = p0;
      pp[1] = p1;
    })
  }
  l[h] = fmaf(l[h], alpha, rs);
  FS_TRACED(if (pl) {
    float lq = l[h] + __shfl_xor_sync(0xffffffff, l[h], 1);
    lq += __shfl_xor_sync(0xffffffff, lq, 2);
    if (w.t == 0) pl[fs_flash_step_l(BR, BC, D, N) + r] = lq;
  })
  return alpha;
}

// softmax_row is softmax_row_with that packs P to bf16 pairs as P·V's A
// fragment.
template <int NI, int BR, int BC, int D>
__device__ __forceinline__ float softmax_row(int h, const float (&s)[NI * 4], float (&m)[2], float (&l)[2],
                                             uint32_t (&pk)[NI][2], float sl2, const Rows &w,
                                             float scale FS_TRACED(, float *pl, int N)) {
  return softmax_row_with<NI, BR, BC, D>(
      h, s, m, l, [&](int ni, float p0, float p1) { pk[ni][h] = fast::pack_bf16(p0, p1); }, sl2, w,
      scale FS_TRACED(, pl, N));
}

// softmax_row_in_place is softmax_row_with that leaves P as floats in S's
// registers (pack_p makes the A fragment of them later): rung 11 computes
// P_{j+1} while P_j·V_j still reads P_j's fragment, and S's registers are
// free by then (docs/LADDER.md run s says why not a second fragment).
template <int NI, int BR, int BC, int D>
__device__ __forceinline__ float softmax_row_in_place(int h, float (&s)[NI * 4], float (&m)[2], float (&l)[2], float sl2,
                                                      const Rows &w, float scale FS_TRACED(, float *pl, int N)) {
  return softmax_row_with<NI, BR, BC, D>(
      h, s, m, l,
      [&](int ni, float p0, float p1) {
        s[ni * 4 + 2 * h] = p0;
        s[ni * 4 + 2 * h + 1] = p1;
      },
      sl2, w, scale FS_TRACED(, pl, N));
}

// pack_p packs P, left in S's registers by softmax_row_in_place, to bf16
// pairs: P·V's A fragment.
template <int NI> __device__ __forceinline__ void pack_p(const float (&p)[NI * 4], uint32_t (&pk)[NI][2]) {
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    pk[ni][0] = fast::pack_bf16(p[ni * 4], p[ni * 4 + 1]);
    pk[ni][1] = fast::pack_bf16(p[ni * 4 + 2], p[ni * 4 + 3]);
  }
}

// rescale_row is O = α·O on row h of a thread's two rows.
template <int DI> __device__ __forceinline__ void rescale_row(float (&o)[DI * 4], int h, float alpha) {
#pragma unroll
  for (int di = 0; di < DI; di++) {
    o[di * 4 + 2 * h] *= alpha;
    o[di * 4 + 2 * h + 1] *= alpha;
  }
}

// online_softmax is softmax_row and rescale_row on both of a thread's rows:
// rung 6's softmax, O = α·O included.
template <int NI, int DI, int BR, int BC, int D>
__device__ __forceinline__ void online_softmax(const float (&s)[NI * 4], float (&m)[2], float (&l)[2], float (&o)[DI * 4],
                                               uint32_t (&pk)[NI][2], float sl2, const Rows &w,
                                               float scale FS_TRACED(, float *pl, int N)) {
#pragma unroll
  for (int h = 0; h < 2; h++)
    rescale_row<DI>(o, h, softmax_row<NI, BR, BC, D>(h, s, m, l, pk, sl2, w, scale FS_TRACED(, pl, N)));
}

// epilogue finishes a thread's two rows: the quad's partial sums make l,
// O / l goes out in bf16 (Oh: the head's O) and the log-sum-exp as float32
// (Lh: the head's LSE); a traced build writes both into the epilogue
// record's payload pl as well.
template <int DI, int BR, int BC, int D>
__device__ __forceinline__ void epilogue(const float (&o)[DI * 4], const float (&m)[2], const float (&l)[2], bf16 *Oh,
                                         float *Lh, const Rows &w, int N, float scale FS_TRACED(, float *pl)) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float lt = l[h];
    lt += __shfl_xor_sync(0xffffffff, lt, 1);
    lt += __shfl_xor_sync(0xffffffff, lt, 2);
    const float inv = lt == 0.f ? 0.f : 1.f / lt;
    const int r = w.wr0 + w.g + h * 8, row = w.r0 + r;
    const float lse = lt == 0.f ? -INFINITY : fmaf(m[h], scale, logf(lt));
    if (row < N) {
      bf16 *out = Oh + (size_t)row * D;
#pragma unroll
      for (int di = 0; di < DI; di++)
        *reinterpret_cast<__nv_bfloat162 *>(out + di * 8 + 2 * w.t) =
            __floats2bfloat162_rn(o[di * 4 + 2 * h] * inv, o[di * 4 + 2 * h + 1] * inv);
      if (w.t == 0) Lh[row] = lse;
    }
#ifdef FS_TRACE
    if (pl) {
#pragma unroll
      for (int di = 0; di < DI; di++) {
        pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * w.t] = o[di * 4 + 2 * h] * inv;
        pl[fs_epilogue_o(BR, BC, D, N) + r * D + di * 8 + 2 * w.t + 1] = o[di * 4 + 2 * h + 1] * inv;
      }
      if (w.t == 0) pl[fs_epilogue_lse(BR, BC, D, N) + r] = lse;
    }
#endif
  }
}

#ifdef FS_TRACE
// trace_scores writes a thread's part of the masked S·scale into a step's
// payload; trace_o its part of O after the step.
template <int NI, int BR, int BC, int D>
__device__ __forceinline__ void trace_scores(float *pl, const float (&s)[NI * 4], const Rows &w, float scale, int N) {
  pl += fs_flash_step_s(BR, BC, D, N);
#pragma unroll
  for (int ni = 0; ni < NI; ni++)
#pragma unroll
    for (int e = 0; e < 4; e++) pl[(w.wr0 + w.g + (e >> 1) * 8) * BC + ni * 8 + 2 * w.t + (e & 1)] = s[ni * 4 + e] * scale;
}

template <int DI, int BR, int BC, int D>
__device__ __forceinline__ void trace_o(float *pl, const float (&o)[DI * 4], const Rows &w, int N) {
  pl += fs_flash_step_o(BR, BC, D, N);
#pragma unroll
  for (int di = 0; di < DI; di++)
#pragma unroll
    for (int e = 0; e < 4; e++) pl[(w.wr0 + w.g + (e >> 1) * 8) * D + di * 8 + 2 * w.t + (e & 1)] = o[di * 4 + e];
}

// step_read_bytes is what a step reads from device memory: K_j and V_j of
// its valid columns, and Q_i with the first.
__device__ __forceinline__ unsigned long long step_read_bytes(int j, int colsValid, int rowsValid, int D) {
  return 2ull * colsValid * D * 2 + (j == 0 ? (unsigned long long)rowsValid * D * 2 : 0);
}
#endif

} // namespace hopper

#endif // FLASHSTEP_HOPPER_TILE_CUH
