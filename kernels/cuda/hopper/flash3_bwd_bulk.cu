// needs: sm_90a
// The Hopper backward with dQ added by the copy engine's bulk reduce: the
// backward ladder's third Hopper rung, whose CPU mirror is flash2_bwd_mma's
// (flash3_bwd_bulk.go). Needs sm_90a; scripts/ptx-hopper builds its PTX.
//
// Every kv-tile's block adds its part of each q-tile's dQ_i into one
// float32 accumulator in device memory. In flash3_bwd_tma (and the rungs
// below it) a warp stages its 16 × 64 part in shared memory and adds it
// with an atomicAdd per float: 32 warp-wide adds a pass, each a 128-byte
// line, issued by every thread between its products. Here each warp
// writes its part into shared memory laid out as the copy engine reads a
// box (32 columns a row, the 128-byte swizzle), and one thread asks the
// copy engine to add the two boxes into device memory
// (cp.reduce.async.bulk.tensor, .add on float32): two instructions where
// there were 32 × 32 adds, and the add itself runs on its own while the
// warp goes on to the next q-tile's products. The adds are still unordered
// between blocks (each element of dQ_i is a float32 sum in whatever order
// the blocks' adds land), so the bound is flash2_bwd_mma's; the
// deterministic order (kv-tile blocks taking each q-tile in turn) is
// another rung's idea.
//
// Everything else is flash3_bwd_tma's: its main_block (TMA loads through
// an mbarrier pipeline, here of two q-tiles) and flash3_bwd_wgmma's products,
// both included here and called with this rung's way of adding dQ (BulkDQ).
#define FLASH3_BWD_WGMMA_NO_INSTANCES
#define FLASH3_BWD_TMA_NO_INSTANCES
#include "flash3_bwd_wgmma.cu"
#include "flash3_bwd_tma.cu"

namespace flash3_bwd_bulk {

using fast::bf16;
using hopper::TensorMap;

//> dq: dQ_i += dS K_j by wgmma (flash3_bwd_wgmma.cu's qtile); each warp writes its 16 rows into shared memory as the copy engine's boxes, and one thread asks the copy engine to add them into device memory: every kv-tile's block adds to dQ_i
// BulkDQ adds a warp's part of dQ_i through tensor map map (float32, D
// columns × N rows × BH batch-heads, boxes of 32 columns × 16 rows, the
// 128-byte swizzle: kernels.TAdd) of batch-head bh.
struct BulkDQ {
  static constexpr bool bulk = true;
  // Two q-tiles in flight, not flash3_bwd_tma's three (run av): at 64×64,
  // d = 64 that brings the block's shared memory from 90.5 to 74 KiB, so
  // three blocks fit an SM where two did (with 168 registers, the main
  // kernel's launch bounds), and the third block's warps hide more of the
  // latency the profile of runs ao and ap found it bound by (1.14× plain,
  // 1.17× causal). At d = 128 (one block an SM either way) two stages
  // measured as three.
  static constexpr int stages = 2;
  const TensorMap *map;
  int bh;

  // A warp's stage: per pass of 64 columns, two boxes of 16 rows × 32
  // floats, 4096 bytes, each box on the swizzle's 1024-byte period.
  template <int BC, int D> __host__ __device__ static constexpr int warp_floats() { return flash3_bwd_wgmma::dq_cols(BC, D) / 64 * 16 * 64; }

  // add: this warp's 16 × 64 part of dQ_i (dq, the m64n64 accumulator's
  // layout: rows g and g + 8, columns 8·di + 2t and the next) at rows
  // row0.., columns x0.. of the batch-head, through pass's part of the
  // warp's stage.
  __device__ __forceinline__ void add(const float (&dq)[32], float *stage, int pass, int x0, int row0) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float *st = stage + pass * 16 * 64;
    // The stage was last read by the copy engine for the q-tile before;
    // the thread that asked for those adds waits for their reads.
    if (pass == 0) {
      if (lane == 0) hopper::bulk_wait_read<0>();
      __syncwarp();
    }
    // Row r of a box is 128 bytes, its 16-byte chunk c stored at chunk
    // c ^ (r mod 8): the swizzle the tensor map names. A thread's float2
    // lands in chunk (2·(di mod 4) + t/2) of row g or g + 8. (Half a warp's
    // float2 stores, rows g = 0..3, then fall on 16 banks, two rows a bank:
    // a 2-way conflict the padded stage of flash3_bwd_tma does not have,
    // a few cycles a pass against its 32 atomic adds.)
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int di = 0; di < 8; di++) {
        const int chunk = ((di & 3) * 2 + (t >> 1)) ^ g;
        *reinterpret_cast<float2 *>(st + (di >> 2) * 16 * 32 + (g + 8 * h) * 32 + chunk * 4 + (t & 1) * 2) =
            make_float2(dq[4 * di + 2 * h], dq[4 * di + 2 * h + 1]);
      }
    hopper::fence_async_shared(); // this thread's stores, visible to the copy engine
    __syncwarp();
    if (lane == 0) {
      hopper::tma_reduce_add(map, x0, row0, bh, st);
      hopper::tma_reduce_add(map, x0 + 32, row0, bh, st + 16 * 32);
      hopper::bulk_commit();
    }
  }

  // finish: the block's last adds have read their stages and landed before
  // it exits.
  __device__ __forceinline__ void finish() const {
    if ((threadIdx.x & 31) == 0) hopper::bulk_wait<0>();
  }
};
//> end

