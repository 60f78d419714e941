"""`estimate()`: one prediction for one configuration, and the pure bandwidth ceiling."""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field, replace
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from ..base import defaults
from ..base import stacking
from ..catalog import dtypes
from .core import (BOUNDS, ChipBase, Drafter, Knobs, ModelConsts, SpecArgs, bound_name, chip_base, evaluate,
                   model_consts, step_terms)
from ..catalog.dtypes import get_dtype
from ..errors import DoesNotFitError, InvalidInputError, MemboundError, is_finite_number
from ..catalog.hardware import Hardware, MemoryTier, load_hardware
from ..catalog.model import Model, load_model
from .parallel import Parallel, as_parallel, fewest_chips, layout_for, units
from .quantization import Quantization, Resolved, upcast_rate
from .result import Memory, Result, TierUse, create_frozen
from ..catalog.runtime import Runtime, load_runtime
from .efficiency import Efficiency, efficiency
from .plan import run, trace, trace_shared
from .speculative import SpeculativeDecoding
import numpy as np


MAX_COUNT = 10**9
"""The largest batch, token count or chip count any function takes: far beyond a real
deployment, and small enough that every product of counts stays exact in float arithmetic
(10**400 overflowed a float; a prompt of 10**19 tokens lost the decode step to rounding)."""

_WORKLOAD = frozenset(("batch", "prompt", "output"))   # the Knobs fields chip_base does not read


def check_int(field: str, value, minimum: int, maximum: int = MAX_COUNT) -> int:
    """An integer in [minimum, maximum] (numpy integers accepted), else InvalidInputError."""
    if type(value) is int and minimum <= value <= maximum:      # the common case, without the ABC check
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not minimum <= int(value) <= maximum:
        raise InvalidInputError(field, value, f"an integer from {minimum:,} to {maximum:,}")
    return int(value)


def check_counts(batch, prompt_tokens, output_tokens, n_chips) -> tuple[int, int, int, int]:
    """`check_int` of estimate()'s batch (>= 1), prompt and output tokens (>= 0, >= 1) and chip count
    (>= 1) in one call: plain ints in range pass as they are (the hot path's four checks at once)."""
    if type(batch) is int is type(prompt_tokens) is type(output_tokens) is type(n_chips) \
            and 1 <= batch <= MAX_COUNT and 0 <= prompt_tokens <= MAX_COUNT and 1 <= output_tokens <= MAX_COUNT \
            and 1 <= n_chips <= MAX_COUNT:
        return batch, prompt_tokens, output_tokens, n_chips
    return (check_int("batch", batch, 1), check_int("prompt_tokens", prompt_tokens, 0),
            check_int("output_tokens", output_tokens, 1), check_int("n_chips", n_chips, 1))


def check_context(m: Model, prompt_tokens, output_tokens) -> None:
    """prompt + output tokens (numbers or arrays: the largest counts) within the model's context
    window, else InvalidInputError; a model without a known window is not checked."""
    if isinstance(prompt_tokens, int) and isinstance(output_tokens, int):
        total = prompt_tokens + output_tokens
    else:
        total = int(np.max(prompt_tokens)) + int(np.max(output_tokens))
    if m.max_context is not None and total > m.max_context:
        raise InvalidInputError("prompt_tokens + output_tokens", total,
                                f"at most {m.name}'s context window of {m.max_context:,} tokens "
                                f"(allow_beyond_context=True estimates past it)")


def _check_price(value):
    if value is None:
        return None
    if not is_finite_number(value) or value < 0:
        raise InvalidInputError("price_usd_per_hour", value, "a finite price >= 0 per chip-hour")
    return float(value)


def estimate(model, hardware, *, batch: int = defaults.BATCH, prompt_tokens: int = defaults.PROMPT_TOKENS,
             output_tokens: int = defaults.OUTPUT_TOKENS, weight_dtype: str = defaults.WEIGHT_DTYPE,
             kv_dtype: str | None = None, activation_dtype: str | None = None,
             n_chips: int | str | None = None, parallel: Parallel | None = None,
             speculative: SpeculativeDecoding | None = None,
             runtime=None, quantization: Quantization | None = None, placement: dict | None = None,
             price_usd_per_hour: float | None = None, check_memory: bool = True,
             allow_beyond_context: bool = False, dense_weight_dtype: str | None = defaults.DENSE_WEIGHT_DTYPE) -> Result:
    """Predict decode speed, TTFT, end-to-end time, memory and cost for one configuration.

    model, hardware: objects or names (hardware may be a YAML path). batch: sequences decoded
    together; prompt_tokens / output_tokens per sequence. n_chips: a count, or None / "auto" (the
    default): the fewest chips that hold this configuration (`capacity.min_chips`'s search; on a
    chip with memory tiers, the fewest that hold it in the tiers a decode streams at speed,
    `min_chips(..., at_speed=True)`; the chips of `parallel` where one is given; one chip with
    check_memory=False); laid out by `parallel`
    (default: `parallel.layout_for`, the one layout rule; chips it cannot use whole stay idle). runtime: None
    (the device's measured fractions), "ideal" (pure roofline) or an engine ("llama.cpp", "vllm",
    "tensorrt-llm", "sglang"). placement pins "weights"/"kv" to tier names. check_memory=False returns a result even when the
    configuration does not fit (memory.fits is then False). The workload defaults are
    `membound.defaults` (batch 1, 2,048 prompt and 256 output tokens, bf16), as the CLI's.
    prompt_tokens + output_tokens beyond the model's context window (`Model.max_context`) is an
    InvalidInputError unless allow_beyond_context=True. dense_weight_dtype: the format of every
    tensor that is not a routed expert (attention, dense FFNs, shared experts, LM head,
    embeddings) when the checkpoint keeps them apart (gpt-oss: weight_dtype="mxfp4",
    dense_weight_dtype="bf16"); None = weight_dtype (see mb.Quantization).
    Raises DoesNotFitError (with bytes missing and the fewest chips that would hold it) when it
    does not fit.
    """
    args = (model, hardware, batch, prompt_tokens, output_tokens, weight_dtype, kv_dtype, activation_dtype,
            speculative, runtime, quantization, placement, price_usd_per_hour, allow_beyond_context,
            dense_weight_dtype)     # `_prepare`'s, less the chips and their layout
    found = None
    if n_chips is None or isinstance(n_chips, str):
        n_chips, found = _auto_chips(n_chips, parallel, check_memory, args)
    if found is None:
        p, B, S, T = _prepare(n_chips, parallel, *args)
        result, fits = _evaluated(p, B, S, T, speculative)
    else:       # the search's last count is the one found: its evaluation is this call's
        p, result = found
        assert result.memory is not None        # built already: the search read it
        fits = result.memory.fits
    if check_memory and (p.pinned or not fits):
        memory = result.memory
        assert memory is not None               # _evaluated always gives its memory
        _check_fit(memory, p.hardware, p.pinned, p.model, p.n_chips, p.layout, lambda: _fewest_chips(args, p.model,
                                                                                                     p.hardware))
    return result


