"""Hold flashstep's backward kernels to PyTorch's autograd.

TestGPUBackwardDump (cmd/gpuworker, run with -grad-dump DIR on the GPU
machine) writes backward runs' inputs (Q, K, V, dO) and the gradients the
GPU's trace holds (dQ, dK, dV). This script recomputes the gradients with
torch.autograd through scaled_dot_product_attention, in float64, on the
same inputs, and holds each of the GPU's to them with the bound the mirror
is held to in CI (kernels.BackwardToleranceOf, in units of
kernels.GradSizesOf: the largest sum of absolute terms that makes an
element of the gradient; for a bf16 kernel D's term also counts what O's
rounding to bf16 may move it by, and the bound is 2^-7 more).

    python3 bench/backward/autograd.py DIR      (exit status 1 on a failure)
"""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(folder, name, bh, part, n, d):
    x = np.fromfile(f"{folder}/{name}_bh{bh}_{part}.f32", dtype="<f4")
    assert x.size == n * d, (name, part, x.size)
    return torch.from_numpy(x.astype(np.float64)).reshape(n, d)


def sizes(q, k, v, do, scale, causal, bf16):
    """GradSizesOf: the scale of each gradient's rounding."""
    s = (q @ k.T) * scale
    if causal:
        s = s.masked_fill(torch.triu(torch.ones_like(s, dtype=torch.bool), 1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = p @ v
    dp = do @ v.T
    delta = (do * o).sum(-1, keepdim=True)
    d_term = delta.abs() + ((do * o).abs().sum(-1, keepdim=True) if bf16 else 0)
    w = p * (dp.abs() + d_term) * scale
    max_s = s[torch.isfinite(s)].abs().max().item()
    return (w @ k.abs()).max().item(), (w.T @ q.abs()).max().item(), (p.T @ do.abs()).max().item(), max_s


def main(folder):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    runs = json.load(open(f"{folder}/manifest.json"))
    failed = 0
    print(f"{'run':40} {'bh':>2} {'dQ':>8} {'dK':>8} {'dV':>8} {'bound':>9}  (error / size; torch {torch.__version__}, {device})")
    for r in runs:
        n, d, scale, causal = r["N"], r["D"], r["Scale"], r["Causal"]
        for bh in range(r["Batch"] * r["Heads"]):
            q, k, v, do = (load(folder, r["Name"], bh, x, n, d) for x in ("q", "k", "v", "do"))
            gpu = [load(folder, r["Name"], bh, x, n, d) for x in ("dq", "dk", "dv")]
            qq, kk, vv = (x.to(device).requires_grad_() for x in (q, k, v))
            out = F.scaled_dot_product_attention(qq[None, None], kk[None, None], vv[None, None], is_causal=causal, scale=scale)
            out.backward(do.to(device)[None, None])
            ref = [x.grad.cpu() for x in (qq, kk, vv)]
            bf16 = r.get("BF16", False)
            sq, sk, sv, max_s = sizes(q, k, v, do, scale, causal, bf16)
            bound = 2.0 ** -17 * max(1.0, max_s / 16) + (2.0 ** -7 if bf16 else 0)
            errs = []
            for g, want, size in zip(gpu, ref, (sq, sk, sv)):
                diff = (g - want).abs().max().item()
                errs.append(diff / max(size, 1e-30) if not math.isnan(diff) and torch.isfinite(g).all() else float("nan"))
            ok = all(e <= bound for e in errs)  # NaN fails
            failed += not ok
            print(f"{r['Name']:40} {bh:2} {errs[0]:8.2e} {errs[1]:8.2e} {errs[2]:8.2e} {bound:9.2e}  {'ok' if ok else 'FAIL'}")
    print(f"{failed} failed" if failed else "every gradient within its bound")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
