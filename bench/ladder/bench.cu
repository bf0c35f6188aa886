// The ladder bench: every rung whose registry entry says Bench, as the
// worker launches it at each compiled tile (rungs_gen.cuh, generated), and
// tuning experiments (other tiles, rung 6 without one idea), on
// the FlashAttention benchmark shapes (B·N = 16384, H·d = 2048), each checked against a float32 reference on the same bf16 inputs
// (every element of two batch-heads, NaN failing) and timed by CUDA events,
// the variants interleaved. Run beside ../../shared/bench/sdpa_anchor.py in
// the same call, so the ratios to SDPA come from one machine state:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o ladder-bench bench/ladder/bench.cu
//   ./ladder-bench 4096 > ladder.txt && python3 sdpa_anchor.py --n 4096
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <cuda.h>

// Every benched rung's source and its shipped kernels (shippedKernels),
// generated from the registry (make generate).
#include "rungs_gen.cuh"
#include "../timing.cuh" // CHECK, beforeTiming

// The worker passes cuTensorMapEncodeTiled these enums as numbers
// (cmd/gpuworker/device.go), its cuda.h being too old to name them.
static_assert(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9 && CU_TENSOR_MAP_INTERLEAVE_NONE == 0 &&
                  CU_TENSOR_MAP_SWIZZLE_128B == 3 && CU_TENSOR_MAP_L2_PROMOTION_L2_128B == 2 &&
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == 0,
              "the worker's tensor-map enum values");

// Every tile shape the bench tries, as a kernel of its own.
template <int D, int BR, int BC, int NW, bool CAUSAL, bool QREG, bool SW, bool EXP2, bool SKIP, bool ASYNC>
__global__ void __launch_bounds__(NW * 32) fast_variant(const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K,
                                                        const fast::bf16 *__restrict__ V, fast::bf16 *__restrict__ O,
                                                        float *__restrict__ LSE, int N, float scale) {
  fast::flash2_fast_block<D, BR, BC, NW, CAUSAL, QREG, SW, EXP2, SKIP, ASYNC>(Q, K, V, O, LSE, N, scale);
}

// Rung 7 at other tiles, as a kernel of its own.
template <int D, int BR, int BC, bool CAUSAL>
__global__ void __launch_bounds__(BR * 2) wg_variant(const fast::bf16 *__restrict__ Q, const fast::bf16 *__restrict__ K,
                                                     const fast::bf16 *__restrict__ V, fast::bf16 *__restrict__ O,
                                                     float *__restrict__ LSE, int N, float scale) {
  hopper::flash3_wgmma_block<D, BR, BC, CAUSAL>(Q, K, V, O, LSE, N, scale);
}

// Rungs 8 and 9 at other tiles, as kernels of their own.
template <int D, int BR, int BC, bool CAUSAL>
__global__ void __launch_bounds__(BR * 2)
    tma_variant(const __grid_constant__ hopper::TensorMap tq, const __grid_constant__ hopper::TensorMap tk,
                const __grid_constant__ hopper::TensorMap tv, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N,
                float scale) {
  hopper::flash3_tma_block<D, BR, BC, CAUSAL>(&tq, &tk, &tv, O, LSE, N, scale);
}
template <int D, int BR, int BC, bool CAUSAL>
__global__ void __launch_bounds__(BR * 2 + 128, 1)
    pp_variant(const __grid_constant__ hopper::TensorMap tq, const __grid_constant__ hopper::TensorMap tk,
               const __grid_constant__ hopper::TensorMap tv, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N,
               float scale) {
  hopper::flash3_pingpong_block<D, BR, BC, CAUSAL>(&tq, &tk, &tv, O, LSE, N, scale);
}
template <int D, int BR, int BC, bool CAUSAL>
__global__ void __launch_bounds__(BR * 2 + 128, 1)
    ov_variant(const __grid_constant__ hopper::TensorMap tq, const __grid_constant__ hopper::TensorMap tk,
               const __grid_constant__ hopper::TensorMap tv, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N,
               float scale) {
  hopper::flash3_overlap_block<D, BR, BC, CAUSAL>(&tq, &tk, &tv, O, LSE, N, scale);
}
template <int D, int BR, int BC, bool CAUSAL>
__global__ void __launch_bounds__(BR * 2 + 128, 1)
    ws_variant(const __grid_constant__ hopper::TensorMap tq, const __grid_constant__ hopper::TensorMap tk,
               const __grid_constant__ hopper::TensorMap tv, fast::bf16 *__restrict__ O, float *__restrict__ LSE, int N,
               float scale) {
  hopper::flash3_ws_block<D, BR, BC, CAUSAL>(&tq, &tk, &tv, O, LSE, N, scale);
}