def _evaluated(p: Prepared, B: int, S: int, T: int, speculative: SpeculativeDecoding | None,
               memory: bool = False) -> tuple[Result, bool]:
    """`estimate()`'s Result of configuration `p` at batch B, prompt S and output T (all checked), its
    memory not checked, and whether it fits. Its memory, bound and step terms are left to their
    first read (`_Later`, `result.Deferred`); memory: its Memory built now, with whether it fits
    (what a fewest-chips search reads), its other fields left to their first read."""
    planned = _planned(p, B, S, T, speculative)
    if planned is None:
        r = _figures(p, _workload(p.knobs, B, S, T))    # = p.at(B, S, T).evaluate(terms=False)
        fields = _fields(p, r, B, S, T, speculative)
    else:
        fields, r = planned
    if not (0.0 < fields["decode_tok_s_per_user"] < _INF and 0.0 < fields["ttft_s"] < _INF
            and 0.0 < fields["e2e_s"] < _INF):       # a last guard: never NaN/inf/0 (NaN compares False)
        for key in ("decode_tok_s_per_user", "ttft_s", "e2e_s"):
            if not (math.isfinite(fields[key]) and fields[key] > 0):
                raise InvalidInputError(key, fields[key], f"a finite positive figure; the inputs ({p.model.name} "
                                        f"on {p.hardware.name}) are outside the physical range")
    later = object.__new__(_Later)
    later.r, later.tiers = r, p.hardware.memory
    fields["_deferred"] = later
    result = create_frozen(Result, fields)
    fits = bool(r["fits"])
    if memory:
        result.__dict__["memory"] = create_frozen(Memory, {"fits": fits, "_deferred": later})
    return result, fits


_INF = math.inf


def _fields(p: Prepared, r: dict[str, Any], B: Any, S: Any, T: Any, speculative: SpeculativeDecoding | None
            ) -> dict[str, Any]:
    """The fields of `_evaluated`'s Result (less those built later) of configuration `p` at batch B,
    prompt S and output T (ints, or their `plan.Sym`s in a trace), from `_figures`' figures `r`."""
    watts = p.hardware.power_w
    return {      # a dict display: one dict (estimate()'s hot path)
        **p.labels, "batch": B, "prompt_tokens": S, "output_tokens": T,
        "decode_tok_s_per_user": r["decode_tok_s_per_user"], "decode_tok_s_total": r["decode_tok_s_total"],
        "ttft_s": r["ttft_s"], "prefill_s": r["prefill_s"], "e2e_s": r["e2e_s"], "tpot_s": r["tpot_s"],
        "cost_per_million_tokens_usd": r["cost_per_million_tokens_usd"] if p.price is not None else None,
        "joules_per_token": (watts * p.n_chips * r["e2e_s"] / (B * T)) if watts else None,
        "speculative": None if speculative is None or p.spec_args is None else {
            "gamma": speculative.gamma, "tokens_per_round": p.spec_args.tokens_per_round,
            "verify_positions": int(p.positions), "draft": getattr(speculative.draft, "name", speculative.draft)},
        "assumptions": p.assumptions}


def _figures(p: Prepared, kn: Knobs) -> dict[str, Any]:
    """`core.evaluate` of configuration `p` at the workload of `kn`, without the prefill's terms as
    one pass (which `estimate()` does not report)."""
    if p.spec_args is None and p.pinned is None:    # p.extra holds evaluate's defaults: not bound again
        return evaluate(p.consts, p.hardware, p.eff, kn, base=p.chip_base, terms=False)
    return evaluate(p.consts, p.hardware, p.eff, kn, base=p.chip_base, terms=False, **p.extra)


_READ = ("decode_tok_s_per_user", "decode_tok_s_total", "ttft_s", "prefill_s", "e2e_s", "tpot_s",
         "cost_per_million_tokens_usd", "fits", "weights_bytes_chip", "kv_bytes_chip", "activation_bytes_chip",
         "extra_bytes_chip", "capacity_bytes_chip", "per_tier", *(f"{k}_s" for k in BOUNDS))
"""The figures of `_figures` that `_evaluated` and its Result (`_Later`) read."""

_PLAN_AFTER = 32
"""A configuration's evaluations on the cold path before its plan is traced (`_planned`): tracing and
compiling one takes 5-10 ms (the README example, quiet machine; 25-60 ms at load 15), 150-300 cold
evaluations, which a configuration evaluated a few times (a validation row, a fewest-chips search)
would not win back; after 32 a configuration evaluated exactly that often pays at most about twice
its cold time, and one evaluated more pays less and less. Where its structure's shared plan answers
for it, after `_OWN_AFTER`."""

_OWN_AFTER = 4096
"""A configuration's evaluations before its plan is traced alone where its structure's shared plan
answers for it (`_plan`): its own plan, its numbers constants (folded), is 5-8% faster than the
shared one (the README example: 17.7 against 19.5 us a call, load 5), about 1 us a call, against
5-10 ms to trace it: repaid after some 5,000-10,000 calls, so traced on the 4,096th, not on the
32nd, when 50 such configurations (issue 33's benchmark, 60 calls each) would each trace one."""

_PLANS: dict[int, list[Any]] = {}
"""`_planned`'s state by the identity of a Prepared: [the Prepared (held, so that its id is not
reused while the entry lives), its evaluations so far, its plan (None: not yet; False: untraceable),
its structure's entry in `_SHARED` and its parameters (`_shape`; None: it shares no plan; _UNSEEN: not
yet looked up), the evaluation on which it is traced alone (_PLAN_AFTER; _OWN_AFTER where its
structure's plan answers for it)]."""

_SHARED: dict[Hashable, list[Any]] = {}
"""Plans shared by the configurations of one structure (`_shape`): [the Prepared first traced (held:
the key names objects by identity), the structure's evaluations so far, its maker
(`plan.trace_shared`; None: not yet; False: untraceable), its numbers' count]."""


