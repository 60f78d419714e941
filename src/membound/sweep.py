"""Vectorised sweeps: `estimate()` over a grid, one row per point, no Python loop per point.

The grid is the cartesian product of the arguments (each a scalar or a list). Python loops
only over the categorical groups (model, device, runtime, speculative setting, chip count and
layout, dtype triple); inside a group the numeric axes batch x prompt x output go to
`core.evaluate` as broadcast numpy arrays, in blocks of at most `chunk_size` points, so memory
stays bounded. The numbers are `estimate()`'s: the same engine on the same inputs.

    table = mb.sweep(model=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm", "h200"],
                     batch=[1, 8, 64], prompt_tokens=[512, 8192], output_tokens=256,
                     weight_dtype=["bf16", "fp8"])

Columns carry `Result.to_dict()`'s names (the per-tier placement text is left out). Missing
figures (cost or energy where the device has no price or power) are NaN in the table where
`estimate()` gives None.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from . import defaults
from .core import BOUNDS
from .errors import InvalidInputError, MemboundError
from .estimate import check_int, prepare
from .hardware import load_hardware
from .model import load_model
from .parallel import Parallel

DEFAULT_CHUNK = 1 << 18   # points per block: 2 MB per array, a few hundred MB at most in flight

_LABELS = ("model", "hardware", "runtime", "n_chips", "parallel", "batch", "prompt_tokens",
           "output_tokens", "weight_dtype", "kv_dtype", "activation_dtype")
_FIGURES = ("decode_tok_s_per_user", "decode_tok_s_total", "ttft_s", "prefill_s", "e2e_s", "tpot_s")
_MEMORY = (("memory_weights_bytes", "weights_bytes_chip"), ("memory_kv_bytes", "kv_bytes_chip"),
           ("memory_activation_bytes", "activation_bytes_chip"), ("memory_other_bytes", "extra_bytes_chip"),
           ("memory_capacity_bytes", "capacity_bytes_chip"))
_SPEC_NUMBERS = ("spec_gamma", "spec_tokens_per_round", "spec_verify_positions")


@dataclass(frozen=True)
class _Cat:
    """A label column as integer codes into `categories` (-1: missing); strings are not
    copied per row, so a million rows of labels cost a few megabytes."""

    codes: np.ndarray
    categories: tuple

    @staticmethod
    def const(value, n: int) -> "_Cat":
        return _Cat(np.full(n, -1 if value is None else 0, dtype=np.int32), () if value is None else (value,))

    def __len__(self) -> int:
        return len(self.codes)


class Table(dict):
    """A dict of equal-length numpy arrays (the fallback when pandas is missing), with `attrs`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attrs: dict = {}


def _as_list(field: str, value) -> list:
    if isinstance(value, (str, bytes, dict, BaseModel)) or not hasattr(value, "__iter__") \
            or getattr(value, "ndim", 1) == 0:
        return [value]
    values = list(value)
    if not values:
        raise InvalidInputError(field, value, "a value or a non-empty list of values")
    return values


def _int_axis(field: str, value, minimum: int) -> np.ndarray:
    """A sorted-as-given float array of validated integers (each >= minimum)."""
    values = _as_list(field, value)
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and arr.ndim == 1:
        bad = np.flatnonzero(arr < minimum)
        if bad.size:
            check_int(field, values[bad[0]], minimum)
    else:
        for v in values:
            check_int(field, v, minimum)
    return np.asarray(arr, dtype=float)


@dataclass(frozen=True)
class _Group:
    """One categorical combination, prepared once (`estimate.prepare`)."""

    prepared: object
    labels: dict
    spec: dict
    joules: object        # watts * chips, or None


def _groups(models, hardware, runtimes, speculative, chips, parallels, dtypes, price, first, on_invalid,
            skipped):
    for m, hw, rt, sp, n, par, (wd, kd, ad) in itertools.product(
            models, hardware, runtimes, speculative, chips, parallels, dtypes):
        n_chips = par.chips if (n is None and par is not None) else (1 if n is None else n)
        p_hw = price.get(hw.name) if isinstance(price, dict) else price
        try:
            p = prepare(m, hw, batch=first[0], prompt_tokens=first[1], output_tokens=first[2],
                        weight_dtype=wd, kv_dtype=kd, activation_dtype=ad, n_chips=n_chips,
                        parallel=par, speculative=sp, runtime=rt, price_usd_per_hour=p_hw)
        except MemboundError as e:
            if on_invalid == "raise" or not isinstance(e, InvalidInputError):
                raise
            skipped.append((f"{m.name} on {n_chips} x {hw.name}, {wd}/{kd}/{ad}, runtime={rt}", str(e)))
            continue
        lay, res = p.layout, p.resolved
        labels = dict(model=m.name, hardware=hw.name, runtime=p.runtime.name, n_chips=p.n_chips,
                      parallel=f"tp={lay.tp} pp={lay.pp} ep={lay.ep}", weight_dtype=res.weights.name,
                      kv_dtype=res.kv.name, activation_dtype=res.activations.name)
        spec = {} if sp is None else {
            "spec_gamma": sp.gamma, "spec_tokens_per_round": p.spec_args[1],
            "spec_verify_positions": int(p.positions), "spec_draft": getattr(sp.draft, "name", sp.draft)}
        watts = hw.power_w
        yield _Group(p, labels, spec, watts * p.n_chips if watts else None)


