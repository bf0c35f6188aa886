// needs: sm_90a
// The backward pass on Hopper's warpgroup products: the backward ladder's
// first Hopper rung, whose CPU mirror is flash2_bwd_mma's
// (flash3_bwd_wgmma.go). Needs sm_90a; scripts/ptx-hopper builds its PTX.
//
// The loop, the three kernels and the arithmetic are flash2_bwd_mma.cu's;
// who multiplies changes, as from rung 6 to rung 7 forward. One block of
// BC/64 warpgroups per kv-tile j: warpgroup w holds kv rows 64w..64w+63 of
// K_j and V_j, and their dK_j and dV_j in registers; warp w%4 of it rows
// 16·(w%4).. of those, as a flash2_bwd_mma warp holds its 16, so each
// thread keeps the same elements of every tile as there. Per q-tile i of
// BR = 64 rows:
//
//   Sᵀ  = K_j Q_iᵀ        d/16 wgmma m64n64k16, both from shared memory
//   dPᵀ = V_j dO_iᵀ       likewise, in the same group
//   Pᵀ, dSᵀ               as flash2_bwd_mma, element for element
//   dV_j += bf16(Pᵀ) dO_i BR/16 wgmma, Pᵀ from registers (the accumulator's
//                         layout is A's), dO_i read transposed
//   dK_j += bf16(dSᵀ) Q_i likewise
//   dQ_i += dS K_j        BC/16 wgmma m64n64k16 per 64 columns: dSᵀ goes
//                         to shared memory in bf16 and is read back
//                         transposed as A, K_j transposed as B; warpgroup
//                         w takes dQ_i's columns w·d/(BC/64).., and adds its
//                         part into the float32 accumulator in device
//                         memory a row of 32 floats at a time, atomically
//
// Q_i and dO_i of the next q-tile come in by cp.async while this one is
// multiplied; every product is waited for at once (wgmma_wait<0>): the
// later rungs' ideas (TMA, a producer warp, dQ without per-element
// atomics) are not here. The pre and dq kernels are common/bwd_ends.cuh's.
// The q-tile's products (qtile), the step's record and dK/dV's write are
// the next rung's too: flash3_bwd_tma.cu includes this file with
// FLASH3_BWD_WGMMA_NO_INSTANCES defined, for them alone.
#ifndef FLASHSTEP_FLASH3_BWD_WGMMA_CU
#define FLASHSTEP_FLASH3_BWD_WGMMA_CU
#include "../common/instrument.cuh"
#include "../common/bwd_ends.cuh"
#include "wgmma.cuh"

