// Timing bench for the tensor-core backwards (kernels/cuda/backward/flash2_bwd_mma.cu,
// and on Hopper kernels/cuda/hopper/flash3_bwd_wgmma.cu, flash3_bwd_tma.cu and
// flash3_bwd_bulk.cu) on
// the FlashAttention benchmark shapes (B·N = 16384, H·d = 2048), plain and
// causal, d = 64 and 128. Each run is checked first: its dQ, dK and dV
// against a float32 reference backward on the same bf16 inputs, every
// element of the first and last batch-head, NaN failing. Then the three
// kernels (pre, main, dq) are timed together by CUDA events, FLOPs counted as 2.5 × the forward's 4·B·H·N²·d (halved
// when causal), as FlashAttention's benchmarks count them. Run beside
// bench/backward/sdpa_bwd.py in the same call (scripts/bench-backward), so
// the ratios to SDPA's backward come from one machine state:
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o bwd-bench bench/backward/bench.cu -lcuda
//   ./bwd-bench 4096 30 [part of a name, or =name]   (every compiled tile, or those named)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include <cuda.h>

#include "../../kernels/cuda/backward/flash2_bwd_mma.cu"
// flash3_bwd_wgmma.cu before flash3_bwd_tma.cu, which includes it for its
// products only: the first include defines its kernels too.
#include "../../kernels/cuda/hopper/flash3_bwd_wgmma.cu"
#include "../../kernels/cuda/hopper/flash3_bwd_tma.cu"
#include "../../kernels/cuda/hopper/flash3_bwd_bulk.cu"
#include "../timing.cuh" // CHECK, beforeTiming

using fast::bf16;

// fill writes values of mean 0 and variance 1, uniform on ±√3, from a hash
// of (seed, index): the same inputs in every run.
__global__ void fill(bf16 *x, size_t n, unsigned seed) {
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)e * 2654435761u ^ seed * 2246822519u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[e] = __float2bfloat16_rn(((h >> 8) * (1.f / 16777216.f) * 2.f - 1.f) * 1.7320508f);
  }
}

// forward is attention's forward in float32, a thread per row, two passes
// (the row max, then the sums): O (rounded to bf16, as a bf16 forward
// hands it to the backward) and the log-sum-exp L.
__global__ void forward(const bf16 *Q, const bf16 *K, const bf16 *V, bf16 *O, float *L, int N, int D, float scale,
                        int causal, int BH) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
  if (row >= N || bh >= BH) return;
  const size_t base = (size_t)bh * N * D;
  const int last = causal ? row : N - 1;
  float m = -INFINITY;
  for (int c = 0; c <= last; c++) {
    float s = 0.f;
    for (int x = 0; x < D; x++) s += __bfloat162float(Q[base + (size_t)row * D + x]) * __bfloat162float(K[base + (size_t)c * D + x]);
    m = fmaxf(m, s * scale);
  }
  float l = 0.f, acc[128];
  for (int x = 0; x < D; x++) acc[x] = 0.f;
  for (int c = 0; c <= last; c++) {
    float s = 0.f;
    for (int x = 0; x < D; x++) s += __bfloat162float(Q[base + (size_t)row * D + x]) * __bfloat162float(K[base + (size_t)c * D + x]);
    const float p = expf(s * scale - m);
    l += p;
    for (int x = 0; x < D; x++) acc[x] += p * __bfloat162float(V[base + (size_t)c * D + x]);
  }
  for (int x = 0; x < D; x++) O[base + (size_t)row * D + x] = __float2bfloat16_rn(acc[x] / l);
  L[(size_t)bh * N + row] = m + logf(l);
}

