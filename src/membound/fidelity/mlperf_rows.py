"""An MLPerf Inference LLM result row (reference/mlperf/mlperf_llm.csv) as a served configuration: the
data set's loader and its workload rules, which membound.fidelity.mlperf_validate predicts and reports.

The workload rules of this data set live here, with the loader (never in prediction code):
- lengths: per benchmark, the dataset's prompt and output length distributions
  (workloads.yaml beside the CSV: mean, bounds and spread, each cited or marked assumed), as a
  log-normal clipped to the bounds (`length_distribution`);
- instance layout: the table has no tensor-parallel degree. Where the submitters' published
  configuration sets the accelerators per engine instance for the engine on that chip
  (workloads.yaml `instance_chips`: NVIDIA's harness configs, cited there), the layouts are those
  of that many accelerators (`instance_layouts`; a pipeline-parallel group is modelled as the
  tensor-parallel group of its size; a group wider than the node where the chip's scale-up domain
  holds it). Otherwise the rule is the submitter's aim:
  of the tensor-parallel groups (1, 2, 4, 8, dividing the accelerators of a node) whose weights
  take at most serve_coverage.WEIGHT_SHARE of each chip (`serve_coverage.runnable`, the served
  smoke's rule), the one with the most Offline output tokens/s per accelerator; one instance per
  that many accelerators, every scenario of the system on that layout;
- scheduler caps: where the submitters' published configuration sets the engine's running batch and
  tokens a step for a Server or Interactive scenario on that chip in that round (workloads.yaml
  `engine_limits`: NVIDIA's gpu_batch_size and runtime max_num_tokens, per rank, and attention-DP
  balancing's timeout, cited there; a chip may list an entry per round), that scenario's engine runs
  them (`scenario_limits`), unless the row's submission sets its own (`row_limits`); otherwise the
  engine's own defaults (the C++ executor's Offline rows, which fit its generation, have none). v3.1's
  GPT-J harness batched statically (`static_batch`: a batch of that many queries runs until its longest
  request ends); its entries apply only where generations.yaml prices static batching (`static_priced`:
  measured, not adopted);
- formats: the row's `precision` (`weights=...`); a row whose measurements name the source
  checkpoint (fp16/bf16/fp32) with a quantization transform ran the chip's fp8 (NVIDIA's and
  AMD's submissions quantize to FP8 with an FP8 KV cache); a row without a precision ran fp4 on a
  chip with fp4 from round v5.0 on, else fp8 where the chip has it, else bf16; fp4 is NVFP4 on
  NVIDIA and MXFP4 on AMD; KV fp8 where the chip computes fp8;
- engines: the software stack names it: TensorRT(-LLM) -> tensorrt-llm, vLLM -> vllm,
  SGLang -> sglang; other stacks are skipped with the reason;
- executors (`executor_of`, workloads.yaml `executors`, cited there): a TensorRT-LLM row ran either a
  TensorRT engine in the C++ executor ("cpp": its stack names only the TensorRT library, or says it
  built an engine with trtllm-build) or the PyTorch backend's PyExecutor behind the LLM API /
  trtllm-serve ("pytorch": its stack names TensorRT-LLM, Dynamo, trtllm-serve or PyTorch, or the
  benchmark's submissions run endpoints only: deepseek-r1, gpt-oss-120b, or the row's submission's
  launch says so: submissions.yaml `executor`, e.g. llama3.1-8b in v5.1 and v6.0 and most of v6.0's
  llama2-70b and llama3.1-405b, whose stacks name only the TensorRT library);
- software generations (generations.yaml, `generation_runtime`): "cpp" rows run the generation
  tensorrt-llm-cpp of their round (the engine's served costs with the C++ executor's constants:
  per_request_s 0 from its code, the harness's MAX_UTILIZATION capacity scheduler (a request admitted
  on the KV it holds now, preemption "recompute", not on its whole length), per_sequence_s fitted per round
  on the fit families' Offline rows where the fit is interior, else the engine's); "pytorch" rows
  run the generation tensorrt-llm-serve (the engine's served costs with the harness's MAX_UTILIZATION
  scheduler, from its code; nothing fitted: v5.1's fit-family trtllm-serve rows (llama3.1-8b on H200
  and H200 NVL) are not fitted on, generations.yaml says why);
- submissions (submissions.yaml, `submission_of`, each entry cited to the submission's own launch
  scripts, configs and harness code): per round, submitter, benchmark and chip, each scenario's launch
  (`Launch`): the executor ("harness": the submitter's harness drives vLLM in-process with token ids, the
  generation vllm-harness: no HTTP server or tokeniser costs, per_request_s and per_prompt_token_s 0 from
  the code; "server": an OpenAI-compatible endpoint, the engine's own runtime), the instance's tensor x
  pipeline parallel layout, and the engine flags that bound a step (max_num_seqs, max_num_batched_tokens,
  chunked prefill, gpu_memory_utilization, V0 multi-step scheduling); where a submission publishes its tuned
  GEMMs' timings, the marginal rate they give (`gemm_fraction`: AMD's MI300X llama2-70b launches multiply at
  0.411 of the fp8 peak, Dell's v4.1 table, with reads and multiplies adding as the table's times do); and the
  tensor formats its code sets where the precision column says less (Intel's Arc rows: 4-bit weights, 8-bit
  activations, 8-bit KV).
  vllm-harness fits nothing: no round has fit-family harness rows on two chips (generations.yaml).
  TensorRT-LLM entries (executor "pytorch": trtllm-serve) set a submitter's own caps where they differ
  from workloads.yaml's `engine_limits` (Nebius's v6.0 B200 launches); a disaggregated launch (NVIDIA's GB200
  x72 Interactive systems behind Dynamo, and its v6.0 llama2-70b and 405b Server) sets a pool of context
  workers and one of generation workers, each with its layout and caps (`launch_pool`), predicted by the
  open-loop two-pool rate search; a system with fewer accelerators than the pools is skipped with the reason;
- CPU-only systems (accel_family "CPU-only"): the host processor's profile (by the CSV's
  host_processor), its sockets the "accelerators" (tokens/s per socket, sockets per node the
  groups), the stack (PyTorch with Intel's extensions) as the `device` runtime (the profile's
  fractions, no served engine's costs: assumed), the format from the precision column or, where it
  has none, the INT4 / INT8 / BF16 of the system description, else of the system name (v3.1 Dell:
  "Dell PowerEdge Server R760 (...)" runs "1-node-2S-SPR-PyTorch-INT8"), else bf16. Where the
  submitters' launch code of the round was read (workloads.yaml `cpu_engine`: llama3.1-8b in v5.1
  to v6.1, gptj in v4.1, Intel's launches that every submitter's container ran), its formats instead,
  and its layout (mlperf_validate._predict_cpu): per scenario, instances pinned to a fixed number
  of cores (Intel's SGLang launch of v5.1 and v6.0) or to its NUMA nodes (vLLM's of v6.1; Intel's
  gptj harness of v4.1: workers of a fixed number of cores in each NUMA node's process), each
  with its cores' share of the socket's compute and its share of the memory (`cpu_layout`,
  `Hardware.share`), serving with the launch's caps; the socket's tokens/s are an instance's
  times the instances;
- cards of several GPUs (`devices_per_card`: the accel_variant's "(2 GPUs/card)", Maxsun's Arc Pro B60
  Dual 48G): the table counts cards, each GPU is a device: a node's devices are its cards times that,
  and a card's tokens/s are shared by its GPUs.

Rows used: closed division, scenarios Offline, Server and Interactive, a benchmark of
workloads.yaml whose preset and device resolve (membound.names). Rows that cannot be predicted are
counted with the reason (open division, SingleStream, no profile for the accelerator, no preset,
no runtime for the stack, the model does not fit).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..physics.quantization import Quantization
from .reference import SkipRow, data_set_csv
from ..serving.lengths import Length, Samples
from .serve_validate import formats
from ..catalog.names import index
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from .serve_coverage import layouts as shapes, runnable
from ..catalog.runtime import NoGraphReplay, Runtime, list_runtimes, load_runtime
from .split import mlperf_roles
from ..serving.disagg import Pool
from ..serving.scheduler import Scheduler
from statistics import NormalDist
from importlib import resources
import yaml
from ..physics.parallel import Parallel


SHIPPED = "data/reference/mlperf/mlperf_llm.csv"
WORKLOADS = "data/reference/mlperf/workloads.yaml"
SCENARIOS = ("Offline", "Server", "Interactive")
CPU_ONLY = "CPU-only"        # the CSV's accel_family of systems without accelerators
CPU_ENGINE = "device"        # their stack (PyTorch with Intel's extensions): no served engine's costs
CPU_FORMATS = ("int4", "int8", "bf16")    # format words of a CPU system's description
TP_SIZES = (1, 2, 4, 8)
CARD_DEVICES = re.compile(r"\((\d+)\s*GPUs?\s*/\s*card\)", re.IGNORECASE)   # accel_variant "...(2 GPUs/card)"
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
    executor: str = ""    # the engine executor its submissions run whatever the stack says ("pytorch"), or ""
    instance_chips: dict = field(default_factory=dict)   # engine -> {device: accelerators per engine instance}
    instance_rounds: tuple = ()   # the rounds whose published configurations set instance_chips
    cpu_engine: tuple = ()   # CPU-only systems' engine launches, each for its rounds (`cpu_engine_of`)
    engine_limits: dict = field(default_factory=dict)    # engine -> {scenario: {device: (EngineLimits, ...)}}


@dataclass(frozen=True)
class EngineLimits:
    """An engine's per-rank scheduler caps in one scenario on one chip, as its submitters' published
    configuration sets them in the rounds read (workloads.yaml `engine_limits`)."""

    rounds: tuple[str, ...]
    max_running: int              # TensorRT-LLM max_batch_size (NVIDIA's gpu_batch_size, unless its runtime flags override it)
    token_budget: int             # the runtime flags' max_num_tokens: tokens a step carries, decodes included
    chunked_prefill: bool = True  # the runtime flags' enable_chunked_context
    dp_balance_steps: int | None = None   # attention-DP balancing's timeout_iters (adp_balancing_timeout_iters), or
                                          # None: the engine's (Scheduler.dp_balance_steps)
    static_batch: int = 0         # queries a static batch holds (v3.1's GPT-J harness: the batch's context pass, then
                                  # its decode steps until its longest request ends), or 0: in-flight batching

    def scheduler(self) -> Scheduler:
        """The caps as a Scheduler: a step's decodes take one token each out of the token budget, so the
        running batch is at most the budget too (TensorRT-LLM's micro-batch scheduler adds a generation
        request only while the step's tokens stay within max_num_tokens: cpp/tensorrt_llm/batch_manager/
        microBatchScheduler.cpp); the engine's other knobs are its own. A static batch's context pass runs
        alone (no mixed steps)."""
        return Scheduler(max_running=min(self.max_running, self.token_budget), token_budget=self.token_budget,
                         chunked_prefill=self.chunked_prefill, dp_balance_steps=self.dp_balance_steps,
                         mixed_steps=False if self.static_batch else None)


@dataclass(frozen=True)
class Launch:
    """One scenario's engine instance as a submission's published code launches it (submissions.yaml, cited
    there): its executor, layout and the engine flags that bound a step. 0 / None: the engine runtime's own."""

    executor: str = ""            # "harness" (in-process engine, token ids) or "server" (an HTTP endpoint);
                                  # for TensorRT-LLM the executor it names ("pytorch": trtllm-serve)
    tp: int = 0                   # tensor-parallel degree of an instance (0: the layout rule)
    pp: int = 1                   # pipeline-parallel degree
    max_running: int = 0          # max_num_seqs
    token_budget: int = 0         # max_num_batched_tokens
    chunked_prefill: bool | None = None   # enable_chunked_prefill (False: no mixed prefill/decode steps under vLLM V0;
                                          # TensorRT-LLM enable_chunked_context False still mixes whole prompts)
    memory_fraction: float = 0.0  # gpu_memory_utilization
    scheduler_steps: int = 1      # num_scheduler_steps (vLLM V0 multi-step scheduling)
    gemm_fraction: float = 0.0    # share of the chip's dense peak its tuned GEMMs multiply at (0: the engine's)
    dp_balance_steps: int | None = None   # TensorRT-LLM attention-DP balancing's timeout_iters (Scheduler.dp_balance_steps)
    context: Pool | None = None     # a disaggregated launch's pool of context (prefill) workers (`launch_pool`), or None
    generation: Pool | None = None  # and its pool of generation (decode) workers

    def served(self, engine: Any, chip_compute_fraction: float | None = None) -> dict:
        """The served block's fields this launch sets over the engine's served block `engine`
        (catalog.runtime.Served). Multi-step scheduling calls the scheduler once every `scheduler_steps`
        steps: its per-sequence host work is paid once per call, and waiting prompts join only then
        (`recv_interval_steps`). A step decodes at most token_budget sequences (one token each: vLLM's
        scheduler spends its token budget on the running requests, v1/core/sched/scheduler.py
        Scheduler.schedule), so the running batch is at most the budget where a launch sets fewer
        tokens than sequences (Intel's Arc launches: 1024 sequences, 320 tokens).
        A launch whose submission publishes its tuned GEMMs' timings (`gemm_fraction`, submissions.yaml)
        multiplies at that share of the chip's dense peak: the served compute_fraction, a share of the
        chip's achievable (`chip_compute_fraction`, its profile's), is gemm_fraction / that; and the
        step's memory and compute add (overlap 0), as the timings do: a layer's GEMMs take the
        weights' read plus the tokens' multiply-accumulates at the marginal rate."""
        out: dict[str, Any] = {k: v for k, v in (("max_running", self.max_running), ("token_budget", self.token_budget),
                                                 ("memory_fraction", self.memory_fraction)) if v}
        if self.gemm_fraction:
            if not chip_compute_fraction or self.gemm_fraction > chip_compute_fraction:
                raise InvalidInputError("gemm_fraction", self.gemm_fraction,
                                        f"a share of the dense peak at most the chip's achievable ({chip_compute_fraction})")
            out["compute_fraction"] = self.gemm_fraction / chip_compute_fraction
            out["overlap"] = 0.0
        budget = out.get("token_budget", engine.token_budget)
        if out.get("max_running", engine.max_running) > budget:
            out["max_running"] = budget
        if self.chunked_prefill is not None:
            out["chunked_prefill"] = self.chunked_prefill
            if not self.chunked_prefill and self.executor != "pytorch":   # vLLM V0: prompts or decodes a step;
                out["mixed_steps"] = False     # TensorRT-LLM's in-flight batching mixes whole prompts with decodes
        if self.scheduler_steps > 1:       # the scheduler runs once per scheduler_steps steps: its per-sequence
            out["per_sequence_s"] = engine.per_sequence_s / self.scheduler_steps    # work, and its intake of
            out["recv_interval_steps"] = self.scheduler_steps                       # waiting prompts
        if self.dp_balance_steps is not None:
            out["dp_balance_steps"] = self.dp_balance_steps
        return out

    @property
    def caps(self) -> bool:
        """Whether the launch sets the engine's batch or step caps (they then stand over workloads.yaml's
        `engine_limits` for the chip: a submission's own launch is the more specific fact, `row_limits`)."""
        return bool(self.max_running or self.token_budget)


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
    executor: str = ""    # the engine's executor the row ran (`executor_of`: "cpp", "pytorch"; "harness", "server"), or ""
    cores: int = 0        # a CPU-only system's cores per socket (the CSV's host_processor_core_count), else 0
    launch: Launch | None = None   # its submission's published launch of the scenario (`submission_of`), or None
    tpot_p50_s: float = math.nan   # the measured median TPOT (Server, Interactive: the load generator's summary)
    cpu_launch: int = -1  # a CPU-only row's launch: its index in the benchmark's cpu_engine (`cpu_launch_of`), or -1
    domain: int = 0       # accelerators its published instance spans beyond the node (`wide_instance`), else 0

    @property
    def key(self) -> tuple:
        """What one engine instance's prediction depends on."""
        return (self.benchmark, self.device, self.engine, self.executor, self.round, self.quantization, self.per_node,
                self.cores, self.launch, self.cpu_launch, self.domain)

    def fresh(self) -> MLPerfRow:
        """The same row without a prediction."""
        return MLPerfRow(self.id, self.round, self.benchmark, self.scenario, self.family, self.device, self.engine,
                         self.quantization, self.per_node, self.measured, executor=self.executor, cores=self.cores,
                         launch=self.launch, tpot_p50_s=self.tpot_p50_s, cpu_launch=self.cpu_launch, domain=self.domain)


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
        chips = {eng: {dev: int(n) for dev, n in devs.items()} for eng, devs in b.get("instance_chips", {}).items()}
        caps = {eng: {sc: {dev: _device_limits(f"{name}.engine_limits.{eng}.{sc}.{dev}", v) for dev, v in devs.items()}
                      for sc, devs in scs.items()} for eng, scs in b.get("engine_limits", {}).items()}
        out[name] = Benchmark(name, b["preset"], lengths[0], lengths[1], limits, int(b.get("beams", 1)), mtp,
                              str(b.get("executor", "")), chips, tuple(b.get("instance_chips_rounds", ())),
                              tuple(dict(e) for e in b.get("cpu_engine", ())), caps)
    return out


