"""MLPerf Inference LLM results (reference/mlperf/mlperf_llm.csv) predicted with the served physics.

Each row is a system running a benchmark under MLPerf's load generator (see the README beside the
CSV). It maps to served workloads of one engine instance:
- **Offline**: every query queued at once: the engine's saturation throughput
  (`max_rate.saturation`, the steady state with the queue never empty);
- **Server / Interactive**: Poisson arrivals; the result is the highest rate whose p99 TTFT and
  p99 TPOT (gptj: p99 end-to-end time) meet the benchmark's limits (`max_rate.search`,
  percentiles from `membound.tails`), as completed output tokens per second.
- **Disaggregated launches** (a submission's context and generation pools, submissions.yaml: NVIDIA's GB200
  x72 Interactive rows, its v6.0 llama2-70b and 405b Server rows): the highest Poisson rate over both pools
  within the limits (`rate_search.search_disaggregated`, serving.disagg's open loop), tokens per accelerator
  over both.
- **deepseek-r1 Interactive** runs the rules' speculative decoding, EAGLE-style with the model's
  MTP head, 3 draft steps (workloads.yaml `speculative`; `speculative.mtp`).
- **gptj** decodes with beam search of 4 beams: each request is 4 sequences after one prefill,
  sharing the prompt's KV (`serving.solve(beams=...)`); its tokens are the request's.
The prediction is output tokens/s per accelerator: the instance's, over its chips.

The workload rules of this data set (lengths, instance layouts, scheduler caps, formats, engines,
executors, software generations, vLLM submissions' launches, CPU-only systems, cards of several GPUs)
and the rows used or skipped live with the loader in membound.fidelity.mlperf_rows (never in
prediction code).

The report gives each figure per role of the accelerator family (data/mlperf_split.csv): in-sample
(fit: the generations' constants are fitted on their Offline rows), validation (select: forms were
chosen on them) and report (never tuned on).

    python -m membound.fidelity.mlperf_validate [--reference PATH] [--csv rows.csv] [--fit PATH] [--by-family] [--at-load]
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError, MemboundError
from .reference import SkipRow
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from .split import mlperf_role
from ..planning.rate_search import MaxRate, saturation, search, search_disaggregated
from ..serving.disagg import Pool, build_pools
from ..serving.api import build
from ..serving.scheduler import Scheduler, filled
from ..serving.solver import open_loop_rates, solve
from ..serving.step import StepModel
from ..serving.lengths import Length, longest_of
from ..serving.tails import tails
from .fitter import Param, fit
from .mlperf_rows import (CPU_ENGINE, GENERATION_FIT, SCENARIOS, Benchmark, MLPerfRow, cpu_layout, cpu_part,
                          fitted_param, generation_runtime, generations_path, launched, load_benchmarks, load_rows,
                          mlperf_csv, row_layouts, row_limits, runtime_of, shipped_generations, static_batch,
                          timed_share, round_key)
from ..base.safeio import csv_frame, check_output_path
import yaml
from ..physics.speculative import mtp


def predict(rows: list[MLPerfRow], benchmarks: dict[str, Benchmark] | None = None,
            runtimes: dict | None = None, at_load: bool = False) -> list[MLPerfRow]:
    """Fill row.pred ({"tok_s_per_accel": ...} or {"error": ...}): one engine build per
    configuration, its saturation for Offline and the rate search per latency limits. runtimes:
    {(engine, executor, round): Runtime} to use instead of `runtime_of`'s (fits). at_load: a Server or
    Interactive row's pred is instead {"tpot_p50_s": the median TPOT at the row's own measured load
    (`tpot_at_load`), "offline_tok_s_per_accel": the engine's saturation}."""
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks()
    groups: dict[tuple, list[MLPerfRow]] = {}
    for r in rows:
        groups.setdefault(r.key, []).append(r)
    for (bname, device, engine, executor, rnd, q, per_node, _cores, launch, cpu_launch, domain), members in groups.items():
        bench = benchmarks[bname]
        if engine == CPU_ENGINE and cpu_launch >= 0:
            _predict_cpu(members, bench, bench.cpu_engine[cpu_launch])
            continue
        try:
            runtime = launched((runtimes or {}).get((engine, executor, rnd)) or runtime_of(engine, executor, rnd), launch,
                               device)
            offline_caps = row_limits(bench, engine, device, rnd, "Offline", launch)
            offline_decode = decoded(bench, static_batch(bench, engine, device, rnd, "Offline", launch))
            best = None
            for lay in row_layouts(bench, engine, device, rnd, q.weights, per_node, launch, domain):
                try:
                    sm, sched, _ = build(bench.preset, device, prompt=bench.prompt, output=bench.output,
                                         quantization=q, runtime=runtime, n_chips=lay.chips, parallel=lay,
                                         scheduler=offline_caps)
                    per_accel = saturation(sm, sched, bench.prompt, offline_decode, bench.beams) * bench.output.mean \
                        / lay.chips
                except MemboundError:
                    continue
                if best is None or per_accel > best[0]:
                    best = (per_accel, lay, sm, sched)
            if best is None:
                raise InvalidInputError("layout", per_node, f"a tensor-parallel group of {device} that serves "
                                        f"{bench.preset}")
            offline, lay, sm, sched = best
            tp = lay.chips
            done: dict[str, dict] = {"Offline": {"tok_s_per_accel": offline}}
            engines: dict[str, tuple[StepModel, Scheduler]] = {}
            for m in members:
                m.tp, m.layout = tp, str(lay)
                ctx, gen = (launch.context, launch.generation) if launch is not None else (None, None)
                if m.scenario != "Offline" and ctx is not None and gen is not None and not at_load:
                    m.pred, m.tp, m.layout = _disaggregated(bench, device, q, runtime, ctx, gen, m.scenario)
                    continue
                if m.scenario != "Offline" and m.scenario not in engines:
                    eng, eng_sched = sm, sched
                    caps = row_limits(bench, engine, device, rnd, m.scenario, launch)
                    spec = mtp(bench.preset, bench.mtp[m.scenario]) if m.scenario in bench.mtp else None
                    # the scenario's published caps; the rules' MTP drafts; else the engine's own caps, not Offline's
                    if caps is not None or spec is not None or offline_caps is not None:
                        eng, eng_sched, _ = build(bench.preset, device, prompt=bench.prompt, output=bench.output,
                                                  quantization=q, runtime=runtime, n_chips=lay.chips, parallel=lay,
                                                  scheduler=caps, speculative=spec)
                    engines[m.scenario] = (eng, eng_sched)
                if at_load and m.scenario != "Offline":
                    m.pred = {"tpot_p50_s": tpot_at_load(*engines[m.scenario], bench, m.measured * tp / bench.output.mean),
                              "offline_tok_s_per_accel": offline,
                              "tpot_at_batch_s": tpot_at_batch(*engines[m.scenario], bench,
                                                               little_batch(m.measured, tp, m.tpot_p50_s))}
                    continue
                if m.scenario not in done:
                    decode = decoded(bench, static_batch(bench, engine, device, rnd, m.scenario, launch))
                    mr = search(*engines[m.scenario], bench.prompt, decode, bench.limits[m.scenario], bench.beams)
                    done[m.scenario] = _searched(mr, mr.rate * bench.output.mean / tp)
                m.pred = done[m.scenario]
        except (MemboundError, SkipRow) as e:
            for m in members:
                m.pred = {"error": str(e)}
    return rows


