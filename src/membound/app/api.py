"""The web app's JSON API as plain functions: a request's JSON body in, a JSON-ready dict out.

Every figure comes from the library (`estimate`, `min_chips`, `plan`, ...): this module reads and
checks the request's fields, calls the library and picks what the page shows. It has no physics
of its own. Field names are the library's keyword names (`model`, `weight_dtype`,
`prompt_tokens`, ...) so that an error the library raises names the field the page must mark.

Bad input raises `BadRequest` (a one-line message, the field it belongs to and, for list
fields such as `devices`, the index of the entry).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..capacity import layout_for, min_chips
from ..dtypes import get_dtype, list_dtypes
from ..errors import DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError
from ..estimate import estimate
from ..hardware import load_hardware
from ..model import Model, list_models, load_model
from ..hardware import list_hardware
from ..result import Result
from ..runtime import list_runtimes

MAX_DEVICES = 8                 # devices in one comparison or plan
MAX_CONFIG_CHARS = 100_000      # a pasted config.json (real ones are 1-5 kB)
MAX_TOKENS = 10_000_000         # prompt / output tokens (the model's context window is checked too)
MAX_BATCH = 100_000
MAX_USERS = 10_000_000

# Where an error the library raises belongs on the page: unknown names by kind, invalid values
# by the keyword they name (when the page has an input of that name).
_FIELD_OF_KIND = {"model": "model", "runtime": "runtime"}
_FIELDS = {"prompt_tokens", "output_tokens", "batch", "weight_dtype", "kv_dtype", "runtime", "concurrent_users",
           "arrival_rate_rps", "ttft_p90_s", "min_tok_s_per_user", "e2e_p90_s"}
_FIELD_ALIASES = {"context": "prompt_tokens", "context_tokens": "prompt_tokens"}


@dataclass
class BadRequest(Exception):
    """A request the page can correct: `message` is shown next to the input called `field`."""

    message: str
    field: str | None = None
    index: int | None = None

    def __str__(self) -> str:
        return self.message

    def payload(self) -> dict[str, Any]:
        return {"error": self.message, "field": self.field, "index": self.index}


def _field_of(err: MemboundError, default: str | None) -> str | None:
    if isinstance(err, UnknownNameError):
        return _FIELD_OF_KIND.get(err.kind, default)
    if isinstance(err, InvalidInputError):
        field = _FIELD_ALIASES.get(err.field, err.field)
        return field if field in _FIELDS or default is None else default
    return default


@contextmanager
def at(field: str | None = None, index: int | None = None) -> Iterator[None]:
    """Errors raised inside belong to `field` (entry `index`); the message is the library's."""
    try:
        yield
    except BadRequest:
        raise
    except MemboundError as err:
        where = _field_of(err, field)
        raise BadRequest(" ".join(str(err).split()), where, index if where == field else None) from None


# ---- reading fields ------------------------------------------------------------------------
def _get(body: dict, key: str, default: Any = None) -> Any:
    v = body.get(key, default)
    return default if v is None or v == "" else v


def integer(body: dict, key: str, default: int | None, minimum: int, maximum: int) -> int | None:
    v = _get(body, key, default)
    if v is None:
        return None
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
        raise BadRequest(f"{key}={v!r} is invalid: expected an integer from {minimum:,} to {maximum:,}", key)
    return v


def number(body: dict, key: str, default: float | None, minimum: float = 0.0) -> float | None:
    """A finite number > minimum, or None when absent."""
    v = _get(body, key, default)
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= minimum:
        raise BadRequest(f"{key}={v!r} is invalid: expected a finite number > {minimum:g}", key)
    return float(v)


def text(body: dict, key: str, default: str | None = None) -> str | None:
    v = _get(body, key, default)
    if v is not None and not isinstance(v, str):
        raise BadRequest(f"{key}={v!r} is invalid: expected a string", key)
    return v.strip() if isinstance(v, str) else v


def dtype(body: dict, key: str, default: str | None) -> str | None:
    name = text(body, key, default)
    if name is not None:
        with at(key):
            get_dtype(name)
    return name


def names(body: dict, key: str, default: list[str]) -> list[str]:
    """A list of strings (or one comma-separated string), 1 to MAX_DEVICES of them."""
    v = _get(body, key, default)
    if isinstance(v, str):
        v = [s for s in (p.strip() for p in v.split(",")) if s]
    if not isinstance(v, list) or not v or not all(isinstance(s, str) and s.strip() for s in v):
        raise BadRequest(f"{key}={v!r} is invalid: expected a list of names", key)
    if len(v) > MAX_DEVICES:
        raise BadRequest(f"{key} has {len(v)} entries: at most {MAX_DEVICES} per request", key)
    return [s.strip() for s in v]


