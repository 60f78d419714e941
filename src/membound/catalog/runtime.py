"""Runtimes (inference engines) as data: the fractions of peak they reach and the overhead
they add, per device class. Files live in `membound/data/runtimes/*.yaml`.

Lookup for a device: the runtime's entry for the device's `name`, else its `device_class`,
else its `kind`, else `default`; a figure an entry leaves out comes from the device profile's
own `achievable`/`latency` blocks. An engine with several backends (llama.cpp on Metal, CUDA,
HIP, Vulkan, CPU) is one runtime per backend; its plain name (`llama.cpp`) names `backends`,
the backend each kind of device (`apple`, `cpu`) or vendor (`nvidia`, `amd`, `intel`) runs.
Two runtimes are built in: `ideal` (the pure roofline: peak bandwidth and compute, no floor, no
overhead) and `device` (the profile's own measured fractions and latency floor, no engine
overhead), which `estimate()` uses when none is named.
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._data import HashableModel, Number, read_yaml, validate
from . import names
from .dtypes import get_dtype
from ..errors import InvalidInputError, MemboundError, ProfileError, short_repr
from .hardware import ComputeCapability, Fraction, Hardware, StepSeconds

_Frac = Fraction                     # 0.01 .. 1, with a hint for percentages
_Secs = StepSeconds                  # 0 .. 1 s, with a hint for microseconds/milliseconds
_Unit = Annotated[float, Number, Field(ge=0, le=1, allow_inf_nan=False)]
_Count = Annotated[int, Number, Field(ge=1, le=10**9)]   # sequences, tokens; `true` is not 1


class RuntimeEntry(BaseModel):
    """What one runtime achieves on one device class. Missing fractions defer to the device."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    bandwidth_fraction: _Frac | None = None
    compute_fraction: _Frac | None = None
    per_step_overhead_s: _Secs = 0.0     # added to every decode step (sampling, scheduling, host)
    per_layer_overhead_s: _Secs = 0.0    # added per layer per step (kernel launches not hidden)
    # more per layer per step, in the chip's clock cycles (`per_layer_s`): an eager engine's small
    # kernels (norms, rotary, adds, casts) each last a floor of cycles, not of seconds
    per_layer_overhead_cycles: Annotated[float, Number, Field(ge=0, le=1e8, allow_inf_nan=False)] = 0.0
    # the host's seconds to dispatch one layer's ops: the GPU runs the kernels behind the host, so it
    # is hidden, unless the model's code blocks the host on the GPU in every layer
    # (Runtime.host_blocking_model_types), where it adds to the step
    per_layer_host_s: _Secs = 0.0
    per_moe_layer_overhead_s: _Secs = 0.0  # more per MoE layer per step: its extra kernels (router,
                                         # top-k, gathers, one GEMM per expert and a weighted sum)
    per_sequence_overhead_s: _Secs = 0.0  # added per sequence in the pass per step (host-side
                                          # scheduling, sampling, detokenisation of each request)
    ungraphed_layer_s: _Secs = 0.0       # added per layer to a pass of more than one token, which
                                         # the runtime launches kernel by kernel instead of
                                         # replaying a CUDA graph (llama.cpp CUDA)
    overlap: _Unit | None = None         # how far memory and compute overlap within a step:
                                         # 1 (default) = roofline max(memory, compute); 0 = they
                                         # add up (kernels near the ridge, serialised phases)
    moe_gemm_efficiency: _Frac | None = None   # expert GEMMs' rate / dense GEMMs' rate (1 default):
                                         # per-expert GEMMs over gathered token rows
    # share of the on-chip mesh's element rate a compiled batch-1 GEMV pipeline reaches (dataflow
    # wafers; 1 default)
    fabric_efficiency: Annotated[float, Field(gt=1e-5, le=1, allow_inf_nan=False)] | None = None
    hop_latency_s: _Secs | None = None   # chip-to-chip (or wafer-to-wafer) latency per hop this
                                         # software reaches, synchronisation included (default: the
                                         # link's own latency from the profile)
    # board watts per fp32 TFLOP/s (at the rated clock) this software's compute-bound kernels draw: a
    # chip whose power_w / fp32 TFLOP/s is below it cannot hold its rated clock and computes at
    # (ratio / this) ** (1/3) of it (`power_factor`); None: no power limit
    power_limit_w_per_tflop: Annotated[float, Number, Field(gt=0, le=1000, allow_inf_nan=False)] | None = None
    evidence: str = ""


