// The read-only kernel (read_all.cuh) as a shared library, so that
// bench/decode/sdpa_decode.py can time it through ctypes in its own
// process, interleaved with SDPA on the same cache: SDPA's bytes a second
// then come with the device's read rate in the same state of the device,
// as decode.cu's rungs do, and the two are compared as ratios to it
// (the device's clocks move between processes: docs/DECODE.md, run bb).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -o libreadall.so bench/decode/read_all_lib.cu
#include <cstddef>

#include "read_all.cuh"

// read_all_launch reads bytes (a multiple of 16) of buf on stream with
// blocks blocks of 512 threads, each writing its fold to sink[block]; it
// returns the launch's cudaError_t.
extern "C" int read_all_launch(const void *buf, unsigned long long bytes, unsigned *sink, int blocks, void *stream) {
  readAll<<<blocks, 512, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint4 *>(buf), bytes / 16, sink);
  return static_cast<int>(cudaGetLastError());
}

// hold_gpu_launch is holdGPU (bench/timing.cuh) on stream: a timing's start
// event then waits behind it, and SDPA's launch from Python is queued
// before the event is reached.
extern "C" int hold_gpu_launch(long long cycles, void *stream) {
  holdGPU<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return static_cast<int>(cudaGetLastError());
}

// flush_l2_launch is flushL2 (bench/timing.cuh) on stream.
extern "C" int flush_l2_launch(void *stream) {
  flushL2(static_cast<cudaStream_t>(stream));
  return static_cast<int>(cudaGetLastError());
}
