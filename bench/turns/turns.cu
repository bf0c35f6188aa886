// turns: do two 128-thread groups that pass a turn through named barriers, as
// flash3_pingpong.cu's consumers do (warpspec.cuh: turn_wait, turn_pass), run in
// turns? Each group reads %clock64 after its turn_wait and before its
// turn_pass; the table says how long after the other group's last pass each
// release came. Build and run on the GPU machine:
//   nvcc -arch=sm_90a -o /tmp/turns bench/turns/turns.cu && /tmp/turns && /tmp/turns keep
// (keep: warps 0-3 stay alive to the end instead of exiting). docs/LADDER.md,
// run r, has what it printed on the H100.
#include <cstdio>
__device__ __forceinline__ unsigned long long clk() { unsigned long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }
__device__ __forceinline__ void turn_wait(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(2 + c) : "memory"); }
__device__ __forceinline__ void turn_pass(int c) { asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + c) : "memory"); }
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
  int keepAlive = argc > 1;
  printf("warps 0-3 %s\n", keepAlive ? "stay until the end" : "exit at once");
  unsigned long long *dg, *dp; unsigned *ds;
  cudaMalloc(&dg, 12 * 16 * 8); cudaMalloc(&dp, 12 * 16 * 8); cudaMalloc(&ds, 12 * 4);
  probe<<<1, 384>>>(dg, dp, ds, keepAlive);
  static unsigned long long g[12 * 16], p[12 * 16]; unsigned s[12];
  cudaMemcpy(g, dg, sizeof g, cudaMemcpyDeviceToHost); cudaMemcpy(p, dp, sizeof p, cudaMemcpyDeviceToHost); cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost);
  printf("%%warpid of warps 4..11:"); for (int w = 4; w < 12; w++) printf(" %u", s[w]); printf("\n");
  int bad = 0;
  for (int k = 0; k < 16; k++) {
    // group c's turn k is released by the other group's pass: c0's turn k by c1's pass k-1 (k>0), c1's turn k by c0's pass k
    unsigned long long lastPass0 = 0, first0 = ~0ull, first1 = ~0ull, last0 = 0, last1 = 0;
    for (int w = 4; w < 8; w++) { lastPass0 = lastPass0 > p[w*16+k] ? lastPass0 : p[w*16+k]; first0 = first0 < g[w*16+k] ? first0 : g[w*16+k]; last0 = last0 > g[w*16+k] ? last0 : g[w*16+k]; }
    for (int w = 8; w < 12; w++) { first1 = first1 < g[w*16+k] ? first1 : g[w*16+k]; last1 = last1 > g[w*16+k] ? last1 : g[w*16+k]; }
    long long gap = (long long)first1 - (long long)lastPass0;
    if (gap < 0) bad++;
    if (k < 4 || gap < 0) printf("turn %2d: c1 released %lld cycles after c0's last pass; released warps' clocks spread: c0 %lld, c1 %lld; per-warp c1:", k, gap, (long long)(last0 - first0), (long long)(last1 - first1));
    if (k < 4 || gap < 0) { for (int w = 8; w < 12; w++) printf(" %lld", (long long)(g[w*16+k] - lastPass0)); printf("\n"); }
  }
  printf("%d of 16 turns of c1 released before c0's last pass\n", bad);
  return 0;
}
