// turns: do two 128-thread groups that pass a turn through named barriers, as
// flash3_pingpong.cu's consumers do (warpspec.cuh: turn_wait, turn_pass), run in
// turns? Each group reads %clock64 after its turn_wait and before its
// turn_pass; each line says, in cycles from group 0's release, when group 0's
// warps passed the turn and when group 1 was released. Modes: 0 names the
// barrier in a register (`bar.sync %r, 256`, what flash3_pingpong did until
// run r), 1 by an immediate (`bar.sync 2, 256`), 2 by an immediate with
// barrier.sync.aligned. Build and run on the GPU machine:
//   nvcc -arch=sm_90a -o /tmp/turns bench/turns/turns.cu && for m in 0 1 2; do /tmp/turns $m; done
// docs/LADDER.md, run r, has what it printed on the H100: in mode 0 group 1
// is released before group 0 has passed; in modes 1 and 2 after.
#include <cstdio>
#include <cstdlib>
__device__ __forceinline__ unsigned long long clk() { unsigned long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }
__device__ int g_mode;
// mode 0: barrier id in a register (the kernel's); 1: immediate ids; 2: immediate ids, bar.sync without count
__device__ __forceinline__ void turn_wait(int c) {
  if (g_mode == 0) asm volatile("bar.sync %0, 256;\n" ::"r"(2 + c) : "memory");
  else if (g_mode == 1) { if (c == 0) asm volatile("bar.sync 2, 256;\n" ::: "memory"); else asm volatile("bar.sync 3, 256;\n" ::: "memory"); }
  else { if (c == 0) asm volatile("barrier.sync.aligned 2, 256;\n" ::: "memory"); else asm volatile("barrier.sync.aligned 3, 256;\n" ::: "memory"); }
}
__device__ __forceinline__ void turn_pass(int c) {
  if (g_mode == 0) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + c) : "memory");
  else if (g_mode == 1) { if (c == 0) asm volatile("bar.arrive 2, 256;\n" ::: "memory"); else asm volatile("bar.arrive 3, 256;\n" ::: "memory"); }
  else { if (c == 0) asm volatile("barrier.arrive.aligned 2, 256;\n" ::: "memory"); else asm volatile("barrier.arrive.aligned 3, 256;\n" ::: "memory"); }
}
__global__ void probe(unsigned long long *got, unsigned long long *passed, unsigned *smsp, int keepAlive) {
  __shared__ volatile int done;
  if (threadIdx.x == 0) done = 0;
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < 4) {
    if (keepAlive) while (!done) {}
    return;
  }
  int c = (warp - 4) / 4;
  if (lane == 0) { unsigned s; asm volatile("mov.u32 %0, %%warpid;" : "=r"(s)); smsp[warp] = s; }
  if (c == 1) turn_pass(0);
  for (int k = 0; k < 16; k++) {
    turn_wait(c);
    unsigned long long t = clk();
    if (lane == 0) got[(warp * 16 + k)] = t;
    unsigned long long t0 = clk();
    while (clk() - t0 < 300 + 100 * (warp % 4)) {}
    unsigned long long tp = clk();
    if (lane == 0) passed[(warp * 16 + k)] = tp;
    if (!(c == 1 && k == 15)) turn_pass(c ^ 1);
  }
  if (warp == 8 && lane == 0) done = 1;
}
int main(int argc, char **argv) {
  int keepAlive = 0, mode = argc > 1 ? atoi(argv[1]) : 0;
  cudaMemcpyToSymbol(g_mode, &mode, sizeof mode);
  printf("mode %d\n", mode);
  printf("warps 0-3 %s\n", keepAlive ? "stay until the end" : "exit at once");
  unsigned long long *dg, *dp; unsigned *ds;
  cudaMalloc(&dg, 12 * 16 * 8); cudaMalloc(&dp, 12 * 16 * 8); cudaMalloc(&ds, 12 * 4);
  probe<<<1, 384>>>(dg, dp, ds, keepAlive);
  static unsigned long long g[12 * 16], p[12 * 16]; unsigned s[12];
  cudaMemcpy(g, dg, sizeof g, cudaMemcpyDeviceToHost); cudaMemcpy(p, dp, sizeof p, cudaMemcpyDeviceToHost); cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost);
  printf("%%warpid of warps 4..11:"); for (int w = 4; w < 12; w++) printf(" %u", s[w]); printf("\n");
  int bad = 0;
  for (int k = 0; k < 16; k++) {
    unsigned long long rel0 = ~0ull, firstPass = ~0ull, lastPass = 0, rel1 = ~0ull;
    for (int w = 4; w < 8; w++) { rel0 = rel0 < g[w*16+k] ? rel0 : g[w*16+k]; firstPass = firstPass < p[w*16+k] ? firstPass : p[w*16+k]; lastPass = lastPass > p[w*16+k] ? lastPass : p[w*16+k]; }
    for (int w = 8; w < 12; w++) rel1 = rel1 < g[w*16+k] ? rel1 : g[w*16+k];
    if ((long long)(rel1 - lastPass) < 0) bad++;
    if (k < 3) printf("turn %d, cycles from c0's release: c0 passes %lld..%lld, c1 released %lld\n", k, (long long)(firstPass - rel0), (long long)(lastPass - rel0), (long long)(rel1 - rel0));
  }
  printf("%d of 16 turns of c1 released before c0's last pass\n", bad);
  return 0;
}