def _device_limits(where: str, v: Any) -> tuple[EngineLimits, ...]:
    """A chip's workloads.yaml `engine_limits`: one entry, or a list of entries for different rounds (no
    round in two of them)."""
    entries = tuple(_engine_limits(f"{where}[{i}]", e) for i, e in enumerate(v)) if isinstance(v, list) \
        else (_engine_limits(where, v),)
    rounds = [r for e in entries for r in e.rounds]
    if len(rounds) != len(set(rounds)):
        raise InvalidInputError(where, rounds, "each round in one entry only")
    return entries


def _engine_limits(where: str, v: Any) -> EngineLimits:
    """One workloads.yaml `engine_limits` entry: its rounds and caps, checked."""
    if not isinstance(v, dict) or not v.get("rounds") or any(k not in v for k in ("max_running", "token_budget")):
        raise InvalidInputError(where, v, "{rounds: [...], max_running: N, token_budget: N[, chunked_prefill: bool]"
                                          "[, dp_balance_steps: N][, static_batch: N]}")
    steps, static = v.get("dp_balance_steps"), v.get("static_batch", 0)
    if isinstance(static, bool) or not isinstance(static, int) or static < 0:
        raise InvalidInputError(f"{where}.static_batch", static, "queries a static batch holds: an integer >= 0")
    lim = EngineLimits(tuple(str(r) for r in v["rounds"]), int(v["max_running"]), int(v["token_budget"]),
                       bool(v.get("chunked_prefill", True)), None if steps is None else int(steps), static)
    try:
        lim.scheduler()        # the Scheduler's own checks (counts from 1)
    except InvalidInputError as e:
        raise InvalidInputError(where, v, f"caps a Scheduler takes ({e})") from None
    return lim


