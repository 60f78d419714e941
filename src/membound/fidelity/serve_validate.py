"""Served workloads against the InferenceMAX measurements (reference/serving/inferencemax.csv).

Each row is a closed loop of `conc` clients against one engine instance (see the README beside
the file): lengths uniform in [0.8 L, L] (isl/osl are their means), TTFT includes queueing, TPOT
is per request (e2e - ttft)/(osl - 1), throughput per GPU divides by n_gpus and is measured over
the whole run of 10 x conc requests (ramp-up and drain included: serve.finite_run_share).

Rows used: canonical == 1 and quality == "good". Aggregated serving without speculation is the
headline; MTP rows are their own category, predicted with DeepSeek's MTP module as the drafter
(`MTP_DRAFTS` draft steps per round, as the recipes set them; per-token acceptance
`INFERENCEMAX_MTP_ACCEPTANCE`, a constant of this random-token workload fitted on the H200 MTP
rows only, which are then reported as fitted; the B200 MTP rows are held out); so are the
disaggregated rows (all `caution`; membound.disagg; their MTP workers draft alike). A row
counts as covered when its device and model names resolve (membound.names: profile and preset
names and aliases, so another CSV of this schema with new chips or models is predicted, not
skipped); a covered row that serve() refuses is a failure, reported. Rows whose names do not
resolve are skipped with the name.

Split: the served constants of each engine are fitted on its rows of the committed split's fit
chips (membound.split, data/split.csv) that the data holds, `FIT_HARDWARE` (H100 SXM and H200),
with a cold refit leaving each of them out in turn (serve_calibrate.leave_one_chip_out); every
other chip is held out whole, as a select chip (its figures are validation figures, the ones
choices are made on) or a report chip (printed once, at the end, never tuned on).

    python -m membound.fidelity.serve_validate [--reference PATH] [--csv rows.csv] [--all]

PATH: a CSV of this schema, or a folder holding serving/inferencemax.csv (as `membound validate
--reference DIR` takes); default: the copy shipped with membound.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..serving.disagg import Pool, solve_disaggregated
from ..errors import MemboundError
from ..physics.parallel import Parallel
from ..physics.quantization import Quantization
from .reference import SkipRow
from ..serving import Fixed, Scheduler, Uniform, build, finite_run_share, run_share, solve
from ..physics.speculative import MTP_ACCEPTANCE, SpeculativeDecoding, mtp
from ..catalog.names import index
from .reference import data_set_csv, reference_dir, PROGRESS_ROWS
from ..base.safeio import Column, read_typed_frame, csv_frame, check_output_path
from ..base.progress import track
from ..catalog.hardware import load_hardware
from ..catalog.runtime import load_runtime
from . import split
from importlib import resources
from pathlib import Path

if TYPE_CHECKING:
    import pandas as pd

# the committed split's fit chips (membound.split) that the shipped served rows hold, by profile
# name: the served fits use their rows (tests/test_serve_validate.py checks the list against both)
FIT_HARDWARE = ("h100-sxm", "h200")
# The CSV's `hw` labels are CI runner families; names resolve through membound.names, except a
# label the resolver cannot decide: InferenceMAX's h100 runners are HGX H100 SXM nodes.
RUNNER_LABELS = {"h100": "h100-sxm"}
RUNTIMES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm",
            "atom": "vllm",   # AMD's ATOM has no runtime of its own yet: vLLM's served costs stand in
            "dynamo-trtllm": "tensorrt-llm", "dynamo-sglang": "sglang",   # disaggregated: the engine's workers
            "mori-sglang": "sglang", "vllm-disagg": "vllm"}
AMD = ("mi300x", "mi325x", "mi355x")
# The benchmark's precision labels -> weight formats (README beside the CSV): fp4 is NVFP4 on
# NVIDIA and MXFP4 on AMD; gpt-oss is natively MXFP4 everywhere; int4 is weight-only int4.
# Each checkpoint quantizes only some tensors (`formats`).
PRECISIONS = ("fp8", "fp4", "bf16", "fp16", "int4")
# Draft steps per round of the MTP rows' recipes (SemiAnalysisAI/InferenceX benchmarks/):
# TensorRT-LLM num_nextn_predict_layers 3, or 1 with attention DP (dsr1_fp8_h200_trt_mtp.sh,
# dsr1_fp4_b200_trt_mtp.sh); SGLang EAGLE speculative_num_steps 2, 3 draft tokens, top-k 1
# (dsr1_fp8_b200_mtp.sh). (drafts without DP attention, with it)
MTP_DRAFTS = {"trtllm": (3, 1), "sglang": (2, 2)}
# Per-token acceptance of DeepSeek-R1's MTP module on InferenceMAX's workload (random-token
# prompts, `--random-range-ratio 0.8 --ignore-eos`): a constant of that data set, not of a chip
# or of natural text (the data README: "MTP acceptance on random tokens is unrepresentative").
# Fitted by `python -m membound.fidelity.serve_calibrate --mtp` (serve_calibrate.fit_mtp_acceptance: least
# squares on log(pred / meas) of TPOT, TTFT and throughput per GPU) on the 20 canonical good H200
# MTP rows only (DeepSeek-R1-0528 fp8 on 8 x H200: SGLang 8 rows at 2 drafts, TensorRT-LLM 9 at 3
# drafts and 3 with DP attention at 1; dates 2026-01-14 .. 2026-05-20), the served engine costs
# held as bundled; the B200 MTP rows are held out. Engine by engine the same fit gives SGLang
# 0.39, TensorRT-LLM 0.58 on H200 (0.34 and 0.47 on B200, a diagnosis only): TensorRT-LLM's MTP
# recipes send the prompts through the chat template (`--use-chat-template` in InferenceX
# dsr1_fp8_h200_trt_mtp.sh, dsr1_fp4_b200_trt_mtp.sh: R1 then writes its reasoning), SGLang's
# (dsr1_fp8_b200_mtp.sh) sends the raw random tokens. The MTP rows are predicted with it;
# `speculative.mtp()` keeps MTP_ACCEPTANCE, the natural-text figure.
INFERENCEMAX_MTP_ACCEPTANCE = 0.53
RUNS_PER_CLIENT = 10.0   # num_prompts = 10 x conc (the CI default); throughput is over that finite run
                         # (serve.finite_run_share). A row's num_requests / conc replaces it where the
                         # file records it (newer single-node scripts run --num-prompts $CONC: 1 each)
# a disaggregated row's workers (assumed to draft as their engine's recipe)
ENGINE = {"dynamo-trtllm": "trtllm", "dynamo-sglang": "sglang", "mori-sglang": "sglang"}
# The GB200 dynamo-sglang recipes' wide-EP decode workers (DP attention over all their GPUs) launch
# with --max-running-requests 18432 and --chunked-prefill-size 1572864, figures for the whole
# worker that SGLang splits over its DP ranks (ai-dynamo/dynamo components/backends/sglang/
# slurm_jobs/scripts/gb200-fp4.sh and gb200-fp8.sh, which InferenceMAX's
# dsr1_*_gb200_dynamo-sglang_slurm.sh run), not the 1024 of the aggregated recipes
WIDE_EP_DECODE = {("dynamo-sglang", "gb200"): Scheduler(max_running=18432, token_budget=1572864)}


# The decode steps between the SGLang scheduler's polls for new requests in the recipes that set
# them (--scheduler-recv-interval, or --num-continuous-decode-steps: the same wait), as (below 16
# clients, from 16 clients), keyed by (framework, model, device); SemiAnalysisAI/InferenceX benchmarks/:
# - b200: dsr1_fp8_b200.sh, dsr1_fp4_b200.sh, dsr1_fp8_b200_mtp.sh: 10 below 16 clients, 30 from 16;
# - b300: single_node/dsr1_fp8_b300.sh, dsr1_fp4_b300.sh and dsr1_fp8_b300_mtp.sh (commit 563248391c29,
#   "reuses the B200 recipe"): the same 10 / 30 (the fp8 script's TP=4 branch, 8192/256 tokens only,
#   keeps 10);
# - mi300x, mi325x, mi355x: --num-continuous-decode-steps 4 (dsr1_fp8_mi300x.sh; dsr1_fp8_mi325x.sh,
#   dsr1_fp8_mi355x.sh, dsr1_fp4_mi355x.sh at commit 1fc5d73cdd31, and still in single_node/
#   dsr1_fp8_mi355x.sh at 285b6628b8b1 and dsr1_fp4_mi355x.sh at 1d3f38dab34d).
# Not found in the index, so without entries: SGLang recipes for gb200/gb300 aggregated rows,
# and the b300 TensorRT-LLM scripts (their attention-DP balancing stays the runtime default).
# H200 (dsr1_fp8_h200.sh) sets neither.
RECIPE_RECV_INTERVAL: dict[tuple[str, str, str], tuple[int, int]] = {
    ("sglang", "deepseek-r1", "b200"): (10, 30),
    ("sglang", "deepseek-r1", "b300"): (10, 30),
    ("sglang", "deepseek-r1", "mi300x"): (4, 4),
    ("sglang", "deepseek-r1", "mi325x"): (4, 4),
    ("sglang", "deepseek-r1", "mi355x"): (4, 4),
}


# TensorRT-LLM Llama-3.3-70B recipes (benchmarks/70b_fp8_h200_trt_slurm.sh, 70b_fp8_b200_trt_slurm.sh,
# 70b_fp4_b200_trt_slurm.sh; the versions in faradawn/InferenceMAX 9596d23d, jyothisambolu/InferenceMAX
# 1b563c85 and SemiAnalysisAI/InferenceX a267b4bd, of the v1 runs (TRT-LLM 1.1.0rc, Oct 2025)):
# `--max_num_tokens 16384`, and for 1k/1k below TP 8 `batch_wait_max_tokens_ratio: 0.9`,
# `batch_wait_timeout_iters: 20` ("will improve the performance"). Later versions (InferenceX
# 73ef9225) pass `--max_num_tokens $MAX_MODEL_LEN` instead (2048 at 1k/1k): not these rows, whose
# 1k/1k TTFT is 20 decode steps above 1k/8k's at 4 clients (TP 1 on H200: 547 against 152 ms, TPOT
# 20.1 ms: 395 ms = 19.7 steps), as a hold ended by the steps alone gives (batch_wait).
RECIPE_TRT_LLAMA = {("trtllm", "llama-3.3-70b", "h200"), ("trtllm", "llama-3.3-70b", "b200")}
TRT_LLAMA_TOKENS = 16384
TRT_LLAMA_BATCH_WAIT = (20, 0.9)     # (batch_wait_timeout_iters, batch_wait_max_tokens_ratio) at 1k/1k, tp < 8


# The vLLM recipes of every chip the served rows hold set `async-scheduling: true` (the config.yaml they
# write, or `--async-scheduling`), for Llama-3.3-70B and gpt-oss-120b alike: SemiAnalysisAI/InferenceX
# benchmarks/ 70b_fp8_{h100,h200}_slurm.sh, 70b_fp8_b200_docker.sh, 70b_fp8_mi300x_{slurm,docker}.sh,
# gptoss_fp4_{h100,h200,mi300x}_slurm.sh, gptoss_fp4_{h100,b200,mi300x}_docker.sh, every version from
# 2025-09-24 to 2025-11-21 (git log; the rows are dated 2025-10-17 .. 2025-11-14; the gpt-oss scripts of
# 2025-09-12/18 did not, the MI300X one dropped the flag on 2026-01-21 with vLLM 0.14). vLLM then runs
# two batches in flight (MultiprocExecutor.max_concurrent_batches: 2 under async_scheduling) and
# EngineCore.step_with_batch_queue schedules and launches step k+1 before it waits for step k
# ("fulfilling the batch queue has a higher priority than getting model outputs"; vllm-project/vllm
# vllm/v1/executor/multiproc_executor.py, vllm/v1/engine/core.py): a request reaching the engine
# mid-step joins the step after the one already launched, one step ahead (Scheduler.lookahead_steps 1;
# the engine's own default, without the flag, is 0: runtime vllm's served block).
RECIPE_ASYNC_SCHEDULING = {("vllm", hw) for hw in ("h100-sxm", "h200", "b200", "mi300x")}   # profile names
# Token budgets a recipe sets other than the engine's 8192 (vLLM --max-num-batched-tokens): the MI300X
# Llama-3.3-70B scripts pass 131072 (70b_fp8_mi300x_{slurm,docker}.sh, every version from 2025-09-24 to
# 2025-10-30), so an 8k prompt never splits into chunks there
RECIPE_TOKEN_BUDGET = {("vllm", "llama-3.3-70b", "mi300x"): 131072}
# TensorRT-LLM's --max_num_tokens in the gpt-oss and DeepSeek-R1 recipes of the rows' chips (its served
# block's 8192 otherwise; per rank under attention DP, as the engine takes it): gpt-oss-120b 20000
# (gptoss_fp4_h200_trt_slurm.sh every version 2025-09-28 .. 2026-01-21, `--max_num_tokens 20000`;
# gptoss_fp4_b200_trt_slurm.sh 2025-10-20 .. 2025-12-02, MAX_NUM_TOKENS=20000); DeepSeek-R1 without MTP
# ceil((conc + isl + 64) / 64) x 64, the nominal isl (dsr1_fp8_h200_trt_slurm.sh, dsr1_fp8_b200_trt_slurm.sh,
# dsr1_fp4_b200_trt_slurm.sh, every version 2025-10-29 .. 2025-11-21: MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)
# /64*64 ))): a step takes one whole prompt beside the decodes. Their MTP scripts size it otherwise
# ((MTP+1) x max batch + isl ...) and are left at the engine's value.
RECIPE_TRT_TOKENS = {("trtllm", "gpt-oss-120b", hw): 20000 for hw in ("h200", "b200")}
RECIPE_TRT_DSR1 = {("trtllm", "deepseek-r1", hw) for hw in ("h200", "b200")}


# SGLang's DeepSeek-R1 recipe on H200 (the fit chip): --chunked-prefill-size 32768, --max-running-requests
# 512 at 1k/1k and 256 otherwise (dsr1_fp8_h200_slurm.sh and dsr1_fp8_h200.sh, then
# single_node/dsr1_fp8_h200.sh: every version from 2025-09-19 to 2026-05-12; the rows are dated 2025-10 ..
# 2026-03). The B200 and MI300X recipes changed theirs inside their rows' window (B200 128 / 32768, then by
# concurrency; MI300X 196608, then 131072) and the MTP rows run other scripts: not entered, those rows
# keep the engine's values.
RECIPE_SGLANG_H200 = ("sglang", "deepseek-r1", "h200")
SGLANG_H200_CHUNK = 32768
SGLANG_H200_RUNNING = {(1024, 1024): 512}   # else 256
SGLANG_H200_RUNNING_ELSE = 256


def _served_max_running(runtime: str) -> int:
    served = load_runtime(runtime).served
    assert served is not None, f"{runtime} has no served block"
    return int(served.max_running)


def trt_dsr1_tokens(conc: int, isl: int) -> int:
    """The DeepSeek-R1 TensorRT-LLM recipes' max_num_tokens: (conc + isl + 64 + 63) // 64 x 64."""
    return (conc + isl + 64 + 63) // 64 * 64