using fast::bf16;

// Normal-ish inputs from a counter hash: the same seed, the same inputs.
__global__ void fill(bf16 *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x7feb352d; h ^= h >> 15; h *= 0x846ca68b; h ^= h >> 16;
    unsigned h2 = h * 0x9e3779b9u + 0x7f4a7c15u;
    h2 ^= h2 >> 16; h2 *= 0x7feb352d; h2 ^= h2 >> 15;
    float u1 = ((h & 0xffffff) + 0.5f) / 16777216.f, u2 = ((h2 & 0xffffff) + 0.5f) / 16777216.f;
    x[i] = __float2bfloat16(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2)); // Box–Muller
  }
}

// Reference: one thread per row of one batch-head, float32 throughout, two
// passes over the keys (the max, then the sums).
__global__ void reference(const bf16 *Q, const bf16 *K, const bf16 *V, float *O, float *L, int N, int D, float scale,
                          bool causal, int bh) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= N) return;
  size_t base = (size_t)bh * N * D;
  const bf16 *q = Q + base + (size_t)r * D;
  int cols = causal ? r + 1 : N;
  float m = -INFINITY;
  for (int c = 0; c < cols; c++) {
    float s = 0;
    for (int x = 0; x < D; x++) s += __bfloat162float(q[x]) * __bfloat162float(K[base + (size_t)c * D + x]);
    m = fmaxf(m, s * scale);
  }
  float l = 0;
  float acc[128];
  for (int x = 0; x < D; x++) acc[x] = 0;
  for (int c = 0; c < cols; c++) {
    float s = 0;
    for (int x = 0; x < D; x++) s += __bfloat162float(q[x]) * __bfloat162float(K[base + (size_t)c * D + x]);
    float p = expf(s * scale - m);
    l += p;
    for (int x = 0; x < D; x++) acc[x] += p * __bfloat162float(V[base + (size_t)c * D + x]);
  }
  for (int x = 0; x < D; x++) O[(size_t)r * D + x] = acc[x] / l;
  L[r] = m + logf(l);
}

struct Variant {
  std::string name;
  int D, BR, BC, NW;
  bool causal;
  std::function<void(dim3, const bf16 *, const bf16 *, const bf16 *, bf16 *, float *, int, float)> launch;
};

// naive_mma's N×N buffers, allocated per head dim before its variants run.
static float *gS;
static bf16 *gP;

// scaleBits is the float's bit pattern, as the worker passes the scale.
static unsigned long long scaleBits(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  return u;
}

// NaiveMMA names the product's naive_mma kernels (kernels/cuda/forward/naive_mma.cu) at
// its compiled tile for head dim D: Br = 128, Bc as the registry lists it.
template <int D> struct NaiveMMA;
template <> struct NaiveMMA<64> {
  static constexpr int BC = 128;
  static constexpr auto scores = &naive_mma_scores_bc128_d64;
  static constexpr auto softmax = &naive_mma_softmax_bc128_d64;
  static constexpr auto pv = &naive_mma_pv_bc128_d64;
};
template <> struct NaiveMMA<128> {
  static constexpr int BC = 48;
  static constexpr auto scores = &naive_mma_scores_bc48_d128;
  static constexpr auto softmax = &naive_mma_softmax_bc48_d128;
  static constexpr auto pv = &naive_mma_pv_bc48_d128;
};

