"""Devices: memory tiers, peak compute per dtype, interconnect, power, price, and the
achievable fractions and latency floor measured for them.

Profiles are YAML files (schema: `hardware_profiles/README.md`), validated on load; unknown
keys are rejected. Units are SI: bytes, bytes/s, FLOP/s, seconds, watts, USD per hour.
Bandwidth is decimal (1 TB/s = 1e12 B/s); capacity is *usable* bytes, with its source.
"""
from __future__ import annotations

import datetime
import functools
import operator
import re
import statistics
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator,
                      model_validator)

from ._data import HashableModel, Number, read_yaml, validate
from . import names
from .dtypes import compute_keys, get_dtype
from ..errors import InvalidInputError, ProfileError, is_finite_number
from ..base.display import hardware_repr, hardware_text, hardware_html


def _g(x: float) -> str:
    """A number as people write it in a profile: 3.35e12, 1e9, 0.003."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m[1] == "-" else "") + m[2], f"{x:.4g}")


def _ranged(lo: float, hi: float, unit: str, low_hint: Callable[[float], str],
            high_hint: Callable[[float], str]) -> AfterValidator:
    """A check of a float in [lo, hi]; outside, an error saying which unit was probably meant."""
    unit = f" {unit}" if unit else ""

    def check(v: float, info: ValidationInfo) -> float:
        name = info.field_name
        if v < lo:
            raise ValueError(f"{name}={_g(v)} is below {_g(lo)}{unit}: {low_hint(v)}")
        if v > hi:
            raise ValueError(f"{name}={_g(v)} is above {_g(hi)}{unit}: {high_hint(v)}")
        return v
    return AfterValidator(check)


# Physical ranges: wide enough for any real chip (a Groq LPU's 230 MB of SRAM, a wafer's
# 21 PB/s), narrow enough that a unit slip is caught (3.35 meant as TB/s, 80 as GB, 90 as %)
# and no product of them overflows a float (a 1e-300 fraction made a TTFT of 7e296 s).
def _per_second(v: float) -> str:
    return f"give bytes per second ({_g(v)} TB/s = {_g(v * 1e12)}; {_g(v)} GB/s = {_g(v * 1e9)})"


# each: a finite float (Field) in its physical range (_ranged)
MemoryBandwidth = Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
    1e9, 1e18, "B/s", _per_second, lambda v: "give bytes per second of one chip (1 EB/s is far beyond any memory)")]
LinkBandwidth = Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
    1e8, 1e18, "B/s", _per_second, lambda v: "give bytes per second of one chip, one direction")]
Bytes = Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
    1e6, 1e16, "bytes", lambda v: f"give bytes ({_g(v)} GB = {_g(v * 1e9)}; {_g(v)} GiB = {_g(v * 2**30)})",
    lambda v: "give the usable bytes of one chip (10 PB is far beyond any)")]
FlopsPerS = Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
    1e9, 1e21, "FLOP/s", lambda v: f"give FLOP/s ({_g(v)} TFLOP/s = {_g(v * 1e12)})",
    lambda v: "give dense FLOP/s of one chip (1 ZFLOP/s is far beyond any)")]


def _seconds(hi: float, what: str) -> AfterValidator:
    return _ranged(0.0, hi, "s", lambda v: "expected a time >= 0",
                   lambda v: f"give seconds {what} ({_g(v)} us = {_g(v * 1e-6)}; {_g(v)} ms = {_g(v * 1e-3)})")


def _capability(v: float, info: ValidationInfo) -> float:
    """A CUDA compute capability as NVIDIA writes it, major.minor (7.0, 8.6, 12.1): 1.0 to 99.9, one
    decimal (a minor version is a digit)."""
    if not 1.0 <= v <= 99.9 or round(v, 1) != v:
        raise ValueError(f"{info.field_name}={_g(v)}: expected a CUDA compute capability major.minor between 1.0 "
                         "and 99.9 with one decimal (sm_86 = 8.6, sm_121 = 12.1)")
    return v


ComputeCapability = Annotated[float, Number, Field(allow_inf_nan=False), AfterValidator(_capability)]
HopSeconds = Annotated[float, Number, Field(allow_inf_nan=False), _seconds(1e-2, "per hop")]
LayerSeconds = Annotated[float, Number, Field(allow_inf_nan=False), _seconds(1e-2, "per layer")]
StepSeconds = Annotated[float, Number, Field(allow_inf_nan=False), _seconds(1.0, "per step")]
Fraction = Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
    0.01, 1.0, "", lambda v: "expected a fraction of peak between 0.01 and 1 (90% = 0.9)",
    lambda v: f"give a fraction of peak ({_g(v)}% = {_g(v / 100)})" if v <= 100
    else "expected a fraction of peak between 0.01 and 1")]

_OPERAND_FORMAT = {1: "int8", 2: "fp16", 4: "fp32"}   # a matrix unit's operand width in bytes -> its format
DeviceKind = Literal["gpu", "tpu", "apple", "cpu", "apu", "wafer", "lpu", "rdu", "npu"]
# chips whose compiler streams activations chip to chip in the format it computes in, with no GPU
# engine between (Cerebras' wafer, Groq's LPU, SambaNova's RDU): `Quantization.resolve`'s residual
DATAFLOW_KINDS: tuple[DeviceKind, ...] = ("wafer", "lpu", "rdu")


_STAND_IN = {"fp16": "bf16", "bf16": "fp16"}   # 16-bit formats whose rates stand in for each other
# compute formats whose operands a chip with fp4 matrix units multiplies in any pairing, at the wider
# (fp8) rate: every fp4 matrix unit shipped is of the f8f6f4 kind. NVIDIA Blackwell's tcgen05.mma
# kind::f8f6f4 and kind::mxf8f6f4.block_scale take A and B each in e2m1, e3m2/e2m3 or e4m3/e5m2
# ("2x Hopper FP8 Tensor Core"; CUTLASS "Blackwell SM100 GEMMs",
# docs.nvidia.com/cutlass/media/docs/cpp/blackwell_functionality.html; mma.sync on SM 12x likewise);
# AMD CDNA4's scaled MFMA (v_mfma_scale_f32_*_f8f6f4) selects A's and B's formats apart (e2m1, e4m3,
# e5m2; triton-lang.org gluon amd.cdna4.mfma_scaled). Which formats go in as they are: dtypes' module
# docstring (`DType.mixed_operand`)
MIXED_OPERANDS = frozenset({"fp4", "fp8"})


def _rate_of(rates: dict[str, float], compute_dtype: str) -> float | None:
    """`rates`' FLOP/s for `compute_dtype`, fp16/bf16 standing in for each other; None where it has neither."""
    for key in (compute_dtype, _STAND_IN.get(compute_dtype, "")):
        if key in rates:
            return rates[key]
    return None