class QuantizedGemm(HashableModel):
    """Where a runtime multiplies block-quantized weights (an 8-bit GEMM format, int8 or fp8 standing
    in, on weights of another format) on the SMs' integer/fp32 pipes rather
    than at the tensor-core peak (llama.cpp's MMQ kernels: tile loads and dequantisation bind,
    so throughput scales with SMs x clock, as the fp32 rate does). The compute peak for such
    weights becomes `fp32_multiple` x the device's fp32 FLOP/s; compute_fraction applies to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fp32_multiple: Annotated[float, Number, Field(gt=0, le=64, allow_inf_nan=False)]
    device_kinds: tuple[str, ...] = ("gpu", "apu")
    # tokens per column tile: each tile of a prefill GEMM streams the whole weight matrix again
    # (MMQ's 128 x 128 output tiles); None = the weights are streamed once per pass
    tile_tokens: Annotated[int, Number, Field(ge=1, le=4096)] | None = None
    # devices on which the backend reaches no matrix unit (it enables no cooperative-matrix or
    # integer-dot GEMM path there), so these GEMMs run on the vector ALUs: their peak is
    # `vector_multiple` x fp32 (2: packed fp16 FMAs) instead, and their dequantisation, which runs
    # on the same vector ALUs at the fp32 lane rate on every path, costs vector_multiple /
    # fp32_multiple of its share of a GEMM on the matrix path (`dequant_scale`)
    vector_devices: tuple[str, ...] = ()
    vector_multiple: Annotated[float, Number, Field(gt=0, le=64, allow_inf_nan=False)] = 2.0
    # on those devices a decode step's mat-vec of weights in `vector_gemv_formats` dequantises and
    # multiplies on the vector ALUs: its instructions per weight, each one lane-clock (an fp32 FMA's
    # 2 FLOPs issue in one); None: the mat-vec runs at the GEMMs' peak
    vector_gemv_ops: Annotated[float, Number, Field(gt=0, le=1000, allow_inf_nan=False)] | None = None
    vector_gemv_formats: tuple[str, ...] = ()
    vector_evidence: str = ""
    # a pass of at most `mmvq_max_tokens` tokens multiplies these weights in a mat-vec kernel
    # (llama.cpp CUDA's mmvq) rather than the tiled GEMM: it streams each weight once and issues,
    # for every token (column), `mmvq_column_ops[format]` instructions per weight on the SMs'
    # integer/fp32 pipes (one lane-instruction per CUDA core per clock: fp32 FLOP/s / 2), of which
    # `mmvq_column_int_ops[format]` run only on the INT32 lanes (dp4a), at the device's
    # `int32_lanes_per_fp32` share of that rate, beside the rest (`_mmvq`); formats not listed keep
    # the GEMM's rate. None / empty: no such path
    mmvq_max_tokens: Annotated[int, Number, Field(ge=1, le=4096)] | None = None
    mmvq_column_ops: dict[str, Annotated[float, Number, Field(gt=0, le=1000, allow_inf_nan=False)]] = {}
    mmvq_column_int_ops: dict[str, Annotated[float, Number, Field(gt=0, le=1000, allow_inf_nan=False)]] = {}
    mmvq_evidence: str = ""
    evidence: str = ""

    @model_validator(mode="after")
    def _int_ops_within_ops(self):
        for field in ("mmvq_column_ops", "mmvq_column_int_ops", "vector_gemv_formats"):
            for f in getattr(self, field):
                _format_name(field, f)
        if (self.mmvq_max_tokens is None) != (not self.mmvq_column_ops):
            raise ValueError("mmvq_max_tokens and mmvq_column_ops: expected both (the mat-vec path's token "
                             f"limit and its instructions per weight) or neither, got mmvq_max_tokens="
                             f"{self.mmvq_max_tokens} and mmvq_column_ops={dict(self.mmvq_column_ops)}")
        for f, n in self.mmvq_column_int_ops.items():
            if n > self.mmvq_column_ops.get(f, 0.0):
                raise ValueError(f"mmvq_column_int_ops[{f!r}]: expected a part of mmvq_column_ops[{f!r}] "
                                 f"({self.mmvq_column_ops.get(f, 'absent')}), got {n:g}")
        return self


def _format_name(field: str, name: str) -> None:
    """A weight format named in a runtime file: the canonical name of a registered dtype, as the
    formats a prediction resolves are compared (a typo or an alias would never match: silently unused)."""
    try:
        canonical = get_dtype(name).name
    except MemboundError as e:
        raise ValueError(f"{field}[{short_repr(name)}]: expected a registered weight format ({e})") from None
    if canonical != name:
        raise ValueError(f"{field}[{short_repr(name)}]: expected the format's canonical name {canonical!r}")


class MatrixUnits(BaseModel):
    """How a runtime's kernels use matrix units that sit beside the shader ALUs (a device whose
    profile gives `shader_flops`: Apple M5's GPU Neural Accelerators). Its prefill GEMMs do their
    multiply-accumulates on them, at the profile's `compute_flops`; the rest of the work its fitted
    compute_fraction covers on a chip without them (dequantising and staging tiles between
    barriers, the weight-only dequantisation, the small kernels between GEMMs) stays on the shader
    ALUs, in series, so a GEMM of F FLOPs takes F/P_matrix + F((1 + dequant)/c - 1)/P_shader
    (estimate._compute_paths). The decode mat-vec, and attention unless `attention`, stay on the
    shader ALUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    attention: bool = False              # attention's matmuls also run on the matrix units
    evidence: str = ""