// makeNaive is naive_mma's three kernels as one variant, launched as the
// worker launches them (kernels/naive_mma.go): S and P rows of whole
// kv-tiles, the scores kernel a block per tile, softmax and P·V a block per
// q-tile.
template <int D, bool C> Variant makeNaive() {
  using K = NaiveMMA<D>;
  constexpr int BC = K::BC;
  int ssmem = 2 * (128 * D + BC * D), psmem = 2 * (128 * (BC + 8) + BC * D);
  CHECK(cudaFuncSetAttribute(K::scores, cudaFuncAttributeMaxDynamicSharedMemorySize, ssmem));
  CHECK(cudaFuncSetAttribute(K::pv, cudaFuncAttributeMaxDynamicSharedMemorySize, psmem));
  char name[96];
  snprintf(name, sizeof name, "naive_mma_d%d%s", D, C ? "_causal" : "");
  return Variant{name, D, 128, BC, 4, C,
                 [ssmem, psmem](dim3 grid, const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o, float *l, int n, float sc) {
                   const int bh = grid.y, tr = (n + 127) / 128, tc = (n + BC - 1) / BC;
                   K::scores<<<dim3(tc, tr, bh), 128, ssmem>>>(q, k, gS, n, scaleBits(sc), C ? 1 : 0);
                   K::softmax<<<dim3(tr, bh), 256>>>(gS, gP, l, n, tc);
                   K::pv<<<dim3(tr, bh), 128, psmem>>>(gP, v, l, o, n);
                 }};
}

// make is rung 6's block at other tiles, or with one of its ideas taken
// away (the switches of flash2_fast_block), as a kernel of its own.
template <int D, int BR, int BC, int NW, bool C, bool QREG = false, bool SW = true, bool EXP2 = true, bool SKIP = true,
          bool ASYNC = true>
Variant make() {
  auto k = fast_variant<D, BR, BC, NW, C, QREG, SW, EXP2, SKIP, ASYNC>;
  int smem = fast::smem_bytes(D, BR, BC);
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char name[96];
  snprintf(name, sizeof name, "flash2_fast_d%d_br%d_bc%d_w%d%s%s%s%s%s%s", D, BR, BC, NW, QREG ? "_qreg" : "", SW ? "" : "_noswizzle",
           EXP2 ? "" : "_expf", SKIP ? "" : "_noskip", ASYNC ? "" : "_sync", C ? "_causal" : "");
  return Variant{name, D, BR, BC, NW, C,
                 [k, smem](dim3 grid, const bf16 *q, const bf16 *kk, const bf16 *v, bf16 *o, float *l, int n, float sc) {
                   k<<<grid, NW * 32, smem>>>(q, kk, v, o, l, n, sc);
                 }};
}

// makeWG is rung 7's block at tile BR×BC, a tiling the product does not
// ship (its shipped kernels are rows of shippedKernels).
template <int D, int BR, int BC, bool C> Variant makeWG() {
  auto k = wg_variant<D, BR, BC, C>;
  int smem = hopper::smem_bytes(D, BR, BC);
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char name[96];
  snprintf(name, sizeof name, "flash3_wgmma_d%d_br%d_bc%d_tile%s", D, BR, BC, C ? "_causal" : "");
  return Variant{name, D, BR, BC, BR / 32, C,
                 [k, smem](dim3 grid, const bf16 *q, const bf16 *kk, const bf16 *v, bf16 *o, float *l, int n, float sc) {
                   k<<<grid, BR * 2, smem>>>(q, kk, v, o, l, n, sc);
                 }};
}

// tensorMap is a bf16 buffer of BH heads of N×D as the worker describes it
// to the copy engine (kernels.TensorMap): boxes of 64 columns × rows rows,
// the 128-byte swizzle, zeros past N. Encoded once per buffer and shape, so
// no encoding falls inside a timing.
static hopper::TensorMap tensorMap(const bf16 *p, int D, int N, int BH, int rows) {
  static std::map<std::tuple<const void *, int, int, int, int>, hopper::TensorMap> cache;
  auto key = std::make_tuple((const void *)p, D, N, BH, rows);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  hopper::TensorMap m;
  const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)BH};
  const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)D * N * 2};
  const cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, unit[3] = {1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap *>(&m), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
                                      const_cast<bf16 *>(p), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled: CUDA error %d\n", (int)r);
    exit(1);
  }
  return cache[key] = m;
}

