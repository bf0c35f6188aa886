// needs: sm_90a
// The Hopper backward with its loads done by the tensor memory accelerator:
// the backward ladder's second Hopper rung, whose CPU mirror is
// flash2_bwd_mma's (flash3_bwd_tma.go). Needs sm_90a; scripts/ptx-hopper
// builds its PTX.
//
// In flash3_bwd_wgmma every thread loads: each q-tile, all of the block's
// threads compute addresses of Q_i's and dO_i's 16-byte chunks, issue a
// cp.async for each, and then wait for their own, while 64 of them read L_i
// and D_i a q-tile ahead with plain loads, and everyone meets at a
// __syncthreads before the first product. Here one thread asks the copy
// engine (tma.cuh) for each q-tile's four pieces, Q_i and dO_i as swizzled
// panels, L_i and D_i as runs of 64 floats, all counted off one mbarrier,
// into NS stages: the stage a q-tile frees is refilled with the q-tile NS
// on, so while one is multiplied the next NS − 1 are on their way. The
// copies run on their own while the warpgroups multiply, and a warpgroup
// waits on the barrier
// for the bytes themselves, not for the other threads' loads. K_j and V_j
// come the same way, once per block.
//
// Per q-tile i, in stage s = (i − i₀) mod NS:
//
//   wait for stage s's barrier (Q_i, dO_i, L_i, D_i have landed)
//   the five products, dS and dQ_i's atomic adds: flash3_bwd_wgmma's
//   qtile, unchanged (this file includes it)
//   __syncthreads: every warpgroup is done with stage s and with dSᵀ;
//   thread 0 asks for q-tile i + NS into stage s
//
// A thread's rows, columns and arithmetic are flash3_bwd_wgmma's (and so
// flash2_bwd_mma's), so its mirror and bound are theirs.
#ifndef FLASHSTEP_FLASH3_BWD_TMA_CU
#define FLASHSTEP_FLASH3_BWD_TMA_CU
#define FLASH3_BWD_WGMMA_NO_INSTANCES
#include "flash3_bwd_wgmma.cu"
#include "tma.cuh"

namespace flash3_bwd_tma {

using fast::bf16;
using hopper::TensorMap;

// Stages of the q-tile pipeline: three q-tiles in flight fit shared memory
// at every compiled tile (smem_bytes). main_block takes its stages from the
// way it adds dQ (DQ::stages): flash3_bwd_bulk's keeps two.
constexpr int NS = 3;
static_assert(NS == flash3_bwd_wgmma::AtomicDQ::stages, "this rung's stages");

//> pre: D_i = rowsum(dO_i ∘ O_i) from bf16 rows, in float32, and L_i·log2 e beside it, both in whole q-tiles of rows so that the copy engine reads each q-tile's as one aligned run; the float32 dQ accumulator of q-tile i set to zero (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void pre(const bf16 *__restrict__ dO, const bf16 *__restrict__ O, const float *__restrict__ L,
                                    float *__restrict__ Delta, float *__restrict__ dQ, int N, float *__restrict__ LT FS_TRACE_PARAMS) {
  bwd_ends::pre<BR, BC, D, NT, true>(dO, O, L, Delta, dQ, N FS_TRACED(, fs_trace, fs_offsets, fs_mode), LT);
}
//> end

// load_qtile has the copy engine bring q-tile i's Q_i and dO_i (swizzled
// panels, rows past N as zeros) and L_i·log2 e and D_i (BR floats each, as
// the pre kernel laid them out: a whole q-tile per run, rows past N zero)
// into stage s, counted off its barrier. One thread calls it.
template <int BR, int D>
__device__ __forceinline__ void load_qtile(bf16 *q, bf16 *d_o, float *l, float *dd, uint64_t *bar, const TensorMap *tmQ,
                                           const TensorMap *tmDO, const TensorMap *tmL, const TensorMap *tmD, int r0,
                                           int bh, int Tr) {
  hopper::mbar_expect(bar, 2 * BR * D * 2 + 2 * BR * 4);
  hopper::tma_load_panels<BR, D>(q, tmQ, r0, bh, bar);
  hopper::tma_load_panels<BR, D>(d_o, tmDO, r0, bh, bar);
  hopper::tma_load_run(l, tmL, bh * Tr * BR + r0, bar);
  hopper::tma_load_run(dd, tmD, bh * Tr * BR + r0, bar);
}

