"""PyTorch's attention backward on the GPU machine, timed beside
bench/backward/bench.cu in the same call (scripts/bench-backward):
scaled_dot_product_attention's backward with each backend (flash =
FlashAttention-2, cudnn), bf16 inputs, the forward run once and its graph
kept, the backward alone timed by CUDA events (median). FLOPs counted as
2.5 x the forward's 4*B*H*N*N*d, halved when causal, as FlashAttention's
benchmarks count them. B*N = 16384, H*d = 2048.

    python3 bench/backward/sdpa_bwd.py --n 4096 --json out.json
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


# Timed as bench/timing.cuh times the rungs: bench/sdpa_timing.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sdpa_timing import median_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    rows = []
    n = args.n
    for d in args.d:
        b, h = max(1, 16384 // n), 2048 // d
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            do = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
            flops = 2.5 * 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            row = {"B": b, "H": h, "N": n, "d": d, "causal": causal}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        ms = median_ms(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), args.iters)
                    row[name] = {"ms": ms, "tflops": flops / ms / 1e9}
                except Exception as ex:  # a backend may not support a shape
                    row[name] = {"error": str(ex).splitlines()[0]}
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
