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

    python3 bench/decode/sdpa_decode.py --json out.json
"""
import argparse
import json

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="*", default=[1, 8, 64])
    ap.add_argument("--keys", type=int, nargs="*", default=[4096, 16384, 32768, 131072])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, nargs="*", default=[8, 32])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    free, _ = torch.cuda.mem_get_info()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print("%5s %7s %4s %4s %10s %10s %10s %10s %10s" % ("B", "N", "Hq", "Hkv", "cache GB", "flash ms", "flash TB/s", "cudnn ms", "cudnn TB/s"))
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
                k = torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16)
                v = torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16)
                for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hkv != hq), args.iters)
                        row[name] = {"ms": ms, "tb_per_s": cache / ms / 1e9}
                    except Exception as ex:  # a backend may not take a shape
                        row[name] = {"error": str(ex).splitlines()[0][:200]}
                del q, k, v
                torch.cuda.empty_cache()
                rows.append(row)
                cell = lambda r: ("%10.3f %10.3f" % (r["ms"], r["tb_per_s"])) if "ms" in r else "%21s" % "refused"
                print("%5d %7d %4d %4d %10.2f %s %s" % (b, n, hq, hkv, cache / 1e9, cell(row["flash"]), cell(row["cudnn"])), flush=True)
    if args.json:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
