"""The efficiency of a runtime on a chip: the fractions of peak and the costs the one step
(`physics.core`) prices with, resolved from a runtime's data (`catalog.runtime`) and a device
profile (`catalog.hardware`). The catalogue holds the figures as read; this module holds what they
mean on a chip: a power limit's clock (`power_factor`), a quantized GEMM's peak and dequantisation
share, the mat-vec path's issue rate, a per-layer cycle count at the chip's clock, and the served
block's shares of what the chip achieves (`served_efficiency`).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from ..base.stacking import stackable
from ..catalog.hardware import Hardware
from ..catalog.runtime import MatrixUnits, QuantizedGemm, Runtime, RuntimeEntry, Served


# stacking (base.stacking): what a pass branches on is shape (its overlap and mat-vec paths, the MoE
# tile, ungraphed launches, the logits, the host-blocking models, the matrix units). The others are
# numbers, those that choose a path included where only one configuration's preparation reads them
# (estimate.prepare, core.chip_base), never a stack's evaluation
@stackable(shape="overlap matvec_tokens matvec_overlap moe_tile_tokens ungraphed_layer_s graphs_one_token "
                 "prefill_logits_all host_blocking_types matrix_units gemm_time allreduce_time",
           numbers="bandwidth_fraction compute_fraction per_step_overhead_s per_layer_overhead_s per_layer_floor_s "
                   "per_step_floor_s quantized_peak_flops quantized_tile_tokens moe_gemm_efficiency "
                   "per_sequence_overhead_s fabric_efficiency hop_latency_s per_moe_layer_overhead_s power_factor "
                   "gemv_peak_flops weight_only_tile_tokens prefill_layer_kernels gemv_formats "
                   "quantized_dequant_scale mmvq_max_tokens mmvq_issue_rate mmvq_column_ops per_layer_host_s "
                   "per_allreduce_s per_alltoall_s moe_expert_rows moe_upcast_efficiency per_request_s "
                   "per_prompt_token_s format_rates per_sequence_layer_s pipeline_host_s weight_read expert_read")
@dataclass(frozen=True)
class Efficiency:
    """Resolved efficiency of a (runtime, device) pair."""

    bandwidth_fraction: float
    compute_fraction: float
    per_step_overhead_s: float
    per_layer_overhead_s: float
    per_layer_floor_s: float      # the device's latency floor per layer (0 for the pure roofline)
    per_step_floor_s: float
    overlap: float = 1.0          # memory/compute overlap in a step (1 = roofline max)
    quantized_peak_flops: float = 0.0   # FLOP/s for block-quantized weights (0: the tensor peak)
    quantized_tile_tokens: float = 0.0  # tokens per tile of those GEMMs (0: weights streamed once)
    moe_gemm_efficiency: float = 1.0    # expert GEMMs' rate relative to dense GEMMs
    per_sequence_overhead_s: float = 0.0   # per sequence in a pass, per step
    per_sequence_layer_s: float = 0.0      # per sequence in a pass, per layer, per step
    pipeline_host_s: float = 0.0           # per sequence of a micro-batch per iteration of each pipeline rank
                                           # (pp > 1 only: the engine's host loop, in series with its forward)
    fabric_efficiency: float = 1.0      # share of the on-chip mesh rate a batch-1 GEMV reaches
    hop_latency_s: float | None = None  # per-hop latency the software reaches (None: the link's)
    per_moe_layer_overhead_s: float = 0.0  # more per MoE layer per step (router, gathers, per-expert GEMMs)
    ungraphed_layer_s: float = 0.0   # more per layer in a pass of more than one token (no CUDA graph)
    graphs_one_token: bool = True    # a one-token pass replays as a graph (False: it pays ungraphed_layer_s too)
    power_factor: float = 1.0        # share of the rated clock the board's power sustains (in compute_fraction)
    prefill_logits_all: bool = False  # a prefill's LM head runs over every prompt position (else the last)
    gemv_peak_flops: float = 0.0     # FLOP/s (2 per weight, dequantisation included) of a decode step's
                                     # block-quantized mat-vec on the vector ALUs (0: at quantized_peak_flops)
    weight_only_tile_tokens: float = 0.0  # token rows per tile of a weight-only GEMM (0: weights once)
    prefill_layer_kernels: float = 1.0   # a prefill layer's kernels / a decode layer's (its per-layer floor x this)
    gemv_formats: tuple[str, ...] = ()   # the weight formats whose mat-vec runs there
    quantized_dequant_scale: float = 1.0  # the weight-only dequantisation's share of those GEMMs, relative
                                     # to the matrix path's (`dequant_scale`)
    mmvq_max_tokens: float = 0.0     # most tokens in a pass whose GEMMs run as mat-vecs (0: never)
    mmvq_issue_rate: float = 0.0     # lane-instructions per second they issue at (fp32 / 2, at the clock
                                     # the board's power sustains)
    mmvq_column_ops: tuple[tuple[str, float], ...] = ()   # (weight format, lane-clocks per weight per token:
                                     # its instructions, or its INT32-only ones over the device's INT32
                                     # lane share where those take longer, `_mmvq`)
    matrix_units: MatrixUnits | None = None  # the runtime's use of matrix units the device has beside
                                     # its shader ALUs (None: none, or the device has none)
    matvec_tokens: float = 0.0       # most tokens per micro-batch of a pass whose GEMMs run as mat-vecs,
                                     # which overlap as matvec_overlap says (0: every pass as `overlap`)
    matvec_overlap: float = 1.0      # memory/compute overlap of such a pass
    per_layer_host_s: float = 0.0    # the host's dispatch per layer: added where the model blocks the host
    host_blocking_types: tuple[str, ...] = ()   # model types whose code blocks the host every layer
    per_allreduce_s: float = 0.0     # engine all-reduce kernel latency, 2 per layer per step when tp > 1
    per_alltoall_s: float = 0.0      # expert-parallel dispatch or combine kernel latency, 2 per MoE layer when ep > 1
    moe_expert_rows: float = 0.0     # rows of every expert's GEMM an MoE layer computes per step whatever routes to it
    moe_tile_tokens: float = 0.0     # rows each touched expert's GEMM computes at least (tiles padded)
    moe_upcast_efficiency: float = 1.0  # a factor on a prefill's expert GEMMs' rate where the kernel upcasts
                                     # weight-only experts to 16-bit activations, beyond the chip's (estimate.upcast)
    per_request_s: float = 0.0       # host seconds of a request before its first step (in TTFT, off the chip)
    per_prompt_token_s: float = 0.0  # host seconds per prompt token before its first step
    format_rates: tuple[tuple[str, float], ...] = ()   # (compute format, its GEMMs' rate over
                                     # compute_fraction's): the served block's format_rates, `format_rates`
    weight_read: tuple[tuple[str, float], ...] = ()    # (weight format, the share of bandwidth_fraction's rate
                                     # its dense GEMMs read it at): the served block's weight_read, `weight_reads`
    expert_read: tuple[tuple[str, float], ...] = ()    # the same for routed experts' grouped GEMMs
    gemm_time: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...] = ()   # (weight format, M tokens,
                                     # seconds a weight at each): the served block's gemm_time, `gemm_times`
    allreduce_time: tuple[tuple[int, tuple[float, ...], tuple[float, ...]], ...] = ()   # (ranks, message bytes,
                                     # seconds an all-reduce at each): the served block's allreduce_time, `allreduce_times`


@functools.lru_cache(maxsize=4096)
def efficiency(rt: Runtime, hw: Hardware) -> Efficiency:
    """The effective figures `rt` (its backend on `hw`) gets on `hw`: its device-class entry over the
    profile's achievable fractions and latency floor, and its served block where it has one."""
    rt = rt.backend_for(hw)
    key = rt.entry_key(hw)
    entry = RuntimeEntry() if key is None else rt.classes[key]
    bw_default = hw.achievable.bandwidth_fraction if rt.use_device_fractions else 1.0
    c_default = hw.achievable.compute_fraction if rt.use_device_fractions else 1.0
    floor = rt.use_latency_floor
    power = power_factor(entry.power_limit_w_per_tflop, hw)
    mmvq = _mmvq(rt.quantized_gemm, hw, power)
    eff = Efficiency(
        # no runtime streams faster than the chip's measured reads (a fit elsewhere may say more)
        bandwidth_fraction=min(entry.bandwidth_fraction or bw_default, hw.read_ceiling)
        if rt.use_device_fractions else entry.bandwidth_fraction or bw_default,
        compute_fraction=(entry.compute_fraction or c_default) * power,
        per_step_overhead_s=entry.per_step_overhead_s,
        per_layer_overhead_s=per_layer_s(entry, hw),
        per_layer_floor_s=hw.latency.per_layer_s if floor else 0.0,
        per_step_floor_s=hw.latency.per_step_s if floor else 0.0,
        overlap=1.0 if entry.overlap is None else entry.overlap,
        quantized_peak_flops=_quantized_peak(rt.quantized_gemm, hw),
        quantized_tile_tokens=float(rt.quantized_gemm.tile_tokens or 0)
        if rt.quantized_gemm is not None and hw.kind in rt.quantized_gemm.device_kinds else 0.0,
        moe_gemm_efficiency=entry.moe_gemm_efficiency or 1.0,
        per_sequence_overhead_s=entry.per_sequence_overhead_s,
        fabric_efficiency=entry.fabric_efficiency or 1.0,
        hop_latency_s=entry.hop_latency_s,
        per_moe_layer_overhead_s=entry.per_moe_layer_overhead_s,
        ungraphed_layer_s=entry.ungraphed_layer_s,
        graphs_one_token=rt.no_graph_replay is None or not rt.no_graph_replay.covers(hw),
        power_factor=power,
        prefill_logits_all=rt.prefill_logits == "all",
        gemv_peak_flops=_gemv_peak(rt.quantized_gemm, hw),
        weight_only_tile_tokens=float(rt.weight_only_tile_tokens or 0),
        prefill_layer_kernels=rt.prefill_layer_kernels,
        gemv_formats=rt.quantized_gemm.vector_gemv_formats if rt.quantized_gemm is not None else (),
        quantized_dequant_scale=dequant_scale(rt.quantized_gemm, hw),
        mmvq_max_tokens=mmvq[0], mmvq_issue_rate=mmvq[1], mmvq_column_ops=mmvq[2],
        matrix_units=rt.matrix_units if hw.shader_flops else None,
        matvec_tokens=float(rt.matvec_max_tokens or 0) if rt.matvec_overlap is not None else 0.0,
        matvec_overlap=1.0 if rt.matvec_overlap is None else rt.matvec_overlap,
        per_layer_host_s=entry.per_layer_host_s,
        host_blocking_types=rt.host_blocking_model_types,
    )
    return eff if rt.served is None else served_efficiency(eff, rt.served, hw)