_CAPACITY = operator.attrgetter("capacity_bytes")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemoryTier(_Strict):
    """One level of memory on one chip."""

    name: str
    capacity_bytes: Bytes               # usable bytes per chip
    bandwidth_bytes_s: MemoryBandwidth  # peak, decimal B/s, per chip
    source: str
    # the highest rate a published stream kernel that loads from this tier measures (a saturating
    # read, or the best of a STREAM-class suite's loading kernels), cited in read_source: a hardware
    # fact of the memory technology and its controller (LPDDR5 on a Jetson Orin reaches 0.80 of its
    # peak, HBM2 on an A100 0.96), so no runtime's weight and KV streams go faster, whatever share a
    # fit on other chips found (`Hardware.read_ceiling`)
    read_bytes_s: MemoryBandwidth | None = None
    read_source: str = ""
    # where `read_bytes_s` is what matrix units take in (a TSP's MXM intake), the bytes each weight
    # occupies there: the width the units multiply at. A weight stored narrower is widened to it
    # before it enters, so it streams at read_bytes_s x stored / operand bytes (`dataflow.operand_widening`)
    read_operand_bytes: Annotated[float, Number, Field(ge=1.0, le=8.0)] | None = None
    operand_source: str = ""

    @model_validator(mode="after")
    def _read_below_peak(self):
        # a read rate under the fractions' floor (0.01 of peak) is a slip, not a measurement: 1e9
        # typed for 1e11 would make every runtime stream at 0.4% of a DGX Spark's peak
        if self.read_bytes_s is not None and not 0.01 * self.bandwidth_bytes_s <= self.read_bytes_s \
                <= self.bandwidth_bytes_s:
            raise ValueError(f"read_bytes_s: expected a measured read rate between 0.01 x and the peak "
                             f"bandwidth_bytes_s {_g(self.bandwidth_bytes_s)}, got {_g(self.read_bytes_s)} "
                             f"({_g(self.read_bytes_s / self.bandwidth_bytes_s)} x the peak)")
        if self.read_bytes_s is not None and not self.read_source.strip():
            raise ValueError("read_source: expected the measurement read_bytes_s comes from")
        if self.read_operand_bytes is not None and (self.read_bytes_s is None or not self.operand_source.strip()):
            raise ValueError("read_operand_bytes: expected with read_bytes_s and an operand_source citing the width")
        if self.read_operand_bytes is not None and self.read_operand_bytes not in _OPERAND_FORMAT:
            raise ValueError(f"read_operand_bytes: expected one of {sorted(_OPERAND_FORMAT)} (int8, fp16, fp32), "
                             f"got {self.read_operand_bytes:g}")
        return self


class Interconnect(_Strict):
    """The chip-to-chip link used for tensor/pipeline/expert parallelism."""

    name: str
    bandwidth_bytes_s: LinkBandwidth   # per chip, one direction
    latency_s: HopSeconds              # per hop (one message, one step of a ring)
    max_chips: Annotated[int, Number, Field(ge=1, le=1_000_000)] = 1   # chips in one scale-up domain
    topology: Literal["ring", "switch"] = "ring"  # all-reduce latency: 2(N-1) hops, or 2 via a switch
    node_chips: Annotated[int, Field(ge=1)] | None = None   # chips in one node where tensor
    # parallelism stays (a GroqNode of 8 LPUs) when `max_chips` is the whole system; None = max_chips
    # how `layout_for` spends chips: "tensor" splits each layer over the scale-up domain first;
    # "pipeline" puts whole layers on each chip first and splits a layer only over the fewest chips
    # that hold it (a Groq TSP system's inference mapping, ISCA 2022; the profile cites it)
    layout: Literal["tensor", "pipeline"] = "tensor"
    layout_source: str = ""
    source: str

    @model_validator(mode="after")
    def _pipeline_cited(self):
        if self.layout == "pipeline" and not self.layout_source.strip():
            raise ValueError("layout_source: expected the source of a 'pipeline' layout (how the vendor maps a model)")
        return self


class ScaleOut(_Strict):
    """The network beyond the scale-up domain: each chip's RDMA NIC (InfiniBand or RoCE). Used by
    collectives of a worker wider than `interconnect.max_chips` and by disaggregated serving's KV
    transfer between pools that are not in one domain."""

    name: str
    bandwidth_bytes_s: LinkBandwidth   # per chip, one direction (400 Gb/s = 5e10 B/s)
    latency_s: HopSeconds              # one message, NIC to NIC through the switches
    source: str