def _disaggregated(bench: Benchmark, device: str, q: Any, runtime: Any, ctx: Pool, gen: Pool, scenario: str
                   ) -> tuple[dict, int, str]:
    """(pred, accelerators, layout) of a Server or Interactive row whose launch runs a context pool `ctx` and a
    generation pool `gen` (submissions.yaml, `mlperf_rows.launch_pool`): the open-loop rate search over both
    (`rate_search.search_disaggregated`), the rules' MTP drafts on both (the drafter prefills too),
    tokens per accelerator over both pools (at_load: the aggregated instance's step, as before)."""
    spec = mtp(bench.preset, bench.mtp[scenario]) if scenario in bench.mtp else None
    pools, _ = build_pools(bench.preset, device, ctx, gen, prompt=bench.prompt, output=bench.output, quantization=q,
                           runtime=runtime, speculative=spec)
    mr = search_disaggregated(pools, bench.prompt, bench.output, bench.limits[scenario])
    layout = f"context {ctx.workers} x {ctx.parallel}, generation {gen.workers} x {gen.parallel}"
    return _searched(mr, mr.output_tok_s_per_chip), pools.chips, layout


def decoded(bench: Benchmark, batch: int) -> Length:
    """The decode lengths of the benchmark's requests: their own outputs, or under static batching of `batch`
    queries (`mlperf_rows.static_batch`: v3.1's GPT-J harness) the longest output of their batch
    (`lengths.longest_of`: the batch decodes, every sequence in it, until its longest request ends, and returns
    its requests then), of which only their own output tokens count (the predictions count bench.output.mean a
    request). Prompts are their own: Offline sorts the query set by input length before batching (enable_sort),
    so a batch's prompts are alike and its padding (GPTCore::stageHostBuffers pads to the batch's longest) small;
    in Server, padding every batch to its longest of `batch` prompts was measured and not kept
    (generations.yaml tensorrt-llm-cpp static_batching)."""
    return longest_of(bench.output, batch) if batch else bench.output


