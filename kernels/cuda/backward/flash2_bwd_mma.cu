// FlashAttention-2's backward pass on tensor cores: bf16 Q, K, V, dO and O,
// float32 accumulation and float32 gradients; the CPU mirror is
// flash2_bwd_mma.go. The loop is flash2_bwd.cu's; who multiplies changes.
//
//   flash2_bwd_mma_pre   one block per q-tile: D_i = rowsum(dO_i o O_i) in
//                        float32, one thread per row over d in order, and the
//                        float32 dQ accumulator of the q-tile set to zero
//   flash2_bwd_mma_main  one block of NW warps per kv-tile j (BC = 16·NW):
//                        warp w owns kv rows 16w..16w+15, keeps their dK and
//                        dV in registers, and per q-tile i (BR rows, a
//                        multiple of 16 that divides into the warps):
//     S^T  = K_j Q_i^T            d/16 MMAs (bf16 in, float32 accumulate)
//     P^T  = 2^(fma(S^T, sl2, -L·log2 e))    ex2.approx; 0 where masked
//     dP^T = V_j dO_i^T           d/16 MMAs
//     dS^T = P^T o (dP^T - D_i)   float32
//     dV_j += bf16(P^T) dO_i      BR/16 MMAs, P^T straight from the
//                                 registers that made it, as the A operand
//     dK_j += bf16(dS^T) Q_i      BR/16 MMAs, likewise
//     dS^T goes to shared memory in bf16; then each warp owns 16 q rows and
//     a share of d's columns of dQ_i += dS K_j (BC/16 MMAs, dS read
//     transposed by ldmatrix.trans), stages its part in shared memory and
//     adds it into the float32 accumulator in device memory, atomically, a
//     row of 32 floats per add: every kv-tile's block adds to every q-tile
//     it sees. A wider kv-tile (8 warps, BC = 128) halves the adds per
//     product
//                        and at the end dK_j·scale and dV_j, float32
//   flash2_bwd_mma_dq    one block per q-tile: dQ_i = accumulator·scale, once
//
// sl2 = scale·log2 e as flash2_fast's (the scale folded into the exponent);
// L·log2 e is one float32 multiply per row as L_i arrives. A thread of an
// mma fragment holds rows g and g+8 of its warp's atom (g = lane/4) and of
// each 8-column atom the columns 2t and 2t+1 (t = lane%4): in S^T the rows
// are kv rows and the columns q rows. Q_i and dO_i of the next q-tile come
// in by cp.async, into XOR-swizzled shared tiles, while this one is
// multiplied; K_j and V_j are loaded once. Under a causal mask the walk starts
// at the q-tile holding row j·BC (the ones above see none of the tile).
//
// Trace: the records of flash2_bwd (bwd_pre, bwd_step, bwd_dq), with S in
// natural units (S_raw·scale), P the float32 p before its rounding to bf16,
// dP, dS, the float32 dV_j and (unscaled) dK_j accumulators after the step,
// and the step's float32 part of dQ_i before its atomic add.
#include "../common/instrument.cuh"
#include "../common/mma.cuh"
#include "../common/bwd_ends.cuh"

