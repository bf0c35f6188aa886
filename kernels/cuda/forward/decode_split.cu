// Split-KV decoding (flash-decoding), bf16 in and out: the second rung of
// inference's ladder, whose CPU mirror is decode_split.go.
//
// Kernel 1, decode_split_*: decode_group's block (this file includes
// decode_group.cu) with a third grid dimension, the split. Block (q-tile,
// batch and K/V head, split s) walks kv-tiles [s·per, (s+1)·per) from a
// fresh m, l and O, and ends with the split's partial for each head of its
// group: O_s = O/l and LSE_s = m·scale + log l, float32, to OS and LSES.
// A split a causal q-tile never reaches walks nothing and ends with O_s = 0,
// LSE_s = −inf. So batch 1 with 8 heads of K and V fills the GPU: 8 blocks
// become 8 × splits.
//
// Kernel 2, decode_merge_*: a block per (q-tile, batch-head), a thread per
// column of O. For each row of the q-tile, from the splits' partials:
//
//   M    = max_s LSE_s
//   LSE  = M + logf(Σ_s expf(LSE_s − M))     the row's log-sum-exp
//   w_s  = expf(LSE_s − LSE)                 split s's share (Σ w_s = 1)
//   O    = Σ_s w_s·O_s                       fmaf, in split order
//
// and O to device memory in bf16 with the LSE. It is the online softmax's
// rescale again, across blocks: a split's O_s was divided by its own l,
// and w_s = l_s·e^(m_s − m)/l puts back what the whole row's l and max
// make of it.
#ifndef FLASHSTEP_DECODE_SPLIT_CU
#define FLASHSTEP_DECODE_SPLIT_CU
#define DECODE_GROUP_NO_INSTANCES
#include "decode_group.cu"

namespace decode {

// The split kernel is decode_group.cu's block with SPLIT = true (the
// DECODE_SPLIT_INSTANCE lines below): its phases are there.
//> load-q: the group's q-tiles packed into one 16-row atom, by every split's block (decode_group.cu's decode_group_block)
//> load-kv: the split's first kv-tiles, then each next one NS − 1 ahead, into the stage the last one freed (decode_group.cu)
//> scores: S = Q K_jᵀ, a quarter of the keys a warp, masks past N and past each row's position (decode_group.cu)
//> softmax: whole rows from shared memory, the online softmax from a fresh m and l at the split's first kv-tile (decode_group.cu)
//> pv: O = α·O + bf16(P)·V_j, a quarter of d a warp (decode_group.cu)
//> split-end: the split's end: O_s = O/l and LSE_s = m·scale + log l, float32, to OS and LSES (decode_group.cu's epilogue, SPLIT)
//> end

constexpr int MT = 128; // the merge's threads: columns of O, looping where d is larger

template <int BR, int D>
__device__ __forceinline__ void merge_block(const float *__restrict__ OS, const float *__restrict__ LSES, bf16 *__restrict__ O,
                                            float *__restrict__ LSE, int Nq, int splits FS_TRACE_PARAMS) {
  constexpr int XS = (D + MT - 1) / MT; // columns a thread holds
  const int tid = threadIdx.x, qtile = blockIdx.x, bh = blockIdx.y;
  const int Tr = (Nq + BR - 1) / BR, r0 = qtile * BR, rowsValid = min(BR, Nq - r0);
  const size_t part0 = ((size_t)bh * Tr + qtile) * splits; // this q-tile's first split, in partials
#ifdef DECODE_PDL
  // A bench build launched early (programmatic dependent launch): wait
  // here for the split kernel's grid to end and its partials to be seen.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  //> merge-lse: the splits' LSE_s into shared memory at once, then each row's log-sum-exp from them
  // Read together, not one dependent load a split.
  extern __shared__ float sL[]; // [splits][BR]
  for (int k = tid; k < splits * BR; k += MT) sL[k] = LSES[part0 * BR + k];
  __syncthreads();
  float lse[BR];
#pragma unroll
  for (int r = 0; r < BR; r++) {
    float mx = -INFINITY;
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, sL[s * BR + r]);
    if (mx == -INFINITY) { // no split saw a key
      lse[r] = -INFINITY;
      continue;
    }
    float sum = 0.f;
    for (int s = 0; s < splits; s++) sum = __fadd_rn(sum, expf(__fsub_rn(sL[s * BR + r], mx)));
    lse[r] = __fadd_rn(mx, logf(sum));
  }