def _searched(mr: MaxRate, tok_s_per_accel: float) -> dict:
    """A Server or Interactive row's prediction: the rate search's result `mr` (its p99 TTFT and
    TPOT, the limit that binds) at `tok_s_per_accel` output tokens/s per accelerator."""
    return {"tok_s_per_accel": tok_s_per_accel, "ttft_p99_s": mr.ttft[2], "tpot_p99_s": mr.tpot[2],
            "binding": mr.binding or "saturation"}


def _predict_cpu(members: list[MLPerfRow], bench: Benchmark, engine: dict) -> None:
    """Fill the predictions of CPU-only rows whose engine's launch is known (`cpu_launch_of`): each
    scenario's instances (`cpu_layout`) each get their cores' share of the socket's compute and their
    share of its memory (`cpu_part`: `Hardware.share`), computing at the share that gives the engine's own
    prefill time where the launch's entry states it (`timed_share`), else at the profile's fraction, serve
    with the launch's caps on the `device` runtime, and the socket's tokens/s are an instance's times the
    instances."""
    for m in members:
        try:
            lay = cpu_layout(engine, m.scenario, m.device, m.cores, m.per_node)
            part = cpu_part(m.device, lay, m.cores)
            sched = Scheduler(max_running=lay.max_running, token_budget=lay.token_budget,
                              mixed_steps=bool(engine.get("mixed_steps", True)))
            sm, sched, _ = build(bench.preset, part, prompt=bench.prompt, output=bench.output,
                                 quantization=m.quantization, runtime=CPU_ENGINE, scheduler=sched)
            share = timed_share(engine, m.scenario, lay.cores, part.achievable.compute_fraction, sm.prefill_token_s)
            if share != part.achievable.compute_fraction:      # the engine's own prefill time (workloads.yaml)
                sm, sched, _ = build(bench.preset, cpu_part(m.device, lay, m.cores, share), prompt=bench.prompt,
                                     output=bench.output, quantization=m.quantization, runtime=CPU_ENGINE,
                                     scheduler=sched)
            m.tp, m.layout = 1, f"{lay.instances:g} instances of {lay.cores:g} cores per socket"
            if m.scenario == "Offline":
                m.pred = {"tok_s_per_accel": lay.instances * bench.output.mean
                          * saturation(sm, sched, bench.prompt, bench.output, bench.beams)}
            else:
                mr = search(sm, sched, bench.prompt, bench.output, bench.limits[m.scenario], bench.beams)
                m.pred = _searched(mr, lay.instances * mr.output_tok_s)
        except (MemboundError, SkipRow) as e:
            m.pred = {"error": str(e)}


def tpot_at_load(sm: StepModel, sched: Scheduler, bench: Benchmark, rate: float) -> float:
    """The median TPOT (seconds) of a built engine under Poisson arrivals at `rate` requests/s (the
    open-loop steady state and its tails, `membound.tails`, as the rate search prices each rate);
    inf where the rate is beyond the engine's capacity."""
    try:
        st = solve(sm, sched, bench.prompt.mean, bench.output.mean, arrival_rate=np.array([rate]), beams=bench.beams)
        return float(tails(sm, sched, st, rate, bench.prompt, bench.output, beams=bench.beams).tpot[0])
    except MemboundError:
        return math.inf