class GemmCurve(_Strict):
    """Measured seconds a weight of a dense layer GEMM takes in a pass of M tokens, at the M a kernel table
    timed (`Achievable.gemm_time_by_tokens`): the summed time of a model's layer GEMMs at M rows over their
    weights. Small M streams the weights (a weight's bytes over the read rate); large M computes them (2 M
    FLOPs a weight over the GEMMs' rate): both are a weight's, so the figure carries to other dense shapes
    as large (what it leaves out: the tile and wave quantisation of smaller matrices)."""

    tokens: tuple[Annotated[float, Number, Field(ge=1, le=1e7, allow_inf_nan=False)], ...]
    seconds_per_weight: tuple[Annotated[float, Number, Field(gt=0, le=1e-6, allow_inf_nan=False)], ...]

    @model_validator(mode="after")
    def _a_curve(self):
        _check_curve(self.tokens, self.seconds_per_weight, "tokens", "seconds_per_weight", "M")
        return self


class AllreduceCurve(_Strict):
    """Measured seconds an all-reduce of a message of B bytes takes over a number of ranks, at the sizes a
    kernel table timed (`Achievable.allreduce_time_by_bytes`): the collective's own time, its latency and
    its bytes over the links together, as the kernels reach them at each size."""

    bytes: tuple[Annotated[float, Number, Field(ge=1, le=1e13, allow_inf_nan=False)], ...]
    seconds: tuple[Annotated[float, Number, Field(gt=0, le=100, allow_inf_nan=False)], ...]

    @model_validator(mode="after")
    def _a_curve(self):
        _check_curve(self.bytes, self.seconds, "bytes", "seconds", "message sizes")
        return self


def _check_curve(x: tuple[float, ...], y: tuple[float, ...], x_name: str, y_name: str, grid: str) -> None:
    """A measured curve's points: as many x as y, at least 2, x strictly increasing (a table's grid)."""
    if len(x) < 2 or len(x) != len(y):
        raise ValueError(f"expected {x_name} and {y_name} of one length, at least 2 points, got {len(x)} and {len(y)}")
    if any(b <= a for a, b in zip(x, x[1:])):
        raise ValueError(f"{x_name}: expected strictly increasing {grid} (the table's grid)")


def _is_dtype(name: str) -> bool:
    """Whether `name` is a weight format registered exactly so (lower-case, as the formats are named)."""
    try:
        return get_dtype(name).name == name
    except (InvalidInputError, KeyError, LookupError):
        return False


class Achievable(_Strict):
    """Fractions of the peaks a well-tuned runtime reaches on this device, with evidence."""

    bandwidth_fraction: Fraction = 0.8
    compute_fraction: Fraction = 0.6
    # the share of a tensor format's own dense peak the chip's best GEMMs in that format reach, where it
    # was measured apart (fp8, fp4: a MAMF search, a library's GEMM), for the runtimes whose served GEMMs
    # run each format at its own share (Served.format_rates); every other runtime computes at
    # compute_fraction whatever the format. A format not listed: compute_fraction
    compute_by_format: dict[str, Fraction] = {}
    # the share of the achievable bandwidth (bandwidth_fraction x peak) at which measured decode GEMM kernels
    # read a weight format's bytes (M <= 128 tokens: a kernel time's bytes over its seconds), where such kernel
    # timings of this exact part were found: the dense Linear GEMMs (weight_read_by_format) and the fused MoE's
    # grouped expert GEMMs (expert_read_by_format), each keyed by weight format. A property of the kernels
    # measured on the chip, not of the chip alone: the evidence names them, and only a runtime whose served
    # GEMMs are those kernels reads them (Served.weight_read); every other runtime reads weights at the
    # achievable bandwidth. A format not listed: 1 (the achievable bandwidth)
    weight_read_by_format: dict[str, Fraction] = {}
    expert_read_by_format: dict[str, Fraction] = {}
    # per weight format, the seconds a weight of a dense layer GEMM takes in a pass of M tokens, measured at a
    # kernel table's M (`GemmCurve`), where such timings of this exact part were found. A property of the
    # kernels measured, as the reads above: only a runtime whose served GEMMs are those kernels reads it
    # (Served.gemm_time; core.tabled_gemm_s); every other runtime computes at its fractions. A format not
    # listed: the runtime's fractions
    gemm_time_by_tokens: dict[str, GemmCurve] = {}
    # per rank count, the seconds a bf16 all-reduce of a message of B bytes takes, measured at a kernel table's
    # sizes (`AllreduceCurve`), where such timings of this exact part were found. A property of the kernels
    # measured, as the figures above: only a runtime whose tensor-parallel all-reduces are those kernels reads
    # it (Served.allreduce_time; parallel.collective_s); every other runtime prices the link (its bandwidth
    # and hop latency). A rank count not listed: the link
    allreduce_time_by_bytes: dict[Annotated[int, Field(ge=2, le=1_000_000)], AllreduceCurve] = {}
    evidence: str = "assumed"


class LatencyFloor(_Strict):
    """The smallest time per layer a token can spend (launches, sync, dataflow pipeline)."""

    per_layer_s: LayerSeconds = 0.0
    per_step_s: StepSeconds = 0.0      # fixed cost per decode step (sampling, host round trip)
    evidence: str = "assumed"