def limits_entry(bench: Benchmark, engine: str, device: str, rnd: str, scenario: str) -> EngineLimits | None:
    """The workloads.yaml `engine_limits` entry for `engine` on `device` in `scenario` of round `rnd`, or None;
    a static batch's entry only where predictions price static batching (`static_priced`)."""
    lims = bench.engine_limits.get(engine, {}).get(scenario, {}).get(device, ())
    return next((lim for lim in lims if rnd in lim.rounds and (not lim.static_batch or static_priced())), None)


def static_priced(generations: dict[str, dict] | None = None) -> bool:
    """Whether predictions run the static batches workloads.yaml's `engine_limits` record (static_batch > 0,
    v3.1's GPT-J harness): generations.yaml's `static_batching` block (`priced`, true or false; the block
    records what pricing them measured)."""
    gens = shipped_generations() if generations is None else generations
    priced = False
    for name, g in gens.items():
        block = g.get("static_batching")
        if block is None:
            continue
        if not isinstance(block.get("priced"), bool):
            raise InvalidInputError(f"generation {name} static_batching.priced", block.get("priced"), "true or false")
        priced = priced or block["priced"]
    return priced


def scenario_limits(bench: Benchmark, engine: str, device: str, rnd: str, scenario: str) -> Scheduler | None:
    """The scheduler caps the submitters' published configuration sets for `engine` on `device` in
    `scenario` of round `rnd` (workloads.yaml `engine_limits`, cited there), as a Scheduler whose
    other knobs are the engine's; None where none was read (the engine's own defaults)."""
    lim = limits_entry(bench, engine, device, rnd, scenario)
    return None if lim is None else lim.scheduler()


