// Decoding: a few queries against a long KV cache, bf16 in and out, float32
// accumulation; the first rung of inference's ladder, whose CPU mirror is
// flash2_fast.go's walk (decode_group.go says why).
//
// One block of four warps per (q-tile, batch and head of K and V). The G
// query heads that share the K/V head (G = heads/kv_heads) each bring
// their q-tile of BR rows, and the block packs them into one 16-row
// mma.sync atom: row a is head a / BR of the group, query row a % BR of
// the q-tile (G·BR ≤ 16; rows past them are zeros whose results go
// nowhere). So K_j and V_j are read once for the whole group. A decoding
// step has one query a head: the tensor cores idle, and the kernel's speed
// is the rate it reads the cache, which is why three kv-tiles are in
// flight by cp.async while one is used.
//
// Per kv-tile j each warp takes a quarter of S's columns (BC/4 keys):
//
//   S     = Q K_jᵀ, raw, d/16 MMAs of 16-term bf16 dot products into float32
//   masks -inf where col ≥ N, or causal and col > the row's position
//           (N − Nq + its query row: the queries are the last Nq positions)
//
// and leaves them in shared memory; every warp then reads whole rows back
// in the mma layout and runs flash2_fast's online softmax on them (the same
// m, α, p and quad partial sums of l in every warp), and computes O for its
// quarter of the d columns:
//
//   O     = O·α, then O += bf16(p)·V_j: BC/16 MMAs in order of the kv columns
//
// and once at the end O·(1/l) (bf16 out) and LSE = fma(m, scale, log l),
// which is flash2_fast's arithmetic row for row. A step's records go to
// each head of the group (a trace slot per record, decode_group.go).
#ifndef FLASHSTEP_DECODE_GROUP_CU
#define FLASHSTEP_DECODE_GROUP_CU
#include "../common/instrument.cuh"
#include "../common/mma.cuh"