class NoGraphReplay(BaseModel):
    """The devices on which a runtime's generation replays no pass as a recorded graph (CUDA or HIP
    graphs), not even a one-token one (a batch-1 decode step): it launches every kernel from the host,
    so every pass there pays the entry's `ungraphed_layer_s` per layer, as passes of more than one
    token pay it everywhere. Either every device (`all_devices`: the generation's builds record no
    graphs) or the NVIDIA GPUs whose `compute_capability` is below `below_compute_capability` (a
    device whose profile gives no capability is not covered)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    all_devices: bool = False
    below_compute_capability: ComputeCapability | None = None
    generation: str = ""                 # the builds (versions, dates) it holds for
    evidence: str = ""

    @model_validator(mode="after")
    def _one_rule(self):
        if self.all_devices == (self.below_compute_capability is not None):
            raise ValueError("no_graph_replay: expected either all_devices: true or below_compute_capability "
                             f"(one rule), got all_devices={self.all_devices} and below_compute_capability="
                             f"{self.below_compute_capability}")
        if not self.evidence.strip():
            raise ValueError("no_graph_replay.evidence: expected the source that says where the runtime records no graphs")
        return self

    def covers(self, hw: Hardware) -> bool:
        """Whether `hw` is one of the devices this generation replays no graph on."""
        cc, below = hw.compute_capability, self.below_compute_capability
        return self.all_devices or (cc is not None and below is not None and cc < below)


class Served(BaseModel):
    """How the engine serves under load (continuous batching): its usual launch flags and the
    costs a served step pays beyond the core's roofline. Each block names the software
    generation (versions, dates) it describes; see membound.serve and membound.serve_calibrate."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    generation: str = ""                 # versions and date range the figures describe
    max_running: _Count = 256  # most sequences in the running batch (max_num_seqs)
    token_budget: _Count = 8192   # tokens per step (max_num_batched_tokens / chunk size)
    chunked_prefill: bool = True
    mixed_steps: bool = True             # decode and prefill share a step (False: SGLang default)
    kv_block_tokens: _Count = 16
    memory_fraction: _Frac = 0.9         # of device memory the engine takes (weights, KV, activations)
    preemption: Literal["recompute", "swap", "none"] = "recompute"   # none: reserve the full length
    dp_balance_steps: Annotated[int, Number, Field(ge=0, le=10**6)] = 0   # DP attention holds new prompts
                                         # until every rank has one, at most this many steps
    recv_interval_steps: _Count = 1      # decode steps between the scheduler's intakes of new requests
    batch_wait_steps: Annotated[int, Number, Field(ge=0, le=10**6)] = 0   # new prompts held while a batch
                                         # decodes, at most this many steps (TensorRT-LLM batch waiting)
    batch_wait_ratio: _Unit = 0.0        # ... or until the step's tokens reach this share of token_budget
    rank_limits: bool = False            # max_running and token_budget are each data-parallel attention
                                         # rank's (the instance runs ep times them), not the instance's
    bandwidth_fraction: _Frac | None = None   # served kernels' share of what the chip achieves
    compute_fraction: _Frac | None = None     # (its profile's `achievable`); None: the runtime's
    format_rates: bool = False           # its GEMMs in a format the profile measured apart run at that
                                         # format's share of its peak (achievable.compute_by_format), x
                                         # compute_fraction; False: every format at achievable.compute_fraction
    weight_read: bool = False            # its GEMMs read weights at the profile's measured kernel shares of the
                                         # achievable bandwidth (achievable.weight_read_by_format for the dense
                                         # tensors, expert_read_by_format for routed experts: TensorRT-LLM's
                                         # kernels' timings); False: every weight at the served bandwidth share
    gemm_time: bool = False              # a model without routed experts has its layer GEMMs of a pass of M tokens
                                         # take the profile's measured kernel time at M (achievable.gemm_time_by_tokens,
                                         # its weight format's, where the chip has one: TensorRT-LLM's kernels' timings;
                                         # core.tabled_gemm_s); False: at the served compute share
    allreduce_time: bool = False         # a tensor-parallel pass's all-reduces of B bytes take the profile's measured
                                         # kernel time at B for its rank count (achievable.allreduce_time_by_bytes,
                                         # where the chip has one: TensorRT-LLM's kernels' timings;
                                         # parallel.collective_s); False: the link's bandwidth and hop latency
    fp8_rate: Annotated[float, Number, Field(ge=0, le=10, allow_inf_nan=False)] = 0.0
                                         # its fp8 GEMMs' rate over compute_fraction's (a factor: an MLPerf
                                         # generation's fitted rate of its engines' fp8 kernels); 0: as
                                         # format_rates says
    per_step_s: _Secs = 0.0              # host work per step (scheduling, sampling, launches)
    per_allreduce_s: _Secs = 0.0         # engine all-reduce kernel latency, 2 per layer when tp > 1
    per_alltoall_s: _Secs = 0.0          # expert-parallel dispatch or combine kernel latency, 2 per
                                         # MoE layer when ep > 1 (DP attention)
    per_layer_s: _Secs = 0.0             # per layer per step (kernels the CUDA graph does not hide)
    ungraphed_layer_s: _Secs = 0.0       # more per layer per pass where the engine launches every kernel
                                         # from the host (RuntimeEntry's `ungraphed_layer_s`): with the
                                         # runtime's no_graph_replay, every pass, a decode step too
    moe_expert_rows: Annotated[float, Number, Field(ge=0, le=4096, allow_inf_nan=False)] = 0.0
                                         # rows of every expert's GEMM an MoE layer computes per
                                         # step whatever routes to it, at the MoE's compute rate
    moe_tile_tokens: Annotated[float, Number, Field(ge=0, le=4096, allow_inf_nan=False)] = 0.0
                                         # rows each touched expert's GEMM computes at least
                                         # (tiles padded when few tokens route to it)
    moe_upcast_efficiency: _Frac = 1.0   # a factor on a prefill's expert GEMMs' rate where the kernel
                                         # upcasts the experts' weights to 16-bit activations (weight-only
                                         # MoE: MXFP4 gpt-oss on Hopper and CDNA3), beyond the chip's own
                                         # upcast rate (quantization.upcast_rate, estimate.upcast)
    per_sequence_s: _Secs = 0.0          # per running sequence per step
    per_sequence_layer_s: _Secs = 0.0    # per running sequence per layer per step (the attention op's
                                         # generation kernels' work on each sequence: its blocks, block-table
                                         # walk, rotary and KV append, split-KV merge), x the model's layers
    pipeline_host_s: _Secs = 0.0         # under pipeline stages (pp > 1) only: per sequence of a micro-batch
                                         # per iteration, the host's loop over the micro-batch's requests that
                                         # every pipeline rank runs in series with its forward (TensorRT-LLM's
                                         # PyExecutor._executor_loop_pp); at pp = 1 the engine's loop runs it
                                         # beside the GPU's step and it is not priced
    lookahead_steps: Annotated[int, Number, Field(ge=0, le=16)] = 0   # steps the scheduler runs ahead of
                                         # the GPU: a request reaching it mid-step joins the step after
                                         # those already launched, so it waits this many whole steps
                                         # more while a batch decodes (chip-scaled, not host time).
                                         # 1: TensorRT-LLM's PyExecutor._executor_loop_overlap (fetch,
                                         # schedule and launch step k+1, then process step k; default,
                                         # disable_overlap_scheduler False); SGLang's
                                         # Scheduler.event_loop_overlap (run_batch of the next batch
                                         # before process_batch_result of the last; default on); vLLM 0
                                         # (its default), 1 with --async-scheduling (EngineCore.
                                         # step_with_batch_queue, two batches in flight): a launch
                                         # flag, Scheduler.lookahead_steps
    overlap: _Unit | None = None         # how far memory and compute overlap within a step (RuntimeEntry's
                                         # `overlap`: 1 roofline max, 0 they add up); None: the entry's
    per_prompt_token_s: _Secs = 0.0      # host time per prompt token before its first step (the
                                         # server tokenises the prompt text, prepares its inputs)
    per_request_s: _Secs = 0.0           # host time of a request before its first token, whatever its
                                         # length (HTTP, detokenisation); both in TTFT, off the GPU
    calibration: str = ""                # rows fitted on; the rest are held out