def static_batch(bench: Benchmark, engine: str, device: str, rnd: str, scenario: str, launch: Launch | None) -> int:
    """Queries a static batch of the row's scenario holds (workloads.yaml `engine_limits` static_batch: v3.1's
    GPT-J harness), or 0 where the engine batches in flight (or the submission's launch sets its own caps)."""
    if launch is not None and launch.caps:
        return 0
    lim = limits_entry(bench, engine, device, rnd, scenario)
    return 0 if lim is None else lim.static_batch


def row_limits(bench: Benchmark, engine: str, device: str, rnd: str, scenario: str,
               launch: Launch | None) -> Scheduler | None:
    """The scheduler caps a row's scenario runs over its runtime: none where its submission's launch sets
    its own caps (`Launch.caps`, already in the runtime: `launched`), else `scenario_limits`."""
    if launch is not None and launch.caps:
        return None
    return scenario_limits(bench, engine, device, rnd, scenario)


def executor_rules(path: str | Path | None = None) -> dict[str, dict]:
    """{engine: its executors' rule} of workloads.yaml `executors` (the shipped file by default)."""
    return dict(yaml.safe_load(Path(path or workloads_path()).read_text()).get("executors", {}))


EXECUTORS = executor_rules()


def executor_of(engine: str, stack: str, bench: Benchmark, rules: dict[str, dict] | None = None) -> str:
    """The executor of `engine` a row ran, from its own software columns `stack` (workloads.yaml
    `executors`, cited there): "cpp" where the stack says it built an engine (cpp_words), else the
    benchmark's own executor where its submissions name one, else "pytorch" where the stack names
    the engine's serving layer (pytorch_words), else "cpp" (the stack names only the TensorRT
    library: a TensorRT engine); "" for an engine without such a rule."""
    rule = (EXECUTORS if rules is None else rules).get(engine)
    if rule is None or "pytorch_words" not in rule:    # an engine whose stack words name no executor (vllm:
        return ""                                      # its submissions' launches do, `submission_of`)
    low = stack.lower()
    if any(w in low for w in rule.get("cpp_words", ())):
        return "cpp"
    if bench.executor:
        return bench.executor
    return "pytorch" if any(w in low for w in rule.get("pytorch_words", ())) else "cpp"


def unmodelled(path: str | Path | None = None) -> dict[str, str]:
    """{benchmark: why its rows are skipped} of workloads.yaml."""
    return dict(yaml.safe_load(Path(path or workloads_path()).read_text()).get("unmodelled", {}))


UNMODELLED = unmodelled()
SUBMISSIONS = "data/reference/mlperf/submissions.yaml"
LAUNCH_FIELDS = ("executor", "tp", "pp", "max_running", "token_budget", "chunked_prefill", "memory_fraction",
                 "scheduler_steps", "gemm_fraction", "dp_balance_steps", "context", "generation")
POOL_FIELDS = ("workers", "tp", "ep", "max_running", "token_budget", "chunked_prefill")
FORMAT_FIELDS = ("weights", "activations", "kv", "dense_weights", "expert_activations")
ENTRY_LAUNCH_FIELDS = ("gemm_fraction",)    # launch fields an entry sets for every scenario (a scenario may override)


def load_submissions(path: str | Path | None = None) -> dict[str, dict]:
    """{entry: its launch facts} of submissions.yaml (the shipped file by default): how the submissions
    that ran vLLM launched their engine, each entry cited there."""
    doc = yaml.safe_load(Path(path or Path(str(resources.files("membound"))) / SUBMISSIONS).read_text())
    return dict(doc.get("submissions") or {})


@functools.cache
def _shipped_submissions() -> dict[str, dict]:
    return load_submissions()


