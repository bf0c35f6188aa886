// Hopper's warpgroup tensor-core products (wgmma, sm_90a) for the ladder's
// Hopper rungs (flash3_wgmma.cu): shared-memory matrix descriptors for tiles
// laid out in 128-byte swizzled panels, the asynchronous products, and their
// fences. Needs nvcc 12 or newer with -arch=sm_90a (scripts/ptx-hopper).
//
// A warpgroup is four consecutive warps (128 threads). One wgmma multiplies a
// 64×16 slice of A by a 16×N slice of B into a 64×N float32 accumulator spread
// over the warpgroup's registers: warp w of the group holds rows 16w..16w+15
// laid out as mma.sync's m16n8 accumulator (thread lane holds rows g and g+8,
// g = lane/4, and columns 2t, 2t+1 of each 8-column atom, t = lane%4), so
// d[4·n8 + e] is row g + 8·(e/2), column 8·n8 + 2t + e%2. The same layout, in
// bf16 pairs, is A's register fragment: P goes from the S accumulator into
// the P·V product without passing through shared memory.
//
// Shared tiles are stored in panels of 64 bf16 columns (128 bytes a row);
// within a panel row r sits at r·128 bytes with its eight 16-byte chunks
// XOR-swizzled by r mod 8, the layout wgmma's 128-byte swizzle mode reads
// (and the swizzle rung 6 uses for ldmatrix). Panels start on 1024-byte
// boundaries, so a descriptor may start 32 bytes into a row to step along k.
#ifndef FLASHSTEP_WGMMA_CUH
#define FLASHSTEP_WGMMA_CUH

#include "../common/mma.cuh"

namespace hopper {

using fast::bf16;

// panel_offset is the byte offset of element (r, col) in a tile of ROWS rows
// stored as 128-byte swizzled panels of 64 columns.
template <int ROWS> __device__ __forceinline__ uint32_t panel_offset(int r, int col) {
  return (uint32_t)((col >> 6) * ROWS * 128 + r * 128 + ((((col >> 3) & 7) ^ (r & 7)) << 4) + (col & 7) * 2);
}

// load_panels starts the cp.async of ROWS rows of D bf16 from row row0 of one
// batch-head's matrix into a tile of swizzled panels; rows past N land as
// zeros.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_panels(bf16 *s, const bf16 *__restrict__ src, int row0, int N, int tid) {
  constexpr int CH = D / 8;
  const uint32_t base = fast::smem_addr(s);
#pragma unroll
  for (int c = tid; c < ROWS * CH; c += NT) {
    const int r = c / CH, ch = c % CH;
    const bool ok = row0 + r < N;
    fast::cp_async16(base + panel_offset<ROWS>(r, ch * 8), src + (size_t)(ok ? row0 + r : 0) * D + ch * 8, ok);
  }
}

// desc is a wgmma shared-memory matrix descriptor in the 128-byte swizzle
// mode: start address, leading and stride byte offsets, each in 16-byte
// units. For a K-major operand (rows of k contiguous: Q, K) the stride is
// 1024, from one 8-row group to the next, and the leading offset is unused;
// for an MN-major one (V read as B of P·V, its rows being k) the stride is
// 1024 from one 8-row group of k to the next and the leading offset the
// distance from one 64-column panel to the next.
__device__ __forceinline__ uint64_t desc(uint32_t saddr, uint32_t lead, uint32_t stride) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | (uint64_t)((lead & 0x3FFFF) >> 4) << 16 |
         (uint64_t)((stride & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

// wgmma_fence orders this thread's register writes before the products that
// read them (accumulators rescaled, P packed); commit closes a group of
// products, wait<N> waits until at most N groups are in flight.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// fence_async_shared makes this thread's writes to shared memory (cp.async
// landed, or plain stores) visible to the async proxy wgmma reads through.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// keep pins an accumulator in place: the compiler may not move its reads or
// writes across this point, so no copy of it is made while a product that
// writes it is in flight.
template <int N> __device__ __forceinline__ void keep(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// d[0..32) (+)= A·B, m64n64k16: A (64×16) and B (16×64, K-major) both read
// from shared memory through their descriptors; scale_d = 0 starts d afresh.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d));
}

// d[0..64) (+)= A·B, m64n128k16: A (64×16) and B (16×128, K-major) both read
// from shared memory through their descriptors; scale_d = 0 starts d afresh.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d));
}

// d[0..32) (+)= A·B, m64n64k16, both read from shared memory stored MN-major
// (transposed): A's 64 rows and B's 64 columns each lie along a 128-byte
// panel row, k down the rows (the backward's dQ_i = dS·K_j, dS read out of
// dSᵀ and K_j as it is stored); scale_d = 0 starts d afresh.
__device__ __forceinline__ void wgmma_ss_n64_tt(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d));
}

// d[0..32) += A·B, m64n64k16: A (64×16) from registers in the accumulator's
// layout, B (16×64) from shared memory stored MN-major (transposed).
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d[0..64) += A·B, m64n128k16: A (64×16) from registers in the accumulator's
// layout, B (16×128) from shared memory stored MN-major (transposed).
__device__ __forceinline__ void wgmma_rs_n128_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// wgmma_s is S (+)= Q·Kᵀ for one k-step of 16, at this tile's width.
template <int BC> __device__ __forceinline__ void wgmma_s(float (&s)[BC / 2], uint64_t a, uint64_t b, int scale_d);
template <> __device__ __forceinline__ void wgmma_s<64>(float (&s)[32], uint64_t a, uint64_t b, int scale_d) {
  wgmma_ss_n64(s, a, b, scale_d);
}
template <> __device__ __forceinline__ void wgmma_s<128>(float (&s)[64], uint64_t a, uint64_t b, int scale_d) {
  wgmma_ss_n128(s, a, b, scale_d);
}
// wgmma_o is O += P·V for one k-step of 16 kv rows, at this head dim.
template <int D> __device__ __forceinline__ void wgmma_o(float (&o)[D / 2], const uint32_t (&a)[4], uint64_t b);
template <> __device__ __forceinline__ void wgmma_o<64>(float (&o)[32], const uint32_t (&a)[4], uint64_t b) {
  wgmma_rs_n64_tb(o, a, b);
}
template <> __device__ __forceinline__ void wgmma_o<128>(float (&o)[64], const uint32_t (&a)[4], uint64_t b) {
  wgmma_rs_n128_tb(o, a, b);
}

} // namespace hopper

#endif // FLASHSTEP_WGMMA_CUH