using TMAKernel = void (*)(const hopper::TensorMap, const hopper::TensorMap, const hopper::TensorMap, bf16 *, float *,
                           int, float);

// makeTMAFamily is a rung that reads through tensor maps at tile BR×BC (a
// tiling the product does not ship), threads a block, launched as the
// worker launches it.
template <int D, int BR, int BC, bool C>
Variant makeTMAFamily(const char *family, TMAKernel k, int threads, int smem) {
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char name[96];
  snprintf(name, sizeof name, "%s_d%d_br%d_bc%d_tile%s", family, D, BR, BC, C ? "_causal" : "");
  return Variant{name, D, BR, BC, threads / 32, C,
                 [k, threads, smem](dim3 grid, const bf16 *q, const bf16 *kk, const bf16 *v, bf16 *o, float *l, int n,
                                    float sc) {
                   const int bh = grid.y;
                   k<<<grid, threads, smem>>>(tensorMap(q, D, n, bh, BR), tensorMap(kk, D, n, bh, BC),
                                              tensorMap(v, D, n, bh, BC), o, l, n, sc);
                 }};
}

// Rungs 8 to 11 at other tiles.
template <int D, int BR, int BC, bool C> Variant makeTMA() {
  return makeTMAFamily<D, BR, BC, C>("flash3_tma", tma_variant<D, BR, BC, C>, BR * 2, hopper::tma_smem_bytes(D, BR, BC));
}
template <int D, int BR, int BC, bool C> Variant makeWS() {
  return makeTMAFamily<D, BR, BC, C>("flash3_ws", ws_variant<D, BR, BC, C>, BR * 2 + 128, hopper::ws_smem_bytes(D, BR, BC));
}
template <int D, int BR, int BC, bool C> Variant makePP() {
  return makeTMAFamily<D, BR, BC, C>("flash3_pingpong", pp_variant<D, BR, BC, C>, BR * 2 + 128,
                                     hopper::pingpong_smem_bytes(D, BR, BC));
}
template <int D, int BR, int BC, bool C> Variant makeOV() {
  return makeTMAFamily<D, BR, BC, C>("flash3_overlap", ov_variant<D, BR, BC, C>, BR * 2 + 128,
                                     hopper::overlap_smem_bytes(D, BR, BC));
}

// shipped is a row of shippedKernels as one variant, launched as the worker
// launches it (cmd/gpuworker): each argument in an 8-byte slot, of which
// the runtime copies the parameter's own size, a tensor map by value.
Variant shipped(const ShippedKernel &s) {
  CHECK(cudaFuncSetAttribute(s.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, s.smem));
  return Variant{s.name, s.D, s.BR, s.BC, s.threads / 32, s.causal,
                 [s](dim3 grid, const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o, float *l, int n, float sc) {
                   const int bh = grid.y;
                   unsigned long long slot[12];
                   hopper::TensorMap map[12];
                   void *args[12];
                   for (int i = 0; i < s.nargs; i++) {
                     args[i] = &slot[i];
                     switch (s.args[i]) {
                     case ARG_Q: slot[i] = (unsigned long long)q; break;
                     case ARG_K: slot[i] = (unsigned long long)k; break;
                     case ARG_V: slot[i] = (unsigned long long)v; break;
                     case ARG_O: slot[i] = (unsigned long long)o; break;
                     case ARG_LSE: slot[i] = (unsigned long long)l; break;
                     case ARG_MAP_Q: map[i] = tensorMap(q, s.D, n, bh, s.rows[i]); args[i] = &map[i]; break;
                     case ARG_MAP_K: map[i] = tensorMap(k, s.D, n, bh, s.rows[i]); args[i] = &map[i]; break;
                     case ARG_MAP_V: map[i] = tensorMap(v, s.D, n, bh, s.rows[i]); args[i] = &map[i]; break;
                     case ARG_N: slot[i] = (unsigned long long)n; break;
                     case ARG_SCALE: slot[i] = scaleBits(sc); break;
                     case ARG_CAUSAL: slot[i] = s.causal ? 1 : 0; break;
                     }
                   }
                   CHECK(cudaLaunchKernel(s.kernel, grid, dim3(s.threads), args, s.smem, 0));
                 }};
}

