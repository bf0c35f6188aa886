"""PyTorch's attention forward on the GPU machine, timed beside
bench/ladder/bench.cu in the same call (scripts/bench-gpu) and the same way
(bench/timing.cuh): before each timed call the L2 is flushed by reading a
256 MiB buffer and the GPU is held busy (about 1 ms) until the call is
queued behind the start event, so that the events time the GPU's work and
not Python's launch of it (docs/LADDER.md, "Read first": timed with the
GPU idle at the start event, cuDNN's forward read 4-9% slow). Each of
SDPA's FlashAttention-2, cuDNN and memory-efficient backends, and a naive
attention that writes S and P to device memory; bf16, B·N = 16384 tokens
and H·d = 2048 as FlashAttention's benchmarks take them, FLOPs 4·B·H·N²·d
(halved under a causal mask). Rows as JSON for scripts/ladder-table.py.

    python3 bench/ladder/sdpa_fwd.py --n 4096 --d 64 128 --iters 30 --json sdpa.json
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# Timed as bench/timing.cuh times the rungs: bench/sdpa_timing.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sdpa_timing import median_ms  # noqa: E402


def materialised(q, k, v, causal):
    """Attention the naive way: S and P written out whole."""
    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, device=q.device, dtype=torch.bool).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s.float(), dim=-1).to(q.dtype), v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="*", default=[4096])
    ap.add_argument("--d", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--causal", type=int, nargs="*", default=[0, 1])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print("B H N d causal | backend ms TFLOP/s ...")
    rows = []
    for d in args.d:
        for n in args.n:
            b, h = max(1, 16384 // n), 2048 // d
            for causal in map(bool, args.causal):
                q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
                row = {"B": b, "H": h, "N": n, "d": d, "causal": causal}
                for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                      ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), args.iters)
                        row[name] = {"ms": ms, "tflops": flops / ms / 1e9}
                    except Exception as ex:  # a backend may refuse a shape
                        row[name] = {"error": str(ex).splitlines()[0][:200]}
                try:
                    ms = median_ms(lambda: materialised(q, k, v, causal), max(3, args.iters // 4))
                    row["naive"] = {"ms": ms, "tflops": flops / ms / 1e9}
                except torch.OutOfMemoryError:
                    row["naive"] = {"error": "out of memory"}
                rows.append(row)
                cell = lambda r: ("%.3f %.0f" % (r["ms"], r["tflops"])) if "ms" in r else "ERR"
                print("%d %d %d %d %d | " % (b, h, n, d, causal) + " ".join("%s %s" % (k_, cell(row[k_])) for k_ in ("flash", "cudnn", "efficient", "naive")), flush=True)
                del q, k, v
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
