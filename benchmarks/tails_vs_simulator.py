"""The latency tail model (membound.serving.tails) against the iteration-level simulator on MLPerf's
served workloads: p50 and p99 of TTFT and TPOT under Poisson arrivals at several loads.

Each configuration is the engine instance `membound validate --mlperf` predicts for the first row of a
benchmark, accelerator family and round (its layout, formats, software generation and the benchmark's
length distributions from workloads.yaml). At each load (a share of the instance's Offline saturation)
the tail model's percentiles are printed beside the simulator's, run on the same engine with seeded
Poisson arrivals and lengths drawn from the same distributions (the first tenth of the requests, the
warm-up, left out). The model and the simulator share the step physics, so the comparison isolates
the queueing, interference and length-spread terms of the tail model. Not a timed benchmark.

--measured: instead, the load generator's measured p50 and p99 of the select families' Server and
Interactive rows (data/mlperf_split.csv: forms are chosen on them, so these are validation figures; the
CSV's latency columns, rounds v4.1 to v6.0; the median over the rows of a benchmark, round and scenario)
beside the model's at the same load (the rows' rate over the round's measured Offline rate, applied to
the model's saturation: the Offline error taken out) and at the rate the rows ran.

    python benchmarks/tails_vs_simulator.py [--requests 2000] [--seeds 3] [--loads 0.3,0.5,0.8,0.9]
    python benchmarks/tails_vs_simulator.py --measured
    python benchmarks/tails_vs_simulator.py --scenario Interactive [--only llama2-70b,llama3.1-405b]

--scenario: the engine of that scenario's first row instead (its submission's caps, `mlperf_validate.predict`'s
engine: workloads.yaml engine_limits, e.g. B200 llama2-70b Interactive 768 sequences / 768 tokens a step), at the
loads given and at the median rate that scenario's rows of the configuration ran (the load generator's own
p50 / p99 printed beside it where the CSV has them: the step physics is then in the comparison too).
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from membound.fidelity import mlperf_rows as mrows
from membound.planning.rate_search import saturation
from membound.serving.api import build
from membound.serving.simulator import simulate
from membound.serving.solver import solve
from membound.serving.tails import tails

# (benchmark, accelerator family, round): long widely spread prompts (405B), short ones (8B, 70B), MoE
CONFIGS = (("llama3.1-405b", "B200", "v5.1"), ("llama3.1-405b", "H200", "v5.1"), ("llama2-70b", "H200", "v4.1"),
           ("llama3.1-8b", "B200", "v5.1"), ("mixtral-8x7b", "H100", "v4.1"))
# Interactive's operating points (--scenario Interactive): the select family's 70B and 405B, the fit family's 70B
SCENARIO_CONFIGS = (("llama2-70b", "B200", "v5.1"), ("llama3.1-405b", "B200", "v5.1"), ("llama2-70b", "H200", "v5.1"))


def instance(bench_name: str, family: str, rnd: str):
    """The engine (step model, scheduler), the benchmark and its Offline saturation (requests/s) as
    mlperf_validate.predict builds them for the first such row: of its instance layouts
    (mlperf_rows.instance_layouts), the one with the most Offline output tokens/s per accelerator."""
    rows, _ = mrows.load_rows()
    row = next(r for r in rows if (r.benchmark, r.family, r.round) == (bench_name, family, rnd))
    bench = mrows.load_benchmarks()[bench_name]
    runtime = mrows.runtime_of(row.engine, row.executor, row.round)
    best = None
    for lay in mrows.instance_layouts(bench, row.engine, row.device, row.round, row.quantization.weights, row.per_node):
        sm, sched, _ = build(bench.preset, row.device, prompt=bench.prompt, output=bench.output,
                             quantization=row.quantization, runtime=runtime, n_chips=lay.chips, parallel=lay)
        cap = saturation(sm, sched, bench.prompt, bench.output, bench.beams)
        if best is None or cap / lay.chips > best[0] / best[1].chips:
            best = (cap, lay, sm, sched)
    cap, lay, sm, sched = best
    return sm, sched, bench, cap, lay


def scenario_instance(bench_name: str, family: str, rnd: str, scenario: str):
    """The engine `mlperf_validate.predict` runs for the first `scenario` row of a benchmark, family and round
    (the submission's launch and layout, the scenario's published caps: `mlperf_rows.row_limits`), the
    benchmark, that engine's saturation (requests/s), its layout and the rows themselves."""
    rows, _ = mrows.load_rows()
    mine = [r for r in rows if (r.benchmark, r.family, r.round, r.scenario) == (bench_name, family, rnd, scenario)]
    row = mine[0]
    bench = mrows.load_benchmarks()[bench_name]
    runtime = mrows.launched(mrows.runtime_of(row.engine, row.executor, row.round), row.launch, row.device)
    lay = mrows.row_layouts(bench, row.engine, row.device, row.round, row.quantization.weights, row.per_node,
                            row.launch, row.domain)[0]
    caps = mrows.row_limits(bench, row.engine, row.device, row.round, scenario, row.launch)
    sm, sched, _ = build(bench.preset, row.device, prompt=bench.prompt, output=bench.output,
                         quantization=row.quantization, runtime=runtime, n_chips=lay.chips, parallel=lay, scheduler=caps)
    return sm, sched, bench, saturation(sm, sched, bench.prompt, bench.output, bench.beams), lay, mine