namespace flash3_bwd_wgmma {

using fast::bf16;
using hopper::desc;
using hopper::panel_offset;

// dQ_i's columns per warpgroup; a pass multiplies 64 of them.
__host__ __device__ constexpr int dq_cols(int BC, int D) { return D / (BC / 64); }
// A warp stages its 16 rows of a pass's 64 columns of dQ_i in shared memory,
// each row 8 floats longer than the pass so that rows start 8 banks apart.
constexpr int stage_row = 64 + 8, stage_floats = 16 * stage_row;

// AtomicDQ is how qtile adds a warp's part of dQ_i here and in
// flash3_bwd_tma: staged in shared memory, then a float32 atomicAdd per
// element, a 128-byte line per warp-wide add. flash3_bwd_bulk.cu passes
// its own (the copy engine's bulk reduce), with bulk set.
struct AtomicDQ {
  static constexpr bool bulk = false;
  // Stages of flash3_bwd_tma's q-tile pipeline when it adds this way.
  static constexpr int stages = 3;
  // A warp's stage, in floats: one pass's 16 rows, padded.
  template <int BC, int D> __host__ __device__ static constexpr int warp_floats() { return stage_floats; }
  __device__ __forceinline__ void finish() const {}
};

//> pre: D_i = rowsum(dO_i ∘ O_i) from bf16 rows, in float32; the float32 dQ accumulator of q-tile i set to zero (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void pre(const bf16 *__restrict__ dO, const bf16 *__restrict__ O, const float *__restrict__ L,
                                    float *__restrict__ Delta, float *__restrict__ dQ, int N FS_TRACE_PARAMS) {
  bwd_ends::pre<BR, BC, D, NT>(dO, O, L, Delta, dQ, N FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// qtile is one step of kv-tile j's block: the products of q-tile i, whose
// Q_i and dO_i sit in swizzled panels at q and d_o, L_i·log2 e and D_i in
// lb and dd, into this thread's dv and dk and, through dSᵀ at sDS and the
// warp's stage, dQ_i in device memory. Every thread of the block calls it
// with all of the tile in shared memory; it leaves every product waited
// for. The next Hopper backward rungs (flash3_bwd_tma.cu) bring their
// tiles in another way and call this for their products; dqs says how a
// warp's part of dQ_i reaches device memory (AtomicDQ here and there,
// the copy engine's bulk reduce in flash3_bwd_bulk.cu).
template <int BR, int BC, int D, class DQ>
__device__ __forceinline__ void qtile(const bf16 *q, const bf16 *d_o, const float *lb, const float *dd, const bf16 *sK,
                                      const bf16 *sV, bf16 *sDS, float *sStage, float *__restrict__ dQ,
                                      float (&dv)[D / 2], float (&dk)[D / 2], size_t base, int r0, int c0, int N,
                                      float scale, int causal, const DQ &dqs FS_TRACED(, float *pl, bool full)) {
  constexpr int NI = BR / 8; // 8-column atoms of Sᵀ: q rows
  constexpr int DW = dq_cols(BC, D), PW = 64, SP = stage_row;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t = lane & 3;
  const int wc = warp * 16;       // the warp's kv rows in the tile
  const int wq = (warp & 3) * 16; // its q rows in dQ_i
  const int wd = wg * DW;         // its warpgroup's first column of dQ_i
  const float sl2 = scale * 1.4426950408889634f;
  // This warpgroup's 64 kv rows of K_j and V_j as the A operand: k-steps of
  // 16 advance 32 bytes within a panel, then jump to the next panel.
  const uint32_t kRows = fast::smem_addr(sK) + wg * 64 * 128, vRows = fast::smem_addr(sV) + wg * 64 * 128;
  const uint32_t dsBase = fast::smem_addr(sDS), kBase = fast::smem_addr(sK);

  //> recompute: Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ by wgmma from shared memory, then Pᵀ = 2^(S·sl2 − L·log2 e): no running max, L is final
  const uint32_t qB = fast::smem_addr(q), doB = fast::smem_addr(d_o);
  float p[BR / 2], dp[BR / 2];
  hopper::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    const uint32_t at = (kk >> 2) * BC * 128 + (kk & 3) * 32, bt = (kk >> 2) * BR * 128 + (kk & 3) * 32;
    hopper::wgmma_ss_n64(p, desc(kRows + at, 16, 1024), desc(qB + bt, 16, 1024), kk > 0);
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    const uint32_t at = (kk >> 2) * BC * 128 + (kk & 3) * 32, bt = (kk >> 2) * BR * 128 + (kk & 3) * 32;
    hopper::wgmma_ss_n64(dp, desc(vRows + at, 16, 1024), desc(doB + bt, 16, 1024), kk > 0);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait<0>();
  hopper::keep(p);
  hopper::keep(dp);
  // p[4·ni + e] is kv row wc + g + 8·(e/2), q row ni·8 + 2t + e%2, as a
  // flash2_bwd_mma thread's p[ni][e]. A tile with no padding and nothing
  // masked (most of them) takes a path without the per-element tests.
  if (c0 + BC <= N && r0 + BR <= N && (!causal || c0 + BC - 1 <= r0)) {
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = ni * 8 + 2 * t + (e & 1);
        FS_TRACED(const int c = wc + g + (e >> 1) * 8;
                  if (full) pl[fs_bwd_step_s(BR, BC, D, N) + r * BC + c] = __fmul_rn(p[4 * ni + e], scale);)
        p[4 * ni + e] = fast::ex2(fmaf(p[4 * ni + e], sl2, -lb[r]));
        FS_TRACED(if (full) pl[fs_bwd_step_p(BR, BC, D, N) + r * BC + c] = p[4 * ni + e];)
      }
  } else {
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = wc + g + (e >> 1) * 8, r = ni * 8 + 2 * t + (e & 1);
        const bool pad = c0 + c >= N || r0 + r >= N;
        const bool masked = !pad && causal && c0 + c > r0 + r;
        FS_TRACED(if (full) pl[fs_bwd_step_s(BR, BC, D, N) + r * BC + c] = pad ? 0.f : masked ? FS_NEG_INF : __fmul_rn(p[4 * ni + e], scale);)
        p[4 * ni + e] = pad || masked ? 0.f : fast::ex2(fmaf(p[4 * ni + e], sl2, -lb[r]));
        FS_TRACED(if (full) pl[fs_bwd_step_p(BR, BC, D, N) + r * BC + c] = p[4 * ni + e];)
      }
  }

  //> dp-ds: dSᵀ = Pᵀ ∘ (dPᵀ − D_i) in float32, rounded to bf16 as it is made: in registers for dK, and to shared memory for dQ
  uint32_t dsk[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    float ds[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = ni * 8 + 2 * t + (e & 1);
      ds[e] = __fmul_rn(p[4 * ni + e], __fsub_rn(dp[4 * ni + e], dd[r]));
      FS_TRACED(const int c = wc + g + (e >> 1) * 8; if (full) {
        pl[fs_bwd_step_dp(BR, BC, D, N) + r * BC + c] = dp[4 * ni + e];
        pl[fs_bwd_step_ds(BR, BC, D, N) + r * BC + c] = ds[e];
      })
    }
    dsk[ni][0] = fast::pack_bf16(ds[0], ds[1]);
    dsk[ni][1] = fast::pack_bf16(ds[2], ds[3]);
    // dSᵀ in its panel, a bf16 pair per store: kv rows wc+g and wc+g+8,
    // q columns ni·8+2t and the next.
    *reinterpret_cast<uint32_t *>(reinterpret_cast<unsigned char *>(sDS) + panel_offset<BC>(wc + g, ni * 8 + 2 * t)) = dsk[ni][0];
    *reinterpret_cast<uint32_t *>(reinterpret_cast<unsigned char *>(sDS) + panel_offset<BC>(wc + g + 8, ni * 8 + 2 * t)) = dsk[ni][1];
  }

  //> dv: dV_j += bf16(Pᵀ) dO_i by wgmma, Pᵀ straight from the registers that made it, dO_i read transposed
  uint32_t pk[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    pk[ni][0] = fast::pack_bf16(p[4 * ni], p[4 * ni + 1]);
    pk[ni][1] = fast::pack_bf16(p[4 * ni + 2], p[4 * ni + 3]);
  }
  hopper::wgmma_fence();
  hopper::keep(dv);
  hopper::keep(dk);
#pragma unroll
  for (int kk = 0; kk < BR / 16; kk++) {
    const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
    hopper::wgmma_o<D>(dv, a, desc(doB + kk * 16 * 128, BR * 128, 1024));
  }
  //> dk: dK_j += bf16(dSᵀ) Q_i by wgmma, dSᵀ from registers, in the same group of products as dV
#pragma unroll
  for (int kk = 0; kk < BR / 16; kk++) {
    const uint32_t a[4] = {dsk[2 * kk][0], dsk[2 * kk][1], dsk[2 * kk + 1][0], dsk[2 * kk + 1][1]};
    hopper::wgmma_o<D>(dk, a, desc(qB + kk * 16 * 128, BR * 128, 1024));
  }
  hopper::wgmma_commit();
  hopper::fence_async_shared(); // this thread's dSᵀ stores, visible to the tensor cores
  __syncthreads();              // every warpgroup's dSᵀ is in

  //> dq: dQ_i += dS K_j by wgmma, dS read transposed out of dSᵀ, each warpgroup on its columns, added atomically into device memory: every kv-tile's block adds to it
  // The part is staged in shared memory so that each atomic add of a warp
  // covers 32 adjacent floats, one 128-byte line (flash2_bwd_mma.cu).
#pragma unroll 1
  for (int pass = 0; pass < DW / PW; pass++) {
    const int x0 = wd + pass * PW; // the pass's first column: one panel of K_j
    float dq[PW / 2];
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++)
      hopper::wgmma_ss_n64_tt(dq, desc(dsBase + kk * 16 * 128, BC * 128, 1024),
                              desc(kBase + (x0 >> 6) * BC * 128 + kk * 16 * 128, BC * 128, 1024), kk > 0);
    hopper::wgmma_commit();
    hopper::wgmma_wait<0>(); // dV, dK and this pass's dQ
    hopper::keep(dq);
    if constexpr (DQ::bulk) {
      dqs.add(dq, sStage, pass, x0, r0 + wq);
    } else {
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int di = 0; di < PW / 8; di++)
          *reinterpret_cast<float2 *>(sStage + (g + 8 * h) * SP + di * 8 + 2 * t) = make_float2(dq[4 * di + 2 * h], dq[4 * di + 2 * h + 1]);
      __syncwarp();
#pragma unroll
      for (int rr = 0; rr < 16; rr++)
        if (r0 + wq + rr < N) {
#pragma unroll
          for (int cc = 0; cc < PW / 32; cc++)
            atomicAdd(dQ + base + (size_t)(r0 + wq + rr) * D + x0 + cc * 32 + lane, sStage[rr * SP + cc * 32 + lane]);
        }
      __syncwarp(); // the next pass stages over it
    }