def recipe_scheduler(framework: str, device: str, model: str, conc: int, *, isl: int = 0, osl: int = 0,
                     tp: int = 1, mtp: bool = False) -> Scheduler | None:
    """An aggregated row's scheduler flags its recipe sets beyond the runtime's defaults
    (RECIPE_RECV_INTERVAL, RECIPE_TRT_LLAMA, RECIPE_ASYNC_SCHEDULING, RECIPE_TOKEN_BUDGET,
    RECIPE_TRT_TOKENS, RECIPE_TRT_DSR1, RECIPE_SGLANG_H200; device: the profile name; isl, osl: the nominal lengths; mtp: a
    row with MTP drafts, whose recipes differ), or None."""
    key = (framework, model, device)
    if (framework, device) in RECIPE_ASYNC_SCHEDULING:
        return Scheduler(lookahead_steps=1, token_budget=RECIPE_TOKEN_BUDGET.get(key))
    if key in RECIPE_TRT_TOKENS:
        return Scheduler(token_budget=RECIPE_TRT_TOKENS[key])
    if key in RECIPE_TRT_DSR1 and not mtp:
        # a step carries at most the budget's decode tokens: the engine's max batch (trtllm-serve's default,
        # the served block's max_running) caps the running sequences only where it is the smaller
        budget = trt_dsr1_tokens(conc, isl)
        return Scheduler(token_budget=budget, max_running=min(budget, _served_max_running(RUNTIMES[framework])))
    if (framework, model, device) in RECIPE_TRT_LLAMA:
        wait = TRT_LLAMA_BATCH_WAIT if (isl, osl) == (1024, 1024) and tp < 8 else (0, 0.0)
        return Scheduler(token_budget=TRT_LLAMA_TOKENS, batch_wait_steps=wait[0], batch_wait_ratio=wait[1])
    if key == RECIPE_SGLANG_H200 and not mtp:
        return Scheduler(token_budget=SGLANG_H200_CHUNK,
                         max_running=SGLANG_H200_RUNNING.get((isl, osl), SGLANG_H200_RUNNING_ELSE))
    steps = RECIPE_RECV_INTERVAL.get((framework, model, device))
    if steps is None:
        return None
    return Scheduler(recv_interval_steps=steps[conc >= 16])


