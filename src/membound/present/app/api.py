"""The web app's JSON API as plain functions: a request's JSON body in, a JSON-ready dict out.

Every figure comes from the library (`compare`, `plan`, ...): this module reads and
checks the request's fields, calls the library and picks what the page shows. It has no physics
of its own. Field names are the library's keyword names (`model`, `weight_dtype`,
`prompt_tokens`, ...) so that an error the library raises names the field the page must mark.

Bad input raises `BadRequest` (a one-line message, the field it belongs to and, for list
fields such as `devices`, the index of the entry).

The app is a network service, so a field never reaches the file system: `model`, `draft`,
`devices`, `device`, `hardware`, `prices`, `runtime` take names only (`named`: the library's name
index, never a path; a pasted config.json is how one brings a model of one's own), JSON is parsed
with bounds on nesting and integer digits (`parse_json`), and numbers in text are ASCII decimals.
"""
from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, overload

from ...planning.compare import compare as run_compare
from ...catalog.hardware import api_price_text
from ...catalog.dtypes import get_dtype, list_dtypes
from ...errors import (DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError, is_finite_number,
                      short_repr)
from ...catalog.hardware import list_hardware, load_hardware
from ...catalog.model import Model, release_variant, list_models, load_model
from ...catalog.names import resolve_name
from ...physics.result import Result
from ...catalog.runtime import list_runtimes
from ...planning.sweep import pareto_front
from ...serving import serve as run_serve, serve_curve
from ...physics.speculative import SpeculativeDecoding, mtp
from ...physics.capacity import layout_for, min_chips
from ...planning.planner import SLO, Workload as Traffic, plan as run_plan

log = logging.getLogger("membound.app")
MAX_DEVICES = 8                 # devices in one comparison or plan
MAX_CONFIG_CHARS = 100_000      # a pasted config.json (real ones are 1-5 kB)
MAX_TOKENS = 10_000_000         # prompt / output tokens (the model's context window is checked too)
MAX_BATCH = 100_000
MAX_USERS = 10_000_000
DEFAULT_DEVICES = ("h100-sxm:8", "cerebras-wse-3")   # the page's opening comparison
MAX_NAME_CHARS = 200            # a name (no bundled name or alias is longer)
MAX_BODY_DEPTH = 8              # nesting of a request body (the page's deepest field, prices, is 2)
MAX_CONFIG_DEPTH = 16           # nesting of a pasted config.json (real ones: 3 or 4)
MAX_INT_DIGITS = 30             # digits of an integer in JSON (Python refuses to print one of 4,300)

# Where an error the library raises belongs on the page: unknown names by kind, invalid values
# by the keyword they name (when the page has an input of that name).
_FIELD_OF_KIND = {"model": "model", "runtime": "runtime"}
_FIELDS = {"prompt_tokens", "output_tokens", "batch", "weight_dtype", "kv_dtype", "runtime", "concurrent_users",
           "arrival_rate_rps", "ttft_p90_s", "min_tok_s_per_user", "e2e_p90_s", "concurrency", "draft", "gamma",
           "acceptance_rate", "prices", "price_usd_per_hour"}
_FIELD_ALIASES = {"context": "prompt_tokens", "context_tokens": "prompt_tokens",
                  "prompt_tokens + output_tokens": "prompt_tokens", "arrival_rate": "arrival_rate_rps",
                  "price_usd_per_hour": "prices"}


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


