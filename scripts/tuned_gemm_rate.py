"""The marginal GEMM rate of a published table of tuned GEMM timings (submissions.yaml `gemm_fraction`).

Reads either gradlib's CSV (columns M, N, K, soltimems: vLLM's ROCm GemmTuner, e.g. Dell's v4.1 MI300X
tuned_fp8_16_20240720.csv) or hipBLASLt bench lines (HIPBLASLT_TUNING_OVERRIDE_FILE: m, n, k in fields 5-7,
microseconds in field 34, e.g. AMD's v5.1 tuning_spx_1700_formatted.txt), sums a model's layer GEMMs at each
token count N the table times all of, and fits time = intercept + slope x N by least squares over N in
[--min-n, --max-n]. Prints the line, its rate (layer FLOPs per token / slope) as a share of --peak, and the rate at
a few token counts.

    python scripts/tuned_gemm_rate.py TABLE [--shapes 10240x8192,8192x8192,57344x8192,8192x28672] [--peak 2.6149e15]
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

LLAMA2_70B = "10240x8192,8192x8192,57344x8192,8192x28672"   # QKV, O, gate-up, down (M x K) at TP 1


def timings(path: Path) -> dict[tuple[int, int, int], float]:
    """{(M, N, K): seconds} of a gradlib CSV or a hipBLASLt bench table."""
    text = path.read_text()
    if text.startswith("M,N,K"):
        return {(int(r["M"]), int(r["N"]), int(r["K"])): float(r["soltimems"]) * 1e-3
                for r in csv.DictReader(text.splitlines())}
    out = {}
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) > 33:
            out[(int(f[4]), int(f[5]), int(f[6]))] = float(f[33]) * 1e-6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", type=Path)
    ap.add_argument("--shapes", default=LLAMA2_70B, help="the layer's GEMMs, M x K, comma-separated")
    ap.add_argument("--peak", type=float, default=2.6149e15, help="dense peak FLOP/s in the GEMMs' format (MI300X fp8)")
    ap.add_argument("--min-n", type=int, default=1)
    ap.add_argument("--max-n", type=int, default=4096)
    a = ap.parse_args()
    t = timings(a.table)
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    flops = 2.0 * sum(m * k for m, k in shapes)           # a token's FLOPs through the layer's GEMMs
    ns = sorted(n for n in {n for _, n, _ in t} if all((m, n, k) in t for m, k in shapes))
    n = np.array(ns, float)
    s = np.array([sum(t[(m, x, k)] for m, k in shapes) for x in ns])
    pick = (n >= a.min_n) & (n <= a.max_n)
    (b0, b1), *_ = np.linalg.lstsq(np.vstack([np.ones(pick.sum()), n[pick]]).T, s[pick], rcond=None)
    rms = float(np.sqrt(np.mean((s[pick] - b0 - b1 * n[pick]) ** 2)) / np.mean(s[pick]))
    print(f"{len(t)} shapes; {len(ns)} token counts time every layer GEMM; {int(pick.sum())} in [{a.min_n}, {a.max_n}]")
    print(f"line: {b0 * 1e6:.1f} us + {b1 * 1e6:.4f} us x N (rms {rms:.1%} of the mean)")
    print(f"marginal rate {flops / b1 / 1e12:.0f} TFLOP/s = {flops / b1 / a.peak:.3f} of the peak")
    for x in (64, 256, 464, 1024, 1536, 2048, ns[-1]):
        if x in ns:
            i = ns.index(x)
            print(f"  N {x:6d}: {flops * x / s[i] / a.peak:.3f} of the peak")


if __name__ == "__main__":
    main()
