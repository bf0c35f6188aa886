// The device's read bandwidth, the ceiling a decode kernel is held to
// (issue 34: one new token's query against a KV cache is a stream of the
// cache from device memory). For each size in bytes given, one buffer of
// that size is
//
//   read:  by a kernel that only reads it (16-byte loads, every SM's
//          blocks striding over the whole buffer, each thread's sum kept
//          live by one store a block so nothing is optimised away);
//   copied: by cudaMemcpyAsync device to device into a second buffer.
//
// Each timed by CUDA events, median of the iterations after warm-ups.
// Printed per size: the read kernel's bytes read per second, and the
// copy's bytes read per second and bytes moved (read + written) per
// second. Run beside bench/decode/sdpa_decode.py in one call
// (scripts/bench-decode), so both come from one machine state.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o bandwidth bench/decode/bandwidth.cu
//   ./bandwidth 30 1073741824 268435456 ...     (iterations, then sizes in bytes)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../timing.cuh" // CHECK, beforeTiming

#include "read_all.cuh"

template <class F>
float medianMs(F f, int iters) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int k = -3; k < iters; k++) {
    beforeTiming(); // L2 flushed; f's launch queued before the event is reached
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (k >= 0) t.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bandwidth ITERS BYTES...\n");
    return 2;
  }
  const int iters = atoi(argv[1]);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int blocks = prop.multiProcessorCount * 4;
  unsigned *out;
  CHECK(cudaMalloc(&out, blocks * sizeof(unsigned)));
  // A buffer that fits the L2 cache is read from it after the first
  // iteration: the figures of sizes under the L2's are not device memory's.
  printf("# %s, %d SMs, L2 %d MiB; median of %d after 3 warm-ups\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20, iters);
  printf("%-14s %10s %12s %10s %12s %14s\n", "bytes", "read ms", "read TB/s", "copy ms", "copy read TB/s", "copy moved TB/s");
  for (int k = 2; k < argc; k++) {
    const size_t bytes = strtoull(argv[k], nullptr, 10) / 16 * 16;
    void *src, *dst;
    if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) {
      cudaGetLastError();
      printf("%-14zu %10s\n", bytes, "too large");
      continue;
    }
    CHECK(cudaMemset(src, 1, bytes));
    const float readMs = medianMs([&] { readAll<<<blocks, 512>>>((const uint4 *)src, bytes / 16, out); }, iters);
    const float copyMs = medianMs([&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, iters);
    printf("%-14zu %10.4f %12.3f %10.4f %12.3f %14.3f\n", bytes, readMs, bytes / readMs / 1e9, copyMs, bytes / copyMs / 1e9,
           2.0 * bytes / copyMs / 1e9);
    fflush(stdout);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
  }
  return 0;
}