# the scheduler of a runtime without a served block (llama.cpp, device, ideal, ...): a generic
# continuous-batching engine's launch flags, no engine costs of its own
DEFAULT_SERVED = Served(generation="generic continuous batching (no engine costs fitted)")


class Runtime(HashableModel):
    """An inference engine: per-device-class efficiency entries, with where they came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    use_latency_floor: bool = True       # False only for the pure roofline
    use_device_fractions: bool = True    # False: fractions default to 1 (the pure roofline)
    classes: dict[str, RuntimeEntry] = {}
    calibration: str = ""                # how and from which rows the figures were fitted
    # one line for every result's `calibration`: what is fitted on which rows, what is assumed
    provenance: str = ""
    max_batch: Annotated[int, Number, Field(ge=1)] | None = None   # most sequences one instance schedules at once
    quantized_gemm: QuantizedGemm | None = None  # block-quantized GEMMs off the tensor cores
    default_for: tuple[str, ...] = ()    # devices that use this runtime when none is named (a
                                         # vendor's own serving software on its own chips)
    served: Served | None = None         # continuous-batching defaults and costs (membound.serving)
    backends: dict[str, str] = {}        # device kind or vendor (lower case) -> backend runtime
    # the prompt positions a prefill's LM head runs over: "last" (the one whose logits give the
    # first token: llama.cpp, vLLM, SGLang, TensorRT-LLM) or "all" (logits for every position,
    # as Hugging Face transformers' generate() before v4.45); `prefill_logits_evidence` says why
    prefill_logits: Literal["last", "all"] = "last"
    prefill_logits_evidence: str = ""
    # token rows per tile of the runtime's weight-only GEMMs (16-bit activations on 4-bit weights):
    # each tile streams and unpacks the whole weight matrix again; None: the weights once per pass
    weight_only_tile_tokens: Annotated[int, Number, Field(ge=1, le=4096)] | None = None
    weight_only_tile_evidence: str = ""
    # kernels a layer launches in a pass of several tokens per sequence (a prefill) against a decode
    # step's: an eager engine whose decode path is fused (one attention kernel with the rotary
    # embedding, the KV write and the softmax) and whose context path is not (rotary, KV-cache
    # copies, a FlashAttention call as separate kernels) pays its per-layer floor this many times
    # in a prefill; 1: the same kernels; `prefill_layer_kernels_evidence` counts them
    prefill_layer_kernels: Annotated[float, Number, Field(ge=1, le=100, allow_inf_nan=False)] = 1.0
    prefill_layer_kernels_evidence: str = ""
    # the format the LM head (and input embedding) stays in when the runtime runs weights stored in
    # fewer than 16 bits (AWQ's W4A16 checkpoints quantize only the decoder blocks' linears: TinyChat);
    # None: the head follows the formats' own default (mb.Quantization)
    weight_only_head: Literal["fp16", "bf16"] | None = None
    weight_only_head_evidence: str = ""
    # the format the runtime quantizes activations to before it multiplies weights stored in fewer
    # than 16 bits (llama.cpp's CUDA, HIP, Vulkan and CPU backends: q8_1/q8_0 blocks, int8 dot
    # products); None: activations follow the formats' own default (mb.Quantization)
    quantized_activations: Literal["int8"] | None = None
    # prefill GEMMs on matrix units beside the shader ALUs, where the device has them (MatrixUnits)
    matrix_units: MatrixUnits | None = None
    # a pass of at most `matvec_max_tokens` tokens per micro-batch (a decode step, a small batch or
    # verify pass) multiplies its weights in mat-vec kernels rather than the tiled GEMMs, and those
    # overlap their loads and math by `matvec_overlap` instead of the entries' `overlap` (which then
    # describes the tiled GEMMs of larger passes: a prefill); None: every pass overlaps as the entry says
    matvec_max_tokens: Annotated[int, Number, Field(ge=1, le=4096)] | None = None
    matvec_overlap: _Unit | None = None
    matvec_evidence: str = ""
    # models (Model.model_type) whose code path in this runtime blocks the host on the GPU in every
    # layer (a host-to-device copy that synchronises the stream): the host's per-layer dispatch
    # (RuntimeEntry.per_layer_host_s) no longer overlaps the kernels, it adds to them
    host_blocking_model_types: tuple[str, ...] = ()
    host_blocking_evidence: str = ""
    # how many times a prefill after cached tokens (a chunked prefill) passes over their KV: 1, the
    # attention's read; more where the runtime first copies the cache into another layout (a read and
    # a write) and the attention reads the copy; `cached_kv_passes_evidence` says why
    cached_kv_passes: Annotated[int, Number, Field(ge=1, le=16)] = 1
    cached_kv_passes_evidence: str = ""
    # the devices on which this runtime's generation records no graphs at all, so a one-token pass
    # pays the entries' ungraphed_layer_s too (NoGraphReplay); None: every device replays one-token passes
    no_graph_replay: NoGraphReplay | None = None

    @model_validator(mode="after")
    def _one_parameter_set(self):
        if self.served is not None and self.classes:
            raise ValueError("classes and served: expected one parameter set (a runtime's constants are its "
                             "per-device `classes` or its `served` block, used by every entry point), got both: "
                             f"classes {sorted(self.classes)} beside a served block")
        return self

    @model_validator(mode="after")
    def _served_launches(self):
        if self.served is not None and self.served.ungraphed_layer_s and self.no_graph_replay is None:
            raise ValueError("served.ungraphed_layer_s: expected a no_graph_replay rule beside it (the devices where "
                             "the engine records no CUDA graph and so pays the launches), got "
                             f"ungraphed_layer_s={self.served.ungraphed_layer_s} without one")
        return self

    @model_validator(mode="after")
    def _matvec_pair(self):
        if (self.matvec_max_tokens is None) != (self.matvec_overlap is None):
            raise ValueError("matvec_max_tokens and matvec_overlap: expected both (the mat-vec passes' token limit "
                             f"and their overlap) or neither, got matvec_max_tokens={self.matvec_max_tokens} and "
                             f"matvec_overlap={self.matvec_overlap}")
        return self

    def default_activations(self, weights: str | None, hw: Hardware) -> str | None:
        """The activation format this runtime (its backend on `hw`) uses with `weights`, where it
        decides one: `quantized_activations` for weights below 16 bits, as int8 where the device
        has an int8 rate and fp8 (the same tensor rate) where it has not; else None."""
        rt = self.backend_for(hw)
        if rt.quantized_activations is None or weights is None or get_dtype(weights).bits >= 16:
            return None
        return next((a for a in (rt.quantized_activations, "fp8") if hw.supports(a)), None)

    def default_head(self, weights: str | None, hw: Hardware) -> str | None:
        """The LM head's format this runtime (its backend on `hw`) keeps beside `weights`, where it
        decides one: `weight_only_head` for weights below 16 bits; else None."""
        rt = self.backend_for(hw)
        if rt.weight_only_head is None or weights is None or get_dtype(weights).bits >= 16:
            return None
        return rt.weight_only_head

    def backend_for(self, hw: Hardware) -> Runtime:
        """The runtime that runs on `hw`: this one, or the backend its `backends` name."""
        if not self.backends:
            return self
        for key in (hw.kind, hw.vendor.lower()):
            if key in self.backends:
                return load_runtime(self.backends[key])
        raise InvalidInputError("runtime", self.name,
                                f"a backend for a {hw.vendor} {hw.kind}: {self.name} lists {sorted(self.backends)}")

    def entry_key(self, hw: Hardware) -> str | None:
        """The `classes` entry this runtime (not its backend) uses on `hw`: the device's name, else its
        device_class, else its kind, else 'default'; None where it has none of them."""
        return next((k for k in (hw.name, hw.device_class, hw.kind, "default") if k in self.classes), None)

    def provenance_for(self, hw: Hardware) -> str:
        """The one-line provenance of the constants this runtime uses on `hw` (a result's
        `calibration`): its backend's `provenance`, and the device-class entry that applies where the
        file has several, with the rows it was fitted on where its evidence names them."""
        rt = self.backend_for(hw)
        text = rt.provenance or rt.calibration or rt.description or "no provenance recorded"
        line = text if text.startswith(rt.name) else f"{rt.name}: {text}"
        if len(rt.classes) > 1:
            key = rt.entry_key(hw)
            if key is None:
                return f"{line}; {hw.name}: no entry (the device profile's own fractions)"
            rows = re.search(r"from (\d+) rows", rt.classes[key].evidence)
            return f"{line}; {hw.name} uses its '{key}' entry" + (f" ({rows.group(1)} rows)" if rows else "")
        return line

    def scheduler_defaults(self) -> Served:
        """The launch flags its engine serves with (the served block, or DEFAULT_SERVED's)."""
        return self.served or DEFAULT_SERVED

    def chunk_tokens(self, ranks: int) -> float:
        """The most prompt tokens one step of this engine takes (its token budget, times the
        data-parallel attention ranks where the budget is each rank's: serving.instance_limits), or
        0 where it prefills a prompt in one pass (chunked_prefill false)."""
        s = self.scheduler_defaults()
        if not s.chunked_prefill:
            return 0.0
        return float(s.token_budget * (ranks if s.rank_limits else 1))


IDEAL = Runtime(name="ideal", description="pure roofline: peak bandwidth and compute, no floor, no overhead",
                use_latency_floor=False, use_device_fractions=False,
                provenance="the pure roofline (peak bandwidth and compute, no floor, no engine cost); nothing fitted")
DEVICE = Runtime(name="device", description="the device profile's measured fractions and latency floor",
                 provenance="the device profile's measured bandwidth and compute fractions and latency floor; "
                            "engine costs assumed 0")
_BUILTIN = {"ideal": IDEAL, "device": DEVICE}
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "trt-llm": "tensorrt-llm",
            "trtllm": "tensorrt-llm", "tensorrt_llm": "tensorrt-llm"}


