"""The published measurements in `measurements.csv`, turned into scenarios
membound can predict, and the prediction of each.

`load_reference()` maps every row's free text to names membound knows (hardware profile,
model preset, dtype, runtime, Result field) or lists it as skipped with the reason. The folder
is the one `reference_dir()` names: an explicit path, `$MEMBOUND_REFERENCE_DIR`, or the copy shipped
in the package.

Mapping choices (each is an assumption a reader can check):
- Apple rows name GPU cores and GB/s: the profile of that chip with that bandwidth is used
  (M3 Max 300 GB/s -> apple-m3-max-30c, M4 Max 410 GB/s -> apple-m4-max-32c) and its compute
  is scaled by cores / profile cores (an M1 Max 24-core has 24/32 of the 32-core's FLOP/s;
  bandwidth is the same within a class). "M4 Max (36GB)" is the binned 32-core part.
- dtypes: f16 -> fp16; gpt-oss GGUF `mxfp4` files keep the non-expert tensors at q8_0 (the
  11.27 GiB gpt-oss-20b file = 19.1e9 expert weights x 4.25 bits + 1.8e9 others x 8.5 bits);
  TensorRT-LLM "fp8 or default" KV -> fp8 (the FP8/FP4 checkpoints it runs); "not stated"
  16-bit -> bf16; Groq's "8-bit" -> int8.
- llama.cpp rows run on the backend their framework text names (Metal, CUDA, HIP/ROCm, Vulkan,
  CPU), each its own runtime (llama.cpp-metal, ...); a CPU-backend row runs on the CPU profile of
  that chip's cores (`CPU_PROFILE`), never on its GPU's; "tg N @ dD" rows hold the depth D in the
  prompt column, so the prompt is 0 and the depth D (counted once).
- metrics: decode_tok_s_per_user / decode_tok_s_total as estimate() reports them; prefill_tok_s
  = B*S / prefill seconds (at depth d: the extra prefill time from d to d+S tokens);
  itl_ms = 1000 / per-user tok/s; ttft_ms = prefill; throughput_tok_s_total at a fixed batch =
  B*T / e2e; at "max" load see `max_load_throughput`.
- Server at maximum load (trtllm-bench, MLPerf): every request queued at once, an engine with
  continuous batching kept full (`membound.serving.offline`, on serve's step model and solver with the
  runtime's served costs): the running batch is what the KV cache (whole prompt + output
  reserved), the engine's batch limit or its tokens per step allow; trtllm-bench rows take the
  limits its tuning heuristic sets (`offline.trtllm_bench_scheduler`), MLPerf rows the engine's
  served defaults.
- Specialised chips (chip counts undisclosed): the fewest chips whose memory holds the weights
  (and the KV of the row's own prompt and output, as `estimate` sizes its first call; SambaNova: one
  16-socket node, `NODE`), laid out by the one layout rule
  (`parallel.layout_for`: wafers pipeline, LPUs tensor-parallel inside a node of 8 then
  pipeline, SambaNova tensor parallel over the rack).
"""
from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Container

from ..physics.core import serial_share
from ..errors import InvalidInputError, MemboundError, short_repr
from ..catalog.names import index
from ..base.safeio import CellError, read_csv_rows, real, whole
from ..catalog.hardware import load_hardware
from ..catalog.runtime import load_runtime
from ..base.progress import track
from ..catalog.model import load_model
from ..physics.capacity import min_chips
from ..physics.parallel import layout_for, Parallel
from ..physics.estimate import prepare
from ..serving.offline import offline_throughput, trtllm_bench_scheduler
from ..physics.quantization import Quantization
from dataclasses import replace
from ..physics.efficiency import efficiency

if TYPE_CHECKING:
    from ..catalog.hardware import Hardware

# ---- where the data lives ---------------------------------------------------------------

def reference_dir(path: str | Path | None = None) -> Path:
    """The folder of reference measurements: `path`, else `$MEMBOUND_REFERENCE_DIR`, else the
    copy shipped inside the package (`membound/data/reference`, a versioned snapshot of the
    project's shared reference folder; see its VERSION file)."""
    chosen = path or os.environ.get("MEMBOUND_REFERENCE_DIR")
    folder = Path(chosen) if chosen else Path(str(resources.files("membound") / "data" / "reference"))
    if not (folder / "measurements.csv").is_file():
        raise InvalidInputError("reference", str(folder), "a folder holding measurements.csv")
    return folder


def data_set_csv(path: str | Path, folder: str, name: str, schema: str) -> Path:
    """A data set's CSV given by the user: `path` itself when it is a file; in a folder, its
    `folder/name` or `name`; otherwise an error naming `schema`."""
    p = Path(path)
    if p.is_file():
        return p
    for cand in (p / folder / name, p / name):
        if cand.is_file():
            return cand
    raise InvalidInputError("reference", str(path), f"{schema}, or a folder holding {folder}/{name}")


def reference_csv(path: str | Path | None = None) -> Path:
    """The measurements CSV: `path` itself when it is a file, else `reference_dir(path)`'s
    measurements.csv."""
    if path is not None and not isinstance(path, (str, os.PathLike)):       # 5 was pathlib's TypeError
        raise InvalidInputError("reference", path, "a path: a measurements CSV file or a folder holding measurements.csv")
    if path is not None and Path(path).is_file():
        return Path(path)
    if path is not None and not Path(path).is_dir():
        raise InvalidInputError("reference", str(path), "a measurements CSV file or a folder holding measurements.csv")
    return reference_dir(path) / "measurements.csv"