class Fabric(_Strict):
    """The on-chip mesh of a dataflow chip whose weights sit in SRAM beside its cores (a wafer):
    a batch-1 GEMV is mapped onto a square of the cores one layer owns; its input is broadcast
    and its partial outputs reduced across that square, one wavelet per link per cycle
    (membound.physics.dataflow prices it)."""

    cores: Annotated[int, Field(ge=1, le=10**9)]
    bandwidth_bits_s: Annotated[float, Field(gt=1e9, le=1e21, allow_inf_nan=False)]  # all links, all cores
    links_per_core: Annotated[int, Field(ge=1, le=64)] = 4
    wavelet_bits: Annotated[int, Field(ge=1, le=1024)] = 32    # bits one link moves per cycle each way
    ramp_cycles: Annotated[float, Field(ge=0, le=1e4, allow_inf_nan=False)] = 2.0   # router to core (T_R)
    call_cycles: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = 0.0   # a line collective call's own cost
    # a core's fixed cost for one column operation of its GEMV (one vector multiply-add over its outputs
    # for one input) beyond its weights at the SRAM rate, in cycles
    column_op_cycles: Annotated[float, Field(ge=0, le=1e4, allow_inf_nan=False)] = 0.0
    # the bytes of the partial sum a core keeps for each output of its GEMV (2: a 16-bit multiply-add's
    # own width; 4: 16-bit products accumulated in 32 bits), read and written once a weight
    partial_sum_bytes: Annotated[float, Field(ge=1, le=8, allow_inf_nan=False)] = 2.0
    source: str

    def clock_hz(self) -> float:
        """The fabric's cycle rate its aggregate bandwidth implies: every core's `links_per_core`
        ports, each way, one wavelet per cycle (bandwidth / (cores x links x 2 x wavelet bits))."""
        return self.bandwidth_bits_s / (self.cores * self.links_per_core * 2 * self.wavelet_bits)


Usd = Annotated[float, Number, Field(gt=0, le=1e7, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]


def _as_of(v):
    """When a price was read, as precisely as its page dates it: 2026, 2026-05 or 2026-05-07 (a YAML
    date is taken as written)."""
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, str) and re.fullmatch(r"(19|20)\d\d(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?", v):
        return v
    raise ValueError("expected the date the price was read: YYYY-MM-DD, or YYYY-MM / YYYY where the page gives no day")


AsOf = Annotated[str, BeforeValidator(_as_of)]


class PriceQuote(_Strict):
    """One on-demand list price of one chip-hour: who rents the chip, where the price is listed
    (a URL, with what the page lists where it is per instance), and when it was read."""

    usd_per_hour: Usd          # per chip (an 8-GPU instance's price divided by 8)
    provider: Text
    source: Text
    date: AsOf                 # when the list price was read (YYYY-MM-DD, YYYY-MM or YYYY)


class ApiPrice(_Strict):
    """A provider's published price per million tokens for one model served on this chip (chips
    sold as an API, not by the chip-hour: Cerebras, Groq, SambaNova)."""

    model: Text                # a bundled model preset name (llama-3.1-8b)
    provider: Text
    input_usd_per_million: Annotated[float, Number, Field(ge=0, le=1e6, allow_inf_nan=False)]
    output_usd_per_million: Annotated[float, Number, Field(ge=0, le=1e6, allow_inf_nan=False)]
    source: Text
    date: AsOf