#ifdef FS_TRACE
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = wq + g + h * 8;
      if (full) {
        float *tr = pl + fs_bwd_step_dq(BR, BC, D, N) + r * D + x0 + 2 * t;
        for (int di = 0; di < PW / 8; di++) {
          tr[di * 8] = r0 + r < N ? dq[4 * di + 2 * h] : 0.f;
          tr[di * 8 + 1] = r0 + r < N ? dq[4 * di + 2 * h + 1] : 0.f;
        }
      }
    }
#endif
  }
  hopper::keep(dv);
  hopper::keep(dk);
  //> end
}

#ifdef FS_TRACE
// step_record ends step (i, j)'s record: this thread's dV_j and dK_j as they
// stand after q-tile i, and the header, once every thread's payload is in.
template <int BR, int BC, int D>
__device__ __forceinline__ void step_record(fs_cursor &cur, bool full, float *pl, const float (&dv)[D / 2],
                                            const float (&dk)[D / 2], int bh, int i, int j, int iStart, int Tr, int c0,
                                            int N) {
  constexpr int DI = D / 8; // 8-column atoms of dK, dV
  const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3, wc = (tid >> 5) * 16;
  const int rowsValid = min(BR, N - i * BR);
  if (cur.rec) {
    if (full) {
#pragma unroll
      for (int di = 0; di < DI; di++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int row = wc + g + (e >> 1) * 8, x = di * 8 + 2 * t + (e & 1);
          pl[fs_bwd_step_dv(BR, BC, D, N) + row * D + x] = dv[4 * di + e];
          pl[fs_bwd_step_dk(BR, BC, D, N) + row * D + x] = dk[4 * di + e];
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
}
#endif

//> write-dkdv: dK_j · scale and dV_j to device memory in float32, once
template <int BR, int BC, int D>
__device__ __forceinline__ void write_dkdv(float *__restrict__ dK, float *__restrict__ dV, const float (&dv)[D / 2],
                                           const float (&dk)[D / 2], size_t base, int c0, int N, float scale) {
  constexpr int DI = D / 8; // 8-column atoms of dK, dV
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wc = (threadIdx.x >> 5) * 16;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int c = c0 + wc + g + h * 8;
    if (c < N) {
#pragma unroll
      for (int di = 0; di < DI; di++) {
        const size_t at = base + (size_t)c * D + di * 8 + 2 * t;
        *reinterpret_cast<float2 *>(dK + at) = make_float2(__fmul_rn(dk[4 * di + 2 * h], scale), __fmul_rn(dk[4 * di + 2 * h + 1], scale));
        *reinterpret_cast<float2 *>(dV + at) = make_float2(dv[4 * di + 2 * h], dv[4 * di + 2 * h + 1]);
      }
    }
  }
}
//> end

template <int BR, int BC, int D>
__device__ __forceinline__ void main_block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ V,
                                           const bf16 *__restrict__ dO, const float *__restrict__ L,
                                           const float *__restrict__ Delta, float *__restrict__ dQ, float *__restrict__ dK,
                                           float *__restrict__ dV, int N, float scale, int causal FS_TRACE_PARAMS) {
  constexpr int NWG = BC / 64, NT = NWG * 128;
  static_assert(BR == 64, "Sᵀ is m64n64: a q-tile of 64 rows, one panel of dSᵀ");
  static_assert(BC % 64 == 0 && D % 64 == 0 && dq_cols(BC, D) % 64 == 0, "whole warpgroups, whole panels, whole passes of dQ");

  extern __shared__ unsigned char smem_raw[];
  // The panels' swizzle repeats every 1024 bytes and the descriptors assume
  // each panel starts on that period; every tile below is a multiple of it.
  unsigned char *smem = smem_raw + ((1024 - (fast::smem_addr(smem_raw) & 1023)) & 1023);
  bf16 *sK = reinterpret_cast<bf16 *>(smem);
  bf16 *sV = sK + BC * D;
  bf16 *sQ = sV + BC * D;       // two buffers of BR x D: the q-tile and the next
  bf16 *sDO = sQ + 2 * BR * D;  // likewise
  bf16 *sDS = sDO + 2 * BR * D; // dSᵀ, BC x BR: one panel
  float *sLb = reinterpret_cast<float *>(sDS + BC * BR); // two buffers of BR: L·log2 e
  float *sD = sLb + 2 * BR;                              // two buffers of BR: D
  float *sStage = sD + 2 * BR + (threadIdx.x >> 5) * stage_floats; // this warp's part of dQ_i

  const int tid = threadIdx.x;
  const int j = blockIdx.x, bh = blockIdx.y;
  const int c0 = j * BC;
  const int Tr = (N + BR - 1) / BR;
  const size_t base = (size_t)bh * N * D;
  const int iStart = causal ? c0 / BR : 0;

  //> load-kv: K_j and V_j by cp.async into swizzled panels, once per block, with the first q-tile's Q_i and dO_i; dK_j and dV_j start at zero
  hopper::load_panels<BC, D, NT>(sK, K + base, c0, N, tid);
  hopper::load_panels<BC, D, NT>(sV, V + base, c0, N, tid);
  hopper::load_panels<BR, D, NT>(sQ, Q + base, iStart * BR, N, tid);
  hopper::load_panels<BR, D, NT>(sDO, dO + base, iStart * BR, N, tid);
  fast::cp_async_commit();
  float lNext = 0.f, dNext = 0.f; // L_i and D_i of this thread's row, a q-tile ahead
  if (tid < BR && iStart * BR + tid < N) {
    lNext = __ldcg(&L[(size_t)bh * N + iStart * BR + tid]);
    dNext = __ldcg(&Delta[(size_t)bh * N + iStart * BR + tid]);
  }
  float dv[D / 2], dk[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) dv[x] = dk[x] = 0.f;

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
    // The buffers written here were last read by q-tile i-1's products,
    // which every warpgroup had waited for before the barrier that ends it.
    if (i + 1 < Tr) {
      hopper::load_panels<BR, D, NT>(sQ + (buf ^ 1) * BR * D, Q + base, r0 + BR, N, tid);
      hopper::load_panels<BR, D, NT>(sDO + (buf ^ 1) * BR * D, dO + base, r0 + BR, N, tid);
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
    hopper::fence_async_shared(); // the landed tiles, visible to the tensor cores' reads
    __syncthreads();              // q-tile i's Q_i, dO_i, L_i and D_i are in
    //> end

    qtile<BR, BC, D>(q, d_o, lb, dd, sK, sV, sDS, sStage, dQ, dv, dk, base, r0, c0, N, scale, causal, AtomicDQ{} FS_TRACED(, pl, full));
    FS_TRACED(step_record<BR, BC, D>(cur, full, pl, dv, dk, bh, i, j, iStart, Tr, c0, N);)
    __syncthreads(); // every warpgroup is through q-tile i's products: its buffers and dSᵀ may be written again
  }

  write_dkdv<BR, BC, D>(dK, dV, dv, dk, base, c0, N, scale);
}

//> dq-scale: dQ_i = accumulator · scale, once every kv-tile's block has added to it (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void dq_scale(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// The main kernel's dynamic shared memory, in bytes (Flash3BwdWGMMASharedBytes
// in flash3_bwd_wgmma.go): K_j and V_j, two buffers each of Q_i and dO_i,
// dSᵀ, all bf16 panels; two buffers each of L_i·log2 e and D_i and each
// warp's staged 16 x 72 part of dQ_i, in float32; and 1024 bytes to align
// the first panel to the swizzle's period.
constexpr int smem_bytes(int BR, int BC, int D) {
  return 2 * (2 * BC * D + 4 * BR * D + BR * BC) + 4 * 4 * BR + (BC / 16) * 16 * (64 + 8) * 4 + 1024;
}

} // namespace flash3_bwd_wgmma