# ---- the scenario ------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """One measurement as membound sees it."""

    id: str
    category: str
    metric: str
    measured: float
    model: str
    hardware: str
    runtime: str
    weight_dtype: str
    kv_dtype: str = "fp16"
    dense_dtype: str | None = None   # non-expert tensors, when stored in another format
    head_dtype: str | None = None    # LM head and embedding, when stored in another format
    activation_dtype: str | None = None   # the GEMM dtype (None: membound's default)
    batch: int | str = 1             # "max": the largest batch that fits (server at max load)
    prompt_tokens: int = 0
    output_tokens: int = 128
    depth: int = 0                   # tokens already in the KV cache (llama-bench -d)
    n_chips: int = 1
    parallel: tuple[int, int, int] = (1, 1, 1)      # tp, pp, ep
    compute_scale: float = 1.0       # binned GPU cores / profile cores
    per_chip: bool = False           # measured value is per accelerator of a larger system
    harness: str = ""                # the benchmark tool, where its settings matter ("trtllm-bench")
    note: str = ""
    chips_stated: bool = True        # False: the source does not say how many chips (a layout assumed)
    weights_stated: bool = True      # False: the source does not state the weight format (`_dtype` assumed one)

    def __post_init__(self):
        predicted = tuple(m for m in METRICS if m not in ("speedup_vs_baseline", "acceptance_length"))
        if self.metric not in predicted:
            raise InvalidInputError("metric", self.metric, f"one of {', '.join(predicted)}", where=self.id)
        if not _positive(self.measured):
            raise InvalidInputError("measured", self.measured, f"a finite number > 0, in the unit of {self.metric}",
                                    where=self.id)
        if self.batch == "max" and self.metric != "throughput_tok_s_total":
            raise InvalidInputError("batch", self.batch, "an integer >= 1 ('max', the largest batch that fits, "
                                    "only with metric throughput_tok_s_total)", where=self.id)
        if self.batch != "max" and (type(self.batch) is not int or self.batch < 1):
            raise InvalidInputError("batch", self.batch, "an integer >= 1, or 'max' (server at max load)",
                                    where=self.id)
        if type(self.n_chips) is not int or self.n_chips < 1:
            raise InvalidInputError("n_chips", self.n_chips, "an integer >= 1", where=self.id)
        # a prefill needs a prompt (0 tokens divided by zero), a decode an output token
        first = 1 if self.metric in ("prefill_tok_s", "ttft_ms") else 0
        for name, low in (("prompt_tokens", first), ("output_tokens", 1 - first)):
            v = getattr(self, name)
            if type(v) is not int or not low <= v <= 10**9:
                raise InvalidInputError(name, v, f"an integer from {low} to 1,000,000,000 for metric {self.metric}",
                                        where=self.id)
        if not (isinstance(self.parallel, tuple) and len(self.parallel) == 3
                and all(type(w) is int and 1 <= w <= 10**9 for w in self.parallel)):
            raise InvalidInputError("parallel", self.parallel, "(tp, pp, ep): three integers >= 1", where=self.id)
        if type(self.depth) is not int or self.depth < 0:
            raise InvalidInputError("depth", self.depth, "an integer >= 0 (tokens already in the KV cache)",
                                    where=self.id)
        if not _positive(self.compute_scale):
            raise InvalidInputError("compute_scale", self.compute_scale, "a finite number > 0 (binned GPU "
                                    "cores / the profile's cores)", where=self.id)


def _positive(x) -> bool:
    """A finite number > 0 (a bool is no number)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@dataclass
class Reference:
    scenarios: list[Scenario] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)   # (id, metric, reason)


# ---- text -> names -----------------------------------------------------------------------

# the texts membound.catalog.names does not resolve (its names, the presets' and profiles' aliases, vendor
# words, memory sizes and fine-tune suffixes answer the rest: "Llama-3.1-8B-Instruct", "NVIDIA RTX
# 4090 24GB"; `_scenario` and `_device` ask it after these tables)
_MODELS = {
    "LLaMA2-Chat 13B": "llama-2-13b", "LLaMA-Instruct-3.1-8B": "llama-3.1-8b",
    "gpt-oss-20b (MoE)": "gpt-oss-20b", "gpt-oss-120b (MoE)": "gpt-oss-120b",
    "Mixtral-8x7B (MoE)": "mixtral-8x7b",
    "DeepSeek-R1 (671B MoE)": "deepseek-r1",
    "DeepSeek (R1/V3 family; exact variant not in excerpt)": "deepseek-r1",   # same architecture
    "Qwen3-30B-A3B (MoE)": "qwen3-30b-a3b",
}

_HARDWARE = {
    "NVIDIA DGX Spark (GB10, 128 GB LPDDR5x unified)": "dgx-spark", "NVIDIA DGX Spark (GB10)": "dgx-spark",
    "NVIDIA H100": "h100-sxm",          # EAGLE-3 paper's SGLang table: form factor not stated
    "NVIDIA H100 80GB": "h100-sxm",     # llama.cpp scoreboard: form factor not stated
    "NVIDIA A100 (single GPU; README says 'single A100')": "a100-80gb",
    "NVIDIA A10 (ECC disabled)": "a10",
}

# a quantized upload's suffix ("-GGUF", "-AWQ", "-4bit"): a row states its weight format apart, so
# its model is the base preset's
QUANTIZED_UPLOAD = re.compile(r"[\s\-_.]+(?:gguf|awq|gptq|mlx|fp8|fp4|nvfp4|int4|int8|bf16|fp16|\d+bit)$", re.IGNORECASE)

_APPLE = re.compile(r"Apple (M\d)(?: (Pro|Max|Ultra))? \((?:(\d+)-core GPU)?(?:, )?(?:(\d+) GB/s)?")

# llama.cpp's backend, from the framework text "llama.cpp (CUDA)": each is its own runtime
_BACKENDS = (("Metal", "metal"), ("CUDA", "cuda"), ("HIP", "hip"), ("ROCm", "hip"), ("Vulkan", "vulkan"),
             ("CPU", "cpu"))
BACKEND_LABEL = {"metal": "Metal", "cuda": "CUDA", "hip": "HIP", "vulkan": "Vulkan", "cpu": "CPU"}
# the CPU cores of a chip whose GPU has its own profile (llama.cpp's CPU backend runs there)
CPU_PROFILE = {"ryzen-ai-max-395": "ryzen-ai-max-395-cpu", "apple-m1-max": "apple-m1-max-cpu"}

_RUNTIMES = [("llama.cpp", "llama.cpp"), ("Ollama", "llama.cpp"), ("TensorRT-LLM", "tensorrt-llm"),
             ("NeMo", "nemo"), ("HuggingFace transformers", "hf-transformers"), ("TinyChat", "tinychat"),
             ("SGLang", "sglang"), ("vLLM", "vllm"), ("gpt-fast", "device"),
             ("Cerebras", "device"), ("Groq", "device"), ("SambaNova", "device")]

SPECIALISED = ("cerebras-wse-3", "groq-lpu", "sambanova-sn40l")

# Published figures from another software generation than the calibration rows (said in the
# report; no constant is tuned for them).
GENERATION_NOTES = {
    "hw-016": "Nov 2024 software: no generation is fitted on one row, so the wafer's physics alone predicts "
              "it (membound.vendors)",
    "hw-021": "Aug 2023 software, a lower bound ('more than 100'): met by the 2024 runtime's prediction",
    "hw-022": "2025 software: after kernel looping (arXiv:2410.23668) removed the layer-boundary penalty "
              "sambanova-2024 fits, so the physics alone predicts it (membound.vendors)",
    "hw-023": "2025 software: after kernel looping (arXiv:2410.23668) removed the layer-boundary penalty "
              "sambanova-2024 fits, so the physics alone predicts it (membound.vendors)",
}


def _named_format(text: str) -> str | None:
    """The registered format a row's text names, whole ("Q4_K_M") or by its first word ("int4 (AWQ
    W4A16)", "fp8 or default"); None where neither is one."""
    dtypes = index("dtype")
    return dtypes.lookup(text.strip()) or (dtypes.lookup(text.split()[0]) if text.split() else None)