namespace decode {

using fast::bf16;

constexpr int ROWS = 16; // the one mma row atom the group's q-tiles share
constexpr int NW = 4;
constexpr int NT = NW * 32;
// kv-tiles in flight; a bench may build other depths (bench/decode).
#ifndef DECODE_STAGES
#define DECODE_STAGES 3
#endif
constexpr int NS = DECODE_STAGES;
// A bench build may keep one part of the walk alone, to see which bounds
// the split kernel at batch 1 (bench/decode, docs/DECODE.md run az): 1 the
// copies alone (no arithmetic), 2 the arithmetic alone (no kv-tile asked
// for after the first NS − 1: each step multiplies a stage already in).
#ifndef DECODE_PART
#define DECODE_PART 0
#endif

// Shared memory: the atom's Q, NS stages of K_j then V_j (bf16, swizzled),
// and the atom's S in float32, rows padded by 8.
constexpr int smem_bytes(int D, int BC) { return 2 * (ROWS * D + NS * 2 * BC * D) + 4 * ROWS * (BC + 8); }

// SPLIT: the block walks split blockIdx.z of the kv-tiles (per of them,
// splits in all; decode_split.cu) and ends with the split's partial, O
// divided by its own l and its LSE, in float32 to OS and LSES; else it
// walks them all and writes O (bf16) and the LSE. PAGED: K and V are a
// paged cache's pools, kv-tile j of batch row b in page table[b·Tc + j]
// (decode_paged.cu); else each K/V head's N rows lie in one piece.
template <int BR, int BC, int D, bool SPLIT, bool PAGED = false>
__device__ __forceinline__ void decode_group_block(const bf16 *__restrict__ Q, const bf16 *__restrict__ K,
                                                   const bf16 *__restrict__ V, const int *__restrict__ table,
                                                   bf16 *__restrict__ O, float *__restrict__ LSE,
                                                   float *__restrict__ OS, float *__restrict__ LSES, int N, int Nq, int H, int G,
                                                   float scale, int causal, int per, int splits FS_TRACE_PARAMS) {
  constexpr int CH = D / 8;      // 16-byte chunks per row
  constexpr int NI = BC / 8;     // column atoms of a whole row of S
  constexpr int WNI = NI / NW;   // a warp's column atoms of S
  constexpr int WDI = D / 8 / NW; // a warp's column atoms of O
  constexpr int SS = BC + 8;     // a row of sS, padded
  static_assert(ROWS % BR == 0, "a head's q-tile is a whole part of the atom");
  static_assert(WNI % 2 == 0 && WDI % 2 == 0, "a warp's columns go in pairs of 8-column atoms");
  static_assert(D % 64 == 0, "the swizzle needs rows of at least 8 chunks");

  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem);
  bf16 *sKV = sQ + ROWS * D; // stage s: K at sKV + s·2·BC·D, V after it
  float *sS = reinterpret_cast<float *>(sKV + NS * 2 * BC * D);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3; // the fragment's row group and column pair
  const int Tc = (N + BC - 1) / BC;
  const int qtile = blockIdx.x;
  const int bkv = blockIdx.y; // batch · kv_heads + kv-head
  const int bh0 = (bkv / (H / G)) * H + (bkv % (H / G)) * G; // the group's first query batch-head
  const int r0 = qtile * BR;
  const int rowsValid = min(BR, Nq - r0);
  const int pos0 = N - Nq + r0; // the position of the q-tile's first row
  const size_t kvBase = (size_t)bkv * N * D;
  const float sl2 = scale * 1.4426950408889634f;

#ifdef FS_TRACE
  const int Tr = (Nq + BR - 1) / BR;
  const unsigned stepBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_flash_step_record_bytes(BR, BC, D, N);
  const unsigned epiBytes = fs_mode == FS_MODE_TIMING ? FS_RECORD_HEADER_BYTES : fs_epilogue_record_bytes(BR, BC, D, N);
  const bool full = fs_mode == FS_MODE_FULL;
  // The record of head hs of the group at kv-tile j (Tc: the block's end,
  // the epilogue or the split's end), or null: a slot per record
  // (decode_group.go, decode_split.go).
  auto recordOf = [&](int hs, int j) -> unsigned char * {
    const size_t block = (size_t)(bh0 + hs) * Tr + qtile;
    const unsigned long long off = SPLIT ? fs_offsets[block * (Tc + splits) + (j < Tc ? j : Tc + blockIdx.z)]
                                         : fs_offsets[block * (Tc + 1) + j];
    return off == ~0ull ? nullptr : fs_trace + off;
  };
  unsigned long long tStart = 0;
#endif

#ifdef DECODE_PDL
  // A bench build (bench/decode/decode.cu pdl): let the merge's blocks be
  // scheduled while this grid runs; they wait for its end themselves.
  if (SPLIT) asm volatile("griddepcontrol.launch_dependents;");
#endif
  //> load-q: the group's q-tiles into one 16-row atom by cp.async; m, l and O start empty
#pragma unroll
  for (int c = tid; c < ROWS * CH; c += NT) {
    const int a = c / CH, ch = c % CH, hs = a / BR, rq = a % BR;
    const bool ok = hs < G && rq < rowsValid;
    const bf16 *src = Q + ((size_t)(bh0 + (ok ? hs : 0)) * Nq + r0 + (ok ? rq : 0)) * D + ch * 8;
    fast::cp_async16(fast::smem_addr(sQ + fast::swz<CH>(a, ch) * 8), src, ok);
  }
  const int jEnd = causal ? min(Tc, (pos0 + rowsValid - 1) / BC + 1) : Tc;
  // The kv-tiles this block walks: all it visits, or its split's (none
  // where a causal q-tile stops short of the split).
  const int j0 = SPLIT ? min((int)blockIdx.z * per, jEnd) : 0;
  const int j1 = SPLIT ? min(((int)blockIdx.z + 1) * per, jEnd) : jEnd;
  //> load-kv: the first kv-tiles' K_j and V_j by cp.async, NS − 1 of them ahead
  // A paged cache's kv-tile j into a stage, from page (the block table's
  // entry for it): the K/V head's BC rows of it lie there in one piece.
  // The entry is one load more a kv-tile (pageOf), every thread reading
  // the same one; the main loop asks for it a step before the copies
  // need it, so that they do not wait on it.
  const int Hkv = H / G;
  const int *rowTable = PAGED ? table + (size_t)(bkv / Hkv) * Tc : nullptr;
  auto pageOf = [&](int j) -> int { return __ldg(rowTable + j); };
  auto loadPage = [&](bf16 *stage, int j, size_t page) {
    const size_t at = (page * Hkv + bkv % Hkv) * BC * D;
    fast::load_tile<BC, D, NT, true>(stage, K + at, 0, min(BC, N - j * BC), tid);
    fast::load_tile<BC, D, NT, true>(stage + BC * D, V + at, 0, min(BC, N - j * BC), tid);
  };
#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (j0 + s < j1) {
      if constexpr (PAGED) {
        loadPage(sKV + s * 2 * BC * D, j0 + s, pageOf(j0 + s));
      } else {
        fast::load_tile<BC, D, NT, true>(sKV + s * 2 * BC * D, K + kvBase, (j0 + s) * BC, N, tid);
        fast::load_tile<BC, D, NT, true>(sKV + s * 2 * BC * D + BC * D, V + kvBase, (j0 + s) * BC, N, tid);
      }
    }
    fast::cp_async_commit();
  }
  //> end

  float o[WDI][4];
  float m[2], l[2];
