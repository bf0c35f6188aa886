// How the benches time a kernel with CUDA events (bench/decode,
// bench/backward): the L2 overwritten first, then the GPU held busy until
// the timed work is queued behind the start event, so that the event pair
// times the GPU's work on data not in L2, and not the host's launch of it
// (docs/DECODE.md, run bd, found both moving verdicts).
#ifndef FLASHSTEP_BENCH_TIMING_CUH
#define FLASHSTEP_BENCH_TIMING_CUH
#include <cstddef>
#include <cstdio>
#include <cstdlib>

// CHECK ends the bench with the failed CUDA call, its place and its error:
// every bench's, from here.
#ifndef CHECK
#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e = (x);                                                                          \
    if (e != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));          \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)
#endif

// holdGPU keeps one thread of the GPU spinning for cycles clock cycles.
// A bench launches it just before a timing's start event, so that the
// timed kernel is queued behind the event before the GPU reaches it: the
// event pair then times the GPU's work alone, not the host's launch
// latency in front of it (a few microseconds from C++, tens to hundreds
// from Python, against decode kernels of 30 µs).
__global__ void holdGPU(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
// About 25 µs at the H200's clocks: more than a launch takes from C++.
// FLASHSTEP_HOLD_SCALE=k holds k times as long, to check that a longer
// hold changes nothing (docs/DECODE.md, run bl).
inline long long holdCycles() {
  static const long long cycles = [] {
    const char *k = getenv("FLASHSTEP_HOLD_SCALE");
    char *end = nullptr;
    const long long scale = k ? strtoll(k, &end, 10) : 1;
    if (k && (*k == 0 || *end != 0 || scale < 1 || scale > 1000)) {
      fprintf(stderr, "FLASHSTEP_HOLD_SCALE must be a whole number from 1 to 1000, got \"%s\"\n", k);
      exit(2);
    }
    return 50000LL * scale;
  }();
  return cycles;
}

// flushL2 reads 256 MiB of scratch, more than any L2 holds (60 MiB on an
// H200), before a timing: the timed kernel then finds none of the data it
// reads left in L2 by the kernel before it, which read the same data (in
// a model's decode step the cache read last belongs to another layer; in
// training, another layer's tensors). It reads rather than writes: lines
// a write left dirty would be written back during the timed kernel, a
// fixed cost of tens of microseconds on every timing (docs/DECODE.md, run
// bg). Without a flush a 134 MB cache is partly served from L2 and a
// kernel timed after another one on it gains (run bd).
__global__ void flushRead(const uint4 *__restrict__ buf, size_t words, unsigned *out) {
  unsigned acc = 0;
  for (size_t w = (size_t)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += (size_t)gridDim.x * blockDim.x) {
    const uint4 a = buf[w];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc; // never (the scratch is zeros), but the loads must happen
}
inline void flushL2(cudaStream_t stream = 0) {
  static uint4 *scratch = nullptr;
  constexpr size_t bytes = 256ull << 20;
  if (!scratch) {
    if (cudaMalloc(&scratch, bytes + 16) != cudaSuccess || cudaMemset(scratch, 0, bytes + 16) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      fprintf(stderr, "flushL2: no room for %zu bytes of scratch\n", bytes);
      exit(1);
    }
  }
  flushRead<<<1024, 512, 0, stream>>>(scratch, bytes / 16, reinterpret_cast<unsigned *>(scratch + bytes / 16));
}

// beforeTiming is what every bench does before a timing's start
// event: the L2 flushed, then the GPU held until the timed work is queued.
inline void beforeTiming(cudaStream_t stream = 0) {
  flushL2(stream);
  holdGPU<<<1, 1, 0, stream>>>(holdCycles());
}

#endif