//> pre: D_i = rowsum(dO_i ∘ O_i) from bf16 rows, in float32, and L_i·log2 e beside it, both in whole q-tiles of rows for the copy engine; the float32 dQ accumulator of q-tile i set to zero (flash3_bwd_tma.cu's pre)
//> write-dkdv: dK_j · scale and dV_j to device memory in float32, once, after the block's last adds of dQ have landed (flash3_bwd_wgmma.cu's write_dkdv, then BulkDQ's finish)
//> load-kv: one thread asks the copy engine for K_j and V_j, once per block, and for the first two q-tiles' Q_i, dO_i, L_i and D_i (flash3_bwd_tma.cu's main_block)
//> recompute: Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ by wgmma, then Pᵀ = 2^(S·sl2 − L·log2 e) (flash3_bwd_wgmma.cu's qtile)
//> dp-ds: dSᵀ = Pᵀ ∘ (dPᵀ − D_i), rounded to bf16: in registers for dK, to shared memory for dQ (qtile)
//> dv: dV_j += bf16(Pᵀ) dO_i by wgmma, Pᵀ from registers (qtile)
//> dk: dK_j += bf16(dSᵀ) Q_i by wgmma, in the same group of products (qtile)
//> load-q: wait for q-tile i's stage; after its products, ask for q-tile i + 2 into it: flash3_bwd_tma.cu's main_block, called with this rung's way of adding dQ
template <int BR, int BC, int D>
__device__ __forceinline__ void main_block(const TensorMap *tmQ, const TensorMap *tmK, const TensorMap *tmV,
                                           const TensorMap *tmDO, const TensorMap *tmL, const TensorMap *tmD,
                                           const TensorMap *tmDQ, float *__restrict__ dK, float *__restrict__ dV, int N,
                                           float scale, int causal FS_TRACE_PARAMS) {
  flash3_bwd_tma::main_block<BR, BC, D>(tmQ, tmK, tmV, tmDO, tmL, tmD, nullptr, dK, dV, N, scale, causal,
                                        BulkDQ{tmDQ, (int)blockIdx.y} FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

//> dq-scale: dQ_i = accumulator · scale, once every kv-tile's block has added to it (common/bwd_ends.cuh)
template <int BR, int BC, int D, int NT>
__device__ __forceinline__ void dq_scale(float *__restrict__ dQ, int N, float scale FS_TRACE_PARAMS) {
  bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode));
}
//> end

// The main kernel's dynamic shared memory, in bytes (Flash3BwdBulkSharedBytes
// in flash3_bwd_bulk.go): flash3_bwd_tma's, with each warp's stage of dQ_i
// the copy engine's boxes (4096 bytes for each pass of 64 columns) in
// place of its padded one.
constexpr int NS = 2; // BulkDQ's stages
static_assert(NS == BulkDQ::stages, "BulkDQ's stages");
constexpr int smem_bytes(int BR, int BC, int D) {
  return 2 * (2 * BC * D + 2 * NS * BR * D + BR * BC) + (BC / 16) * (D / (BC / 64) / 64) * 16 * 64 * 4 + 2 * NS * BR * 4 + 1024;
}

} // namespace flash3_bwd_bulk

// Each compiled tile is three extern "C" kernels named after it: keep in
// step with the registry's Tiles (a test checks). The pre kernel is
// flash3_bwd_tma's (D and L·log2 e in whole q-tiles). The main kernel at
// 64×64, d = 64 is held to 168 registers so that three blocks fit an SM
// (BulkDQ::stages says why); it needs 171 unbounded, and spills nothing at
// 168 (run av).
#define FLASH3_BWD_BULK_INSTANCE(BR, BC, D)                                                                           \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_bulk_pre_br##BR##_bc##BC##_d##D(                    \
      const fast::bf16 *__restrict__ dO, const fast::bf16 *__restrict__ O, const float *__restrict__ L,               \
      float *__restrict__ Delta, float *__restrict__ dQ, long long N, float *__restrict__ LT FS_TRACE_PARAMS) {        \
    flash3_bwd_tma::pre<BR, BC, D, BC * 2>(dO, O, L, Delta, dQ, (int)N, LT FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2, BC == 64 && D == 64 ? 3 : 1) flash3_bwd_bulk_main_br##BR##_bc##BC##_d##D(                \
      const __grid_constant__ hopper::TensorMap tmQ, const __grid_constant__ hopper::TensorMap tmK,                   \
      const __grid_constant__ hopper::TensorMap tmV, const __grid_constant__ hopper::TensorMap tmDO,                  \
      const __grid_constant__ hopper::TensorMap tmL, const __grid_constant__ hopper::TensorMap tmD,                   \
      const __grid_constant__ hopper::TensorMap tmDQ, float *__restrict__ dK, float *__restrict__ dV, long long N,    \
      unsigned long long scaleBits, long long causal FS_TRACE_PARAMS) {                                                \
    flash3_bwd_bulk::main_block<BR, BC, D>(&tmQ, &tmK, &tmV, &tmDO, &tmL, &tmD, &tmDQ, dK, dV, (int)N,                \
                                           __uint_as_float((unsigned)scaleBits), (int)causal                          \
                                           FS_TRACED(, fs_trace, fs_offsets, fs_mode));                               \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(BC * 2) flash3_bwd_bulk_dq_br##BR##_bc##BC##_d##D(                     \
      float *__restrict__ dQ, long long N, unsigned long long scaleBits FS_TRACE_PARAMS) {                             \
    flash3_bwd_bulk::dq_scale<BR, BC, D, BC * 2>(dQ, (int)N, __uint_as_float((unsigned)scaleBits)                     \
                                                 FS_TRACED(, fs_trace, fs_offsets, fs_mode));                         \
  }

FLASH3_BWD_BULK_INSTANCE(64, 128, 128)
FLASH3_BWD_BULK_INSTANCE(64, 64, 64)
FLASH3_BWD_BULK_INSTANCE(64, 64, 128)