def _planned(p: Prepared, B: int, S: int, T: int, speculative: SpeculativeDecoding | None
             ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(`_fields`, `_figures`' figures `_READ`) of `p` at batch B, prompt S and output T (checked) from
    p's plan (`physics.plan`: its evaluation traced once into straight-line Python, the same floats),
    or None where the configuration has no plan (untraceable, or it and its structure evaluated
    fewer than _PLAN_AFTER and _SHARE_AFTER times) or its plan raised (the caller evaluates it
    cold). Until its own plan is traced, a configuration uses its structure's shared plan where that
    has one (`_shape`: configurations of one model, device and layout that differ only in numbers,
    such as their formats' and their runtime's), from its first evaluation. `speculative` is p's own
    (part of the configuration it was prepared from)."""
    entry = _PLANS.get(id(p))
    if entry is None or entry[0] is not p:
        if len(_PLANS) >= _SEEN_MAX:
            _PLANS.clear()
        entry = _PLANS[id(p)] = [p, 0, None, _UNSEEN, _PLAN_AFTER]
    if entry[1] < entry[4]:         # not yet traced alone
        entry[1] += 1
        plan = entry[2] if entry[2] and entry[1] < entry[4] else _plan(entry, p, speculative)
    else:
        plan = entry[2]             # None while another thread is still tracing it
    if not plan:                    # none yet (None) or untraceable (False)
        return None
    return run(plan, float(B), float(S), float(T), B, S, T)


def _plan(entry: list[Any], p: Prepared, speculative: SpeculativeDecoding | None) -> Any:
    """The plan of `_planned`'s configuration `p` (its `entry`, counted): traced alone on its
    _PLAN_AFTER-th evaluation (False: untraceable, where its structure has no plan either), else its
    structure's shared plan where that has one or is traced now (on the structure's _SHARE_AFTER-th
    evaluation); None: none yet. Kept in the entry."""
    if entry[1] >= entry[4]:
        own = trace(lambda *workload: _traced(p, speculative, *workload), _NAMES, real=_REAL, spans=_COUNTS)
        entry[2] = own or entry[2] or False
        return entry[2]
    if entry[3] is _UNSEEN:
        if entry[1] < _SHAPE_AFTER:
            return None
        shape = entry[3] = _shape(p, speculative)   # its structure looked up once, its evaluations
        if shape is not None:                       # before this one counted as its structure's too
            shape[0][1] += entry[1] - 1             # (`_SHARE_AFTER`)
    if entry[2] is not None or entry[3] is None:
        return entry[2]
    shared, values = entry[3]
    if shared[2] is None:
        shared[1] += 1
        if shared[1] < _SHARE_AFTER:
            return None
        shared[2] = _trace_shared(p, speculative, shared[3]) or False
    if shared[2] is False:      # its structure cannot be traced: cold until its own plan, or where
        # its structure spans models and devices, cold until its model's and device's own is planned
        entry[3] = None if shared[3][1] is None else _shape(p, speculative, narrow=True)
        return None
    try:
        entry[2] = shared[2](*values)
    except (ArithmeticError, ValueError):   # a line of its own numbers raised: cold, as it raises there
        entry[2], entry[3] = None, None
    else:
        entry[4] = _OWN_AFTER
    return entry[2]


_SHARE_AFTER = 16
"""A structure's evaluations on the cold path (of any of its configurations, each counted from its first:
a configuration's before its structure is looked up too) before its shared plan is traced (`_plan`):
a shared plan's tracing (8-15 ms, 6-8 ms of it compile(): issue 33's benchmark, load 5) is worth it
only for a structure evaluated more than a few times. A structure spans models, devices, formats,
runtimes and prices (issue 33's 50 models x devices x chip counts: 6 structures; its 96 formats x
runtimes x prices: 2), so one evaluated 16 times is likely to be evaluated many more, each call
saving 20-30 us against the cold path (40-50 us): at 16 rather than 32 the benchmark's new
configurations are planned about two passes sooner (cold calls among its 500 timed: 136 -> 48),
for the same 6 traces."""
_SHAPE_AFTER = 2
"""A configuration's evaluations before its structure is looked up (`_shape`, 20-50 us: a walk of its
efficiencies', knobs' and chip's ~100 fields): not for one evaluated once (a validation row, a
count of a fewest-chips search), which its structure's plan would not pay back."""
_UNSEEN = object()     # an entry whose structure is not yet looked up

_NAMES = ("B", "S", "T", "b", "s", "t")
_REAL = (True, True, True, False, False, False)


def _shape(p: Prepared, speculative: SpeculativeDecoding | None, narrow: bool = False
           ) -> tuple[list[Any], list[Any]] | None:
    """(its structure's entry in `_SHARED`, made where new; its parameters) of configuration `p` where a
    plan may be shared: one without speculative decoding or a pinned placement, whose evaluation
    reads its layout, chips and labels' names, whether it is priced, and the numbers of its
    efficiencies, knobs and chip (`base.stacking.numbers`: each may differ among configurations of
    one structure, and none is branched on), of its model's constants and of what it reads of its
    device (`_constants`: numbers whose truth is part of the structure, since the physics branches
    on some, `if mc.n_experts`), then its labels, its device's unsourced figures (returned, never
    computed with) and its model's name; else None. narrow: a structure of its model and device
    (their objects, by identity), for one whose structure across models and devices cannot be
    traced (`_plan`). An Efficiency's structure and numbers are walked once per object (`_EFFS`:
    one runtime on one device is one object for every format but weight-only ones that upcast),
    a model's constants and a device's once per object (`_CONSTS`)."""
    if speculative is not None or p.spec_args is not None or p.pinned is not None:
        return None
    eff = _walked(_EFFS, p.eff, _walk_eff)
    values = [*eff[2]]
    numbers = stacking.numbers((p.knobs, p.chip_base), values)
    n = len(values)
    if narrow:
        key: Hashable = (id(p.consts), id(p.hardware))
        counts: tuple[int, int | None, int] = (n, None, 0)
    else:
        consts, device = _walked(_CONSTS, p.consts, _constants), _walked(_CONSTS, p.hardware, _constants)
        key, counts = (consts[1], device[1]), (n, len(consts[2]), len(device[2]))
        values += consts[2]
        values += device[2]
    key = (key, p.n_chips, p.price is None, tuple(p.labels), eff[1], numbers)
    shared = _SHARED.get(key)
    if shared is None:
        if len(_SHARED) >= _SEEN_MAX:
            _SHARED.clear()
        shared = _SHARED[key] = [p, 0, None, counts]
    return shared, [*values, *p.labels.values(), p.assumptions, p.consts.name]


def _walked(cache: dict[int, Any], obj: Any, walk: Any) -> Any:
    """walk(obj) as `(obj, ...)`, once per object (by identity; the entry holds the object)."""
    got = cache.get(id(obj))
    if got is None or got[0] is not obj:
        if len(cache) >= _SEEN_MAX:
            cache.clear()
        got = cache[id(obj)] = walk(obj)
    return got


def _walk_eff(eff: Efficiency) -> tuple[Efficiency, Hashable, list[float]]:
    numbers: list[float] = []
    return eff, stacking.numbers(eff, numbers), numbers


def _number(x: Any) -> bool:
    return x.__class__ is float or x.__class__ is int


def _walk(x: Any, numbers: list[Any]) -> Hashable:
    """A key of `x` for `_constants`, appending its numbers (floats and ints, in tuples item by item) to
    `numbers`: a number as its type and truth, anything else by value (`stacking._value`)."""
    if _number(x):
        numbers.append(x)
        return x.__class__, bool(x)
    if x.__class__ is tuple:
        return tuple([_walk(v, numbers) for v in x])
    return stacking._value(x)


def _rebuilt(x: Any, params: Iterator[Any]) -> Any:
    """`x` with each number `_walk` walks replaced by the next of `params`."""
    if _number(x):
        return next(params)
    if x.__class__ is tuple:
        return tuple([_rebuilt(v, params) for v in x])
    return x


_GROUPS = frozenset(("window_groups", "held_groups"))
"""ModelConsts' (window or None, layers) groups: a window is by value (`roofline` takes float() of it and
branches on None), its layers a number. Likewise its context pieces (lo, hi, u0, u1): the edges, windows,
by value (`roofline.sum_over_context` tests hi == inf), the pairs u0 + u1 L numbers."""


def _model_fields(mc: ModelConsts) -> Iterator[tuple[str, Any]]:
    """(field, what `_walk` walks of it) of model constants as `_constants` sees them: each but the name
    (a label), a group's window left out (`_GROUPS`: by value in the key, as is the rest)."""
    for name, x in mc.__dict__.items():
        if name in _GROUPS:
            yield name, tuple(n for _, n in x)
        elif name == "pieces":
            yield name, tuple(piece[2:] for piece in x)
        elif name != "name":
            yield name, x


