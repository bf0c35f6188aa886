"""PyTorch's attention as decoding runs it, on the GPU machine, beside
bench/decode/bandwidth.cu in the same call (scripts/bench-decode): one new
token's query per sequence (B, Hq, 1, d) against a KV cache of N keys (B,
Hkv, N, d), bf16, through scaled_dot_product_attention with each backend
(flash = FlashAttention-2, cudnn), timed by CUDA events (median). The
figure that matters is bytes of K and V read per second: a one-token query
does 4·Hq·N·d FLOPs against 2·2·Hkv·N·d bytes of cache, far below any
GPU's ridge point, so the cache's stream from device memory is the whole
cost. With Hkv < Hq (grouped-query attention) each K/V head serves Hq/Hkv
query heads (enable_gqa); the bytes counted are the cache's, once.

With --read-lib (bench/decode/read_all_lib.cu built as a shared library,
which scripts/bench-decode does), the read-only kernel of decode.cu runs
here too, on the same cache (K and V one allocation), and the two
backends and it take turns call by call: each backend's bytes a second
then has the device's read rate beside it, measured in the same state of
the device (its clocks move between processes, docs/DECODE.md, run bb),
and its ratio to it compares with decode.cu's ratios for the rungs. Each
call is timed as decode.cu times the rungs: the L2 flushed first
(flushL2, bench/timing.cuh), then the GPU held busy until the call is
queued (holdGPU), so
that the events time the GPU's work on a cache not in L2, not Python's
launch of it.

    python3 bench/decode/sdpa_decode.py --json out.json [--read-lib libreadall.so]
"""
import argparse
import ctypes
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


# Cycles the GPU is held busy before a timing's start event (about 1 ms
# on an H200): SDPA's launch from Python takes tens of microseconds, more
# for the FlashAttention backend at batch 64 (run bl found 200 µs short
# there), and with the GPU idle that time would fall between the events.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sdpa_timing import hold_scale  # noqa: E402  (the scale checked as bench/timing.cuh checks it)

HOLD_CYCLES = 2_000_000 * hold_scale()


