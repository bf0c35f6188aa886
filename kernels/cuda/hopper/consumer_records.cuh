// The records of a warp-specialised Hopper block's consumer warpgroups
// (flash3_ws.cu, flash3_pingpong.cu, flash3_overlap.cu): a step's record
// once its O is complete, and the epilogue's. Two consumer warpgroups
// write one record: each its own rows of O, then (where they meet) a
// barrier of the consumers alone before thread 0 writes the header. Roles
// mode writes consumer 0's record without meeting (docs/ROLES.md), which is
// what meet says. Traced builds only.
#ifndef FLASHSTEP_CONSUMER_RECORDS_CUH
#define FLASHSTEP_CONSUMER_RECORDS_CUH

#include "hopper_tile.cuh"
#include "warpspec.cuh"

namespace hopper {

#ifdef FS_TRACE
// finish_step_record writes step j's O (full traces), then its header, and
// moves the cursor on by stepBytes.
template <int NC, int DI, int BR, int BC, int D>
__device__ __forceinline__ void finish_step_record(fs_cursor &cur, bool full, bool meet, const float (&o)[DI * 4],
                                                   const Rows &w, int tid, int bh, int qtile, int j, int rowsValid,
                                                   int N, unsigned stepBytes) {
  if (!cur.rec) return;
  if (full) {
    trace_o<DI, BR, BC, D>(fs_payload(cur), o, w, N);
    if (tid == 0) fs_zero_padding(cur, fs_flash_step_o(BR, BC, D, N) + BR * D, stepBytes);
  }
  if (meet) consumers_sync<NC>();
  if (tid == 0) {
    const int colsValid = min(BC, N - j * BC);
    fs_write_header(cur, FS_KIND_FLASH_STEP, bh, qtile, j, rowsValid, colsValid,
                    step_read_bytes(j, colsValid, rowsValid, D), 0);
  }
  cur.rec += stepBytes;
}

// finish_epilogue_record writes the epilogue's header, its O and LSE
// written already by epilogue(): O in bf16 and the LSE leave for device
// memory.
template <int NC, int BR, int BC, int D>
__device__ __forceinline__ void finish_epilogue_record(fs_cursor &cur, bool full, bool meet, int tid, int bh,
                                                       int qtile, int rowsValid, int N, unsigned epiBytes) {
  if (!cur.rec) return;
  if (full && tid == 0) fs_zero_padding(cur, fs_epilogue_lse(BR, BC, D, N) + BR, epiBytes);
  if (meet) consumers_sync<NC>();
  if (tid == 0)
    fs_write_header(cur, FS_KIND_EPILOGUE, bh, qtile, FS_NO_TILE, rowsValid, 0, 0,
                    (unsigned long long)rowsValid * D * 2 + (unsigned long long)rowsValid * 4);
}
#endif

} // namespace hopper

#endif // FLASHSTEP_CONSUMER_RECORDS_CUH
