// The decode rungs against the device's read bandwidth, shape by shape
// (issue 34's decode grid: one query a head, d = 128, 32 query heads over
// 8 or 32 heads of K and V, batch 1, 8 and 64, 4k to 128k keys). For each
// shape, in one process and interleaved: the shipped decode_group kernel
// (the worker's untraced PTX comes from this same source) over a cache of
// random bf16 values, decode_split (its split kernel and merge, the splits
// by decode_split.go's rule, DecodeSplits) on the same cache, and
// bandwidth.cu's read-only kernel over the same bytes (K and V are one
// allocation). Printed: the times, the cache's bytes a second for each,
// and each rung's ratio to the read-only kernel. Run by scripts/bench-decode
// beside bench/decode/sdpa_decode.py.
//
// With "paged", a third table alone: decode_paged (the split kernel
// reading K and V through a block table from a pool of pages, then the
// merge) against decode_split on the same keys, the pool laid out from
// the contiguous cache as the worker lays it (kernels.PagedPool, the
// table by kernels.PageOf), the two outputs held equal bit for bit.
//
// With "pdl" (a build with -DDECODE_PDL), a fourth table alone: decode_split's
// merge launched as a programmatic dependent of the split kernel (Hopper's
// griddepcontrol: its blocks scheduled while the split kernel runs, each
// waiting for its end) against the plain launch, at batch 1.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o decode bench/decode/decode.cu
//   ./decode 20 [blocks an SM [sweep | paged | pdl]]   (sweep: the second table alone)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "../../kernels/cuda/forward/decode_group.cu"
#include "../../kernels/cuda/forward/decode_split.cu" // its include of decode_group.cu finds it included
#include "../../kernels/cuda/forward/decode_paged.cu"

#include "../timing.cuh" // CHECK, beforeTiming

// fill writes n bf16 values of about N(0, 1) from a hash of the index.
__global__ void fill(fast::bf16 *x, size_t n, unsigned seed) {
  for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)k * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h & 0xffffff) / 16777216.f;
    x[k] = __float2bfloat16_rn((u - 0.5f) * 3.4f);
  }
}

#include "read_all.cuh" // readAll, bandwidth.cu's read-only kernel

