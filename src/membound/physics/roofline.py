"""The roofline core: closed-form, vectorised step times.

Every function here takes plain floats or numpy (or duck-typed, e.g. dask) arrays and
broadcasts like a ufunc; floats stay floats, so one `estimate()` call pays no numpy overhead
and a sweep pays no Python loop. Units: bytes, seconds, FLOP, FLOP/s.

A decode step at context L (tokens already cached per sequence) costs

    step(L) = max(memory(L), compute(L), floor) + extra
    memory(L)  = mem_a + mem_b * u(L)      weights + KV streamed over achievable bandwidth
    compute(L) = cmp_a + cmp_b * u(L)      FLOPs over achievable compute
    floor      = layers x per-layer latency (the token passes through layers in order)
    extra      = communication + engine overhead, which do not overlap the rest

where u(L) = sum over layers of min(L, window) is the number of (layer, cached token) pairs a
token attends to; for models without sliding windows u(L) = layers * L. u is piecewise linear
in L, so the sum of step(L) over a whole generation has a closed form (`sum_steps`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

# A figure of the physics: a float (estimate) or an array of them broadcast like a ufunc (sweep)
Num: TypeAlias = float | NDArray[np.float64]

_SCALAR = (int, float)


TINY = 1e-250   # seconds per token of context: anything smaller is a flat line


def _is_scalar(*xs) -> bool:
    for x in xs:
        if not isinstance(x, _SCALAR):
            return False
    return True


# Each helper first takes the plain-float path (what estimate() uses, ~30 calls per estimate) with
# exact class tests (`x.__class__ is float`: no call, unlike type(x) in a set), then the general one,
# which gives the same value for ints, int/float subclasses, and broadcasts numpy or dask arrays.
def ceiling(a: Num) -> Num:
    if a.__class__ is float:
        return float(math.ceil(a))
    return float(math.ceil(a)) if isinstance(a, _SCALAR) else np.ceil(a)


def interp(x: Num, xs: Sequence[float], ys: Sequence[float]) -> Num:
    """ys at x, linear between the points xs (increasing) and clamped to their ends (numpy.interp); a
    float for a float."""
    if isinstance(x, _SCALAR):
        return float(np.interp(x, xs, ys))
    return np.interp(x, xs, ys)


def maximum(a: Num, b: Num) -> Num:
    if a.__class__ is float is b.__class__:
        return b if b > a else a            # noqa: FURB136 -- max(a, b) exactly, without the call
    return max(a, b) if isinstance(a, _SCALAR) and isinstance(b, _SCALAR) else np.maximum(a, b)


def minimum(a: Num, b: Num) -> Num:
    if a.__class__ is float is b.__class__:
        return b if b < a else a            # noqa: FURB136 -- min(a, b) exactly, without the call
    return min(a, b) if isinstance(a, _SCALAR) and isinstance(b, _SCALAR) else np.minimum(a, b)


def where(cond: bool | NDArray[np.bool_], a: Num, b: Num) -> Num:
    if cond.__class__ is bool and a.__class__ is float is b.__class__:
        return a if cond else b
    if isinstance(cond, (bool, np.bool_)) and isinstance(a, _SCALAR) and isinstance(b, _SCALAR):
        return a if cond else b
    return np.where(cond, a, b)


def floor(x: Num) -> Num:
    if x.__class__ is float:
        return float(math.floor(x))
    return float(math.floor(x)) if _is_scalar(x) else np.floor(x)


def clip(x: Num, lo: Num, hi: Num) -> Num:
    return minimum(maximum(x, lo), hi)


def expected_experts(n_experts: Num, k: Num, tokens: Num) -> Num:
    """Expected distinct experts one MoE layer reads when `tokens` tokens each route to `k` of
    `n_experts` uniformly: E * (1 - (1 - k/E)^tokens). Batch 1 reads k; large batches read E."""
    if type(n_experts) is float and type(k) is float and type(tokens) is float:   # the plain-float path
        if not n_experts > 0:
            return 0.0
        safe = 1 if 1 > n_experts else n_experts        # maximum(n_experts, 1), as below
        return safe * (1.0 - (1.0 - k / safe) ** tokens)
    safe_e = maximum(n_experts, 1)
    return where(n_experts > 0, safe_e * (1.0 - (1.0 - k / safe_e) ** tokens), 0.0)


def sum_linear(a: Num, b: Num, lo: Num, hi: Num) -> Num:
    """Sum of a + b*L over integers L in [lo, hi) (0 when hi <= lo)."""
    n = maximum(hi - lo, 0.0)
    hi = lo + n
    return a * n + b * (hi * (hi - 1.0) - lo * (lo - 1.0)) / 2.0


def sum_positive_part(d0: Num, d1: Num, lo: Num, hi: Num) -> Num:
    """Sum of max(d0 + d1*L, 0) over integers L in [lo, hi)."""
    # slopes below TINY count as flat (no overflow); numpy's stubs lose abs() of a float | array
    flat = abs(d1) <= TINY  # type: ignore[operator]
    root = -d0 / where(flat, 1.0, d1)                  # where the line crosses zero
    # from the first L past the root of a rising line (else lo) to the first at or past it of a falling
    # one (else hi), each clipped to [lo, hi] (`sum_max3` says why no other clip is needed)
    start = clip(where(d1 > TINY, floor(root) + 1.0, -math.inf), lo, hi)
    stop = clip(where(d1 < -TINY, -floor(-root), math.inf), lo, hi)    # ceil(root)
    whole = where(flat, where(d0 > 0, 1.0, 0.0), 1.0)
    return whole * sum_linear(d0, d1, start, stop)


def sum_max3(m_a: Num, m_b: Num, c_a: Num, c_b: Num, fl: Num, lo: Num, hi: Num) -> Num:
    """Sum over integers L in [lo, hi) of max(m_a + m_b L, c_a + c_b L, fl), for slopes >= 0.

    Where a line reaches the floor (and where the memory line crosses the compute line,
    `sum_positive_part`) is found in the coefficients' shape, and only then clipped to [lo, hi]
    (hi: the end of the contexts, the block's whole shape in a sweep): one clip, not a dozen
    operations of that size. The same floats as clipping first: ceil and floor + 1 are monotone, so
    clip(ceil(clip(x, lo - 1, hi + 1)), lo, hi) = clip(ceil(x), lo, hi); a flat line's bound is hi,
    min(inf, hi); and a line already at the floor at lo reaches it at lo, min(lo, hi) where lo <= hi
    (a range beyond its end, lo > hi, sums to the same 0 from either end). The plain-float path
    (`_sum_max3_float`) clips first: the same values."""
    def first_reach(a, b):  # the first integer L >= lo where a + b L >= fl, before the clip to hi (inf: never)
        rising = b > TINY                     # slopes below TINY count as flat (no overflow)
        k = -floor(-((fl - a) / where(rising, b, 1.0)))   # ceil
        return where(a + b * lo >= fl, lo, where(rising, maximum(k, lo), math.inf))
    reach = minimum(minimum(first_reach(m_a, m_b), first_reach(c_a, c_b)), hi)
    below = fl * maximum(reach - lo, 0.0)
    above = sum_linear(c_a, c_b, reach, hi) + sum_positive_part(m_a - c_a, m_b - c_b, reach, hi)
    return below + above


def context_pieces(window_groups: Sequence[tuple[int | None, int]], n_layers: int) -> list[tuple[float, float, float, float]]:
    """Split contexts into ranges where u(L) = sum_layers min(L, window) is linear:
    returns [(lo, hi, u0, u1)] with u(L) = u0 + u1*L for lo <= L < hi."""
    windows = sorted({w for w, _ in window_groups if w is not None})
    edges = [0.0, *map(float, windows), math.inf]
    pieces = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        u0 = float(sum(n * w for w, n in window_groups if w is not None and w <= lo))
        u1 = float(sum(n for w, n in window_groups if w is None or w > lo))
        pieces.append((lo, hi, u0, u1))
    return pieces


def effective_context(window_groups: Sequence[tuple[int | None, int]], context: Num) -> Num:
    """u(L): (layer, cached token) pairs at context L, honouring sliding windows."""
    total: Num = 0.0
    for w, n in window_groups:
        total = total + n * (context if w is None else minimum(context, float(w)))
    return total


def sum_over_context(pieces: Sequence[tuple[float, float, float, float]], m_a: Num, m_b: Num, c_a: Num, c_b: Num,
                     fl: Num, start: Num, count: Num) -> Num:
    """Sum of max(memory, compute, floor) over contexts start .. start+count-1, where memory
    and compute are affine in u(L) with slopes m_b, c_b per (layer, token) pair."""
    # all plain floats (a chain of `is`: each class is float); else sum_max3, the same value for ints
    one = m_a.__class__ is float is m_b.__class__ is c_a.__class__ is c_b.__class__ is fl.__class__ \
        is start.__class__ is count.__class__
    total: Num = 0.0
    end = start + count
    for lo, hi, u0, u1 in pieces:
        if one:     # maximum(start, lo), minimum(end, hi) on floats, without the calls
            a, b = lo if lo > start else start, hi if hi < end else end
        else:       # min(end, inf) is end: the last piece's
            a, b = maximum(start, lo), end if hi == math.inf else minimum(end, hi)
        total = total + (_sum_max3_float if one else sum_max3)(m_a + m_b * u0, m_b * u1, c_a + c_b * u0,
                                                                 c_b * u1, fl, a, b)
    return total


# The plain-float path of estimate(): sum_max3 and sum_positive_part step by step as above, with
# each helper's scalar branch written out (the same operations in the same order, so the same
# floats), without the ~40 broadcasting-helper calls they cost per estimate, and computing only
# the branch a `where` keeps. Plain floats only (left untyped: their callers pass Num, checked to
# be floats).
def _clip_float(x, lo, hi):
    x = lo if lo > x else x                 # maximum(x, lo)
    return hi if hi < x else x              # minimum(x, hi)


def _first_reach_float(a, b, fl, lo, hi):
    if a + b * lo >= fl:
        return lo
    if not b > TINY:                        # flat: never
        return hi
    t = _clip_float((fl - a) / b, lo - 1.0, hi + 1.0)
    return _clip_float(-float(math.floor(-t)), lo, hi)


def _sum_max3_float(m_a, m_b, c_a, c_b, fl, lo, hi):
    r_m, r_c = _first_reach_float(m_a, m_b, fl, lo, hi), _first_reach_float(c_a, c_b, fl, lo, hi)
    reach = r_c if r_c < r_m else r_m
    below = reach - lo
    below = fl * (0.0 if 0.0 > below else below)
    return below + (sum_linear(c_a, c_b, reach, hi) + _sum_positive_part_float(m_a - c_a, m_b - c_b, reach, hi))


def _sum_positive_part_float(d0, d1, lo, hi):
    if abs(d1) <= TINY:                     # flat: all of [lo, hi) or none of it
        return (1.0 if d0 > 0 else 0.0) * sum_linear(d0, d1, lo, hi)
    root = _clip_float(-d0 / d1, lo - 1.0, hi + 1.0)
    start = _clip_float(float(math.floor(root)) + 1.0, lo, hi) if d1 > TINY else lo
    stop = _clip_float(-float(math.floor(-root)), lo, hi) if d1 < -TINY else hi
    return sum_linear(d0, d1, start, stop)


def causal_pairs(window_groups: Sequence[tuple[int | None, int]], prompt_tokens: Num) -> Num:
    """(layer, key) pairs a causal prefill of S tokens attends to: sum_layers sum_{i<S} min(i, W)."""
    s = prompt_tokens
    total: Num = 0.0
    for w, n in window_groups:
        full = s * (s - 1.0) / 2.0
        if w is None:
            total = total + n * full
        else:
            k = minimum(s, float(w))              # positions i < W attend to i tokens
            capped = k * (k - 1.0) / 2.0 + (s - k) * w
            total = total + n * capped
    return total
