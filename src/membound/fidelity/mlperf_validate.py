"""MLPerf Inference LLM results (reference/mlperf/mlperf_llm.csv) predicted with the served physics.

Each row is a system running a benchmark under MLPerf's load generator (see the README beside the
CSV). It maps to served workloads of one engine instance:
- **Offline**: every query queued at once: the engine's saturation throughput
  (`max_rate.saturation`, the steady state with the queue never empty);
- **Server / Interactive**: Poisson arrivals; the result is the highest rate whose p99 TTFT and
  p99 TPOT (gptj: p99 end-to-end time) meet the benchmark's limits (`max_rate.search`,
  percentiles from `membound.tails`), as completed output tokens per second.
- **deepseek-r1 Interactive** runs the rules' speculative decoding, EAGLE-style with the model's
  MTP head, 3 draft steps (workloads.yaml `speculative`; `speculative.mtp`).
- **gptj** decodes with beam search of 4 beams: each request is 4 sequences after one prefill,
  sharing the prompt's KV (`serving.solve(beams=...)`); its tokens are the request's.
The prediction is output tokens/s per accelerator: the instance's, over its chips.

The workload rules of this data set live here, with the loader (never in prediction code):
- lengths: per benchmark, the dataset's prompt and output length distributions
  (workloads.yaml beside the CSV: mean, bounds and spread, each cited or marked assumed), as a
  log-normal clipped to the bounds (`length_distribution`);
- instance layout: the table has no tensor-parallel degree, so the rule is the submitter's aim:
  of the tensor-parallel groups (1, 2, 4, 8, dividing the accelerators of a node) whose weights
  take at most serve_coverage.WEIGHT_SHARE of each chip (`serve_coverage.runnable`, the served
  smoke's rule), the one with the most Offline output tokens/s per accelerator; one instance per
  that many accelerators, every scenario of the system on that layout;
- formats: the row's `precision` (`weights=...`); a row whose measurements name the source
  checkpoint (fp16/bf16/fp32) with a quantization transform ran the chip's fp8 (NVIDIA's and
  AMD's submissions quantize to FP8 with an FP8 KV cache); a row without a precision ran fp4 on a
  chip with fp4 from round v5.0 on, else fp8 where the chip has it, else bf16; fp4 is NVFP4 on
  NVIDIA and MXFP4 on AMD; KV fp8 where the chip computes fp8;
- engines: the software stack names it: TensorRT(-LLM) -> tensorrt-llm, vLLM -> vllm,
  SGLang -> sglang; other stacks are skipped with the reason;
- CPU-only systems (accel_family "CPU-only"): the host processor's profile (by the CSV's
  host_processor), its sockets the "accelerators" (tokens/s per socket, sockets per node the
  groups), the stack (PyTorch with Intel's extensions) as the `device` runtime (the profile's
  fractions, no served engine's costs: assumed), the format from the precision column or, where it
  has none, the system description's INT4 / INT8 / BF16.

Rows used: closed division, scenarios Offline, Server and Interactive, a benchmark of
workloads.yaml whose preset and device resolve (membound.names). Rows that cannot be predicted are
counted with the reason (open division, SingleStream, no profile for the accelerator, no preset,
no runtime for the stack, the model does not fit).

    python -m membound.fidelity.mlperf_validate [--reference PATH] [--csv rows.csv]
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError, MemboundError
from ..physics.quantization import Quantization
from .reference import SkipRow, data_set_csv
from ..serving.lengths import Length, Samples
from .serve_validate import formats
from ..catalog.names import index
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from .serve_coverage import layouts as shapes, runnable
from ..catalog.runtime import list_runtimes, load_runtime
from ..planning.rate_search import saturation, search
from ..serving.api import build
from .fitter import Param, fit
from ..base.safeio import csv_frame, check_output_path
from statistics import NormalDist
from importlib import resources
import yaml
from ..physics.speculative import mtp

SHIPPED = "data/reference/mlperf/mlperf_llm.csv"
WORKLOADS = "data/reference/mlperf/workloads.yaml"
SCENARIOS = ("Offline", "Server", "Interactive")
CPU_ONLY = "CPU-only"        # the CSV's accel_family of systems without accelerators
CPU_ENGINE = "device"        # their stack (PyTorch with Intel's extensions): no served engine's costs
CPU_FORMATS = ("int4", "int8", "bf16")    # format words of a CPU system's description
TP_SIZES = (1, 2, 4, 8)
LENGTH_POINTS = 64          # equally likely lengths standing for a distribution
ENGINES = (("tensorrt", "tensorrt-llm"), ("trt", "tensorrt-llm"), ("sglang", "sglang"), ("vllm", "vllm"))
# the columns the loader reads
REQUIRED = ("round", "division", "submitter", "system_name", "benchmark", "model", "scenario", "tokens_per_s",
            "accelerator", "accel_family", "accelerators_per_node", "n_accelerators", "tokens_per_s_per_accel",
            "framework", "software_stack", "precision")


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's served workload: its preset, length distributions and latency limits."""

    name: str
    preset: str
    prompt: Length
    output: Length
    limits: dict          # scenario -> {"ttft_p99_s": s, "tpot_p99_s": s} or {"e2e_p99_s": s}
    beams: int = 1        # beam search's width (each request decodes that many sequences)
    mtp: dict = field(default_factory=dict)     # scenario -> draft steps of the model's MTP head the rules set