# ---- parsing JSON --------------------------------------------------------------------------
def _int_token(token: str) -> int:
    digits = len(token.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BadRequest(f"an integer of {digits:,} digits: at most {MAX_INT_DIGITS}")
    return int(token)


def _no_constant(token: str) -> Any:
    raise BadRequest(f"{token} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise BadRequest(f"duplicate key {short_repr(k)}")
        out[k] = v
    return out


def _depth(value: Any) -> int:
    """How deeply `value`'s lists and objects nest (iterative: a hostile body cannot recurse)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            todo += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


def parse_json(raw: bytes | str, what: str, field: str | None, max_depth: int) -> Any:
    """JSON text as Python values, or a BadRequest naming `what`: not JSON, NaN/Infinity,
    an integer of more than MAX_INT_DIGITS digits, a duplicate key, or nesting past `max_depth`."""
    try:
        value = json.loads(raw, parse_int=_int_token, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except BadRequest as err:
        raise BadRequest(f"{what} is not accepted: {err}", field) from None
    except RecursionError:
        raise BadRequest(f"{what} nests lists or objects too deeply: at most {max_depth} levels", field) from None
    except (UnicodeDecodeError, ValueError) as e:       # JSONDecodeError is a ValueError
        raise BadRequest(f"{what}: malformed JSON: {e}", field) from None
    if _depth(value) > max_depth:
        raise BadRequest(f"{what} nests lists or objects too deeply: at most {max_depth} levels", field)
    return value


# ---- reading fields ------------------------------------------------------------------------
def _get(body: dict, key: str, default: Any = None) -> Any:
    v = body.get(key, default)
    return default if v is None or v == "" else v


@overload
def integer(body: dict, key: str, default: int, minimum: int, maximum: int) -> int: ...
@overload
def integer(body: dict, key: str, default: None, minimum: int, maximum: int) -> int | None: ...
def integer(body: dict, key: str, default: int | None, minimum: int, maximum: int) -> int | None:
    v = _get(body, key, default)
    if v is None:
        return None
    if isinstance(v, str) and _INT.fullmatch(v.strip()):
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
        raise BadRequest(f"{key}={short_repr(v)} is invalid: expected an integer from {minimum:,} to {maximum:,}", key)
    return v


# numbers in text: ASCII decimals only ("²", "٣", "1_000", "0x10", "--5" and "nan" are not numbers)
_INT = re.compile(r"[+-]?[0-9]{1,18}", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)


def number(body: dict, key: str, default: float | None, minimum: float = 0.0) -> float | None:
    """A finite number > minimum, or None when absent."""
    v = _get(body, key, default)
    if v is None:
        return None
    if isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
        v = float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not is_finite_number(v) or v <= minimum:
        raise BadRequest(f"{key}={short_repr(v)} is invalid: expected a finite number > {minimum:g}", key)
    return float(v)


def text(body: dict, key: str, default: str | None = None) -> str | None:
    v = _get(body, key, default)
    if v is not None and not isinstance(v, str):
        raise BadRequest(f"{key}={short_repr(v)} is invalid: expected a string", key)
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
        raise BadRequest(f"{key}={short_repr(v)} is invalid: expected a list of names", key)
    if len(v) > MAX_DEVICES:
        raise BadRequest(f"{key} has {len(v)} entries: at most {MAX_DEVICES} per request", key)
    return [s.strip() for s in v]


# A text that reads as a file path: rooted, home, relative, Windows, URL-encoded, a scheme, two
# or more folders, or a data file's suffix. A Hugging Face id ("org/name") has one '/'.
_PATH_LIKE = re.compile(r"^[~./\\]|[\\\x00%]|\.\.|^[a-z][a-z0-9+.-]*:[/\\]|/.*/|\.(?:ya?ml|json|gguf|safetensors|csv)\s*$",
                        re.IGNORECASE)
_HINT = {"model": "; to bring a model of your own, paste its config.json"}


def named(kind: str, field: str, value: Any, index: int | None = None) -> str:
    """The bundled name `value` stands for (`membound.names`' index: case, spelling and aliases
    aside), never a file: a text that reads as a path is refused before any lookup, and the
    library is then given the bundled name, not the text. (The library looks a bare name up as
    it always does: a file called exactly "h100-sxm" in the folder the server was started in
    would be read in its place. That folder is the operator's; no request can write there.)"""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{field}={short_repr(value)} is invalid: expected a {kind} name", field, index)
    value = value.strip()
    if len(value) > MAX_NAME_CHARS or _PATH_LIKE.search(value):
        raise BadRequest(f"{field}={short_repr(value)} is invalid: expected a {kind} name; the app reads no "
                         f"files{_HINT.get(kind, '')}", field, index)
    try:
        return resolve_name(kind, value)
    except MemboundError as err:       # the field asked, even for a model name in `draft`
        raise BadRequest(" ".join(str(err).split()), field, index) from None


def model_of(body: dict) -> Model:
    """The bundled model named `model`, or the pasted Hugging Face `config` (JSON text)."""
    config = text(body, "config")
    if config:
        if len(config) > MAX_CONFIG_CHARS:
            raise BadRequest(f"config has {len(config):,} characters: a config.json is at most "
                             f"{MAX_CONFIG_CHARS:,}", "config")
        cfg = parse_json(config, "config", "config", MAX_CONFIG_DEPTH)
        if not isinstance(cfg, dict):
            raise BadRequest("config: expected a JSON object (the contents of config.json)", "config")
        label = text(body, "config_name") or None
        if label is not None and len(label) > MAX_NAME_CHARS:
            raise BadRequest(f"config_name has {len(label):,} characters: at most {MAX_NAME_CHARS}", "config_name")
        with at("config"):
            return Model.from_hf_config(cfg, name=label)
    asked = text(body, "model")
    if not asked:
        raise BadRequest("model is missing: choose a bundled model or paste a config.json", "model")
    key = named("model", "model", asked)
    with at("model"):
        return release_variant(load_model(key), asked)    # a release's own context window ("...-2507")


def device_spec(spec: str, index: int | None, field: str = "devices") -> tuple[str, int | None]:
    """'h100-sxm:8' -> ('h100-sxm', 8); 'cerebras-wse-3' -> ('cerebras-wse-3', None); the name
    is the bundled name the text stands for (`named`)."""
    name, _, n = spec.partition(":")
    n = n.strip()
    if n and not (_INT.fullmatch(n) and 1 <= int(n) <= 100_000):
        raise BadRequest(f"{field}: {short_repr(spec)} is invalid: expected NAME or NAME:CHIPS with 1 to 100,000 chips",
                         field, index)
    return named("hardware", field, name, index), int(n) if n else None


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
    def of(cls, body: dict) -> Workload:
        rt = text(body, "runtime") or None
        if rt is not None:
            rt = named("runtime", "runtime", rt)
        return cls(prompt_tokens=integer(body, "prompt_tokens", 2048, 0, MAX_TOKENS) or 0,
                   output_tokens=integer(body, "output_tokens", 256, 1, MAX_TOKENS) or 1,
                   batch=integer(body, "batch", 1, 1, MAX_BATCH) or 1,
                   weight_dtype=dtype(body, "weight_dtype", "bf16") or "bf16",
                   kv_dtype=dtype(body, "kv_dtype", None), runtime=rt)

    def kwargs(self) -> dict[str, Any]:
        return {"batch": self.batch, "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype, "runtime": self.runtime}


def _row(r: Result, price: float | None = None) -> dict[str, Any]:
    """A static answer as the page's Compare row (`price`: the request's, else the profile's)."""
    mem = r.memory
    assert mem is not None
    return {"hardware": r.hardware, "n_chips": r.n_chips, "parallel": r.parallel,
            "decode_tok_s_per_user": r.decode_tok_s_per_user, "decode_tok_s_total": r.decode_tok_s_total,
            "ttft_s": r.ttft_s, "e2e_s": r.e2e_s, "cost_per_million_tokens_usd": r.cost_per_million_tokens_usd,
            "price_usd_per_hour": price if price is not None else load_hardware(r.hardware).price_usd_per_hour,
            "bound": r.bound, "memory_used_bytes": mem.total_bytes, "memory_capacity_bytes": mem.capacity_bytes,
            "kv_occupancy": None, "calibration": calibration_of(r), "api_price": api_price_text(r.hardware, r.model) or None}


def _served_row(model: Model, name: str, chips: int | None, w: Workload, spec: Any, price: float | None) -> dict[str, Any]:
    """`mb.serve` with `w.batch` clients in a closed loop, as the page's Compare row (TTFT: the median)."""
    kw = served_kwargs(model, name, chips, w, spec)
    r = run_serve(model, name, concurrency=w.batch, speculative=spec, price_usd_per_hour=price, **kw)
    d = r.to_dict()
    return {"hardware": r.hardware, "n_chips": r.n_chips, "parallel": r.parallel,
            "decode_tok_s_per_user": r.tok_s_per_user, "decode_tok_s_total": r.output_tok_s,
            "ttft_s": d["ttft_median_s"], "e2e_s": d["e2e_median_s"],
            "cost_per_million_tokens_usd": r.cost_per_million_output_tokens_usd,
            "price_usd_per_hour": price if price is not None else load_hardware(r.hardware).price_usd_per_hour,
            "bound": r.bound, "memory_used_bytes": None, "memory_capacity_bytes": None,
            "kv_occupancy": r.kv_occupancy, "calibration": calibration_of(r),
            "api_price": api_price_text(r.hardware, r.model) or None}


def calibration_of(result) -> dict[str, str]:
    """How an answer's constants were set: the runtime it ran and the result's own provenance
    (`Result.calibration` / `ServeResult.calibration`: one parameter set per runtime, the same line
    for a static and a served answer)."""
    return {"runtime": result.runtime, "note": " ".join(result.calibration.split())}


def speculative_of(body: dict, model: Model) -> Any:
    """The request's speculative decoding, or None: `draft` a model preset or "mtp" (the target's
    own multi-token-prediction head), `gamma` tokens drafted per round, `acceptance_rate` per token."""
    draft = text(body, "draft")
    if not draft:
        return None
    gamma = integer(body, "gamma", 4, 1, 16)
    alpha = number(body, "acceptance_rate", None)
    with at("acceptance_rate"):
        if draft.lower() == "mtp":      # the head's cited acceptance unless the request gives one
            return mtp(model, gamma) if alpha is None else mtp(model, gamma, acceptance_rate=alpha)
        draft_model = load_model(named("model", "draft", draft))
        if alpha is None:
            raise BadRequest("acceptance_rate is missing: the probability that a drafted token is accepted "
                             "(e.g. 0.7)", "acceptance_rate")
        return SpeculativeDecoding(draft=draft_model, gamma=gamma, acceptance_rate=alpha)


def _speculative_text(spec: Any) -> str | None:
    if spec is None:
        return None
    draft = spec.draft.name if spec.draft is not None else "the model's own multi-token-prediction head"
    return f"speculative decoding: {draft} drafts {spec.gamma} tokens a round, each accepted with p = {spec.acceptance_rate:g}"


def device_prices(body: dict, devices: list[str]) -> dict[str, float]:
    """`prices` for Compare and Serve: one USD per chip-hour for every device ("2.5"), or the
    "device=USD" pairs of `prices_of`; absent = the profiles' prices."""
    raw = _get(body, "prices", {})
    one_price = (isinstance(raw, (int, float)) and not isinstance(raw, bool)) or (isinstance(raw, str) and "=" not in raw)
    if one_price:
        price = number({"prices": raw}, "prices", None)
        return {d: price for d in devices} if price is not None else {}
    return prices_of(body, devices)



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
    """`mb.compare` of one model on several devices (`devices`: ["h100-sxm:8", "cerebras-wse-3"];
    no chip count = the fewest chips that hold it): one row per device that holds the model, and
    for each one that does not, the library's reason with the entry's index (`dropped`). When no
    device holds it, that is a bad request pointing at the first entry.

    `mode` "static" (default: `estimate()`'s batch of `batch` sequences decoded together) or
    "served" (`mb.serve` with `batch` clients in a closed loop on a continuously batching engine);
    `prices` (one USD per chip-hour for every device, or "device=USD" pairs) and speculative
    decoding (`draft`: a model preset, or "mtp" for the model's own multi-token-prediction head;
    `gamma`; `acceptance_rate`) apply to every device. Each row says how its answer is calibrated."""
    model = model_of(body)
    w = Workload.of(body)
    mode = text(body, "mode", "static")
    if mode not in ("static", "served"):
        raise BadRequest(f"mode={short_repr(mode)} is invalid: expected 'static' or 'served'", "mode")
    spec = speculative_of(body, model)
    entries = [device_spec(s, i) for i, s in enumerate(names(body, "devices", list(DEFAULT_DEVICES)))]
    canonical = [name for name, _ in entries]
    prices = device_prices(body, canonical)
    rows: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for i, (name, chips) in enumerate(entries):
        price = prices.get(canonical[i])
        with at("devices", i):
            if mode == "served":
                try:
                    rows.append(_served_row(model, name, chips, w, spec, price))
                except DoesNotFitError as err:
                    dropped.append({"index": i, "device": canonical[i], "error": " ".join(str(err).split())})
                continue
            res = run_compare(model, [f"{name}:{chips}" if chips else name], **w.kwargs(), speculative=spec,
                              price_usd_per_hour=price)
        rows += [_row(r, price) for r in res.results]
        dropped += [{"index": i, "device": d, "error": " ".join(why.split())} for d, why in res.dropped]
    if not rows:
        raise BadRequest(dropped[0]["error"], "devices", dropped[0]["index"])
    for row in rows:    # per-user speed against the first device's (the page's "x first" column)
        row["speedup_vs_first"] = row["decode_tok_s_per_user"] / rows[0]["decode_tok_s_per_user"]
    return {"model": model.name, "mode": mode, "workload": w.kwargs(), "speculative": _speculative_text(spec),
            "rows": rows, "dropped": dropped}


def explain(body: dict) -> dict[str, Any]:
    """One configuration's step terms (seconds per token at the mean context) and memory per chip."""
    model = model_of(body)
    w = Workload.of(body)
    name, chips = device_spec(text(body, "device", DEFAULT_DEVICES[0]) or "", None, "device")
    with at("device"):
        res = run_compare(model, [f"{name}:{chips}" if chips else name], **w.kwargs())
    if not res.results:
        raise BadRequest(" ".join(res.dropped[0][1].split()), "device")
    r = res.results[0]
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
            raise BadRequest(f"prices={short_repr(raw)} is invalid: expected DEVICE=USD per chip-hour, comma-separated",
                             "prices")
        raw = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(raw, dict):
        raise BadRequest(f"prices={short_repr(raw)} is invalid: expected {{device: USD per chip-hour}}", "prices")
    out = {}
    for name in raw:
        hw = named("hardware", "prices", name)
        if hw not in devices:
            raise BadRequest(f"prices: {short_repr(name)} is not one of the devices {devices}", "prices")
        try:
            out[hw] = number(raw, name, None) or 0.0
        except BadRequest as err:
            raise BadRequest(f"prices: {err}", "prices") from None
    return out


MAX_POINTS = 24      # points on one served curve
_SERVE_COLUMNS = [("concurrency", "clients", ""), ("arrival_rate", "requests/s", ""),
                  ("tok_s_per_user", "tok/s per user", ""), ("output_tok_s_per_chip", "output tok/s per chip", ""),
                  ("output_tok_s", "output tok/s", ""), ("ttft_median_s", "TTFT median", "s"),
                  ("ttft_p90_s", "TTFT p90", "s"), ("tpot_median_s", "TPOT median", "s"),
                  ("e2e_median_s", "e2e median", "s"), ("mean_running", "running batch", ""),
                  ("kv_occupancy", "KV cache in use", "%"), ("bound", "bound", ""),
                  ("cost_per_million_output_tokens_usd", "$/M output tok", "")]


def loads(body: dict) -> tuple[str, list]:
    """The curve's load points: `arrival_rate_rps` (requests/s) if given, else `concurrency`
    (clients in a closed loop); a comma-separated string or a list."""
    key = "arrival_rate_rps" if _get(body, "arrival_rate_rps") is not None else "concurrency"
    raw = _get(body, key, [1, 2, 4, 8, 16, 32, 64, 128, 256])
    items = [p for p in raw.split(",") if p.strip()] if isinstance(raw, str) else raw if isinstance(raw, list) else [raw]
    if not 1 <= len(items) <= MAX_POINTS:
        raise BadRequest(f"{key}={short_repr(raw)} is invalid: expected 1 to {MAX_POINTS} comma-separated "
                         f"{'client counts' if key == 'concurrency' else 'rates'}", key)
    values: set[float | None]
    if key == "concurrency":
        values = {integer({key: v}, key, None, 1, MAX_USERS) for v in items}
    else:
        values = {number({key: v}, key, None) for v in items}
    if None in values:                  # a null in the list
        raise BadRequest(f"{key}={short_repr(raw)} is invalid: expected numbers, not null", key)
    return key, sorted(v for v in values if v is not None)


def served_kwargs(model: Model, name: str, chips: int | None, w: Workload, spec: Any = None) -> dict[str, Any]:
    """`mb.serve`'s keywords for one deployment: `chips` (None = the fewest that hold the model at
    the request's lengths, on a tiered chip in the tiers a decode streams at speed, as `serve`'s own
    default) laid out by `layout_for`, and the request's lengths, formats and runtime."""
    chips = chips or min_chips(model, name, context_tokens=w.prompt_tokens + w.output_tokens,
                               weight_dtype=w.weight_dtype, kv_dtype=w.kv_dtype, speculative=spec, at_speed=True)
    layout = layout_for(model, name, chips)
    if layout is None:
        raise InvalidInputError("chips", chips, f"a chip count {model.name} can be laid out over on {name}")
    kw: dict[str, Any] = dict(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
                              weight_dtype=w.weight_dtype, kv_dtype=w.kv_dtype, n_chips=chips, parallel=layout)
    if w.runtime is not None:
        kw["runtime"] = w.runtime
    return kw


def serve(body: dict) -> dict[str, Any]:
    """The served curves of one or several deployments (`devices`: ["h100-sxm:8", "h200:8"], or one
    `device`): `mb.serve` at each load point (clients in a closed loop, or Poisson arrivals), one
    curve per device, with `prices` and speculative decoding as Compare takes them. On a
    client-count curve, the fast-mode reading of `mb.serve_curve(...).fast_mode`: where on the
    curve a user gets `speedup` times the standard lane's speed (`standard_lane`: one of the
    client counts; default the curve's knee), and for how many times the price per token. The
    first curve's fields are also the answer's own (`hardware`, `points`, `fast_mode`, ...)."""
    model = model_of(body)
    w = Workload.of(body)
    key, points = loads(body)
    speedup = number(body, "speedup", 2.5, minimum=1.0)
    standard = integer(body, "standard_lane", None, 1, MAX_USERS)
    if standard is not None and key == "concurrency" and standard not in points:
        raise BadRequest(f"standard_lane={standard} is invalid: expected one of the client counts {points}",
                         "standard_lane")
    field = "devices" if _get(body, "devices") is not None else "device"
    specs = (names(body, "devices", []) if field == "devices" else [text(body, "device", DEFAULT_DEVICES[0]) or ""])
    entries = [device_spec(s, i if field == "devices" else None, field) for i, s in enumerate(specs)]
    canonical = [name for name, _ in entries]
    prices = device_prices(body, canonical)
    spec = speculative_of(body, model)
    curves = []
    for i, (name, chips) in enumerate(entries):
        with at(field, i if field == "devices" else None):
            kw = served_kwargs(model, name, chips, w, spec)
        curves.append(_curve(model, name, kw, key, points, speedup or 2.5, standard, spec, prices.get(canonical[i]),
                             field, i if field == "devices" else None))
    cols = [c for c in _SERVE_COLUMNS if c[0] != ("arrival_rate" if key == "concurrency" else "concurrency")]
    for c in curves:
        c["points"] = [{k: p[k] for k, _, _ in cols} for p in c["points"]]
    return {"model": model.name, "load": key, **{k: curves[0][k] for k in _CURVE_KEYS}, "curves": curves,
            "speculative": _speculative_text(spec),
            "columns": [{"key": k, "label": label, "unit": unit} for k, label, unit in cols]}


_CURVE_KEYS = ("hardware", "n_chips", "parallel", "runtime", "calibration", "points", "fast_mode", "notes")


def _curve(model: Model, name: str, kw: dict[str, Any], key: str, points: list, speedup: float, standard: int | None,
           spec: Any, price: float | None, field: str, index: int | None) -> dict[str, Any]:
    """One device's served curve: `mb.serve` at each load point, and its fast-mode reading (optional:
    a fault in it is a note, never the curve's failure)."""
    results = []
    for v in points:
        load = {"concurrency": v} if key == "concurrency" else {"arrival_rate": v}
        with at(field, index):
            results.append(run_serve(model, name, **load, **kw, speculative=spec, price_usd_per_hour=price))
    fast, notes = None, []
    if key == "concurrency" and len(points) >= 2:
        try:
            fast = _fast_mode(model, name, points, {**kw, "speculative": spec, "price_usd_per_hour": price},
                              speedup, standard)
        except Exception as err:     # an optional reading: its fault is a note, never the answer's
            notes.append(_fast_mode_note(err, speedup))
    first = results[0]
    return {"hardware": first.hardware, "n_chips": first.n_chips, "parallel": first.parallel, "runtime": first.runtime,
            "calibration": calibration_of(first), "points": [r.to_dict() for r in results],
            "fast_mode": fast, "notes": notes}


def _fast_mode_note(err: Exception, speedup: float) -> str:
    """Why the fast-mode reading is missing, in the page's words: the curve cannot reach
    `speedup` times the standard lane (the library's expectation, not the speed it computed
    from the user's ratio), another library refusal, or a bug (logged; one line here)."""
    if isinstance(err, InvalidInputError) and err.field == "speedup":
        return f"fast mode not shown: a {speedup:g}x faster lane must run at {err.expected}"
    if isinstance(err, MemboundError):
        return "fast mode not shown: " + " ".join(str(err).split())
    log.exception("fast-mode reading failed")
    return f"fast mode not shown: internal error ({type(err).__name__}); see the server log"


def _fast_mode(model: Model, name: str, points: list, kw: dict[str, Any], speedup: float,
               standard: int | None) -> dict[str, Any]:
    """The fast-mode reading of the client-count curve (`mb.serve_curve(...).fast_mode`)."""
    curve = serve_curve(model, name, concurrency=points, **kw)
    fm = curve.fast_mode(speedup, standard_concurrency=standard)
    slow_per_chip = float(curve.output_tok_s_per_chip[points.index(fm.slow_concurrency)])
    return {"fast": {"tok_s_per_user": fm.fast_tok_s_per_user, "output_tok_s_per_chip": slow_per_chip / fm.price_ratio,
                     "concurrency": fm.fast_concurrency},
            "slow": {"tok_s_per_user": fm.slow_tok_s_per_user, "output_tok_s_per_chip": slow_per_chip,
                     "concurrency": fm.slow_concurrency},
            "speedup": fm.speedup, "price_ratio": fm.price_ratio, "reading": fm.reading}


# (column, label, unit) of each planner's ranked table, and its frontier's per-chip column
_PLAN_COLUMNS = {
    "served": ([("hardware", "device", ""), ("n_chips", "chips/replica", ""), ("parallel", "layout", ""),
                ("weight_dtype", "weights", ""), ("clients_per_replica", "clients/replica", ""),
                ("replicas", "replicas", ""), ("chips_total", "chips", ""), ("ttft_s", "TTFT", "s"),
                ("tok_s_per_user", "tok/s/user", ""), ("e2e_s", "e2e", "s"),
                ("output_tok_s_per_chip", "tok/s/chip", ""), ("usd_per_hour", "$/hour", ""),
                ("cost_per_million_output_tokens_usd", "$/M tok", "")], "output_tok_s_per_chip"),
    "static": ([("hardware", "device", ""), ("n_chips", "chips/replica", ""), ("parallel", "layout", ""),
                ("batch", "batch", ""), ("weight_dtype", "weights", ""), ("replicas", "replicas", ""),
                ("total_chips", "chips", ""), ("utilisation", "utilisation", "%"), ("ttft_p90_s", "TTFT p90", "s"),
                ("tok_s_per_user", "tok/s/user", ""), ("e2e_p90_s", "e2e p90", "s"),
                ("tok_s_per_chip", "tok/s/chip", ""), ("cost_per_million_tokens_usd", "$/M tok", ""),
                ("power_kw", "kW", "")], "seat_tok_s_per_chip"),
}


def plan(body: dict) -> dict[str, Any]:
    """The cheapest fleets that carry `concurrent_users` (or `arrival_rate_rps`) within the SLOs:
    `mb.plan`, the one planner (`membound plan` calls it too), with `planner` "served" (continuous
    batching, serve()'s physics; default) or "static" (batches decoded together, the explicit bus
    mode). Top 10 fleets and the frontier."""
    model = model_of(body)
    mode = text(body, "planner", "served")
    if mode not in _PLAN_COLUMNS:
        raise BadRequest(f"planner={short_repr(mode)} is invalid: expected 'served' or 'static'", "planner")
    users = integer(body, "concurrent_users", None, 1, MAX_USERS)
    rate = number(body, "arrival_rate_rps", None)
    prompt = integer(body, "prompt_tokens", 2048, 0, MAX_TOKENS)
    output = integer(body, "output_tokens", 256, 1, MAX_TOKENS)
    devices = [named("hardware", "hardware", d, i) for i, d in enumerate(names(body, "hardware", ["h100-sxm", "h200"]))]
    prices = prices_of(body, devices)
    with at(None):
        slo = SLO(ttft_p90_s=number(body, "ttft_p90_s", None), min_tok_s_per_user=number(body, "min_tok_s_per_user", None),
                  e2e_p90_s=number(body, "e2e_p90_s", None))
    dtypes = names(body, "weight_dtypes", ["bf16", "fp8"])
    for d in dtypes:
        with at("weight_dtypes"):
            get_dtype(d)
    with at(None):
        if (users is None) == (rate is None):
            raise BadRequest("give concurrent users or an arrival rate (one of the two)", "concurrent_users")
        rt = text(body, "runtime")
        runtime = named("runtime", "runtime", rt) if rt else None
        traffic = Traffic(concurrent_users=users, arrival_rate_rps=rate, prompt_tokens=prompt, output_tokens=output)
        res = run_plan(model, traffic, slo, hardware=devices, prices=prices or None, weight_dtypes=tuple(dtypes),
                       runtime=runtime, batching=mode)
    cols, per_chip = _PLAN_COLUMNS[mode]
    ranked = _records(res.ranked[[c for c, _, _ in cols]].head(10)) if len(res.ranked) else []
    points = [{"hardware": f["hardware"], "tok_s_per_user": f["tok_s_per_user"], "tok_s_per_chip": f[per_chip],
               "label": f"{f['n_chips']} chips, {f.get('batch', f.get('concurrency'))} "
                        f"{'in a batch' if mode == 'static' else 'clients'}, {f['weight_dtype']}"}
              for f in _records(res.frontier)]
    frontier = []
    for hw in dict.fromkeys(p["hardware"] for p in points):   # each device's Pareto front (mb.pareto_front)
        mine = [p for p in points if p["hardware"] == hw]
        keep = pareto_front([p["tok_s_per_user"] for p in mine], [p["tok_s_per_chip"] for p in mine])
        frontier += [mine[int(i)] for i in keep]
    return {"model": model.name, "planner": mode, "explanation": res.explanation, "notes": list(res.notes),
            "candidates": res.candidates, "columns": [{"key": k, "label": label, "unit": u} for k, label, u in cols],
            "ranked": ranked, "frontier": frontier}


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