@dataclass
class ServedRow:
    """One measurement and what serve() needs to predict it."""

    id: str
    framework: str
    runtime: str
    model: str
    hw: str               # the CSV's label
    device: str           # membound profile name
    quantization: Quantization   # the checkpoint's formats (`formats`)
    parallel: Parallel
    n_gpus: int
    conc: int
    prompt: Fixed | Uniform
    output: Fixed | Uniform
    tpot_s: float
    ttft_s: float
    tput_per_gpu: float
    date: str
    kind: str             # "aggregated" | "mtp" | "disaggregated"
    fitted: bool = False
    spec: SpeculativeDecoding | None = None   # the drafter of an MTP row
    pools: tuple[Pool, Pool] | None = None    # (prefill, decode) of a disaggregated row
    scheduler: Scheduler | None = None   # the recipe's flags beyond the runtime's defaults (the decode
                                         # workers' for a disaggregated row: WIDE_EP_DECODE)
    runs: float = RUNS_PER_CLIENT        # requests per client in the run (num_requests / conc)
    pred: dict = field(default_factory=dict)

    @property
    def weight_dtype(self) -> str:
        """The routed experts' (or the whole model's) format."""
        return self.quantization.weights

    @property
    def category(self) -> str:
        return f"{self.framework} {self.model} {self.hw}"

    @property
    def role(self) -> str:
        """"fit" (a row of the fitting chips, FIT_HARDWARE), else its chip's role in the committed
        split (membound.split): "report", or "select"."""
        if self.fitted:
            return "fit"
        return "report" if split.role("chip", self.device) == "report" else "select"


