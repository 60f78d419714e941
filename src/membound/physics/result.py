"""What `estimate()` returns: figures with units, the bound that won, the memory breakdown."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from ..base.display import result_text, result_html
from ..catalog.hardware import api_price_text
import numpy as np


def usd_per_million_tokens(usd_per_hour, tok_s):
    """Dollars per million tokens delivered at `tok_s` tokens/s by hardware that costs `usd_per_hour`
    (floats or numpy arrays): usd_per_hour / 3,600 s / tok_s x 1e6."""
    return usd_per_hour / 3600.0 / tok_s * 1e6


def equal_values(a, b) -> bool:
    """Equality that never raises: numpy arrays and pandas tables compare whole (shape, values,
    NaN equal to NaN), dicts and tuples element by element, dataclasses field by field."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if hasattr(a, "equals") and hasattr(a, "to_numpy"):                  # pandas DataFrame / Series
        return bool(a.equals(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal_values(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(equal_values(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return all(equal_values(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return bool(a == b)


class Deferred:
    """A field of a frozen dataclass that an instance built by `create_frozen` may leave out of its
    dict: its first read asks the instance's `_deferred` (an object with a method of the field's
    name) for it and keeps the value in the instance's dict, where every later read finds it (a
    descriptor without __set__: the instance's dict comes first). An instance built by its
    __init__ has every field in its dict and never reaches here. `estimate()` defers a Result's
    memory, bound and step terms this way (`estimate._Later`): a third of its result's
    construction, paid on the first read instead; and each field of that memory (a fewest-chips
    search reads only whether it fits)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = getattr(obj.__dict__["_deferred"], self.name)()
        obj.__dict__[self.name] = value
        return value


def create_frozen(cls, fields: dict):
    """An instance of the frozen dataclass `cls` from a dict of all its fields, without running
    the generated __init__, which stores each field through object.__setattr__ (a third of
    `estimate()`'s time went there). The instance takes `fields` itself as its __dict__ (the
    caller's own new dict): filling a new instance's dict key by key took as long again."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    return obj


@dataclass(frozen=True)
class TierUse:
    """Bytes of weights and KV cache placed in one memory tier of one chip."""

    tier: str
    weights_bytes: float
    kv_bytes: float
    capacity_bytes: float


@dataclass(frozen=True)
class Memory:
    """Per-chip memory breakdown (bytes)."""

    weights_bytes: float
    kv_bytes: float
    activation_bytes: float
    other_bytes: float          # e.g. a draft model's weights
    capacity_bytes: float
    fits: bool
    placement: tuple[TierUse, ...] = ()

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.activation_bytes + self.other_bytes


@dataclass(frozen=True)
class Result:
    """One prediction. Speeds in tokens/s, times in seconds, money in USD."""

    model: str
    hardware: str
    runtime: str
    n_chips: int
    parallel: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    weight_dtype: str
    kv_dtype: str
    activation_dtype: str
    decode_tok_s_per_user: float     # mean over the generated tokens
    decode_tok_s_total: float        # aggregate over the batch
    ttft_s: float
    prefill_s: float
    e2e_s: float
    tpot_s: float                    # time per output token (decode)
    bound: str                       # memory | compute | latency | communication | overhead
    step_terms_s: dict[str, float] = field(default_factory=dict)   # each term at the mean context, per token
    memory: Memory | None = None
    cost_per_million_tokens_usd: float | None = None
    joules_per_token: float | None = None
    speculative: dict[str, float | int | str | None] | None = None  # tokens per round, gamma, ...
    assumptions: tuple[str, ...] = ()   # the device profile's figures with no source this result rests on
    calibration: str = ""            # where the runtime's constants come from: fitted on which rows, assumed

    def to_dict(self) -> dict:
        """A flat dict (memory and terms flattened with prefixes)."""
        d = asdict(self)
        mem = d.pop("memory") or {}
        placement = mem.pop("placement", ())
        for k, v in mem.items():
            d[f"memory_{k}"] = v
        d["memory_placement"] = "; ".join(
            f"{p['tier']}: w {p['weights_bytes'] / 1e9:.3g} GB, kv {p['kv_bytes'] / 1e9:.3g} GB" for p in placement)
        for k, v in (d.pop("step_terms_s") or {}).items():
            d[f"{k}_s"] = v
        spec = d.pop("speculative") or {}
        for k, v in spec.items():
            d[f"spec_{k}"] = v
        d["assumptions"] = "; ".join(d.get("assumptions") or ())
        return d

    def to_pandas(self):
        """A one-row pandas DataFrame (needs pandas)."""
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        return pd.DataFrame([self.to_dict()])

    def __str__(self) -> str:
        return result_text(self, api_price_text(self.hardware, self.model))

    def _repr_html_(self) -> str:
        return result_html(self, api_price_text(self.hardware, self.model))


for _name in ("memory", "bound", "step_terms_s"):       # after @dataclass: not taken for defaults
    setattr(Result, _name, Deferred(_name))
for _name in ("weights_bytes", "kv_bytes", "activation_bytes", "other_bytes", "capacity_bytes", "fits", "placement"):
    setattr(Memory, _name, Deferred(_name))     # estimate()'s Memory: each field on its first read
