// needs: sm_90a
// FlashAttention-2's loop on Hopper's warpgroup products: the ladder's
// seventh rung, whose CPU mirror is flash2_fast's (flash3_wgmma.go). Needs
// sm_90a; scripts/ptx-hopper builds its PTX with nvcc 12 or newer.
//
// What changes from rung 6 is who feeds the tensor cores. mma.sync is a warp
// multiplying 16×8 tiles from registers, each fragment first read out of
// shared memory by ldmatrix; wgmma is a warpgroup (four warps) multiplying a
// 64×N tile whose operands the tensor cores read from shared memory
// themselves, through a descriptor, while the warps go on. One block of
// BR/64 warpgroups per (batch-head, q-tile of BR rows); warpgroup w owns rows
// 64w..64w+63. Per kv-tile j of BC columns:
//
//   S     = Q_i K_jᵀ: d/16 wgmma m64n{BC}k16, A = Q and B = K from shared memory
//   masks -inf where col ≥ N, or causal and col > row
//   softmax as rung 6's, operation for operation: m_new, α, p by ex2 with
//           scale·log2 e folded in, l_t per thread, O·α
//   O    += bf16(P)·V_j: BC/16 wgmma m64n{d}k16, A = P from registers (the S
//           accumulator's layout is A's fragment layout), B = V from shared
//           memory read transposed
//
// Each thread holds the same rows and columns of S and O as a rung-6 thread
// with one row atom, so the arithmetic and the trace are rung 6's: only the
// order inside each 16-term product may differ, as it may between any two
// tensor-core instructions (kernelstest's bound for flash2_fast holds both).
//
// K and V are double-buffered: K_{j+1} and V_{j+1} arrive by cp.async while
// kv-tile j is multiplied. The products are waited for at once (wgmma_wait<0>),
// so a warpgroup's softmax does not yet overlap its products: that is the
// later rungs' idea. docs/LADDER.md has the measurements.
#include "../common/instrument.cuh"
#include "wgmma.cuh"
#include "hopper_tile.cuh"

