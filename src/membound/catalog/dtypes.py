"""Element formats and their true storage cost, block scales included.

Bits per element are what a format costs in memory, so a tensor of n elements takes
n * bits / 8 bytes. Block formats carry their scales: llama.cpp q4_0 stores 32 4-bit
weights plus one fp16 scale per block, (32*4 + 16) / 32 = 4.5 bits.

`compute` names the tensor-core peak a format's arithmetic runs at when it is the
*activation* dtype ("bf16", "fp8", "int8", "fp4"); block formats cannot be activation
dtypes. Users add formats with `register_dtype`.

`mixed_operand` marks a format that a chip's fp4/fp8 matrix instruction takes beside an
operand of the other width (`hardware.MIXED_OPERANDS`), so weights in it multiply 8-bit
activations without being dequantised first: NVIDIA Blackwell's `kind::f8f6f4` MMA takes
e2m1, e3m2/e2m3 and e4m3/e5m2 operands in any pairing, and `kind::mxf8f6f4.block_scale` the
same with OCP MX scales (ue8m0 per 32 elements) applied in hardware, both at the fp8 rate
("2x Hopper FP8", against 4x for `kind::mxf4`: CUTLASS "Blackwell SM100 GEMMs",
docs.nvidia.com/cutlass/media/docs/cpp/blackwell_functionality.html; PTX ISA, tcgen05.mma
kinds). That holds for bare fp4, fp8 and mxfp4; NVFP4's e4m3 scales per 16 elements are
taken only by `kind::mxf4nvf4`, whose operands are both e2m1, so NVFP4 weights beside fp8
activations are dequantised.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from . import names
from ..errors import InvalidInputError, is_finite_number


@dataclass(frozen=True)
class DType:
    """One element format: `bits` per element in memory, including block scales."""

    name: str
    bits: float
    compute: str | None = None   # the peak-FLOP/s key this format computes at, if any
    description: str = ""
    mixed_operand: bool = False  # a mixed fp4/fp8 matrix instruction takes it as it is (module docstring)

    @property
    def bytes(self) -> float:
        """Bytes per element."""
        return self.bits / 8.0


# Sources: llama.cpp ggml-common.h block layouts (q8_0: 32 int8 + fp16 scale = 34 bytes / 32;
# q4_0: 16 bytes + fp16 scale = 18 bytes / 32; q4_K: 144 bytes / 256 = 4.5 bpw, q5_K: 176 / 256
# = 5.5, q6_K: 210 bytes / 256 = 6.5625 bpw). A Q4_K_M or Q5_K_M file's layers mix q4_K (q5_K) with
# q6_K: llama-quant.cpp (llama_tensor_get_type_impl) gives attn_v and ffn_down q6_K in half the
# layers (use_more_bits: the first and last eighth, and every third between); in Llama-2-7B's
# 202.4M-weight layer those are (16.8M + 45.1M) / 2 = 15.3%, so 4.5 + 0.153 x 2.0625 = 4.81 and
# 5.5 + 0.153 x 1.0625 = 5.66 bpw. The output tensor is apart (q6_K: quantization.GGUF_OUTPUT);
# with it Llama-2-7B Q4_K_M holds 6.607e9 x 4.81/8 + 131.1e6 x 6.5625/8 = 4.080e9 B = 3.80 GiB,
# as llama-bench reports for the file. OCP MX spec v1.0 (mxfp4: 32 fp4 + one 8-bit shared scale = 4.25);
# NVIDIA NVFP4 (16 fp4 + fp8 e4m3 scale = 4.5, plus a per-tensor fp32 scale, negligible);
# AWQ/GPTQ int4 with group 128 and fp16 scales: 4 + 16/128 = 4.125 (zero points, when packed
# at 4 bits, add 4/128 more; we use the scale-only figure).
_BUILTIN = (
    DType("fp32", 32, "fp32", "IEEE single precision"),
    DType("tf32", 32, "tf32", "stored as fp32, computed as tf32"),
    DType("bf16", 16, "bf16", "bfloat16"),
    DType("fp16", 16, "fp16", "IEEE half precision"),
    DType("fp8", 8, "fp8", "fp8 e4m3/e5m2, per-tensor scale", mixed_operand=True),
    DType("int8", 8, "int8", "int8 with per-channel scales"),
    DType("int4", 4 + 16 / 128, None, "int4, group 128, fp16 scales (AWQ/GPTQ style)"),
    DType("int4_g32", 4 + 16 / 32, None, "int4, group 32, bf16 scales (Kimi-K2 / K2.5 native INT4 experts)"),
    DType("int4_g64", 4 + 16 / 64, None, "int4, group 64, fp16 scales (AWQ's Falcon-7B: 4544 is no multiple of 128)"),
    DType("fp4", 4, "fp4", "bare fp4 e2m1", mixed_operand=True),
    DType("mxfp4", 4 + 8 / 32, "fp4", "OCP MX fp4: 32 elements share an 8-bit scale", mixed_operand=True),
    DType("nvfp4", 4 + 8 / 16, "fp4", "NVIDIA fp4: 16 elements share an fp8 scale"),
    DType("q8_0", 8 + 16 / 32, None, "llama.cpp q8_0: 32 int8 + fp16 scale"),
    DType("q4_0", 4 + 16 / 32, None, "llama.cpp q4_0: 32 4-bit + fp16 scale"),
    DType("q4_k_m", 4.81, None, "llama.cpp Q4_K_M layers: q4_K with some q6_K tensors (~4.81 bpw)"),
    DType("q6_k", 6.5625, None, "llama.cpp q6_K: 210 bytes per 256 weights"),
    DType("q5_k_m", 5.66, None, "llama.cpp Q5_K_M layers: q5_K with some q6_K tensors (~5.66 bpw)"),
)
_ALIASES = {"f16": "fp16", "f32": "fp32", "float16": "fp16", "bfloat16": "bf16",
            "float32": "fp32", "e4m3": "fp8", "fp8_e4m3": "fp8", "w4a16": "int4", "int4_g128": "int4",
            "q4_k": "q4_k_m", "q5_k": "q5_k_m"}


class _Registry(dict[str, DType]):
    """name -> DType. Every write or deletion counts in `generation`: estimate.prepare's cache
    is keyed on it, so it never serves a format replaced since (by register_dtype or by hand)."""

    generation = 0

    def __setitem__(self, key: str, value: DType) -> None:
        super().__setitem__(key, value)
        self.generation += 1

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.generation += 1


_registry = _Registry({d.name: d for d in _BUILTIN})
_BUILTIN_NAMES = frozenset(_registry)
_lock = threading.Lock()


def register_dtype(name: str, bits: float, compute: str | None = None,
                   description: str = "", *, replace: bool = False, mixed_operand: bool = False) -> DType:
    """Add a format; `bits` per element, block scales included; `mixed_operand` where a mixed
    fp4/fp8 matrix instruction takes it as it is (module docstring). Replacing a built-in format
    (bf16, q4_0, ...; names are case-insensitive) changes every estimate in the process, so it
    needs `replace=True`; an alias (f16, bfloat16, ...) cannot be registered at all."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("name", name, "a non-empty string")
    if isinstance(bits, bool) or not isinstance(bits, (int, float)) or not is_finite_number(bits) \
            or not 0 < bits <= 64:
        raise InvalidInputError("bits", bits, "a finite number of bits per element in (0, 64]")
    if compute is not None and not isinstance(compute, str):
        raise InvalidInputError("compute", compute, "None or a peak-FLOP/s key such as 'bf16' or 'fp8'")
    if not isinstance(mixed_operand, bool):
        raise InvalidInputError("mixed_operand", mixed_operand, "True or False")
    key = name.strip().lower()
    if key in _ALIASES:
        raise InvalidInputError("name", name, f"a new name: {key!r} is an alias of {_ALIASES[key]!r}")
    if key in _BUILTIN_NAMES and not replace:
        raise InvalidInputError("name", name, f"a name that is not built in ({key!r} is; pass replace=True "
                                              "to change it for the whole process)")
    d = DType(key, float(bits), compute, description, mixed_operand)
    with _lock:
        _registry[d.name] = d
    return d


