// needs: sm_90a
// Rung 10's turns with each warpgroup overlapping its own softmax with its
// next product: the ladder's eleventh rung, whose CPU mirror is
// flash2_fast's (flash3_overlap.go). Needs sm_90a; scripts/ptx-hopper builds
// its PTX.
//
// In rungs 7 to 10 a consumer waits for each product as soon as it is
// issued: S_j, then the softmax of tile j, then P_j·V_j, then S_{j+1}. Its
// own softmax never runs under its own products. Here a consumer computes
// the softmax of tile j+1 while its product P_j·V_j is still running: in one
// turn it issues S_{j+1} = Q_i K_{j+1}ᵀ and then O += P_j·V_j, waits for S
// only, and does the softmax of tile j+1 (its max, α, P and l) while P_j·V_j
// runs; then it waits for P_j·V_j and scales O by α_{j+1}. P_j's fragment is
// read by its product until it is done, so P_{j+1} waits in S's registers,
// as floats, and is packed into the fragment only then.
//
//   prologue: S_0 issued and waited for; softmax of tile 0
//   turn j:   S_{j+1} and P_j·V_j issued; S_{j+1} waited for; softmax of
//             tile j+1 under P_j·V_j; P_j·V_j waited for; O = α_{j+1}·O
//
// O goes through the same operations in the same order as in rung 6
// (α_j·O, then + P_j·V_j, per element), so the mirror and the bound are
// rung 6's. The traced build writes a step's S, m, α, P and l when its
// softmax runs, which is one turn before its O is complete: a step's record
// is finished, and its header written, after its P·V has landed, and its
// timing spans its turn.
// docs/LADDER.md has the measurements.
#include "../common/instrument.cuh"
#include "wgmma.cuh"
#include "tma.cuh"
#include "hopper_tile.cuh"
#include "warpspec.cuh"
#include "consumer_records.cuh"

namespace hopper {

// Shared memory of one block, in bytes: rung 10's, Q_i, then two stages of
// K_j and V_j, in bf16, and 1024 bytes to align the first panel to the
// swizzle's period. The mbarriers are static shared memory.
constexpr int overlap_stages = 2;
constexpr int overlap_smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 2 * overlap_stages * BC * D) + 1024; }