@dataclass
class MLPerfRow:
    """One result and what the served physics needs to predict it."""

    id: str
    round: str
    benchmark: str
    scenario: str
    family: str           # the CSV's accel_family
    device: str           # membound profile
    engine: str           # runtime name
    quantization: Quantization
    per_node: int         # accelerators per node: the tensor-parallel groups divide it
    measured: float       # output tokens/s per accelerator
    tp: int = 0           # accelerators per engine instance (`layouts`, chosen by predict)
    layout: str = ""      # its layout
    fitted: bool = False
    pred: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """What one engine instance's prediction depends on."""
        return (self.benchmark, self.device, self.engine, self.round, self.quantization, self.per_node)


def length_distribution(mean: float, lo: int, hi: int, cv: float, n: int = LENGTH_POINTS) -> Samples:
    """n equally likely token counts of a log-normal of coefficient of variation `cv`, clipped to
    [lo, hi], whose clipped mean is `mean` (its median found by bisection)."""
    if not lo <= mean <= hi:
        raise InvalidInputError("mean", mean, f"within the bounds [{lo}, {hi}]")
    sigma = math.sqrt(math.log1p(cv * cv))
    z = np.array([NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)])

    def values(mu: float) -> np.ndarray:
        return np.clip(np.exp(mu + sigma * z), lo, hi)
    a, b = math.log(max(lo, 1)) - 10.0, math.log(hi) + 10.0
    for _ in range(100):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if values(mid).mean() < mean else (a, mid)
    return Samples(tuple(int(round(v)) for v in values(0.5 * (a + b))))


def runtimes_dir() -> Path:
    """The bundled runtimes' folder (where the generations' YAML files go)."""
    return Path(str(resources.files("membound"))) / "data" / "runtimes"


def workloads_path() -> Path:
    return Path(str(resources.files("membound"))) / WORKLOADS


def load_benchmarks(path: str | Path | None = None) -> dict[str, Benchmark]:
    """The benchmarks of workloads.yaml (the shipped one by default), by the CSV's model name."""
    doc = yaml.safe_load(Path(path or workloads_path()).read_text())
    out = {}
    for name, b in doc["benchmarks"].items():
        lengths = [length_distribution(float(b[k]["mean"]), int(b[k]["min"]), int(b[k]["max"]), float(b[k]["cv"]))
                   for k in ("prompt", "output")]
        keys = {"ttft_s": "ttft_p99_s", "tpot_s": "tpot_p99_s", "e2e_s": "e2e_p99_s"}
        limits = {sc: {keys[k]: float(x) for k, x in v.items()} for sc, v in b.get("limits", {}).items()}
        mtp = {sc: int(v["mtp_steps"]) for sc, v in b.get("speculative", {}).items()}
        out[name] = Benchmark(name, b["preset"], lengths[0], lengths[1], limits, int(b.get("beams", 1)), mtp)
    return out


def unmodelled(path: str | Path | None = None) -> dict[str, str]:
    """{benchmark: why its rows are skipped} of workloads.yaml."""
    return dict(yaml.safe_load(Path(path or workloads_path()).read_text()).get("unmodelled", {}))