def _constants(obj: ModelConsts | Hardware) -> tuple[Any, Hashable, list[Any]]:
    """(obj, its structure key, its numbers) of what a shared plan's `core.evaluate` (no chip_base, no
    speculative decoding) reads of a model's constants (every field: each float or int a number,
    in tuples item by item, but a window or a context piece's edges (`_GROUPS`); its name a label;
    its model type by value) or of a device (`_Device`: its tiers' capacity and bandwidth, and its
    power, numbers; its tiers' names left out: no plan without a pinned placement reads them; its operand width and activation
    chunk by value). Each number is a parameter of the plan whose truth (zero or not) is part of
    the key: the physics branches on a number's truth only (`if mc.n_experts`, `if watts`); any
    other use of a number as a Python value (a comparison branched on, float()) leaves the
    structure untraceable (`plan.Untraceable`; `_plan` then shares no plan across models and
    devices), never wrong."""
    numbers: list[Any] = []
    if isinstance(obj, ModelConsts):
        key: Hashable = (tuple((name, _walk(x, numbers)) for name, x in _model_fields(obj)),
                         tuple(tuple(w for w, _ in obj.__dict__[g]) for g in sorted(_GROUPS)),
                         tuple(stacking._value(piece[:2]) for piece in obj.pieces))
    else:
        key = (_walk((tuple((t.capacity_bytes, t.bandwidth_bytes_s) for t in obj.memory), obj.power_w), numbers),
               stacking._value(obj.operand_bytes), stacking._value(obj.activation_chunk_tokens))
    return obj, (type(obj), key), numbers


def _model_view(mc: ModelConsts, params: Iterator[Any], name: Any) -> ModelConsts:
    """Model constants `mc` with their numbers (`_constants`) the next of `params`, and `name`."""
    fields = {f: _rebuilt(x, params) for f, x in _model_fields(mc)}
    for g in _GROUPS:
        fields[g] = tuple(zip((w for w, _ in mc.__dict__[g]), fields[g]))
    fields["pieces"] = tuple(piece[:2] + u for piece, u in zip(mc.pieces, fields["pieces"]))
    fields["name"] = name
    view = object.__new__(ModelConsts)
    object.__setattr__(view, "__dict__", {f: fields[f] for f in mc.__dict__})
    return view


_EFFS: dict[int, tuple[Efficiency, Hashable, list[float]]] = {}
"""`_shape`'s walks of Efficiency objects by identity: (the object, held; its structure key; its numbers)."""
_CONSTS: dict[int, tuple[Any, Hashable, list[Any]]] = {}
"""`_shape`'s walks of model constants and devices by identity (`_constants`)."""


class _Tier:
    """A memory tier as a shared plan's `core.placement` reads it (no pinned placement): its numbers."""

    __slots__ = ("capacity_bytes", "bandwidth_bytes_s")

    def __init__(self, capacity_bytes: Any, bandwidth_bytes_s: Any):
        self.capacity_bytes, self.bandwidth_bytes_s = capacity_bytes, bandwidth_bytes_s


class _Device:
    """What a shared plan's `core.evaluate` and `_fields` read of a device (`_constants`), its numbers
    the plan's parameters: any other attribute is missing (AttributeError: untraceable)."""

    __slots__ = ("memory", "power_w", "operand_bytes", "activation_chunk_tokens")

    def __init__(self, hw: Hardware, params: Iterator[Any]):
        tiers, self.power_w = _rebuilt((tuple((t.capacity_bytes, t.bandwidth_bytes_s) for t in hw.memory), hw.power_w),
                                       params)
        self.memory = tuple(_Tier(*t) for t in tiers)
        self.operand_bytes, self.activation_chunk_tokens = hw.operand_bytes, hw.activation_chunk_tokens


def _trace_shared(p: Prepared, speculative: SpeculativeDecoding | None, counts: tuple[int, int | None, int]) -> Any:
    """The maker of the plan shared by the configurations of p's structure (`_shape`, with `counts`: its
    efficiencies', knobs' and chip's numbers, its model's and its device's, None: their own objects
    for all; `plan.trace_shared`), or None where it cannot be traced."""
    labels = tuple(p.labels)
    n, n_model, n_device = counts
    m = n + (n_model or 0)
    end = m + n_device
    view = _View(p.hardware, p.price, p.n_chips)

    def traced(batch, prompt, output, B, S, T, *params):
        eff, knobs, base = stacking.with_numbers((p.eff, p.knobs, p.chip_base), iter(params[:n]))
        mc, hw = p.consts, p.hardware
        if n_model is not None:
            mc = _model_view(p.consts, iter(params[n:m]), params[-1])
            hw = view.hardware = _Device(p.hardware, iter(params[m:end]))
        fields = knobs.__dict__.copy()
        fields["batch"], fields["prompt"], fields["output"] = batch, prompt, output
        r = evaluate(mc, hw, eff, create_frozen(Knobs, fields), base=base, terms=False)
        view.labels, view.assumptions = dict(zip(labels, params[end:end + len(labels)])), params[-2]
        return _fields(view, r, B, S, T, speculative), {k: r[k] for k in _READ}
    values = [] if n_model is None else [*_walked(_CONSTS, p.consts, _constants)[2],
                                         *_walked(_CONSTS, p.hardware, _constants)[2]]
    kinds = (True,) * n + tuple(v.__class__ is float for v in values) + (False,) * (len(labels) + 2)
    truths = (None,) * n + tuple(bool(v) for v in values) + (None,) * (len(labels) + 2)
    return trace_shared(traced, _NAMES, kinds, real=_REAL, spans=_COUNTS, truths=truths)


class _View:
    """What `_fields` reads of a Prepared, its labels and assumptions a shared trace's parameters."""

    def __init__(self, hardware: Hardware, price: float | None, n_chips: int):
        self.hardware, self.price, self.n_chips = hardware, price, n_chips
        self.spec_args, self.positions = None, 1.0
        self.labels: dict[str, Any] = {}
        self.assumptions: Any = ()


_COUNTS = ((1.0, float(MAX_COUNT)), (0.0, float(MAX_COUNT)), (1.0, float(MAX_COUNT)), None, None, None)
"""The ranges of a plan's batch, prompt and output as floats (`check_counts`; `plan.Span`)."""