class Hardware(HashableModel):
    """One chip (or wafer) as membound sees it. All figures per chip."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    display_name: str
    aliases: tuple[str, ...] = ()   # vendor spellings and marketing names (membound.catalog.names)
    # the bundled device this profile stands in for: required (equal to `name`) when a profile
    # outside the bundled folder takes a bundled device's name, so that no two devices share one
    replaces: str | None = None
    vendor: str
    kind: DeviceKind
    device_class: str = ""          # key for runtime tables, e.g. "nvidia-datacenter"
    year: Annotated[int, Number, Field(ge=1940, le=2100)] | None = None
    memory: tuple[MemoryTier, ...]  # ordered fastest first after validation
    compute_flops: dict[str, FlopsPerS]  # dense peak FLOP/s per compute dtype (bf16, fp8, ...)
    compute_source: str
    # the shader ALUs' FLOP/s for a 16-bit dtype whose `compute_flops` peak is reached only by kernels
    # written for the chip's matrix units (Apple M5: a Neural Accelerator in each GPU core, programmed
    # through Metal 4 TensorOps); a runtime's `matrix_units` rule says which of its kernels reach them.
    # Empty: every kernel runs at compute_flops
    shader_flops: dict[str, FlopsPerS] = {}
    interconnect: Interconnect | None = None
    scale_out: ScaleOut | None = None   # the NIC network beyond the interconnect's domain
    # board or chip power: 1 W (the smallest edge module draws several) to 100 kW (a wafer draws ~23 kW);
    # 0.7 is a kilowatt figure, 700000 milliwatts
    power_w: Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
        1.0, 1e5, "W", lambda v: f"give watts ({_g(v)} kW = {_g(v * 1e3)} W)" if v > 0 else "a power is positive",
        lambda v: f"give watts ({_g(v)} mW = {_g(v / 1e3)} W)")] | None = None
    # the SM (shader) boost clock: a small kernel's floor is a count of its cycles (launch, ramp,
    # dependent loads, tail), so a runtime's per-layer kernel floor in cycles takes 1/clock seconds each
    clock_hz: Annotated[float, Number, Field(gt=1e7, le=1e11, allow_inf_nan=False)] | None = None
    # INT32 lanes per FP32 lane (CUDA core): integer multiply-adds and dot products (IMAD, dp4a) issue
    # at this share of the fp32 lane rate (fp32 FLOP/s / 2). 1 where every FP32 lane also executes
    # them (Blackwell) or separate INT32 units equal the FP32 ones in number (Volta, Turing, GA100);
    # 0.5 on GA10x, Ada and Hopper, whose SM partitions run INT32 on 16 of their 32 FP32 lanes
    # (`int32_source` says where from)
    int32_lanes_per_fp32: Annotated[float, Number, Field(allow_inf_nan=False), _ranged(
        0.01, 1.0, "", lambda v: "expected INT32 lanes per FP32 lane between 0.01 and 1 (half of them = 0.5)",
        lambda v: "expected INT32 lanes per FP32 lane between 0.01 and 1 (half of them = 0.5)")] = 1.0
    int32_source: str = ""
    # an NVIDIA GPU's CUDA compute capability (developer.nvidia.com/cuda-gpus): which features its
    # SMs have, and so which paths a runtime's generation takes on it (a runtime's `no_graph_replay`);
    # None for other vendors' chips
    compute_capability: ComputeCapability | None = None
    # the price per chip-hour costs use: given, or else the median of `prices`; `no_price` says why a
    # chip has none (not rented by the hour: a consumer card, a laptop, a chip sold as an API)
    price_usd_per_hour: Usd | None = None
    price_source: str | None = None
    prices: tuple[PriceQuote, ...] = ()     # on-demand list prices, each with provider, source and date
    no_price: str = ""
    api_prices: tuple[ApiPrice, ...] = ()   # published per-token API prices (model, provider, source, date)
    # how a MoE layer's routed experts run: "routed", each token's k experts (as an engine that
    # gathers them at run time); "every_expert", a program whose schedule is fixed before it runs and
    # has no data-dependent control flow streams and multiplies every expert's weights each pass, the
    # router's gates weighing the unchosen ones by zero (`core.model_consts`); `moe_source` cites it
    moe_schedule: Literal["routed", "every_expert"] = "routed"
    moe_source: str = ""
    activation_chunk_tokens: Annotated[int, Number, Field(ge=1, le=10**7)] = 8192  # tokens whose activations
    # a prefill chunk holds at once (GPU engines: ~8k); dataflow chips stream and hold few
    achievable: Achievable = Achievable()
    latency: LatencyFloor = LatencyFloor()
    fabric: Fabric | None = None    # the on-chip mesh of a dataflow wafer (None: no mesh term)
    # figures of this profile that are assumptions with no source, as dotted paths
    # ("interconnect.latency_s", "activation_chunk_tokens", "memory.SRAM.bandwidth_bytes_s"):
    # every result they enter lists them (Result.assumptions)
    assumed: tuple[str, ...] = ()
    notes: str = ""

    @field_validator("name")
    @classmethod
    def _name_form(cls, v: str) -> str:
        if not v or v != v.lower() or " " in v:
            raise ValueError("expected a lower-case name with hyphens, e.g. 'h100-sxm'")
        return v

    @model_validator(mode="after")
    def _format_shares_of_its_peaks(self):
        unknown = sorted(set(self.achievable.compute_by_format) - set(self.compute_flops))
        if unknown:
            raise ValueError(f"achievable.compute_by_format: expected formats the profile gives a peak for "
                             f"({', '.join(sorted(self.compute_flops))}), got {', '.join(unknown)}")
        for field in ("weight_read_by_format", "expert_read_by_format", "gemm_time_by_tokens"):
            bad = sorted(f for f in getattr(self.achievable, field) if not _is_dtype(f))
            if bad:
                raise ValueError(f"achievable.{field}: expected weight formats membound knows "
                                 f"(membound.catalog.dtypes), got {', '.join(bad)}")
        return self

    @model_validator(mode="after")
    def _moe_schedule_cited(self):
        if self.moe_schedule != "routed" and not self.moe_source.strip():
            raise ValueError(f"moe_source: expected the source of moe_schedule {self.moe_schedule!r} (the chip's "
                             f"programming model: how a compiled program meets a token's routing)")
        return self

    @model_validator(mode="after")
    def _replaces_itself(self):
        if self.replaces is not None and self.replaces != self.name:
            raise ValueError(f"replaces: expected the profile's own name {self.name!r} (a profile replaces the "
                             f"bundled device whose name it takes), got {self.replaces!r}")
        return self

    @field_validator("memory")
    @classmethod
    def _fastest_first(cls, tiers):
        if not tiers:
            raise ValueError("expected at least one memory tier")
        return tuple(sorted(tiers, key=lambda t: -t.bandwidth_bytes_s))

    @model_validator(mode="after")
    def _assumed_paths(self):
        for path in self.assumed:
            if self._figure(path) is None:
                raise ValueError(f"assumed: expected dotted paths of this profile's figures "
                                 f"(e.g. 'interconnect.latency_s', 'memory.SRAM.bandwidth_bytes_s'), got {path!r}")
        return self

    def _figure(self, path: str):
        """The value at a dotted path of this profile (a memory tier by its name), or None."""
        obj: object = self
        for part in path.split("."):
            if isinstance(obj, tuple):      # memory tiers, by name
                obj = next((t for t in obj if getattr(t, "name", None) == part), None)
            else:
                obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None

    def assumptions(self, n_chips: int = 1) -> tuple[str, ...]:
        """The assumed figures (`assumed`) a result on `n_chips` of this device rests on, as
        'path = value': the interconnect's only where chips talk to one another."""
        return tuple(f"{self.name} {p} = {self._figure(p):g} (assumed, no source)" for p in self.assumed
                     if n_chips > 1 or not p.startswith(("interconnect.", "scale_out.")))

    @model_validator(mode="after")
    def _read_on_the_fastest_tier(self):
        # `read_ceiling` caps the streams from the fastest tier only: a slower tier's read rate would be unused
        for t in self.memory[1:]:
            if t.read_bytes_s is not None:
                raise ValueError(f"read_bytes_s: expected only on the fastest memory tier "
                                 f"({self.memory[0].name}, whose streams it caps), got it on {t.name}")
        return self

    @model_validator(mode="after")
    def _priced_or_not(self):
        if self.no_price.strip() and (self.prices or self.price_usd_per_hour is not None):
            raise ValueError("no_price: expected either a price (prices, price_usd_per_hour) or no_price "
                             "saying why there is none, not both")
        if self.prices and self.price_usd_per_hour is None:   # frozen: set once, while validating
            quotes = sorted(self.prices, key=lambda q: q.usd_per_hour)
            median = statistics.median(q.usd_per_hour for q in quotes)
            object.__setattr__(self, "price_usd_per_hour", median)
            if self.price_source is None:
                listed = ", ".join(f"{q.provider} ${q.usd_per_hour:g} ({q.date})" for q in quotes)
                what = f"median of {len(quotes)} on-demand list prices" if len(quotes) > 1 else "on-demand list price"
                object.__setattr__(self, "price_source", f"{what}: {listed}")
        return self

    @model_validator(mode="after")
    def _int32_sourced(self):
        if self.int32_lanes_per_fp32 != 1.0 and not self.int32_source.strip():
            raise ValueError(f"int32_source: expected where int32_lanes_per_fp32={self.int32_lanes_per_fp32:g} "
                             "comes from (a whitepaper or the CUDA throughput table)")
        return self

    @model_validator(mode="after")
    def _capability_is_nvidias(self):
        if self.compute_capability is not None and self.vendor.lower() != "nvidia":
            raise ValueError(f"compute_capability: expected only on an NVIDIA GPU (a CUDA compute capability), "
                             f"got {self.compute_capability:g} on a {self.vendor} device")
        return self

    @field_validator("compute_flops")
    @classmethod
    def _compute_keys(cls, v: dict[str, float]) -> dict[str, float]:
        known = compute_keys()      # "FP8" or a typo would load and never be used: the chip would lack fp8
        for k in v:
            if k not in known:
                raise ValueError(f"key {k!r}: expected a compute format's key, one of {sorted(known)} (lower case; "
                                 "register_dtype adds a format computing at a new one)")
        return v

    @model_validator(mode="after")
    def _has_bf16(self):
        if not self.compute_flops:
            raise ValueError("compute_flops: expected at least one dtype peak")
        for k, v in self.shader_flops.items():
            if not self.supports(k) or v > self.peak_flops(k):
                raise ValueError(f"shader_flops[{k!r}]: expected a dtype of compute_flops at most its peak, got {v:g}")
        return self

    # ---- derived -------------------------------------------------------------------------
    @property
    def capacity_bytes(self) -> float:
        """Usable bytes over all tiers of one chip."""
        return sum(map(_CAPACITY, self.memory))      # = sum(t.capacity_bytes ...), without a generator frame

    @property
    def physical_memory_bytes(self) -> float | None:
        """A discrete GPU's memory as its name states it (its usable bytes: what nvidia-smi or the
        datasheet reports); None for the others, whose usable share of a shared memory varies."""
        return self.capacity_bytes if self.kind == "gpu" else None

    @property
    def bandwidth_bytes_s(self) -> float:
        """Peak bandwidth of the fastest tier (the one decode streams from when weights fit)."""
        return self.memory[0].bandwidth_bytes_s

    @property
    def operand_bytes(self) -> float | None:
        """The bytes a weight occupies in the fastest tier's read stream (`read_operand_bytes`);
        None where the stream carries weights as stored."""
        return self.memory[0].read_operand_bytes

    @property
    def operand_peak_flops(self) -> float | None:
        """Dense FLOP/s of matrix units that multiply every operand at the width they take weights in
        (`read_operand_bytes`: 2 B, fp16): the most any GEMM or attention product reaches on them,
        whatever the format stored; None where units multiply each format at its own width."""
        width = self.operand_bytes
        return None if width is None else self.peak_flops(_OPERAND_FORMAT[int(width)])

    @property
    def read_ceiling(self) -> float:
        """The share of the fastest tier's peak a saturating-read kernel measures (its
        `read_bytes_s`), the most any runtime's streams reach; 1 where the profile gives none."""
        t = self.memory[0]
        return t.read_bytes_s / t.bandwidth_bytes_s if t.read_bytes_s else 1.0

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak FLOP/s for `compute_dtype`; fp16/bf16 stand in for each other. A 16-bit format
        never computes slower than the chip's fp32 rate: where its 16-bit units are slower (consumer
        Pascal, GP102/GP104: fp16 at 1/64 of fp32) engines convert on load and multiply in fp32, as
        llama.cpp does (ggml-cuda/common.cuh: fast_fp16_available is false for compute capability
        6.1, so its kernels take their fp32 paths); other engines are assumed to do the same."""
        peak = _rate_of(self.compute_flops, compute_dtype)
        if peak is not None:
            return max(peak, self.compute_flops.get("fp32", 0.0)) if compute_dtype in _STAND_IN else peak
        raise InvalidInputError("activation_dtype", compute_dtype,
                                f"a dtype {self.name} computes in: {sorted(self.compute_flops)}",
                                where=self.name)

    def shader_peak_flops(self, compute_dtype: str) -> float | None:
        """The shader ALUs' FLOP/s for `compute_dtype` where the profile gives it apart from the matrix
        units' (`shader_flops`; fp16/bf16 stand in for each other), else None."""
        return _rate_of(self.shader_flops, compute_dtype)

    def multiplies(self, a: str, b: str) -> bool:
        """Whether one matrix instruction of this chip multiplies an operand computed as `a` by
        one computed as `b` (compute keys): the same format it computes in, or fp4 beside fp8 on
        a chip whose matrix units take fp4 (`MIXED_OPERANDS`: all of them are f8f6f4 units)."""
        if a == b or _STAND_IN.get(a) == b:
            return self.supports(a)
        return {a, b} <= MIXED_OPERANDS and all(self.supports(k) for k in MIXED_OPERANDS)

    def supports(self, compute_dtype: str) -> bool:
        try:
            self.peak_flops(compute_dtype)
            return True
        except InvalidInputError:
            return False

    def with_overrides(self, **changes) -> Hardware:
        """A copy with fields replaced (validated again), e.g. a different price: a price_usd_per_hour
        given replaces the profile's (its source and a stated absence, `no_price`, go with it;
        None leaves the copy without a price, its quotes dropped)."""
        data = self.model_dump()
        if "price_usd_per_hour" in changes:     # a price set (or removed) by hand replaces the profile's own
            data.update(no_price="", price_source=None)
            if changes["price_usd_per_hour"] is None:
                data["prices"] = ()
        data.update(changes)
        return validate(Hardware, data, f"{self.name} (overridden)")

    def share(self, compute: float, memory: float) -> Hardware:
        """The part of this chip one engine instance gets when several run on it side by side (a
        CPU socket split into instances pinned to its cores): `compute` of every compute peak (its
        cores' share: AMX and AVX units are per core) and `memory` of each memory tier's capacity,
        peak and read rate (the instances that share the socket's memory channels, all streaming
        at once, split them evenly). Priceless (a part of a chip is not rented by the hour)."""
        for field, v in (("compute", compute), ("memory", memory)):
            if not (is_finite_number(v) and 0.0 < v <= 1.0):
                raise InvalidInputError(field, v, "a share of the chip above 0 and at most 1", where=self.name)
        tiers = tuple(t.model_copy(update={
            "capacity_bytes": t.capacity_bytes * memory, "bandwidth_bytes_s": t.bandwidth_bytes_s * memory,
            "read_bytes_s": None if t.read_bytes_s is None else t.read_bytes_s * memory}) for t in self.memory)
        return self.with_overrides(
            name=f"{self.name}-part-c{compute:.6g}-m{memory:.6g}",
            display_name=f"{self.display_name}, an instance's part ({compute:.4g} of its compute, "
                         f"{memory:.4g} of its memory)",
            aliases=(), memory=tiers, compute_flops={k: v * compute for k, v in self.compute_flops.items()},
            shader_flops={k: v * compute for k, v in self.shader_flops.items()},
            price_usd_per_hour=None, power_w=None if self.power_w is None else self.power_w * compute)

    def api_price(self, model: str) -> ApiPrice | None:
        """The published per-token API price of `model` (a preset name) on this chip, if any."""
        return next((a for a in self.api_prices if a.model == model), None)

    def __repr__(self) -> str:
        return hardware_repr(self)

    def __str__(self) -> str:
        return hardware_text(self)

    def _repr_html_(self) -> str:
        return hardware_html(self)