#pragma unroll
  for (int di = 0; di < WDI; di++) o[di][0] = o[di][1] = o[di][2] = o[di][3] = 0.f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.f;

  int nextPage = PAGED && j0 + NS - 1 < j1 ? pageOf(j0 + NS - 1) : 0; // the main loop's first copies' page
  for (int j = j0; j < j1; j++) {
    FS_TRACED(if (tid == 0) tStart = fs_globaltimer();)
    //> load-kv: K_j and V_j have landed; K_{j+2} and V_{j+2} start on their way into the stage j − 1 freed
    fast::cp_async_wait<NS - 2>(); // tile j (and Q) are in
    __syncthreads();               // and every warp is done with tile j − 1 and with sS
    if (DECODE_PART != 2 && j + NS - 1 < j1) {
      const int s = (j - j0 + NS - 1) % NS;
      if constexpr (PAGED) {
        loadPage(sKV + s * 2 * BC * D, j + NS - 1, nextPage);
        if (j + NS < j1) nextPage = pageOf(j + NS); // the next step's, on its way under this one
      } else {
        fast::load_tile<BC, D, NT, true>(sKV + s * 2 * BC * D, K + kvBase, (j + NS - 1) * BC, N, tid);
        fast::load_tile<BC, D, NT, true>(sKV + s * 2 * BC * D + BC * D, V + kvBase, (j + NS - 1) * BC, N, tid);
      }
    }
    fast::cp_async_commit();
    const bf16 *sK = sKV + ((j - j0) % NS) * 2 * BC * D, *sV = sK + BC * D;

    if (DECODE_PART == 1) continue;
    //> scores: S = Q K_jᵀ for this warp's quarter of the keys, mma.sync with fragments from ldmatrix
    {
      float s[WNI][4];
#pragma unroll
      for (int ni = 0; ni < WNI; ni++) s[ni][0] = s[ni][1] = s[ni][2] = s[ni][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[4];
        fast::ldsm_x4(fast::smem_addr(sQ + fast::swz<CH>(lane & 15, kk * 2 + (lane >> 4)) * 8), a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int n2 = 0; n2 < WNI / 2; n2++) {
          uint32_t b0, b1, b2, b3;
          const int row = warp * WNI * 8 + n2 * 16 + (lane & 7) + ((lane >> 4) << 3);
          fast::ldsm_x4(fast::smem_addr(sK + fast::swz<CH>(row, kk * 2 + ((lane >> 3) & 1)) * 8), b0, b1, b2, b3);
          fast::mma16816(s[2 * n2], a, b0, b1);
          fast::mma16816(s[2 * n2 + 1], a, b2, b3);
        }
      }
      // Masks: the ragged last tile, and under causal the keys past the
      // row's position. A row of the atom no head owns computes on zeros
      // and goes nowhere.
      const int c0 = j * BC;
#pragma unroll
      for (int ni = 0; ni < WNI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int a = g + (e >> 1) * 8;
          const int col = c0 + warp * WNI * 8 + ni * 8 + 2 * t + (e & 1);
          if (col >= N || (causal && col > pos0 + a % BR)) s[ni][e] = -INFINITY;
          sS[a * SS + warp * WNI * 8 + ni * 8 + 2 * t + (e & 1)] = s[ni][e];
        }
    }
    __syncthreads(); // every warp's keys are in sS

    //> softmax: whole rows from shared memory, row max across the quad, α, P = 2^(…), l = α·l + Σ P, O = α·O
    uint32_t pk[NI][2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int a = g + h * 8;
      float sr[NI][2];
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const float2 v = *reinterpret_cast<const float2 *>(&sS[a * SS + ni * 8 + 2 * t]);
        sr[ni][0] = v.x;
        sr[ni][1] = v.y;
      }
      float mx = m[h];
#pragma unroll
      for (int ni = 0; ni < NI; ni++) mx = fmaxf(mx, fmaxf(sr[ni][0], sr[ni][1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      const float mb = mx == -INFINITY ? 0.f : mx * sl2; // a row masked so far: exp2(−inf) = 0, never NaN
      const float alpha = fast::ex2(fmaf(m[h], sl2, -mb));
#ifdef FS_TRACE
      // Warp 0 writes the row's S, m, α and P into its head's record (every
      // warp holds the same values).
      unsigned char *rec = a / BR < G ? recordOf(a / BR, j) : nullptr;
      float *pl = rec && full && warp == 0 ? reinterpret_cast<float *>(rec + sizeof(fs_record_header)) : nullptr;
      const int rr = a % BR;
      if (pl) {
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
          pl[fs_flash_step_s(BR, BC, D, N) + rr * BC + ni * 8 + 2 * t] = sr[ni][0] * scale;
          pl[fs_flash_step_s(BR, BC, D, N) + rr * BC + ni * 8 + 2 * t + 1] = sr[ni][1] * scale;
        }
        if (t == 0) {
          pl[fs_flash_step_m_old(BR, BC, D, N) + rr] = m[h] * scale;
          pl[fs_flash_step_m_new(BR, BC, D, N) + rr] = mx * scale;
          pl[fs_flash_step_alpha(BR, BC, D, N) + rr] = alpha;
        }
      }
#endif
      m[h] = mx;
      float rs = 0.f;
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const float p0 = fast::ex2(fmaf(sr[ni][0], sl2, -mb));
        const float p1 = fast::ex2(fmaf(sr[ni][1], sl2, -mb));
        pk[ni][h] = fast::pack_bf16(p0, p1);
        rs += p0 + p1;
        FS_TRACED(if (pl) {
          pl[fs_flash_step_p(BR, BC, D, N) + rr * BC + ni * 8 + 2 * t] = p0;
          pl[fs_flash_step_p(BR, BC, D, N) + rr * BC + ni * 8 + 2 * t + 1] = p1;
        })
      }
      l[h] = fmaf(l[h], alpha, rs); // this thread's part of the row; the quad adds up at the end
      FS_TRACED(if (full && warp == 0) { // every lane shuffles; the rows a head owns are written
        float lq = l[h] + __shfl_xor_sync(0xffffffff, l[h], 1);
        lq += __shfl_xor_sync(0xffffffff, lq, 2);
        if (pl && t == 0) pl[fs_flash_step_l(BR, BC, D, N) + rr] = lq;
      })
#pragma unroll
      for (int di = 0; di < WDI; di++) {
        o[di][2 * h] *= alpha;
        o[di][2 * h + 1] *= alpha;
      }
    }

    //> pv: O += bf16(P)·V_j for this warp's quarter of the d columns, V through ldmatrix.trans
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
#pragma unroll
      for (int d2 = 0; d2 < WDI / 2; d2++) {
        uint32_t b0, b1, b2, b3;
        const int ch = warp * WDI + d2 * 2 + (lane >> 4);
        fast::ldsm_x4_trans(fast::smem_addr(sV + fast::swz<CH>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), ch) * 8), b0, b1, b2,
                            b3);
        fast::mma16816(o[2 * d2], a, b0, b1);
        fast::mma16816(o[2 * d2 + 1], a, b2, b3);
      }
    }
    //> end