// main_block is kv-tile j's block. dqs says how a warp's part of dQ_i
// reaches device memory: flash3_bwd_wgmma::AtomicDQ here, the copy
// engine's bulk reduce in flash3_bwd_bulk.cu (whose stages, read by the
// copy engine in 1024-byte swizzle periods, come before L_i and D_i's).
template <int BR, int BC, int D, class DQ>
__device__ __forceinline__ void main_block(const TensorMap *tmQ, const TensorMap *tmK, const TensorMap *tmV,
                                           const TensorMap *tmDO, const TensorMap *tmL, const TensorMap *tmD,
                                           float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, int N,
                                           float scale, int causal, const DQ &dqs FS_TRACE_PARAMS) {
  static_assert(BR == 64, "Sᵀ is m64n64: a q-tile of 64 rows, one panel of dSᵀ");
  static_assert(BC % 64 == 0 && D % 64 == 0 && flash3_bwd_wgmma::dq_cols(BC, D) % 64 == 0,
                "whole warpgroups, whole panels, whole passes of dQ");
  static_assert(BR <= 256 && BC <= 256, "a TMA box has at most 256 rows");
  constexpr int NS = DQ::stages; // q-tiles in flight

  extern __shared__ unsigned char smem_raw[];
  // The copy engine swizzles by the destination's address bits and the
  // descriptors assume each panel starts on the swizzle's 1024-byte period;
  // every tile below is a multiple of it.
  unsigned char *smem = smem_raw + ((1024 - (fast::smem_addr(smem_raw) & 1023)) & 1023);
  bf16 *sK = reinterpret_cast<bf16 *>(smem);
  bf16 *sV = sK + BC * D;
  bf16 *sQ = sV + BC * D;        // NS stages of BR x D
  bf16 *sDO = sQ + NS * BR * D;  // likewise
  bf16 *sDS = sDO + NS * BR * D; // dSᵀ, BC x BR: one panel
  constexpr int WS = DQ::template warp_floats<BC, D>(); // a warp's stage of dQ_i
  static_assert(!DQ::bulk || 2 * (2 * BC * D + 2 * NS * BR * D + BR * BC) % 1024 == 0,
                "the copy engine's boxes of dQ start on the swizzle's 1024-byte period");
  float *after = reinterpret_cast<float *>(sDS + BC * BR);
  float *sL = after + (DQ::bulk ? (BC / 16) * WS : 0); // NS stages of BR: L_i·log2 e
  float *sD = sL + NS * BR;                             // NS stages of BR: D_i
  float *sStage = (DQ::bulk ? after : sD + NS * BR) + (threadIdx.x >> 5) * WS; // this warp's part of dQ_i
  // fullKV: K_j and V_j have landed; full[s]: stage s's q-tile has.
  __shared__ __align__(8) uint64_t fullKV, full[NS];

  const int tid = threadIdx.x;
  const int j = blockIdx.x, bh = blockIdx.y;
  const int c0 = j * BC;
  const int Tr = (N + BR - 1) / BR;
  const size_t base = (size_t)bh * N * D;
  const int iStart = causal ? c0 / BR : 0;

  //> load-kv: one thread asks the copy engine for K_j and V_j, once per block, and for the first NS q-tiles' Q_i, dO_i, L_i and D_i; dK_j and dV_j start at zero
  if (tid == 0) {
    hopper::mbar_init(&fullKV, 1);
    for (int s = 0; s < NS; s++) hopper::mbar_init(&full[s], 1);
    hopper::mbar_init_fence();
  }
  __syncthreads(); // the barriers are set before anyone waits on them
  if (tid == 0) {
    for (const TensorMap *m : {tmQ, tmK, tmV, tmDO, tmL, tmD}) hopper::tma_prefetch(m);
    hopper::mbar_expect(&fullKV, 2 * BC * D * 2);
    hopper::tma_load_panels<BC, D>(sK, tmK, c0, bh, &fullKV);
    hopper::tma_load_panels<BC, D>(sV, tmV, c0, bh, &fullKV);
    for (int s = 0; s < NS && iStart + s < Tr; s++)
      load_qtile<BR, D>(sQ + s * BR * D, sDO + s * BR * D, sL + s * BR, sD + s * BR, &full[s], tmQ, tmDO, tmL, tmD,
                        (iStart + s) * BR, bh, Tr);
  }
  float dv[D / 2], dk[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) dv[x] = dk[x] = 0.f;
  hopper::mbar_wait(&fullKV, 0);
  //> end

  for (int i = iStart; i < Tr; i++) {
    const int s = (i - iStart) % NS;
    const unsigned parity = ((i - iStart) / NS) & 1; // the stage's use, from 0
    const int r0 = i * BR;
    bf16 *q = sQ + s * BR * D, *d_o = sDO + s * BR * D;
    float *l = sL + s * BR, *dd = sD + s * BR;
    FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, (bh * gridDim.x + j) * Tr + i);
              const bool full_ = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
              float *pl = cur.rec ? fs_payload(cur) : nullptr;
              if (tid == 0) cur.t_start = fs_globaltimer();)

    //> load-q: wait for q-tile i's stage, whose Q_i, dO_i, L_i and D_i were asked for when q-tile i − NS freed it; after its products, ask for q-tile i + NS into it
    hopper::mbar_wait(&full[s], parity);
    //> end

    // The products are flash3_bwd_wgmma.cu's, line for line: its qtile
    // holds each phase's code; here each phase is this one call.
    //> recompute: Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ by wgmma from the stage's panels, then Pᵀ = 2^(S·sl2 − L·log2 e) (flash3_bwd_wgmma.cu's qtile)
    //> dp-ds: dSᵀ = Pᵀ ∘ (dPᵀ − D_i), rounded to bf16: in registers for dK, to shared memory for dQ (qtile)
    //> dv: dV_j += bf16(Pᵀ) dO_i by wgmma, Pᵀ from registers (qtile)
    //> dk: dK_j += bf16(dSᵀ) Q_i by wgmma, in the same group of products (qtile)
    //> dq: dQ_i += dS K_j by wgmma, added atomically into device memory: every kv-tile's block adds to it (qtile)
    flash3_bwd_wgmma::qtile<BR, BC, D>(q, d_o, l, dd, sK, sV, sDS, sStage, dQ, dv, dk, base, r0, c0, N, scale,
                                              causal, dqs FS_TRACED(, pl, full_));
    //> end
    FS_TRACED(flash3_bwd_wgmma::step_record<BR, BC, D>(cur, full_, pl, dv, dk, bh, i, j, iStart, Tr, c0, N);)

    //> load-q: once every warpgroup is through q-tile i's products, thread 0 asks for q-tile i + NS into the stage they freed
    __syncthreads(); // stage s and dSᵀ are free again
    if (tid == 0 && i + NS < Tr) {
      // The stage's L_i and D_i were read by ordinary loads; the copy
      // engine writes through the async proxy, after them.
      hopper::fence_async_shared();
      load_qtile<BR, D>(q, d_o, l, dd, &full[s], tmQ, tmDO, tmL, tmD, r0 + NS * BR, bh, Tr);
    }
    //> end
  }

  //> write-dkdv: dK_j · scale and dV_j to device memory in float32, once (flash3_bwd_wgmma.cu's write_dkdv)
  flash3_bwd_wgmma::write_dkdv<BR, BC, D>(dK, dV, dv, dk, base, c0, N, scale);
  dqs.finish();
  //> end
}