def submission_of(round_: str, submitter: str, benchmark: str, engine: str, device: str, scenario: str,
                  per_node: int, entries: dict[str, dict] | None = None,
                  stack: str = "") -> tuple[Launch | None, dict[str, str]]:
    """(the launch of this scenario, the tensor formats {weights, activations, kv} it sets) of the
    submissions.yaml entry for the round, submitter, benchmark, engine and device; (None, {}) where none
    matches. An entry that names a `stack` (the software its systems carry, where one submitter ran two
    containers on a chip) matches only rows whose software columns `stack` hold it (case-insensitive).
    A scenario's own formats and launch fields override the entry's (ENTRY_LAUNCH_FIELDS);
    `tp: all` is every device of the node."""
    for name, e in (_shipped_submissions() if entries is None else entries).items():
        if (e["round"], e["benchmark"], e["engine"], e["device"]) == (round_, benchmark, engine, device) \
                and submitter in e["submitters"] and str(e.get("stack", "")).lower() in stack.lower():
            sc = {**{k: e[k] for k in ENTRY_LAUNCH_FIELDS if k in e}, **((e.get("scenarios") or {}).get(scenario) or {})}
            fmt = {k: str(v) for k, v in {**(e.get("formats") or {}), **sc}.items() if k in FORMAT_FIELDS}
            unknown = set(sc) - set(LAUNCH_FIELDS) - set(FORMAT_FIELDS)
            if unknown:
                raise InvalidInputError(f"submissions.{name}.{scenario}", sorted(unknown),
                                        f"launch fields ({', '.join(LAUNCH_FIELDS + FORMAT_FIELDS)})")
            if sc.get("tp") == "all":
                sc["tp"] = per_node
            fields: dict[str, Any] = {k: launch_pool(f"submissions.{name}.{scenario}.{k}", v)
                                      if k in ("context", "generation") else v for k, v in sc.items() if k in LAUNCH_FIELDS}
            if ("context" in fields) != ("generation" in fields):
                raise InvalidInputError(f"submissions.{name}.{scenario}", sorted(fields), "both a context and a "
                                        "generation pool for a disaggregated launch, or neither")
            return (Launch(**fields) if fields else None), fmt
    return None, {}


def launch_pool(where: str, v: Any) -> Pool:
    """A disaggregated launch's pool (submissions.yaml `context` / `generation`: {workers, tp, ep, max_running,
    token_budget[, chunked_prefill]}) as a serving Pool: `workers` instances of Parallel(tp, ep) (ep: expert
    parallel with data-parallel attention), each with the caps as a Scheduler (per rank where the engine's are;
    a step's decodes take one token each, so the batch is at most the budget, as `EngineLimits.scheduler`)."""
    if not isinstance(v, dict) or set(v) - set(POOL_FIELDS) or any(k not in v for k in ("workers", "max_running",
                                                                                          "token_budget")):
        raise InvalidInputError(where, v, f"{{workers, max_running, token_budget[, tp, ep, chunked_prefill]}} "
                                          f"(fields among {', '.join(POOL_FIELDS)})")
    lay = Parallel(tp=int(v.get("tp", 1)), ep=int(v.get("ep", 1)))
    caps = EngineLimits(("",), int(v["max_running"]), int(v["token_budget"]), bool(v.get("chunked_prefill", True)))
    sched = caps.scheduler() if "chunked_prefill" in v else replace(caps.scheduler(), chunked_prefill=None)
    return Pool(int(v["workers"]), lay.chips, lay, sched)


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


def devices_per_card(r: Any) -> int:
    """The devices one accelerator the row counts holds: N where its accel_variant says "(N GPUs/card)"
    (v5.1/v6.0: "Intel-Arc-Pro-B60-Dual(2 GPUs/card)", Maxsun's card of two 24 GB Arc Pro B60 GPUs,
    "48 GB GDDR6" in accelerator_memory), else 1."""
    m = CARD_DEVICES.search(str(getattr(r, "accel_variant", "") or ""))
    return int(m.group(1)) if m else 1


def _device(r: Any) -> str:
    look = index("hardware").lookup
    if cpu_only(r):
        host = getattr(r, "host_processor", "")
        if isinstance(host, str) and host and (name := look(host)):
            return name
        raise SkipRow(f"no profile for the CPU {host}")
    for text in (r.accelerator, getattr(r, "accel_variant", ""), r.accel_family):
        if isinstance(text, str) and text and (name := look(text)):
            return _sized(r, text, name)
    raise SkipRow(f"no profile for {r.accel_family}")


def _sized(r: Any, text: str, name: str) -> str:
    """The profile of the accelerator `text` (resolved to `name`) with the memory its system has: where
    the row's `accelerator_memory` is empty and the system name gives a size NVIDIA-style
    (<accelerator>-<n>GB, e.g. v4.0's "GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1_TRT", whose
    accelerator column says only "NVIDIA GH200-GraceHopper-Superchip"; its system description reads
    144 GB HBM3e: inference_results_v4.0 closed/NVIDIA/systems/<system>.json accelerator_memory_capacity),
    the profile `text` of that size resolves to; else `name`."""
    memory = getattr(r, "accelerator_memory", "")
    if isinstance(memory, str) and memory:
        return name
    look = index("hardware").lookup
    for size in re.findall(r"(\d+)GB", str(getattr(r, "system_name", ""))):
        if found := look(f"{text} {size}GB"):
            return found
    return name


def layouts(model: str, device: str, wd: str, per_node: int) -> list:
    """The engine-instance layouts (mb.Parallel) of a node's accelerators whose weights fit
    (module docstring): tensor parallel over 1, 2, 4, 8 dividing the node, and for a MoE model
    expert parallel with data-parallel attention over 2 to 8 (serve_coverage.layouts)."""
    m, hw = load_model(model), load_hardware(device)
    out = [lay for n in TP_SIZES if per_node % n == 0 for lay in shapes(m, n) if runnable(m, hw, wd, lay)]
    if not out:
        raise SkipRow(f"{model} in {wd} fits no tensor-parallel group of {per_node} x {device}")
    return out


def instance_layouts(bench: Benchmark, engine: str, device: str, rnd: str, wd: str, per_node: int,
                     domain: int = 0) -> list:
    """`layouts` of a row, narrowed to the accelerators per engine instance its submitters' published
    configuration sets for the engine on that chip in the rounds read (workloads.yaml `instance_chips`,
    `instance_chips_rounds`, cited there) where the node holds such a group; else every layout (the
    rule of the module docstring). An instance wider than the node is taken where the system's
    accelerators in one scale-up domain hold it (`domain`: the row's `wide_instance`; NVIDIA's DeepSeek-R1 instances of
    8 GB200s, two trays of 4 in one NVL72 rack); 0: the node only."""
    out = layouts(bench.preset, device, wd, per_node)
    want = bench.instance_chips.get(engine, {}).get(device) if rnd in bench.instance_rounds else None
    if not want:
        return out
    if wide_instance(bench, engine, device, rnd, per_node, domain):
        m, hw = load_model(bench.preset), load_hardware(device)
        return [lay for lay in shapes(m, want) if runnable(m, hw, wd, lay)] or out
    return [lay for lay in out if lay.chips == want] or out