namespace flash2_bwd_mma {

using fast::bf16;
// dQ_i's columns per warp (the warps share dQ_i's 16-row atoms out, then
// its columns), and of those the columns of one pass (at most 64, which
// bounds the registers dQ's part takes beside dK_j and dV_j).
__host__ __device__ constexpr int dq_cols(int BR, int BC, int D) { return D / (BC / 16 / (BR / 16)); }
__host__ __device__ constexpr int dq_pass(int BR, int BC, int D) { return dq_cols(BR, BC, D) < 64 ? dq_cols(BR, BC, D) : 64; }


//> pre: D_i = rowsum(dO_i ∘ O_i) from bf16 rows, in float32; the float32 dQ accumulator of q-tile i set to zero (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void pre(const bf16 *__restrict__ dO, const bf16 *__restrict__ O, const float *__restrict__ L,
                                    float *__restrict__ Delta, float *__restrict__ dQ, int N FS_TRACE_PARAMS) {
  bwd_ends::pre<BR, BC, D, NT>(dO, O, L, Delta, dQ, N FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// The 16 bf16 pairs of a 16 x BR fragment pair, packed as the A operand of the
// next product: the accumulator layout of two 8-column atoms is the A layout
// of one 16-deep chunk.
template <int NI> __device__ __forceinline__ void pack(const float (&x)[NI][4], uint32_t (&out)[NI][2]) {
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    out[ni][0] = fast::pack_bf16(x[ni][0], x[ni][1]);
    out[ni][1] = fast::pack_bf16(x[ni][2], x[ni][3]);
  }
}

// acc (16 x D, the warp's kv rows) += A (16 x BR, packed) · B, B the BR x D
// tile sB (row-major, swizzled) read by ldmatrix.trans: BR/16 MMAs in order
// of B's rows.
template <int BR, int D>
__device__ __forceinline__ void mma_acc(float (&acc)[D / 8][4], const uint32_t (&a)[BR / 8][2], const bf16 *sB, int lane) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int kk = 0; kk < BR / 16; kk++) {
    const uint32_t af[4] = {a[2 * kk][0], a[2 * kk][1], a[2 * kk + 1][0], a[2 * kk + 1][1]};
#pragma unroll
    for (int d2 = 0; d2 < D / 16; d2++) {
      uint32_t b0, b1, b2, b3;
      fast::ldsm_x4_trans(fast::smem_addr(sB + fast::swz<CH>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), d2 * 2 + (lane >> 4)) * 8),
                          b0, b1, b2, b3);
      fast::mma16816(acc[2 * d2], af, b0, b1);
      fast::mma16816(acc[2 * d2 + 1], af, b2, b3);
    }
  }
}

// out (16 x BR) = sA's rows a0..a0+15 · sB^T, both D wide (row-major,
// swizzled): d/16 MMAs in order along d. S^T = K_j Q_i^T and dP^T = V_j dO_i^T.
template <int BR, int D>
__device__ __forceinline__ void mma_nt(float (&out)[BR / 8][4], const bf16 *sA, int a0, const bf16 *sB, int lane) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int ni = 0; ni < BR / 8; ni++) out[ni][0] = out[ni][1] = out[ni][2] = out[ni][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    uint32_t a[4];
    fast::ldsm_x4(fast::smem_addr(sA + fast::swz<CH>(a0 + (lane & 15), kk * 2 + (lane >> 4)) * 8), a[0], a[1], a[2], a[3]);
#pragma unroll
    for (int n2 = 0; n2 < BR / 16; n2++) {
      uint32_t b0, b1, b2, b3;
      fast::ldsm_x4(fast::smem_addr(sB + fast::swz<CH>(n2 * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)) * 8),
                    b0, b1, b2, b3);
      fast::mma16816(out[2 * n2], a, b0, b1);
      fast::mma16816(out[2 * n2 + 1], a, b2, b3);
    }
  }
}