#ifdef FS_TRACE
    {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int a = g + h * 8;
        unsigned char *rec = a / BR < G ? recordOf(a / BR, j) : nullptr;
        if (rec && full) {
          float *pl = reinterpret_cast<float *>(rec + sizeof(fs_record_header)) + fs_flash_step_o(BR, BC, D, N) + (a % BR) * D;
#pragma unroll
          for (int di = 0; di < WDI; di++) {
            pl[(warp * WDI + di) * 8 + 2 * t] = o[di][2 * h];
            pl[(warp * WDI + di) * 8 + 2 * t + 1] = o[di][2 * h + 1];
          }
        }
      }
      __syncthreads(); // the step's work is done: stamp its end
      if (tid == 0) {
        const int colsValid = min(BC, N - j * BC);
        for (int hs = 0; hs < G; hs++) {
          unsigned char *rec = recordOf(hs, j);
          if (!rec) continue;
          fs_cursor cur{rec, fs_mode, tStart};
          if (full) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
          // K_j and V_j are read once for the group: counted on its first
          // head; Q at the block's first kv-tile.
          const unsigned long long rd =
              (hs == 0 ? 2ull * colsValid * D * 2 : 0) + (j == j0 ? (unsigned long long)rowsValid * D * 2 : 0);
          fs_write_header(cur, FS_KIND_FLASH_STEP, bh0 + hs, qtile, j, rowsValid, colsValid, rd, 0);
        }
      }
    }
