"""The fit family's step at its own batches, as shipped (B) and with form G1's fp8 rate priced (a diagnosis).

    PYTHONPATH=src python scripts/mlperf_step_lines.py

For the fit families' (data/mlperf_split.csv) Server and Interactive rows of the C++ engines (tensorrt-llm-cpp) in
v5.1 and later that measured a TPOT: each row's decoding batch by Little's law, its measured median TPOT and the
model's TPOT at that batch (`mlperf_validate.tpot_at_batch`) and at its load, then the step lines
(`mlperf_validate.step_lines`). G1 is generations.yaml's `fp8_gemm_rate` (its value for v5.1 on, measured and not
priced; data/reference/mlperf/README.md "Hopper's fp8 GEMM rate as v5.1's fitted constant"). No prediction is
changed; every row is a fit row (in-sample figures).
"""
from __future__ import annotations

import copy
import math

from membound.fidelity import mlperf_rows as mr
from membound.fidelity import mlperf_validate as mv
from membound.fidelity.split import mlperf_role

NAME, ROUNDS = "tensorrt-llm-cpp", ("v5.1", "v6.0", "v6.1")


def generations(form: str) -> dict:
    """generations.yaml as shipped (B), or with v5.1's fp8 rate (G1: the `fp8_gemm_rate` block's value)."""
    gens = copy.deepcopy(mr.load_generations())
    if form == "G1":
        g = gens[NAME]
        g["fit"]["fp8_rate"] = {"prior": g["fp8_gemm_rate"]["prior"], "from": "v5.1"}
        g["rounds"]["v5.1"] = {"fp8_rate": {"value": g["fp8_gemm_rate"]["value"]}}
    return gens


def main() -> int:
    rows, _ = mr.load_rows()
    mine = [r for r in rows if mlperf_role(r.family) == "fit" and r.scenario != "Offline" and r.engine == "tensorrt-llm"
            and r.executor == "cpp" and r.round in ROUNDS and math.isfinite(r.tpot_p50_s)]
    for form in ("B", "G1"):
        gens = generations(form)
        runtimes = {("tensorrt-llm", "cpp", r): mr.generation_runtime(NAME, r, None, gens) for r in ROUNDS}
        got = [r.fresh() for r in mine]
        mv.predict(got, runtimes=runtimes, at_load=True)
        for r in got:
            b = mv.little_batch(r.measured, r.tp, r.tpot_p50_s)
            at_batch, at_load = (1e3 * r.pred.get(k, math.nan) for k in ("tpot_at_batch_s", "tpot_p50_s"))
            print(f"{form} {r.id}: batch {b:,.0f}, TPOT measured {1e3 * r.tpot_p50_s:.1f} ms, model at the batch "
                  f"{at_batch:.1f}, at the load {at_load:.1f}")
        print("\n".join(mv.step_lines(got)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