def model_of(body: dict) -> Model:
    """The bundled model named `model`, or the pasted Hugging Face `config` (JSON text)."""
    config = text(body, "config")
    if config:
        if len(config) > MAX_CONFIG_CHARS:
            raise BadRequest(f"config has {len(config):,} characters: a config.json is at most "
                             f"{MAX_CONFIG_CHARS:,}", "config")
        try:
            cfg = json.loads(config)
        except json.JSONDecodeError as e:
            raise BadRequest(f"config: malformed JSON: {e}", "config") from None
        if not isinstance(cfg, dict):
            raise BadRequest("config: expected a JSON object (the contents of config.json)", "config")
        with at("config"):
            return Model.from_hf_config(cfg, name=text(body, "config_name") or None)
    name = text(body, "model")
    if not name:
        raise BadRequest("model is missing: choose a bundled model or paste a config.json", "model")
    with at("model"):
        return load_model(name)


def device_spec(spec: str, index: int) -> tuple[str, int | None]:
    """'h100-sxm:8' -> ('h100-sxm', 8); 'cerebras-wse-3' -> ('cerebras-wse-3', None)."""
    name, _, n = spec.partition(":")
    n = n.strip()
    if n and not (n.isdigit() and 1 <= int(n) <= 100_000):
        raise BadRequest(f"devices: {spec!r} is invalid: expected NAME or NAME:CHIPS with 1 to 100,000 chips",
                         "devices", index)
    return name.strip(), int(n) if n else None