def little_batch(tok_s_per_accel: float, chips: int, tpot_s: float) -> float:
    """The sequences an engine instance decodes on average while a row ran, by Little's law: each decoding
    sequence emits one token every TPOT, so the instance's output tokens/s (`tok_s_per_accel` x its `chips`)
    x the mean TPOT (the row's median, `tpot_s`: the load generator publishes both, and they agree within a
    few per cent on the rows read) is the number decoding. nan where the TPOT is not measured."""
    return tok_s_per_accel * chips * tpot_s


def tpot_at_batch(sm: StepModel, sched: Scheduler, bench: Benchmark, batch: float) -> float:
    """Seconds per output token of a built engine with `batch` sequences decoding (capped at its scheduler's
    batch): the open loop's mean step beside batch - 1 others, the prefill of the prompts it completes
    included (`serving.solver.open_loop_rates`, the figure the tails' occupancy model reads). Set beside a
    row's measured median TPOT at its own `little_batch`, it prices the step where the engine ran, apart from
    the load that the rate search turns it into (`at_load`). nan where the batch is not finite or below one."""
    if not (math.isfinite(batch) and batch >= 1.0):
        return math.nan
    others = min(batch, float(filled(sched.max_running))) - 1.0
    return float(open_loop_rates(sm, sched, bench.prompt.mean, bench.output.mean, np.array([others]), bench.beams)[0][0])


def compute_ceiling(r: MLPerfRow, bench: Benchmark) -> float:
    """The most output tokens/s per accelerator physics allows row `r` under its benchmark's assumed
    mean lengths: the chip's dense peak FLOP/s in the row's weight format (else fp8, else bf16) over
    the FLOPs of a request's output token, 2 x active parameters x (prompt + beams x output) / output
    (weights' GEMMs only: attention would lower it further)."""
    hw, m = load_hardware(r.device), load_model(bench.preset)
    fmt = {"nvfp4": "fp4", "mxfp4": "fp4"}.get(r.quantization.weights, r.quantization.weights)
    peak = next((hw.compute_flops[f] for f in (fmt, "fp8", "bf16") if f in hw.compute_flops), math.inf)
    out = bench.output.mean
    return peak * out / (2.0 * m.active_params * (bench.prompt.mean + bench.beams * out))


def refuted(rows: list[MLPerfRow], benchmarks: dict[str, Benchmark] | None = None) -> dict[str, int]:
    """{benchmark: how many of `rows`' Offline rows beat its compute ceiling}: the benchmark's assumed
    lengths are refuted by physics (DESIGN, rules of honest fitting: such rows are set aside, not
    bent to), so none of its rows can inform an engine constant."""
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks()
    out: dict[str, int] = {}
    for r in rows:
        if r.scenario == "Offline" and r.engine != CPU_ENGINE and r.measured > compute_ceiling(r, benchmarks[r.benchmark]):
            out[r.benchmark] = out.get(r.benchmark, 0) + 1
    return out


def fit_generation(rows: list[MLPerfRow], name: str, rnd: str, families=GENERATION_FIT,
                   benchmarks: dict[str, Benchmark] | None = None, generations: dict[str, dict] | None = None):
    """The fitter's report (membound.fitter.fit) of the fitted constant (`fitted_param`) of generation `name` in round
    `rnd` on the Offline rows of `families` that run it, from the prior's middle (a cold fit: the
    generation's constants without any round's fit); the rows of benchmarks whose assumed lengths
    the families' rows of any round refute (`refuted`) are set aside. None where the rows left span
    fewer than two chips."""
    gens = shipped_generations() if generations is None else generations
    engine, executor = gens[name]["engine"], gens[name]["executor"]
    ours = [r for r in rows if r.family in families]
    aside = refuted(ours, benchmarks)
    mine = [r.fresh() for r in ours if r.engine == engine and r.executor == executor and r.round == rnd
            and r.scenario == "Offline" and r.benchmark not in aside]
    if len({r.device for r in mine}) < 2:
        return None
    param = fitted_param(gens[name], rnd)
    lo, hi = (float(x) for x in gens[name]["fit"][param]["prior"])
    cold = without(gens[name], param)

    def residuals(p: dict) -> np.ndarray:
        rt = generation_runtime(name, rnd, {param: p[param]}, {name: cold})
        predict(mine, benchmarks, runtimes={(engine, executor, rnd): rt})
        return np.array([math.log(max(r.pred.get("tok_s_per_accel", 1e-9), 1e-9) / r.measured) for r in mine])
    start = math.sqrt(lo * hi)           # the prior's geometric middle
    return fit(residuals, [Param(param, lo, hi, start, log=True)], rows=[r.id for r in mine])