def cpu_launch_of(bench: Benchmark, rnd: str, system: str = "") -> int:
    """The index in `bench.cpu_engine` (workloads.yaml, cited there) of the launch a CPU-only system named
    `system` ran in round `rnd`, or -1 where no round's code was read: the first entry of the round whose
    `systems` words (the stack a system's name names, e.g. v4.0's "ITREX") one is in the name, or that
    has none (every system of its rounds)."""
    name = system.lower()
    return next((i for i, e in enumerate(bench.cpu_engine) if rnd in e.get("rounds", ())
                 and (not e.get("systems") or any(str(w).lower() in name for w in e["systems"]))), -1)


def cpu_engine_of(bench: Benchmark, rnd: str, system: str = "") -> dict:
    """The CPU-only systems' engine of `bench` in round `rnd` as its submitters' code launched it
    (`cpu_launch_of`), or {} where no round's code was read."""
    i = cpu_launch_of(bench, rnd, system)
    return bench.cpu_engine[i] if i >= 0 else {}


@dataclass(frozen=True)
class CpuLayout:
    """How a CPU engine's launch splits a socket for one scenario (`cpu_layout`)."""

    cores: float          # cores one instance computes on
    instances: float      # instances per socket (1.5: an instance of two NUMA nodes where a socket has three)
    memory: float         # the share of the socket's memory an instance streams from and holds
    max_running: int      # its scheduler's caps
    token_budget: int


def cpu_layout(engine: dict, scenario: str, device: str, cores: int, sockets: int) -> CpuLayout:
    """The instances a CPU engine's launch (`engine`, one entry of workloads.yaml `cpu_engine`) runs on
    a socket of `cores` cores in a node of `sockets` for `scenario`: the scenario's caps and, where the
    node's cores have an entry of their own (`node_cores`), its values instead. Two kinds of launch:
    - `cores_per_instance` (Intel's SGLang launch): the harness pins node cores // cores_per_instance
      instances, NUMA node by NUMA node, so a socket holds cores // cores_per_instance of them, each
      with an even share of its memory;
    - `numa_nodes_per_instance` (vLLM's data-parallel launch): one engine rank per that many NUMA nodes
      (`numa_nodes`, the socket's by device), holding their share of the socket's memory and their cores
      less the `reserved_cores` a rank leaves to its server; with `workers_per_process` (Intel's gptj
      harness: a process per group of NUMA nodes running WORKERS_PER_PROC workers), that many instances
      share each group's memory evenly, each pinned to `cores_per_instance` cores where the launch sets
      them (else to an even share of the group's)."""
    scenarios = engine.get("scenarios", {})
    if scenario not in scenarios:
        raise InvalidInputError("scenario", scenario, f"one the CPU engine's launch sets ({sorted(scenarios)})")
    run = {**scenarios[scenario], **engine.get("node_cores", {}).get(cores * sockets, {}).get(scenario, {})}
    if "unmodelled" in run:
        raise InvalidInputError("layout", f"{cores * sockets} cores, {scenario}", run["unmodelled"])
    caps = int(run["max_running"]), int(run["token_budget"])
    if "cores_per_instance" in run and "numa_nodes_per_instance" not in run:
        per = int(run["cores_per_instance"])
        if cores < per:
            raise InvalidInputError("host_processor_core_count", cores,
                                    f"at least the {per} cores one instance of the CPU engine pins")
        n = cores // per
        return CpuLayout(per, n, 1.0 / n, *caps)
    numa = engine.get("numa_nodes", {}).get(device)
    if not numa:
        raise InvalidInputError("device", device, f"a CPU whose NUMA nodes the launch's entry lists "
                                                  f"({sorted(engine.get('numa_nodes', {}))})")
    k, m = int(run["numa_nodes_per_instance"]), int(run.get("workers_per_process", 1))
    group = k * cores / numa - int(engine.get("reserved_cores", 0))
    pinned = float(run.get("cores_per_instance", group / m))
    if pinned * m > group:
        raise InvalidInputError("host_processor_core_count", cores, f"at least the {pinned * m:g} cores the "
                                f"{m} instances of the CPU engine pin in each group of {k} of {numa} NUMA nodes")
    return CpuLayout(pinned, numa * m / k, k / (numa * m), *caps)


def timed_share(engine: dict, scenario: str, cores: float, fraction: float, token_s: float) -> float:
    """The compute share of an instance of `cores` cores of a CPU engine whose launch's entry gives the engine's
    own prefill time (`prefill_token_s`: the seconds a prompt token takes on `prefill_token_s["cores"]` cores,
    by scenario, cited there): the share at which the model's seconds of a prompt token's GEMMs on the
    instance, `token_s` at `fraction` of the peak, equal that time scaled to the instance's cores (the
    compute is per core); `fraction` where the entry times no prefill for `scenario`."""
    timed = engine.get("prefill_token_s", {})
    if scenario not in timed:
        return fraction
    seconds = float(timed[scenario]) * float(timed["cores"]) / cores
    if not (math.isfinite(seconds) and seconds > 0.0):
        raise InvalidInputError("prefill_token_s", timed, "seconds a prompt token takes on a number of cores, "
                                "both finite and above 0")
    return fraction * token_s / seconds


def cpu_part(device: str, lay: CpuLayout, cores: int, share: float | None = None) -> Any:
    """The part of a `cores`-core socket of `device` one instance of a CPU engine's launch (`lay`, its
    `cpu_layout`) computes on: its cores' share of the socket's compute and its share of the memory
    (`Hardware.share`), at `share` of the compute peak where given (`timed_share`), else the profile's."""
    part = load_hardware(device).share(lay.cores / cores, lay.memory)
    if share is None or share == part.achievable.compute_fraction:
        return part
    return part.with_overrides(name=f"{part.name}-s{share:.6g}", achievable={**part.achievable.model_dump(),
                                                                             "compute_fraction": share})


def row_layouts(bench: Benchmark, engine: str, device: str, rnd: str, wd: str, per_node: int,
                launch: Launch | None, domain: int = 0) -> list:
    """The layouts a row's instance may take: its submission's published tp x pp (`Launch`), else
    `instance_layouts`."""
    if launch is not None and launch.tp:
        return [Parallel(tp=launch.tp, pp=launch.pp)]
    return instance_layouts(bench, engine, device, rnd, wd, per_node, domain)


