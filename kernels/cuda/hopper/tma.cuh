// Hopper's tensor memory accelerator (TMA) and the mbarriers that say when
// its copies have landed, for the ladder's Hopper rungs (flash3_tma.cu,
// flash3_ws.cu, flash3_bwd_tma.cu), and its bulk reduce, which adds a box
// of shared memory into device memory (flash3_bwd_bulk.cu). Needs sm_90a
// (scripts/ptx-hopper).
//
// A TMA copy is one instruction, issued by one thread, that moves a whole
// box of a tensor (here 64 bf16 columns × a tile's rows of one batch-head)
// from device memory into shared memory, swizzled on the way in, with rows
// past the tensor's edge filled with zeros. What the tensor looks like (its
// address, sizes, strides, the box and the swizzle) is a 128-byte tensor map
// the host encodes (cuTensorMapEncodeTiled, in the worker) and passes as a
// __grid_constant__ kernel argument. The copy runs on its own; when its bytes
// have landed it counts them off an mbarrier in shared memory, and threads
// that need the tile wait on that barrier's phase.
//
// An mbarrier completes a phase when its expected arrivals have arrived and
// the bytes it was told to expect (expect_tx) have been counted off by
// copies; it then starts the next phase. A waiter names the parity of the
// phase it waits for: the k-th use of a barrier (from 0) is phase k, parity
// k & 1.
#ifndef FLASHSTEP_TMA_CUH
#define FLASHSTEP_TMA_CUH

#include "../common/mma.cuh"

namespace hopper {

// TensorMap is the driver's CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// mbar_init sets a barrier to expect count arrivals a phase; one thread
// initialises, then mbar_init_fence makes the barriers visible to the copy
// engine before anyone uses them (with a __syncthreads for the threads).
__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(fast::smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// mbar_expect is one arrival that also tells the barrier to expect bytes
// more from copies before its phase completes.
__device__ __forceinline__ void mbar_expect(uint64_t *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(fast::smem_addr(bar)), "r"(bytes) : "memory");
}

// mbar_arrive is one plain arrival: a consumer saying it is done with a
// buffer.
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(fast::smem_addr(bar)) : "memory");
}

// mbar_wait returns once the barrier's phase of this parity has completed.
// try_wait itself suspends the thread for a while before it answers no.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(fast::smem_addr(bar)), "r"(parity)
                 : "memory");
  }
}

// tma_prefetch brings a tensor map into the copy engine's cache ahead of
// its first use.
__device__ __forceinline__ void tma_prefetch(const TensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// tma_load copies the box at (column x, row y, batch-head z) of a 3-D
// tensor map into shared memory at dst and counts its bytes off bar.
__device__ __forceinline__ void tma_load(void *dst, const TensorMap *map, int x, int y, int z, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          fast::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(fast::smem_addr(bar))
      : "memory");
}

// tma_load_run copies the box at element x of a 1-D tensor map (a run of
// float32 values, kernels.TensorMap's Run form) into shared memory at dst
// (128-byte aligned, as every tensor copy's destination) and counts its
// bytes off bar; elements past the tensor's end arrive as zeros. Its
// first element x must lie on a 16-byte boundary of the tensor, or the
// copy faults.
__device__ __forceinline__ void tma_load_run(void *dst, const TensorMap *map, int x, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::"r"(
          fast::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(fast::smem_addr(bar))
      : "memory");
}

// tma_load_panels copies ROWS rows of D bf16 of batch-head bh, from row
// row0, as D/64 boxes into a tile of 128-byte swizzled panels (the layout
// of wgmma.cuh: panel p at p·ROWS·128 bytes), all counted off bar; the
// caller has told bar to expect ROWS·D·2 bytes.
template <int ROWS, int D>
__device__ __forceinline__ void tma_load_panels(void *dst, const TensorMap *map, int row0, int bh, uint64_t *bar) {
#pragma unroll
  for (int p = 0; p < D / 64; p++)
    tma_load(static_cast<unsigned char *>(dst) + p * ROWS * 128, map, p * 64, row0, bh, bar);
}

// tma_reduce_add adds the box at src in shared memory (128-byte aligned,
// laid out and swizzled as a load of the same map would leave it) into
// the box at (column x, row y, batch-head z) of a 3-D float32 tensor map in
// device memory, element by element, as one bulk operation of the copy
// engine; elements past the tensor's edge are not written. The issuing
// thread's writes of src must be made visible to the copy engine first
// (fence_async_shared), and src must not be written again until the
// operation has read it (bulk_wait_read).
__device__ __forceinline__ void tma_reduce_add(const TensorMap *map, int x, int y, int z, const void *src) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(x), "r"(y), "r"(z), "r"(fast::smem_addr(src))
               : "memory");
}

// bulk_commit closes the issuing thread's bulk operations so far into a
// group; bulk_wait_read<N> returns once at most N of its groups are still
// reading their shared memory, bulk_wait<N> once at most N are unfinished.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }

} // namespace hopper

#endif // FLASHSTEP_TMA_CUH