template <int BR, int BC, int D, int NW>
__device__ __forceinline__ void main_block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ V,
                                           const bf16 *__restrict__ dO, const float *__restrict__ L,
                                           const float *__restrict__ Delta, float *__restrict__ dQ, float *__restrict__ dK,
                                           float *__restrict__ dV, int N, float scale, int causal FS_TRACE_PARAMS) {
  constexpr int NT = NW * 32;
  constexpr int NI = BR / 8; // 8-column atoms of S^T: q rows
  constexpr int DI = D / 8;  // 8-column atoms of dK, dV and dQ
  constexpr int CH = D / 8;  // 16-byte chunks per row of Q, K, V, dO
  constexpr int CQ = BR / 8; // 16-byte chunks per row of dS^T
  constexpr int RA = BR / 16; // 16-row atoms of dQ_i
  constexpr int DW = dq_cols(BR, BC, D), PW = dq_pass(BR, BC, D);
  constexpr int SP = PW + 8; // a staged row of dQ's part, in floats: 8 more shifts each row by 8 banks
  static_assert(BC == 16 * NW, "one 16-row atom of kv rows per warp");
  static_assert(BR % 16 == 0 && NW % RA == 0 && DW % PW == 0 && PW % 16 == 0, "dQ_i's atoms shared out evenly over the warps");
  static_assert(D % 64 == 0 && BC % 64 == 0, "the swizzle needs rows of at least 8 chunks");

  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sK = reinterpret_cast<bf16 *>(smem);
  bf16 *sV = sK + BC * D;
  bf16 *sQ = sV + BC * D;   // two buffers of BR x D: the q-tile and the next
  bf16 *sDO = sQ + 2 * BR * D; // likewise
  bf16 *sDS = sDO + 2 * BR * D; // dS^T, BC x BR, as the warps make it
  float *sLb = reinterpret_cast<float *>(sDS + BR * BC); // two buffers of BR: L·log2 e
  float *sD = sLb + 2 * BR;                              // two buffers of BR: D
  float *sStage = sD + 2 * BR + (threadIdx.x >> 5) * 16 * SP; // this warp's 16 x PW part of dQ_i, float32

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int j = blockIdx.x, bh = blockIdx.y;
  const int c0 = j * BC;
  const int wc = warp * 16;              // the warp's kv rows in the tile
  // Its q rows and first column in dQ_i (with one atom of q rows per warp,
  // the kv rows' offset and 0: written so, the compiler keeps no more).
  const int wq = RA == NW ? wc : (warp % RA) * 16, wd = RA == NW ? 0 : (warp / RA) * DW;
  const int Tr = (N + BR - 1) / BR;
  const size_t base = (size_t)bh * N * D;
  const float sl2 = scale * 1.4426950408889634f;
  const int iStart = causal ? c0 / BR : 0;

  //> load-kv: K_j and V_j by cp.async, once per block, with the first q-tile's Q_i and dO_i; dK_j and dV_j start at zero
  fast::load_tile<BC, D, NT, true>(sK, K + base, c0, N, tid);
  fast::load_tile<BC, D, NT, true>(sV, V + base, c0, N, tid);
  fast::load_tile<BR, D, NT, true>(sQ, Q + base, iStart * BR, N, tid);
  fast::load_tile<BR, D, NT, true>(sDO, dO + base, iStart * BR, N, tid);
  fast::cp_async_commit();
  float lNext = 0.f, dNext = 0.f; // L_i and D_i of this thread's row, a q-tile ahead
  if (tid < BR && iStart * BR + tid < N) {
    lNext = __ldcg(&L[(size_t)bh * N + iStart * BR + tid]);
    dNext = __ldcg(&Delta[(size_t)bh * N + iStart * BR + tid]);
  }
  float dv[DI][4], dk[DI][4];
#pragma unroll
  for (int di = 0; di < DI; di++)
#pragma unroll
    for (int e = 0; e < 4; e++) dv[di][e] = dk[di][e] = 0.f;

  for (int i = iStart; i < Tr; i++) {
    const int buf = (i - iStart) & 1;
    const int r0 = i * BR;
    bf16 *q = sQ + buf * BR * D, *d_o = sDO + buf * BR * D;
    float *lb = sLb + buf * BR, *dd = sD + buf * BR;
    FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.x + j) * Tr + i);
              const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
              float *pl = cur.rec ? fs_payload(cur) : nullptr;
              const int rowsValid = min(BR, N - r0);
              if (tid == 0) cur.t_start = fs_globaltimer();)

    //> load-q: Q_{i+1} and dO_{i+1} start by cp.async while q-tile i is multiplied; L_i·log2 e and D_i to shared memory
    // No barrier first: the buffers written here were last read before
    // q-tile i-1's barrier ahead of dQ, which every warp has passed, and
    // dS is rewritten only after the barrier below, which no warp passes
    // before every warp is done with q-tile i-1's dQ. A warp that is through
    // its adds starts the next q-tile's copies while the others finish.
    if (i + 1 < Tr) {
      fast::load_tile<BR, D, NT, true>(sQ + (buf ^ 1) * BR * D, Q + base, r0 + BR, N, tid);
      fast::load_tile<BR, D, NT, true>(sDO + (buf ^ 1) * BR * D, dO + base, r0 + BR, N, tid);
      fast::cp_async_commit();
    }
    if (tid < BR) {
      lb[tid] = __fmul_rn(lNext, 1.4426950408889634f);
      dd[tid] = dNext;
      lNext = dNext = 0.f;
      if (r0 + BR + tid < N) {
        lNext = __ldcg(&L[(size_t)bh * N + r0 + BR + tid]);
        dNext = __ldcg(&Delta[(size_t)bh * N + r0 + BR + tid]);
      }
    }
    if (i + 1 < Tr) fast::cp_async_wait<1>();
    else fast::cp_async_wait<0>();
    __syncthreads(); // q-tile i's Q_i, dO_i, L_i and D_i are in

    //> recompute: Sᵀ = K_j Q_iᵀ by mma.sync, then Pᵀ = 2^(S·sl2 − L·log2 e): no running max, L is final
    // A tile with no padding and nothing masked (most of them) takes a
    // path without the per-element tests.
    float p[NI][4];
    mma_nt<BR, D>(p, sK, wc, q, lane);
    if (c0 + BC <= N && r0 + BR <= N && (!causal || c0 + BC - 1 <= r0)) {
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = ni * 8 + 2 * t + (e & 1);
          FS_TRACED(const int c = wc + g + (e >> 1) * 8;
                    if (full) pl[fs_bwd_step_s(BR, BC, D, N) + r * BC + c] = __fmul_rn(p[ni][e], scale);)
          p[ni][e] = fast::ex2(fmaf(p[ni][e], sl2, -lb[r]));
          FS_TRACED(if (full) pl[fs_bwd_step_p(BR, BC, D, N) + r * BC + c] = p[ni][e];)
        }
    } else {
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int c = wc + g + (e >> 1) * 8, r = ni * 8 + 2 * t + (e & 1);
          const bool pad = c0 + c >= N || r0 + r >= N;
          const bool masked = !pad && causal && c0 + c > r0 + r;
          FS_TRACED(if (full) pl[fs_bwd_step_s(BR, BC, D, N) + r * BC + c] = pad ? 0.f : masked ? FS_NEG_INF : __fmul_rn(p[ni][e], scale);)
          p[ni][e] = pad || masked ? 0.f : fast::ex2(fmaf(p[ni][e], sl2, -lb[r]));
          FS_TRACED(if (full) pl[fs_bwd_step_p(BR, BC, D, N) + r * BC + c] = p[ni][e];)
        }
    }

    //> dp-ds: dPᵀ = V_j dO_iᵀ by mma.sync, then dSᵀ = Pᵀ ∘ (dPᵀ − D_i) in float32, rounded to bf16 as it is made: in registers for dK, and to shared memory for dQ
    uint32_t dsk[NI][2];
    {
      float dp[NI][4];
      mma_nt<BR, D>(dp, sV, wc, d_o, lane);
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        float ds[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = ni * 8 + 2 * t + (e & 1);
          ds[e] = __fmul_rn(p[ni][e], __fsub_rn(dp[ni][e], dd[r]));
          FS_TRACED(const int c = wc + g + (e >> 1) * 8; if (full) {
            pl[fs_bwd_step_dp(BR, BC, D, N) + r * BC + c] = dp[ni][e];
            pl[fs_bwd_step_ds(BR, BC, D, N) + r * BC + c] = ds[e];
          })
        }
        dsk[ni][0] = fast::pack_bf16(ds[0], ds[1]);
        dsk[ni][1] = fast::pack_bf16(ds[2], ds[3]);
        // dS^T as it lies in the registers, a bf16 pair per store: the
        // q-tile's columns ni·8.. are chunk ni of rows g and g+8.
        *reinterpret_cast<uint32_t *>(sDS + fast::swz<CQ>(wc + g, ni) * 8 + 2 * t) = dsk[ni][0];
        *reinterpret_cast<uint32_t *>(sDS + fast::swz<CQ>(wc + g + 8, ni) * 8 + 2 * t) = dsk[ni][1];
      }
    }

    //> dv: dV_j += bf16(Pᵀ) dO_i by mma.sync, Pᵀ straight from the registers that made it
    uint32_t pk[NI][2];
    pack(p, pk);
    mma_acc<BR, D>(dv, pk, d_o, lane);

    //> dk: dK_j += bf16(dSᵀ) Q_i by mma.sync
    mma_acc<BR, D>(dk, dsk, q, lane);
    __syncthreads(); // every warp's dS is in

    //> dq: dQ_i += dS K_j by mma.sync, each warp on 16 q rows and DW columns, added atomically into device memory: every kv-tile's block adds to it
    // dS is the A operand: ldmatrix.trans reads it out of dS^T. The part is
    // staged in shared memory so that each atomic add of a warp covers 32
    // adjacent floats, one 128-byte line, not eight rows' scattered pairs
    // as the accumulator holds them: a quarter of the L2 sectors per add,
    // and (measured on the H100) the adds then cost nothing over leaving
    // them out.
