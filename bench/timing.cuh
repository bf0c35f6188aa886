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
constexpr long long kHoldCycles = 50000;

// flushL2 overwrites 256 MiB of scratch, more than any L2 holds (60 MiB
// on an H200), before a timing: the timed kernel then finds none of the
// data it reads left in L2 by the kernel before it, which read the same
// data (in a model's decode step the cache read last belongs to another
// layer; in training, another layer's tensors). Without it a 134 MB cache
// is partly served from L2 and the kernel timed after another one on it
// gains (docs/DECODE.md, run bd).
inline void flushL2() {
  static void *scratch = nullptr;
  constexpr size_t bytes = 256ull << 20;
  if (!scratch && cudaMalloc(&scratch, bytes) != cudaSuccess) {
    fprintf(stderr, "flushL2: no room for %zu bytes of scratch\n", bytes);
    exit(1);
  }
  cudaMemsetAsync(scratch, 0, bytes);
}

// beforeTiming is what every bench does before a timing's start
// event: the L2 flushed, then the GPU held until the timed work is queued.
inline void beforeTiming() {
  flushL2();
  holdGPU<<<1, 1>>>(kHoldCycles);
}

#endif
