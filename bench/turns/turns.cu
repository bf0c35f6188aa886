// turns: do two 128-thread groups that pass a turn through named barriers, as
// flash3_pingpong.cu's consumers do (warpspec.cuh: turn_wait, turn_pass), run
// in turns, whichever way the barrier is named?
//
// Two checks, each independent of the other:
//   - count: before passing the turn, each warp adds one to its group's
//     counter in shared memory; a warp released for its turn k must see the
//     other group's counter at 4(k+1) or more (the other group's 4 warps have
//     each passed k+1 times, counting the initial pass). A smaller count is a
//     release before the other group had passed: the turn held nothing.
//   - clock: %clock64 read after the release and before the pass; a group
//     released before the other's last pass is early. The clock reads carry a
//     memory clobber in all but the "noclobber" variant, so the compiler cannot
//     move them across the barrier's asm.
// Variants (compile-time, one kernel each, so no run-time branch stands
// between a warp and its barrier):
//   reg        id in a register, 2 + c, c from the warp index (rung 10's first
//              build); the compiler cannot know c is the same across a warp
//   reg-nomem  the same, clock reads without a memory clobber (the original probe)
//   reg-shfl   id in a register, c broadcast from lane 0 by __shfl_sync (as
//              CUTLASS's canonical_warp_group_idx makes it warp-uniform)
//   reg-count  id and thread count both in registers (`bar.sync %0, %1`, as
//              CUTLASS's NamedBarrier emits)
//   reg-param  id in a register from a kernel parameter, one branch a group
//   imm        id by an immediate, one branch a group (rung 10 today)
//   imm-count  id by an immediate, thread count in a register
//   aligned    barrier.sync.aligned / barrier.arrive.aligned, immediates
//   reg-unal   barrier.sync / barrier.arrive without .aligned, id in a register
// Build and run on the GPU machine (prints one line a variant, then the SASS
// barrier instructions of each with -sass):
//   nvcc -arch=sm_90a -o /tmp/turns bench/turns/turns.cu && /tmp/turns
//   cuobjdump -sass /tmp/turns | grep -E 'Function|BAR'
// docs/LADDER.md ("Rung 10's turns") has what it printed.
#include <cstdio>
#include <cstdlib>
#include <type_traits>

enum Variant { REG, REG_NOMEM, REG_SHFL, REG_COUNT, REG_PARAM, IMM, IMM_COUNT, ALIGNED, REG_UNAL, NVARIANTS };
static const char *names[] = {"reg", "reg-nomem", "reg-shfl", "reg-count", "reg-param", "imm", "imm-count", "aligned", "reg-unal"};

constexpr int TURNS = 64;

template <bool MEM> __device__ __forceinline__ unsigned long long clk() {
  unsigned long long t;
  if (MEM) asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  else asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}

// sync waits on barrier 2 + c; arrive signals barrier 2 + c.
template <int V> __device__ __forceinline__ void sync(int c, int id2, int n) {
  if (V == REG || V == REG_NOMEM || V == REG_SHFL) asm volatile("bar.sync %0, 256;\n" ::"r"(2 + c) : "memory");
  else if (V == REG_COUNT) asm volatile("bar.sync %0, %1;\n" ::"r"(2 + c), "r"(n) : "memory");
  else if (V == REG_PARAM) { if (c == 0) asm volatile("bar.sync %0, 256;\n" ::"r"(id2) : "memory"); else asm volatile("bar.sync %0, 256;\n" ::"r"(id2 + 1) : "memory"); }
  else if (V == IMM) { if (c == 0) asm volatile("bar.sync 2, 256;\n" ::: "memory"); else asm volatile("bar.sync 3, 256;\n" ::: "memory"); }
  else if (V == IMM_COUNT) { if (c == 0) asm volatile("bar.sync 2, %0;\n" ::"r"(n) : "memory"); else asm volatile("bar.sync 3, %0;\n" ::"r"(n) : "memory"); }
  else if (V == ALIGNED) { if (c == 0) asm volatile("barrier.sync.aligned 2, 256;\n" ::: "memory"); else asm volatile("barrier.sync.aligned 3, 256;\n" ::: "memory"); }
  else asm volatile("barrier.sync %0, 256;\n" ::"r"(2 + c) : "memory");
}
template <int V> __device__ __forceinline__ void arrive(int c, int id2, int n) {
  if (V == REG || V == REG_NOMEM || V == REG_SHFL) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + c) : "memory");
  else if (V == REG_COUNT) asm volatile("bar.arrive %0, %1;\n" ::"r"(2 + c), "r"(n) : "memory");
  else if (V == REG_PARAM) { if (c == 0) asm volatile("bar.arrive %0, 256;\n" ::"r"(id2) : "memory"); else asm volatile("bar.arrive %0, 256;\n" ::"r"(id2 + 1) : "memory"); }
  else if (V == IMM) { if (c == 0) asm volatile("bar.arrive 2, 256;\n" ::: "memory"); else asm volatile("bar.arrive 3, 256;\n" ::: "memory"); }
  else if (V == IMM_COUNT) { if (c == 0) asm volatile("bar.arrive 2, %0;\n" ::"r"(n) : "memory"); else asm volatile("bar.arrive 3, %0;\n" ::"r"(n) : "memory"); }
  else if (V == ALIGNED) { if (c == 0) asm volatile("barrier.arrive.aligned 2, 256;\n" ::: "memory"); else asm volatile("barrier.arrive.aligned 3, 256;\n" ::: "memory"); }
  else asm volatile("barrier.arrive %0, 256;\n" ::"r"(2 + c) : "memory");
}