#pragma unroll 1
    for (int pass = 0; pass < DW / PW; pass++) {
      const int x0 = wd + pass * PW; // the pass's first column
      float dq[PW / 8][4];
#pragma unroll
      for (int di = 0; di < PW / 8; di++) dq[di][0] = dq[di][1] = dq[di][2] = dq[di][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BC / 16; kk++) {
        uint32_t a[4];
        fast::ldsm_x4_trans(fast::smem_addr(sDS + fast::swz<CQ>(kk * 16 + (lane & 7) + ((lane >> 4) << 3), wq / 8 + ((lane >> 3) & 1)) * 8),
                            a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int d2 = 0; d2 < PW / 16; d2++) {
          uint32_t b0, b1, b2, b3;
          fast::ldsm_x4_trans(
              fast::smem_addr(sK + fast::swz<CH>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), x0 / 8 + d2 * 2 + (lane >> 4)) * 8),
              b0, b1, b2, b3);
          fast::mma16816(dq[2 * d2], a, b0, b1);
          fast::mma16816(dq[2 * d2 + 1], a, b2, b3);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int di = 0; di < PW / 8; di++)
          *reinterpret_cast<float2 *>(sStage + (g + 8 * h) * SP + di * 8 + 2 * t) = make_float2(dq[di][2 * h], dq[di][2 * h + 1]);
      __syncwarp();