def _dtype(text: str, hw: str) -> str | None:
    """The weight format a row's text states: any registered format by its names ("f16", "Q4_K_M",
    "int4 (AWQ W4A16)" by its first word), 8-bit for Groq's figures (SambaNova's footnote), else
    bf16 where the text says 16 bits or nothing; None for anything else."""
    if hw == "groq-lpu" or "8-bit" in text:
        return "int8"
    named = _named_format(text)
    if named is not None:
        return named
    t = text.lower()
    return "bf16" if "bf16" in t or "16-bit" in t or t.startswith("not stated") else None


def _apple(text: str):
    """(profile name, compute scale) for an Apple row, or None."""
    m = _APPLE.match(text)
    if not m:
        return None
    gen, tier, cores, gbs = m.group(1).lower(), (m.group(2) or "").lower(), m.group(3), m.group(4)
    base = f"apple-{gen}" + (f"-{tier}" if tier else "")
    if "(36GB)" in text:          # the 36 GB M4 Max is the binned 32-core / 410 GB/s part
        base, cores = "apple-m4-max-32c", "32"
    candidates = [base] + [f"{base}-{c}c" for c in (30, 32)]
    best = None
    for name in candidates:
        try:
            hw = load_hardware(name)
        except MemboundError:
            continue
        if gbs is None or abs(hw.bandwidth_bytes_s / 1e9 - float(gbs)) / float(gbs) < 0.05:
            best = hw
            break
    if best is None:
        return None
    pc = re.search(r"(\d+)-core GPU", best.display_name)
    scale = float(cores) / float(pc.group(1)) if (cores and pc) else 1.0
    return best.name, scale


def _int(text: str, default=None):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def llama_cpp_backend(framework: str, hw_kind: str, vendor: str) -> str:
    """'metal', 'cuda', 'hip', 'vulkan' or 'cpu': the backend the framework text names, else the
    device's native one (as the `llama.cpp` runtime chooses)."""
    for word, backend in _BACKENDS:
        if word in framework:
            return backend
    native = load_runtime("llama.cpp").backends
    native_rt = native.get(hw_kind) or native.get(vendor.lower())
    if native_rt is None:     # as the runtime refuses it: no backend of llama.cpp runs there (a TPU)
        raise SkipRow(f"llama.cpp has no backend for a {vendor} {hw_kind}")
    return native_rt.removeprefix("llama.cpp-")


def _category(rt: str, hw_kind: str, metric: str, framework: str, row_id: str, batch) -> str:
    if hw_kind in ("wafer", "lpu", "rdu"):
        return "specialised chips"
    if rt.startswith("llama.cpp-"):
        where = BACKEND_LABEL[rt.removeprefix("llama.cpp-")]
        if metric in ("prefill_tok_s", "ttft_ms"):
            return f"llama.cpp {where} prefill"
        if metric == "decode_tok_s_total":
            return f"llama.cpp {where} batched decode"
        return f"llama.cpp {where} decode"
    if row_id.startswith("mlperf"):
        return "MLPerf (assumed lengths)"
    if rt == "tensorrt-llm":
        return "TensorRT-LLM max-load throughput"
    if rt == "nemo":
        return "NeMo throughput (batch 1-8, TP 1-8)"
    if rt in ("tinychat", "hf-transformers"):
        return "quantized kernels / HF (ITL)" if metric == "itl_ms" else "quantized kernels / HF (TTFT)"
    return "other engines, batch 1"


class SkipRow(Exception):
    """A reference row (measured or served) membound does not predict; the message says why."""