@dataclass(frozen=True)
class Workload:
    """The fields every panel shares: lengths, batch and formats."""

    prompt_tokens: int
    output_tokens: int
    batch: int
    weight_dtype: str
    kv_dtype: str | None
    runtime: str | None

    @classmethod
    def of(cls, body: dict) -> "Workload":
        rt = text(body, "runtime") or None
        if rt is not None:
            with at("runtime"):
                from ..runtime import load_runtime
                load_runtime(rt)
        return cls(prompt_tokens=integer(body, "prompt_tokens", 2048, 0, MAX_TOKENS) or 0,
                   output_tokens=integer(body, "output_tokens", 256, 1, MAX_TOKENS) or 1,
                   batch=integer(body, "batch", 1, 1, MAX_BATCH) or 1,
                   weight_dtype=dtype(body, "weight_dtype", "bf16") or "bf16",
                   kv_dtype=dtype(body, "kv_dtype", None), runtime=rt)

    def kwargs(self) -> dict[str, Any]:
        return {"batch": self.batch, "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype, "runtime": self.runtime}


def _result(model: Model, name: str, chips: int | None, w: Workload) -> Result:
    """estimate() on `chips` chips (None: the fewest that hold the model), laid out by the
    library's one layout rule."""
    if chips is None:
        chips = min_chips(model, name, batch=w.batch, context_tokens=w.prompt_tokens + w.output_tokens,
                          weight_dtype=w.weight_dtype, kv_dtype=w.kv_dtype, runtime=w.runtime)
    layout = layout_for(model, name, chips)
    if layout is None:
        raise InvalidInputError("chips", chips, f"a chip count {model.name} can be laid out over on {name}")
    return estimate(model, name, n_chips=chips, parallel=layout, **w.kwargs())


def _row(r: Result) -> dict[str, Any]:
    mem = r.memory
    assert mem is not None
    return {"hardware": r.hardware, "n_chips": r.n_chips, "parallel": r.parallel,
            "decode_tok_s_per_user": r.decode_tok_s_per_user, "decode_tok_s_total": r.decode_tok_s_total,
            "ttft_s": r.ttft_s, "e2e_s": r.e2e_s, "cost_per_million_tokens_usd": r.cost_per_million_tokens_usd,
            "bound": r.bound, "memory_used_bytes": mem.total_bytes, "memory_capacity_bytes": mem.capacity_bytes}


# ---- endpoints -----------------------------------------------------------------------------
def options() -> dict[str, Any]:
    """What the page's pickers offer."""
    devices = []
    for n in list_hardware():
        h = load_hardware(n)
        devices.append({"name": h.name, "vendor": h.vendor, "kind": h.kind,
                        "price_usd_per_hour": h.price_usd_per_hour})
    return {"models": list_models(), "devices": devices, "dtypes": list_dtypes(), "runtimes": list_runtimes()}


def compare(body: dict) -> dict[str, Any]:
    """One model on several devices (`devices`: ["h100-sxm:8", "cerebras-wse-3"], no chip
    count = the fewest chips that hold it): one row per device."""
    model = model_of(body)
    w = Workload.of(body)
    rows = []
    for i, spec in enumerate(names(body, "devices", ["h100-sxm:8", "cerebras-wse-3"])):
        name, chips = device_spec(spec, i)
        with at("devices", i):
            rows.append(_row(_result(model, name, chips, w)))
    return {"model": model.name, "workload": w.kwargs(), "rows": rows}


def explain(body: dict) -> dict[str, Any]:
    """One configuration's step terms (seconds per token at the mean context) and memory per chip."""
    model = model_of(body)
    w = Workload.of(body)
    name, chips = device_spec(text(body, "device", "h100-sxm:8") or "", 0)
    with at("device"):
        r = _result(model, name, chips, w)
    mem = r.memory
    assert mem is not None
    terms = {k: v for k, v in r.step_terms_s.items()}
    return {"model": model.name, "workload": w.kwargs(), "row": _row(r), "tpot_s": r.tpot_s,
            "step_terms_s": terms,
            "memory": {"weights_bytes": mem.weights_bytes, "kv_bytes": mem.kv_bytes,
                       "activation_bytes": mem.activation_bytes, "other_bytes": mem.other_bytes,
                       "capacity_bytes": mem.capacity_bytes, "fits": mem.fits,
                       "placement": [{"tier": t.tier, "weights_bytes": t.weights_bytes, "kv_bytes": t.kv_bytes,
                                      "capacity_bytes": t.capacity_bytes} for t in mem.placement]}}


def prices_of(body: dict, devices: list[str]) -> dict[str, float]:
    """`prices`: {device: USD per chip-hour} or the text "h100-sxm=3.0,h200=4.0"; absent = profiles'."""
    raw = _get(body, "prices", {})
    if isinstance(raw, str):
        pairs = [p.partition("=") for p in raw.split(",") if p.strip()]
        if any(not eq for _, eq, _ in pairs):
            raise BadRequest(f"prices={raw!r} is invalid: expected DEVICE=USD per chip-hour, comma-separated", "prices")
        raw = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(raw, dict):
        raise BadRequest(f"prices={raw!r} is invalid: expected {{device: USD per chip-hour}}", "prices")
    out = {}
    for name, value in raw.items():
        with at("prices"):
            hw = load_hardware(name).name
        if hw not in devices:
            raise BadRequest(f"prices: {name!r} is not one of the devices {devices}", "prices")
        try:
            out[hw] = number(raw, name, None) or 0.0
        except BadRequest as err:
            raise BadRequest(f"prices: {err}", "prices") from None
    return out


_PLAN_COLUMNS = ["hardware", "n_chips", "parallel", "batch", "weight_dtype", "kv_dtype", "replicas", "total_chips",
                 "utilisation", "ttft_p90_s", "tok_s_per_user", "e2e_p90_s", "tok_s_per_chip",
                 "cost_per_million_tokens_usd", "power_kw"]


def plan(body: dict) -> dict[str, Any]:
    """The cheapest fleets that carry `concurrent_users` (or `arrival_rate_rps`) within the SLOs."""
    from ..planner import SLO
    from ..planner import Workload as Traffic
    from ..planner import plan as run_plan
    model = model_of(body)
    users = integer(body, "concurrent_users", None, 1, MAX_USERS)
    rate = number(body, "arrival_rate_rps", None)
    devices = names(body, "hardware", ["h100-sxm", "h200"])
    with at("hardware"):
        devices = [load_hardware(d).name for d in devices]
    prices = prices_of(body, devices)
    with at(None):
        traffic = Traffic(concurrent_users=users, arrival_rate_rps=rate,
                          prompt_tokens=integer(body, "prompt_tokens", 2048, 0, MAX_TOKENS),
                          output_tokens=integer(body, "output_tokens", 512, 1, MAX_TOKENS))
        slo = SLO(ttft_p90_s=number(body, "ttft_p90_s", None), min_tok_s_per_user=number(body, "min_tok_s_per_user", None),
                  e2e_p90_s=number(body, "e2e_p90_s", None))
    dtypes = names(body, "weight_dtypes", ["bf16", "fp8"])
    for d in dtypes:
        with at("weight_dtypes"):
            get_dtype(d)
    with at(None):
        res = run_plan(model, traffic, slo, hardware=devices, prices=prices or None, weight_dtypes=tuple(dtypes))
    ranked = _records(res.ranked[_PLAN_COLUMNS].head(10))
    frontier = _records(res.frontier)
    return {"model": model.name, "explanation": res.explanation, "notes": list(res.notes),
            "candidates": res.candidates, "ranked": ranked, "frontier": frontier}


def _records(df) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts, floats exact (NaN -> None)."""
    def plain(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return [{k: plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def error_payload(err: Exception) -> dict[str, Any]:
    """The JSON body of a 4xx answer."""
    if isinstance(err, BadRequest):
        return err.payload()
    if isinstance(err, MemboundError):
        field = "model" if isinstance(err, ProfileError) else ("devices" if isinstance(err, DoesNotFitError) else None)
        return BadRequest(" ".join(str(err).split()), _field_of(err, field)).payload()
    return {"error": f"{type(err).__name__}: {err}", "field": None, "index": None}