def wide_instance(bench: Benchmark, engine: str, device: str, rnd: str, per_node: int, domain: int) -> int:
    """The accelerators of the instance the submitters' published configuration sets (workloads.yaml
    `instance_chips`) where it is wider than the node and the system's scale-up `domain` holds it, else 0
    (the row's key carries it: rows that differ only in their system's size share a prediction)."""
    want = bench.instance_chips.get(engine, {}).get(device, 0) if rnd in bench.instance_rounds else 0
    return want if per_node < want <= domain else 0


def scale_up(hw: Any, n_accelerators: Any, per_node: int) -> int:
    """The accelerators one engine instance of a system may span: its accelerators (the CSV's
    n_accelerators, else the node's) within the chip's scale-up domain (`interconnect.max_chips`: a
    GB200 NVL72 rack's 72, an 8-GPU HGX node's 8), at least the node."""
    total = int(n_accelerators) if n_accelerators == n_accelerators and n_accelerators else per_node
    link = hw.interconnect.max_chips if hw.interconnect is not None else 1
    return max(per_node, min(total, link))


def launched(runtime: str | Runtime, launch: Launch | None, device: str | None = None) -> str | Runtime:
    """`runtime` (a Runtime or a bundled runtime's name) with the served flags a submission's launch
    sets (`Launch.served`) on the chip `device` (its profile's achievable compute share: the launch's
    gemm_fraction is relative to the peak)."""
    if launch is None:
        return runtime
    runtime = load_runtime(runtime) if isinstance(runtime, str) else runtime
    if runtime.served is None:
        return runtime
    chip = load_hardware(device).achievable.compute_fraction if device else None
    update = launch.served(runtime.served, chip)
    return runtime.model_copy(update={"served": runtime.served.model_copy(update=update)}) if update else runtime


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
        texts = (str(getattr(r, "system_desc", "")).lower(), str(getattr(r, "system_name", "")).lower())
        word = next((w for t in texts for w in CPU_FORMATS if w in t), "bf16")   # the description's, else the name's
        precision = f"weights={word}"
    card = 1 if cpu_only(r) else devices_per_card(r)
    count = getattr(r, "host_processors_per_node", 1) if cpu_only(r) else r.accelerators_per_node
    per_node = card * (int(count) if count == count and count else 1)
    launch, fmt = submission_of(str(r.round), str(r.submitter), str(r.model), engine, device, str(r.scenario),
                                max(per_node, 1), stack=f"{r.framework} {r.software_stack}")
    if launch is not None and launch.context is not None and launch.generation is not None:
        pools = launch.context.workers * launch.context.n_chips + launch.generation.workers * launch.generation.n_chips
        system = r.n_accelerators if r.n_accelerators == r.n_accelerators and r.n_accelerators else per_node
        if pools > system:
            raise SkipRow(f"its disaggregated launch spans {pools} accelerators, the system {system:g}")
    wd = fmt.get("weights") or weight_format(precision, hw, str(r.round))
    quant = _quantization(wd, bench.preset, hw)
    named: dict[str, Any] = {k: v for k, v in fmt.items() if k != "weights" or v != quant.weights}
    if named:          # the formats the submission's code names (submissions.yaml), over the checkpoint's rule
        quant = replace(quant, **named)
    cpu_launch = cpu_launch_of(bench, str(r.round), str(r.system_name)) if cpu_only(r) else -1
    engine_run = bench.cpu_engine[cpu_launch] if cpu_launch >= 0 else {}
    if engine_run:         # the formats the CPU engine's published launch runs (workloads.yaml `cpu_engine`)
        wd = str(engine_run["weights"])
        quant = Quantization(wd, engine_run.get("kv"), activations=engine_run.get("activations"),
                             head_weights=engine_run.get("head_weights"))
    layouts(bench.preset, device, wd, max(per_node, 1))      # some group holds the weights
    nodes = getattr(r, "nodes", 1)
    measured = float(r.tokens_per_s / (per_node * (nodes if nodes == nodes and nodes else 1))
                     if cpu_only(r) else r.tokens_per_s_per_accel / card)
    if not (math.isfinite(measured) and measured > 0):
        raise SkipRow("no tokens per second per accelerator")
    rid = f"{r.round}/{r.submitter}/{r.system_name}/{r.benchmark}/{r.scenario}"
    cores = getattr(r, "host_processor_core_count", 0) if engine_run else 0
    tpot = float(getattr(r, "tpot_p50_ms", math.nan)) / 1e3
    return MLPerfRow(rid, str(r.round), str(r.model), str(r.scenario), str(r.accel_family), device, engine,
                     quant, max(per_node, 1), measured,
                     executor=(launch.executor if launch is not None and launch.executor
                               else executor_of(engine, f"{r.framework} {r.software_stack}", bench)),
                     cores=int(cores) if cores == cores and cores else 0, launch=launch,
                     tpot_p50_s=tpot if math.isfinite(tpot) and tpot > 0 else math.nan, cpu_launch=cpu_launch,
                     domain=0 if cpu_only(r) else wide_instance(bench, engine, device, str(r.round), max(per_node, 1),
                                                                scale_up(hw, r.n_accelerators, max(per_node, 1))))


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
    `<engine>-mlperf-<round>` where there is one, else the engine's own runtime."""
    name = f"{engine}-mlperf-{rnd}"
    return name if name in list_runtimes() else engine


# Software generations (issue 29 item 4): a round of MLPerf is a software generation of each engine,
# and TensorRT-LLM runs as two executors (workloads.yaml `executors`). A generation (generations.yaml)
# is the engine's served costs with some constants replaced: set from the executor's code, assumed,
# or fitted per round on that round's Offline rows of the fit families (data/mlperf_split.csv:
# Hopper), at least two chips, one constant a round (of the generation's `fit` entry, the one whose `from` round
# is the latest at or before it: `fitted_param`; each constant carries from its own latest round). Every other family is held out:
# forms are chosen on the select families (B200, MI300X), the report families are printed only.
# Server and Interactive rows are never fitted on. The fits themselves are mlperf_validate's (fit_generation).
GENERATIONS = "data/reference/mlperf/generations.yaml"
GENERATION_FIT = tuple(f for f, role in mlperf_roles().items() if role == "fit")


