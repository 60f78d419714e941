"""Validation report: predict every usable reference measurement and report the error per
category, split into calibration rows and held-out rows (see calibrate.py for the split).

    python -m membound.validate [--csv rows.csv] [--plot out.png] [--reference DIR]

Error of a row = predicted / measured - 1 (for latencies, ITL and TTFT, the same ratio of the
times). Per category: rows, median and 90th percentile of |error| over all rows, over
calibration rows and over held-out rows, and the worst rows.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .progress import track
from .calibrate import is_calibration
from .reference import SPECIALISED, load_reference, predict, reference_dir


@dataclass(frozen=True)
class RowResult:
    id: str
    category: str
    metric: str
    model: str
    hardware: str
    runtime: str
    measured: float
    predicted: float
    calibration: bool
    note: str

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def _stats(errs) -> tuple:
    if not errs:
        return (0, float("nan"), float("nan"))
    a = np.abs(np.asarray(errs))
    return (len(a), float(np.median(a)), float(np.percentile(a, 90)))


def validation_report(path=None) -> dict:
    """{'rows': [RowResult], 'categories': {name: {...}}, 'skipped': [(id, metric, reason)]}."""
    ref = load_reference(path)
    rows = []
    for sc in track(ref.scenarios, "validate", unit=" rows"):
        try:
            p = float(predict(sc))
        except Exception as e:   # a scenario membound refuses is reported, not hidden
            ref.skipped.append((sc.id, sc.metric, f"prediction failed: {type(e).__name__}: {e}"))
            continue
        rows.append(RowResult(sc.id, sc.category, sc.metric, sc.model, sc.hardware, sc.runtime,
                              sc.measured, p, is_calibration(sc), sc.note))
    cats = {}
    for name in dict.fromkeys(r.category for r in rows):
        rs = [r for r in rows if r.category == name]
        n, med, p90 = _stats([r.error for r in rs])
        nc, medc, _ = _stats([r.error for r in rs if r.calibration])
        nh, medh, p90h = _stats([r.error for r in rs if not r.calibration])
        worst = sorted(rs, key=lambda r: -abs(r.error))[:3]
        cats[name] = dict(rows=n, median=med, p90=p90, calibration_rows=nc, calibration_median=medc,
                          holdout_rows=nh, holdout_median=medh, holdout_p90=p90h,
                          worst=[(r.id, r.error) for r in worst])
    return dict(rows=rows, categories=cats, skipped=ref.skipped,
                source=str(reference_dir(path) / "measurements.csv"))


def format_report(rep: dict) -> str:
    out = [f"membound validation against {rep['source']}",
           "error = predicted/measured - 1; |error| medians and 90th percentiles in %", "",
           f"{'category':40s} {'rows':>4s} {'med':>6s} {'p90':>6s} | {'cal':>3s} {'med':>6s} | "
           f"{'hold':>4s} {'med':>6s} {'p90':>6s} | worst"]
    for name, c in rep["categories"].items():
        worst = ", ".join(f"{i} {100 * e:+.0f}%" for i, e in c["worst"])
        out.append(f"{name:40s} {c['rows']:4d} {100 * c['median']:6.1f} {100 * c['p90']:6.1f} | "
                   f"{c['calibration_rows']:3d} {100 * c['calibration_median']:6.1f} | "
                   f"{c['holdout_rows']:4d} {100 * c['holdout_median']:6.1f} {100 * c['holdout_p90']:6.1f} | {worst}")
    out += ["", "Specialised hardware (batch 1 per-user tok/s) and H100/H200 tensor-parallel figures:",
            f"{'id':9s} {'model':15s} {'hardware':16s} {'measured':>9s} {'predicted':>10s} {'error':>7s}  set"]
    for r in rep["rows"]:
        if r.hardware in SPECIALISED or (r.hardware in ("h100-sxm", "h200") and r.category.startswith("TensorRT")
                                         and r.id in ("trt-051", "trt-111", "trt-058", "trt-118")):
            out.append(f"{r.id:9s} {r.model:15s} {r.hardware:16s} {r.measured:9.0f} {r.predicted:10.0f} "
                       f"{100 * r.error:+6.0f}%  {'calibration' if r.calibration else 'held out'}"
                       + (f"  [{r.note}]" if r.note else ""))
    from collections import Counter
    reasons = Counter(reason.split("(")[0].split(":")[0].strip() for _, _, reason in rep["skipped"])
    out += ["", f"Predicted {len(rep['rows'])} rows; skipped {len(rep['skipped'])}:"]
    out += [f"  {n:4d}  {reason}" for reason, n in reasons.most_common()]
    return "\n".join(out)


def write_csv(rep: dict, path) -> None:
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "category", "metric", "model", "hardware", "runtime", "measured", "predicted",
                    "error", "set", "note"])
        for r in rep["rows"]:
            w.writerow([r.id, r.category, r.metric, r.model, r.hardware, r.runtime, r.measured,
                        f"{r.predicted:.6g}", f"{r.error:.4f}", "calibration" if r.calibration else "holdout", r.note])


def plot(rep: dict, path) -> None:
    """Predicted vs measured, log-log, one colour per category (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 7))
    for name in rep["categories"]:
        rs = [r for r in rep["rows"] if r.category == name]
        ax.scatter([r.measured for r in rs], [r.predicted for r in rs], s=14, label=name, alpha=0.8)
    lo = min(min(r.measured, r.predicted) for r in rep["rows"])
    hi = max(max(r.measured, r.predicted) for r in rep["rows"])
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="measured", ylabel="membound",
           title="membound vs published measurements (units per metric)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv

    def opt(flag):
        return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None

    rep = validation_report(opt("--reference"))
    print(format_report(rep))
    from .serve_validate import section      # served workloads: their own categories (serve's module)
    print("\n" + section())
    if opt("--csv"):
        write_csv(rep, opt("--csv"))
    if opt("--plot"):
        plot(rep, opt("--plot"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