// reference_rows is the reference backward's row pass for batch-head bh, a
// thread per row: D = rowsum(dO ∘ O), then dQ = scale·Σ_c P(dP − D)·K_c.
__global__ void reference_rows(const bf16 *Q, const bf16 *K, const bf16 *V, const bf16 *dO, const bf16 *O, const float *L,
                               float *Delta, float *dQ, int N, int D, float scale, int causal, int bh) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= N) return;
  const size_t base = (size_t)bh * N * D;
  float delta = 0.f;
  for (int x = 0; x < D; x++) delta += __bfloat162float(dO[base + (size_t)r * D + x]) * __bfloat162float(O[base + (size_t)r * D + x]);
  Delta[r] = delta;
  float acc[128];
  for (int x = 0; x < D; x++) acc[x] = 0.f;
  for (int c = 0; c <= (causal ? r : N - 1); c++) {
    float s = 0.f, dp = 0.f;
    for (int x = 0; x < D; x++) {
      s += __bfloat162float(Q[base + (size_t)r * D + x]) * __bfloat162float(K[base + (size_t)c * D + x]);
      dp += __bfloat162float(dO[base + (size_t)r * D + x]) * __bfloat162float(V[base + (size_t)c * D + x]);
    }
    const float ds = expf(s * scale - L[(size_t)bh * N + r]) * (dp - delta);
    for (int x = 0; x < D; x++) acc[x] += ds * __bfloat162float(K[base + (size_t)c * D + x]);
  }
  for (int x = 0; x < D; x++) dQ[(size_t)r * D + x] = acc[x] * scale;
}

// reference_cols is its column pass, a thread per kv row c: dV = Σ_r P·dO_r,
// dK = scale·Σ_r P(dP − D)·Q_r.
__global__ void reference_cols(const bf16 *Q, const bf16 *K, const bf16 *V, const bf16 *dO, const float *L,
                               const float *Delta, float *dK, float *dV, int N, int D, float scale, int causal, int bh) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  const size_t base = (size_t)bh * N * D;
  float ak[128], av[128];
  for (int x = 0; x < D; x++) ak[x] = av[x] = 0.f;
  for (int r = causal ? c : 0; r < N; r++) {
    float s = 0.f, dp = 0.f;
    for (int x = 0; x < D; x++) {
      s += __bfloat162float(Q[base + (size_t)r * D + x]) * __bfloat162float(K[base + (size_t)c * D + x]);
      dp += __bfloat162float(dO[base + (size_t)r * D + x]) * __bfloat162float(V[base + (size_t)c * D + x]);
    }
    const float p = expf(s * scale - L[(size_t)bh * N + r]), ds = p * (dp - Delta[r]);
    for (int x = 0; x < D; x++) {
      av[x] += p * __bfloat162float(dO[base + (size_t)r * D + x]);
      ak[x] += ds * __bfloat162float(Q[base + (size_t)r * D + x]);
    }
  }
  for (int x = 0; x < D; x++) {
    dK[(size_t)c * D + x] = ak[x] * scale;
    dV[(size_t)c * D + x] = av[x];
  }
}

struct Shape {
  int D;
  bool causal;
};

// A compiled tile's three kernels (FLASH2_BWD_MMA_INSTANCE,
// FLASH3_BWD_WGMMA_INSTANCE): BR = 64 q rows, BC kv rows, the same
// arguments; the block's threads and shared memory are each rung's.
using PreFn = decltype(&flash2_bwd_mma_pre_br64_bc64_d64);
using MainFn = decltype(&flash2_bwd_mma_main_br64_bc64_d64);
using DqFn = decltype(&flash2_bwd_mma_dq_br64_bc64_d64);
// A rung whose main kernel reads through tensor maps (flash3_bwd_tma), its
// pre kernel laying D and L·log2 e out in whole q-tiles for them.
using TMAPreFn = decltype(&flash3_bwd_tma_pre_br64_bc64_d64);
using TMAMainFn = decltype(&flash3_bwd_tma_main_br64_bc64_d64);
// One that adds dQ through a tensor map too (flash3_bwd_bulk).
using BulkMainFn = decltype(&flash3_bwd_bulk_main_br64_bc64_d64);
struct Kernels {
  const char *rung;
  int D, BC, threads, smem;
  PreFn pre;
  MainFn main;
  DqFn dq;
  TMAPreFn tmaPre;
  TMAMainFn tmaMain;
  BulkMainFn bulkMain;
  const void *mainSymbol() const {
    return main ? (const void *)main : tmaMain ? (const void *)tmaMain : (const void *)bulkMain;
  }
};
#define KERNELS(BC, D, NW)                                                                                               \
  Kernels {                                                                                                             \
    "flash2_bwd_mma", D, BC, NW * 32, flash2_bwd_mma::smem_bytes(64, BC, D), flash2_bwd_mma_pre_br64_bc##BC##_d##D,     \
        flash2_bwd_mma_main_br64_bc##BC##_d##D, flash2_bwd_mma_dq_br64_bc##BC##_d##D                                     \
  }