def without(g: dict, param: str) -> dict:
    """Generation `g` cold for a fit of `param`: no round's fit of `param` (nor the at-bound record); the
    rounds' fits of its other constants stand (a round that fits another constant runs them: v5.1's fp8
    rate is fitted beside v4.1's per-sequence cost)."""
    rounds = {r: {k: v for k, v in fits.items() if k != param} for r, fits in (g.get("rounds") or {}).items()}
    return {**{k: v for k, v in g.items() if k != "rounds"}, "rounds": {r: f for r, f in rounds.items() if f}}


def fit_all(rows: list[MLPerfRow], generations: dict[str, dict] | None = None) -> dict[tuple[str, str], Any]:
    """{(generation, round): (fit report, the chips of its rows)} of every generation and round with
    fit rows on two chips, round by round: an interior fit stands for the later rounds' fits of the
    generation's other constants (`without`; a fit of one constant alone never reads its own)."""
    gens = copy.deepcopy(shipped_generations() if generations is None else generations)
    out = {}
    for name, g in gens.items():
        for rnd in sorted({r.round for r in rows if r.engine == g["engine"] and r.executor == g["executor"]},
                          key=round_key):
            rep = fit_generation(rows, name, rnd, generations=gens)
            if rep is not None:
                ids = set(rep.rows)
                out[(name, rnd)] = (rep, sorted({r.device for r in rows if r.id in ids}))
                param = fitted_param(g, rnd)
                if not rep.at_bounds:
                    g.setdefault("rounds", {}).setdefault(rnd, {})[param] = {"value": float(f"{float(rep.params[param]):.4g}")}
    return out


def with_fits(reports: dict[tuple[str, str], Any], generations: dict[str, dict] | None = None,
              aside: dict[str, int] | None = None) -> dict:
    """generations.yaml's document with each round's fit written in: its value, unit, prior,
    status and the rows it was fitted on; a fit on a bound of its prior is missing physics and is
    listed under `at_bound` instead (the round keeps the generation's own value, the engine's).
    `set_aside` names the benchmarks whose rows no fit used (`refuted`) and why."""
    gens = copy.deepcopy(shipped_generations() if generations is None else generations)
    for g in gens.values():
        g["rounds"], g["at_bound"] = {}, {}
        g["set_aside"] = {b: f"{n} Offline rows of the fit families beat the compute ceiling under its assumed "
                             f"lengths (mlperf_validate.compute_ceiling): the lengths are refuted, its rows "
                             f"inform no constant" for b, n in sorted((aside or {}).items())}
    for (name, rnd), (rep, chips) in sorted(reports.items(), key=lambda kv: (kv[0][0], round_key(kv[0][1]))):
        param = fitted_param(gens[name], rnd)
        prior = gens[name]["fit"][param]
        value = float(rep.params[param])
        entry = {"value": float(f"{value:.4g}"), "unit": prior["unit"], "prior": list(prior["prior"]), "status": "fitted",
                 "fitted_on": f"{len(rep.rows)} Offline rows of the fit families "
                 f"({', '.join(GENERATION_FIT)}) in {rnd}", "chips": list(chips),
                 "median_abs_error": float(f"{np.median(np.abs(np.expm1(np.array(rep.residuals)))):.3f}")}
        if rep.at_bounds:
            gens[name]["at_bound"][rnd] = {**entry, "status": "at a bound of the prior: missing physics, not used"}
        else:
            gens[name]["rounds"].setdefault(rnd, {})[param] = entry
    return gens


