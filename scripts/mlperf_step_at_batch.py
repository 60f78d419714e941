"""The model's engine step at an MLPerf row's own decoding batch, term by term, beside the measured TPOT.

    PYTHONPATH=src python scripts/mlperf_step_at_batch.py ROW_ID [ROW_ID ...]

For each Server or Interactive row (ids as `mlperf_validate --csv` writes them): the row's decoding batch by
Little's law (`mlperf_validate.little_batch`: tokens/s x median TPOT per instance), its measured median TPOT,
the model's mean step a decoding sequence sees there with the prompts it completes (`tpot_at_batch`), and the
decode-only pass at that batch (`StepModel.terms`, no prompt chunk): the weights' and chunks' memory seconds,
the KV read per attended (layer, token) pair, the GEMMs' and attention's compute seconds, the collectives and
the runtime's overheads (per step, layer and sequence), as `core.Pass` names them. A diagnosis (issue 29 item 3);
no prediction is changed. Rows of select or report families print validation figures at most.
"""
from __future__ import annotations

import sys

from membound.fidelity import mlperf_rows, mlperf_validate
from membound.serving.api import build


def main(argv: list[str]) -> int:
    rows, _ = mlperf_rows.load_rows()
    benches = mlperf_rows.load_benchmarks()
    by_id = {r.id: r for r in rows}
    for rid in argv:
        r = by_id[rid]
        bench = benches[r.benchmark]
        runtime = mlperf_rows.launched(mlperf_rows.runtime_of(r.engine, r.executor, r.round), r.launch, r.device)
        caps = mlperf_rows.row_limits(bench, r.engine, r.device, r.round, r.scenario, r.launch)
        for lay in mlperf_validate.row_layouts(bench, r.engine, r.device, r.round, r.quantization.weights,
                                               r.per_node, r.launch, r.domain):
            sm, sched, _ = build(bench.preset, r.device, prompt=bench.prompt, output=bench.output,
                                 quantization=r.quantization, runtime=runtime, n_chips=lay.chips, parallel=lay,
                                 scheduler=caps)
            b = mlperf_validate.little_batch(r.measured, lay.chips, r.tpot_p50_s)
            t = mlperf_validate.tpot_at_batch(sm, sched, bench, b)
            p = sm.terms(b)
            print(f"{rid} ({r.family}, {lay}): batch {b:,.0f}; TPOT measured {1e3 * r.tpot_p50_s:.1f} ms, model "
                  f"{1e3 * t:.1f} ms ({r.tpot_p50_s / t:.2f}x)")
            print("  decode-only pass (ms): " + ", ".join(
                f"{k} {1e3 * float(getattr(p, k)):.2f}" for k in ("mem", "comp", "comm", "over", "floor"))
                + f"; per attended pair (ns): kv {1e9 * float(p.kv):.3f}, attn {1e9 * float(p.attn):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
