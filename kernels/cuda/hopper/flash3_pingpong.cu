// needs: sm_90a
// Rung 9's warp-specialised block with its two consumer warpgroups taking
// turns on the tensor cores: the ladder's tenth rung, ping-pong, whose CPU
// mirror is flash2_fast's (flash3_pingpong.go). Needs sm_90a;
// scripts/ptx-hopper builds its PTX.
//
// In rung 9 the two consumers run side by side with nothing to order them:
// both tend to issue their products at the same moment, wait for them
// together, and then do their softmax together while the tensor cores sit
// idle. Here they take turns (warpspec.cuh): before issuing a product a
// consumer waits for its turn, and once its product is issued it passes the
// turn to the other. The products are issued in the order
//
//   consumer 0: S_j    consumer 1: S_j    consumer 0: P_j·V_j    consumer 1: P_j·V_j    ...
//
// so while one consumer's product runs, the other, whose product ran just
// before, computes its softmax (or its epilogue): the softmax's exp2s and
// shuffles are hidden under the other warpgroup's products instead of
// leaving the tensor cores idle.
//
// The producer, the stages and their mbarriers are rung 9's. A consumer's
// rows, columns and arithmetic are rung 7's (and rung 6's), so its mirror
// and bound are theirs. docs/LADDER.md has the measurements.
#include "../common/instrument.cuh"
#include "wgmma.cuh"
#include "tma.cuh"
#include "hopper_tile.cuh"
#include "warpspec.cuh"
#include "consumer_records.cuh"

namespace hopper {

// Shared memory of one block, in bytes: rung 9's, Q_i, then two stages of
// K_j and V_j, in bf16, and 1024 bytes to align the first panel to the
// swizzle's period. The mbarriers are static shared memory.
constexpr int pingpong_stages = 2;
constexpr int pingpong_smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 2 * pingpong_stages * BC * D) + 1024; }