//> dq-scale: dQ_i = accumulator · scale, once every kv-tile's block has added to it (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void dq_scale(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// The main kernel's dynamic shared memory, in bytes (Flash3BwdTMASharedBytes
// in flash3_bwd_tma.go): K_j and V_j, NS stages each of Q_i and dO_i, dSᵀ,
// all bf16 panels; NS stages each of L_i and D_i and each warp's staged
// part of dQ_i, in float32; and 1024 bytes to align the first panel to the
// swizzle's period. The barriers are static shared memory.
static_assert(flash3_bwd_wgmma::stage_floats == 16 * (64 + 8), "a warp's stage, as smem_bytes counts it");
constexpr int smem_bytes(int BR, int BC, int D) {
  return 2 * (2 * BC * D + 2 * NS * BR * D + BR * BC) + 2 * NS * BR * 4 + (BC / 16) * 16 * (64 + 8) * 4 + 1024;
}

} // namespace flash3_bwd_tma

// Each compiled tile is three extern "C" kernels named after it: keep in
// step with the registry's Tiles (a test checks).
#define FLASH3_BWD_TMA_INSTANCE(BR, BC, D)                                                                            \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_tma_pre_br##BR##_bc##BC##_d##D(                     \
      const fast::bf16 *__restrict__ dO, const fast::bf16 *__restrict__ O, const float *__restrict__ L,               \
      float *__restrict__ Delta, float *__restrict__ dQ, long long N, float *__restrict__ LT FS_TRACE_PARAMS) {        \
    flash3_bwd_tma::pre<BR, BC, D, BC * 2>(dO, O, L, Delta, dQ, (int)N, LT FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2, 1) flash3_bwd_tma_main_br##BR##_bc##BC##_d##D(                 \
      const __grid_constant__ hopper::TensorMap tmQ, const __grid_constant__ hopper::TensorMap tmK,                   \
      const __grid_constant__ hopper::TensorMap tmV, const __grid_constant__ hopper::TensorMap tmDO,                  \
      const __grid_constant__ hopper::TensorMap tmL, const __grid_constant__ hopper::TensorMap tmD,                   \
      float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, long long N,                            \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                                \
    flash3_bwd_tma::main_block<BR, BC, D>(&tmQ, &tmK, &tmV, &tmDO, &tmL, &tmD, dQ, dK, dV, (int)N,                    \
                                          __uint_as_float((unsigned)scaleBits), (int)causal,                          \
                                          flash3_bwd_wgmma::AtomicDQ{} FS_TRACED(, fs_trace, fs_offsets, fs_mode));   \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_tma_dq_br##BR##_bc##BC##_d##D(                      \
      float *__restrict__ dQ, long long N, unsigned long long scaleBits FS_TRACE_PARAMS) {                             \
    flash3_bwd_tma::dq_scale<BR, BC, D, BC * 2>(dQ, (int)N, __uint_as_float((unsigned)scaleBits)                      \
                                                FS_TRACED(, fs_trace, fs_offsets, fs_mode));                          \
  }

#ifndef FLASH3_BWD_TMA_NO_INSTANCES
FLASH3_BWD_TMA_INSTANCE(64, 128, 128)
FLASH3_BWD_TMA_INSTANCE(64, 64, 64)
FLASH3_BWD_TMA_INSTANCE(64, 64, 128)
#endif
#endif // FLASHSTEP_FLASH3_BWD_TMA_CU