#endif
  }

  //> epilogue: the quad's partial sums make l; O / l and the LSE for each head of the group: to device memory in bf16, or a split's partial in float32
  fast::cp_async_wait<0>(); // nothing left in flight (a split with no kv-tiles loaded Q alone)
  FS_TRACED(if (tid == 0) tStart = fs_globaltimer();)
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float lt = l[h];
    lt += __shfl_xor_sync(0xffffffff, lt, 1);
    lt += __shfl_xor_sync(0xffffffff, lt, 2);
    const float inv = lt == 0.f ? 0.f : 1.f / lt;
    const float lse = lt == 0.f ? -INFINITY : fmaf(m[h], scale, logf(lt));
    const int a = g + h * 8, hs = a / BR, rq = a % BR;
    if (SPLIT && hs < G) {
      // The split's partial, every row of the q-tile (the merge reads them all).
      const size_t row = (((size_t)(bh0 + hs) * ((Nq + BR - 1) / BR) + qtile) * splits + blockIdx.z) * BR + rq;
      float *out = OS + row * D;
#pragma unroll
      for (int di = 0; di < WDI; di++)
        *reinterpret_cast<float2 *>(out + (warp * WDI + di) * 8 + 2 * t) = make_float2(o[di][2 * h] * inv, o[di][2 * h + 1] * inv);
      if (warp == 0 && t == 0) LSES[row] = lse;
    } else if (!SPLIT && hs < G && rq < rowsValid) {
      const size_t row = (size_t)(bh0 + hs) * Nq + r0 + rq;
      bf16 *out = O + row * D;
#pragma unroll
      for (int di = 0; di < WDI; di++)
        *reinterpret_cast<__nv_bfloat162 *>(out + (warp * WDI + di) * 8 + 2 * t) =
            __floats2bfloat162_rn(o[di][2 * h] * inv, o[di][2 * h + 1] * inv);
      if (warp == 0 && t == 0) LSE[row] = lse;
    }