// probe: warps 0-3 exit (as a producer warpgroup that has given back its
// registers does not take part); warps 4-7 are group 0, 8-11 group 1.
// seen[w][k]: the other group's count when warp w was released for turn k;
// got/passed: its clock at release and at its pass.
template <int V, bool DEP>
__global__ void probe(unsigned *seen, unsigned long long *got, unsigned long long *passed, int id2, int n) {
  __shared__ unsigned count[2];
  if (threadIdx.x < 2) count[threadIdx.x] = 0;
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < 4) return;
  int c = (warp - 4) / 4;
  if (V == REG_SHFL) c = __shfl_sync(0xffffffffu, c, 0);
  constexpr bool mem = V != REG_NOMEM;
  auto pass = [&](int to) {
    if (lane == 0) atomicAdd(&count[c], 1u);
    __threadfence_block();
    __syncwarp();
    arrive<V>(to, id2, n);
  };
  if (c == 1) pass(0);
  for (int k = 0; k < TURNS; k++) {
    sync<V>(c, id2, n);
    unsigned long long t;
    unsigned s;
    if (DEP) {
      // the clock read takes the count, loaded after the barrier, as an
      // input: it cannot be scheduled before the load, nor the load before
      // the barrier
      s = *(volatile unsigned *)&count[c ^ 1];
      asm volatile("mov.u64 %0, %%clock64; // %1" : "=l"(t) : "r"(s) : "memory");
    } else {
      t = clk<mem>();
      s = *(volatile unsigned *)&count[c ^ 1];
    }
    int at = (blockIdx.x * 12 + warp) * TURNS + k;
    if (lane == 0) { got[at] = t; seen[at] = s; }
    unsigned long long t0 = clk<mem>();
    while (clk<mem>() - t0 < 300 + 100 * (warp % 4)) {}
    unsigned long long tp = clk<mem>();
    if (lane == 0) passed[at] = tp;
    if (!(c == 1 && k == TURNS - 1)) pass(c ^ 1);
  }
}

template <int V, bool DEP> void run(int blocks, int launches) {
  size_t n = (size_t)blocks * 12 * TURNS;
  unsigned *dseen; unsigned long long *dg, *dp;
  cudaMalloc(&dseen, n * 4); cudaMalloc(&dg, n * 8); cudaMalloc(&dp, n * 8);
  unsigned *seen = new unsigned[n]; unsigned long long *g = new unsigned long long[n], *p = new unsigned long long[n];
  long countEarly = 0, clockEarly = 0, turns = 0; long long delaySum = 0;
  for (int l = 0; l < launches; l++) {
    probe<V, DEP><<<blocks, 384>>>(dseen, dg, dp, 2, 256);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("%-10s %s  launch failed: %s\n", names[V], DEP ? "dep  " : "plain", cudaGetErrorString(e)); return; }
    cudaMemcpy(seen, dseen, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(g, dg, n * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(p, dp, n * 8, cudaMemcpyDeviceToHost);
    for (int b = 0; b < blocks; b++)
      for (int k = 0; k < TURNS; k++)
        for (int c = 0; c < 2; c++) {
          // group c's turn k follows the other group's pass number k+1
          // (group 1's initial pass counts, so for c = 0 it is the initial
          // pass at k = 0; for c = 1 it is group 0's turn k).
          int other = c ^ 1;
          unsigned long long lastPass = 0, release = ~0ull;
          bool havePass = !(c == 0 && k == 0);
          for (int w = 0; w < 4; w++) {
            size_t me = ((size_t)b * 12 + 4 + 4 * c + w) * TURNS + k;
            if (seen[me] < 4u * (k + 1)) countEarly++;
            release = release < g[me] ? release : g[me];
            if (havePass) {
              int kk = c == 0 ? k - 1 : k;
              size_t o = ((size_t)b * 12 + 4 + 4 * other + w) * TURNS + kk;
              lastPass = lastPass > p[o] ? lastPass : p[o];
            }
          }
          if (havePass) {
            turns++;
            long long d = (long long)(release - lastPass);
            if (d < 0) clockEarly++;
            delaySum += d;
          }
        }
  }
  printf("%-10s %s  warps released early (count): %ld of %ld   turns released before the other's last pass (clock): %ld of %ld   mean release - last pass: %lld cycles\n",
         names[V], DEP ? "dep  " : "plain", countEarly, (long)blocks * launches * TURNS * 8, clockEarly, turns, turns ? delaySum / turns : 0);
  cudaFree(dseen); cudaFree(dg); cudaFree(dp); delete[] seen; delete[] g; delete[] p;
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 132, launches = argc > 2 ? atoi(argv[2]) : 20;
  printf("%d blocks of 384 threads (warps 0-3 exit at once), %d turns a group, %d launches\n", blocks, TURNS, launches);
  for (int dep = 0; dep < 2; dep++) {
    auto go = [&](auto v) {
      constexpr int V = decltype(v)::value;
      if (dep) run<V, true>(blocks, launches); else run<V, false>(blocks, launches);
    };
    go(std::integral_constant<int, REG>{}); go(std::integral_constant<int, REG_NOMEM>{});
    go(std::integral_constant<int, REG_SHFL>{}); go(std::integral_constant<int, REG_COUNT>{});
    go(std::integral_constant<int, REG_PARAM>{}); go(std::integral_constant<int, IMM>{});
    go(std::integral_constant<int, IMM_COUNT>{}); go(std::integral_constant<int, ALIGNED>{});
    go(std::integral_constant<int, REG_UNAL>{});
  }
  return 0;
}