template <int D, int BR, int BC, bool CAUSAL>
__device__ __forceinline__ void flash3_overlap_block(const TensorMap *tmQ, const TensorMap *tmK, const TensorMap *tmV,
                                                bf16 *__restrict__ O, float *__restrict__ LSE, int N,
                                                float scale FS_TRACE_PARAMS) {
  constexpr int NC = BR * 2; // consumer threads: a warpgroup per 64 rows
  constexpr int NI = BC / 8; // column atoms of S
  constexpr int DI = D / 8;  // column atoms of O
  constexpr int ST = overlap_stages;
  // Registers a thread, by role: the SM's 65,536 shared by the producer's
  // 128 threads and the consumers' 256 (24·128 + 240·256 = 64,512).
  constexpr int PR = 24, CR = 240;
  static_assert(NC == 256, "two consumer warpgroups, which take turns");
  static_assert(BR % 64 == 0 && D % 64 == 0 && BC % 64 == 0, "whole warpgroups and whole panels");
  static_assert(BR <= 256 && BC <= 256, "a TMA box has at most 256 rows");

  extern __shared__ unsigned char smem_raw[];
  unsigned char *smem = smem_raw + ((1024 - (fast::smem_addr(smem_raw) & 1023)) & 1023);
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sK0 = sQ + BR * D;       // K_j of stage j%ST at sK0 + (j%ST)·BC·D
  bf16 *sV0 = sK0 + ST * BC * D; // likewise V_j
  __shared__ __align__(8) uint64_t fullQ, fullK[ST], fullV[ST], emptyK[ST], emptyV[ST];

  const int Tr = (N + BR - 1) / BR;
  const int qtile = CAUSAL ? Tr - 1 - blockIdx.x : blockIdx.x; // heaviest first
  const int bh = blockIdx.y;
  const int r0 = qtile * BR;
  const int Tc = (N + BC - 1) / BC;
  const int jEnd = CAUSAL ? min(Tc, (min(N, r0 + BR) - 1) / BC + 1) : Tc;
  constexpr unsigned kvBytes = BC * D * 2; // a K or V tile, zero-filled rows included

  if (threadIdx.x == 0) {
    mbar_init(&fullQ, 1);
    for (int s = 0; s < ST; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&emptyK[s], NC);
      mbar_init(&emptyV[s], NC);
    }
    mbar_init_fence();
  }
  __syncthreads(); // the barriers are initialised before anyone uses them; the last block-wide barrier

  if (threadIdx.x < 128) {
    //> load-kv: the producer: the first warpgroup gives up its registers; one thread copies Q_i, then each K_j and V_j into a stage the consumers have freed
    regs_dec<PR>();
    if (threadIdx.x == 0) {
      tma_prefetch(tmK);
      tma_prefetch(tmV);
      mbar_expect(&fullQ, BR * D * 2);
      tma_load_panels<BR, D>(sQ, tmQ, r0, bh, &fullQ);
      for (int j = 0; j < jEnd; j++) {
        const int s = j % ST;
        // Stage s last held tile j − ST: wait until every consumer has
        // released it (its (j/ST − 1)-th emptying).
        if (j >= ST) mbar_wait(&emptyK[s], (j / ST - 1) & 1);
        mbar_expect(&fullK[s], kvBytes);
        tma_load_panels<BC, D>(sK0 + s * BC * D, tmK, j * BC, bh, &fullK[s]);
        if (j >= ST) mbar_wait(&emptyV[s], (j / ST - 1) & 1);
        mbar_expect(&fullV[s], kvBytes);
        tma_load_panels<BC, D>(sV0 + s * BC * D, tmV, j * BC, bh, &fullV[s]);
      }
    }
    return;
  }
  //> end

  //> load-q: the consumers take the registers the producer gave up; wait for Q_i; m, l and O start empty
  regs_inc<CR>();
  const int tid = threadIdx.x - 128, lane = tid & 31, warp = tid >> 5;
  const float sl2 = scale * 1.4426950408889634f;
  const Rows w{r0, warp * 16, lane >> 2, lane & 3}; // consumer warp w is warp w%4 of consumer warpgroup w/4
  const int c = warp >> 2;                          // this consumer warpgroup: 0 or 1
  if (c == 1) turn_pass(0);                         // consumer 0 takes the first turn

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);)

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const uint32_t qBase = fast::smem_addr(sQ) + (warp >> 2) * 64 * 128;
  mbar_wait(&fullQ, 0);

  // The step whose softmax runs now writes its record's payload one record
  // ahead of cur while the step before it waits for its P·V.
  FS_TRACED(auto payload = [&](int ahead) {
    return full ? reinterpret_cast<float *>(cur.rec + ahead * stepBytes + sizeof(fs_record_header)) : nullptr;
  };)

  //> scores: the prologue: wait for K_0 and the turn; issue S_0 = Q_i K_0ᵀ, pass the turn, wait; K's stage released
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
  float s[BC / 2];
  mbar_wait(&fullK[0], 0);
  turn_wait(c);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    const uint32_t kBase = fast::smem_addr(sK0);
    wgmma_s<BC>(s, desc(qBase + (kk >> 2) * BR * 128 + (kk & 3) * 32, 16, 1024),
                desc(kBase + (kk >> 2) * BC * 128 + (kk & 3) * 32, 16, 1024), kk > 0);
  }
  wgmma_commit();
  turn_pass(c ^ 1);
  wgmma_wait<0>();
  keep(s);
  mbar_arrive(&emptyK[0]);
  mask_scores<NI, CAUSAL>(s, w, 0, N);
  FS_TRACED(if (full) trace_scores<NI, BR, BC, D>(payload(0), s, w, scale, N);)

  //> softmax: the prologue: tile 0's softmax (hopper_tile.cuh); O is still empty
  uint32_t pk[NI][2]; // P_j, the A operand of the product in flight
#pragma unroll
  for (int h = 0; h < 2; h++) softmax_row<NI, BR, BC, D>(h, s, m, l, pk, sl2, w, scale FS_TRACED(, payload(0), N));

#ifdef FS_TRACE
  // finish_step writes step j's O, complete now that its P·V has landed
  // (before α_{j+1} scales it), and its header once both consumers are done.
  auto finish_step = [&](int j) {
    finish_step_record<NC, DI, BR, BC, D>(cur, full, true, o, w, tid, bh, qtile, j, rowsValid, N, stepBytes);
  };