#ifdef FS_TRACE
    unsigned char *rec = hs < G ? recordOf(hs, Tc) : nullptr;
    if (rec && full) {
      float *pl = reinterpret_cast<float *>(rec + sizeof(fs_record_header));
      const unsigned oAt = SPLIT ? fs_split_end_o(BR, BC, D, N) : fs_epilogue_o(BR, BC, D, N);
      const unsigned lseAt = SPLIT ? fs_split_end_lse(BR, BC, D, N) : fs_epilogue_lse(BR, BC, D, N);
#pragma unroll
      for (int di = 0; di < WDI; di++) {
        pl[oAt + rq * D + (warp * WDI + di) * 8 + 2 * t] = o[di][2 * h] * inv;
        pl[oAt + rq * D + (warp * WDI + di) * 8 + 2 * t + 1] = o[di][2 * h + 1] * inv;
      }
      if (warp == 0 && t == 0) pl[lseAt + rq] = lse;
    }
#endif
  }
#ifdef FS_TRACE
  __syncthreads();
  if (tid == 0) {
    for (int hs = 0; hs < G; hs++) {
      unsigned char *rec = recordOf(hs, Tc);
      if (!rec) continue;
      fs_cursor cur{rec, fs_mode, tStart};
      if (SPLIT) {
        if (full) fs_zero_padding(cur, fs_split_end_lse(BR, BC, D, N) + BR, fs_split_end_record_bytes(BR, BC, D, N));
        // A timing record of a split's end names no kv-tile, as an epilogue's.
        fs_write_header(cur, FS_KIND_SPLIT_END, bh0 + hs, qtile, full ? blockIdx.z : FS_NO_TILE, rowsValid, 0, 0,
                        (unsigned long long)rowsValid * D * 4 + (unsigned long long)rowsValid * 4);
      } else {
        if (full) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
        fs_write_header(cur, FS_KIND_EPILOGUE, bh0 + hs, qtile, FS_NO_TILE, rowsValid, 0, 0,
                        (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
      }
    }
  }
#endif
}
//> end

} // namespace decode

// The compiled instantiations, extern "C" so the worker finds each by name
// (decode_group.go's Tiles; a test checks the two agree). N, Nq, the heads
// and the group are ints and the scale a float, as the block takes them.
// decode_split.cu includes this file for its block, without these.
#ifndef DECODE_GROUP_NO_INSTANCES
#define DECODE_GROUP_INSTANCE(BR, BC, D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(decode::NT) decode_group_br##BR##_bc##BC##_d##D(                             \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,                 \
      fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N, int Nq, int H, int G, float scale, int causal FS_TRACE_PARAMS) { \
    decode::decode_group_block<BR, BC, D, false>(Q, K, V, nullptr, O, LSE, nullptr, nullptr, N, Nq, H, G, scale, causal, 0, 1           \
                                                 FS_TRACED(, fs_trace, fs_offsets, fs_mode));                              \
  }

DECODE_GROUP_INSTANCE(1, 64, 64)
DECODE_GROUP_INSTANCE(2, 64, 64)
DECODE_GROUP_INSTANCE(4, 64, 64)
DECODE_GROUP_INSTANCE(8, 64, 64)
DECODE_GROUP_INSTANCE(16, 64, 64)
DECODE_GROUP_INSTANCE(1, 64, 128)
DECODE_GROUP_INSTANCE(2, 64, 128)
DECODE_GROUP_INSTANCE(4, 64, 128)
DECODE_GROUP_INSTANCE(8, 64, 128)
DECODE_GROUP_INSTANCE(16, 64, 128)
#endif
#endif // FLASHSTEP_DECODE_GROUP_CU
