// A thread per query row; each kv-tile of K (and V) loaded once per block
// into shared memory and read from there by every thread.
extern "C" __global__ void attention(const float *Q, const float *K, const float *V, float *O,
                                     float *LSE, int N, float scale) {
  __shared__ float sK[FS_BC][FS_D], sV[FS_BC][FS_D];
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = row < N;
  const size_t base = (size_t)blockIdx.y * N * FS_D;
  float q[FS_D];
  for (int x = 0; x < FS_D; x++) q[x] = live ? Q[base + (size_t)row * FS_D + x] : 0.f;
  const int tiles = (N + FS_BC - 1) / FS_BC;
  float m = -INFINITY;
  for (int j = 0; j < tiles; j++) {
    const int c0 = j * FS_BC, cols = min(FS_BC, N - c0);
    for (int e = threadIdx.x; e < FS_BC * FS_D; e += blockDim.x)
      sK[e / FS_D][e % FS_D] = e / FS_D < cols ? K[base + (size_t)(c0 + e / FS_D) * FS_D + e % FS_D] : 0.f;
    __syncthreads();
    for (int c = 0; c < cols; c++) {
      float s = 0.f;
      for (int x = 0; x < FS_D; x++) s += q[x] * sK[c][x];
      m = fmaxf(m, s * scale);
    }
    __syncthreads();
  }
  float l = 0.f, o[FS_D];
  for (int x = 0; x < FS_D; x++) o[x] = 0.f;
  for (int j = 0; j < tiles; j++) {
    const int c0 = j * FS_BC, cols = min(FS_BC, N - c0);
    for (int e = threadIdx.x; e < FS_BC * FS_D; e += blockDim.x) {
      const bool in = e / FS_D < cols;
      sK[e / FS_D][e % FS_D] = in ? K[base + (size_t)(c0 + e / FS_D) * FS_D + e % FS_D] : 0.f;
      sV[e / FS_D][e % FS_D] = in ? V[base + (size_t)(c0 + e / FS_D) * FS_D + e % FS_D] : 0.f;
    }
    __syncthreads();
    for (int c = 0; c < cols; c++) {
      float s = 0.f;
      for (int x = 0; x < FS_D; x++) s += q[x] * sK[c][x];
      const float p = expf(s * scale - m);
      l += p;
      for (int x = 0; x < FS_D; x++) o[x] += p * sV[c][x];
    }
    if (live) fs_record_step(j, m, l, o);
    __syncthreads();
  }
  if (!live) return;
  for (int x = 0; x < FS_D; x++) {
    o[x] /= l;
    O[base + (size_t)row * FS_D + x] = o[x];
  }
  LSE[(size_t)blockIdx.y * N + row] = m + logf(l);
  fs_record_out(o, m + logf(l));
}