#pragma unroll
      for (int rr = 0; rr < 16; rr++)
        if (r0 + wq + rr < N) {
#pragma unroll
          for (int cc = 0; cc < PW / 32; cc++)
            atomicAdd(dQ + base + (size_t)(r0 + wq + rr) * D + x0 + cc * 32 + lane, sStage[rr * SP + cc * 32 + lane]);
        }
      __syncwarp(); // the next pass stages over it
#ifdef FS_TRACE
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = wq + g + h * 8;
        if (full) {
          float *tr = pl + fs_bwd_step_dq(BR, BC, D, N) + r * D + x0 + 2 * t;
          for (int di = 0; di < PW / 8; di++) {
            tr[di * 8] = r0 + r < N ? dq[di][2 * h] : 0.f;
            tr[di * 8 + 1] = r0 + r < N ? dq[di][2 * h + 1] : 0.f;
          }
        }
      }
#endif
    }
    //> end

#ifdef FS_TRACE
    if (cur.rec) {
      if (full) {
#pragma unroll
        for (int di = 0; di < DI; di++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int row = wc + g + (e >> 1) * 8, x = di * 8 + 2 * t + (e & 1);
            pl[fs_bwd_step_dv(BR, BC, D, N) + row * D + x] = dv[di][e];
            pl[fs_bwd_step_dk(BR, BC, D, N) + row * D + x] = dk[di][e];
          }
        if (tid == 0) fs_zero_padding(cur, fs_bwd_step_dq(BR, BC, D, N) + BR * D, fs_bwd_step_record_bytes(BR, BC, D, N));
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        const int colsValid = min(BC, N - c0);
        unsigned long long rd = 2ull * rowsValid * D * 2 + 2ull * rowsValid * 4;
        unsigned long long wr = (unsigned long long)rowsValid * D * 4;
        if (i == iStart) rd += 2ull * colsValid * D * 2;
        if (i == Tr - 1) wr += 2ull * colsValid * D * 4;
        fs_write_header(cur, FS_KIND_BWD_STEP, bh, i, j, rowsValid, colsValid, rd, wr);
      }
    }