# the metrics a row may give (measurements.csv's), and other spellings of them: (metric, factor to it)
METRICS = ("decode_tok_s_per_user", "decode_tok_s_total", "prefill_tok_s", "ttft_ms", "itl_ms",
           "throughput_tok_s_total", "speedup_vs_baseline", "acceptance_length")
METRIC_ALIASES = {"tpot_ms": ("itl_ms", 1.0), "itl_s": ("itl_ms", 1e3), "tpot_s": ("itl_ms", 1e3),
                  "ttft_s": ("ttft_ms", 1e3), "decode_tok_s": ("decode_tok_s_per_user", 1.0),
                  "prompt_tok_s": ("prefill_tok_s", 1.0), "output_tok_s_total": ("throughput_tok_s_total", 1.0)}


def _canonical_metric(r: dict[str, str]) -> dict[str, str]:
    """The row with its metric in measurements.csv's spelling (an alias's value converted), or
    SkipRow naming the metrics it may give."""
    metric = (r.get("metric") or "").strip()
    if metric in METRICS:
        return r
    if metric in METRIC_ALIASES:
        name, factor = METRIC_ALIASES[metric]
        try:
            value = float(r["value"]) * factor
        except (TypeError, ValueError):
            raise SkipRow(f"value {r.get('value')!r} is not a number") from None
        return {**r, "metric": name, "value": repr(value)}
    raise SkipRow(f"metric {metric!r} is none of {', '.join(METRICS + tuple(METRIC_ALIASES))}")


# the columns a measurements CSV must have (measurements.csv's schema; others are kept for people)
# a measured figure in its metric's unit (tok/s, ms) is within these: 1e-320 (a denormal) made the
# report +inf% and NaN medians; the shipped rows span 1.01 to 28,312
MEASURED_RANGE = (1e-3, 1e9)

PROGRESS_ROWS = 10_000     # a reference longer than this shows a progress bar while its rows are read

COLUMNS = ("id", "hardware", "n_chips", "model", "weight_dtype", "kv_dtype", "batch_or_concurrency",
           "prompt_tokens", "output_tokens", "metric", "value", "framework", "notes")


def load_reference(path: str | Path | None = None, only: Container[str] | None = None) -> Reference:
    """Every row of measurements.csv as a Scenario, or skipped with its reason. The file is read
    strictly (safeio.read_csv_rows: UTF-8 with or without a BOM, one header naming each column
    once); a cell that is not what its column holds skips its row with the file, line, column and
    value named, and the other rows are still read. only: the row ids to read (None: all)."""
    out = Reference()
    source = reference_csv(path)
    _, rows = read_csv_rows(source, COLUMNS)
    if only is not None:
        rows = [(line, r) for line, r in rows if r.get("id") in only]
    for line, r in (track(rows, "reference rows", unit=" rows") if len(rows) > PROGRESS_ROWS else rows):
        where = f"{source} line {line}"
        r["__where__"] = where
        if "__cells__" in r:
            out.skipped.append((r.get("id", ""), r.get("metric", ""), f"{where}: {r['__cells__']} cells, "
                                f"but the header names {len(COLUMNS)} or more columns"))
            continue
        try:
            out.scenarios.append(_scenario(_canonical_metric(r)))
        except (SkipRow, InvalidInputError, CellError) as e:   # InvalidInputError: a Scenario refused the row's figures
            out.skipped.append((r["id"], r["metric"], str(e)))
    return out


@dataclass
class _Shape:
    """A row's workload as membound runs it: batch, lengths, chips, layout, the note on what
    was assumed."""

    batch: int | str | None
    prompt: int
    output: int
    n_chips: int
    parallel: tuple[int, int, int]
    depth: int = 0
    per_chip: bool = False
    note: str = ""
    chips_stated: bool = True


def _scenario(r: dict[str, str]) -> Scenario:
    """One row as a Scenario; SkipRow where membound does not predict it."""
    rid, metric, framework = r["id"], r["metric"], r["framework"]
    if metric in ("speedup_vs_baseline", "acceptance_length"):
        raise SkipRow("a speculative-decoding ratio (the multipliers' validation, not this report)")
    if "EAGLE" in framework or "Eagle" in framework or "Medusa" in framework:
        raise SkipRow("speculative decoding figure (multipliers' validation)")
    hw_name, scale = _device(r["hardware"])
    try:
        hw = load_hardware(hw_name)
    except MemboundError:
        raise SkipRow(f"no bundled profile {hw_name!r} for {r['hardware']!r}") from None
    model = _MODELS.get(r["model"]) or index("model").lookup(r["model"]) \
        or index("model").lookup(QUANTIZED_UPLOAD.sub("", r["model"].strip()))
    if model is None:
        raise SkipRow(f"no preset for model {r['model']!r}")
    load_model(model)
    wd = _dtype(r["weight_dtype"], hw_name)
    if wd is None:
        raise SkipRow(f"weight format {r['weight_dtype']!r} unknown")
    rt = next((v for k, v in _RUNTIMES if k in framework), None) \
        or index("runtime").lookup(framework.split(" (")[0].split()[0] if framework.split() else framework)
    if rt == "llama.cpp":
        rt, cores = _llama_cpp(framework, hw_name, hw.kind, hw.vendor)
        if cores is not None:
            hw_name, scale, hw = cores, 1.0, load_hardware(cores)
    if rt is None and rid.startswith("mlperf"):
        rt = "vllm"     # AMD's MLPerf submissions run a vLLM-based stack
    if rt is None:
        raise SkipRow(f"runtime {framework!r} not modelled")
    if rt == "tinychat" and model == "falcon-7b" and wd == "int4":
        # the table's header says g128 for every row, but Falcon-7B's 4544 channels are 35.5 groups of
        # 128: TinyChat's README has it quantized with q_group_size 64 ("For Falcon-7B, we also need to
        # change q_group_size from 128 to 64", llm-awq tinychat/README.md, Usage)
        wd = "int4_g64"
    kv, dense, act = _formats(r["kv_dtype"], wd, rt, hw)
    value = real(r["value"], r.get("__where__", rid), "value", *MEASURED_RANGE, f"{metric}")
    shape = _shape(r, model, hw_name, rt)
    if hw.kind in ("wafer", "lpu", "rdu"):
        rt = _specialised(r, shape, model, hw, wd, rt)
    batch = _check_shape(r, shape)
    return Scenario(
        id=rid, category=_category(rt, hw.kind, metric, framework, rid, batch), metric=metric,
        measured=value, model=model, hardware=hw_name, runtime=rt, weight_dtype=wd, kv_dtype=kv,
        dense_dtype=dense, head_dtype=_head_dtype(r["notes"], r["weight_dtype"]), activation_dtype=act, batch=batch,
        prompt_tokens=shape.prompt,
        output_tokens=max(shape.output, 1), depth=shape.depth, n_chips=shape.n_chips, parallel=shape.parallel,
        compute_scale=scale, per_chip=shape.per_chip, harness="trtllm-bench" if "trtllm-bench" in framework else "",
        note=shape.note, chips_stated=shape.chips_stated,
        weights_stated=not r["weight_dtype"].strip().lower().startswith("not stated"))