template <int D, int BR, int BC, bool CAUSAL>
__device__ __forceinline__ void flash3_pingpong_block(const TensorMap *tmQ, const TensorMap *tmK, const TensorMap *tmV,
                                                bf16 *__restrict__ O, float *__restrict__ LSE, int N,
                                                float scale FS_TRACE_PARAMS) {
  constexpr int NC = BR * 2; // consumer threads: a warpgroup per 64 rows
  constexpr int NI = BC / 8; // column atoms of S
  constexpr int DI = D / 8;  // column atoms of O
  constexpr int ST = pingpong_stages;
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
  FS_TRACED(using RS = role_slots<true>;
            // Roles mode: a watcher thread of the producer arrives on the
            // empty barriers too, so that no stage is refilled before it
            // has seen the last fill land.
            const unsigned watchers = fs_mode == FS_MODE_ROLES ? 1u : 0u;)

  if (threadIdx.x == 0) {
    mbar_init(&fullQ, 1);
    for (int s = 0; s < ST; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&emptyK[s], NC FS_TRACED(+watchers));
      mbar_init(&emptyV[s], NC FS_TRACED(+watchers));
    }
    mbar_init_fence();
  }
  __syncthreads(); // the barriers are initialised before anyone uses them; the last block-wide barrier

  if (threadIdx.x < 128) {
    //> load-kv: the producer: the first warpgroup gives up its registers; one thread copies Q_i, then each K_j and V_j into a stage the consumers have freed
    regs_dec<PR>();
    if (threadIdx.x == 0) {
      FS_TRACED(const role_log<RS::per_tile> rl = role_log_at<RS::per_tile>(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile, true);
                unsigned long long t;)
      tma_prefetch(tmK);
      tma_prefetch(tmV);
      FS_TRACED(rl.start(jEnd, RS::copy_q, fs_clock());)
      mbar_expect(&fullQ, BR * D * 2);
      tma_load_panels<BR, D>(sQ, tmQ, r0, bh, &fullQ);
      for (int j = 0; j < jEnd; j++) {
        const int s = j % ST;
        // Stage s last held tile j − ST: wait until every consumer has
        // released it (its (j/ST − 1)-th emptying).
        FS_TRACED(t = fs_clock(); rl.start(j, RS::free_k, t);)
        if (j >= ST) mbar_wait(&emptyK[s], (j / ST - 1) & 1);
        FS_TRACED(t = fs_clock(); rl.end(j, RS::free_k, t); rl.start(j, RS::copy_k, t);)
        mbar_expect(&fullK[s], kvBytes);
        tma_load_panels<BC, D>(sK0 + s * BC * D, tmK, j * BC, bh, &fullK[s]);
        FS_TRACED(t = fs_clock(); rl.start(j, RS::free_v, t);)
        if (j >= ST) mbar_wait(&emptyV[s], (j / ST - 1) & 1);
        FS_TRACED(t = fs_clock(); rl.end(j, RS::free_v, t); rl.start(j, RS::copy_v, t);)
        mbar_expect(&fullV[s], kvBytes);
        tma_load_panels<BC, D>(sV0 + s * BC * D, tmV, j * BC, bh, &fullV[s]);
      }
    }
#ifdef FS_TRACE
    else if (threadIdx.x == 32 && fs_mode == FS_MODE_ROLES)
      watch_copies<RS, ST>(role_log_at<RS::per_tile>(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile, true), jEnd, &fullQ, fullK, fullV, emptyK, emptyV);
#endif
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

  // Roles mode (docs/ROLES.md): each consumer's first thread stamps its
  // spans in SM cycles; every thread reads the clock, so nothing diverges
  // between a product's issue and its wait. The step's timing record is
  // consumer 0's, and the consumers never meet for it.
  FS_TRACED(const bool roles = fs_mode == FS_MODE_ROLES;
            fs_cursor cur = fs_begin(fs_trace, fs_offsets, roles ? FS_MODE_TIMING : fs_mode, bh * Tr + qtile);
            const unsigned stepBytes = roles ? FS_RECORD_HEADER_BYTES * (1 + RS::per_tile) : fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode != FS_MODE_FULL ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);
            const role_log<RS::per_tile> rl = role_log_at<RS::per_tile>(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile, (tid & 127) == 0);
            const int me = RS::producer + (warp >> 2) * RS::consumer; // this consumer's first slot
            unsigned long long t = fs_clock();
            if (roles && tid == 0) {
              // The block's clock anchor: %globaltimer and %clock64 read back to back.
              const unsigned long long g = fs_globaltimer();
              rl.start(jEnd, RS::clock_start, g);
              rl.end(jEnd, RS::clock_start, fs_clock());
            }
            rl.start(jEnd, RS::wait_q + (warp >> 2), t);)

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const uint32_t qBase = fast::smem_addr(sQ) + (warp >> 2) * 64 * 128;
  mbar_wait(&fullQ, 0);
  FS_TRACED(rl.end(jEnd, RS::wait_q + (warp >> 2), fs_clock());)

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer(); t = fs_clock(); rl.start(j, me + RS::wait_k, t);)
    const int stage = j % ST;
    const unsigned parity = (j / ST) & 1; // stage s is filled for the (j/ST)-th time
    const bf16 *sK = sK0 + stage * BC * D;
    const bf16 *sV = sV0 + stage * BC * D;

    //> scores: wait for K_j and for this warpgroup's turn; issue S = Q_i K_jᵀ, pass the turn, wait for S; K's stage released
    mbar_wait(&fullK[stage], parity);
    FS_TRACED(t = fs_clock(); rl.end(j, me + RS::wait_k, t); rl.start(j, me + RS::turn_s, t);)
    float s[BC / 2];
    const uint32_t kBase = fast::smem_addr(sK);
    turn_wait(c);
    FS_TRACED(t = fs_clock_after_bar(sK); rl.end(j, me + RS::turn_s, t); rl.start(j, me + RS::product_s, t);)
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const uint64_t a = desc(qBase + (kk >> 2) * BR * 128 + (kk & 3) * 32, 16, 1024);
      const uint64_t b = desc(kBase + (kk >> 2) * BC * 128 + (kk & 3) * 32, 16, 1024);
      wgmma_s<BC>(s, a, b, kk > 0);
    }
    wgmma_commit();
    turn_pass(c ^ 1);
    wgmma_wait<0>();
    keep(s);
    FS_TRACED(t = fs_clock(); rl.end(j, me + RS::product_s, t); rl.start(j, me + RS::softmax, t);)
    mbar_arrive(&emptyK[stage]);

    //> scores: masks on the ragged last tile and on the tiles that cross the diagonal
    mask_scores<NI, CAUSAL>(s, w, j * BC, N);
    FS_TRACED(if (full) trace_scores<NI, BR, BC, D>(fs_payload(cur), s, w, scale, N);)

    //> softmax: row max across the quad, α = 2^((m_old − m_new)·scale·log2 e), P = 2^(…), l = α·l + Σ P, O = α·O (hopper_tile.cuh)
    uint32_t pk[NI][2];
    online_softmax<NI, DI, BR, BC, D>(s, m, l, o, pk, sl2, w, scale FS_TRACED(, full ? fs_payload(cur) : nullptr, N));

    //> pv: wait for V_j and the turn; issue O += bf16(P)·V_j, pass the turn, wait; V's stage released
    FS_TRACED(t = fs_clock(); rl.end(j, me + RS::softmax, t); rl.start(j, me + RS::wait_v, t);)
    mbar_wait(&fullV[stage], parity);
    FS_TRACED(t = fs_clock(); rl.end(j, me + RS::wait_v, t); rl.start(j, me + RS::turn_pv, t);)
    const uint32_t vBase = fast::smem_addr(sV);
    turn_wait(c);
    FS_TRACED(t = fs_clock_after_bar(sV); rl.end(j, me + RS::turn_pv, t); rl.start(j, me + RS::product_pv, t);)
    wgmma_fence();
    keep(o);
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
      wgmma_o<D>(o, a, desc(vBase + kk * 16 * 128, BC * 128, 1024));
    }
    wgmma_commit();
    // Consumer 1's last product passes no turn: consumer 0 takes no more,
    // and every turn passed is one waited for.
    if (c == 0 || j + 1 < jEnd) turn_pass(c ^ 1);
    wgmma_wait<0>();
    keep(o);
    FS_TRACED(rl.end(j, me + RS::product_pv, fs_clock());)
    mbar_arrive(&emptyV[stage]);
    //> end
    // A step's record is written when both consumer warpgroups are done
    // with it: the traced build alone makes them meet, except in roles
    // mode, whose record is consumer 0's own.
    FS_TRACED(finish_step_record<NC, DI, BR, BC, D>(cur, full, !roles, o, w, tid, bh, qtile, j, rowsValid, N, stepBytes);)
  }

  //> epilogue: the quad's partial sums make l; O / l in bf16 and the LSE to device memory
  FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer(); rl.start(jEnd, RS::epilogue + (warp >> 2), fs_clock());)
  epilogue<DI, BR, BC, D>(o, m, l, O + (size_t)bh * N * D, LSE + (size_t)bh * N, w, N, scale FS_TRACED(, full ? fs_payload(cur) : nullptr));
  FS_TRACED(rl.end(jEnd, RS::epilogue + (warp >> 2), fs_clock()); finish_epilogue_record<NC, BR, BC, D>(cur, full, !roles, tid, bh, qtile, rowsValid, N, epiBytes);
  if (roles && tid == 0) {
    const unsigned long long g = fs_globaltimer();
    rl.start(jEnd, RS::clock_end, g);
    rl.end(jEnd, RS::clock_end, fs_clock());
  })
}
//> end

} // namespace hopper

