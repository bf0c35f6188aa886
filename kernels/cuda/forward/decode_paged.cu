// Split-KV decoding from a paged KV cache, bf16 in and out: the third rung
// of inference's ladder, whose CPU mirror is decode_split.go's (the same
// arithmetic; decode_paged.go says why).
//
// An inference server keeps its cache as a pool of pages, each a kv-tile
// (BC consecutive tokens) of every K/V head of one sequence, handed out as
// sequences grow; a sequence's block table lists its pages in order:
//
//   K pool, V pool   [pages][Hkv][BC][D]      a page holds head after head
//   table            [batch][Tc]              table[b][j]: the page of kv-tile j
//
// Kernel 1, decode_paged_*: decode_split's block (decode_group.cu with
// SPLIT and PAGED): for each kv-tile it reads the table's entry, then
// copies the K/V head's BC rows from that page, three tiles in flight as
// ever. The entry is one 4-byte load, asked for a step before the copies
// that need its value (which are themselves NS − 1 tiles ahead of their
// use), so no thread waits on it; the rows of a page are in one piece, so
// the copies are the contiguous rung's. A ragged last kv-tile's page has
// rows past N, which the copy zeroes and the scores mask, as before.
//
// Kernel 2, decode_paged_merge_*: decode_split's merge, unchanged (the
// partials know nothing of pages).
#define DECODE_SPLIT_NO_INSTANCES
#include "decode_split.cu"

namespace decode {

// The split kernel is decode_group.cu's block with SPLIT and PAGED: its
// phases are there, and the merge's in decode_split.cu.
//> load-q: the group's q-tiles packed into one 16-row atom, by every split's block (decode_group.cu's decode_group_block)
//> load-kv: for each kv-tile, the block table's entry table[b·Tc + j], then the tile's K and V rows from that page, NS − 1 tiles ahead (decode_group.cu's pageOf and loadPage, PAGED)
//> scores: S = Q K_jᵀ, a quarter of the keys a warp, masks past N and past each row's position (decode_group.cu)
//> softmax: whole rows from shared memory, the online softmax from a fresh m and l at the split's first kv-tile (decode_group.cu)
//> pv: O = α·O + bf16(P)·V_j, a quarter of d a warp (decode_group.cu)
//> split-end: the split's end: O_s = O/l and LSE_s = m·scale + log l, float32, to OS and LSES (decode_group.cu's epilogue, SPLIT)
//> merge-lse: each row's LSE from the splits' LSE_s (decode_split.cu's merge_block)
//> merge: O = Σ_s exp(LSE_s − LSE)·O_s, split by split (decode_split.cu)
//> epilogue: the merged O in bf16 and the LSE to device memory (decode_split.cu)
//> end

} // namespace decode

// The compiled instantiations (decode_paged.go's Tiles: decode_group's; a
// test checks the two agree): the split kernel at each tile, reading
// through the block table, and the merge at each (Br, d).
#define DECODE_PAGED_INSTANCE(BR, BC, D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(decode::NT) decode_paged_br##BR##_bc##BC##_d##D(                             \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V,                 \
      const int *__restrict__ table, float *__restrict__ OS, float *__restrict__ LSES, int N, int Nq, int H, int G,         \
      float scale, int causal, int per, int splits FS_TRACE_PARAMS) {                                                       \
    decode::decode_group_block<BR, BC, D, true, true>(Q, K, V, table, nullptr, nullptr, OS, LSES, N, Nq, H, G, scale, causal, \
                                                      per, splits FS_TRACED(, fs_trace, fs_offsets, fs_mode));             \
  }                                                                                                                          \
  extern "C" __global__ void __launch_bounds__(decode::MT) decode_paged_merge_br##BR##_d##D(                                \
      const float *__restrict__ OS, const float *__restrict__ LSES, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int Nq, \
      int splits FS_TRACE_PARAMS) {                                                                                          \
    decode::merge_block<BR, D>(OS, LSES, O, LSE, Nq, splits FS_TRACED(, fs_trace, fs_offsets, fs_mode));                     \
  }

DECODE_PAGED_INSTANCE(1, 64, 64)
DECODE_PAGED_INSTANCE(2, 64, 64)
DECODE_PAGED_INSTANCE(4, 64, 64)
DECODE_PAGED_INSTANCE(8, 64, 64)
DECODE_PAGED_INSTANCE(16, 64, 64)
DECODE_PAGED_INSTANCE(1, 64, 128)
DECODE_PAGED_INSTANCE(2, 64, 128)
DECODE_PAGED_INSTANCE(4, 64, 128)
DECODE_PAGED_INSTANCE(8, 64, 128)
DECODE_PAGED_INSTANCE(16, 64, 128)