def formats(precision: str, model: str, checkpoint: str, amd: bool, fp4_chip: bool = False) -> Quantization:
    """The tensor formats of the checkpoint a row served (KV fp8, as the recipes run), from the
    checkpoints' model cards and quantization configs:
    - gpt-oss-120b (openai/gpt-oss-120b card and config.json `modules_to_not_convert`): only the
      MoE experts are MXFP4; attention, router, embeddings and the untied LM head stay bf16. On an
      NVIDIA chip with fp4 (`fp4_chip`: Blackwell) the experts compute with MXFP8 activations
      (W4A8), not at the fp4 rate: TensorRT-LLM's deployment guide for GPT-OSS (MoE backend
      support matrix: B200/GB200/B300/GB300 MXFP8 activations, MXFP4 weights, TRTLLM backend)
      and vLLM under VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (SemiAnalysisAI/InferenceX
      benchmarks/gptoss_fp4_b200_docker.sh). Hopper's run bf16 activations (the guide: H200 BF16,
      TRITON), as the rule gives where the chip has no fp4.
    - NVIDIA ModelOpt checkpoints (nvidia/Llama-3.3-70B-Instruct-FP4 and -FP8, and
      nvidia/DeepSeek-R1-0528-FP4 cards: "only the weights and activations of the linear operators
      within transformers blocks are quantized"): the LM head and the embedding stay bf16.
      DeepSeek-R1-0528-FP4 (v1) also leaves attention unquantized (the v2 card:
      "Compared to nvidia/DeepSeek-R1-0528-FP4, this checkpoint additionally quantizes the wo
      module in attention layers"), so v1's non-expert tensors are mostly bf16 (attention 11.4B of
      15.2B parameters: priced bf16, the 3.7B of dense and shared-expert FFNs with them); v2 (and
      an unrecorded checkpoint, the v2 path of the later recipes) keeps only the q/kv projections
      (4.2B) in bf16, priced nvfp4 with the FFNs and wo (10.9B): a group per tensor class is
      more than this split expresses.
    - AMD's MXFP4 DeepSeek (amd/DeepSeek-R1-0528-MXFP4 quark recipe, `--exclude_layers "*lm_head"`):
      every linear layer MXFP4 but the LM head.
    - DeepSeek-R1 fp8 as released (block-fp8 linear layers; deepseek-ai/DeepSeek-V3
      inference/model.py builds the head and embedding in the default bf16).
    - Kimi-K2.5 int4: INT4 (group 32, bf16 scales: 4.5 bits) routed experts, bf16 elsewhere
      (moonshotai card: native INT4 QAT of the MoE components)."""
    kv = "fp8"
    if model.startswith("gpt-oss"):
        return Quantization("mxfp4", kv, dense_weights="bf16", expert_activations="fp8" if fp4_chip and not amd else None)
    if precision == "int4":
        return Quantization("int4_g32", kv, dense_weights="bf16")
    if precision == "fp4" and amd:
        return Quantization("mxfp4", kv, head_weights="bf16")
    if precision == "fp4" and model.startswith("deepseek") and checkpoint.lower().endswith("r1-0528-fp4"):
        return Quantization("nvfp4", kv, dense_weights="bf16")
    if precision == "fp4":
        return Quantization("nvfp4", kv, head_weights="bf16")
    if precision == "fp8" and (model.startswith("deepseek") or model.startswith("llama")):
        return Quantization("fp8", kv, head_weights="bf16")
    return Quantization(precision, kv)


def resolve_device(label: str) -> str | None:
    """The profile a CSV `hw` label names (a runner family such as h100, or any name or alias
    the resolver knows), or None."""
    return RUNNER_LABELS.get(label) or index("hardware").lookup(label)


def resolve_model(hf_id: str) -> str | None:
    """The preset a CSV `model` (a Hugging Face id) names, through presets' names and aliases, or None."""
    return index("model").lookup(hf_id)