// The compiled instantiations, extern "C" so the worker finds each by name;
// a plain and a causal kernel per tile (TestInstancesMatchSource holds these
// lines to the registry's Tiles). One block an SM: the producer's warpgroup
// and two consumers.
#define FLASH3_PINGPONG_KERNEL(NAME, BR, BC, D, CAUSAL)                                                                    \
  extern "C" __global__ void __launch_bounds__(BR * 2 + 128, 1)                                                        \
      NAME(const __grid_constant__ hopper::TensorMap tmQ, const __grid_constant__ hopper::TensorMap tmK,              \
           const __grid_constant__ hopper::TensorMap tmV, hopper::bf16 *__restrict__ O, float *__restrict__ LSE, int N, \
           float scale FS_TRACE_PARAMS) {                                                                              \
    hopper::flash3_pingpong_block<D, BR, BC, CAUSAL>(&tmQ, &tmK, &tmV, O, LSE, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }
#define FLASH3_PINGPONG_INSTANCE(BR, BC, D)                                                                               \
  FLASH3_PINGPONG_KERNEL(flash3_pingpong_br##BR##_bc##BC##_d##D, BR, BC, D, false)                                               \
  FLASH3_PINGPONG_KERNEL(flash3_pingpong_br##BR##_bc##BC##_d##D##_causal, BR, BC, D, true)

FLASH3_PINGPONG_INSTANCE(128, 128, 64)
FLASH3_PINGPONG_INSTANCE(128, 128, 128)