# ---- loading -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def bundled_profiles_dir() -> Path:
    """Where the bundled profiles are: package data when installed, the repo folder in a checkout."""
    packaged = resources.files("membound") / "hardware_profiles"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "hardware_profiles"


_lock = threading.Lock()
_user_dirs: dict[Path, bool] = {}    # registered folder -> may it shadow bundled names (override)
_by_name: dict[str, Hardware] = {}    # name -> bundled profile, the fast path of load_hardware


def load_hardware_file(path: str | Path) -> Hardware:
    """Load and validate one profile file."""
    path = Path(path)
    return validate(Hardware, read_yaml(path), str(path))


@functools.lru_cache(maxsize=64)
def _catalogue(bundled: Path, users: tuple[tuple[Path, bool], ...], stamps: tuple[float, ...]) -> dict[str, Path]:
    """name -> file. `stamps` (the folders' mtimes) make a file added later visible."""
    found = {f.stem: f for f in sorted(bundled.glob("*.yaml"))}
    mine: dict[str, Path] = {}
    for d, override in users:
        for f in sorted(d.glob("*.yaml")):
            if f.stem in mine and mine[f.stem] != f:
                raise ProfileError(str(f), "name", f"value {f.stem!r} is also defined by {mine[f.stem]}; "
                                   "two registered folders may not define the same device")
            if f.stem in found and not override:
                raise ProfileError(str(f), "name", f"value {f.stem!r} is a bundled device; rename the file, "
                                   f"or register its folder with add_hardware_dir({str(d)!r}, override=True)")
            mine[f.stem] = f
    return {**found, **mine}