def served_csv(path=None):
    """The served CSV to read: `path` itself when it is a file; in a folder, its
    serving/inferencemax.csv or inferencemax.csv; None: the copy shipped with membound."""

    if path is None:        # $MEMBOUND_REFERENCE_DIR's served rows when it has them, else the shipped copy
        cand = reference_dir(None) / "serving" / "inferencemax.csv"
        return cand if cand.is_file() else Path(str(resources.files("membound"))) / SHIPPED
    return data_set_csv(path, "serving", "inferencemax.csv", "a served CSV of the InferenceMAX schema")


SHIPPED = "data/reference/serving/inferencemax.csv"
REQUIRED = ("id", "hw", "n_gpus", "tp", "dp_attention", "disagg", "framework", "model", "precision",
            "spec_decoding", "conc", "isl", "osl", "isl_nominal", "osl_nominal", "ttft_median_ms",
            "tpot_median_ms", "output_tput_per_gpu", "quality", "canonical", "date_est")


def _schema() -> dict:
    """What each typed column of the served CSV holds (safeio.read_typed_frame parses every cell
    by it; a row with a cell outside it is skipped, named). Counts are whole numbers, lengths and
    times positive numbers below 1e9 (a measured 1e-320 would make errors infinite)."""
    # an optional count may be 0 (the CSV's disaggregated pools write 0 for "none recorded")
    count = lambda what, optional=True: Column("int", 0 if optional else 1, 10**7, optional, what)   # noqa: E731
    figure = lambda what, optional=True, lo=1e-6: Column("float", lo, 1e9, optional, what)  # noqa: E731
    return {
        "n_gpus": count("GPUs", optional=False), "conc": count("clients", optional=False),
        "canonical": Column("int", 0, 1, False, "flags (0 or 1)"), "tp": count("GPUs"), "ep": count("GPUs"),
        "n_prefill_gpus": count("GPUs"), "n_decode_gpus": count("GPUs"), "prefill_tp": count("GPUs"),
        "prefill_ep": count("GPUs"), "prefill_workers": count("workers"), "decode_workers": count("workers"),
        "num_requests": count("requests"), "config_n_meas": count("measurements"),
        "isl": figure("tokens", False), "osl": figure("tokens", False), "isl_nominal": figure("tokens", False),
        "osl_nominal": figure("tokens", False), "ttft_median_ms": figure("ms", False),
        "tpot_median_ms": figure("ms", False), "output_tput_per_gpu": figure("tok/s", False),
        **{c: figure("ms") for c in ("ttft_mean_ms", "tpot_mean_ms", "ttft_p99_ms", "tpot_p99_ms", "itl_median_ms",
                                     "itl_mean_ms", "e2el_median_ms", "e2el_mean_ms", "duration_s")},
        **{c: figure("tok/s") for c in ("intvty_median_tok_s_user", "total_tput_per_gpu",
                                         "output_tput_per_decode_gpu")},
        "little_ratio": figure("(a ratio)", lo=0.0), "tpot_rel_to_canonical": figure("(a ratio)", lo=0.0),
        "output_tput_derived": Column("int", 0, 1, True, "flags (0 or 1)"),
        "disagg": Column("bool", optional=False), "dp_attention": Column("bool"),
        "prefill_dp_attention": Column("bool"),
    }


def _length(mean: float, nominal: float) -> Fixed | Uniform:
    """The CI sampler: uniform integers in [int(0.8 L), L] (mean ~0.9 L); else the mean, fixed."""
    if nominal > 0 and abs(mean - (int(0.8 * nominal) + nominal) / 2.0) <= 0.02 * nominal:
        return Uniform(int(0.8 * nominal), int(nominal))
    return Fixed(max(int(round(mean)), 2))


def load_rows(path=None, all_rows: bool = False, kinds: tuple[str, ...] = ("aggregated",),
              mtp_acceptance: float = INFERENCEMAX_MTP_ACCEPTANCE) -> tuple[list[ServedRow], list[tuple[str, str]]]:
    """(rows to predict, [(id, why skipped)]) from the canonical, good served rows of `kinds`
    ("aggregated", the headline; "mtp" and "disaggregated", their own categories). Every
    disaggregated row is quality "caution" (system-level, renormalised to all GPUs): with that
    kind, the canonical caution rows that are disaggregated are taken too."""
    rows: list[ServedRow] = []
    drafters: dict[tuple[str, int], SpeculativeDecoding] = {}
    r: Any     # a CSV row: its columns' types are the file's, not known to the type checker
    frame, skipped = _read_served(path, all_rows, kinds)
    tuples = frame.itertuples(index=False)
    for r in (track(tuples, "served rows", total=len(frame), unit=" rows") if len(frame) > PROGRESS_ROWS else tuples):
        try:
            rows.append(_served_row(r, kinds, drafters, mtp_acceptance))
        except SkipRow as e:
            skipped.append((r.id, str(e)))
    return rows, skipped