def served_efficiency(eff: Efficiency, served: Served, hw: Hardware) -> Efficiency:
    """The one parameter set of a runtime whose constants are its `served` block's (fitted on served
    rows, one set for every chip): its fractions as shares of what the chip achieves (the profile's
    `achievable`), its costs per step, layer (and the launches of an engine that records no CUDA graph,
    `ungraphed_layer_s`), sequence, collective kernel, MoE layer and request.
    Every entry point (estimate, compare, sweep, plan, serve) uses them; such a file has no
    `classes` (`Runtime._one_parameter_set`)."""
    ach = hw.achievable
    return dataclasses.replace(
        eff,
        bandwidth_fraction=min(served.bandwidth_fraction * ach.bandwidth_fraction, 1.0)
        if served.bandwidth_fraction else eff.bandwidth_fraction,
        compute_fraction=min(served.compute_fraction * ach.compute_fraction, 1.0)
        if served.compute_fraction else eff.compute_fraction,
        per_step_overhead_s=served.per_step_s, per_layer_overhead_s=served.per_layer_s,
        per_moe_layer_overhead_s=0.0, per_sequence_overhead_s=served.per_sequence_s,
        per_sequence_layer_s=served.per_sequence_layer_s, pipeline_host_s=served.pipeline_host_s,
        per_allreduce_s=served.per_allreduce_s, per_alltoall_s=served.per_alltoall_s,
        moe_expert_rows=served.moe_expert_rows, moe_tile_tokens=served.moe_tile_tokens,
        moe_upcast_efficiency=served.moe_upcast_efficiency, per_request_s=served.per_request_s,
        per_prompt_token_s=served.per_prompt_token_s, ungraphed_layer_s=served.ungraphed_layer_s,
        format_rates=served_rates(served, hw),
        weight_read=weight_reads(hw, "weight") if served.weight_read else (),
        expert_read=weight_reads(hw, "expert") if served.weight_read else (),
        gemm_time=gemm_times(hw) if served.gemm_time else (),
        allreduce_time=allreduce_times(hw) if served.allreduce_time else (),
        overlap=eff.overlap if served.overlap is None else served.overlap)