#endif
  }

  //> write-dkdv: dK_j · scale and dV_j to device memory in float32, once
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int c = c0 + wc + g + h * 8;
    if (c < N) {
#pragma unroll
      for (int di = 0; di < DI; di++) {
        const size_t at = base + (size_t)c * D + di * 8 + 2 * t;
        *reinterpret_cast<float2 *>(dK + at) = make_float2(__fmul_rn(dk[di][2 * h], scale), __fmul_rn(dk[di][2 * h + 1], scale));
        *reinterpret_cast<float2 *>(dV + at) = make_float2(dv[di][2 * h], dv[di][2 * h + 1]);
      }
    }
  }
}
//> end


//> dq-scale: dQ_i = accumulator · scale, once every kv-tile's block has added to it (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void dq_scale(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// The main kernel's dynamic shared memory, in bytes (Flash2BwdMMASharedBytes
// in flash2_bwd_mma.go): K_j and V_j, two buffers each of Q_i and dO_i, dS^T,
// all bf16; two buffers each of L_i·log2 e and D_i, and each warp's staged
// 16 x (PW + 8) part of dQ_i, in float32.
constexpr int smem_bytes(int BR, int BC, int D) {
  return 2 * (2 * BC * D + 4 * BR * D + BR * BC) + 4 * 4 * BR + (BC / 16) * 16 * (dq_pass(BR, BC, D) + 8) * 4;
}

} // namespace flash2_bwd_mma

namespace flash2_bwd_mma {
// How many blocks of the main kernel an SM should hold at once, which caps
// its registers (65536 / (threads · blocks)). The 4-warp tile at d = 64
// takes 168 registers a thread with no spill for three (224 for two):
// 12 warps an SM where 8 were, 13% faster on the H100 (docs/LADDER.md, run
// p). The others keep dK and dV of d = 128, or 8 warps, in registers: one.
__host__ __device__ constexpr int main_blocks(int BR, int BC, int D) { return BC / 16 == 4 && D == 64 ? 3 : 1; }
} // namespace flash2_bwd_mma

// Each compiled tile is three extern "C" kernels named after it: keep in
// step with the registry's Tiles (a test checks).
#define FLASH2_BWD_MMA_INSTANCE(BR, BC, D, NW)                                                                        \
  extern "C" __global__ void __launch_bounds__(NW * 32) flash2_bwd_mma_pre_br##BR##_bc##BC##_d##D(                   \
      const fast::bf16 *__restrict__ dO, const fast::bf16 *__restrict__ O, const float *__restrict__ L,               \
      float *__restrict__ Delta, float *__restrict__ dQ, long long N FS_TRACE_PARAMS) {                                \
    flash2_bwd_mma::pre<BR, BC, D, NW * 32>(dO, O, L, Delta, dQ, (int)N FS_TRACED(, fs_trace, fs_offsets, fs_mode));   \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(NW * 32, flash2_bwd_mma::main_blocks(BR, BC, D))                      \
      flash2_bwd_mma_main_br##BR##_bc##BC##_d##D(                                                                     \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,           \
      const fast::bf16 *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ Delta,                \
      float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, long long N,                            \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                                \
    flash2_bwd_mma::main_block<BR, BC, D, NW>(Q, K, V, dO, L, Delta, dQ, dK, dV, (int)N,                              \
                                              __uint_as_float((unsigned)scaleBits), (int)causal                       \
                                              FS_TRACED(, fs_trace, fs_offsets, fs_mode));                            \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(NW * 32) flash2_bwd_mma_dq_br##BR##_bc##BC##_d##D(                    \
      float *__restrict__ dQ, long long N, unsigned long long scaleBits FS_TRACE_PARAMS) {                             \
    flash2_bwd_mma::dq_scale<BR, BC, D, NW * 32>(dQ, (int)N, __uint_as_float((unsigned)scaleBits)                     \
                                                 FS_TRACED(, fs_trace, fs_offsets, fs_mode));                         \
  }

FLASH2_BWD_MMA_INSTANCE(64, 64, 64, 4)
FLASH2_BWD_MMA_INSTANCE(64, 128, 128, 8)
FLASH2_BWD_MMA_INSTANCE(64, 128, 64, 8)
FLASH2_BWD_MMA_INSTANCE(64, 64, 128, 4)
