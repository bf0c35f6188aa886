// How fast can a decode block's copies alone stream the cache? decode_split
// at batch 1 with 8 K/V heads and 32k keys reads at 0.83 of the read-only
// kernel with its arithmetic taken out (docs/DECODE.md, run az), so the
// copy pattern, not the arithmetic, is what a faster decode rung must
// change first. This bench walks the split kernel's grid (a block per
// split of a K/V head's kv-tiles, one wave) with copies alone, several
// ways, each timed interleaved with the read-only kernel on the same bytes:
//
//   cp.async   the shipped pattern: 128 threads each ask for 16-byte
//              pieces of K_j and V_j, NS stages, wait for tile j, a
//              __syncthreads, then ask for tile j + NS − 1 (decode_group.cu)
//   bulk       the copy engine: one thread asks for K_j and V_j as two
//              bulk copies (cp.async.bulk, a kv-tile of one head is one
//              contiguous run of BC·d·2 bytes), counted off the stage's
//              mbarrier; the block waits on the barrier, meets at a
//              __syncthreads, and the thread refills the stage freed
//
// at several stage counts, kv-tile sizes and blocks an SM. A step reads
// one 16-byte piece of each tile a thread (so that a stage is used before
// it is refilled) and folds it into a sum each block writes out.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o copies bench/decode/copies.cu
//   ./copies 20 [carve]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "../../kernels/cuda/common/mma.cuh"
#include "../../kernels/cuda/hopper/tma.cuh"
#include "../../kernels/cuda/hopper/wgmma.cuh" // fence_async_shared

#include "../timing.cuh" // CHECK, beforeTiming

#include "read_all.cuh"

constexpr int D = 128, NT = 128;

// walkCpAsync is the shipped copy pattern over split blockIdx.x of K/V
// head blockIdx.y: kv-tiles j0 ≤ j < j1 of BC rows, NS stages.
template <int NS, int BC, bool STRIDED = false>
__global__ void __launch_bounds__(NT) walkCpAsync(const uint4 *K, const uint4 *V, int N, int per, unsigned *out) {
  extern __shared__ __align__(128) uint4 stage[]; // NS stages of K_j then V_j
  constexpr int W = BC * D / 8;                   // 16-byte words of a tile
  const int tid = threadIdx.x, Tc = N / BC;
  const int j0 = min((int)blockIdx.x * per, Tc), j1 = min(j0 + per, Tc);
  const size_t head = (size_t)blockIdx.y * N * D / 8;
  // STRIDED: the split's k-th kv-tile is blockIdx.x + k·splits, so that
  // the grid's blocks read neighbouring tiles at each step.
  auto tile = [&](int j) { return STRIDED ? (int)blockIdx.x + (j - j0) * (int)gridDim.x : j; };
  auto ask = [&](int jj, int s) {
    const int j = tile(jj);
    for (int w = tid; w < W; w += NT) {
      fast::cp_async16(fast::smem_addr(stage + (s * 2) * W + w), K + head + (size_t)j * W + w, true);
      fast::cp_async16(fast::smem_addr(stage + (s * 2 + 1) * W + w), V + head + (size_t)j * W + w, true);
    }
  };
  for (int s = 0; s < NS - 1; s++) {
    if (j0 + s < j1) ask(j0 + s, s);
    fast::cp_async_commit();
  }
  unsigned acc = 0;
  for (int j = j0; j < j1; j++) {
    fast::cp_async_wait<NS - 2>();
    __syncthreads();
    if (j + NS - 1 < j1) ask(j + NS - 1, (j - j0 + NS - 1) % NS);
    fast::cp_async_commit();
    const int s = (j - j0) % NS;
    const uint4 a = stage[s * 2 * W + tid], b = stage[(s * 2 + 1) * W + tid];
    acc ^= a.x ^ a.w ^ b.y ^ b.z;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.y * gridDim.x + blockIdx.x] = acc; // never, but the loads must happen
}