UNMODELLED = unmodelled()


def mlperf_csv(path=None) -> Path:
    """The CSV to read: `path` itself when a file; in a folder, its mlperf/mlperf_llm.csv or
    mlperf_llm.csv; None: the copy shipped with membound."""
    if path is None:
        return Path(str(resources.files("membound"))) / SHIPPED
    return data_set_csv(path, "mlperf", "mlperf_llm.csv", "an MLPerf CSV of mlperf_llm.csv's schema")


def engine_of(stack: str) -> str | None:
    """The runtime the software stack names (ENGINES), or None."""
    low = stack.lower()
    return next((rt for word, rt in ENGINES if word in low), None)


def weight_format(precision: str, hw, rnd: str) -> str:
    """The weight format a row ran (module docstring, 'formats')."""
    m = re.search(r"weights=([A-Za-z0-9_]+)", precision or "")
    w = m.group(1).lower() if m else ""
    quantized = "quantiz" in (precision or "").lower()
    fp4 = "mxfp4" if hw.vendor == "AMD" else "nvfp4"
    if w in ("fp4", "nvfp4", "mxfp4"):
        return "mxfp4" if w == "mxfp4" else fp4
    if w in ("fp8", "int8"):
        return w
    if w in ("int4", "uint4"):
        return "int4"
    if w in ("fp16", "bf16", "fp32") and not quantized:
        return "bf16"
    if w in ("fp16", "bf16", "fp32"):
        return "fp8" if hw.supports("fp8") else "bf16"
    if hw.supports("fp4") and rnd >= "v5.0":
        return fp4
    return "fp8" if hw.supports("fp8") else "bf16"


def _quantization(wd: str, preset: str, hw) -> Quantization:
    """The checkpoint's tensor formats for weight format `wd`: the served rows' rules
    (serve_validate.formats: gpt-oss's bf16 non-expert tensors, ModelOpt's bf16 head, KV fp8);
    KV fp8 only where the chip computes fp8, bf16 formats as they are."""
    label = {"nvfp4": "fp4", "mxfp4": "fp4"}.get(wd, wd)
    if label in ("fp8", "fp4") or preset.startswith("gpt-oss"):
        q = formats(label, preset, "", hw.vendor == "AMD", hw.supports("fp4"))
        return q if hw.supports("fp8") else Quantization(q.weights, None, dense_weights=q.dense_weights)
    return Quantization(wd, "fp8" if hw.supports("fp8") and wd != "bf16" else None)


def cpu_only(r: Any) -> bool:
    """A CPU-only system (no accelerator: its host processors run the model)."""
    return str(r.accel_family) == CPU_ONLY


def _device(r: Any) -> str:
    look = index("hardware").lookup
    if cpu_only(r):
        host = getattr(r, "host_processor", "")
        if isinstance(host, str) and host and (name := look(host)):
            return name
        raise SkipRow(f"no profile for the CPU {host}")
    for text in (r.accelerator, getattr(r, "accel_variant", ""), r.accel_family):
        if isinstance(text, str) and text and (name := look(text)):
            return name
    raise SkipRow(f"no profile for {r.accel_family}")


def layouts(model: str, device: str, wd: str, per_node: int) -> list:
    """The engine-instance layouts (mb.Parallel) of a node's accelerators whose weights fit
    (module docstring): tensor parallel over 1, 2, 4, 8 dividing the node, and for a MoE model
    expert parallel with data-parallel attention over 2 to 8 (serve_coverage.layouts)."""
    m, hw = load_model(model), load_hardware(device)
    out = [lay for n in TP_SIZES if per_node % n == 0 for lay in shapes(m, n) if runnable(m, hw, wd, lay)]
    if not out:
        raise SkipRow(f"{model} in {wd} fits no tensor-parallel group of {per_node} x {device}")
    return out