def served_rates(served: Served, hw: Hardware) -> tuple[tuple[str, float], ...]:
    """A served block's per-format GEMM rates over compute_fraction's (`Efficiency.format_rates`): the
    profile's measured shares where it runs them (`format_rates`), its own fp8 rate over them where it
    states one (`Served.fp8_rate`, an MLPerf generation's fitted factor: 1.5 runs fp8 GEMMs at 1.5 x the
    rate compute_fraction gives every format), else none (every format at compute_fraction's rate)."""
    rates = dict(format_rates(hw)) if served.format_rates else {}
    if served.fp8_rate:
        rates["fp8"] = served.fp8_rate
    return tuple(sorted(rates.items()))


def format_rates(hw: Hardware) -> tuple[tuple[str, float], ...]:
    """Per compute format the profile measured apart (achievable.compute_by_format), its best GEMMs'
    share of that format's peak over the share every format gets otherwise (achievable.compute_fraction,
    the 16-bit MAMF): H200 fp8 0.734 / 0.8 = 0.9175, B200 fp4 0.582 / 0.776 = 0.75. A GEMM in that
    format runs at this times the rate compute_fraction gives it (estimate's compute paths)."""
    ach = hw.achievable
    return tuple(sorted((f, share / ach.compute_fraction) for f, share in ach.compute_by_format.items()))