def fitted_param(g: dict, rnd: str | None = None) -> str:
    """The one constant generation `g` fits in round `rnd`: of its `fit` block's constants, the one whose
    `from` round (none: from the first) is the latest at or before `rnd` (a later round's software changed
    what it fits: tensorrt-llm-cpp's v5.1 engines fit their fp8 GEMMs' rate, not the host's per-sequence
    cost). Without a round: the block's only constant, or the one with no `from`."""
    fit = g.get("fit") or {}
    start = {k: (v or {}).get("from", "") for k, v in fit.items()}
    if not fit or len(set(start.values())) != len(start):
        raise InvalidInputError("generation fit", list(fit), "one constant fitted per round (issue 27's budget): "
                                "constants with distinct `from` rounds")
    open_ = [k for k, r in start.items() if not r or (rnd is not None and round_key(r) <= round_key(rnd))]
    if not open_:
        raise InvalidInputError("generation fit", list(fit), f"a constant fitted in round {rnd} (one without `from`)")
    return max(open_, key=lambda k: round_key(start[k]) if start[k] else ())


def generations_path() -> Path:
    return Path(str(resources.files("membound"))) / GENERATIONS


def load_generations(path: str | Path | None = None) -> dict[str, dict]:
    """{generation: its entry} of generations.yaml (the shipped file by default)."""
    return dict(yaml.safe_load(Path(path or generations_path()).read_text())["generations"])


def generation_runtime(name: str, rnd: str, override: dict | None = None,
                       generations: dict[str, dict] | None = None) -> Runtime:
    """Generation `name` in round `rnd` as a runtime: its engine's runtime (as it stands) with the
    generation's served constants, then the fitted ones of the round it carries (`carried`), then
    `override` ({constant: value}, for fits) replaced; named `<name>-mlperf-<rnd>`."""
    gens = shipped_generations() if generations is None else generations
    if name not in gens:
        raise InvalidInputError("generation", name, f"one of generations.yaml's ({', '.join(sorted(gens))})")
    g = gens[name]
    base = load_runtime(g["engine"])
    if base.served is None:
        raise InvalidInputError("generation engine", g["engine"], "an engine with a served block")
    update = {k: _constant(v["value"]) for k, v in g.get("served", {}).items()}
    for k in sorted({k for fits in (g.get("rounds") or {}).values() for k in fits}):
        src = carried(g, rnd, k)
        if src:
            update[k] = float(g["rounds"][src][k]["value"])
    graphs = ungraphed(name, g)
    if graphs is not None:
        update["ungraphed_layer_s"] = graphs[1]
    for switch in ("gemm_time", "allreduce_time"):
        if kernel_timed(name, g, rnd, switch):
            update[switch] = True
    update.update(override or {})
    return base.model_copy(update={"name": f"{name}-mlperf-{rnd}", "served": base.served.model_copy(update=update),
                                   **({"no_graph_replay": graphs[0]} if graphs is not None else {})})


def ungraphed(name: str, g: dict) -> tuple[NoGraphReplay, float] | None:
    """Where generation `g` records no CUDA graph (its `cuda_graphs` block, value false) and its predictions
    price that (`priced` true): every pass of its engine launches each kernel from the host, on every device
    (NoGraphReplay all_devices), and pays kernels_per_layer x launch_s per decoder layer (the engine's
    `ungraphed_layer_s`, core.launch_s). None where it has no such block, its value is true (graphs
    replayed: the engine's own costs) or the form is not priced (measured and not chosen: the block says)."""
    block = g.get("cuda_graphs")
    if block is None:
        return None
    for key in ("value", "priced"):
        if not isinstance(block.get(key), bool):
            raise InvalidInputError(f"generation {name} cuda_graphs.{key}", block.get(key), "true or false")
    if block["value"] or not block["priced"]:
        return None
    kernels, launch = float(block["kernels_per_layer"]["value"]), float(block["launch_s"]["value"])
    if not (kernels > 0 and 0 < launch < 1e-3):
        raise InvalidInputError(f"generation {name} cuda_graphs", (kernels, launch),
                                "kernels_per_layer > 0 and a launch_s between 0 and 1 ms")
    rule = NoGraphReplay(all_devices=True, generation=name, evidence=str(block["source"]))
    return rule, kernels * launch


def kernel_timed(name: str, g: dict, rnd: str, switch: str) -> bool:
    """Whether generation `g` in round `rnd` runs a served switch to kernel tables' time (`switch`: gemm_time,
    Served.gemm_time, its GEMMs; allreduce_time, Served.allreduce_time, its tensor-parallel all-reduces): that
    block's value and `priced` true and the round one it names. False without the block."""
    block = g.get(switch)
    if block is None:
        return False
    for key in ("value", "priced"):
        if not isinstance(block.get(key), bool):
            raise InvalidInputError(f"generation {name} {switch}.{key}", block.get(key), "true or false")
    rounds = block.get("rounds")
    if not isinstance(rounds, list) or not rounds or not all(isinstance(r, str) for r in rounds):
        raise InvalidInputError(f"generation {name} {switch}.rounds", rounds, "a list of the rounds it holds for (v5.1, ...)")
    return block["value"] and block["priced"] and rnd in rounds


def _constant(v: Any) -> float | str:
    """A generation's served constant: a number, or a word (a policy such as `preemption`) or a switch."""
    return v if isinstance(v, (str, bool)) else float(v)


def round_key(rnd: str) -> tuple[int, ...]:
    """A round's name ("v4.1") as numbers to order by ((4, 1))."""
    return tuple(int(x) for x in re.findall(r"\d+", rnd))


def carried(g: dict, rnd: str, param: str | None = None) -> str:
    """The round whose fit (of `param`; None: of any constant) generation `g` runs in round `rnd`: its own,
    else the latest earlier round's (a round's software carries forward until a later round refits it), else
    none (""). Each constant carries on its own: v5.1's fp8 rate beside v4.1's per-sequence cost."""
    earlier = [r for r, fits in (g.get("rounds") or {}).items()
               if round_key(r) <= round_key(rnd) and (param is None or param in fits)]
    return max(earlier, key=round_key, default="")


@functools.cache
def shipped_generations() -> dict[str, dict]:
    """generations.yaml as shipped, read once."""
    return load_generations()


def runtime_of(engine: str, executor: str, rnd: str) -> str | Runtime:
    """The runtime a row of `engine` run by `executor` in round `rnd` predicts with: the generation
    workloads.yaml names for that executor (generation_runtime), else `generation`'s."""
    gen = EXECUTORS.get(engine, {}).get(executor) if executor else None
    return generation_runtime(gen, rnd) if gen else generation(engine, rnd)