def _row(r: Any, benchmarks: dict[str, Benchmark]) -> MLPerfRow:
    """One CSV row as an MLPerfRow; SkipRow with the reason where it cannot be predicted."""
    if r.division != "closed":
        raise SkipRow("open division")
    if r.scenario not in SCENARIOS:
        raise SkipRow(f"scenario {r.scenario} not modelled")
    bench = benchmarks.get(str(r.model))
    if bench is None:
        why = UNMODELLED.get(str(r.model))
        raise SkipRow(f"{r.model}: {why or 'no workload for the benchmark'}")
    device = _device(r)
    engine = CPU_ENGINE if cpu_only(r) else engine_of(f"{r.framework} {r.software_stack}")
    if engine is None:
        raise SkipRow("no runtime for the software stack")
    hw = load_hardware(device)
    precision = str(r.precision)
    if cpu_only(r) and "weights=" not in precision:      # older CPU rows name the format in the description
        word = next((w for w in CPU_FORMATS if w in str(getattr(r, "system_desc", "")).lower()), "bf16")
        precision = f"weights={word}"
    wd = weight_format(precision, hw, str(r.round))
    quant = _quantization(wd, bench.preset, hw)
    count = getattr(r, "host_processors_per_node", 1) if cpu_only(r) else r.accelerators_per_node
    per_node = int(count) if count == count and count else 1
    layouts(bench.preset, device, wd, max(per_node, 1))      # some group holds the weights
    nodes = getattr(r, "nodes", 1)
    measured = float(r.tokens_per_s / (per_node * (nodes if nodes == nodes and nodes else 1))
                     if cpu_only(r) else r.tokens_per_s_per_accel)
    if not (math.isfinite(measured) and measured > 0):
        raise SkipRow("no tokens per second per accelerator")
    rid = f"{r.round}/{r.submitter}/{r.system_name}/{r.benchmark}/{r.scenario}"
    return MLPerfRow(rid, str(r.round), str(r.model), str(r.scenario), str(r.accel_family), device, engine,
                     quant, max(per_node, 1), measured)