def measured_percentiles(rows) -> str:
    """The load generator's median over `rows` of their p50 / p99 TTFT (s) and TPOT (ms), where the CSV has them."""
    import pandas as pd
    df = pd.read_csv(mrows.mlperf_csv())
    got = df[df.apply(lambda x: any(r.id.startswith(f"{x['round']}/{x['submitter']}/{x['system_name']}/{x['benchmark']}/"
                                                    f"{x['scenario']}") for r in rows), axis=1) & df.ttft_p99_ms.notna()]
    if got.empty:
        return "measured: none"
    return (f"measured ({len(got)} rows) TTFT p50 {got.ttft_p50_ms.median() / 1e3:.3g}, p99 {got.ttft_p99_ms.median() / 1e3:.3g}"
            f"  |  TPOT p50 {got.tpot_p50_ms.median():.3g}, p99 {got.tpot_p99_ms.median():.3g}")


def simulated(sm, sched, bench, rate: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and TPOT (seconds) of the simulator's requests after the first tenth."""
    rng = np.random.default_rng(seed)
    S, T = bench.prompt.sample(rng, n), bench.output.sample(rng, n)
    tr = simulate(sm, sched, S, T, arrivals=np.cumsum(rng.exponential(1.0 / rate, n)))
    keep = np.arange(n) >= n // 10
    return (tr.first - tr.arrive)[keep], ((tr.done - tr.first) / np.maximum(T - 1, 1))[keep]


def spread(sims: list, i: int, q: float, scale: float) -> str:
    """The range over the seeds of quantile q of the simulated TTFT (i = 0) or TPOT (i = 1), scaled."""
    v = [scale * float(np.quantile(s[i], q)) for s in sims]
    return f"{min(v):.3g}..{max(v):.3g}"


def _at(sm, sched, bench, rate: float) -> str:
    """The model's TTFT and TPOT p50 / p99 at `rate` requests/s, as text."""
    try:
        st = solve(sm, sched, bench.prompt.mean, bench.output.mean, arrival_rate=np.array([rate]))
        t = tails(sm, sched, st, rate, bench.prompt, bench.output, beams=bench.beams)
    except Exception:
        return "beyond the model's capacity"
    return f"{t.ttft[0]:.3g} / {t.ttft[2]:.3g} s, {1e3 * t.tpot[0]:.3g} / {1e3 * t.tpot[2]:.3g} ms"


def measured() -> None:
    """The model's p50 / p99 beside the select families' measured Server and Interactive percentiles:
    at the rate the rows ran (an instance's share of it), and at the same share of the model's own
    saturation as the rows' rate is of the same round's measured Offline rate (the Offline error taken
    out: what the tails alone give at that load)."""
    import pandas as pd
    from membound.fidelity.split import mlperf_roles
    select = sorted(f for f, role in mlperf_roles().items() if role == "select")
    df = pd.read_csv(mrows.mlperf_csv())
    df = df[(df.division == "closed") & df.accel_family.isin(select) & df.model.isin(list(mrows.load_benchmarks()))]
    per_accel = df.samples_per_s / df.n_accelerators
    print("model vs measured: TTFT p50 / p99 in s, TPOT p50 / p99 in ms (validation: select families "
          f"{', '.join(select)}); model at the measured rate, and at the measured load (the rows' rate over "
          "the round's measured Offline rate) of its own saturation")
    for (bench_name, family, rnd), rows in df.groupby(["model", "accel_family", "round"]):
        lat = rows[rows.scenario.isin(["Server", "Interactive"]) & rows.ttft_p99_ms.notna()]
        offline = per_accel[rows[rows.scenario == "Offline"].index]
        if lat.empty:
            continue
        try:
            sm, sched, bench, cap, lay = instance(bench_name, family, rnd)
        except Exception as e:          # a row the validation cannot predict either
            print(f"  {bench_name} {family} {rnd}: {e}")
            continue
        for sc, g in lat.groupby("scenario"):
            if sc in bench.mtp:         # the rules' speculative decoding: the tails of the plain engine do not apply
                continue
            rate = float(per_accel[g.index].median()) * lay.chips
            load = float(per_accel[g.index].median() / offline.median()) if len(offline) else math.nan
            same = _at(sm, sched, bench, load * cap) if math.isfinite(load) else "no Offline row"
            print(f"  {bench_name} {family} {rnd} {sc} ({len(g)} rows): measured "
                  f"{g.ttft_p50_ms.median() / 1e3:.3g} / {g.ttft_p99_ms.median() / 1e3:.3g} s, "
                  f"{g.tpot_p50_ms.median():.3g} / {g.tpot_p99_ms.median():.3g} ms at {load:.2f} of Offline; model "
                  f"{same} there; {_at(sm, sched, bench, rate)} at the measured rate ({rate / cap:.2f} of its "
                  "saturation)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--loads", default="0.3,0.5,0.8,0.9")
    ap.add_argument("--only", default="", help="benchmark names to run, comma-separated")
    ap.add_argument("--measured", action="store_true", help="the model at the select families' measured rates")
    ap.add_argument("--scenario", default="", help="Server or Interactive: that scenario's engine (its published caps) "
                    "at the loads and at the rate its rows ran")
    a = ap.parse_args(argv)
    if a.measured:
        measured()
        return 0
    loads = [float(x) for x in a.loads.split(",")]
    print("p50 / p99, model vs simulator (seeds' range); TTFT in s, TPOT in ms; load = share of "
          + (f"the {a.scenario} engine's saturation" if a.scenario else "Offline saturation"))
    for bench_name, family, rnd in SCENARIO_CONFIGS if a.scenario else CONFIGS:
        if a.only and bench_name not in a.only.split(","):
            continue
        if a.scenario:
            sm, sched, bench, cap, lay, mine = scenario_instance(bench_name, family, rnd, a.scenario)
            ran = float(np.median([r.measured for r in mine])) * lay.chips / bench.output.mean
            at = loads + [ran / cap]
            print(f"\n{bench_name} on {family} ({rnd}) {a.scenario}, {lay}, {sched.max_running:g} sequences / "
                  f"{sched.token_budget:g} tokens a step: saturation {cap:.3g} requests/s; its rows ran {ran:.3g} "
                  f"(load {ran / cap:.2f}); {measured_percentiles(mine)}")
        else:
            sm, sched, bench, cap, lay = instance(bench_name, family, rnd)
            at = loads
            print(f"\n{bench_name} on {family} ({rnd}), {lay}: saturation {cap:.3g} requests/s")
        for load in at:
            rate = load * cap
            try:
                st = solve(sm, sched, bench.prompt.mean, bench.output.mean, arrival_rate=np.array([rate]))
            except Exception as e:      # beyond the open loop's capacity
                print(f"  load {load:.2f}: {e}")
                continue
            t = tails(sm, sched, st, rate, bench.prompt, bench.output, beams=bench.beams)
            sims = [simulated(sm, sched, bench, rate, a.requests, seed) for seed in range(a.seeds)]

            print(f"  load {load:.2f}  TTFT p50 {t.ttft[0]:.3g} vs {spread(sims, 0, 0.5, 1.0)}, p99 {t.ttft[2]:.3g} "
                  f"vs {spread(sims, 0, 0.99, 1.0)}  |  TPOT p50 {1e3 * t.tpot[0]:.3g} vs {spread(sims, 1, 0.5, 1e3)}, "
                  f"p99 {1e3 * t.tpot[2]:.3g} vs {spread(sims, 1, 0.99, 1e3)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