@functools.lru_cache(maxsize=1024)
def _load_cached(path: Path, mtime: float) -> Hardware:
    return load_hardware_file(path)


def add_hardware_dir(folder: str | Path, *, override: bool = False) -> None:
    """Make the profiles in `folder` loadable by name, files added later included.

    Precedence, whatever the order of calls: a registered profile named like a bundled one
    (by file name) is refused unless its folder was registered with `override=True`, and then
    it replaces the bundled one (its aliases too). Two registered folders may never define the
    same name, and an alias may never repeat another profile's name or alias (ProfileError).
    """
    p = Path(folder)
    if not p.is_dir():
        raise InvalidInputError("folder", str(folder), "an existing folder of *.yaml profiles")
    with _lock:
        before = dict(_user_dirs)
        _user_dirs[p] = bool(override)
        _by_name.clear()
    try:
        _hardware_index()            # refuse a shadowing or clashing folder now, not at first use
    except ProfileError:
        with _lock:
            _user_dirs.clear()
            _user_dirs.update(before)
        raise


def _state() -> tuple[Path, tuple[tuple[Path, bool], ...], tuple[float, ...]]:
    with _lock:
        users = tuple(_user_dirs.items())
    bundled = bundled_profiles_dir()
    stamps = tuple(_mtime(d) for d in (bundled, *(d for d, _ in users)))
    return bundled, users, stamps


