// The online kernel with a causal mask that skips whole tiles. flashstep's lab header is included for you:
//   FS_BR, FS_BC, FS_D         the run's q-tile rows, kv-tile keys, head dim
//   fs_record_step(j, m, l, o) this thread's row after kv-tile j (o: FS_D floats, undivided)
//   fs_record_out(o, lse)      this thread's finished row
extern "C" __global__ void attention(const float *Q, const float *K, const float *V, float *O,
                                     float *LSE, int N, float scale, int causal) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t base = (size_t)blockIdx.y * N * FS_D;
  const bool live = row < N; // a row past N writes nothing, but reaches every __syncthreads()
  // for each kv-tile j the block must see (none past its last row, under the mask):
  //   the tile's scores, the new max, the rescale of l and o, then P and P·V
  //   fs_record_step(j, m, l, o)
  // the end: O = o / l, LSE = m + log l
}