def _traced(p: Prepared, speculative: SpeculativeDecoding | None, batch: Any, prompt: Any, output: Any,
            B: Any, S: Any, T: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """`_planned`'s figures of `p` at a workload of `plan.Sym`s: batch, prompt and output as floats
    (the knobs), and as ints B, S and T (the Result's counts)."""
    fields = p.knobs.__dict__.copy()
    fields["batch"], fields["prompt"], fields["output"] = batch, prompt, output
    r = _figures(p, create_frozen(Knobs, fields))
    return _fields(p, r, B, S, T, speculative), {k: r[k] for k in _READ}


class _Later:
    """The fields of an `_evaluated` Result, and of its Memory, built on their first read
    (`result.Deferred`), from core.evaluate's figures `r` on a device of memory tiers `tiers`."""

    __slots__ = ("r", "tiers")
    r: dict[str, Any]
    tiers: Sequence[MemoryTier]

    def memory(self) -> Memory:
        return create_frozen(Memory, {"_deferred": self})

    def weights_bytes(self) -> float:
        return self.r["weights_bytes_chip"]

    def kv_bytes(self) -> float:
        return self.r["kv_bytes_chip"]

    def activation_bytes(self) -> float:
        return self.r["activation_bytes_chip"]

    def other_bytes(self) -> float:
        return self.r["extra_bytes_chip"]

    def capacity_bytes(self) -> float:
        return self.r["capacity_bytes_chip"]

    def fits(self) -> bool:
        return bool(self.r["fits"])

    def placement(self) -> tuple[TierUse, ...]:
        return tuple(map(_tier_use, self.r["per_tier"], self.tiers))

    def bound(self) -> str:
        return bound_name(step_terms(self.r))

    def step_terms_s(self) -> dict[str, float]:
        return dict(zip(BOUNDS, step_terms(self.r)))


def _tier_use(use: tuple[float, float], tier: MemoryTier) -> TierUse:
    """A chip's (weights, KV) bytes in one memory tier, as the Result's TierUse."""
    return create_frozen(TierUse, {"tier": tier.name, "weights_bytes": float(use[0]), "kv_bytes": float(use[1]),
                                   "capacity_bytes": tier.capacity_bytes})


@dataclass(frozen=True)
class Prepared:
    """A validated configuration, ready for `core.evaluate`: what `estimate()` and vectorised
    helpers (batching, sweeps) share. `evaluate(**knobs)` may replace Knobs fields with arrays."""

    model: Model
    hardware: Hardware
    runtime: Runtime
    layout: Parallel
    resolved: Resolved
    price: float | None
    pinned: dict[str, str] | None
    batch: int
    prompt: int
    output: int
    n_chips: int
    spec_args: SpecArgs | None
    positions: float
    eff: Efficiency
    knobs: Knobs
    extra: dict[str, Any]   # core.evaluate's keyword arguments beyond the knobs
    consts: ModelConsts
    labels: dict[str, str | int]  # Result's label fields: model, hardware, runtime, n_chips, parallel, dtypes,
                                  # calibration (the runtime's provenance on this device)
    chip_base: ChipBase = field(init=False)   # core.chip_base of knobs: the same for every batch, prompt
                                              # and output (rebuilt by dataclasses.replace, not by `at`)
    assumptions: tuple[str, ...] = field(init=False)  # the device profile's unsourced figures on n_chips

    def __post_init__(self):
        object.__setattr__(self, "chip_base", chip_base(self.consts, self.hardware, self.eff, self.knobs))
        object.__setattr__(self, "assumptions", self.hardware.assumptions(self.n_chips))

    def evaluate(self, *, terms: bool = True, **knobs) -> dict:
        """`core.evaluate` on this configuration, with Knobs fields replaced (floats or arrays);
        terms=False leaves out the prefill's one-pass terms (`core.evaluate`)."""
        kn = replace(self.knobs, **knobs) if knobs else self.knobs
        base = self.chip_base if _WORKLOAD.issuperset(knobs) else None     # else core.evaluate builds it
        return evaluate(self.consts, self.hardware, self.eff, kn, base=base, terms=terms, **self.extra)

    def at(self, batch: int, prompt: int, output: int) -> Prepared:
        """This configuration at another workload (numbers already checked)."""
        return _with(self, batch=batch, prompt=prompt, output=output, knobs=_workload(self.knobs, batch, prompt, output))


def _workload(kn: Knobs, batch: int, prompt: int, output: int) -> Knobs:
    """Knobs `kn` at another batch, prompt and output (as floats): `_with` without binding its
    keyword arguments (0.69 -> 0.45 us, estimate()'s hot path)."""
    fields = kn.__dict__.copy()
    fields["batch"], fields["prompt"], fields["output"] = float(batch), float(prompt), float(output)
    return create_frozen(type(kn), fields)


def _with(obj, **changes):
    """A copy of a frozen dataclass with some fields changed; `dataclasses.replace` runs __init__
    again (and its checks), several times slower on the hot path of `prepare`. The copy's dict
    is a copy of obj's (one block copy, where filling a new instance's dict key by key took three
    times as long) with the changes."""
    fields = obj.__dict__.copy()
    fields.update(changes)
    return create_frozen(type(obj), fields)


def prepare(model, hardware, *, batch: int = defaults.BATCH, prompt_tokens: int = defaults.PROMPT_TOKENS,
            output_tokens: int = defaults.OUTPUT_TOKENS, weight_dtype: str = defaults.WEIGHT_DTYPE,
            kv_dtype: str | None = None, activation_dtype: str | None = None,
            n_chips: int = 1, parallel: Parallel | None = None, speculative: SpeculativeDecoding | None = None,
            runtime=None, quantization: Quantization | None = None, placement: dict | None = None,
            price_usd_per_hour: float | None = None, allow_beyond_context: bool = False,
            dense_weight_dtype: str | None = defaults.DENSE_WEIGHT_DTYPE) -> Prepared:
    """Validate `estimate()`'s arguments and resolve them into a `Prepared` configuration.
    Everything but the workload numbers (layout, formats, runtime efficiencies, speculative
    set-up, placement, price) is resolved once per distinct set of arguments and cached; each
    call checks only batch, prompt and output."""
    base, B, S, T = _prepare(n_chips, parallel, model, hardware, batch, prompt_tokens, output_tokens, weight_dtype,
                             kv_dtype, activation_dtype, speculative, runtime, quantization, placement,
                             price_usd_per_hour, allow_beyond_context, dense_weight_dtype)
    return base.at(B, S, T)


def _prepare(n_chips, parallel, model, hardware, batch, prompt_tokens, output_tokens, weight_dtype, kv_dtype,
             activation_dtype, speculative, runtime, quantization, placement, price_usd_per_hour,
             allow_beyond_context, dense_weight_dtype) -> tuple[Prepared, int, int, int]:
    """`prepare` as (the cached configuration at batch 1, prompt 0, output 1; batch; prompt;
    output), all checked: `estimate()` builds its knobs without a second Prepared."""
    m = load_model(model)
    hw = load_hardware(hardware)
    rt = load_runtime(runtime, hw)
    B, S, T, N = check_counts(batch, prompt_tokens, output_tokens, n_chips)
    if not allow_beyond_context and m.max_context is not None and S + T > m.max_context:
        check_context(m, S, T)      # which raises
    if parallel is not None:
        parallel = as_parallel(parallel)
    if quantization is not None and not isinstance(quantization, Quantization):
        raise InvalidInputError("quantization", quantization,
                                "a mb.Quantization(weights, kv, activations); for one format give "
                                "weight_dtype= (and kv_dtype=, activation_dtype=) instead")
    if dense_weight_dtype is not None and quantization is not None:
        raise InvalidInputError("dense_weight_dtype", dense_weight_dtype,
                                "None with quantization= (give mb.Quantization(dense_weights=...) instead)")
    # the formats' generation is part of the keys, so a format re-registered under its name is never
    # served stale; an unhashable argument (a placement dict) raises TypeError, by design (caught below)
    generation = dtypes.generation()
    key = (id(m), id(hw), id(rt), N, parallel, weight_dtype, kv_dtype, activation_dtype, speculative, quantization,
           placement, price_usd_per_hour, dense_weight_dtype, generation)
    try:
        seen = _SEEN.get(key)
    except TypeError:
        seen = None
    if seen is not None:
        return seen[3], B, S, T
    args = (m, hw, rt, N, parallel, weight_dtype, kv_dtype, activation_dtype, speculative, quantization,
            placement, price_usd_per_hour, dense_weight_dtype)
    try:
        base = _resolve_cached(*args, generation)
    except (TypeError, MemboundError):  # an unhashable argument (a placement dict) or a bad format name:
        return _resolve(*args), B, S, T     # resolve afresh (which raises the error naming the field)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[key] = (m, hw, rt, base)      # holding m, hw and rt: no other object takes their ids while it lives
    return base, B, S, T


_SEEN: dict[tuple, tuple[Model, Hardware, Runtime, Prepared]] = {}
"""`_prepare`'s configurations by the identity of their model, device and runtime objects (and the
other arguments' values): `_resolve_cached`'s key hashes those three objects by value, which costs
three Python-level __hash__ calls per estimate(); an entry holds the three objects, so their ids
cannot be reused while it lives."""
_SEEN_MAX = 1024


def _resolve(m: Model, hw: Hardware, rt, N: int, parallel, weight_dtype, kv_dtype, activation_dtype, speculative,
             quantization, placement, price_usd_per_hour, dense_weight_dtype=None) -> Prepared:
    """`prepare` less the workload: a Prepared at batch 1, prompt 0, output 1."""
    B, S, T = 1, 0, 1
    layout = _layout(m, hw, N, parallel)
    if quantization is None and activation_dtype is None:   # the runtime's own, where it has one (llama.cpp: int8)
        activation_dtype = rt.default_activations(weight_dtype, hw)
    q = quantization or Quantization(weight_dtype, kv_dtype, activation_dtype, dense_weights=dense_weight_dtype)
    if q.head_weights is None:   # the runtime's own head format (TinyChat: fp16), however the formats came
        q = replace(q, head_weights=rt.default_head(q.weights, hw))
    native_mixed = rt.backend_for(hw).quantized_activations is None      # llama.cpp converts
    res = q.resolve(hw, m, native_mixed=native_mixed)
    price = _check_price(price_usd_per_hour if price_usd_per_hour is not None else hw.price_usd_per_hour)
    pinned = _check_placement(placement, hw)
    spec_args, extra_w, extra_kv, positions = _speculative(speculative, m, q, hw, res, layout)
    eff = upcast(efficiency(rt, hw), res, hw, fused=native_mixed and rt.served is not None)
    kn = Knobs(batch=float(B), prompt=float(S), output=float(T), w_bytes=res.weights.bytes,
               chunk_tokens=rt.backend_for(hw).chunk_tokens(layout.ep),
               kv_bytes=res.kv.bytes, act_bytes=res.residual_bytes, tp=float(layout.tp),
               pp=float(layout.pp), ep=float(layout.ep), n_chips=float(N), price_usd_per_hour=price or 0.0,
               index_peak_flops=hw.peak_flops("fp8") if m.index_topk and hw.supports("fp8") else None,
               **_compute_paths(eff, res, hw), **_gemm_curve(eff, res, m))
    p = Prepared(m, hw, rt, layout, res, price, pinned, B, S, T, N, spec_args, positions, eff, kn,
                 dict(positions=positions, spec=spec_args, draft=None, pinned=pinned,
                      extra_weight_bytes_chip=extra_w, extra_kv_bytes_token_chip=extra_kv),
                 model_consts(m, hw.moe_schedule == "every_expert"),
                 dict(model=m.name, hardware=hw.name, runtime=rt.name, n_chips=N,
                      parallel=f"tp={layout.tp} pp={layout.pp} ep={layout.ep}", weight_dtype=res.weights.name,
                      kv_dtype=res.kv.name, activation_dtype=res.activations.name,
                      calibration=rt.provenance_for(hw)))
    if speculative is not None and speculative.draft is not None:
        d = draft_prepared(p, speculative, q)
        p.extra["draft"] = Drafter(d.consts, d.eff, d.knobs, d.chip_base)
        p.extra["extra_weight_bytes_chip"], p.extra["extra_kv_bytes_token_chip"] = draft_bytes(d, layout)
    return p


def draft_bytes(d: Prepared, layout: Parallel) -> tuple[float, float]:
    """(weight bytes per chip, KV bytes per token per chip) a draft model of configuration `d`
    (`draft_prepared`) adds to the target's chips of `layout`: its chip's weights (tensor-parallel,
    its experts expert-parallel like the target's) and a token's KV over its layers (each
    tensor-parallel rank's share, with a sparse-attention indexer's keys; the target's expert
    parallelism splits the sequences). The drafter lives where the target's first stage is (its
    tokens start there); the first stage hands target layers of as many bytes on to the later ones,
    so over pp stages each chip holds 1/pp of it (not a copy on every stage). estimate() and
    serve() count the same bytes."""
    b = d.chip_base
    return (float(b.dense_held + b.expert_held) / layout.pp,
            float((b.kv_pair + d.consts.index_bytes) * d.consts.n_layers) / layout.pp)


def draft_prepared(p: Prepared, spec: SpeculativeDecoding, quantization: Quantization | None = None) -> Prepared:
    """The draft model of `spec` as a configuration on `p`'s chips (the one drafter of estimate() and
    serve(), `core.Drafter`): tensor-parallel like the target, expert-parallel like it where it has
    experts, no pipeline stages (it lives with the first stage); in the target's formats
    (`quantization`, else p's format names: a llama.cpp draft file's own q6_K head as the
    Quantization gives it); the target runtime's efficiencies less the host's per-step,
    per-sequence and per-request work, which a round pays once, in its verify pass; at p's workload."""
    dm = load_model(spec.draft)
    layout = Parallel(tp=p.layout.tp, ep=p.layout.ep if dm.n_experts else 1)
    res = p.resolved
    q = quantization or Quantization(res.weights.name, res.kv.name, res.activations.name)
    d = _resolve(dm, p.hardware, p.runtime, layout.chips, layout, None, None, None, None, q, None, p.price)
    eff = replace(d.eff, per_step_overhead_s=0.0, per_sequence_overhead_s=0.0, per_request_s=0.0,
                  per_prompt_token_s=0.0)
    return replace(d, eff=eff).at(p.batch, p.prompt, p.output)


def upcast(eff: Efficiency, res: Resolved, hw: Hardware, fused: bool = True) -> Efficiency:
    """The runtime's efficiency with the expert GEMMs' rate in a prefill where this configuration's
    experts take the upcast path: a weight-only format (`Resolved.dequant` > 0) computing in 16-bit
    activations (MXFP4 gpt-oss on Hopper and CDNA3, whose engines upcast the weights to bf16 inside
    the MoE GEMM: vLLM's Triton MoE, gpt_oss_triton_kernels_moe.py, on SM90 and gfx942; TensorRT-LLM's
    W4A16_MXFP4 default on Hopper, 'simulated mxfp4, HGMMA' in its MoE support matrix, NVIDIA/TensorRT-LLM
    examples/models/core/gpt_oss/README.md). There the rate is the runtime's
    `moe_upcast_efficiency` (1 unless fitted) times the chip's `quantization.upcast_rate` where the
    engine's kernel fuses the upcast into the GEMM (`fused`: a served engine multiplying on the
    matrix units; llama.cpp converts to int8 blocks in kernels of its own, priced by its fitted
    moe_gemm_efficiency). Unchanged elsewhere: fp8 or fp4 experts computing in their own format, or
    MXFP4 weights with MXFP8 activations on Blackwell, whose tensor cores take the mixed MX operands
    natively (no upcast)."""
    if res.dequant == 0.0 or res.activations.bits < 16:
        return eff
    rate = eff.moe_upcast_efficiency * (upcast_rate(hw, res) if fused else 1.0)
    return eff if rate == 1.0 else replace(eff, moe_gemm_efficiency=rate)


def _layout(m: Model, hw: Hardware, N: int, parallel) -> Parallel:
    """The layout given (checked against the model and N chips), else the one layout rule's; one
    that needs an interconnect the device lacks, or spans more of it than one domain, is refused."""
    stages = units(m, hw)
    if parallel is not None and parallel.chips == N:
        layout = parallel.check(m, N, stages=stages)
    else:   # the one layout rule (its own layout may leave chips idle)
        rule = layout_for(m, hw, N)
        layout = (parallel or rule).check(m, N, exact=parallel is not None and parallel != rule, stages=stages)
    if layout.chips > 1 and hw.interconnect is None:
        raise InvalidInputError("n_chips", N, f"1: {hw.name} has no interconnect in its profile")
    if hw.interconnect is not None and layout.tp * layout.ep > hw.interconnect.max_chips and hw.scale_out is None:
        raise InvalidInputError("parallel", layout,
                                f"tp*ep <= {hw.interconnect.max_chips} chips of one {hw.interconnect.name} domain "
                                f"({hw.name}'s profile has no scale_out network to span domains)")
    return layout


def _speculative(speculative: SpeculativeDecoding | None, m: Model, q: Quantization, hw: Hardware, res: Resolved,
                 layout: Parallel) -> tuple[SpecArgs | None, float, float, float]:
    """(SpecArgs, extra weight bytes and KV bytes per token per chip, positions verified per round)
    of a SpeculativeDecoding, or the plain step's (None, 0, 0, 1). A draft model is in the target's
    formats (`q`), its LM head and input embedding as `q` gives them for the draft (a llama.cpp
    draft file's own q6_K output tensor): its passes and bytes are `draft_prepared`'s and
    `draft_bytes`' (set by `_resolve`)."""
    if speculative is None:
        return None, 0.0, 0.0, 1.0
    if not isinstance(speculative, SpeculativeDecoding):
        raise InvalidInputError("speculative", speculative, "a mb.SpeculativeDecoding")
    own, lm = speculative.head(m)                  # a self-drafting head's parameters
    head_bytes = own * get_dtype(speculative.head_dtype).bytes
    cost = speculative.draft_cost
    spec_args = SpecArgs(float(speculative.gamma), speculative.tokens_per_round,
                         None if cost is None else float(cost), head_bytes, own, lm,
                         float(speculative.route_correlation))
    # a head lives where the target's first stage is (its tokens start there), split over that
    # stage's tp chips; over pp stages each chip holds 1/pp of it (as a draft model: `draft_bytes`)
    extra_w, extra_kv = 0.0, 0.0
    if own or lm:                                   # the head, split like the target, and
        extra_w = head_bytes / layout.tp / layout.pp            # the KV cache of its one layer
        extra_kv = m.kv_bytes_per_token(res.kv.name) / m.n_layers / min(layout.tp, model_consts(m).kv_split_max) \
            / layout.pp
    return spec_args, extra_w, extra_kv, float(speculative.positions)


def _compute_paths(eff: Efficiency, res: Resolved, hw: Hardware) -> dict[str, Any]:
    """The Knobs of this runtime's kernel paths (peak_flops, dequant, gemm_tile_tokens, gemv_peak_flops,
    attn_peak_flops and, where they apply, the dense tensors' and the matrix units'): block-quantized
    weights with 8-bit activations on its quantized GEMMs (llama.cpp's MMQ; their dequantisation's
    share scaled to the path, efficiency.dequant_scale), 16-bit activations on
    narrower weights tiled over the tokens, 16-bit GEMMs on matrix units beside the shader ALUs
    (`_matrix_units`), the dense tensors' own bytes and peaks when the formats are mixed, and
    the LM head's and input embedding's own bytes (a llama.cpp file's q6_K output tensor). A served
    engine whose GEMMs run each format at its own measured share (eff.format_rates) has its tensor
    peaks scaled by it (attention keeps its own); one whose GEMMs read weights at measured kernel shares
    (eff.weight_read, expert_read) has the dense tensors' and routed experts' shares of their formats."""
    w, a = res.weights, res.activations
    rates = dict(eff.format_rates)
    tensor_peak = res.peak_flops * rates.get(a.compute or "", 1.0)
    paths: dict[str, Any] = dict(peak_flops=tensor_peak, gemm_tile_tokens=0.0, gemv_peak_flops=None,
                                 attn_peak_flops=res.attn_peak_flops, dequant=res.dequant)
    if _on_mmq(eff, w, a):
        paths.update(peak_flops=eff.quantized_peak_flops, gemm_tile_tokens=eff.quantized_tile_tokens,
                     dequant=res.dequant * eff.quantized_dequant_scale)
        if eff.gemv_peak_flops and w.name in eff.gemv_formats and not res.mixed:
            paths["gemv_peak_flops"] = eff.gemv_peak_flops
        elif eff.mmvq_max_tokens:       # a small pass: mat-vecs at their instructions per weight per token
            rate = {f: 2.0 * eff.mmvq_issue_rate / n for f, n in eff.mmvq_column_ops}
            paths.update(mmvq_tokens=eff.mmvq_max_tokens, mmvq_flops=rate.get(w.name, 0.0),
                         mmvq_dense_flops=rate.get(res.dense_weights.name if res.mixed else w.name, 0.0))
    elif eff.weight_only_tile_tokens and a.bits >= 16 and w.bits < a.bits:   # 16-bit activations on
        paths["gemm_tile_tokens"] = eff.weight_only_tile_tokens              # narrower weights (W4A16)
    if res.mixed:       # the tensors that are not routed experts: their own bytes and compute path
        d_peak = res.dense_peak_flops * rates.get(res.dense_activations.compute or "", 1.0)
        d_dequant = res.dense_dequant
        if _on_mmq(eff, res.dense_weights, res.dense_activations):
            d_peak, d_dequant = eff.quantized_peak_flops, res.dense_dequant * eff.quantized_dequant_scale
        paths.update(w_bytes_dense=res.dense_weights.bytes, dense_peak_flops=d_peak, dense_dequant=d_dequant)
    if eff.weight_read or eff.expert_read:   # the measured kernels' weight reads, per format (Served.weight_read)
        paths.update(read_dense=dict(eff.weight_read).get(res.dense_weights.name, 1.0),
                     read_expert=dict(eff.expert_read).get(res.weights.name, 1.0))
    if res.own_head:    # the LM head and input embedding: their own bytes, on the dense tensors' path
        paths.update(w_bytes_head=res.head_weights.bytes, w_bytes_embed=res.embed_weights.bytes)
    units = _matrix_units(eff, res, hw) if paths["peak_flops"] == tensor_peak else None
    if units is not None:
        shader, attn, matrix = units
        paths.update(peak_flops=shader, attn_peak_flops=attn, matrix_peak_flops=matrix)
        if res.mixed:
            paths["dense_peak_flops"] = shader
    widest = hw.operand_peak_flops      # matrix units that multiply at one width (a TSP's MXM: fp16)
    if widest is not None:
        for path in ("peak_flops", "dense_peak_flops", "attn_peak_flops"):
            if paths.get(path) is not None:
                paths[path] = min(paths[path], widest)
    return paths


def _gemm_curve(eff: Efficiency, res: Resolved, m: Model) -> dict[str, Any]:
    """The Knobs of a runtime whose GEMMs were timed on the chip (eff.gemm_time, Served.gemm_time): the
    curve of the weights' format (gemm_tokens, gemm_s_per_weight) for a model without routed experts whose
    GEMMs multiply in that format (weights and activations alike: the tables time W8A8 and W4A4 GEMMs);
    else none (the rates of `_compute_paths`). A model with routed experts keeps the rates: the curve is
    dense layers' (its fused MoE has a table of its own, not read)."""
    if not eff.gemm_time or m.n_experts or res.mixed:
        return {}
    w, a = res.weights, res.activations
    curve = next((c for c in eff.gemm_time if c[0] == w.name), None)
    if curve is None or a.compute != w.compute:
        return {}
    return {"gemm_tokens": curve[1], "gemm_s_per_weight": curve[2]}


def _on_mmq(eff: Efficiency, w: dtypes.DType, a: dtypes.DType) -> bool:
    """Whether weights `w` with activations `a` run on the runtime's quantized GEMMs (llama.cpp's
    MMQ): an 8-bit GEMM on weights of another format, where the runtime has that path."""
    return bool(eff.quantized_peak_flops) and a.bits <= 8 and w.compute != a.compute


def _matrix_units(eff: Efficiency, res: Resolved, hw: Hardware) -> tuple[float, float, float] | None:
    """(the shader ALUs' peak, attention's peak, the matrix units' peak) where the runtime runs 16-bit
    GEMMs on matrix units the device has beside its shader ALUs (runtime.MatrixUnits, Hardware.
    shader_flops): decode and the rest of a GEMM's work at the shader rate, a prefill GEMM's
    multiply-accumulates at the matrix units' (core.on_matrix_units), attention at the shader rate
    unless the runtime runs it there too; else None."""
    a, units = res.activations, eff.matrix_units
    shader = hw.shader_peak_flops(a.compute) if units is not None and a.compute else None
    if units is None or shader is None or a.bits < 16 or res.dense_activations.bits < 16:
        return None
    attn = res.attn_peak_flops if units.attention else hw.shader_peak_flops("bf16") or res.attn_peak_flops
    return shader, attn, res.peak_flops


@functools.lru_cache(maxsize=1024)
def _resolve_cached(*args_and_formats) -> Prepared:
    return _resolve(*args_and_formats[:-1])


def _check_placement(placement, hw: Hardware):
    if placement is None:
        return None
    if not isinstance(placement, dict) or not set(placement) <= {"weights", "kv"}:
        raise InvalidInputError("placement", placement, "a dict with keys 'weights' and/or 'kv' naming tiers")
    names = [t.name for t in hw.memory]
    for k, v in placement.items():
        if v not in names:
            raise InvalidInputError(f"placement[{k!r}]", v, f"one of {hw.name}'s tiers {names}")
    return {"weights": placement.get("weights", names[0]), "kv": placement.get("kv", names[0])}


def _auto_chips(n, parallel, check_memory: bool, args: tuple) -> tuple[int, tuple[Prepared, Result] | None]:
    """`estimate`'s n_chips=None / "auto" (`n`): the chips of an explicit `parallel`, one chip where memory
    is not checked, else the fewest chips that hold the configuration of `_prepare`'s `args` (less the
    chips and layout); with the search's configuration and Result on that count where it made them
    (`_fewest`), else None."""
    if n is not None and n != "auto":
        raise InvalidInputError("n_chips", n, "a chip count (an integer >= 1), or None / 'auto' for the fewest "
                                "chips that hold the model")
    if parallel is not None:
        given = as_parallel(parallel)
        assert given is not None        # None only for None
        return given.chips, None
    if not check_memory:
        return 1, None
    p, B, S, T = _prepare(1, None, *args)       # the search's first count, one chip (the answer where it holds)
    one = p, _evaluated(p, B, S, T, args[8], memory=True)[0]
    return _fewest(args, p.model, p.hardware, at_speed=True, one=one)


def _fewest(args: tuple, m: Model, hw: Hardware, at_speed: bool = False, one: tuple[Prepared, Result] | None = None
            ) -> tuple[int, tuple[Prepared, Result] | None]:
    """The fewest chips that hold the configuration of `_prepare`'s `args` (less the chips and layout:
    estimate()'s arguments) laid out by the one layout rule (`parallel.fewest_chips`, the search
    `min_chips` runs; at_speed: in the tiers a decode streams at speed), with the configuration and
    Result the search evaluated on that count (its last: the search stops at the first that holds
    it), which are estimate()'s on that many chips with no `parallel` given: the one evaluation of a
    default call. one: the configuration and Result on one chip where the caller has them (each
    count is evaluated once). DoesNotFitError where no count does."""
    last: tuple[int, Prepared, Result] | None = None if one is None else (1, *one)
    speculative = args[8]

    def memory(n: int) -> Memory | None:
        nonlocal last
        if n == 1 and one is not None:
            last = (1, *one)
        else:
            p, B, S, T = _prepare(n, None, *args)
            last = n, p, _evaluated(p, B, S, T, speculative, memory=True)[0]
        return last[2].memory
    n = fewest_chips(m, hw, memory, at_speed=at_speed, one=None if one is None else one[1].memory)
    return n, last[1:] if last is not None and last[0] == n else None


def _fewest_chips(args: tuple, m: Model, hw: Hardware) -> int | None:
    """`_fewest`'s count, or None where no count holds the configuration (the does-not-fit hint)."""
    try:
        return _fewest(args, m, hw)[0]
    except DoesNotFitError:
        return None


def _check_fit(mem: Memory, hw: Hardware, pinned, m: Model, n_chips: int, layout: Parallel, fewest):
    """DoesNotFitError where `mem` overflows; the chips it names are `fewest()`, the count
    `min_chips` gives (searched only here, when the configuration does not fit)."""
    if pinned:
        for use in mem.placement:
            if use.weights_bytes + use.kv_bytes > use.capacity_bytes:
                raise DoesNotFitError(use.weights_bytes + use.kv_bytes, use.capacity_bytes, None,
                                      f"tier {use.tier!r} of {hw.name} overflows with the pinned placement")
    if not mem.fits:
        where = f"{m.name} on {n_chips} x {hw.name} ({layout}); per chip"
        if hw.interconnect is None:     # more chips would be refused: say so instead of a count
            raise DoesNotFitError(mem.total_bytes, mem.capacity_bytes, None,
                                  f"{where}; {hw.name}'s profile has no interconnect, so it runs on one chip")
        chips = fewest()
        raise DoesNotFitError(mem.total_bytes, mem.capacity_bytes, chips,
                              where if chips else f"{where}; no chip count holds it under the layout rule")


def bandwidth_ceiling(model, hardware, weight_dtype: str = "bf16", n_chips: int = 1) -> float:
    """The pure bandwidth ceiling in tok/s for one user: aggregate peak bandwidth over the
    bytes one token streams (every active weight; of an untied input embedding only the one
    row looked up), ignoring capacity, KV, compute and every overhead. The LM head streams in its
    own format where the file gives it one (a llama.cpp q4_0 file's q6_K: mb.Quantization).
    70B at 16 bits on one H100: 3.35e12 / 139 GB ≈ 24 tok/s (the often-quoted 141 GB counts the
    input embedding table too)."""
    m = load_model(model)
    hw = load_hardware(hardware)
    N = check_int("n_chips", n_chips, 1)
    res = Quantization(weight_dtype).resolve(hw, m)
    head = m.vocab_size * m.hidden_size
    table = 0 if m.tied_embeddings else head          # an untied input embedding: one row read
    row = 0 if m.tied_embeddings else m.hidden_size
    streamed = (m.active_params - head - table) * res.weights.bytes + head * res.head_weights.bytes \
        + row * res.embed_weights.bytes
    return N * hw.bandwidth_bytes_s / streamed