def by_family(rows: list[MLPerfRow], generations: dict[str, dict] | None = None) -> list[tuple[str, str, dict, dict]]:
    """Each accelerator family of a generation held out in turn: (round, family, held out, in
    sample) summaries of its rows, predicted with the round's constant refitted cold on the other
    families' Offline rows (held out) or on all families' (in sample); a refit without two chips
    leaves the generation's own value."""
    gens = shipped_generations() if generations is None else generations
    out = []
    for name, g in gens.items():
        engine, executor = g["engine"], g["executor"]
        for rnd in sorted({r.round for r in rows if r.engine == engine and r.executor == executor}):
            fams = sorted({r.family for r in rows if r.engine == engine and r.executor == executor and r.round == rnd})
            every = fit_generation(rows, name, rnd, families=fams, generations=gens)
            for fam in fams:
                mine = [r for r in rows if r.engine == engine and r.executor == executor and r.round == rnd
                        and r.family == fam]
                figs = []
                for rep in (fit_generation(rows, name, rnd, families=[f for f in fams if f != fam],
                                           generations=gens), every):
                    copy_rows = [r.fresh() for r in mine]
                    param = fitted_param(g, rnd)
                    override = {} if rep is None else {param: rep.params[param]}
                    rt = generation_runtime(name, rnd, override, {name: without(g, param)})
                    predict(copy_rows, runtimes={(engine, executor, rnd): rt})
                    figs.append({sc: summary([r for r in copy_rows if r.scenario == sc]) for sc in SCENARIOS})
                out.append((rnd, fam, figs[0], figs[1]))
    return out


def at_load(rows: list[MLPerfRow], benchmarks: dict[str, Benchmark] | None = None) -> str:
    """Measured over predicted median TPOT of the Server and Interactive rows that measured one, per
    scenario x role x accelerator family x benchmark (1: right; above 1: the model's TPOT is too short):
    - at each row's own load (`predict(at_load=True)`): the step below saturation that the rate search
      prices. Rows whose load is not below the model's saturation are counted apart (there the model has
      no TPOT);
    - at each row's own decoding batch (`little_batch`, `tpot_at_batch`), every measured row: the model's
      step where the engine ran. The load turns a step too short at the batch into a TPOT far shorter at
      the load (the model's batch at that load is smaller, so its step shorter still); this column says how
      much of the first ratio is the step itself;
    then the step as a line in the batch, measured and modelled (`step_lines`). CPU-only rows are left out."""
    mine = [r.fresh() for r in rows if r.scenario != "Offline" and r.engine != CPU_ENGINE and math.isfinite(r.tpot_p50_s)]
    predict(mine, benchmarks, at_load=True)
    lines = ["median TPOT, measured / predicted (1 = right): at each row's own load (rows at or beyond the model's "
             "saturation apart), and at its own decoding batch (Little's law: tokens/s x TPOT per instance):"]
    keys = sorted({(r.scenario, mlperf_role(r.family), r.family, r.benchmark) for r in mine})
    for sc, role, fam, bench in keys:
        grp = [r for r in mine if (r.scenario, mlperf_role(r.family), r.family, r.benchmark) == (sc, role, fam, bench)]
        inside = [r for r in grp if r.measured < r.pred.get("offline_tok_s_per_accel", 0.0)
                  and math.isfinite(r.pred.get("tpot_p50_s", math.inf))]
        ratio = np.median([r.tpot_p50_s / r.pred["tpot_p50_s"] for r in inside]) if inside else math.nan
        stepped = [r for r in grp if math.isfinite(r.pred.get("tpot_at_batch_s", math.nan))]
        step = np.median([r.tpot_p50_s / r.pred["tpot_at_batch_s"] for r in stepped]) if stepped else math.nan
        batch = np.median([little_batch(r.measured, r.tp, r.tpot_p50_s) for r in stepped]) if stepped else math.nan
        lines.append(f"  {sc:<11} {role:<6} {fam:<14} {bench:<14} {len(inside):>3} rows  {ratio:6.2f}"
                     f"   ({len(grp) - len(inside)} at or beyond saturation);  at the batch {len(stepped):>3} rows"
                     f"  {step:6.2f}  (batch {batch:,.0f})")
    return "\n".join(lines + step_lines(mine))


def step_line(b1: float, t1: float, b2: float, t2: float) -> tuple[float, float]:
    """(intercept, slope) of the line through two (decoding batch, seconds per output token) points: the
    step's seconds at no batch and per sequence more. InvalidInputError where the batches are equal."""
    if b1 == b2:
        raise InvalidInputError("batches", (b1, b2), "two different decoding batches (a line needs two points)")
    slope = (t2 - t1) / (b2 - b1)
    return t1 - slope * b1, slope