def _head_dtype(notes: str, weights: str = "") -> str | None:
    """NVIDIA's ModelOpt FP8/FP4 checkpoints quantize only the linear layers inside the
    transformer blocks (model cards of nvidia/Llama-3.3-70B-Instruct-FP4 and -FP8): the LM head
    and embedding stay bf16 (as `serve_validate.formats` prices them). AWQ's W4A16 checkpoints
    likewise: llm-awq's real_quantize_model_weight replaces the named linears of the decoder
    blocks (get_blocks) with WQLinear and nothing else, so TinyChat's lm_head stays an fp16
    nn.Linear (awq/quantize/quantizer.py; tinychat/models/llama.py)."""
    if "ModelOpt checkpoints" in notes:
        return "bf16"
    return "fp16" if "AWQ" in weights else None


def _device(text: str) -> tuple[str, float]:
    """The bundled profile a row's hardware text names, and its compute scale (binned cores)."""
    if text.startswith(("GPU (", "OCI ")):
        raise SkipRow(f"hardware not disclosed ({text})")
    if "mixed system" in text:
        raise SkipRow("mixed MI300X/MI325X system: not one device")
    for prefix, name in (("Cerebras", "cerebras-wse-3"), ("Groq", "groq-lpu"), ("SambaNova", "sambanova-sn40l")):
        if text.startswith(prefix):
            return name, 1.0
    if text.startswith("Apple"):
        a = _apple(text)
        if a is None and (hit := index("hardware").lookup(text)) is not None:   # "Apple M4 Max"
            return hit, 1.0
        if a is None:
            raise SkipRow(f"no bundled profile matches {text!r}")
        return a
    if text in _HARDWARE:
        return _HARDWARE[text], 1.0
    if (hit := index("hardware").lookup(text)) is not None:   # names and profile aliases
        return hit, 1.0
    if re.search(r"Ryzen AI Max\+? 395|Strix Halo|Radeon 8060S", text):
        return "ryzen-ai-max-395", 1.0
    raise SkipRow(f"no bundled profile for {text!r}")


def _llama_cpp(framework: str, hw_name: str, hw_kind: str, vendor: str) -> tuple[str, str | None]:
    """The llama.cpp backend's runtime, and the profile of the chip's CPU cores where the CPU
    backend runs on a GPU (else None)."""
    backend = llama_cpp_backend(framework, hw_kind, vendor)
    if backend != "cpu" or hw_kind == "cpu":
        return f"llama.cpp-{backend}", None
    if hw_name not in CPU_PROFILE:            # the chip's CPU cores, not its GPU
        raise SkipRow(f"CPU-backend row: no CPU profile for the cores of {hw_name}")
    return f"llama.cpp-{backend}", CPU_PROFILE[hw_name]


def _formats(kv_text: str, wd: str, rt: str, hw: Hardware) -> tuple[str, str | None, str | None]:
    """The KV cache's format (one the text names: "f16", "q8_0" as llama.cpp's -ctk q8_0 gives it,
    "fp8 or default"; unstated: bf16 beside bf16/fp8/int8/int4 weights, else fp16), the dense
    tensors' (where stored apart), the GEMMs' activations'. SkipRow for a text naming no format."""
    kv_text = kv_text.strip()
    named = _named_format(kv_text)
    if kv_text.startswith("fp8"):
        kv = "fp8"
    elif named is not None:
        kv = named
    elif kv_text:
        raise SkipRow(f"KV-cache format {short_repr(kv_text)} unknown")
    else:
        kv = "bf16" if wd in ("bf16", "fp8", "int8", "int4") else "fp16"
    dense = "q8_0" if (wd == "mxfp4" and rt.startswith("llama.cpp")) else None
    # llama.cpp's CUDA/HIP/Vulkan MMQ kernels and its CPU dot products quantize activations to
    # q8_1/q8_0 and multiply block-quantized weights as int8: the runtime says so, as estimate() asks it
    return kv, dense, load_runtime(rt).default_activations(wd, hw)


