// Instrumentation shared by flashstep's kernels: how a kernel writes trace
// records in place, in the layout of trace_abi.h (generated from package
// instrument). Compiled with -DFS_TRACE for the traced build; without it every
// trace macro expands to nothing, so the untraced build holds no trace code.
#ifndef FLASHSTEP_INSTRUMENT_CUH
#define FLASHSTEP_INSTRUMENT_CUH

#include "trace_abi.h"

#define FS_NEG_INF (-__int_as_float(0x7f800000))

// What a traced launch records is its mode, FS_MODE_FULL (every record of
// the traced selection, all arrays), FS_MODE_TIMING (a timing record: SM,
// start, end, per step of every block) or FS_MODE_ROLES (timing, and the
// role records of a warp-specialised block), defined in trace_abi.h.

#ifdef FS_TRACE

// The trace arguments every traced kernel takes after its own: the buffer,
// each block's first record offset in it (bytes; all ones: block not
// traced), and the mode.
#define FS_TRACE_PARAMS , unsigned char *__restrict__ fs_trace, const unsigned long long *__restrict__ fs_offsets, long long fs_mode
#define FS_TRACED(...) __VA_ARGS__

__device__ __forceinline__ unsigned long long fs_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// fs_clock reads the SM's cycle counter, %clock64, for the role records
// (docs/ROLES.md): about half a nanosecond a cycle where %globaltimer steps
// 32 ns, and comparable only within one SM, which is where all the roles
// of a block run. The worker places the cycles on %globaltimer's axis.
__device__ __forceinline__ unsigned long long fs_clock() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}

// fs_clock_after_bar reads %clock64 once the named barrier the thread has
// just waited on (bar.sync) has let its warp through. ptxas compiles
// bar.sync to BAR.SYNC.DEFER_BLOCKING, and the one instruction after it
// issues before the warp blocks: a clock read there stamps the warp's
// arrival at the barrier, not its release (bench/turns/turns.cu measured
// it on the H100 and the H200: ~1,000 cycles early). A load from shared
// memory, which the barrier orders, takes that slot; smem is any word of
// the block's shared memory, read and not used.
__device__ __forceinline__ unsigned long long fs_clock_after_bar(const void *smem) {
  [[maybe_unused]] unsigned v; // the load is what matters, not its value
  asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"((unsigned)__cvta_generic_to_shared(smem)) : "memory");
  return fs_clock();
}

__device__ __forceinline__ unsigned int fs_smid() {
  unsigned int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// fs_cursor walks one block's records through the trace buffer.
struct fs_cursor {
  unsigned char *rec; // the record being written, or null when not traced
  long long mode;
  unsigned long long t_start;
};

__device__ __forceinline__ fs_cursor fs_begin(unsigned char *trace, const unsigned long long *offsets,
                                              long long mode, unsigned int block) {
  fs_cursor c;
  unsigned long long off = offsets[block];
  c.rec = off == ~0ull ? nullptr : trace + off;
  c.mode = mode;
  c.t_start = 0;
  return c;
}

__device__ __forceinline__ float *fs_payload(const fs_cursor &c) {
  return reinterpret_cast<float *>(c.rec + sizeof(fs_record_header));
}

// fs_write_header fills the record header; one thread calls it.
__device__ __forceinline__ void fs_write_header(const fs_cursor &c, unsigned kind, unsigned bh, unsigned i, unsigned j,
                                                unsigned rows_valid, unsigned cols_valid,
                                                unsigned long long bytes_read, unsigned long long bytes_written) {
  fs_record_header h;
  h.kind = (uint8_t)(c.mode == FS_MODE_TIMING ? FS_KIND_TIMING : kind);
  h.role = 0;
  h.rows_valid = (uint16_t)rows_valid;
  h.cols_valid = (uint16_t)cols_valid;
  h.event = 0;
  h.bh = bh;
  h.i = i;
  h.j = j;
  h.sm = fs_smid();
  h.bytes_read = bytes_read;
  h.bytes_written = bytes_written;
  h.t_start = c.t_start;
  h.t_end = fs_globaltimer();
  *reinterpret_cast<fs_record_header *>(c.rec) = h;
}

// fs_probe measures what a timeline needs of this GPU: out[0] = %nsmid (the
// range of %smid), out[1] = the smallest step of %globaltimer seen in a busy
// loop (its resolution), out[2] = how many steps were seen. One thread runs it.
extern "C" __global__ void fs_probe(unsigned long long *out) {
  unsigned int n;
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(n));
  unsigned long long prev = fs_globaltimer(), step = ~0ull, steps = 0;
  for (int k = 0; k < 200000 && steps < 64; k++) {
    unsigned long long t = fs_globaltimer();
    if (t != prev) {
      step = min(step, t - prev);
      prev = t;
      steps++;
    }
  }
  out[0] = n;
  out[1] = step;
  out[2] = steps;
}

// fs_zero_padding clears the bytes between the end of the arrays and the
// next 8-byte boundary, which a decoder checks.
__device__ __forceinline__ void fs_zero_padding(const fs_cursor &c, unsigned floats, unsigned record_bytes) {
  for (unsigned b = sizeof(fs_record_header) + 4u * floats; b < record_bytes; b++) c.rec[b] = 0;
}

#else

#define FS_TRACE_PARAMS
#define FS_TRACED(...)

#endif // FS_TRACE

#endif // FLASHSTEP_INSTRUMENT_CUH