// Each compiled tile is three extern "C" kernels named after it: keep in
// step with the registry's Tiles (a test checks).
#define FLASH3_BWD_WGMMA_INSTANCE(BR, BC, D)                                                                          \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_wgmma_pre_br##BR##_bc##BC##_d##D(                   \
      const fast::bf16 *__restrict__ dO, const fast::bf16 *__restrict__ O, const float *__restrict__ L,               \
      float *__restrict__ Delta, float *__restrict__ dQ, long long N FS_TRACE_PARAMS) {                                \
    flash3_bwd_wgmma::pre<BR, BC, D, BC * 2>(dO, O, L, Delta, dQ, (int)N FS_TRACED(, fs_trace, fs_offsets, fs_mode));  \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2, 1) flash3_bwd_wgmma_main_br##BR##_bc##BC##_d##D(               \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,           \
      const fast::bf16 *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ Delta,                \
      float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, long long N,                            \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                                \
    flash3_bwd_wgmma::main_block<BR, BC, D>(Q, K, V, dO, L, Delta, dQ, dK, dV, (int)N,                                \
                                            __uint_as_float((unsigned)scaleBits), (int)causal                         \
                                            FS_TRACED(, fs_trace, fs_offsets, fs_mode));                              \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_wgmma_dq_br##BR##_bc##BC##_d##D(                    \
      float *__restrict__ dQ, long long N, unsigned long long scaleBits FS_TRACE_PARAMS) {                             \
    flash3_bwd_wgmma::dq_scale<BR, BC, D, BC * 2>(dQ, (int)N, __uint_as_float((unsigned)scaleBits)                    \
                                                  FS_TRACED(, fs_trace, fs_offsets, fs_mode));                        \
  }

#ifndef FLASH3_BWD_WGMMA_NO_INSTANCES
FLASH3_BWD_WGMMA_INSTANCE(64, 128, 128)
FLASH3_BWD_WGMMA_INSTANCE(64, 64, 64)
FLASH3_BWD_WGMMA_INSTANCE(64, 64, 128)
#endif
#endif // FLASHSTEP_FLASH3_BWD_WGMMA_CU