def _read_served(path, all_rows: bool, kinds: tuple[str, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The served CSV, every typed cell parsed strictly (safeio.read_typed_frame: a bad cell
    skips its row, named in the second item), the pool columns filled where absent; the
    canonical good rows (and the disaggregated caution ones where that kind is asked) unless all."""
    d, bad = read_typed_frame(served_csv(path), REQUIRED, _schema())
    for c in ("n_prefill_gpus", "prefill_workers", "n_decode_gpus", "decode_workers", "prefill_dp_attention"):
        if c not in d.columns:
            d[c] = math.nan
    if all_rows:
        return d, bad
    caution = (d.quality == "caution") & d.disagg.astype(bool) & ("disaggregated" in kinds)
    return d[(d.canonical == 1) & ((d.quality == "good") | caution)], bad


def _served_row(r: Any, kinds: tuple[str, ...], drafters: dict[tuple[str, int], SpeculativeDecoding],
                mtp_acceptance: float) -> ServedRow:
    """One CSV row as a ServedRow; SkipRow where it is not predicted. `drafters` caches the MTP
    drafts by (model, draft steps)."""
    kind = "disaggregated" if bool(r.disagg) else ("mtp" if r.spec_decoding != "none" else "aggregated")
    model, device = _resolve_row(r)
    if kind not in kinds:
        raise SkipRow(f"{kind} rows: their own category")
    dp = str(r.dp_attention).lower() == "true"
    spec = _drafter(r, model, dp, drafters, mtp_acceptance) if r.spec_decoding != "none" else None
    pools = _pools(r) if kind == "disaggregated" else None
    if kind == "disaggregated" and pools is None:
        raise SkipRow("disaggregated: pool topology not recorded")
    layout = _instance_layout(r, dp, pools)
    n = int(r.n_gpus)
    return ServedRow(
        id=r.id, framework=r.framework, runtime=RUNTIMES[r.framework], model=model,
        hw=r.hw, device=device, quantization=formats(r.precision, model, str(getattr(r, "checkpoint", "")),
                                                     r.hw in AMD or load_hardware(device).vendor == "AMD",
                                                     load_hardware(device).supports("fp4")),
        parallel=layout,
        n_gpus=n, conc=int(r.conc), prompt=_length(float(r.isl), float(r.isl_nominal)),
        output=_length(float(r.osl), float(r.osl_nominal)), tpot_s=float(r.tpot_median_ms) / 1e3,
        ttft_s=float(r.ttft_median_ms) / 1e3, tput_per_gpu=float(r.output_tput_per_gpu),
        date=str(r.date_est), kind=kind, fitted=device in FIT_HARDWARE, spec=spec, pools=pools,
        scheduler=(WIDE_EP_DECODE.get((r.framework, device)) if layout.ep > 1 else None) if pools
        else recipe_scheduler(r.framework, device, model, int(r.conc), isl=int(r.isl_nominal),
                              osl=int(r.osl_nominal), tp=int(r.tp), mtp=kind == "mtp"), runs=_runs(r))


def _runs(r: Any) -> float:
    """Requests per client in the row's run: its num_requests / conc where recorded, else the CI
    default RUNS_PER_CLIENT (a benchmark setting, like the lengths, not a measured speed)."""
    v = float(getattr(r, "num_requests", math.nan)) / float(r.conc)
    return v if math.isfinite(v) and v > 0 else RUNS_PER_CLIENT


def _resolve_row(r: Any) -> tuple[str, str]:
    """The row's model preset and device profile; SkipRow where a name, the precision or the
    framework is not known."""
    model = resolve_model(str(r.model))
    device = resolve_device(str(r.hw))
    if model is None:
        raise SkipRow(f"no preset for {r.model}")
    if device is None:
        raise SkipRow(f"no profile for {r.hw}")
    if r.precision not in PRECISIONS:
        raise SkipRow(f"precision {r.precision!r} not one of {', '.join(PRECISIONS)}")
    if r.framework not in RUNTIMES:
        raise SkipRow(f"no runtime for framework {r.framework}")
    return model, device


def _drafter(r: Any, model: str, dp: bool, drafters: dict[tuple[str, int], SpeculativeDecoding],
             mtp_acceptance: float) -> SpeculativeDecoding:
    """The MTP drafter of an MTP row: its engine recipe's draft steps (with or without DP attention)."""
    engine = ENGINE.get(r.framework, r.framework)
    if engine not in MTP_DRAFTS:
        raise SkipRow(f"mtp rows of {r.framework}: draft length unknown")
    gamma = MTP_DRAFTS[engine][dp]
    return drafters.setdefault((model, gamma), mtp(model, gamma, mtp_acceptance))


def _instance_layout(r: Any, dp: bool, pools: tuple[Pool, Pool] | None) -> Parallel:
    """The layout of the engine instance: the row's n GPUs (expert parallel under DP attention),
    or a disaggregated row's decode worker."""
    if pools is None:      # one engine instance of n chips
        n, tp = int(r.n_gpus), int(r.tp)
        layout, instance = (Parallel(ep=n) if dp and tp == n and n > 1 else Parallel(tp=tp)), n
    else:                  # the instance is a decode worker
        layout, instance = pools[1].parallel or Parallel(tp=pools[1].n_chips), pools[1].n_chips
    if layout.chips != instance:
        raise SkipRow(f"layout tp={layout.tp} on {instance} GPUs")
    return layout


def _pools(r) -> tuple[Pool, Pool] | None:
    """(prefill, decode) pools of a disaggregated row, or None when its split is not recorded:
    each worker a tensor-parallel group of its chips, or expert-parallel with DP attention."""
    counts = (r.n_prefill_gpus, r.prefill_workers, r.n_decode_gpus, r.decode_workers, r.n_gpus)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 1 for v in counts):
        return None
    n_p, w_p, n_d, w_d, _ = (int(v) for v in counts)
    if n_p % w_p or n_d % w_d or n_p + n_d != int(r.n_gpus):
        return None
    pools = []
    for workers, chips, dp in ((w_p, n_p // w_p, r.prefill_dp_attention), (w_d, n_d // w_d, r.dp_attention)):
        wide = str(dp).lower() == "true" and chips > 1
        pools.append(Pool(workers, chips, Parallel(ep=chips) if wide else Parallel(tp=chips)))
    return pools[0], pools[1]


def predict(rows: list[ServedRow], runtimes: dict | None = None) -> list[ServedRow]:
    """Fill row.pred (tpot_s, ttft_s, tput_per_gpu) with the steady-state solver, one vectorised
    solve per configuration. runtimes: {name: Runtime} to use instead of the bundled ones (fits)."""
    groups: dict = {}
    for r in rows:
        key = (r.runtime, r.model, r.device, r.quantization, r.parallel, r.n_gpus, r.prompt, r.output, r.spec,
               r.pools, r.scheduler)
        groups.setdefault(key, []).append(r)
    for (rt, model, device, q, layout, n, prompt, output, spec, pools, dsched), members in groups.items():
        runtime = (runtimes or {}).get(rt, rt)
        conc = np.array([m.conc for m in members], float)
        runs = np.array([m.runs for m in members], float)
        kw = dict(prompt=prompt, output=output, quantization=q, runtime=runtime, speculative=spec)
        try:
            sm, sched, _ = build(model, device, n_chips=layout.chips, parallel=layout, scheduler=dsched, **kw)
            if pools is None:
                st = solve(sm, sched, prompt.mean, output.mean, concurrency=conc)
                tpot, ttft, x, chips = st.tau, st.ttft, st.request_rate, n
                share = run_share(sm, st, output, conc, runs)
            else:      # a decode pool of `sm` workers behind a prefill pool
                pre, pool = pools
                sm_p, sched_p, _ = build(model, device, n_chips=pre.n_chips, parallel=pre.parallel, **kw)
                dst = solve_disaggregated(sm_p, sched_p, sm, sched, pre.workers, pool.workers, prompt.mean,
                                          output.mean, conc)
                tpot, ttft, x, chips = dst.step / sm.tokens_per_step, dst.ttft, dst.request_rate, n
                tau0 = float(sm.step(1.0, dst.u, h=dst.h)) / sm.tokens_per_step     # the decode workers drain
                share = finite_run_share(ttft + (output.mean - 1.0) * tpot, tau0, output, conc, runs)
        except MemboundError as e:
            for m in members:
                m.pred = {"error": str(e)}
            continue
        for i, m in enumerate(members):
            m.pred = {"tpot_s": float(tpot[i]), "ttft_s": float(ttft[i]),
                      "tput_per_gpu": float(x[i] * share[i]) * output.mean / chips}
    return rows


METRICS = (("tpot_s", "TPOT"), ("ttft_s", "TTFT"), ("tput_per_gpu", "tput/GPU"))


def errors(rows: list[ServedRow], metric: str) -> np.ndarray:
    """Relative errors pred/meas - 1 of the predicted rows."""
    return np.array([r.pred[metric] / getattr(r, metric) - 1.0 for r in rows if "error" not in r.pred])


def summary(rows: list[ServedRow]) -> dict:
    """Median |error| per metric, the row count and the refusals."""
    ok = [r for r in rows if "error" not in r.pred]
    out: dict[str, float] = {"rows": len(rows), "predicted": len(ok)}
    for key, _ in METRICS:
        e = np.abs(errors(ok, key))
        out[key] = float(np.median(e)) if e.size else math.nan
    return out


def report(rows: list[ServedRow], skipped: list, others: dict[str, list[ServedRow]] | None = None,
           source=None) -> str:
    """The headline (aggregated rows) and, apart, each category of `others` ({key: rows});
    `source`: the CSV read, named in the header (None: the shipped copy)."""
    lines = ["Served workloads (InferenceMAX, canonical & good): median |error| of the steady-state solver",
             f"file: {served_csv(source)}",
             f"fitted on {', '.join(FIT_HARDWARE)} rows (the split's fit chips); every other chip held out whole", ""]

    def line(name, rs):
        s = summary(rs)
        return (f"  {name:<46} {s['predicted']:>4}/{s['rows']:<4} " +
                "  ".join(f"{label} {100 * s[key]:5.1f}%" if s["predicted"] else f"{label}     - "
                          for key, label in METRICS))
    val = [r for r in rows if r.role == "select"]
    lines.append(line("VALIDATION (select chips held out), all", val))
    lines.append(line("VALIDATION, NVIDIA", [r for r in val if r.hw not in AMD]))
    lines.append(line("VALIDATION, AMD", [r for r in val if r.hw in AMD]))
    lines.append(line("fitted rows (not a measure of accuracy)", [r for r in rows if r.fitted]))
    lines.append("")
    lines.append("by engine x model x chip (* = fitted rows), select chips:")
    for c in sorted({r.category for r in rows if r.role != "report"}):
        rs = [r for r in rows if r.category == c]
        lines.append(line(("* " if rs[0].fitted else "  ") + c, rs))
    refused = [r for r in rows if "error" in r.pred]
    covered = len(rows) - len(refused)
    lines.append("")
    lines.append(f"coverage: {covered}/{len(rows)} aggregated rows with a profile and preset predicted "
                 f"({100 * covered / max(len(rows), 1):.1f}%)")
    for r in refused[:5]:
        lines.append(f"  refused {r.id} {r.category} conc {r.conc}: {r.pred['error'][:160]}")
    reasons: dict = {}
    for _, why in skipped:
        reasons[why] = reasons.get(why, 0) + 1
    lines.append("skipped: " + "; ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda t: -t[1])))
    for key, rs in (others or {}).items():
        accept = next((r.spec.acceptance_rate for r in rs if r.spec is not None), None)
        lines += ["", TITLES[key] + ("" if key != "mtp" else f", acceptance {accept} per token"
                                     + (ACCEPTANCE_SOURCE.get(accept, " (given)") if accept is not None else ""))]
        lines.append(line("VALIDATION (select chips held out)", [r for r in rs if r.role == "select"]))
        lines.append(line(FITTED_CHIPS[key], [r for r in rs if r.fitted]))
        for c in sorted({r.category for r in rs if r.role != "report"}):
            cat = [r for r in rs if r.category == c]
            lines.append(line(("* " if cat[0].fitted else "  ") + c, cat))
    lines += ["", "REPORT (report chips held out; never tuned on):"]
    rep = [r for r in rows if r.role == "report"]
    lines.append(line("REPORT, all", rep))
    lines.append(line("REPORT, NVIDIA", [r for r in rep if r.hw not in AMD]))
    lines.append(line("REPORT, AMD", [r for r in rep if r.hw in AMD]))
    for c in sorted({r.category for r in rep}):
        lines.append(line("  " + c, [r for r in rep if r.category == c]))
    for key, rs in (others or {}).items():
        lines.append(line(f"REPORT, {key}", [r for r in rs if r.role == "report"]))
        for c in sorted({r.category for r in rs if r.role == "report"}):
            lines.append(line("  " + c, [r for r in rs if r.category == c]))
    return "\n".join(lines)


# how the report names the MTP category's acceptance
ACCEPTANCE_SOURCE = {INFERENCEMAX_MTP_ACCEPTANCE: " (this workload's, fitted on the H200 MTP rows)",
                     MTP_ACCEPTANCE: " (DeepSeek-V3's on natural text, cited, not fitted)"}
# what a category's rows on the fitting chips are to its figures
FITTED_CHIPS = {"mtp": "fitted rows (acceptance fitted on them)",
                "disaggregated": "on the fitted chips (DP rows fit all-to-all)"}
TITLES = {"mtp": "MTP rows (speculative decoding, own category): DeepSeek's MTP module drafts "
                 + ", ".join(f"{e} {a} ({b} with DP attention)" for e, (a, b) in MTP_DRAFTS.items())
                 + " steps per round",
          "disaggregated": "Disaggregated rows (own category; every one quality 'caution', canonical): a prefill pool's "
                           "TTFT (KV transfer over NVLink or the NIC included), a decode pool's TPOT, throughput over all "
                           "GPUs (membound.disagg); workers beyond one NVLink domain cross the NIC"}


def other_categories(path=None, mtp_acceptance: float = INFERENCEMAX_MTP_ACCEPTANCE) -> dict[str, list[ServedRow]]:
    """The served categories apart from the headline, predicted: {key: rows} (keys of TITLES)."""
    return {kind: predict(load_rows(path, kinds=(kind,), mtp_acceptance=mtp_acceptance)[0]) for kind in TITLES}


def served_report(path=None) -> dict:
    """The served categories as data, each a summary() dict: "validation" (select chips held out),
    "validation_nvidia", "validation_amd", "report" (report chips held out, never tuned on),
    "report_nvidia", "report_amd", "fitted", "categories": {name: {..., "role"}}, "skipped":
    count, and apart from the headline "mtp_validation", "mtp_report", "mtp_fitted_chips",
    "disaggregated_validation", ... (membound.split names each chip's role)."""
    path = _served_or_none(path)
    rows, skipped = load_rows(path)
    predict(rows)
    out: dict = {}
    for k, rs in other_categories(path).items():
        out[f"{k}_fitted_chips"] = summary([r for r in rs if r.fitted])
        for role, label in (("select", "validation"), ("report", "report")):
            out[f"{k}_{label}"] = summary([r for r in rs if r.role == role])
    for role, label in (("select", "validation"), ("report", "report")):
        rs = [r for r in rows if r.role == role]
        out.update({label: summary(rs), f"{label}_nvidia": summary([r for r in rs if r.hw not in AMD]),
                    f"{label}_amd": summary([r for r in rs if r.hw in AMD])})
    return {**out, "fitted": summary([r for r in rows if r.fitted]),
            "categories": {c: {**summary([r for r in rows if r.category == c]),
                               "fitted": any(r.fitted for r in rows if r.category == c),
                               "role": next(r.role for r in rows if r.category == c)}
                           for c in sorted({r.category for r in rows})},
            "skipped": len(skipped)}


def section(path=None) -> str:
    """The served report as text (for `membound validate [--reference PATH]`): `path` a served
    CSV or a folder holding serving/inferencemax.csv; a folder or file without served rows (a
    measurements.csv) reports the shipped served rows."""
    path = _served_or_none(path)
    rows, skipped = load_rows(path)
    predict(rows)
    return report(rows, skipped, other_categories(path), source=path)


def _served_or_none(path):
    """`path` when it holds served rows (see served_csv), else None (the shipped copy)."""
    if path is None:
        return None
    try:
        csv = served_csv(path)
    except MemboundError:
        return None
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    try:
        header = pd.read_csv(csv, nrows=0, encoding="utf-8-sig").columns
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError):   # the strict reader names what is wrong
        return path
    return path if set(REQUIRED) <= set(header) else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.serve_validate", description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=None, metavar="PATH",
                    help="a served CSV of the InferenceMAX schema, or a folder holding serving/inferencemax.csv "
                         "(default: the copy shipped with membound)")
    ap.add_argument("--csv", help="write one line per row with predictions")
    ap.add_argument("--all", action="store_true", help="every row, not only canonical & good")
    ap.add_argument("--mtp-acceptance", type=float, default=INFERENCEMAX_MTP_ACCEPTANCE, metavar="A",
                    help=f"per-token acceptance for the MTP rows (default {INFERENCEMAX_MTP_ACCEPTANCE}, this workload's, "
                         f"fitted on the H200 MTP rows; {MTP_ACCEPTANCE} is DeepSeek-V3's on natural text)")
    a = ap.parse_args(argv)
    try:
        if a.csv:      # checked before the work
            check_output_path(a.csv, "--csv", (".csv",))
        others = other_categories(a.reference, mtp_acceptance=a.mtp_acceptance)
        rows, skipped = load_rows(a.reference, all_rows=a.all)
    except MemboundError as e:
        ap.error(str(e))
    predict(rows)
    try:
        print(report(rows, skipped, others, source=a.reference))
    except BrokenPipeError:          # piped into head
        return 0
    if a.csv:
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it

        csv_frame(pd.DataFrame([{"id": r.id, "category": r.category, "conc": r.conc, "fitted": r.fitted, "role": r.role,
                                 "date": r.date,
                       "tpot_s": r.tpot_s, "ttft_s": r.ttft_s, "tput_per_gpu": r.tput_per_gpu,
                       **{f"pred_{k}": v for k, v in r.pred.items()}} for r in rows])).to_csv(a.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
