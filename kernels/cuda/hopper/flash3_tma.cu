// needs: sm_90a
// Rung 7's loop with its loads done by Hopper's tensor memory accelerator:
// the ladder's eighth rung, whose CPU mirror is flash2_fast's
// (flash3_tma.go). Needs sm_90a; scripts/ptx-hopper builds its PTX.
//
// In rung 7 every thread loads: each computes the addresses of its 16-byte
// chunks of Q, K and V, swizzles them, and issues a cp.async per chunk (8
// of them per thread per kv-tile, 4 of K_j and 4 of V_j, at either head
// dim), then waits for its own and
// meets the others at a __syncthreads. Here one thread asks the copy engine
// for a whole tile (tma.cuh): one instruction per 64-column panel, the
// swizzle done by the engine on arrival, rows past N filled with zeros by
// it. Arrival is counted off an mbarrier, so the warpgroups wait for the
// bytes themselves, K and V apart: S = QKᵀ starts as soon as K_j is in,
// while V_j may still be on its way.
//
// One block of BR/64 warpgroups per (batch-head, q-tile of BR rows), as in
// rung 7; per kv-tile j:
//
//   thread 0 issues K_{j+1} and V_{j+1} into the other stage
//   wait for K_j; S = Q_i K_jᵀ: d/16 wgmma from shared memory
//   masks, softmax (hopper_tile.cuh: rung 6's, operation for operation)
//   wait for V_j; O += bf16(P)·V_j: BC/16 wgmma, P from registers
//   __syncthreads: every warpgroup is done with stage j, which tile j+2
//   will fill
//
// A thread's rows, columns and arithmetic are rung 7's (and rung 6's), so
// its mirror and bound are theirs. docs/LADDER.md has the measurements.
#include "../common/instrument.cuh"
#include "wgmma.cuh"
#include "tma.cuh"
#include "hopper_tile.cuh"

namespace hopper {

// Shared memory of one block, in bytes: Q_i, then two stages of K_j and V_j,
// in bf16, and 1024 bytes to align the first panel to the swizzle's period.
// The mbarriers are static shared memory.
constexpr int tma_smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 4 * BC * D) + 1024; }