  //> merge: O = Σ_s exp(LSE_s − LSE)·O_s, split by split
  float o[BR][XS];
#pragma unroll
  for (int r = 0; r < BR; r++)
#pragma unroll
    for (int k = 0; k < XS; k++) o[r][k] = 0.f;
  // 16/BR splits' loads of O_s (16 rows' worth) issued before their adds
  // wait on them: the adds go in split order, the loads need not (run ad:
  // four at a time left the merge 11 µs of latency at 32 splits).
#pragma unroll(16 / BR)
  for (int s = 0; s < splits; s++) {
    FS_TRACED(const unsigned long long tStart = fs_globaltimer();)
    float w[BR];
#pragma unroll
    for (int r = 0; r < BR; r++) {
      const float ls = sL[s * BR + r];
      w[r] = lse[r] == -INFINITY || ls == -INFINITY ? 0.f : expf(__fsub_rn(ls, lse[r]));
      const float *os = OS + ((part0 + s) * BR + r) * D;
#pragma unroll
      for (int k = 0; k < XS; k++)
        if (tid + k * MT < D) o[r][k] = fmaf(w[r], os[tid + k * MT], o[r][k]);
    }
#ifdef FS_TRACE
    const unsigned long long off = fs_offsets[((size_t)bh * Tr + qtile) * (splits + 1) + s];
    if (off != ~0ull) {
      unsigned char *rec = fs_trace + off;
      float *pl = reinterpret_cast<float *>(rec + sizeof(fs_record_header));
      if (fs_mode == FS_MODE_FULL) {
#pragma unroll
        for (int r = 0; r < BR; r++) {
#pragma unroll
          for (int k = 0; k < XS; k++)
            if (tid + k * MT < D) pl[fs_merge_o(BR, 0, D, 0) + r * D + tid + k * MT] = o[r][k];
          if (tid == 0) {
            pl[fs_merge_lse(BR, 0, D, 0) + r] = lse[r];
            pl[fs_merge_w(BR, 0, D, 0) + r] = w[r];
          }
        }
      }
      __syncthreads();
      if (tid == 0) {
        fs_cursor cur{rec, fs_mode, tStart};
        if (fs_mode == FS_MODE_FULL) fs_zero_padding(cur, fs_merge_o(BR, 0, D, 0) + BR * D, fs_merge_record_bytes(BR, 0, D, 0));
        // A timing record of a merge names no kv-tile, as an epilogue's.
        fs_write_header(cur, FS_KIND_MERGE, bh, qtile, fs_mode == FS_MODE_FULL ? s : FS_NO_TILE, rowsValid, 0,
                        (unsigned long long)rowsValid * D * 4 + rowsValid * 4, 0);
      }
    }
#endif
  }

  //> epilogue: the merged O in bf16 and the LSE to device memory
  FS_TRACED(const unsigned long long tEnd0 = fs_globaltimer();)
#pragma unroll
  for (int r = 0; r < BR; r++) {
    if (r >= rowsValid) break;
    const size_t row = (size_t)bh * Nq + r0 + r;
#pragma unroll
    for (int k = 0; k < XS; k++)
      if (tid + k * MT < D) O[row * D + tid + k * MT] = __float2bfloat16_rn(o[r][k]);
    if (tid == 0) LSE[row] = lse[r];
  }
#ifdef FS_TRACE
  const unsigned long long off = fs_offsets[((size_t)bh * Tr + qtile) * (splits + 1) + splits];
  if (off != ~0ull) {
    unsigned char *rec = fs_trace + off;
    float *pl = reinterpret_cast<float *>(rec + sizeof(fs_record_header));
    if (fs_mode == FS_MODE_FULL) {
#pragma unroll
      for (int r = 0; r < BR; r++) {
#pragma unroll
        for (int k = 0; k < XS; k++)
          if (tid + k * MT < D) pl[fs_epilogue_o(BR, 0, D, 0) + r * D + tid + k * MT] = o[r][k];
        if (tid == 0) pl[fs_epilogue_lse(BR, 0, D, 0) + r] = lse[r];
      }
    }
    __syncthreads();
    if (tid == 0) {
      fs_cursor cur{rec, fs_mode, tEnd0};
      if (fs_mode == FS_MODE_FULL) fs_zero_padding(cur, fs_epilogue_lse(BR, 0, D, 0) + BR, fs_epilogue_record_bytes(BR, 0, D, 0));
      fs_write_header(cur, FS_KIND_EPILOGUE, bh, qtile, FS_NO_TILE, rowsValid, 0, 0,
                      (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
    }
  }
#endif
}
//> end

} // namespace decode

// The compiled instantiations (decode_split.go's Tiles: decode_group's; a
// test checks the two agree): the split kernel at each tile, the merge at
// each (Br, d). decode_paged.cu includes this file for its merge, without
// these.
#ifndef DECODE_SPLIT_NO_INSTANCES
#define DECODE_SPLIT_INSTANCE(BR, BC, D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(decode::NT) decode_split_br##BR##_bc##BC##_d##D(                             \
      const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K, const fast::bf16 *__restrict__ V, float *__restrict__ OS, \
      float *__restrict__ LSES, int N, int Nq, int H, int G, float scale, int causal, int per, int splits FS_TRACE_PARAMS) {  \
    decode::decode_group_block<BR, BC, D, true>(Q, K, V, nullptr, nullptr, nullptr, OS, LSES, N, Nq, H, G, scale, causal, per, splits   \
                                                FS_TRACED(, fs_trace, fs_offsets, fs_mode));                               \
  }                                                                                                                          \
  extern "C" __global__ void __launch_bounds__(decode::MT) decode_merge_br##BR##_d##D(                                      \
      const float *__restrict__ OS, const float *__restrict__ LSES, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int Nq, \
      int splits FS_TRACE_PARAMS) {                                                                                          \
    decode::merge_block<BR, D>(OS, LSES, O, LSE, Nq, splits FS_TRACED(, fs_trace, fs_offsets, fs_mode));                     \
  }

DECODE_SPLIT_INSTANCE(1, 64, 64)
DECODE_SPLIT_INSTANCE(2, 64, 64)
DECODE_SPLIT_INSTANCE(4, 64, 64)
DECODE_SPLIT_INSTANCE(8, 64, 64)
DECODE_SPLIT_INSTANCE(16, 64, 64)
DECODE_SPLIT_INSTANCE(1, 64, 128)
DECODE_SPLIT_INSTANCE(2, 64, 128)
DECODE_SPLIT_INSTANCE(4, 64, 128)
DECODE_SPLIT_INSTANCE(8, 64, 128)
DECODE_SPLIT_INSTANCE(16, 64, 128)
#endif
#endif // FLASHSTEP_DECODE_SPLIT_CU