def step_lines(rows: list[MLPerfRow]) -> list[str]:
    """The step as a line in the decoding batch, measured and modelled, from the systems that ran a benchmark
    in both Server and Interactive on one layout (rows predicted `at_load`): each scenario's median Little
    batch and median TPOT make two points, the model's step at the same batches two more (`step_line`); the
    medians over a round x family x benchmark's systems. Pairs whose batches are within a quarter of each
    other are left out (no line to read)."""
    pairs: dict[tuple, dict[str, list[MLPerfRow]]] = {}
    for r in rows:
        if math.isfinite(r.pred.get("tpot_at_batch_s", math.nan)):
            system = r.id.rsplit("/", 2)[0]
            pairs.setdefault((r.round, r.family, r.benchmark, system, r.layout), {}).setdefault(r.scenario, []).append(r)
    lines: dict[tuple, list[tuple[float, ...]]] = {}
    for (rnd, fam, bench, _, _), got in pairs.items():
        if set(got) != {"Server", "Interactive"}:
            continue
        pts = [(float(np.median([little_batch(r.measured, r.tp, r.tpot_p50_s) for r in rs])),
                float(np.median([r.tpot_p50_s for r in rs])), float(np.median([r.pred["tpot_at_batch_s"] for r in rs])))
               for rs in (got["Interactive"], got["Server"])]
        (b1, t1, m1), (b2, t2, m2) = pts
        if abs(b2 - b1) < 0.25 * max(b1, b2):
            continue
        lines.setdefault((rnd, fam, bench), []).append((*step_line(b1, t1, b2, t2), *step_line(b1, m1, b2, m2), b1, b2))
    out = ["the step as a line in the decoding batch (systems that ran Server and Interactive on one layout; medians): "
           "measured intercept ms, slope us a sequence | model's at the same batches | batches Interactive / Server"]
    for (rnd, fam, bench), v in sorted(lines.items()):
        a = np.median(np.array(v), axis=0)
        out.append(f"  {rnd:<5} {fam:<14} {bench:<14} {len(v):>2} systems  {1e3 * a[0]:6.1f} {1e6 * a[1]:7.1f} | "
                   f"{1e3 * a[2]:6.1f} {1e6 * a[3]:7.1f} | {a[4]:,.0f} / {a[5]:,.0f}")
    return out


ROLES = {"fit": "in-sample (fit)", "select": "validation (select)", "report": "report"}


def errors(rows: list[MLPerfRow]) -> np.ndarray:
    """pred / measured - 1 of the predicted rows."""
    return np.array([r.pred["tok_s_per_accel"] / r.measured - 1.0 for r in rows if "tok_s_per_accel" in r.pred])


def summary(rows: list[MLPerfRow]) -> dict:
    """Rows, predicted, median |error| and median signed error."""
    e = errors(rows)
    return {"rows": len(rows), "predicted": int(e.size),
            "median_abs": float(np.median(np.abs(e))) if e.size else math.nan,
            "median": float(np.median(e)) if e.size else math.nan}


def _line(name: str, rows: list[MLPerfRow]) -> str:
    s = summary(rows)
    return (f"  {name:<44} {s['predicted']:>4}/{s['rows']:<4} median |error| {100 * s['median_abs']:5.1f}%"
            f"  (signed {100 * s['median']:+6.1f}%)")