// interleavedMedians runs each of runs once in turn, iters rounds after
// three unrecorded ones, each timed alone by CUDA events, and returns each
// one's median in ms: two kernels and the read-only kernel see the same
// machine state.
static std::vector<float> interleavedMedians(int iters, const std::vector<std::function<void()>> &runs) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<std::vector<float>> t(runs.size());
  for (int k = -3; k < iters; k++)
    for (size_t w = 0; w < runs.size(); w++) {
      float ms;
      beforeTiming();
      CHECK(cudaEventRecord(e0));
      runs[w]();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (k >= 0) t[w].push_back(ms);
    }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::vector<float> med;
  for (auto &v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

// sameBits says whether two bf16 outputs of n elements are equal bit for bit.
static bool sameBits(const fast::bf16 *x, const fast::bf16 *y, size_t n) {
  std::vector<unsigned short> a(n), b(n);
  CHECK(cudaMemcpy(a.data(), x, n * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(b.data(), y, n * 2, cudaMemcpyDeviceToHost));
  return a == b;
}

// paginate lays a contiguous K or V (B·Hkv heads of N rows of D) out as a
// paged pool ([page][Hkv][BC][D], rows past N zero), kv-tile j of batch row
// b in page table[b·Tc + j]: kernels.PagedPool, a thread per 16 bytes.
__global__ void paginate(const uint4 *src, uint4 *pool, const int *table, int B, int Hkv, int N, int BC, int D) {
  const int Tc = (N + BC - 1) / BC, ch = D / 8;
  const size_t total = (size_t)B * Tc * Hkv * BC * ch;
  for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
    const int c = k % ch, r = (k / ch) % BC, h = (k / ch / BC) % Hkv;
    const size_t tile = k / ch / BC / Hkv; // b·Tc + j
    const int j = tile % Tc, b = tile / Tc;
    const size_t page = table[tile];
    const uint4 zero = {0u, 0u, 0u, 0u};
    pool[((page * Hkv + h) * BC + r) * ch + c] = j * BC + r < N ? src[(((size_t)b * Hkv + h) * N + j * BC + r) * ch + c] : zero;
  }
}

// pageOf is kernels.PageOf: ((b·Tc + j)·stride + seed) mod pages, the
// stride the first number from 0.618·pages up sharing no factor with it.
static int pageOf(unsigned long long pages, unsigned long long idx, unsigned long long seed) {
  auto gcd = [](unsigned long long a, unsigned long long b) { while (b) { const unsigned long long t = a % b; a = b; b = t; } return a; };
  unsigned long long a = std::max(1ull, pages * 618034ull / 1000000ull);
  while (gcd(a, pages) != 1) a++;
  return (int)((idx * a + seed % pages) % pages);
}

// pagedTable times decode_paged against decode_split and the read-only
// kernel, interleaved, on the decode grid's shapes that fit twice (the
// contiguous cache and the pool).
static int pagedTable(int iters, int perSM, unsigned *sink, int rb) {
  constexpr int D = 128, BC = 64, HQ = 32;
  const int smem = decode::smem_bytes(D, BC);
  CHECK(cudaFuncSetAttribute(decode_paged_br1_bc64_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  printf("\n# decode_paged against decode_split on the same keys (split kernel and merge each; median of %d, interleaved)\n", iters);
  printf("%5s %7s %4s %10s %6s %6s %10s %10s %10s %10s %10s %9s %7s\n", "B", "N", "Hkv", "cache GB", "pages", "splits", "split ms",
         "split TB/s", "paged ms", "paged TB/s", "read TB/s", "paged÷sp", "equal");
  const float scale = 1.f / sqrtf((float)D);
  for (int hkv : {8, 32})
    for (int b : {1, 8, 64})
      for (int n : {4096, 32768, 131072}) {
        const size_t kvElems = (size_t)b * hkv * n * D, cache = 2 * kvElems * 2;
        if (cache > 30e9) continue; // the pool doubles it
        const int tc = (n + BC - 1) / BC, pages = b * tc;
        const size_t poolElems = (size_t)pages * hkv * BC * D;
        fast::bf16 *kv, *pool, *q, *o, *o2;
        float *lse, *os, *lses;
        int *table;
        CHECK(cudaMalloc(&kv, cache));
        CHECK(cudaMalloc(&pool, 2 * poolElems * 2));
        CHECK(cudaMalloc(&q, (size_t)b * HQ * D * 2));
        CHECK(cudaMalloc(&o, (size_t)b * HQ * D * 2));
        CHECK(cudaMalloc(&o2, (size_t)b * HQ * D * 2));
        CHECK(cudaMalloc(&lse, (size_t)b * HQ * 4));
        CHECK(cudaMalloc(&table, (size_t)pages * 4));
        std::vector<int> host(pages);
        for (int k = 0; k < pages; k++) host[k] = pageOf(pages, k, 1);
        CHECK(cudaMemcpy(table, host.data(), pages * 4, cudaMemcpyHostToDevice));
        fill<<<1024, 256>>>(kv, 2 * kvElems, 1u);
        fill<<<64, 256>>>(q, (size_t)b * HQ * D, 2u);
        paginate<<<1024, 256>>>((const uint4 *)kv, (uint4 *)pool, table, b, hkv, n, BC, D);
        paginate<<<1024, 256>>>((const uint4 *)(kv + kvElems), (uint4 *)(pool + poolElems), table, b, hkv, n, BC, D);
        const int want = std::min(tc, std::max(1, 132 * perSM / (b * hkv)));
        const int per = (tc + want - 1) / want, splits = (tc + per - 1) / per;
        CHECK(cudaMalloc(&os, (size_t)b * HQ * splits * D * 4));
        CHECK(cudaMalloc(&lses, (size_t)b * HQ * splits * 4));
        CHECK(cudaDeviceSynchronize());
        auto splitRun = [&] {
          decode_split_br1_bc64_d128<<<dim3(1, b * hkv, splits), decode::NT, smem>>>(q, kv, kv + kvElems, os, lses, n, 1, HQ, HQ / hkv,
                                                                                    scale, 0, per, splits);
          decode_merge_br1_d128<<<dim3(1, b * HQ), decode::MT, 4 * 132 * 4>>>(os, lses, o, lse, 1, splits);
        };
        auto pagedRun = [&] {
          decode_paged_br1_bc64_d128<<<dim3(1, b * hkv, splits), decode::NT, smem>>>(q, pool, pool + poolElems, table, os, lses, n, 1, HQ,
                                                                                    HQ / hkv, scale, 0, per, splits);
          decode_paged_merge_br1_d128<<<dim3(1, b * HQ), decode::MT, 4 * 132 * 4>>>(os, lses, o2, lse, 1, splits);
        };
        auto readRun = [&] { readAll<<<rb, 512>>>((const uint4 *)kv, cache / 16, sink); };
        const std::vector<float> med = interleavedMedians(iters, {splitRun, pagedRun, readRun});
        // The same keys through the table: the same output, bit for bit.
        const bool equal = sameBits(o, o2, (size_t)b * HQ * D);
        printf("%5d %7d %4d %10.3f %6d %6d %10.4f %10.3f %10.4f %10.3f %10.3f %9.3f %7s\n", b, n, hkv, cache / 1e9, pages, splits, med[0],
               cache / med[0] / 1e9, med[1], cache / med[1] / 1e9, cache / med[2] / 1e9, med[0] / med[1], equal ? "yes" : "NO");
        fflush(stdout);
        for (void *p : {(void *)kv, (void *)pool, (void *)q, (void *)o, (void *)o2, (void *)lse, (void *)os, (void *)lses, (void *)table})
          CHECK(cudaFree(p));
        if (!equal) return 1;
      }
  return 0;
}

// pdlTable times decode_split's two kernels at batch 1, the merge launched
// plainly and as a programmatic dependent, interleaved, with the read-only
// kernel; the two outputs held equal bit for bit.
static int pdlTable(int iters, int perSM, unsigned *sink, int rb) {
#ifndef DECODE_PDL
  fprintf(stderr, "pdl: build with -DDECODE_PDL\n");
  return 2;
#else
  constexpr int D = 128, BC = 64, HQ = 32;
  const int smem = decode::smem_bytes(D, BC);
  CHECK(cudaFuncSetAttribute(decode_split_br1_bc64_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  printf("\n# decode_split at batch 1: the merge launched plainly, then as a programmatic dependent (median of %d, interleaved)\n", iters);
  printf("%4s %7s %6s %10s %10s %10s %10s %10s %8s %6s\n", "Hkv", "N", "splits", "plain ms", "pdl ms", "plain TB/s", "pdl TB/s", "read TB/s", "pdl×", "equal");
  const float scale = 1.f / sqrtf((float)D);
  for (int hkv : {8, 32})
    for (int n : {16384, 32768, 131072}) {
      const int b = 1;
      const size_t kvElems = (size_t)b * hkv * n * D, cache = 2 * kvElems * 2;
      const int tc = (n + BC - 1) / BC, want = std::min(tc, std::max(1, 132 * perSM / (b * hkv)));
      const int per = (tc + want - 1) / want, splits = (tc + per - 1) / per;
      fast::bf16 *kv, *q, *o, *o2;
      float *lse, *os, *lses;
      CHECK(cudaMalloc(&kv, cache));
      CHECK(cudaMalloc(&q, (size_t)b * HQ * D * 2));
      CHECK(cudaMalloc(&o, (size_t)b * HQ * D * 2));
      CHECK(cudaMalloc(&o2, (size_t)b * HQ * D * 2));
      CHECK(cudaMalloc(&lse, (size_t)b * HQ * 4));
      CHECK(cudaMalloc(&os, (size_t)b * HQ * splits * D * 4));
      CHECK(cudaMalloc(&lses, (size_t)b * HQ * splits * 4));
      fill<<<1024, 256>>>(kv, 2 * kvElems, 1u);
      fill<<<64, 256>>>(q, (size_t)b * HQ * D, 2u);
      CHECK(cudaDeviceSynchronize());
      auto split = [&] {
        decode_split_br1_bc64_d128<<<dim3(1, b * hkv, splits), decode::NT, smem>>>(q, kv, kv + kvElems, os, lses, n, 1, HQ, HQ / hkv, scale, 0,
                                                                                  per, splits);
      };
      auto plain = [&] {
        split();
        decode_merge_br1_d128<<<dim3(1, b * HQ), decode::MT, 4 * 132 * 4>>>(os, lses, o, lse, 1, splits);
      };
      auto pdl = [&] {
        split();
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1, b * HQ);
        cfg.blockDim = dim3(decode::MT);
        cfg.dynamicSmemBytes = 4 * 132 * 4;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        CHECK(cudaLaunchKernelEx(&cfg, decode_merge_br1_d128, (const float *)os, (const float *)lses, o2, lse, 1, splits));
      };
      auto read = [&] { readAll<<<rb, 512>>>((const uint4 *)kv, cache / 16, sink); };
      const std::vector<float> med = interleavedMedians(iters, {plain, pdl, read});
      printf("%4d %7d %6d %10.4f %10.4f %10.3f %10.3f %10.3f %8.3f %6s\n", hkv, n, splits, med[0], med[1], cache / med[0] / 1e9, cache / med[1] / 1e9,
             cache / med[2] / 1e9, med[0] / med[1], sameBits(o, o2, (size_t)b * HQ * D) ? "yes" : "NO");
      fflush(stdout);
      for (void *p : {(void *)kv, (void *)q, (void *)o, (void *)o2, (void *)lse, (void *)os, (void *)lses}) CHECK(cudaFree(p));
    }
  return 0;
#endif
}

int main(int argc, char **argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20;
  // Blocks an SM that decode_split's rule fills one wave of: 2 for the
  // shipped kernel (decode_split.go's DecodeBlocksPerSM); a build with
  // fewer stages (-DDECODE_STAGES=2) fits 3.
  const int perSM = argc > 2 ? atoi(argv[2]) : 2;
  // The second table, by splits, alone (the first takes minutes).
  const bool sweepOnly = argc > 3 && strcmp(argv[3], "sweep") == 0;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int rb = prop.multiProcessorCount * 4;
  unsigned *sink;
  CHECK(cudaMalloc(&sink, rb * sizeof(unsigned)));
  if (argc > 3 && strcmp(argv[3], "pdl") == 0) return pdlTable(iters, perSM, sink, rb);
  if (argc > 3 && strcmp(argv[3], "paged") == 0) {
    CHECK(cudaFuncSetAttribute(decode_split_br1_bc64_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, decode::smem_bytes(128, 64)));
    return pagedTable(iters, perSM, sink, rb);
  }
  constexpr int D = 128, BC = 64, HQ = 32;
  const int smem = decode::smem_bytes(D, BC);
  CHECK(cudaFuncSetAttribute(decode_group_br1_bc64_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(decode_split_br1_bc64_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  printf("# %s, %d SMs; decode_group br1 bc64 d128, %d stages, %d B of shared memory a block, splits for %d blocks an SM; median of %d, interleaved\n",
         prop.name, prop.multiProcessorCount, decode::NS, smem, perSM, iters);
  printf("%5s %7s %4s %4s %10s %10s %10s %6s %10s %10s %10s %10s %7s %7s\n", "B", "N", "Hq", "Hkv", "cache GB", "group ms", "group TB/s",
         "splits", "split ms", "split TB/s", "read ms", "read TB/s", "group×", "split×");
  const float scale = 1.f / sqrtf((float)D);
  for (int hkv : {8, 32})
    for (int b : {1, 8, 64})
      for (int n : {4096, 16384, 32768, 131072}) {
        if (sweepOnly) continue;
        const size_t kvElems = (size_t)b * hkv * n * D, cache = 2 * kvElems * 2;
        fast::bf16 *kv, *q, *o;
        float *lse;
        if (cudaMalloc(&kv, cache) != cudaSuccess) {
          cudaGetLastError();
          printf("%5d %7d %4d %4d %10.2f %s\n", b, n, HQ, hkv, cache / 1e9, "does not fit");
          continue;
        }
        CHECK(cudaMalloc(&q, (size_t)b * HQ * D * 2));
        CHECK(cudaMalloc(&o, (size_t)b * HQ * D * 2));
        CHECK(cudaMalloc(&lse, (size_t)b * HQ * 4));
        fill<<<1024, 256>>>(kv, 2 * kvElems, 1u);
        fill<<<64, 256>>>(q, (size_t)b * HQ * D, 2u);
        CHECK(cudaDeviceSynchronize());
        const dim3 grid(1, b * hkv);
        auto decodeRun = [&] {
          decode_group_br1_bc64_d128<<<grid, decode::NT, smem>>>(q, kv, kv + kvElems, o, lse, n, 1, HQ, HQ / hkv, scale, 0);
        };
        auto readRun = [&] { readAll<<<rb, 512>>>((const uint4 *)kv, cache / 16, sink); };
        // decode_split.go's DecodeSplits: as many splits as one wave of perSM blocks an SM holds.
        const int tc = (n + BC - 1) / BC, blocks = b * hkv;
        const int want = std::min(tc, std::max(1, 132 * perSM / blocks));
        const int per = (tc + want - 1) / want, splits = (tc + per - 1) / per;
        float *os, *lses;
        CHECK(cudaMalloc(&os, (size_t)b * HQ * splits * D * 4));
        CHECK(cudaMalloc(&lses, (size_t)b * HQ * splits * 4));
        fast::bf16 *o2;
        CHECK(cudaMalloc(&o2, (size_t)b * HQ * D * 2));
        auto splitRun = [&] {
          decode_split_br1_bc64_d128<<<dim3(1, b * hkv, splits), decode::NT, smem>>>(q, kv, kv + kvElems, os, lses, n, 1, HQ, HQ / hkv,
                                                                                    scale, 0, per, splits);
          decode_merge_br1_d128<<<dim3(1, b * HQ), decode::MT, 4 * 132 * 4>>>(os, lses, o2, lse, 1, splits);
        };
        // decode_split beside the read-only kernel, then decode_group beside
        // it, each pair interleaved on its own, so that neither ratio depends
        // on the other rung (at batch 1 decode_group keeps 8 to 32 SMs busy
        // for 0.7 to 2.8 ms). Each rung's ratio is to the read-only kernel
        // timed between its own runs (docs/DECODE.md, run bj).
        const std::vector<float> splitMs = interleavedMedians(iters, {splitRun, readRun});
        const std::vector<float> groupMs = interleavedMedians(iters, {decodeRun, readRun});
        CHECK(cudaGetLastError());
        // The output must be finite: a kernel that read nothing would be fast.
        // Both rungs' outputs must be finite and agree: a kernel that read
        // nothing would be fast.
        std::vector<unsigned short> host((size_t)b * HQ * D), host2(host.size());
        CHECK(cudaMemcpy(host.data(), o, host.size() * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(host2.data(), o2, host2.size() * 2, cudaMemcpyDeviceToHost));
        double diff2 = 0, ref2 = 0;
        for (size_t k = 0; k < host.size(); k++) {
          const unsigned bits = (unsigned)host[k] << 16, bits2 = (unsigned)host2[k] << 16;
          float f, f2;
          memcpy(&f, &bits, 4);
          memcpy(&f2, &bits2, 4);
          if (!std::isfinite(f) || !std::isfinite(f2)) {
            fprintf(stderr, "B=%d N=%d Hkv=%d: output not finite\n", b, n, hkv);
            return 1;
          }
          diff2 += (double)(f - f2) * (f - f2);
          ref2 += (double)f * f;
        }
        if (!(sqrt(diff2 / ref2) < 1e-2)) {
          fprintf(stderr, "B=%d N=%d Hkv=%d: decode_split's O is %.3g off decode_group's\n", b, n, hkv, sqrt(diff2 / ref2));
          return 1;
        }
        const float msD = groupMs[0], msS = splitMs[0], msR = splitMs[1];
        printf("%5d %7d %4d %4d %10.3f %10.4f %10.3f %6d %10.4f %10.3f %10.4f %10.3f %7.3f %7.3f\n", b, n, HQ, hkv, cache / 1e9, msD,
               cache / msD / 1e9, splits, msS, cache / msS / 1e9, msR, cache / msR / 1e9, groupMs[1] / msD, msR / msS);
        CHECK(cudaFree(os));
        CHECK(cudaFree(lses));
        CHECK(cudaFree(o2));
        fflush(stdout);
        CHECK(cudaFree(kv));
        CHECK(cudaFree(q));
        CHECK(cudaFree(o));
        CHECK(cudaFree(lse));
      }
  // What limits split-KV where the grid is small: at batch 1 with 8 K/V
  // heads, the split kernel alone, the merge alone and both, at split
  // counts around the rule's (one wave: 33 of 264 blocks' worth).
  printf("\n# decode_split at B = 1, Hkv = 8 and 32: split kernel, merge, both (ms), by splits\n");
  printf("%4s %7s %6s %6s %10s %10s %10s %10s %10s\n", "Hkv", "N", "splits", "per", "split ms", "merge ms", "both ms", "both TB/s", "read TB/s");
  for (int hkv : {8, 32})
  for (int n : {32768, 131072}) {
    const int b = 1;
    const size_t kvElems = (size_t)b * hkv * n * D, cache = 2 * kvElems * 2;
    fast::bf16 *kv, *q, *o;
    float *lse, *os, *lses;
    CHECK(cudaMalloc(&kv, cache));
    CHECK(cudaMalloc(&q, (size_t)b * HQ * D * 2));
    CHECK(cudaMalloc(&o, (size_t)b * HQ * D * 2));
    CHECK(cudaMalloc(&lse, (size_t)b * HQ * 4));
    fill<<<1024, 256>>>(kv, 2 * kvElems, 1u);
    fill<<<64, 256>>>(q, (size_t)b * HQ * D, 2u);
    const int tc = (n + BC - 1) / BC;
    CHECK(cudaMalloc(&os, (size_t)b * HQ * tc * D * 4));
    CHECK(cudaMalloc(&lses, (size_t)b * HQ * tc * 4));
    CHECK(cudaDeviceSynchronize());
    for (int target : {8, 16, 24, 33, 48, 66, 99, 132}) {
      const int per = (tc + target - 1) / target, splits = (tc + per - 1) / per;
      auto split = [&] {
        decode_split_br1_bc64_d128<<<dim3(1, b * hkv, splits), decode::NT, smem>>>(q, kv, kv + kvElems, os, lses, n, 1, HQ, HQ / hkv, scale,
                                                                                  0, per, splits);
      };
      auto merge = [&] { decode_merge_br1_d128<<<dim3(1, b * HQ), decode::MT, 4 * 132 * 4>>>(os, lses, o, lse, 1, splits); };
      auto read = [&] { readAll<<<rb, 512>>>((const uint4 *)kv, cache / 16, sink); };
      cudaEvent_t e0, e1;
      CHECK(cudaEventCreate(&e0));
      CHECK(cudaEventCreate(&e1));
      std::vector<float> t[4];
      for (int k = -3; k < iters; k++) {
        for (int which = 0; which < 4; which++) {
          float ms;
          beforeTiming();
          CHECK(cudaEventRecord(e0));
          if (which == 0) split();
          if (which == 1) merge();
          if (which == 2) {
            split();
            merge();
          }
          if (which == 3) read();
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (k >= 0) t[which].push_back(ms);
        }
      }
      CHECK(cudaGetLastError());
      float med[4];
      for (int w = 0; w < 4; w++) {
        std::sort(t[w].begin(), t[w].end());
        med[w] = t[w][t[w].size() / 2];
      }
      printf("%4d %7d %6d %6d %10.4f %10.4f %10.4f %10.3f %10.3f\n", hkv, n, splits, per, med[0], med[1], med[2], cache / med[2] / 1e9,
             cache / med[3] / 1e9);
      fflush(stdout);
    }
    CHECK(cudaFree(kv));
    CHECK(cudaFree(q));
    CHECK(cudaFree(o));
    CHECK(cudaFree(lse));
    CHECK(cudaFree(os));
    CHECK(cudaFree(lses));
  }
  return 0;
}