#endif

  // Every turn but the last issues two products. The last, below, issues
  // P·V alone: the loop has no branch around a product, which would make
  // the compiler wait for each product as it is issued.
  for (int j = 0; j + 1 < jEnd; j++) {
    const int stage = j % ST, next = (j + 1) % ST;
    // A step's timing spans its turn: from here (the prologue, for step 0)
    // to its P·V landed. Its softmax ran in the turn before.
    FS_TRACED(if (tid == 0 && j > 0) cur.t_start = fs_globaltimer();)
    //> pv: wait for K_{j+1}, V_j and the turn; issue S_{j+1} = Q_i K_{j+1}ᵀ and then O += P_j·V_j, pass the turn
    mbar_wait(&fullK[next], ((j + 1) / ST) & 1);
    mbar_wait(&fullV[stage], (j / ST) & 1);
    const uint32_t kBase = fast::smem_addr(sK0 + next * BC * D);
    const uint32_t vBase = fast::smem_addr(sV0 + stage * BC * D);
    uint64_t dq[D / 16], dk[D / 16], dv[BC / 16]; // the two products' descriptors, made before the turn
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      dq[kk] = desc(qBase + (kk >> 2) * BR * 128 + (kk & 3) * 32, 16, 1024);
      dk[kk] = desc(kBase + (kk >> 2) * BC * 128 + (kk & 3) * 32, 16, 1024);
    }
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) dv[kk] = desc(vBase + kk * 16 * 128, BC * 128, 1024);
    turn_wait(c);
    wgmma_fence();
    keep(o);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) wgmma_s<BC>(s, dq[kk], dk[kk], kk > 0);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
      wgmma_o<D>(o, a, dv[kk]);
    }
    wgmma_commit();
    turn_pass(c ^ 1);

    //> scores: wait for S_{j+1} alone, while P_j·V_j runs; K's stage released; masks
    wgmma_wait<1>(); // the older group, S_{j+1}, is done
    keep(s);
    mbar_arrive(&emptyK[next]);
    mask_scores<NI, CAUSAL>(s, w, (j + 1) * BC, N);
    FS_TRACED(if (full) trace_scores<NI, BR, BC, D>(payload(1), s, w, scale, N);)

    //> softmax: tile j+1's softmax under P_j·V_j: its max, α, P and l, P left in S's registers (hopper_tile.cuh)
    // P_j·V_j still reads P_j's fragment: the softmax writes nothing else.
    // P_{j+1} in a second fragment made ptxas reuse P_j's registers for it
    // and then serialise every product to keep that safe (C7513, run s).
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; h++) alpha[h] = softmax_row_in_place<NI, BR, BC, D>(h, s, m, l, sl2, w, scale FS_TRACED(, payload(1), N));

    //> pv: wait for P_j·V_j; V's stage released; O = α_{j+1}·O; P_{j+1} packed into the fragment P_j·V_j has done with
    wgmma_wait<0>();
    keep(o);
    mbar_arrive(&emptyV[stage]);
    FS_TRACED(finish_step(j);)
#pragma unroll
    for (int h = 0; h < 2; h++) rescale_row<DI>(o, h, alpha[h]);
    pack_p<NI>(s, pk);
    //> end
  }
  {
    const int j = jEnd - 1, stage = j % ST;
    FS_TRACED(if (tid == 0 && j > 0) cur.t_start = fs_globaltimer();)
    //> pv: the last turn: wait for V and the turn; O += P·V of the last tile; consumer 1 passes no turn, consumer 0 takes no more
    mbar_wait(&fullV[stage], (j / ST) & 1);
    turn_wait(c);
    wgmma_fence();
    keep(o);
    const uint32_t vBase = fast::smem_addr(sV0 + stage * BC * D);
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
      wgmma_o<D>(o, a, desc(vBase + kk * 16 * 128, BC * 128, 1024));
    }
    wgmma_commit();
    if (c == 0) turn_pass(1);
    wgmma_wait<0>();
    keep(o);
    mbar_arrive(&emptyV[stage]);
    FS_TRACED(finish_step(j);)
    //> end
  }

  //> epilogue: the quad's partial sums make l; O / l in bf16 and the LSE to device memory
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
  epilogue<DI, BR, BC, D>(o, m, l, O + (size_t)bh * N * D, LSE + (size_t)bh * N, w, N, scale FS_TRACED(, full ? fs_payload(cur) : nullptr));
  FS_TRACED(finish_epilogue_record<NC, BR, BC, D>(cur, full, true, tid, bh, qtile, rowsValid, N, epiBytes);)
}
//> end

} // namespace hopper

// The compiled instantiations, extern "C" so the worker finds each by name;
// a plain and a causal kernel per tile (TestInstancesMatchSource holds these
// lines to the registry's Tiles). One block an SM: the producer's warpgroup
// and two consumers.
#define FLASH3_OVERLAP_KERNEL(NAME, BR, BC, D, CAUSAL)                                                                    \
  extern "C" __global__ void __launch_bounds__(BR * 2 + 128, 1)                                                        \
      NAME(const __grid_constant__ hopper::TensorMap tmQ, const __grid_constant__ hopper::TensorMap tmK,              \
           const __grid_constant__ hopper::TensorMap tmV, hopper::bf16 *__restrict__ O, float *__restrict__ LSE, int N, \
           float scale FS_TRACE_PARAMS) {                                                                              \
    hopper::flash3_overlap_block<D, BR, BC, CAUSAL>(&tmQ, &tmK, &tmV, O, LSE, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }
#define FLASH3_OVERLAP_INSTANCE(BR, BC, D)                                                                               \
  FLASH3_OVERLAP_KERNEL(flash3_overlap_br##BR##_bc##BC##_d##D, BR, BC, D, false)                                               \
  FLASH3_OVERLAP_KERNEL(flash3_overlap_br##BR##_bc##BC##_d##D##_causal, BR, BC, D, true)

FLASH3_OVERLAP_INSTANCE(128, 128, 64)
FLASH3_OVERLAP_INSTANCE(128, 128, 128)