def _blocks(shape, chunk_size):
    """Slices of a 3-d grid into blocks of at most chunk_size points (innermost axis first)."""
    nb, ns, nt = shape
    bt = min(nt, chunk_size)
    bs = min(ns, max(1, chunk_size // bt))
    bb = min(nb, max(1, chunk_size // (bt * bs)))
    for i in range(0, nb, bb):
        for j in range(0, ns, bs):
            for k in range(0, nt, bt):
                yield slice(i, i + bb), slice(j, j + bs), slice(k, k + bt)


def _evaluate_block(g: _Group, B, S, T, include_unfit):
    """Rows of one block: (columns, dropped count)."""
    r = g.prepared.evaluate(batch=B, prompt=S, output=T)
    shape = np.broadcast_shapes(B.shape, S.shape, T.shape)

    def full(x):
        return np.broadcast_to(np.asarray(x, dtype=float), shape).ravel()

    fits = np.broadcast_to(np.asarray(r["fits"], dtype=bool), shape).ravel()
    keep = None if include_unfit else np.flatnonzero(fits)
    dropped = 0 if keep is None else fits.size - keep.size

    def col(x):
        v = full(x)
        return v if keep is None else v[keep]

    n = fits.size if keep is None else keep.size
    cols = {}
    for k in _LABELS:
        if k in ("batch", "prompt_tokens", "output_tokens"):
            cols[k] = col({"batch": B, "prompt_tokens": S, "output_tokens": T}[k]).astype(np.int64)
        elif k == "n_chips":
            cols[k] = np.full(n, g.labels[k], dtype=np.int64)
        else:
            cols[k] = _Cat.const(g.labels[k], n)
    for k in _FIGURES:
        cols[k] = col(r[k])
    terms = np.stack([full(r[f"{k}_s"]) for k in BOUNDS])
    if keep is not None:
        terms = terms[:, keep]
    cols["bound"] = _Cat(np.argmax(terms, axis=0).astype(np.int32), BOUNDS)
    p = g.prepared
    cols["cost_per_million_tokens_usd"] = col(r["cost_per_million_tokens_usd"]) if p.price is not None \
        else np.full(n, np.nan)
    cols["joules_per_token"] = col(g.joules * r["e2e_s"] / (B * T)) if g.joules else np.full(n, np.nan)
    for out, key in _MEMORY:
        cols[out] = col(r[key])
    cols["memory_fits"] = fits if keep is None else fits[keep]
    for i, k in enumerate(BOUNDS):
        cols[f"{k}_s"] = terms[i]
    if g.spec:
        for k in _SPEC_NUMBERS:
            cols[k] = np.full(n, float(g.spec[k]))
        cols["spec_draft"] = _Cat.const(g.spec["spec_draft"], n)
    return cols, dropped


def _missing(key: str, n: int):
    return _Cat.const(None, n) if key == "spec_draft" else np.full(n, np.nan)


def _concat(parts: list, key: str):
    """One column over all chunks (a chunk without it, e.g. no speculative decoding, gets NaN)."""
    cols = [p[key] if key in p else _missing(key, len(p["batch"])) for p in parts]
    if not isinstance(cols[0], _Cat):
        return np.concatenate(cols)
    cats: dict = {}
    codes = []
    for c in cols:
        remap = np.array([cats.setdefault(v, len(cats)) for v in c.categories] + [-1], dtype=np.int32)
        codes.append(remap[c.codes])      # code -1 picks the trailing -1
    return _Cat(np.concatenate(codes), tuple(cats))


def _to_table(cols: dict, as_frame):
    if as_frame is not False:
        try:
            import pandas as pd
        except ImportError:
            if as_frame:
                raise
        else:
            return pd.DataFrame({k: pd.Categorical.from_codes(v.codes, v.categories) if isinstance(v, _Cat) else v
                                 for k, v in cols.items()}, copy=False)
    out = Table()
    for k, v in cols.items():
        if isinstance(v, _Cat):
            names = np.array([*v.categories, None], dtype=object)
            v = names[v.codes]
        out[k] = v
    return out


def iter_sweep(model, hardware, *, batch=defaults.BATCH, prompt_tokens=defaults.PROMPT_TOKENS,
               output_tokens=defaults.OUTPUT_TOKENS, weight_dtype=defaults.WEIGHT_DTYPE,
               kv_dtype=None, activation_dtype=None, n_chips=None, parallel=None, runtime=None,
               speculative=None, price_usd_per_hour=None, chunk_size: int = DEFAULT_CHUNK,
               include_unfit: bool = False, on_invalid: str = "raise", as_frame=None, _stats=None):
    """Yield the sweep's table in chunks of at most `chunk_size` rows (see `sweep`); stream them to
    disk or reduce them as they come. `_stats` (a dict) receives dropped/skipped counts."""
    chunk_size = check_int("chunk_size", chunk_size, 1)
    if on_invalid not in ("raise", "skip"):
        raise InvalidInputError("on_invalid", on_invalid, "'raise' or 'skip'")
    B = _int_axis("batch", batch, 1)
    S = _int_axis("prompt_tokens", prompt_tokens, 0)
    T = _int_axis("output_tokens", output_tokens, 1)
    models = [load_model(m) for m in _as_list("model", model)]
    devices = [load_hardware(h) for h in _as_list("hardware", hardware)]
    chips = [None if n is None else check_int("n_chips", n, 1) for n in _as_list("n_chips", n_chips)]
    parallels = _as_list("parallel", parallel)
    for par in parallels:
        if par is not None and not isinstance(par, Parallel):
            raise InvalidInputError("parallel", par, "None or a mb.Parallel (or a list of them)")
    dtypes = list(itertools.product(_as_list("weight_dtype", weight_dtype), _as_list("kv_dtype", kv_dtype),
                                    _as_list("activation_dtype", activation_dtype)))
    if isinstance(price_usd_per_hour, dict):
        price = {load_hardware(k).name: v for k, v in price_usd_per_hour.items()}
    else:
        price = price_usd_per_hour
    stats = _stats if _stats is not None else {}
    stats.setdefault("dropped_unfit", 0)
    skipped = stats.setdefault("skipped", [])
    first = (int(B[0]), int(S[0]), int(T[0]))
    Bg, Sg, Tg = B[:, None, None], S[None, :, None], T[None, None, :]
    for g in _groups(models, devices, _as_list("runtime", runtime), _as_list("speculative", speculative),
                     chips, parallels, dtypes, price, first, on_invalid, skipped):
        for bi, si, ti in _blocks((B.size, S.size, T.size), chunk_size):
            cols, dropped = _evaluate_block(g, Bg[bi], Sg[:, si], Tg[:, :, ti], include_unfit)
            stats["dropped_unfit"] += dropped
            if len(cols["batch"]):
                yield cols if as_frame == "raw" else _to_table(cols, as_frame)


def sweep(model, hardware, *, batch=defaults.BATCH, prompt_tokens=defaults.PROMPT_TOKENS,
          output_tokens=defaults.OUTPUT_TOKENS, weight_dtype=defaults.WEIGHT_DTYPE,
          kv_dtype=None, activation_dtype=None, n_chips=None, parallel=None, runtime=None,
          speculative=None, price_usd_per_hour=None, chunk_size: int = DEFAULT_CHUNK,
          include_unfit: bool = False, on_invalid: str = "raise", reduce=None, as_frame=None):
    """Evaluate every point of a grid; one row per point with `estimate()`'s figures.

    Each argument takes a scalar or a list; the grid is their cartesian product. n_chips=None
    means each `parallel` layout's chip count (1 chip when parallel is None too).
    price_usd_per_hour: None (the profiles' prices), a number, or {device name: price}.
    include_unfit: keep points whose memory does not fit (memory_fits False) instead of dropping
    them; the number dropped is in `table.attrs["dropped_unfit"]`.
    on_invalid: "raise" (like `estimate()`) or "skip" combinations a device or model cannot
    run (an activation dtype it lacks, a chip count the heads do not split over); skipped
    groups and their reasons are in `table.attrs["skipped"]`.
    reduce: None to return the table, or a function (accumulator, chunk) -> accumulator folded
    over the chunks (the accumulator starts as None); its final value is returned.
    Returns a pandas DataFrame where pandas is installed (as_frame=False: a dict of arrays).
    """
    stats: dict = {}
    chunks = iter_sweep(model, hardware, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                        weight_dtype=weight_dtype, kv_dtype=kv_dtype, activation_dtype=activation_dtype,
                        n_chips=n_chips, parallel=parallel, runtime=runtime, speculative=speculative,
                        price_usd_per_hour=price_usd_per_hour, chunk_size=chunk_size,
                        include_unfit=include_unfit, on_invalid=on_invalid,
                        as_frame=as_frame if reduce is not None else "raw", _stats=stats)
    if reduce is not None:
        acc = None
        for chunk in chunks:
            acc = reduce(acc, chunk)
        return acc
    parts = list(chunks)
    if parts:
        names = list(parts[0])
        for p in parts[1:]:
            names += [k for k in p if k not in names]
        cols = {k: _concat(parts, k) for k in names}
    else:
        cols = {k: np.empty(0) for k in (*_LABELS, *_FIGURES, "bound", "memory_fits")}
    table = _to_table(cols, as_frame)
    table.attrs["dropped_unfit"] = stats["dropped_unfit"]
    table.attrs["skipped"] = stats["skipped"]
    return table


def pareto_front(x, y) -> np.ndarray:
    """Indices of the points not dominated when both x and y are better larger (sorted by x)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    order = np.lexsort((-y, -x))          # x descending, ties: y descending
    ys = y[order]
    before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    return order[ys > before][::-1]
