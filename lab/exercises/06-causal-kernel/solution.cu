// The online kernel under a causal mask: scores of keys after their query
// are −∞, and the block stops at the last kv-tile its last row can see.
extern "C" __global__ void attention(const float *Q, const float *K, const float *V, float *O,
                                     float *LSE, int N, float scale, int causal) {
  __shared__ float sK[FS_BC][FS_D], sV[FS_BC][FS_D];
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = row < N;
  const size_t base = (size_t)blockIdx.y * N * FS_D;
  float q[FS_D], o[FS_D], s[FS_BC];
  for (int x = 0; x < FS_D; x++) {
    q[x] = live ? Q[base + (size_t)row * FS_D + x] : 0.f;
    o[x] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int lastRow = min((int)(blockIdx.x + 1) * FS_BR, N) - 1;
  const int tiles = causal ? lastRow / FS_BC + 1 : (N + FS_BC - 1) / FS_BC;
  for (int j = 0; j < tiles; j++) {
    const int c0 = j * FS_BC, cols = min(FS_BC, N - c0);
    for (int e = threadIdx.x; e < FS_BC * FS_D; e += blockDim.x) {
      const bool in = e / FS_D < cols;
      sK[e / FS_D][e % FS_D] = in ? K[base + (size_t)(c0 + e / FS_D) * FS_D + e % FS_D] : 0.f;
      sV[e / FS_D][e % FS_D] = in ? V[base + (size_t)(c0 + e / FS_D) * FS_D + e % FS_D] : 0.f;
    }
    __syncthreads();
    float mNew = m;
    for (int c = 0; c < FS_BC; c++) {
      float dot = 0.f;
      for (int x = 0; x < FS_D; x++) dot += q[x] * sK[c][x];
      s[c] = c < cols && !(causal && c0 + c > row) ? dot * scale : -INFINITY;
      mNew = fmaxf(mNew, s[c]);
    }
    // A row with every key so far masked keeps m = −∞: measure against 0.
    const float mb = mNew == -INFINITY ? 0.f : mNew;
    const float alpha = expf(m - mb);
    l *= alpha;
    for (int x = 0; x < FS_D; x++) o[x] *= alpha;
    for (int c = 0; c < cols; c++) {
      const float p = expf(s[c] - mb);
      l += p;
      for (int x = 0; x < FS_D; x++) o[x] += p * sV[c][x];
    }
    m = mNew;
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