#define WGMMA_KERNELS(BC, D)                                                                                             \
  Kernels {                                                                                                             \
    "flash3_bwd_wgmma", D, BC, BC * 2, flash3_bwd_wgmma::smem_bytes(64, BC, D), flash3_bwd_wgmma_pre_br64_bc##BC##_d##D, \
        flash3_bwd_wgmma_main_br64_bc##BC##_d##D, flash3_bwd_wgmma_dq_br64_bc##BC##_d##D                                 \
  }
#define TMA_KERNELS(BC, D)                                                                                              \
  Kernels {                                                                                                             \
    "flash3_bwd_tma", D, BC, BC * 2, flash3_bwd_tma::smem_bytes(64, BC, D), nullptr, nullptr,                           \
        flash3_bwd_tma_dq_br64_bc##BC##_d##D, flash3_bwd_tma_pre_br64_bc##BC##_d##D,                                     \
        flash3_bwd_tma_main_br64_bc##BC##_d##D                                                                           \
  }
#define BULK_KERNELS(BC, D)                                                                                             \
  Kernels {                                                                                                             \
    "flash3_bwd_bulk", D, BC, BC * 2, flash3_bwd_bulk::smem_bytes(64, BC, D), nullptr, nullptr,                         \
        flash3_bwd_bulk_dq_br64_bc##BC##_d##D, flash3_bwd_bulk_pre_br64_bc##BC##_d##D, nullptr,                          \
        flash3_bwd_bulk_main_br64_bc##BC##_d##D                                                                          \
  }
const Kernels tiles[] = {KERNELS(64, 64, 4),    KERNELS(64, 128, 4),   KERNELS(128, 64, 8),    KERNELS(128, 128, 8),
                         WGMMA_KERNELS(64, 64), WGMMA_KERNELS(128, 128), WGMMA_KERNELS(64, 128), TMA_KERNELS(64, 64),
                         TMA_KERNELS(128, 128), TMA_KERNELS(64, 128), BULK_KERNELS(64, 64), BULK_KERNELS(128, 128),
                         BULK_KERNELS(64, 128)};

// The worker passes cuTensorMapEncodeTiled these enums as numbers
// (cmd/gpuworker/device.go), its cuda.h being too old to name them.
static_assert(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9 && CU_TENSOR_MAP_DATA_TYPE_FLOAT32 == 7 &&
                  CU_TENSOR_MAP_INTERLEAVE_NONE == 0 && CU_TENSOR_MAP_SWIZZLE_128B == 3 &&
                  CU_TENSOR_MAP_SWIZZLE_NONE == 0 && CU_TENSOR_MAP_L2_PROMOTION_L2_128B == 2 &&
                  CU_TENSOR_MAP_L2_PROMOTION_NONE == 0 && CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == 0,
              "the worker's tensor-map enum values");

// panels is a bf16 buffer of BH heads of N×D as the worker describes it to
// the copy engine (kernels.TensorMap): boxes of 64 columns × rows rows, the
// 128-byte swizzle, zeros past N; run is a float32 buffer of BH·N values
// laid end to end, boxes of rows values (its Run form); add is a float32
// buffer of BH heads of N×D that boxes of 32 columns × rows rows are added
// into from 128-byte swizzled shared memory (its Add form). Encoded once
// per buffer and shape, so no encoding falls inside a timing.
enum MapForm { PANELS, RUN, ADD };
static hopper::TensorMap tensorMap(const void *p, int D, int N, int BH, int rows, MapForm form) {
  static std::map<std::tuple<const void *, int, int, int, int, int>, hopper::TensorMap> cache;
  auto key = std::make_tuple(p, D, N, BH, rows, (int)form);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  hopper::TensorMap m;
  CUresult r;
  if (form == ADD) {
    const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)BH};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 4, (cuuint64_t)D * N * 4};
    const cuuint32_t box[3] = {32, (cuuint32_t)rows, 1}, unit[3] = {1, 1, 1};
    r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap *>(&m), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<void *>(p),
                               dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else if (form == RUN) {
    const cuuint64_t dims[1] = {(cuuint64_t)N * BH};
    const cuuint32_t box[1] = {(cuuint32_t)rows}, unit[1] = {1};
    const cuuint64_t noStrides[1] = {dims[0] * 4}; // unread, but the driver refuses a null array
    r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap *>(&m), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, const_cast<void *>(p),
                               dims, noStrides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)BH};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)D * N * 2};
    const cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, unit[3] = {1, 1, 1};
    r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap *>(&m), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(p),
                               dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled: CUDA error %d\n", (int)r);
    exit(1);
  }
  return cache[key] = m;
}