def runtimes_dir() -> Path:
    return Path(str(resources.files("membound") / "data" / "runtimes"))


@functools.cache
def _files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(runtimes_dir().glob("*.yaml"))}


@functools.lru_cache(maxsize=64)
def _load_file(path: Path) -> Runtime:
    return validate(Runtime, read_yaml(path), str(path))


@functools.lru_cache(maxsize=64)
def _load_user_file(path: str, mtime: float) -> Runtime:
    """A runtime file named by path; `mtime` makes an edited file load again."""
    return validate(Runtime, read_yaml(path), path)


def list_runtimes() -> list[str]:
    return sorted({*_BUILTIN, *_files()})


def default_runtime(hw: Hardware) -> Runtime:
    """The runtime every entry point (estimate, compare, sweep, plan, serve, serve_curve) uses on
    `hw` when none is named (runtime=None): a runtime file that names the device in `default_for`
    (a vendor's latest serving software on its own chip), else `device` (the profile's measured
    fractions and latency floor, no engine costs). Name an engine (runtime="vllm") for its fitted
    costs."""
    return _defaults().get(hw.name, DEVICE)


@functools.cache
def _defaults() -> dict:
    out = {}
    for path in _files().values():
        rt = _load_file(path)
        for dev in rt.default_for:
            out[dev] = rt
    return out