def timed_ms(lib, fn):
    """One call of fn timed by CUDA events, the L2 flushed and the GPU held
    busy (flushL2, holdGPU: bench/timing.cuh) until fn's work is queued
    behind the start event, so that the events time the GPU's work and
    not the host's launch."""
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    # The L2 flushed first, as decode.cu does (bench/timing.cuh's flushL2).
    if lib.flush_l2_launch(stream) != 0 or lib.hold_gpu_launch(ctypes.c_longlong(HOLD_CYCLES), stream) != 0:
        raise RuntimeError("flush_l2_launch or hold_gpu_launch failed")
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def interleaved_medians(lib, fns, iters):
    """Each of fns once in turn, iters rounds after three unrecorded ones,
    each call timed alone (timed_ms); each one's median in ms. A function
    is (backend or None, fn): SDPA's backend is chosen outside the timing."""
    times = [[] for _ in fns]
    for k in range(-3, iters):
        for w, (backend, fn) in enumerate(fns):
            if backend is None:
                ms = timed_ms(lib, fn)
            else:
                with sdpa_kernel(backend):
                    ms = timed_ms(lib, fn)
            if k >= 0:
                times[w].append(ms)
    meds = []
    for t in times:
        t.sort()
        meds.append(t[len(t) // 2])
    return meds


def read_only(lib, kv, sink):
    """decode.cu's read-only kernel over the cache kv, on torch's stream."""
    blocks = torch.cuda.get_device_properties(0).multi_processor_count * 4
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def run():
        err = lib.read_all_launch(ctypes.c_void_p(kv.data_ptr()), ctypes.c_ulonglong(kv.numel() * kv.element_size()),
                                  ctypes.c_void_p(sink.data_ptr()), blocks, stream)
        if err != 0:
            raise RuntimeError("read_all_launch: CUDA error %d" % err)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="*", default=[1, 8, 64])
    ap.add_argument("--keys", type=int, nargs="*", default=[4096, 16384, 32768, 131072])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, nargs="*", default=[8, 32])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    ap.add_argument("--read-lib", default="", help="read_all_lib.cu as a shared library: time the read-only kernel beside SDPA")
    args = ap.parse_args()
    if not args.read_lib:
        # Without the library there is no flush and no hold: timings would
        # hold Python's launch (docs/DECODE.md, run bd). scripts/bench-decode builds it.
        ap.error("--read-lib is required: build bench/decode/read_all_lib.cu (scripts/bench-decode does)")
    lib = ctypes.CDLL(args.read_lib)
    sink = torch.zeros(torch.cuda.get_device_properties(0).multi_processor_count * 4, dtype=torch.int32, device="cuda")
    free, _ = torch.cuda.mem_get_info()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    head = ("B", "N", "Hq", "Hkv", "cache GB", "flash ms", "flash TB/s", "cudnn ms", "cudnn TB/s")
    if lib:
        head += ("read ms", "read TB/s", "flash÷read", "cudnn÷read")
        print("# with decode.cu's read-only kernel on the same cache; the three take turns call by call")
    print(("%5s %7s %4s %4s %10s %10s %10s %10s %10s" + (" %10s %10s %10s %10s" if lib else "")) % head)
    rows = []
    d, hq = args.d, args.heads
    for hkv in args.kv_heads:
        for b in args.batch:
            for n in args.keys:
                cache = 2 * b * hkv * n * d * 2  # K and V, bf16
                row = {"B": b, "N": n, "Hq": hq, "Hkv": hkv, "d": d, "cache_bytes": cache}
                if cache > 0.8 * free:
                    row["skipped"] = "the cache does not fit this GPU's free memory"
                    rows.append(row)
                    print("%5d %7d %4d %4d %10.2f %s" % (b, n, hq, hkv, cache / 1e9, "skipped: does not fit"))
                    continue
                q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
                kv = torch.randn(2, b, hkv, n, d, device="cuda", dtype=torch.bfloat16)  # one allocation, as decode.cu's
                k, v = kv[0], kv[1]
                backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
                if lib:
                    # A backend that refuses the shape is left out of the turns.
                    fns, names = [], []
                    call = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hkv != hq)
                    for name, backend in backends:
                        try:
                            with sdpa_kernel(backend):
                                call()
                            fns.append((backend, call))
                            names.append(name)
                        except Exception as ex:
                            row[name] = {"error": str(ex).splitlines()[0][:200]}
                    meds = interleaved_medians(lib, fns + [(None, read_only(lib, kv, sink))], args.iters)
                    row["read"] = {"ms": meds[-1], "tb_per_s": cache / meds[-1] / 1e9}
                    for name, ms in zip(names, meds):
                        row[name] = {"ms": ms, "tb_per_s": cache / ms / 1e9, "of_read": meds[-1] / ms}
                else:
                    for name, backend in backends:
                        try:
                            with sdpa_kernel(backend):
                                ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hkv != hq), args.iters)
                            row[name] = {"ms": ms, "tb_per_s": cache / ms / 1e9}
                        except Exception as ex:  # a backend may not take a shape
                            row[name] = {"error": str(ex).splitlines()[0][:200]}
                del q, k, v, kv
                torch.cuda.empty_cache()
                rows.append(row)
                cell = lambda r: ("%10.3f %10.3f" % (r["ms"], r["tb_per_s"])) if "ms" in r else "%21s" % "refused"
                line = "%5d %7d %4d %4d %10.2f %s %s" % (b, n, hq, hkv, cache / 1e9, cell(row["flash"]), cell(row["cudnn"]))
                if lib:
                    ratio = lambda r: ("%10.3f" % r["of_read"]) if "of_read" in r else "%10s" % "-"
                    line += " %s %s %s" % (cell(row["read"]), ratio(row["flash"]), ratio(row["cudnn"]))
                print(line, flush=True)
    if args.json:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
