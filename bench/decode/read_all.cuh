// readAll, the read-only kernel both decode benches hold a decode kernel's
// bytes a second to (bandwidth.cu at each cache size, decode.cu on each
// shape's own cache): every 16-byte word of a buffer read once, folded
// into a sum each block writes out, so that the loads must happen.
#ifndef FLASHSTEP_BENCH_READ_ALL_CUH
#define FLASHSTEP_BENCH_READ_ALL_CUH
#include <cstddef>

#include "../timing.cuh" // beforeTiming, for the benches that include this

__global__ void __launch_bounds__(512) readAll(const uint4 *__restrict__ buf, size_t words, unsigned *out) {
  unsigned acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t w = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  // Four loads in flight a thread before their sums are needed.
  for (; w + 3 * stride < words; w += 4 * stride) {
    const uint4 a = __ldcs(buf + w), b = __ldcs(buf + w + stride), c = __ldcs(buf + w + 2 * stride), d = __ldcs(buf + w + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; w < words; w += stride) {
    const uint4 a = __ldcs(buf + w);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  __shared__ unsigned s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  atomicXor(&s, acc);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

#endif