def _stated_layout(notes: str, n: int) -> tuple[int, int, int]:
    """(tp, pp, ep) as the notes state it ("TP1,PP8", "TP=2 PP=1", "TP4"): a degree left unstated
    is what the chip count leaves; a layout that does not multiply to the n chips, or none stated,
    is tensor parallelism over all of them."""
    tp_m, pp_m = re.search(r"\bTP=?(\d+)", notes), re.search(r"\bPP=?(\d+)", notes)
    if not (tp_m or pp_m):
        return n, 1, 1
    pp = int(pp_m.group(1)) if pp_m else 0
    tp = int(tp_m.group(1)) if tp_m else (n // pp if pp else 0)
    pp = pp or (n // tp if tp else 0)
    return (tp, pp, 1) if tp > 0 and pp > 0 and tp * pp == n else (n, 1, 1)


def _shape(r: dict[str, str], model: str, hw_name: str, rt: str) -> _Shape:
    """The row's batch, lengths and layout, with what its source leaves unstated assumed."""
    rid, metric, notes = r["id"], r["metric"], r["notes"]
    where = r.get("__where__", rid)
    n = whole(r["n_chips"], where, "n_chips", 1, 10**6, "chips") if r["n_chips"].strip() else 1
    s = _Shape(_int((r["batch_or_concurrency"].split() or [""])[0]), _tokens(r, "prompt_tokens"),
               _tokens(r, "output_tokens"), n, _stated_layout(notes, n))
    m_depth = re.search(r"@ d(\d+)", notes)
    if m_depth:
        s.depth = int(m_depth.group(1))
        if metric != "prefill_tok_s":
            s.prompt = 0    # "tg N @ dD": the prompt column holds the depth D itself (sources.md)
    if r["batch_or_concurrency"].startswith(("max", "MLPerf")):
        s.batch = "max"
    if rid.startswith("mlperf"):
        s.prompt, s.output, s.per_chip = 512, 512, True
        s.note = "ISL/OSL assumed 512/512 (dataset mean not in the reference)"
        s.n_chips = mlperf_engine_chips(model, hw_name)
        s.parallel = (s.n_chips, 1, 1)
    if rt == "nemo":
        s.prompt, s.output = 128, 20
    if rid.startswith("awq"):
        _awq(s, metric, notes, rt)
    lengths = DATASET_LENGTHS.get(r["prompt_tokens"].strip())
    if lengths is not None:
        s.prompt, s.output, s.note = lengths
    for column in ("prompt", "output"):
        if getattr(s, column) == UNSTATED:     # a dataset's name, and no rule of its source states the length
            raise CellError(where, f"{column}_tokens", r[f"{column}_tokens"], "a number of tokens, and no rule "
                            "of this row's source states one")
    return s


_NUMERIC = re.compile(r"\s*[-+]?(\d|\.\d|nan|inf)", re.IGNORECASE)
UNSTATED = -1     # a length cell holding a dataset's name: a rule of the row's source must state it


def _tokens(r: dict[str, str], column: str) -> int:
    """A length cell: empty is 0 (not stated); a number must be a whole number of tokens
    (CellError for "2.5", "1e9", "nan", "-5"); words (a dataset's name: "MT-bench") are UNSTATED,
    for a rule of the row's source (DATASET_LENGTHS, the MLPerf rule) to state the length."""
    text = r[column]
    if not text.strip():
        return 0
    if _NUMERIC.match(text):
        return whole(text, r.get("__where__", r["id"]), column, 0, 10**9, "tokens")
    return UNSTATED


# The data sets' own workload rules (docs/architecture.md, rules of honest fitting: a data set's rule lives
# with its loader, cited):
# a row whose prompt_tokens column names its data set instead of a length takes that data set's
# lengths. MT-bench (80 two-turn questions, lmsys FastChat llm_judge) states no token lengths in the
# rows that use it (the EAGLE README's gpt-fast table, the EAGLE-3 paper's SGLang table): ~128
# prompt and 256 generated tokens are ASSUMED, not sourced (a row's metric is a per-token speed, so
# only the context the steps see depends on them).
DATASET_LENGTHS = {"MT-bench": (128, 256, "MT-bench: ~128-token prompts and 256 generated tokens assumed (not sourced)")}
# MLPerf Inference's closed-division submissions build one engine per 80 GB H100 pair for
# llama2-70b: HPE Cray XD670 H100-SXM-80GBx8 (v5.0 closed/HPE/configs/llama2-70b/Offline/custom.py)
# inherits NVIDIA's H100_SXM_80GB_PP2x4 (tensor_parallelism 1, pipeline_parallelism 2: 4 engines of 2
# GPUs), while its H200-SXM-141GB and the MI300X (192 GB) build one per GPU. The rule as the data set
# sets it: an engine spans the GPUs its launch config names; a tensor-parallel pair stands for the
# pipelined pair (the rows are throughput per accelerator, which the pair's layout barely moves).
MLPERF_ENGINE_GPUS = {("llama-2-70b", "h100-sxm"): 2}


def mlperf_engine_chips(model: str, hw_name: str) -> int:
    """GPUs one engine spans in the MLPerf submissions (MLPERF_ENGINE_GPUS, cited): 1 unless listed."""
    return MLPERF_ENGINE_GPUS.get((model, hw_name), 1)


def _awq(s: _Shape, metric: str, notes: str, rt: str) -> None:
    """The AWQ paper's rows: generation latency at assumed lengths, or a prompt after a history."""
    if metric == "itl_ms":
        # LLaMA-2-7B's rows ran after a prompt of more than 500 tokens (the README's footnote): its
        # bound stands for it; the other rows state no lengths
        longer = re.search(r">(\d+)-token prompt", notes)
        s.prompt, s.output = (int(longer.group(1)) if longer else 0), 128
        s.note = ("generation-stage latency after a prompt of more than that many tokens; 128 generated assumed"
                  if longer else "generation-stage latency: prompt/output lengths not stated, 0/128 assumed")
        return
    hist = re.search(r"with (\d+) history", notes)
    h = int(hist.group(1)) if hist else 0
    if rt == "tinychat":
        s.prompt, s.depth = 32, h        # reuses the history KV cache
    else:
        s.prompt = 32 + h                # re-processes the history
    s.output = 1


# the runtime (software generation) of each vendor row, by the date of its figure; "device": no
# generation is fitted for it, the physics alone predicts it (Cerebras' Nov 2024 405B figure is
# faster than the Aug 2024 software by far, and one row cannot fit a generation of its own;
# SambaNova's 2025 DeepSeek-R1 figures come after kernel looping, deployed in production by Oct
# 2024, removed the layer-boundary penalty sambanova-2024 fits: arXiv:2410.23668)
ROW_RUNTIME = {
    "hw-005": "cerebras-2024-08", "hw-010": "cerebras-2024-08", "hw-014": "cerebras-2024-08",
    "hw-015": "cerebras-2024-08", "hw-016": "device",
    "hw-006": "groq-2024", "hw-011": "groq-2024", "hw-018": "groq-2024", "hw-019": "groq-2024",
    "hw-020": "groq-2024", "hw-021": "groq-2024",
    "hw-004": "sambanova-2024", "hw-009": "sambanova-2024", "hw-022": "device",
    "hw-023": "device", "hw-025": "sambanova-2024",
}


def source_of(row_id: str) -> str:
    """The source a row comes from: its id's prefix (apple-001 -> apple, lcpp2-004 -> lcpp2)."""
    return row_id.rsplit("-", 1)[0]


def _specialised(r: dict[str, str], s: _Shape, model: str, hw: Hardware, wd: str, rt: str) -> str:
    """Wafer, LPU and RDU rows: batch 1 at half the stated context, on the fewest chips that hold
    the weights; the vendor's software generation at the figure's date (its runtime)."""
    if r["metric"] == "ttft_ms":
        raise SkipRow("prompt length not stated")
    if s.batch != 1 and s.batch is not None:
        raise SkipRow("aggregate at unstated batch layout")
    ctx = re.search(r"(\d+)-token context", r["notes"])
    s.prompt, s.output = (int(ctx.group(1)) // 2 if ctx else 1024), 256
    try:
        s.n_chips, s.parallel = special_layout(model, hw, wd, s.n_chips if r["n_chips"] else None,
                                               context=s.prompt + s.output)
    except MemboundError as e:
        raise SkipRow(f"no layout holds it: {e}") from None
    s.chips_stated = bool(r["n_chips"])
    s.note = f"{s.n_chips} chips (tp={s.parallel[0]} pp={s.parallel[1]}): " + (
        "as stated" if s.chips_stated else "not disclosed; " + NODE.get(hw.name, (0, _FEWEST))[1])
    if r["id"] in GENERATION_NOTES:
        s.note += "; " + GENERATION_NOTES[r["id"]]
    return ROW_RUNTIME.get(r["id"], rt)


def _check_shape(r: dict[str, str], s: _Shape) -> int | str:
    """A batch understood (returned), output lengths for decode figures (128 where unstated), a
    prompt to prefill."""
    if s.batch is None or (isinstance(s.batch, int) and s.batch < 1):
        raise SkipRow(f"batch {r['batch_or_concurrency']!r} not understood")
    if r["metric"] in ("decode_tok_s_per_user", "decode_tok_s_total") and s.output == 0:
        s.output = 128
    if r["metric"] == "prefill_tok_s" and s.prompt == 0:
        raise SkipRow("prefill with no prompt")
    return s.batch


# the unit a vendor deploys a model on, where its documentation says one: (chips, why). SambaNova:
# "A bundle template defines which models and configurations can be deployed together on a single
# node" (docs.sambanova.ai/docs/en/admin/administration/model-deployment), and a SambaRack SN40L-16
# node holds "a total of 16 RDUs" (docs.sambanova.ai/docs/en/sambastack/hardware-admin/sambarack-overview)
_FEWEST = "the fewest that hold the weights and the KV of the row's own request"   # `special_layout`'s count
NODE = {"sambanova-sn40l": (16, "one SambaRack node of 16 sockets, the unit SambaNova deploys a model on")}


def special_layout(model_name, hw, wd, stated, *, context: int):
    """Chips and (tp, pp, ep) for a specialised-chip row: the stated count, else the vendor's
    deployment unit where its documentation gives one (`NODE`: a SambaRack of 16 sockets), else the
    count `estimate` picks for the row's own configuration: the fewest chips that hold the weights
    and the KV of its `context` tokens (prompt + output), each layer's KV beside the layer (a TSP's
    units read only their own chip's SRAM at speed: another chip's is reached over C2C links, at most
    85 GB/s a chip against the 9.2 TB/s the matrix units take in; ISCA 2020/2022, groq-lpu.yaml).
    How much context a vendor's 2024 deployment reserved beside each layer is not published, so the
    row reserves what its own request needs, as the shortest natural call does (no 8k guess);
    `vendors.chip_range` prints the counts that would give the figure. Laid out by the one layout
    rule (parallel.layout_for)."""
    n = stated or (NODE[hw.name][0] if hw.name in NODE else
                   min_chips(model_name, hw, context_tokens=context, weight_dtype=wd))
    lay = layout_for(model_name, hw, n)
    return lay.chips, (lay.tp, lay.pp, lay.ep)


# ---- prediction --------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _hardware(sc: Scenario):
    hw = load_hardware(sc.hardware)
    if sc.compute_scale != 1.0:
        hw = hw.with_overrides(compute_flops={k: v * sc.compute_scale for k, v in hw.compute_flops.items()})
    return hw


_PREPARED: dict = {}


def _prepared(sc: Scenario, runtime, batch, prompt, output, hw=None, model=None):
    """`estimate.prepare` for `sc`; cached per (scenario, backend, lengths, device), the runtime's
    efficiencies swapped in (a fit evaluates the same rows under many runtimes)."""

    rt = load_runtime(runtime)
    hw = hw or _hardware(sc)
    backend = rt.backend_for(hw)
    key = (sc, backend.name, backend.quantized_gemm, backend.matrix_units, batch, prompt, output, hw, model)
    p = _PREPARED.get(key)
    if p is None:
        tp, pp, ep = sc.parallel
        # a row whose LM head is stored apart (sc.head_dtype) says so through a Quantization
        formats = dict(weight_dtype=sc.weight_dtype, kv_dtype=sc.kv_dtype, activation_dtype=sc.activation_dtype,
                       dense_weight_dtype=sc.dense_dtype) if sc.head_dtype is None else dict(
            quantization=Quantization(sc.weight_dtype, sc.kv_dtype, activations=sc.activation_dtype,
                                      dense_weights=sc.dense_dtype, head_weights=sc.head_dtype),
            dense_weight_dtype=None)
        p = prepare(model or sc.model, hw, allow_beyond_context=True, batch=int(batch), prompt_tokens=int(prompt),
                    output_tokens=int(output), n_chips=sc.n_chips, parallel=Parallel(tp=tp, pp=pp, ep=ep),
                    runtime=rt, **formats)
        if len(_PREPARED) > 20000:
            _PREPARED.clear()
        _PREPARED[key] = p
        return p
    return replace(p, runtime=rt, eff=efficiency(rt, hw))


def _run(sc, runtime, batch, prompt, output, hw=None, model=None):
    p = _prepared(sc, runtime, batch, prompt, output, hw, model)
    return p, p.evaluate()


def max_load_throughput(sc: Scenario, runtime, hw=None, model=None) -> float:
    """Output tok/s of an offline run at maximum load (every request queued at once): the
    engine's continuous batching kept full, the step costs of the runtime's served block
    (`membound.serving.offline`). trtllm-bench rows run the engine limits its tuning heuristic sets for
    the row's lengths (`offline.trtllm_bench_scheduler`); other rows (MLPerf) the engine's served
    defaults."""
    tp, pp, ep = sc.parallel
    q = Quantization(sc.weight_dtype, sc.kv_dtype, activations=sc.activation_dtype, dense_weights=sc.dense_dtype,
                     head_weights=sc.head_dtype)
    device = hw or _hardware(sc)
    sched = trtllm_bench_scheduler(model or sc.model, device, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                                   weight_dtype=sc.weight_dtype, kv_dtype=sc.kv_dtype, tp=tp, pp=pp) \
        if sc.harness == "trtllm-bench" else None
    r = offline_throughput(model or sc.model, device, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                           runtime=runtime, scheduler=sched, quantization=q, n_chips=sc.n_chips,
                           parallel=Parallel(tp=tp, pp=pp, ep=ep))
    return r.output_tok_s / sc.n_chips if sc.per_chip else r.output_tok_s


def predict(sc: Scenario, runtime=None, hw=None, model=None) -> float:
    """membound's figure for `sc`, in the unit of `sc.metric`. runtime, hw (a Hardware) and model
    (a Model) stand in for the row's own (either also by name)."""
    if not isinstance(sc, Scenario):
        raise InvalidInputError("scenario", sc, "a membound.Scenario (one of load_reference().scenarios)")
    hw = None if hw is None else load_hardware(hw)
    model = None if model is None else load_model(model)
    rt = sc.runtime if runtime is None else runtime
    B, S, T, d = sc.batch, sc.prompt_tokens, sc.output_tokens, sc.depth
    if sc.metric == "throughput_tok_s_total" and B == "max":
        return max_load_throughput(sc, rt, hw, model)
    if sc.metric == "prefill_tok_s" or (sc.metric == "ttft_ms"):
        p, r = _run(sc, rt, B, S + d, 1, hw, model)
        t = r["prefill_s"]
        if d:   # S new tokens after d cached ones: the FLOPs of d..d+S (the LM head as a prefill
            # of S runs it), the bytes of S tokens, combined as a prefill pass combines them
            _, r0 = _run(sc, rt, B, d, 1, hw, model)
            _, rs = _run(sc, rt, B, S, 1, hw, model)
            c = (r["prefill_compute_s"] - r["prefill_head_s"] - r0["prefill_compute_s"] + r0["prefill_head_s"]
                 + rs["prefill_head_s"])
            # the attention of the S new tokens reads the d cached tokens' KV (the runtime's
            # cached_kv_passes times): a decode step's KV read at context d + S less its read at S
            # (memory_s: one token's step at those contexts)
            cached = max(float(r["memory_s"]) - float(rs["memory_s"]), 0.0)
            m = rs["prefill_memory_s"] + p.runtime.cached_kv_passes * cached
            serial = float(serial_share(p.eff, float(int(B) * S)))
            t = max(m + serial * c, c + serial * m, r["latency_s"]) + rs["prefill_overhead_s"] + rs["communication_s"]
        return B * S / t if sc.metric == "prefill_tok_s" else 1e3 * t
    _, r = _run(sc, rt, B, S + d, T, hw, model)
    per_user = float(r["decode_tok_s_per_user"])
    if sc.metric == "decode_tok_s_per_user":
        return per_user
    if sc.metric == "itl_ms":
        return 1e3 / per_user
    n = int(B)     # "max" never gets here: _run refused it as a batch
    if sc.metric == "decode_tok_s_total":
        return per_user * n
    if sc.metric == "throughput_tok_s_total":
        return n * T / float(r["e2e_s"])
    raise MemboundError(f"metric {sc.metric!r} has no prediction")