int main(int argc, char **argv) {
  int N = argc > 1 ? atoi(argv[1]) : 4096;
  int iters = argc > 2 ? atoi(argv[2]) : 30;
  std::vector<Variant> vs;
  // Every rung as shipped, at its compiled tiles (shippedKernels), first:
  // the ladder reads a rung's figure from its first row of a shape.
  for (const ShippedKernel &s : shippedKernels) vs.push_back(shipped(s));
  std::vector<Variant> experiments = {
      // Rungs 7 to 11 at tiles the product does not ship.
      makePP<128, 128, 64, false>(), makeOV<128, 128, 64, false>(),
      makeTMA<128, 128, 128, false>(), makeWS<128, 128, 64, false>(), makeWS<64, 192, 128, false>(),
      makeWS<128, 192, 64, false>(),
      makeWG<64, 192, 128, false>(), makeWG<64, 128, 64, false>(), makeWG<128, 128, 128, false>(),
      makeWG<128, 192, 64, false>(),
      // Rung 6 with one idea taken away at a time (the swizzle, 128-row
      // tiles, exp2 with the scale folded in, cp.async, and under the mask
      // the skipped tiles); naive attention on the same tensor cores.
      make<64, 128, 128, 4, false, false, false>(), make<64, 128, 128, 4, true, false, false>(),
      make<128, 128, 48, 4, false, false, false>(), make<128, 128, 48, 4, true, false, false>(),
      make<64, 64, 128, 4, false>(),  make<64, 64, 128, 4, true>(),   make<128, 64, 48, 4, false>(),
      make<128, 64, 48, 4, true>(),
      make<64, 128, 128, 4, false, false, true, false>(), make<64, 128, 128, 4, true, false, true, false>(),
      make<128, 128, 48, 4, false, false, true, false>(), make<128, 128, 48, 4, true, false, true, false>(),
      make<64, 128, 128, 4, false, false, true, true, true, false>(), make<64, 128, 128, 4, true, false, true, true, true, false>(),
      make<128, 128, 48, 4, false, false, true, true, true, false>(), make<128, 128, 48, 4, true, false, true, true, true, false>(),
      make<64, 128, 128, 4, true, false, true, true, false>(), make<128, 128, 48, 4, true, false, true, true, false>(),
      makeNaive<64, false>(),         makeNaive<64, true>(),          makeNaive<128, false>(),
      makeNaive<128, true>(),
  };
  vs.insert(vs.end(), experiments.begin(), experiments.end());
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs; N=%d, B·N=16384, H·d=2048, median of %d CUDA-event timings after 3 warm-ups\n", prop.name,
         prop.multiProcessorCount, N, iters);
  printf("%-36s %8s %9s %10s %10s %s\n", "variant", "ms", "TFLOP/s", "max|dO|", "max|dLSE|", "check");
  for (int D : {64, 128}) {
    int B = std::max(1, 16384 / N), H = 2048 / D, BH = B * H;
    size_t n = (size_t)BH * N * D;
    bf16 *q, *k, *v, *o;
    float *lse, *refO, *refL;
    CHECK(cudaMalloc(&q, n * 2)); CHECK(cudaMalloc(&k, n * 2)); CHECK(cudaMalloc(&v, n * 2)); CHECK(cudaMalloc(&o, n * 2));
    CHECK(cudaMalloc(&lse, (size_t)BH * N * 4));
    CHECK(cudaMalloc(&refO, (size_t)N * D * 4)); CHECK(cudaMalloc(&refL, (size_t)N * 4));
    // S and P rows are whole kv-tiles: up to N rounded up to 48.
    const size_t ld = (N + 47) / 48 * 48;
    CHECK(cudaMalloc(&gS, (size_t)BH * N * ld * 4)); CHECK(cudaMalloc(&gP, (size_t)BH * N * ld * 2));
    fill<<<1024, 256>>>(q, n, 1u); fill<<<1024, 256>>>(k, n, 2u); fill<<<1024, 256>>>(v, n, 3u);
    CHECK(cudaDeviceSynchronize());
    float scale = 1.f / sqrtf((float)D);
    std::vector<Variant *> mine;
    for (auto &x : vs) if (x.D == D) mine.push_back(&x);
    // Correctness: every element of the first and last batch-head.
    std::vector<std::string> verdict(mine.size());
    std::vector<float> errO(mine.size()), errL(mine.size());
    std::vector<bf16> hO((size_t)N * D);
    std::vector<float> hR((size_t)N * D), hL(N), hRL(N);
    for (size_t vi = 0; vi < mine.size(); vi++) {
      Variant &x = *mine[vi];
      CHECK(cudaMemset(o, 0xff, n * 2)); // NaN everywhere: a row not written fails
      dim3 grid((N + x.BR - 1) / x.BR, BH);
      x.launch(grid, q, k, v, o, lse, N, scale);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      double worstO = 0, worstL = 0, refMax = 0;
      bool nan = false;
      for (int bh : {0, BH - 1}) {
        reference<<<(N + 127) / 128, 128>>>(q, k, v, refO, refL, N, D, scale, x.causal, bh);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(hR.data(), refO, hR.size() * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hRL.data(), refL, N * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hO.data(), o + (size_t)bh * N * D, hO.size() * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hL.data(), lse + (size_t)bh * N, N * 4, cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < hR.size(); e++) {
          float got = __bfloat162float(hO[e]);
          if (!(std::fabs(got) < 1e30f)) nan = true;
          worstO = std::max(worstO, (double)std::fabs(got - hR[e]));
          refMax = std::max(refMax, (double)std::fabs(hR[e]));
        }
        for (int r = 0; r < N; r++) {
          if (!(std::fabs(hL[r]) < 1e30f)) nan = true;
          worstL = std::max(worstL, (double)std::fabs(hL[r] - hRL[r]));
        }
      }
      errO[vi] = worstO;
      errL[vi] = worstL;
      // bf16 output: half an ulp at the largest |O| is 2^-9 of it; P in bf16
      // adds about as much again. 1e-2 of max|O| bounds both with room.
      verdict[vi] = (!nan && worstO <= 1e-2 * refMax && worstL <= 1e-2) ? "ok" : (nan ? "FAIL (NaN)" : "FAIL");
    }
    // Timing, interleaved: one launch of each variant per round.
    std::vector<std::vector<float>> times(mine.size());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    for (int round = -3; round < iters; round++) {
      for (size_t vi = 0; vi < mine.size(); vi++) {
        Variant &x = *mine[vi];
        dim3 grid((N + x.BR - 1) / x.BR, BH);
        beforeTiming(); // the L2 flushed, the GPU held until the launch is queued (bench/timing.cuh)
        CHECK(cudaEventRecord(a));
        x.launch(grid, q, k, v, o, lse, N, scale);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (round >= 0) times[vi].push_back(ms);
      }
    }
    CHECK(cudaGetLastError());
    for (size_t vi = 0; vi < mine.size(); vi++) {
      auto &t = times[vi];
      std::sort(t.begin(), t.end());
      float ms = t[t.size() / 2];
      double flops = 4.0 * B * H * (double)N * N * D * (mine[vi]->causal ? 0.5 : 1.0);
      printf("%-36s %8.3f %9.1f %10.2e %10.2e %s\n", mine[vi]->name.c_str(), ms, flops / ms / 1e9, errO[vi], errL[vi],
             verdict[vi].c_str());
    }
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse); cudaFree(refO); cudaFree(refL);
    cudaFree(gS); cudaFree(gP);
  }
  return 0;
}