def report(rows: list[MLPerfRow], skipped: list, source=None) -> str:
    """Median |error| of output tokens/s per accelerator per scenario, then per benchmark,
    accelerator family, engine and round; refusals and skipped rows with their reasons."""
    lines = ["MLPerf Inference (closed division): median |error| of output tokens/s per accelerator",
             f"file: {mlperf_csv(source)}", ""]
    for sc in SCENARIOS:
        lines.append(_line(sc, [r for r in rows if r.scenario == sc]))
    lines += ["", "by scenario x role of the accelerator family (data/mlperf_split.csv):"]
    for sc in SCENARIOS:
        for role in ROLES:
            lines.append(_line(f"{sc:<11} {ROLES[role]}", [r for r in rows if r.scenario == sc
                                                            and mlperf_role(r.family) == role]))
    for title, attr in (("benchmark", "benchmark"), ("accelerator family", "family"), ("engine", "engine"),
                        ("round", "round")):
        lines += ["", f"by scenario x {title}:"]
        for sc in SCENARIOS:
            for v in sorted({getattr(r, attr) for r in rows if r.scenario == sc}):
                lines.append(_line(f"{sc:<11} {v}", [r for r in rows if r.scenario == sc and getattr(r, attr) == v]))
    refused = [r for r in rows if "error" in r.pred]
    total = len(rows) + len(skipped)
    ours = len(rows) + sum(1 for s in skipped if s[2:] and s[2])
    lines += ["", f"coverage: {len(rows) - len(refused)} of {total} rows predicted; {len(refused)} refused by the "
              f"physics, {len(skipped)} skipped; of the {ours} closed-division rows of presets membound ships, "
              f"{100 * (len(rows) - len(refused)) / max(ours, 1):.1f}% predicted"]
    for r in refused[:5]:
        lines.append(f"  refused {r.id}: {r.pred['error'][:160]}")
    reasons: dict[str, int] = {}
    for _, why, *_ in skipped:
        reasons[why] = reasons.get(why, 0) + 1
    lines.append("skipped: " + "; ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda t: -t[1])))
    return "\n".join(lines)


def section(path=None) -> str:
    """The MLPerf report as text (for `membound validate --mlperf [--reference PATH]`)."""
    rows, skipped = load_rows(path)
    predict(rows)
    return report(rows, skipped, source=path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.mlperf_validate", description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=None, metavar="PATH",
                    help="an MLPerf CSV of mlperf_llm.csv's schema, or a folder holding mlperf/mlperf_llm.csv "
                         "(default: the copy shipped with membound)")
    ap.add_argument("--csv", help="write one line per row with its prediction")
    ap.add_argument("--fit", metavar="PATH", help="fit each generation's constant per round (its `fit` entry, on "
                    "that round's Offline rows of the fit families) and write generations.yaml with the fits to PATH")
    ap.add_argument("--at-load", action="store_true",
                    help="also the median TPOT each Server/Interactive row measured against the model's at the row's own load")
    ap.add_argument("--by-family", action="store_true",
                    help="also each accelerator family held out in turn (cold refits), beside in-sample figures")
    a = ap.parse_args(argv)
    try:
        if a.csv:      # checked before the work (issue 31: every output path first)
            check_output_path(a.csv, "--csv", (".csv",))
        rows, skipped = load_rows(a.reference)
    except MemboundError as e:
        ap.error(str(e))
    if a.fit:
        fits = fit_all(rows)
        for (name, rnd), (rep, chips) in fits.items():
            print(f"{name} {rnd} on {', '.join(chips)}: {rep.summary()}")
        header = "".join(line for line in generations_path().read_text().splitlines(keepends=True)
                         if line.startswith("#"))
        aside = refuted([r for r in rows if r.family in GENERATION_FIT])
        doc = with_fits(fits, aside=aside)
        Path(a.fit).write_text(header + yaml.safe_dump({"generations": doc}, sort_keys=False, width=110))
        return 0
    if a.by_family:
        for rnd, fam, held, ins in by_family(rows):
            print(f"{rnd} {fam:<14} " + "  ".join(
                f"{sc} {held[sc]['predicted']:>3} held out {100 * held[sc]['median_abs']:5.1f}% / in sample "
                f"{100 * ins[sc]['median_abs']:5.1f}%" for sc in SCENARIOS if held[sc]['predicted']))
    if a.at_load:
        print(at_load(rows))
    predict(rows)
    try:
        print(report(rows, skipped, source=a.reference))
    except BrokenPipeError:
        return 0
    if a.csv:
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it

        csv_frame(pd.DataFrame([{"id": r.id, "round": r.round, "benchmark": r.benchmark, "scenario": r.scenario,
                       "family": r.family, "device": r.device, "engine": r.engine, "weights": r.quantization.weights,
                       "chips": r.tp, "layout": r.layout, "measured": r.measured, **{f"pred_{k}": v for k, v in r.pred.items()}}
                      for r in rows])).to_csv(a.csv, index=False)     # formula-safe cells
    return 0


if __name__ == "__main__":
    sys.exit(main())
