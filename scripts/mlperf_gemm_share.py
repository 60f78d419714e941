"""The share of the dense peak each MLPerf Offline group's weight GEMMs alone would need, beside the model's.

    PYTHONPATH=src python scripts/mlperf_gemm_share.py [--families H100,H200,GH200]

For every Offline row of the named accelerator families (default: the fit families of data/mlperf_split.csv;
a diagnosis of the fit rows, issue 29 item 2), grouped by family, benchmark, profile, round, executor and
weight format: the measured tokens/s per accelerator and the model's (mlperf_validate.predict), each as a
share of the row's compute ceiling (mlperf_validate.compute_ceiling: the dense peak in the row's format over
2 x active parameters x (prompt + beams x output) / output FLOPs an output token). A measured share is the
least share of the peak the row's GEMMs run at (attention, host work and anything else only raise it); the
model's share can exceed the engine's GEMM share only where its step is not compute-bound. Prints medians.
No prediction is changed.
"""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from membound.fidelity import mlperf_rows, mlperf_validate
from membound.fidelity.split import mlperf_roles


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fit = ",".join(f for f, role in mlperf_roles().items() if role == "fit")
    ap.add_argument("--families", default=fit, help=f"accelerator families, comma-separated (default {fit})")
    a = ap.parse_args(argv)
    fams = set(a.families.split(","))
    rows, _ = mlperf_rows.load_rows()
    benches = mlperf_rows.load_benchmarks()
    mine = [r for r in rows if r.scenario == "Offline" and r.family in fams and r.engine != mlperf_rows.CPU_ENGINE]
    mlperf_validate.predict(mine)
    groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for r in mine:
        ceiling = mlperf_validate.compute_ceiling(r, benches[r.benchmark])
        pred = r.pred.get("tok_s_per_accel", float("nan"))
        groups[(r.family, r.benchmark, r.device, r.round, r.engine, r.executor, r.quantization.weights)].append(
            (r.measured / ceiling, pred / ceiling))
    print("family benchmark profile round engine executor weights: rows, measured share / model share of the "
          "dense peak (medians)")
    for key, v in sorted(groups.items()):
        meas = statistics.median(x for x, _ in v)
        model = statistics.median(y for _, y in v)
        print(f"  {' '.join(key)}: {len(v):3d}  {100 * meas:5.1f}% / {100 * model:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
