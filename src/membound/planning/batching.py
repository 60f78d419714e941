"""Batching as a multiplier: one weight read serves every sequence in the batch.

As the batch B grows, a decode step streams the same weights plus B sequences' KV cache, so
aggregate tok/s (B / step) rises, per-user tok/s (1 / step) falls, and the price per output
token (chip-hours / tokens) falls, until the step turns compute-bound (the ridge point) and
aggregate speed stops rising. Every sequence's KV cache must fit in memory: `max_batch`.

The "bus" trade-off: a chip-hour costs the same however many seats are filled, so a request
served at batch B pays for the B_full - B seats it leaves empty: `bus_fare`.
"Fast mode" (a higher price per token for a faster stream) is two points on this curve:
`fast_mode` finds the pair of batches that gives a target speed-up and price ratio. Both read
the curve of (speed per user, throughput per chip) as `fares` does, the served curve's reading.

All curves are one vectorised `core.evaluate` call over an array of batches (no Python loop).
Units: tokens/s, USD per million output tokens, seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..physics.result import equal_values
from ..physics.core import BOUNDS
from ..errors import DoesNotFitError, InvalidInputError, is_finite_number
from ..physics.estimate import MAX_COUNT, prepare
from ..physics.fares import SpeedCurve
from ..base.display import pre_html
import html

MAX_BATCH_SEARCH = 1 << 20   # largest batch max_batch() will consider (sequences)


def batch_grid(batches) -> np.ndarray:
    """A grid of batch sizes as floats: integers from 1 to MAX_COUNT (10**300 made an inf cost,
    inf NaN speeds, a bare number or [[8]] a TypeError or ValueError of numpy's)."""
    try:
        b = np.asarray(list(batches) if not isinstance(batches, np.ndarray) else batches)
    except (TypeError, ValueError):
        b = np.zeros(0)
    if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.number) \
            or not np.all(np.isfinite(b)) or np.any(b < 1) or np.any(b > MAX_COUNT) or np.any(b != np.floor(b)):
        raise InvalidInputError("batches", batches, f"a non-empty 1-D sequence of integers from 1 to {MAX_COUNT:,}")
    return b.astype(float)


def _bounds(r, n) -> tuple:
    """Which term sets the step, per batch (as core.bound_name, vectorised)."""
    terms = np.stack([np.broadcast_to(np.asarray(r[f"{k}_s"], float), (n,)) for k in BOUNDS])
    return tuple(BOUNDS[i] for i in np.argmax(terms, axis=0))


@dataclass(frozen=True)
class BatchCurve:
    """Speed and price against batch size, for one configuration (arrays indexed by batch)."""

    batch: np.ndarray
    per_user_tok_s: np.ndarray          # decode tok/s seen by one sequence
    total_tok_s: np.ndarray             # aggregate decode tok/s over the batch
    cost_per_million_usd: np.ndarray | None   # None where no price is known
    bound: tuple[str, ...]              # memory | compute | latency | communication | overhead
    fits: np.ndarray                    # weights + KV + activations fit in memory
    memory_s: np.ndarray                # memory term of a step at the mean context (s per token)
    compute_s: np.ndarray               # compute term likewise
    ridge_batch: int | None             # smallest batch whose step is compute-bound (None: never)
    max_batch: int | None               # largest batch that fits (None: not even batch 1)

    def to_pandas(self):
        """A DataFrame with one row per batch (needs pandas)."""
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        cols = dict(batch=self.batch.astype(int), per_user_tok_s=self.per_user_tok_s,
                    total_tok_s=self.total_tok_s, bound=list(self.bound), fits=self.fits)
        if self.cost_per_million_usd is not None:
            cols["cost_per_million_usd"] = self.cost_per_million_usd
        return pd.DataFrame(cols)

    def __str__(self) -> str:
        head = f"{'batch':>6} {'tok/s/user':>11} {'tok/s total':>12} {'$/Mtok':>9}  bound"
        lines = [head]
        for i, b in enumerate(self.batch):
            cost = "-" if self.cost_per_million_usd is None else f"{self.cost_per_million_usd[i]:.3g}"
            fit = "" if self.fits[i] else "  (does not fit)"
            lines.append(f"{int(b):>6} {self.per_user_tok_s[i]:>11.1f} {self.total_tok_s[i]:>12.0f} "
                         f"{cost:>9}  {self.bound[i]}{fit}")
        lines.append(f"ridge batch (compute-bound from): {self.ridge_batch}; largest batch that fits: {self.max_batch}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return (self.to_pandas().to_html(index=False, float_format=lambda x: f"{x:,.4g}")
                + f"<p>{html.escape(self.__str__().splitlines()[-1])}</p>")

    def __eq__(self, other) -> bool:
        return equal_values(self, other)

    __hash__ = None     # type: ignore[assignment]  # unhashable: holds arrays, compared by value


