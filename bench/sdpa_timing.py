"""How the Python benches time a PyTorch call, as bench/timing.cuh times a
kernel from C++: before each timed call the L2 is flushed by reading 256
MiB (a read leaves no dirty lines to be written back inside the timing),
and the GPU is held busy (about 1 ms) until the call is queued behind the
start event, so that the events time the GPU's work and not Python's launch
of it (docs/DECODE.md, runs bd and bl; docs/LADDER.md, "Read first").
FLASHSTEP_HOLD_SCALE=k holds k times as long. Used by
bench/ladder/sdpa_fwd.py and bench/backward/sdpa_bwd.py, which put this
folder on their path."""
import os

import torch



def hold_scale():
    """FLASHSTEP_HOLD_SCALE, a whole number from 1 to 1000 (bench/timing.cuh's)."""
    raw = os.environ.get("FLASHSTEP_HOLD_SCALE", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise SystemExit('FLASHSTEP_HOLD_SCALE must be a whole number from 1 to 1000, got "%s"' % raw)
    return int(raw)


HOLD_CYCLES = 2_000_000 * hold_scale()
_scratch = None


def before_timing():
    global _scratch
    if _scratch is None:
        _scratch = torch.zeros(64 << 20, dtype=torch.float32, device="cuda")  # 256 MiB
        torch.cuda.synchronize()
    _scratch.sum()
    torch.cuda._sleep(HOLD_CYCLES)


def median_ms(call, iters):
    """call's median time in ms over iters timings, after three unrecorded
    calls, each timed alone after before_timing."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        before_timing()
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]
