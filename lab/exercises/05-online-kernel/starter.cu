// One pass: the online softmax, m, l and o in registers. flashstep's lab header is included for you:
//   FS_BR, FS_BC, FS_D         the run's q-tile rows, kv-tile keys, head dim
//   fs_record_step(j, m, l, o) this thread's row after kv-tile j (o: FS_D floats, undivided)
//   fs_record_out(o, lse)      this thread's finished row
extern "C" __global__ void attention(const float *Q, const float *K, const float *V, float *O,
                                     float *LSE, int N, float scale) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t base = (size_t)blockIdx.y * N * FS_D;
  const bool live = row < N; // a row past N writes nothing, but reaches every __syncthreads()
  // for each kv-tile j (K_j and V_j in shared memory):
  //   the tile's scores, the new max, the rescale of l and o, then P and P·V
  //   fs_record_step(j, m, l, o)
  // the end: O = o / l, LSE = m + log l
}