def batch_curve(model, hardware, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), **estimate_kwargs) -> BatchCurve:
    """Per-user and aggregate decode tok/s and USD per million output tokens at each batch.

    estimate_kwargs: any `estimate()` argument but `batch` (prompt_tokens, output_tokens,
    weight_dtype, n_chips, runtime, speculative, price_usd_per_hour, ...). Batches that do
    not fit are reported (fits=False), not dropped.
    """
    b = batch_grid(batches)
    p = _prepare(model, hardware, estimate_kwargs)
    r = p.evaluate(batch=b)
    n = b.size
    full = lambda x: np.broadcast_to(np.asarray(x, float), (n,)).copy()  # noqa: E731
    return BatchCurve(
        batch=b, per_user_tok_s=full(r["decode_tok_s_per_user"]), total_tok_s=full(r["decode_tok_s_total"]),
        cost_per_million_usd=None if p.price is None else full(r["cost_per_million_tokens_usd"]),
        bound=_bounds(r, n), fits=np.broadcast_to(np.asarray(r["fits"]), (n,)).copy(),
        memory_s=full(r["memory_s"]), compute_s=full(r["compute_s"]),
        ridge_batch=_ridge(p), max_batch=_max_batch(p))


def _prepare(model, hardware, kwargs):
    if "batch" in kwargs:
        raise InvalidInputError("batch", kwargs["batch"], "no batch here: the helper chooses the batches")
    return prepare(model, hardware, **kwargs)


def _ridge(p) -> int | None:
    """Smallest integer batch whose compute term reaches its memory term (vectorised scan over a
    geometric grid, then the exact integer within the bracketing interval)."""
    grid = np.unique(np.round(np.geomspace(1, MAX_BATCH_SEARCH, 400)))
    r = p.evaluate(batch=grid)
    hit = np.nonzero(np.asarray(r["compute_s"]) >= np.asarray(r["memory_s"]))[0]
    if hit.size == 0:
        return None
    i = hit[0]
    if i == 0:
        return 1
    lo, hi = grid[i - 1], grid[i]
    fine = np.arange(lo + 1, hi + 1)
    r = p.evaluate(batch=fine)
    return int(fine[np.nonzero(np.asarray(r["compute_s"]) >= np.asarray(r["memory_s"]))[0][0]])


def _fits(p, b: float) -> bool:
    return bool(p.evaluate(batch=float(b))["fits"])


def _max_batch(p) -> int | None:
    """Largest batch whose weights + KV + activations fit per chip (memory need grows with B:
    exponential then binary search)."""
    if not _fits(p, 1):
        return None
    hi = 2
    while hi <= MAX_BATCH_SEARCH and _fits(p, hi):
        hi *= 2
    if hi > MAX_BATCH_SEARCH:
        return MAX_BATCH_SEARCH
    lo = hi // 2                      # fits at lo, not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _fits(p, mid) else (lo, mid)
    return lo