def weight_reads(hw: Hardware, kind: str) -> tuple[tuple[str, float], ...]:
    """Per weight format, the share of the achievable bandwidth measured kernels read its bytes at on `hw`
    (achievable.weight_read_by_format for kind "weight", the dense GEMMs; expert_read_by_format for
    "expert", routed experts' grouped GEMMs): H200 fp8 dense 0.78 makes a step read its fp8 dense weights
    at 0.78 x the rate the served bandwidth share gives the KV cache."""
    shares = getattr(hw.achievable, f"{kind}_read_by_format")
    return tuple(sorted((f, float(s)) for f, s in shares.items()))


def gemm_times(hw: Hardware) -> tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]:
    """Per weight format, the measured seconds a weight of a dense layer GEMM takes at each M tokens of the
    kernel table (achievable.gemm_time_by_tokens): B200 nvfp4 3.1517e-13 s a weight at M = 512, so
    Llama-2-70B's 80 layers of 855.6 M weights take 21.57 ms there. () where the profile has none."""
    return tuple(sorted((f, tuple(c.tokens), tuple(c.seconds_per_weight))
                        for f, c in hw.achievable.gemm_time_by_tokens.items()))


def allreduce_times(hw: Hardware) -> tuple[tuple[int, tuple[float, ...], tuple[float, ...]], ...]:
    """Per rank count, the measured seconds a bf16 all-reduce takes at each message size in bytes of the
    kernel table (achievable.allreduce_time_by_bytes): B200 over 4 ranks 2.3839e-05 s at 4,194,304 bytes
    (2,097,152 bf16 values). () where the profile has none."""
    return tuple(sorted((n, tuple(c.bytes), tuple(c.seconds)) for n, c in hw.achievable.allreduce_time_by_bytes.items()))


# the clock a per-layer cycle count is timed at on a chip whose profile gives none (a typical GPU
# boost clock: RTX A6000 1.80 GHz, H100 SXM 1.98 GHz by their fp32 rates / (2 x CUDA cores))
DEFAULT_CLOCK_HZ = 1.8e9


def per_layer_s(entry: RuntimeEntry, hw: Hardware) -> float:
    """The seconds `entry` adds per layer per step on `hw`: its per_layer_overhead_s and its
    per_layer_overhead_cycles at the chip's clock (DEFAULT_CLOCK_HZ where the profile has none)."""
    cycles = entry.per_layer_overhead_cycles
    return entry.per_layer_overhead_s + (cycles / (hw.clock_hz or DEFAULT_CLOCK_HZ) if cycles else 0.0)


def power_factor(limit_w_per_tflop: float | None, hw: Hardware) -> float:
    """The share of its rated clock (and so of its compute peaks) `hw` sustains under kernels that
    need `limit_w_per_tflop` board watts per fp32 TFLOP/s at that clock: 1 when its power_w covers
    them, else (power_w / fp32 TFLOP/s / limit) ** (1/3). A GPU boosts until it meets its power
    limit; CMOS dynamic power is C V^2 f and near the top of the voltage-frequency curve V rises
    with f, so power grows as f^3 and the clock a budget sustains as its cube root (measured: an
    RTX 4090's average game clock at 70% and 60% of its 450 W limit, 2.60 and 2.44 GHz, Quasarzone
    via hardwaretimes.com, is clock ~ power^0.42; the limit itself: calibrate.power_limit_from_sgemm).
    1 without a limit, a power figure or an fp32 rate."""
    fp32 = hw.compute_flops.get("fp32")
    if not limit_w_per_tflop or not hw.power_w or not fp32:
        return 1.0
    return float(min(1.0, hw.power_w / (fp32 / 1e12) / limit_w_per_tflop) ** (1.0 / 3.0))