def load_rows(path=None, benchmarks: dict[str, Benchmark] | None = None) -> tuple[list[MLPerfRow], list]:
    """(rows, skipped): the rows to predict and [(id, reason, closed division of a shipped
    preset)] of the others. Rows of the same
    system, benchmark family and scenario that differ only in the accuracy target (-99, -99.9:
    usually one run) are kept once, as the submission lists them."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks()
    df = pd.read_csv(mlperf_csv(path))
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise InvalidInputError("reference", str(mlperf_csv(path)), f"the MLPerf columns (missing {', '.join(missing)})")
    rows, skipped, seen = [], [], set()
    for r in df.itertuples(index=False):
        key = (r.round, r.division, r.submitter, r.system_name, r.model, r.scenario, r.accelerator, r.framework,
               r.software_stack, r.precision, r.tokens_per_s)
        if key in seen:
            continue
        seen.add(key)
        try:
            rows.append(_row(r, benchmarks))
        except SkipRow as e:
            skipped.append((f"{r.round}/{r.submitter}/{r.system_name}/{r.benchmark}/{r.scenario}", str(e),
                            r.division == "closed" and _has_preset(str(r.model), benchmarks)))
    return rows, skipped


def _has_preset(model: str, benchmarks: dict[str, Benchmark]) -> bool:
    """Whether membound ships a preset for the benchmark's model (its workload's, or by name)."""
    return model in benchmarks or index("model").lookup(model) is not None


def generation(engine: str, rnd: str) -> str:
    """The runtime of `engine` as the submitters of round `rnd` ran it: the bundled
    `<engine>-mlperf-<round>` (a software generation, GENERATION_FIT's constant fitted on it) where
    there is one, else the engine's own runtime."""
    name = f"{engine}-mlperf-{rnd}"
    return name if name in list_runtimes() else engine


def predict(rows: list[MLPerfRow], benchmarks: dict[str, Benchmark] | None = None,
            runtimes: dict | None = None) -> list[MLPerfRow]:
    """Fill row.pred ({"tok_s_per_accel": ...} or {"error": ...}): one engine build per
    configuration, its saturation for Offline and the rate search per latency limits. runtimes:
    {(engine, round): Runtime} to use instead of `generation`'s (fits)."""
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks()
    groups: dict[tuple, list[MLPerfRow]] = {}
    for r in rows:
        groups.setdefault(r.key, []).append(r)
    for (bname, device, engine, rnd, q, per_node), members in groups.items():
        bench = benchmarks[bname]
        runtime = (runtimes or {}).get((engine, rnd)) or generation(engine, rnd)
        try:
            best = None
            for lay in layouts(bench.preset, device, q.weights, per_node):
                try:
                    sm, sched, _ = build(bench.preset, device, prompt=bench.prompt, output=bench.output,
                                         quantization=q, runtime=runtime, n_chips=lay.chips, parallel=lay)
                    per_accel = saturation(sm, sched, bench.prompt, bench.output, bench.beams) * bench.output.mean \
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
            for m in members:
                m.tp, m.layout = tp, str(lay)
                if m.scenario not in done:
                    eng, eng_sched = sm, sched
                    if m.scenario in bench.mtp:       # the rules' speculative decoding with the MTP head
                        eng, eng_sched, _ = build(bench.preset, device, prompt=bench.prompt, output=bench.output,
                                                  quantization=q, runtime=runtime, n_chips=lay.chips, parallel=lay,
                                                  speculative=mtp(bench.preset, bench.mtp[m.scenario]))
                    mr = search(eng, eng_sched, bench.prompt, bench.output, bench.limits[m.scenario], bench.beams)
                    done[m.scenario] = {"tok_s_per_accel": mr.output_tok_s / tp, "ttft_p99_s": mr.ttft[2],
                                        "tpot_p99_s": mr.tpot[2], "binding": mr.binding or "saturation"}
                m.pred = done[m.scenario]
        except (MemboundError, SkipRow) as e:
            for m in members:
                m.pred = {"error": str(e)}
    return rows


# Software generations (issue 29 item 4). A round of MLPerf is a software generation of each
# engine: its runtime `<engine>-mlperf-<round>` keeps the engine's served costs and refits ONE
# constant, the host's seconds per running sequence per step (`per_sequence_s`, prior 1e-7 .. 1e-3 s,
# log-scaled: the scheduler's and sampler's work per sequence, which the C++ executor of NVIDIA's
# MLPerf harness does in far less time than trtllm-serve's Python one), on that round's Offline rows
# of the fit families. (compute_fraction, tried first on the same split, went to its upper bound 1.0
# in v4.0, v4.1 and v5.1: missing physics, set aside.)
# The split, fixed before looking at any error: Hopper fits (GENERATION_FIT), every other family of
# the round is held out whole (Blackwell, Ada, AMD's vLLM stacks, which no generation refits).
# Fewer constants than evidence: one constant needs rows on two chips at least; a round without
# them keeps the engine's own runtime. Server and Interactive rows are never fitted on.
GENERATION_FIT = ("H100", "H200", "GH200")
GENERATION_PARAM = ("per_sequence_s", 1e-7, 1e-3)
GENERATION_ENGINES = ("tensorrt-llm",)


def _with(base, engine: str, rnd: str, value: float):
    """The engine's runtime `base` with GENERATION_PARAM set to `value`, named as the generation."""
    name, _, _ = GENERATION_PARAM
    if base.served is None:
        raise InvalidInputError("runtime", base.name, "an engine with a served block")
    return base.model_copy(update={"name": f"{engine}-mlperf-{rnd}",
                                   "served": base.served.model_copy(update={name: value})})


def fit_generation(rows: list[MLPerfRow], engine: str, rnd: str, families=GENERATION_FIT,
                   benchmarks: dict[str, Benchmark] | None = None):
    """The fitter's report (membound.fitter.fit) of GENERATION_PARAM on the Offline rows of
    `engine` in round `rnd` on `families`, from the engine's own runtime (a cold fit); None where
    those rows span fewer than two chips."""
    mine = [r for r in rows if r.engine == engine and r.round == rnd and r.family in families
            and r.scenario == "Offline"]
    if len({r.device for r in mine}) < 2:
        return None
    name, lo, hi = GENERATION_PARAM
    base = load_runtime(engine)
    fresh = [MLPerfRow(r.id, r.round, r.benchmark, r.scenario, r.family, r.device, r.engine, r.quantization,
                       r.per_node, r.measured) for r in mine]

    def residuals(p: dict) -> np.ndarray:
        rt = _with(base, engine, rnd, p[name])
        predict(fresh, benchmarks, runtimes={(engine, rnd): rt})
        return np.array([math.log(max(r.pred.get("tok_s_per_accel", 1e-9), 1e-9) / r.measured) for r in fresh])
    start = float(getattr(base.served, name))
    return fit(residuals, [Param(name, lo, hi, min(max(start, lo), hi), log=True)], rows=[r.id for r in mine])


def generation_runtime(engine: str, rnd: str, report) -> dict:
    """The runtime YAML (as a dict) of `engine`'s round-`rnd` generation from a fit report."""
    doc = yaml.safe_load((runtimes_dir() / f"{engine}.yaml").read_text())
    name, _, _ = GENERATION_PARAM
    value = float(report.params[name])
    rows = sorted({i.split("/")[1] + " " + i.split("/")[2] for i in report.rows})
    doc["name"] = f"{engine}-mlperf-{rnd}"
    doc["description"] = (f"{engine} as MLPerf Inference {rnd} submitters ran it: {engine}'s served costs, "
                          f"{name} refitted on the round's Offline rows of {', '.join(GENERATION_FIT)}")
    doc["provenance"] = (f"MLPerf Inference {rnd} (closed): {name}={value:.4g} fitted by membound.mlperf_validate "
                         f"--fit on {len(report.rows)} Offline rows of {len(rows)} systems on {', '.join(GENERATION_FIT)}"
                         f"{'; ON A BOUND (missing physics): ' + ', '.join(report.at_bounds) if report.at_bounds else ''}; "
                         f"every other accelerator family of the round held out; the rest as {engine}'s")
    doc["served"]["generation"] = f"{engine} in MLPerf Inference {rnd} submissions (closed division)"
    doc["served"]["calibration"] = doc["provenance"]
    doc["served"][name] = round(value, 4)
    return doc

def fit_all(rows: list[MLPerfRow]) -> dict[tuple[str, str], Any]:
    """{(engine, round): fit report} of every generation with rows to fit on (GENERATION_ENGINES)."""
    out = {}
    for engine in GENERATION_ENGINES:
        for rnd in sorted({r.round for r in rows if r.engine == engine}):
            rep = fit_generation(rows, engine, rnd)
            if rep is not None:
                out[(engine, rnd)] = rep
    return out


def by_family(rows: list[MLPerfRow]) -> list[tuple[str, str, dict, dict]]:
    """Each accelerator family of the generation engines held out in turn: (round, family, held
    out, in sample) summaries of its rows, predicted with the round's constant refitted cold on the
    other families' Offline rows (held out) or on all families' (in sample)."""
    name, _, _ = GENERATION_PARAM
    out = []
    for engine in GENERATION_ENGINES:
        for rnd in sorted({r.round for r in rows if r.engine == engine}):
            fams = sorted({r.family for r in rows if r.engine == engine and r.round == rnd})
            every = fit_generation(rows, engine, rnd, families=fams)
            for fam in fams:
                mine = [r for r in rows if r.engine == engine and r.round == rnd and r.family == fam]
                figs = []
                for rep in (fit_generation(rows, engine, rnd, families=[f for f in fams if f != fam]), every):
                    copy = [MLPerfRow(r.id, r.round, r.benchmark, r.scenario, r.family, r.device, r.engine,
                                      r.quantization, r.per_node, r.measured) for r in mine]
                    base = load_runtime(engine)
                    rt = base if rep is None else _with(base, engine, rnd, rep.params[name])
                    predict(copy, runtimes={(engine, rnd): rt})
                    figs.append({sc: summary([r for r in copy if r.scenario == sc]) for sc in SCENARIOS})
                out.append((rnd, fam, figs[0], figs[1]))
    return out


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
    ap.add_argument("--fit", metavar="DIR", help="fit each round's generation (GENERATION_PARAM on the Offline rows "
                    "of GENERATION_FIT) and write <engine>-mlperf-<round>.yaml runtimes into DIR")
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
        for (engine, rnd), rep in fit_all(rows).items():
            doc = generation_runtime(engine, rnd, rep)
            Path(a.fit, f"{engine}-mlperf-{rnd}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=110))
            print(f"{engine} {rnd}: {rep.summary()}")
        return 0
    if a.by_family:
        for rnd, fam, held, ins in by_family(rows):
            print(f"{rnd} {fam:<14} " + "  ".join(
                f"{sc} {held[sc]['predicted']:>3} held out {100 * held[sc]['median_abs']:5.1f}% / in sample "
                f"{100 * ins[sc]['median_abs']:5.1f}%" for sc in SCENARIOS if held[sc]['predicted']))
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