def max_batch(model, hardware, **estimate_kwargs) -> int:
    """The largest batch whose KV cache (at prompt + output tokens per sequence), with the
    weights and activations, fits in the devices' memory. Raises DoesNotFitError if not even
    batch 1 fits."""
    p = _prepare(model, hardware, estimate_kwargs)
    b = _max_batch(p)
    if b is None:
        r = p.evaluate(batch=1.0)
        need, cap = float(r["need_bytes_chip"]), float(r["capacity_bytes_chip"])
        raise DoesNotFitError(need, cap, math.ceil(need * p.n_chips / cap),
                              f"{p.model.name} on {p.n_chips} x {p.hardware.name}, batch 1; per chip")
    return b


def ridge_batch(model, hardware, **estimate_kwargs) -> int | None:
    """Smallest batch at which the decode step is compute-bound (compute term >= memory term at
    the mean context); None if it never is (e.g. long contexts, where KV bytes grow as fast as
    attention FLOPs)."""
    return _ridge(_prepare(model, hardware, estimate_kwargs))


@dataclass(frozen=True)
class BusFare:
    """Price of a seat: a request served at `batch` against a full bus of `full_batch`
    (`fares.SpeedCurve.fare` over the two batches)."""

    batch: int
    full_batch: int
    cost_per_million_usd: float          # at `batch`
    full_cost_per_million_usd: float     # at `full_batch`
    per_user_tok_s: float
    full_per_user_tok_s: float
    price_ratio: float                   # how many times more a token costs at `batch` than on the full bus
    speedup: float                       # how many times faster one user's stream is at `batch`

    def __str__(self) -> str:
        return (f"batch {self.batch}: ${self.cost_per_million_usd:,.3g} per million tokens at "
                f"{self.per_user_tok_s:,.1f} tok/s per user; a full bus of {self.full_batch}: "
                f"${self.full_cost_per_million_usd:,.3g} at {self.full_per_user_tok_s:,.1f} tok/s "
                f"({self.price_ratio:.3g}x the price, {self.speedup:.3g}x the speed)")

    def _repr_html_(self) -> str:
        return pre_html(str(self))


def bus_fare(model, hardware, batch: int = 1, full_batch: int | None = None, **estimate_kwargs) -> BusFare:
    """Price per token (and per-user speed) at `batch` against a full bus (default: the largest
    batch that fits). The chip-hour is paid either way, so the empty seats' share lands on
    the riders: at batch 1 the price ratio is about full_batch x step(1) / step(full)."""
    p = _prepare(model, hardware, estimate_kwargs)
    if p.price is None:
        raise InvalidInputError("price_usd_per_hour", None,
                                f"a price per chip-hour ({p.hardware.name} has none in its profile)")
    full = _max_batch(p) if full_batch is None else full_batch
    if full is None:
        max_batch(model, hardware, **estimate_kwargs)   # raises DoesNotFitError
    b = batch_grid([batch, full])
    r = p.evaluate(batch=b)
    cost, speed = np.asarray(r["cost_per_million_tokens_usd"]), np.asarray(r["decode_tok_s_per_user"])
    f = _speeds(p, b, r).fare(b[0], b[1])
    return BusFare(int(b[0]), int(b[1]), float(cost[0]), float(cost[1]), float(speed[0]), float(speed[1]),
                   f.price_ratio, f.speedup)


def _speeds(p, b: np.ndarray, r) -> SpeedCurve:
    """The static batches as a (speed per user, throughput per chip) curve: a sequence's decode
    speed, and each chip's output tokens over a request's end-to-end time (prefill included), the
    time its price per token is paid for (`core.evaluate`'s cost)."""
    n = b.size
    per_chip = b * max(float(p.knobs.output), 1.0) / (np.broadcast_to(np.asarray(r["e2e_s"], float), (n,)) * p.n_chips)
    return SpeedCurve(b, np.broadcast_to(np.asarray(r["decode_tok_s_per_user"], float), (n,)), per_chip)


