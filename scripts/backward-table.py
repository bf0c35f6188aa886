"""Merge bench/backward/bench.cu's output with sdpa_bwd.py's JSON of the same
run into one table: each backward beside SDPA's backward backends on its
shape, with its ratio to SDPA's FlashAttention-2. Used by
scripts/bench-backward."""
import json
import re
import sys


def main(bench_path, sdpa_path, json_path=None, meta=None):
    sdpa = {(r["d"], r["causal"]): r for r in json.load(open(sdpa_path))}
    rows = []
    print("%-30s %5s %6s %8s %9s %11s %11s %7s %s" % ("kernel", "d", "causal", "ms", "TFLOP/s", "SDPA flash", "SDPA cuDNN", "ratio", "check"))
    for line in open(bench_path):
        if line.startswith("#") or line.startswith("variant"):
            continue
        f = line.split()
        name, ms, tflops, check = f[0], float(f[1]), float(f[2]), " ".join(f[6:])
        d = int(re.search(r"_d(\d+)", name).group(1))
        causal = name.endswith("_causal")
        ref = sdpa.get((d, causal), {})
        flash = ref.get("flash", {}).get("tflops")
        cudnn = ref.get("cudnn", {}).get("tflops")
        ratio = "%.2f" % (tflops / flash) if flash else "-"
        print("%-30s %5d %6s %8.3f %9.1f %11.1f %11.1f %7s %s" % (name, d, "yes" if causal else "no", ms, tflops, flash or 0, cudnn or 0, ratio, check))
        rows.append({"kernel": name, "d": d, "causal": causal, "ms": ms, "tflops": tflops, "check": check,
                     "errors": {"dq": float(f[3]), "dk": float(f[4]), "dv": float(f[5])},
                     "B": ref.get("B"), "H": ref.get("H"), "N": ref.get("N"),
                     "sdpa_flash_tflops": flash, "sdpa_cudnn_tflops": cudnn})
    if json_path:
        json.dump(dict(meta or {}, rows=rows), open(json_path, "w"), indent=1)


if __name__ == "__main__":
    meta = dict(a.split("=", 1) for a in sys.argv[4:])
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None, meta)