def load_runtime(name: str | Path | Runtime | None, hw: Hardware | None = None) -> Runtime:
    """A runtime by name (`ideal`, `device`, `llama.cpp`, `vllm`, `tensorrt-llm`, ...) or by path to
    a runtime YAML file (*.yaml, *.yml: one `Calibration.save` wrote); None is `default_runtime(hw)`
    when a device is given, else `device`."""
    if name is None:
        return DEVICE if hw is None else default_runtime(hw)
    if isinstance(name, Runtime):
        return name
    if isinstance(name, Path):
        name = str(name)
    if not isinstance(name, str):
        raise InvalidInputError("runtime", name, "a runtime name such as 'vllm', a runtime YAML path or a Runtime")
    if name.endswith((".yaml", ".yml")):
        p = Path(name)
        if not p.is_file():
            raise ProfileError(name, "<file>", "no such file (a runtime YAML path, or a runtime name such as 'vllm')")
        return _load_user_file(str(p.resolve()), p.stat().st_mtime)
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in _BUILTIN:
        return _BUILTIN[key]
    files = _files()
    if key not in files:
        key = _index().resolve(name)
        if key in _BUILTIN:
            return _BUILTIN[key]
    return _load_file(files[key])


@functools.lru_cache(maxsize=1)
def _index() -> names.NameIndex:
    aliases: dict[str, list[str]] = {}
    for a, target in _ALIASES.items():
        aliases.setdefault(target, []).append(a)
    return names.NameIndex.build("runtime", (names.Entry(n, tuple(aliases.get(n, ())))
                                             for n in list_runtimes()))


names.register_kind("runtime", _index)


def clear_caches() -> None:
    """Forget parsed runtime files (after calibration rewrote them)."""
    _files.cache_clear()
    _index.cache_clear()
    _load_file.cache_clear()
    _load_user_file.cache_clear()
