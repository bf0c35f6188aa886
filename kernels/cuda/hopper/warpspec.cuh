// The roles of a warp-specialised Hopper block (flash3_ws.cu,
// flash3_pingpong.cu): registers moved between warpgroups by setmaxnreg, and
// the named barriers that let some warpgroups meet without the others.
// Needs sm_90a (scripts/ptx-hopper).
//
// Named barriers: 0 is __syncthreads'; 1 is the consumers' alone
// (consumers_sync); 2 and 3 are the turns of two consumer warpgroups that
// take turns on the tensor cores (flash3_pingpong.cu).
#ifndef FLASHSTEP_WARPSPEC_CUH
#define FLASHSTEP_WARPSPEC_CUH

namespace hopper {

// setmaxnreg: a warpgroup's registers a thread, given back (dec) to the
// SM's pool or taken (inc) from it. Every thread of the warpgroup executes
// it together.
template <int R> __device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

// consumers_sync is a barrier of the NC consumer threads alone (named
// barrier 1): the producer never reaches it.
template <int NC> __device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(NC) : "memory");
}

// turn_wait blocks consumer warpgroup c until its turn: named barrier 2 + c
// completes when c's 128 threads wait on it and the other warpgroup's 128
// have arrived (turn_pass). turn_pass gives the turn to warpgroup c without
// waiting. The barrier is named by an immediate, one branch per warpgroup
// (c is the same for all its threads). Rung 10's first build named it by a
// register (`bar.sync %r, 256`) and its role records seemed to show the
// turns ordering nothing; the barrier was not at fault, the stamps were:
// a clock read directly after BAR.SYNC reads the warp's arrival, not its
// release (fs_clock_after_bar, instrument.cuh). bench/turns/turns.cu holds
// both forms, and CUTLASS's register operands, to the turn order.
__device__ __forceinline__ void turn_wait(int c) {
  if (c == 0)
    asm volatile("bar.sync 2, 256;\n" ::: "memory");
  else
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}
__device__ __forceinline__ void turn_pass(int c) {
  if (c == 0)
    asm volatile("bar.arrive 2, 256;\n" ::: "memory");
  else
    asm volatile("bar.arrive 3, 256;\n" ::: "memory");
}

#ifdef FS_TRACE

// role_slots numbers a block's role records in roles mode (docs/ROLES.md),
// in the order of kernels.RoleTable (kernels/roles.go): after each kv-tile's
// timing record the producer's four, then consumer 0's and consumer 1's
// (slot producer + c·consumer + the event's); after the epilogue's timing
// record the block's closing group. TURNS: the consumers record their
// waits for a turn (rung 10). A product's span starts where its warpgroup
// starts issuing it (the end of its wait for data, or for its turn) and
// ends with its wait for it: no stamp lies between a product's wgmma and
// its wait, where ptxas could serialise them.
template <bool TURNS> struct role_slots {
  static constexpr int free_k = 0, copy_k = 1, free_v = 2, copy_v = 3, producer = 4;
  static constexpr int wait_k = 0, turn_s = 1, product_s = TURNS ? 2 : 1, softmax = product_s + 1, wait_v = softmax + 1,
                       turn_pv = wait_v + 1, product_pv = TURNS ? turn_pv + 1 : wait_v + 1, consumer = product_pv + 1;
  static constexpr int per_tile = producer + 2 * consumer;
  static constexpr int copy_q = 0, wait_q = 1, epilogue = 3, clock_start = 5, clock_end = 6; // wait_q + c, epilogue + c
};

// role_log is where one thread stamps role records: the block's region of
// the trace, as 8-byte words, or null when the run is not in roles mode or
// the thread does not stamp. Group g is kv-tile g's (g < jEnd) or the
// closing group (g = jEnd): a timing record and then its role records, each
// 56 bytes, of which the kernel writes t_start and t_end alone (the worker
// writes the rest).
template <int PER_TILE> struct role_log {
  unsigned long long *base;
  static constexpr int words = sizeof(fs_record_header) / 8;
  static constexpr int t_start = offsetof(fs_record_header, t_start) / 8, t_end = offsetof(fs_record_header, t_end) / 8;
  __device__ __forceinline__ unsigned long long *at(int g, int slot) const { return base + (g * (1 + PER_TILE) + 1 + slot) * words; }
  __device__ __forceinline__ void start(int g, int slot, unsigned long long t) const {
    if (base) at(g, slot)[t_start] = t;
  }
  __device__ __forceinline__ void end(int g, int slot, unsigned long long t) const {
    if (base) at(g, slot)[t_end] = t;
  }
};

template <int PER_TILE>
__device__ __forceinline__ role_log<PER_TILE> role_log_at(unsigned char *trace, const unsigned long long *offsets, long long mode,
                                                          unsigned block, bool stamps) {
  role_log<PER_TILE> r;
  r.base = mode == FS_MODE_ROLES && stamps ? reinterpret_cast<unsigned long long *>(trace + offsets[block]) : nullptr;
  return r;
}

// watch_copies is the watcher of roles mode: a copy's landing is seen only
// by a thread that waits on its barrier, and the producer's thread 0 never
// waits for its own copies (it would stop issuing ahead). One otherwise idle
// thread of the producer waits for every fill in order, stamps its landing
// and releases the stage as a consumer does (the empty barriers count it).
template <typename RS, int ST>
__device__ __forceinline__ void watch_copies(const role_log<RS::per_tile> &rl, int jEnd, uint64_t *fullQ, uint64_t *fullK,
                                             uint64_t *fullV, uint64_t *emptyK, uint64_t *emptyV) {
  mbar_wait(fullQ, 0);
  rl.end(jEnd, RS::copy_q, fs_clock());
  for (int j = 0; j < jEnd; j++) {
    const int s = j % ST;
    const unsigned parity = (j / ST) & 1;
    mbar_wait(&fullK[s], parity);
    rl.end(j, RS::copy_k, fs_clock());
    mbar_arrive(&emptyK[s]);
    mbar_wait(&fullV[s], parity);
    rl.end(j, RS::copy_v, fs_clock());
    mbar_arrive(&emptyV[s]);
  }
}

#endif // FS_TRACE

} // namespace hopper

#endif // FLASHSTEP_WARPSPEC_CUH
