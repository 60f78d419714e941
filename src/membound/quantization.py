"""Quantization as a multiplier: weights, KV cache and activations chosen separately.

- Weights: fewer bits per weight, fewer bytes per step (block scales included, see dtypes).
- KV cache: fewer bytes per cached token, so longer contexts and bigger batches fit and stream faster.
- Activations: the dtype the matrix units compute in; FP8/INT8/FP4 raise the compute peak
  where the device has them (an FP8 tensor core doubles BF16's; an A100 has none).

When `activations` is not given it follows the weights where the device computes in the
weight format (fp8 weights -> fp8 tensor cores, nvfp4/mxfp4 -> fp4 where supported), and is
bf16 otherwise (weight-only formats such as int4 and llama.cpp blocks dequantize to 16 bits).
Weight-only formats pay `dequant_overhead` extra GEMM work (fraction of the 2*params FLOPs),
which only matters once the step is compute-bound — where weight-only int4 stops paying off.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .dtypes import DType, get_dtype
from .errors import InvalidInputError

DEFAULT_DEQUANT_OVERHEAD = 0.15   # Marlin-class kernels: near-ideal to batch ~16-32, then ~fp16 GEMM speed less a little


@dataclass(frozen=True)
class Quantization:
    """Formats for weights, KV cache and activations (names from the dtype registry)."""

    weights: str = "bf16"
    kv: str | None = None            # default: bf16 (fp16 stands in)
    activations: str | None = None   # default: see module docstring
    dequant_overhead: float | None = None

    def __post_init__(self):
        get_dtype(self.weights)
        if self.kv is not None:
            get_dtype(self.kv)
        if self.activations is not None and get_dtype(self.activations).compute is None:
            raise InvalidInputError("activation_dtype", self.activations,
                                    "a format tensor cores compute in (bf16, fp16, fp8, int8, fp4)")
        d = self.dequant_overhead
        if d is not None and not (isinstance(d, (int, float)) and math.isfinite(d) and d >= 0):
            raise InvalidInputError("dequant_overhead", d, "a finite fraction >= 0")

    def resolve(self, hw) -> Resolved:
        """Bytes and compute peaks on device `hw`."""
        w = get_dtype(self.weights)
        kv = get_dtype(self.kv or "bf16")
        act_asked = get_dtype(self.activations) if self.activations is not None else None
        act, peak, attn_peak = _compute_dtypes(w, kv, act_asked, hw, get_dtype("bf16"), get_dtype("fp32"))
        weight_only = w.compute is None or w.compute != act.compute and w.bits < act.bits
        dq = self.dequant_overhead if self.dequant_overhead is not None else DEFAULT_DEQUANT_OVERHEAD
        return Resolved(w, kv, act, peak, dq if weight_only else 0.0, attn_peak)


@functools.lru_cache(maxsize=4096)
def _compute_dtypes(w: DType, kv: DType, act_asked: DType | None, hw, bf16: DType, fp32: DType) -> tuple:
    """(activation dtype, its peak FLOP/s, attention's peak FLOP/s) for these formats on `hw`.
    Attention (QK^T, AV) computes in the KV's format: fp8 where the KV is fp8, the activations
    are 8-bit or less and the chip has fp8; else 16-bit (never fp4, whatever the weights).
    bf16 and fp32 are passed in (not looked up here) so a replaced format is never served stale."""
    if act_asked is not None:
        act = act_asked
        peak = hw.peak_flops(act.compute)           # raises if the device lacks it
    else:
        act = w if (w.compute in ("fp8", "fp4", "int8") and hw.supports(w.compute)) else bf16
        if not hw.supports(act.compute):
            act = fp32 if hw.supports("fp32") else act
        peak = hw.peak_flops(act.compute)
    attn = "fp8" if kv.compute == "fp8" and act.bits <= 8 and hw.supports("fp8") else "bf16"
    return act, peak, hw.peak_flops(attn) if hw.supports(attn) else peak


@dataclass(frozen=True)
class Resolved:
    weights: DType
    kv: DType
    activations: DType
    peak_flops: float
    dequant: float
    attn_peak_flops: float