namespace hopper {

// Shared memory of one block, in bytes: Q_i, then two stages of K_j and V_j,
// in bf16, and 1024 bytes to align the first panel to the swizzle's period.
constexpr int smem_bytes(int D, int BR, int BC) { return 2 * (BR * D + 4 * BC * D) + 1024; }

template <int D, int BR, int BC, bool CAUSAL>
__device__ __forceinline__ void flash3_wgmma_block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K,
                                                   const bf16 *__restrict__ V, bf16 *__restrict__ O,
                                                   float *__restrict__ LSE, int N, float scale FS_TRACE_PARAMS) {
  constexpr int NT = BR * 2; // a warpgroup of 128 threads per 64 rows
  constexpr int NI = BC / 8; // column atoms of S
  constexpr int DI = D / 8;  // column atoms of O
  static_assert(BR % 64 == 0 && D % 64 == 0 && BC % 64 == 0, "whole warpgroups and whole panels");

  extern __shared__ unsigned char smem_raw[];
  // The panels' swizzle repeats every 1024 bytes and the descriptors assume
  // each panel starts on that period.
  unsigned char *smem = smem_raw + ((1024 - (fast::smem_addr(smem_raw) & 1023)) & 1023);
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sK0 = sQ + BR * D;     // K_j of stage j%2 at sK0 + (j%2)·BC·D
  bf16 *sV0 = sK0 + 2 * BC * D; // likewise V_j

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int Tr = (N + BR - 1) / BR;
  const int qtile = CAUSAL ? Tr - 1 - blockIdx.x : blockIdx.x; // heaviest first
  const int bh = blockIdx.y;
  const int r0 = qtile * BR;
  const size_t base = (size_t)bh * N * D;
  const float sl2 = scale * 1.4426950408889634f;
  const Rows w{r0, warp * 16, g, t}; // the warp's first row: warpgroup warp/4, warp warp%4 of it

  FS_TRACED(fs_cursor cur = fs_begin(fs_trace, fs_offsets, fs_mode, bh * Tr + qtile);
            const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
            const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
            const bool full = cur.rec != nullptr && fs_mode == FS_MODE_FULL;
            const int rowsValid = min(BR, N - r0);)

  //> load-q: Q_i, K_0 and V_0 by cp.async into swizzled panels; m, l and O start empty
  load_panels<BR, D, NT>(sQ, Q + base, r0, N, tid);
  load_panels<BC, D, NT>(sK0, K + base, 0, N, tid);
  load_panels<BC, D, NT>(sV0, V + base, 0, N, tid);
  fast::cp_async_commit();

  float o[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; x++) o[x] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  const int Tc = (N + BC - 1) / BC;
  const int jEnd = CAUSAL ? min(Tc, (min(N, r0 + BR) - 1) / BC + 1) : Tc;
  // This warpgroup's 64 rows of Q, as the A operand: 16-column k-steps
  // advance 32 bytes within a panel, then jump to the next panel.
  const uint32_t qBase = fast::smem_addr(sQ) + (warp >> 2) * 64 * 128;

  for (int j = 0; j < jEnd; j++) {
    FS_TRACED(if (tid == 0) cur.t_start = fs_globaltimer();)
    const int stage = j & 1;
    const bf16 *sK = sK0 + stage * BC * D;
    const bf16 *sV = sV0 + stage * BC * D;
    //> load-kv: K_{j+1} and V_{j+1} by cp.async into the other stage, while tile j is multiplied
    if (j + 1 < jEnd) {
      load_panels<BC, D, NT>(sK0 + (stage ^ 1) * BC * D, K + base, (j + 1) * BC, N, tid);
      load_panels<BC, D, NT>(sV0 + (stage ^ 1) * BC * D, V + base, (j + 1) * BC, N, tid);
    }
    fast::cp_async_commit();
    fast::cp_async_wait<1>(); // Q, K_j and V_j are in
    fence_async_shared();     // ...and visible to the tensor cores' reads
    __syncthreads();

    //> scores: S = Q_i K_jᵀ, d/16 wgmma from shared memory, waited for at once
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

    //> pv: O += bf16(P)·V_j, P from registers, V read transposed from shared memory
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
    __syncthreads(); // every warpgroup is done with stage j before tile j+2 is loaded into it
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
  epilogue<DI, BR, BC, D>(o, m, l, O + base, LSE + (size_t)bh * N, w, N, scale FS_TRACED(, full ? fs_payload(cur) : nullptr));
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
// lines to the registry's Tiles).
#define FLASH3_WGMMA_KERNEL(NAME, BR, BC, D, CAUSAL)                                                                \
  extern "C" __global__ void __launch_bounds__(BR * 2)                                                               \
      NAME(const hopper::bf16 *__restrict__ Q, const hopper::bf16 *__restrict__ K, const hopper::bf16 *__restrict__ V, \
           hopper::bf16 *__restrict__ O, float *__restrict__ LSE, int N, float scale FS_TRACE_PARAMS) {              \
    hopper::flash3_wgmma_block<D, BR, BC, CAUSAL>(Q, K, V, O, LSE, N, scale FS_TRACED(, fs_trace, fs_offsets, fs_mode)); \
  }
#define FLASH3_WGMMA_INSTANCE(BR, BC, D)                                                                           \
  FLASH3_WGMMA_KERNEL(flash3_wgmma_br##BR##_bc##BC##_d##D, BR, BC, D, false)                                        \
  FLASH3_WGMMA_KERNEL(flash3_wgmma_br##BR##_bc##BC##_d##D##_causal, BR, BC, D, true)

FLASH3_WGMMA_INSTANCE(128, 128, 64)
FLASH3_WGMMA_INSTANCE(128, 64, 128)
