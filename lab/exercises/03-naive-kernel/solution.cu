// One thread per query row, two passes over the keys.
extern "C" __global__ void attention(const float *Q, const float *K, const float *V, float *O,
                                     float *LSE, int N, float scale) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t base = (size_t)blockIdx.y * N * FS_D;
  if (row >= N) return;
  const float *q = Q + base + (size_t)row * FS_D;
  float m = -INFINITY;
  for (int c = 0; c < N; c++) {
    float s = 0.f;
    for (int x = 0; x < FS_D; x++) s += q[x] * K[base + (size_t)c * FS_D + x];
    m = fmaxf(m, s * scale);
  }
  float l = 0.f, o[FS_D];
  for (int x = 0; x < FS_D; x++) o[x] = 0.f;
  for (int c = 0; c < N; c++) {
    float s = 0.f;
    for (int x = 0; x < FS_D; x++) s += q[x] * K[base + (size_t)c * FS_D + x];
    const float p = expf(s * scale - m);
    l += p;
    for (int x = 0; x < FS_D; x++) o[x] += p * V[base + (size_t)c * FS_D + x];
    if ((c + 1) % FS_BC == 0 || c == N - 1) fs_record_step(c / FS_BC, m, l, o);
  }
  for (int x = 0; x < FS_D; x++) {
    o[x] /= l;
    O[base + (size_t)row * FS_D + x] = o[x];
  }
  LSE[(size_t)blockIdx.y * N + row] = m + logf(l);
  fs_record_out(o, m + logf(l));
}