// run launches a tile's three kernels.
// delta holds D in whole q-tiles of rows (what a tiled pre writes); lt
// L·log2 e likewise, for a tiled pre only.
void run(const Kernels &k, const bf16 *q, const bf16 *kk, const bf16 *v, const bf16 *dO, const bf16 *o, const float *L,
         float *delta, float *lt, float *dq, float *dk, float *dv, int N, int BH, float scale, bool causal) {
  constexpr int BR = 64;
  unsigned bits;
  memcpy(&bits, &scale, 4);
  const unsigned long long sb = bits;
  const dim3 rows((N + BR - 1) / BR, BH), cols((N + k.BC - 1) / k.BC, BH);
  const int tiled = (N + BR - 1) / BR * BR; // rows of a batch-head in whole q-tiles
  if (k.pre)
    k.pre<<<rows, k.threads>>>(dO, o, L, delta, dq, N);
  else
    k.tmaPre<<<rows, k.threads>>>(dO, o, L, delta, dq, N, lt);
  if (k.main)
    k.main<<<cols, k.threads, k.smem>>>(q, kk, v, dO, L, delta, dq, dk, dv, N, sb, causal);
  else if (k.tmaMain)
    k.tmaMain<<<cols, k.threads, k.smem>>>(tensorMap(q, k.D, N, BH, BR, PANELS), tensorMap(kk, k.D, N, BH, k.BC, PANELS),
                                           tensorMap(v, k.D, N, BH, k.BC, PANELS), tensorMap(dO, k.D, N, BH, BR, PANELS),
                                           tensorMap(lt, 0, tiled, BH, BR, RUN), tensorMap(delta, 0, tiled, BH, BR, RUN), dq, dk,
                                           dv, N, sb, causal);
  else
    k.bulkMain<<<cols, k.threads, k.smem>>>(tensorMap(q, k.D, N, BH, BR, PANELS), tensorMap(kk, k.D, N, BH, k.BC, PANELS),
                                            tensorMap(v, k.D, N, BH, k.BC, PANELS), tensorMap(dO, k.D, N, BH, BR, PANELS),
                                            tensorMap(lt, 0, tiled, BH, BR, RUN), tensorMap(delta, 0, tiled, BH, BR, RUN),
                                            tensorMap(dq, k.D, N, BH, 16, ADD), dk, dv, N, sb, causal);
  k.dq<<<rows, k.threads>>>(dq, N, sb);
}