template <int D, int BR, int BC, bool CAUSAL>
__device__ __forceinline__ void flash3_tma_block(const TensorMap *tmQ, const TensorMap *tmK, const TensorMap *tmV,
                                                 bf16 *__restrict__ O, float *__restrict__ LSE, int N,
                                                 float scale FS_TRACE_PARAMS) {
  constexpr int NI = BC / 8; // column atoms of S
  constexpr int DI = D / 8;  // column atoms of O
  static_assert(BR % 64 == 0 && D % 64 == 0 && BC % 64 == 0, "whole warpgroups and whole panels");
  static_assert(BR <= 256 && BC <= 256, "a TMA box has at most 256 rows");

  extern __shared__ unsigned char smem_raw[];
  // The swizzle repeats every 1024 bytes: the copy engine swizzles by the
  // destination's address bits, the descriptors assume each panel starts
  // on that period.
  unsigned char *smem = smem_raw + ((1024 - (fast::smem_addr(smem_raw) & 1023)) & 1023);
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sK0 = sQ + BR * D;      // K_j of stage j%2 at sK0 + (j%2)·BC·D
  bf16 *sV0 = sK0 + 2 * BC * D; // likewise V_j
  // fullQ: Q_i has landed; fullK[s], fullV[s]: stage s's K or V has.
  __shared__ __align__(8) uint64_t fullQ, fullK[2], fullV[2];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int Tr = (N + BR - 1) / BR;
  const int qtile = CAUSAL ? Tr - 1 - blockIdx.x : blockIdx.x; // heaviest first
  const int bh = blockIdx.y;
  const int r0 = qtile * BR;
  const float sl2 = scale * 1.4426950408889634f;
  const Rows w{r0, warp * 16, lane >> 2, lane & 3}; // warp w is warp w%4 of warpgroup w/4

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);)

  const int Tc = (N + BC - 1) / BC;
  const int jEnd = CAUSAL ? min(Tc, (min(N, r0 + BR) - 1) / BC + 1) : Tc;
  constexpr unsigned kvBytes = BC * D * 2; // a K or V tile, zero-filled rows included

  //> load-q: one thread asks the copy engine for Q_i, K_0 and V_0; m, l and O start empty
  if (tid == 0) {
    mbar_init(&fullQ, 1);
    for (int s = 0; s < 2; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
    }
    mbar_init_fence();
    tma_prefetch(tmK);
    tma_prefetch(tmV);
    mbar_expect(&fullQ, BR * D * 2);
    tma_load_panels<BR, D>(sQ, tmQ, r0, bh, &fullQ);
    mbar_expect(&fullK[0], kvBytes);
    tma_load_panels<BC, D>(sK0, tmK, 0, bh, &fullK[0]);
    mbar_expect(&fullV[0], kvBytes);
    tma_load_panels<BC, D>(sV0, tmV, 0, bh, &fullV[0]);
  }
  __syncthreads(); // the barriers are initialised before anyone waits on them

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  // This warpgroup's 64 rows of Q, as the A operand: 16-column k-steps
  // advance 32 bytes within a panel, then jump to the next panel.
  const uint32_t qBase = fast::smem_addr(sQ) + (warp >> 2) * 64 * 128;
  mbar_wait(&fullQ, 0);

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    const int stage = j & 1;
    const unsigned parity = (j >> 1) & 1; // stage s is filled for the (j/2)-th time
    const bf16 *sK = sK0 + stage * BC * D;
    const bf16 *sV = sV0 + stage * BC * D;
    //> load-kv: thread 0 asks for K_{j+1} and V_{j+1} into the other stage, while tile j is multiplied
    if (tid == 0 && j + 1 < jEnd) {
      mbar_expect(&fullK[stage ^ 1], kvBytes);
      tma_load_panels<BC, D>(sK0 + (stage ^ 1) * BC * D, tmK, (j + 1) * BC, bh, &fullK[stage ^ 1]);
      mbar_expect(&fullV[stage ^ 1], kvBytes);
      tma_load_panels<BC, D>(sV0 + (stage ^ 1) * BC * D, tmV, (j + 1) * BC, bh, &fullV[stage ^ 1]);
    }

    //> scores: wait for K_j to land; S = Q_i K_jᵀ, d/16 wgmma from shared memory, waited for at once
    mbar_wait(&fullK[stage], parity);
    float s[BC / 2];
    const uint32_t kBase = fast::smem_addr(sK);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const uint64_t a = desc(qBase + (kk >> 2) * BR * 128 + (kk & 3) * 32, 16, 1024);
      const uint64_t b = desc(kBase + (kk >> 2) * BC * 128 + (kk & 3) * 32, 16, 1024);
      wgmma_s<BC>(s, a, b, kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    keep(s);

    //> scores: masks on the ragged last tile and on the tiles that cross the diagonal
    mask_scores<NI, CAUSAL>(s, w, j * BC, N);
    FS_TRACED(if (full) trace_scores<NI, BR, BC, D>(fs_payload(cur), s, w, scale, N);)

    //> softmax: row max across the quad, α = 2^((m_old − m_new)·scale·log2 e), P = 2^(…), l = α·l + Σ P, O = α·O (hopper_tile.cuh)
    uint32_t pk[NI][2];
    online_softmax<NI, DI, BR, BC, D>(s, m, l, o, pk, sl2, w, scale FS_TRACED(, full ? fs_payload(cur) : nullptr, N));

    //> pv: wait for V_j to land; O += bf16(P)·V_j, P from registers, V read transposed from shared memory
    mbar_wait(&fullV[stage], parity);
    const uint32_t vBase = fast::smem_addr(sV);
    wgmma_fence();
    keep(o);
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
      wgmma_o<D>(o, a, desc(vBase + kk * 16 * 128, BC * 128, 1024));
    }
    wgmma_commit();
    wgmma_wait<0>();
    keep(o);
    //> end
    FS_TRACED(if (full) {
      trace_o<DI, BR, BC, D>(fs_payload(cur), o, w, N);
      if (tid == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
    })
    __syncthreads(); // every warpgroup is done with stage j before tile j+2 is copied into it
    FS_TRACED(if (cur.rec) {
      if (tid == 0) {
        const int colsValid = min(BC, N - j * BC);
        fs_write_header(cur, FS_KIND_FLASH_STEP, bh, qtile, j, rowsValid, colsValid, step_read_bytes(j, colsValid, rowsValid, D), 0);
      }
      cur.rec += stepBytes;
    })
  }

  //> epilogue: the quad's partial sums make l; O / l in bf16 and the LSE to device memory
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
  epilogue<DI, BR, BC, D>(o, m, l, O + (size_t)bh * N * D, LSE + (size_t)bh * N, w, N, scale FS_TRACED(, full ? fs_payload(cur) : nullptr));
  FS_TRACED(if (cur.rec) {
    if (full && tid == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
    __syncthreads();
    if (tid == 0)
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, qtile, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
  })
}
//> end

} // namespace hopper

// The compiled instantiations, extern "C" so the worker finds each by name;
// a plain and a causal kernel per tile (TestInstancesMatchSource holds these
// lines to the registry's Tiles). The tensor maps are kernel arguments the
// kernel reads in place (__grid_constant__): the copy engine is given their
// address in the argument space.
#define FLASH3_TMA_KERNEL(NAME, BR, BC, D, CAUSAL)                                                                   \
  extern "C" __global__ void __launch_bounds__(BR * 2)                                                                 \
      NAME(const __grid_constant__ hopper::TensorMap tmQ, const __grid_constant__ hopper::TensorMap tmK,              \
           const __grid_constant__ hopper::TensorMap tmV, hopper::bf16 *__restrict__ O, float *__restrict__ LSE, int N, \
           float scale FS_TRACE_PARAMS) {                                                                              \
    hopper::flash3_tma_block<D, BR, BC, CAUSAL>(&tmQ, &tmK, &tmV, O, LSE, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }
#define FLASH3_TMA_INSTANCE(BR, BC, D)                                                                              \
  FLASH3_TMA_KERNEL(flash3_tma_br##BR##_bc##BC##_d##D, BR, BC, D, false)                                             \
  FLASH3_TMA_KERNEL(flash3_tma_br##BR##_bc##BC##_d##D##_causal, BR, BC, D, true)

FLASH3_TMA_INSTANCE(128, 128, 64)
FLASH3_TMA_INSTANCE(128, 64, 128)
