// Tensor-core building blocks shared by the bf16 kernels (flash2_fast.cu,
// naive_mma.cu): cp.async loads into XOR-swizzled shared tiles, ldmatrix,
// mma.sync m16n8k16 (bf16 in, float32 accumulate), bf16 packing and ex2.
#ifndef FLASHSTEP_MMA_CUH
#define FLASHSTEP_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>


namespace fast {

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// cp.async of 16 bytes; a row past N reads nothing and lands as zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// c += a·b for one m16n8k16 tile: a row-major 16×16, b column-major 16×8.
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats to a bf16 pair (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The 16-byte chunk ch of row r in a tile of CH chunks per row, swizzled.
// SW = false lays the rows out plainly, to measure what the swizzle saves.
template <int CH, bool SW = true> __device__ __forceinline__ int swz(int r, int ch) {
  return r * CH + (SW ? ch ^ (r & 7) : ch);
}

// load_tile starts the cp.async of ROWS rows of D bf16 from row row0 of one
// batch-head's matrix into a swizzled shared tile. ASYNC = false loads
// through registers instead, each thread waiting for its chunks: what
// cp.async saves, measured (the commit and wait calls then have nothing to
// wait for).
template <int ROWS, int D, int NT, bool SW, bool ASYNC = true>
__device__ __forceinline__ void load_tile(bf16 *s, const bf16 *__restrict__ src, int row0, int N, int tid) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int c = tid; c < ROWS * CH; c += NT) {
    const int r = c / CH, ch = c % CH;
    const bool ok = row0 + r < N;
    if (ASYNC) {
      cp_async16(smem_addr(s + swz<CH, SW>(r, ch) * 8), src + (size_t)(ok ? row0 + r : 0) * D + ch * 8, ok);
    } else {
      const uint4 zero = {0u, 0u, 0u, 0u};
      *reinterpret_cast<uint4 *>(s + swz<CH, SW>(r, ch) * 8) = ok ? *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * D + ch * 8) : zero;
    }
  }
}

} // namespace fast

#endif // FLASHSTEP_MMA_CUH