int main(int argc, char **argv) {
  const int N = argc > 1 ? atoi(argv[1]) : 4096;
  const int iters = argc > 2 ? atoi(argv[2]) : 30;
  // Only the variants whose names contain argv[3] (or, as =name, are it).
  const char *only = argc > 3 ? argv[3] : nullptr;
  for (const Kernels &k : tiles)
    CHECK(cudaFuncSetAttribute(k.mainSymbol(), cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs; N=%d, B·N=16384, H·d=2048, median of %d CUDA-event timings of pre+main+dq after 3 warm-ups, each after the L2 is flushed, the GPU held until it is queued\n",
         prop.name, prop.multiProcessorCount, N, iters);
  printf("%-36s %8s %9s %10s %10s %10s %s\n", "variant", "ms", "TFLOP/s", "err dQ", "err dK", "err dV", "check");
  const Shape shapes[] = {{64, false}, {64, true}, {128, false}, {128, true}};
  for (const Shape &sh : shapes)
  for (const Kernels &tile : tiles) {
    if (tile.D != sh.D) continue;
    char name[64];
    snprintf(name, sizeof name, "%s_bc%d_d%d%s", tile.rung, tile.BC, sh.D, sh.causal ? "_causal" : "");
    if (only && (only[0] == '=' ? strcmp(name, only + 1) != 0 : !strstr(name, only))) continue;
    const int D = sh.D, B = std::max(1, 16384 / N), H = 2048 / D, BH = B * H;
    const size_t n = (size_t)BH * N * D;
    const float scale = 1.f / sqrtf((float)D);
    bf16 *q, *k, *v, *o, *dO;
    float *L, *delta, *lt, *dq, *dk, *dv, *rq, *rk, *rv, *rd;
    const size_t tiledRows = (size_t)BH * ((N + 63) / 64 * 64);
    CHECK(cudaMalloc(&q, n * 2)); CHECK(cudaMalloc(&k, n * 2)); CHECK(cudaMalloc(&v, n * 2));
    CHECK(cudaMalloc(&o, n * 2)); CHECK(cudaMalloc(&dO, n * 2));
    CHECK(cudaMalloc(&L, (size_t)BH * N * 4)); CHECK(cudaMalloc(&delta, tiledRows * 4));
    CHECK(cudaMalloc(&lt, tiledRows * 4));
    CHECK(cudaMalloc(&dq, n * 4)); CHECK(cudaMalloc(&dk, n * 4)); CHECK(cudaMalloc(&dv, n * 4));
    CHECK(cudaMalloc(&rq, (size_t)N * D * 4)); CHECK(cudaMalloc(&rk, (size_t)N * D * 4));
    CHECK(cudaMalloc(&rv, (size_t)N * D * 4)); CHECK(cudaMalloc(&rd, (size_t)N * 4));
    fill<<<1024, 256>>>(q, n, 1u); fill<<<1024, 256>>>(k, n, 2u); fill<<<1024, 256>>>(v, n, 3u);
    fill<<<1024, 256>>>(dO, n, 4u);
    forward<<<dim3((N + 127) / 128, BH), 128>>>(q, k, v, o, L, N, D, scale, sh.causal, BH);
    CHECK(cudaGetLastError());
    auto launch = [&] { run(tile, q, k, v, dO, o, L, delta, lt, dq, dk, dv, N, BH, scale, sh.causal); };
    // The check: NaN everywhere first, so an element not written fails.
    CHECK(cudaMemset(dq, 0xff, n * 4)); CHECK(cudaMemset(dk, 0xff, n * 4)); CHECK(cudaMemset(dv, 0xff, n * 4));
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    double err[3] = {0, 0, 0}, top[3] = {0, 0, 0};
    bool nan = false;
    std::vector<float> got((size_t)N * D), want((size_t)N * D);
    for (int bh : {0, BH - 1}) {
      reference_rows<<<(N + 127) / 128, 128>>>(q, k, v, dO, o, L, rd, rq, N, D, scale, sh.causal, bh);
      reference_cols<<<(N + 127) / 128, 128>>>(q, k, v, dO, L, rd, rk, rv, N, D, scale, sh.causal, bh);
      CHECK(cudaGetLastError());
      const float *mine[3] = {dq, dk, dv}, *ref[3] = {rq, rk, rv};
      for (int g = 0; g < 3; g++) {
        CHECK(cudaMemcpy(got.data(), mine[g] + (size_t)bh * N * D, got.size() * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(want.data(), ref[g], want.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < got.size(); e++) {
          if (!(std::fabs(got[e]) < 1e30f)) nan = true;
          err[g] = std::max(err[g], (double)std::fabs(got[e] - want[e]));
          top[g] = std::max(top[g], (double)std::fabs(want[e]));
        }
      }
    }
    // bf16 P and dS move each term by up to 2^-8 of itself; 2^-5 of the
    // largest element bounds a gradient's error with room (the exact bound,
    // in units of the sums of absolute terms, is the GPU suite's).
    bool ok = !nan;
    for (int g = 0; g < 3; g++) ok = ok && err[g] <= 0x1p-5 * top[g];
    // Timing.
    std::vector<float> times;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    for (int round = -3; round < iters; round++) {
      beforeTiming(); // the L2 flushed, the GPU held until launch() is queued (bench/timing.cuh)
      CHECK(cudaEventRecord(a));
      launch();
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      if (round >= 0) times.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(times.begin(), times.end());
    const float ms = times[times.size() / 2];
    const double flops = 2.5 * 4.0 * BH * (double)N * N * D * (sh.causal ? 0.5 : 1.0);
    printf("%-36s %8.3f %9.1f %10.2e %10.2e %10.2e %s\n", name, ms, flops / ms / 1e9, err[0] / top[0], err[1] / top[1],
           err[2] / top[2], ok ? "ok" : (nan ? "FAIL (NaN)" : "FAIL"));
    fflush(stdout);
    for (void *p : {(void *)q, (void *)k, (void *)v, (void *)o, (void *)dO, (void *)L, (void *)delta, (void *)lt, (void *)dq, (void *)dk,
                    (void *)dv, (void *)rq, (void *)rk, (void *)rv, (void *)rd})
      cudaFree(p);
  }
  return 0;
}