// walkBulk is the copy engine's pattern: thread 0 asks for each kv-tile's
// K_j and V_j as two bulk copies into a stage, counted off its barrier.
template <int NS, int BC, bool STRIDED = false>
__global__ void __launch_bounds__(NT) walkBulk(const uint4 *K, const uint4 *V, int N, int per, unsigned *out) {
  extern __shared__ __align__(128) uint4 stage[];
  __shared__ __align__(8) uint64_t full[NS];
  constexpr int W = BC * D / 8;
  constexpr unsigned bytes = BC * D * 2;
  const int tid = threadIdx.x, Tc = N / BC;
  const int j0 = min((int)blockIdx.x * per, Tc), j1 = min(j0 + per, Tc);
  const size_t head = (size_t)blockIdx.y * N * D / 8;
  auto ask = [&](int jj, int s) {
    const int j = STRIDED ? (int)blockIdx.x + (jj - j0) * (int)gridDim.x : jj;
    hopper::mbar_expect(&full[s], 2 * bytes);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     fast::smem_addr(stage + (s * 2) * W)),
                 "l"(K + head + (size_t)j * W), "r"(bytes), "r"(fast::smem_addr(&full[s]))
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     fast::smem_addr(stage + (s * 2 + 1) * W)),
                 "l"(V + head + (size_t)j * W), "r"(bytes), "r"(fast::smem_addr(&full[s]))
                 : "memory");
  };
  if (tid == 0) {
    for (int s = 0; s < NS; s++) hopper::mbar_init(&full[s], 1);
    hopper::mbar_init_fence();
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < NS - 1; s++)
      if (j0 + s < j1) ask(j0 + s, s);
  unsigned acc = 0;
  for (int j = j0; j < j1; j++) {
    const int u = j - j0, s = u % NS;
    hopper::mbar_wait(&full[s], (u / NS) & 1);
    __syncthreads(); // every thread is done with the stage tile j − 1 used
    if (tid == 0 && j + NS - 1 < j1) {
      hopper::fence_async_shared(); // the stage's ordinary reads, before the copy engine writes it
      ask(j + NS - 1, (u + NS - 1) % NS);
    }
    const uint4 a = stage[s * 2 * W + tid], b = stage[(s * 2 + 1) * W + tid];
    acc ^= a.x ^ a.w ^ b.y ^ b.z;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

struct Walk {
  const char *name;
  int NS, BC, perSM; // stages, kv-tile rows, blocks an SM the split rule fills
  bool strided;      // split b takes kv-tiles b, b + splits, …: only where splits · per is the tile count
  void (*kernel)(const uint4 *, const uint4 *, int, int, unsigned *);
  int smem() const { return NS * 2 * BC * D * 2; }
};

int main(int argc, char **argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount, rb = sms * 4;
  const Walk walks[] = {
      {"cp.async", 3, 64, 2, false, walkCpAsync<3, 64>},  {"bulk", 3, 64, 2, false, walkBulk<3, 64>},   {"bulk", 6, 32, 2, false, walkBulk<6, 32>},
      {"bulk", 4, 64, 1, false, walkBulk<4, 64>},         {"bulk", 6, 64, 1, false, walkBulk<6, 64>},   {"bulk", 12, 32, 1, false, walkBulk<12, 32>},
      {"cp.async", 6, 32, 2, false, walkCpAsync<6, 32>},  {"bulk", 4, 32, 3, false, walkBulk<4, 32>},
      {"cp.strd", 3, 64, 2, true, walkCpAsync<3, 64, true>}, {"bulk.strd", 4, 64, 1, true, walkBulk<4, 64, true>},
  };
  for (const Walk &w : walks) CHECK(cudaFuncSetAttribute(w.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, w.smem()));
  // "carve": the read-only kernel asks for the SM's whole shared-memory
  // carve-out too, so that the two kernels run in one configuration of
  // the SM's L1 and shared memory, not a change of it at every launch.
  const bool carve = argc > 2 && std::string(argv[2]) == "carve";
  if (carve) CHECK(cudaFuncSetAttribute(readAll, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  unsigned *sink;
  CHECK(cudaMalloc(&sink, 1 << 20));
  printf("# %s, %d SMs; copies alone over the split kernel's grid at batch 1, d = 128 (median of %d, interleaved with the read-only kernel%s)\n",
         prop.name, sms, iters, carve ? ", which asks for the whole shared-memory carve-out" : "");
  printf("%4s %7s %10s %9s %4s %4s %6s %6s %10s %10s %10s %8s\n", "Hkv", "N", "cache MB", "pattern", "NS", "BC", "perSM", "splits", "walk us",
         "read us", "walk TB/s", "read÷walk");
  for (int hkv : {8, 32})
    for (int n : {32768, 131072}) {
      const size_t elems = (size_t)hkv * n * D, cache = 2 * elems * 2;
      uint4 *kv;
      CHECK(cudaMalloc(&kv, cache));
      CHECK(cudaMemset(kv, 1, cache));
      for (const Walk &w : walks) {
        const int tc = n / w.BC, want = std::min(tc, std::max(1, sms * w.perSM / hkv));
        const int per = (tc + want - 1) / want, splits = (tc + per - 1) / per;
        if (w.strided && per * splits != tc) continue; // every split the same count of tiles, none past the last
        cudaEvent_t e0, e1;
        CHECK(cudaEventCreate(&e0));
        CHECK(cudaEventCreate(&e1));
        std::vector<float> tw, tr;
        for (int k = -3; k < iters; k++) {
          float ms;
          beforeTiming();
          CHECK(cudaEventRecord(e0));
          w.kernel<<<dim3(splits, hkv), NT, w.smem()>>>(kv, kv + elems / 8, n, per, sink);
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (k >= 0) tw.push_back(ms * 1000);
          beforeTiming();
          CHECK(cudaEventRecord(e0));
          readAll<<<rb, 512>>>(kv, cache / 16, sink);
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (k >= 0) tr.push_back(ms * 1000);
        }
        CHECK(cudaGetLastError());
        std::sort(tw.begin(), tw.end());
        std::sort(tr.begin(), tr.end());
        const float mw = tw[tw.size() / 2], mr = tr[tr.size() / 2];
        printf("%4d %7d %10.1f %9s %4d %4d %6d %6d %10.1f %10.1f %10.3f %8.3f\n", hkv, n, cache / 1e6, w.name, w.NS, w.BC, w.perSM, splits, mw, mr,
               cache / (mw * 1e-6) / 1e12, mr / mw);
        fflush(stdout);
        CHECK(cudaEventDestroy(e0));
        CHECK(cudaEventDestroy(e1));
      }
      CHECK(cudaFree(kv));
    }
  return 0;
}