def _quantized_peak(q: QuantizedGemm | None, hw: Hardware) -> float:
    """fp32_multiple x the fp32 rate, never above the chip's own int8 peak (the multiple was
    measured on NVIDIA chips, whose int8 tensor peaks are far above it; on RDNA 3 the dual-issue
    fp32 rate x 4 is twice the int8 WMMA peak); vector_multiple x fp32 on the `vector_devices`,
    where the backend uses no matrix unit."""
    if q is None or hw.kind not in q.device_kinds or "fp32" not in hw.compute_flops:
        return 0.0
    if hw.name in q.vector_devices:     # no matrix path: the vector ALUs' packed rate
        return q.vector_multiple * hw.compute_flops["fp32"]
    peak = q.fp32_multiple * hw.compute_flops["fp32"]
    return min(peak, hw.compute_flops["int8"]) if "int8" in hw.compute_flops else peak


def dequant_scale(q: QuantizedGemm | None, hw: Hardware) -> float:
    """The weight-only dequantisation's share of a quantized GEMM on `hw`, relative to the matrix
    path's: vector_multiple / fp32_multiple on the `vector_devices`, else 1. A GEMM tile's weights are
    dequantised on the vector ALUs at the fp32 lane rate whichever unit multiplies them, so against
    multiply-accumulates at m x fp32 that work costs a share proportional to m: the dequant fraction a
    format carries on the matrix path (fp32_multiple x fp32) is vector_multiple / fp32_multiple of it
    on the vector path (Arc A770 under ggml-vulkan: 2 / 4, q4_0's 15% becomes 7.5%)."""
    if q is None or hw.name not in q.vector_devices or hw.kind not in q.device_kinds:
        return 1.0
    return q.vector_multiple / q.fp32_multiple


def _mmvq(q: QuantizedGemm | None, hw: Hardware, power: float) -> tuple[float, float, tuple[tuple[str, float], ...]]:
    """The mat-vec path's (mmvq_max_tokens, mmvq_issue_rate, mmvq_column_ops) on `hw`, each column's
    instructions as lane-clocks on this device (`_column_clocks`): none (0, 0, ()) off the backend's
    device kinds, on its vector devices (their own mat-vec, `_gemv_peak`) or without an fp32 rate."""
    if q is None or not q.mmvq_max_tokens or not q.mmvq_column_ops or hw.kind not in q.device_kinds \
            or hw.name in q.vector_devices or "fp32" not in hw.compute_flops:
        return 0.0, 0.0, ()
    return (float(q.mmvq_max_tokens), hw.compute_flops["fp32"] / 2.0 * power,
            tuple(sorted((f, _column_clocks(n, q.mmvq_column_int_ops.get(f, 0.0), hw.int32_lanes_per_fp32))
                         for f, n in q.mmvq_column_ops.items())))


def _column_clocks(ops: float, int_ops: float, int32_share: float) -> float:
    """Lane-clocks per weight of a mat-vec column that issues `ops` instructions per weight, `int_ops`
    of them on the INT32 lanes only: one warp scheduler issues one instruction per clock to either
    datapath, and the INT32 datapath takes `int32_share` of the lanes, so the column takes the
    longer of its issue (`ops`) and its INT32 work (`int_ops / int32_share`). On GA10x, Ada and
    Hopper (share 0.5) the INT32 lanes bind only where more than half the instructions are theirs."""
    return max(ops, int_ops / int32_share)


def _gemv_peak(q: QuantizedGemm | None, hw: Hardware) -> float:
    """fp32 FLOP/s / vector_gemv_ops on the `vector_devices`, else 0: the mat-vec issues that many
    instructions per weight at one per lane per clock (fp32 FLOP/s / 2), so it does 2 FLOPs per weight
    at (fp32 / 2) / ops x 2 = fp32 / ops FLOP/s."""
    if q is None or q.vector_gemv_ops is None or hw.name not in q.vector_devices or "fp32" not in hw.compute_flops:
        return 0.0
    return hw.compute_flops["fp32"] / q.vector_gemv_ops