def _mtime(d: Path) -> float:
    try:
        return d.stat().st_mtime
    except OSError:                  # a registered folder deleted since: it simply holds nothing
        return -1.0


def list_hardware() -> list[str]:
    """Names of all loadable device profiles."""
    return sorted(_catalogue(*_state()))


def _hardware_index() -> names.NameIndex:
    return _index(*_state())


@functools.lru_cache(maxsize=16)
def _index(bundled: Path, users: tuple, stamps: tuple) -> names.NameIndex:
    entries = []
    overrides = dict(users)
    for name, f in _catalogue(bundled, users, stamps).items():
        try:
            hw = _load_cached(f, f.stat().st_mtime)
            aliases, memory = hw.aliases, hw.physical_memory_bytes
        except (ProfileError, OSError):
            aliases, memory = (), None   # a broken file keeps its name; loading it says what is wrong
        else:
            if f.parent != bundled:
                _check_own_name(hw, f, overrides.get(f.parent, False))
        entries.append(names.Entry(name, aliases, str(f), memory))
    return names.NameIndex.build("hardware", entries)


names.register_kind("hardware", _hardware_index)


def _check_own_name(hw: Hardware, path: Path, override: bool) -> None:
    """One name per device: a profile outside the bundled folder may not take a bundled device's
    name (or a spelling of it) unless it says it replaces it (`replaces: <name>`, or a file of that
    name in a folder registered with override=True); in a registered folder a profile's name is
    its file name (it is loaded by that name)."""
    bundled = bundled_profiles_dir()
    taken = _index(bundled, (), (_mtime(bundled),)).lookup(hw.name)
    registered = path.parent in {d for d, _ in _state()[1]}
    if registered and hw.name != path.stem:
        raise ProfileError(str(path), "name", f"value {hw.name!r} differs from the file name {path.name!r}: a "
                           "registered profile is loaded by its file name, so the two must agree")
    if taken is not None and hw.replaces != taken and not (override and path.stem == taken):
        raise ProfileError(str(path), "name", f"value {hw.name!r} is the bundled device {taken!r}; give the "
                           f"profile a name of its own, or add `replaces: {taken}` to say it replaces that one")


def one_name_each(devices, field: str = "hardware") -> None:
    """InvalidInputError when two different devices in one run share a name (a profile that
    replaces a bundled device beside the bundled one): their rows could not be told apart."""
    seen: dict[str, Hardware] = {}
    for hw in devices:
        other = seen.setdefault(hw.name, hw)
        if other != hw:
            raise InvalidInputError(field, hw.name, "devices with names of their own: two different profiles "
                                    "are both named this (a replacing profile beside the bundled one?)")


def load_hardware(name_or_path: str | Path | Hardware) -> Hardware:
    """A device by name (bundled or registered; any spelling `membound.catalog.names` resolves: case,
    spacing and punctuation aside, or an alias such as "NVIDIA H100 80GB HBM3"), by path to a
    YAML file, or passed through. A miss suggests the nearest names."""
    if isinstance(name_or_path, Hardware):
        return name_or_path
    hit = _by_name.get(name_or_path) if isinstance(name_or_path, str) else None
    if hit is not None:             # a bundled profile already loaded: no file-system work
        return hit
    if not isinstance(name_or_path, (str, Path)):
        raise InvalidInputError("hardware", name_or_path, "a device name, a YAML path or a Hardware")
    s = str(name_or_path)
    p = Path(s)
    if names.names_a_path(s, (".yaml", ".yml")):
        if not p.is_file():
            raise ProfileError(s, "<file>", "no such file")
        hw = _load_cached(p.resolve(), p.stat().st_mtime)
        if p.resolve().parent != bundled_profiles_dir().resolve():
            _check_own_name(hw, p, False)
        return hw
    state = _state()
    cat = _catalogue(*state)
    key = s if s in cat else _index(*state).resolve(s)
    f = cat[key]
    try:
        hw = _load_cached(f, f.stat().st_mtime)
    except FileNotFoundError:
        raise ProfileError(str(f), "<file>", "no such file (deleted since its folder was registered)") from None
    if f.parent == state[0] and not any(o for _, o in state[1]):   # bundled files do not change
        _by_name[s] = hw                                             # and nothing may shadow them
    return hw


def api_price_text(hardware: str, model: str) -> str:
    """The published per-token API price of `model` on `hardware` (chips sold as an API: Cerebras,
    Groq, SambaNova), to read beside the physics' cost; '' where the profile lists none."""
    a = load_hardware(hardware).api_price(model)
    if a is None:
        return ""
    return (f"{a.provider} lists ${a.output_usd_per_million:g} per million output tokens "
            f"(${a.input_usd_per_million:g} input; {a.date}, {a.source.split(' ', 1)[0]})")
