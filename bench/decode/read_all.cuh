// readAll, the read-only kernel both decode benches hold a decode kernel's
// bytes a second to (bandwidth.cu at each cache size, decode.cu on each
// shape's own cache): every 16-byte word of a buffer read once, folded
// into a sum each block writes out, so that the loads must happen.
#ifndef FLASHSTEP_BENCH_READ_ALL_CUH
#define FLASHSTEP_BENCH_READ_ALL_CUH
#include <cstddef>
#include <cstdio>
#include <cstdlib>

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

// holdGPU keeps one thread of the GPU spinning for cycles clock cycles.
// A bench launches it just before a timing's start event, so that the
// timed kernel is queued behind the event before the GPU reaches it: the
// event pair then times the GPU's work alone, not the host's launch
// latency in front of it (a few microseconds from C++, tens from Python,
// against kernels of 30 µs at batch 1).
__global__ void holdGPU(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
// About 25 µs at the H200's clocks: more than a launch takes from C++.
constexpr long long kHoldCycles = 50000;

// flushL2 overwrites 256 MiB of scratch, more than any L2 holds (60 MiB
// on an H200), before a timing: the timed kernel then finds none of the
// cache it reads left in L2 by the kernel before it, which read the same
// cache (in a model's decode step the cache read last belongs to another
// layer). Without it a 134 MB cache is partly served from L2 and the
// kernel timed after another one on it gains (docs/DECODE.md, run bd).
inline void flushL2() {
  static void *scratch = nullptr;
  constexpr size_t bytes = 256ull << 20;
  if (!scratch && cudaMalloc(&scratch, bytes) != cudaSuccess) {
    fprintf(stderr, "flushL2: no room for %zu bytes of scratch\n", bytes);
    exit(1);
  }
  cudaMemsetAsync(scratch, 0, bytes);
}

// beforeTiming is what every decode bench does before a timing's start
// event: the L2 flushed, then the GPU held until the timed work is queued.
inline void beforeTiming() {
  flushL2();
  holdGPU<<<1, 1>>>(kHoldCycles);
}

#endif