def generation() -> int:
    """How many times the registry has changed since import: a cache keyed on it
    (estimate.prepare's) never serves a format replaced since."""
    return _registry.generation


def compute_keys() -> frozenset[str]:
    """The peak-FLOP/s keys the registered formats compute at (fp32, tf32, bf16, fp16, fp8, int8,
    fp4, and any a registered format adds): the keys a device's `compute_flops` may give."""
    with _lock:
        return frozenset(d.compute for d in _registry.values() if d.compute)


def get_dtype(name: str | DType) -> DType:
    """The registered format called `name` (case-insensitive; f16 = fp16)."""
    hit = _registry.get(name) if type(name) is str else None    # a registered name as written: no
    if hit is not None:                                          # alias is ever registered (below)
        return hit
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise InvalidInputError("dtype", name, "a dtype name such as 'bf16' or 'q4_0'")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    hit = _registry.get(key)
    return hit if hit is not None else _registry[_index().resolve(name)]


def _index() -> names.NameIndex:
    """Names and aliases of the formats registered now (case, '-', '_', '.' aside: Q4_K_M, fp-8)."""
    with _lock:
        current = tuple(_registry)
    return _index_of(current)


@functools.lru_cache(maxsize=8)
def _index_of(current: tuple[str, ...]) -> names.NameIndex:
    aliases: dict[str, list[str]] = {}
    for a, target in _ALIASES.items():
        aliases.setdefault(target, []).append(a)
    return names.NameIndex.build("dtype", (names.Entry(n, tuple(aliases.get(n, ()))) for n in current))


names.register_kind("dtype", _index)


def list_dtypes() -> list[str]:
    """Names of all registered formats."""
    return sorted(_registry)