@dataclass(frozen=True)
class FastMode:
    """A pair of batch sizes: the fast lane (small batch) and the standard lane (large batch)."""

    fast_batch: int
    slow_batch: int
    speedup: float         # per-user tok/s, fast / slow
    price_ratio: float     # USD per output token, fast / slow
    target_speedup: float
    target_price_ratio: float

    @property
    def error(self) -> float:
        """Largest relative miss of the two targets (0.05 = 5 %)."""
        return max(abs(self.speedup / self.target_speedup - 1), abs(self.price_ratio / self.target_price_ratio - 1))

    def __str__(self) -> str:
        return (f"fast lane batch {self.fast_batch} vs standard batch {self.slow_batch}: "
                f"{self.speedup:.2f}x the per-user speed for {self.price_ratio:.2f}x the price per token "
                f"(target {self.target_speedup:g}x for {self.target_price_ratio:g}x; miss {self.error:.1%})")

    def _repr_html_(self) -> str:
        return pre_html(str(self))


def fast_mode(model, hardware, speedup: float = 2.5, price_ratio: float = 6.0, batches=None,
              **estimate_kwargs) -> FastMode:
    """A pair of batches (fast < slow, both fitting in memory) read off the static curve as the
    served curve's fast mode is (`fares`): the standard lane is the batch whose lane `speedup`
    times faster costs closest (in log) to `price_ratio` times its price per token; the fast lane
    is the batch nearest that lane. FastMode reports the two batches' own ratios.

    Price per token is chip-time / tokens = step / B, so the two ratios fix the batch ratio:
    price_ratio = (slow / fast) / speedup; a 2.5x speed-up at 6x the price needs slow = 15 x fast.
    batches: candidates (default every integer from 1 to the largest that fits, at most 4096).
    """
    for name, v in (("speedup", speedup), ("price_ratio", price_ratio)):
        if not (isinstance(v, (int, float)) and is_finite_number(v) and v > 1):
            raise InvalidInputError(name, v, "a finite ratio > 1")
    p = _prepare(model, hardware, estimate_kwargs)
    if p.price is None:
        raise InvalidInputError("price_usd_per_hour", None,
                                f"a price per chip-hour ({p.hardware.name} has none in its profile)")
    if batches is None:
        top = _max_batch(p)
        if top is None:
            max_batch(model, hardware, **estimate_kwargs)   # raises DoesNotFitError
        assert top is not None
        batches = np.arange(1, min(top, 4096) + 1)
    b = batch_grid(batches)
    r = p.evaluate(batch=b)
    ok = np.broadcast_to(np.asarray(r["fits"], bool), b.shape)
    if np.count_nonzero(ok) < 2:
        raise InvalidInputError("batches", batches, "at least two batch sizes that fit in memory")
    curve = _speeds(p, b, r)
    curve = SpeedCurve(b[ok], curve.tok_s_per_user[ok], curve.tok_s_per_chip[ok])
    slow, fast = _lanes(curve, speedup, price_ratio)
    f = curve.fare(fast, slow)
    return FastMode(int(fast), int(slow), f.speedup, f.price_ratio, float(speedup), float(price_ratio))


def _lanes(curve: SpeedCurve, speedup: float, price_ratio: float) -> tuple[float, float]:
    """(standard batch, fast batch): each batch of the curve is a candidate standard lane; its fast
    lane is read `speedup` times faster (`SpeedCurve.at_speeds`), and the standard whose price
    ratio comes closest to `price_ratio` (in log) wins; the fast lane is then the batch of the
    curve nearest (in log) to the one read."""
    b = np.asarray(curve.load, float)
    load, t = curve.at_speeds(np.asarray(curve.tok_s_per_user) * speedup)
    miss = np.abs(np.log(np.asarray(curve.tok_s_per_chip) / t / price_ratio))
    miss = np.where(np.isnan(miss), np.inf, miss)
    j = int(np.argmin(miss))
    if not np.isfinite(miss[j]):          # no batch has a lane `speedup` times faster: the two ends
        return float(b.max()), float(b.min())
    below = b[b < b[j]] if np.any(b < b[j]) else b[:1]
    return float(b[j]), float(below[int(np.argmin(np.abs(np.log(below / load[j]))))])
