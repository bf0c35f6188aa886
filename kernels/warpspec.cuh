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
// waiting.
__device__ __forceinline__ void turn_wait(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(2 + c) : "memory"); }
__device__ __forceinline__ void turn_pass(int c) { asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + c) : "memory"); }

} // namespace hopper

#endif // FLASHSTEP_WARPSPEC_CUH
