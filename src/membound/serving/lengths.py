"""Request lengths of a served workload: fixed, uniform or sampled prompt and output lengths."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError


@dataclass(frozen=True)
class Fixed:
    """Every request has `n` tokens."""

    n: int

    def __post_init__(self):
        _check_count("n", self.n)

    @property
    def mean(self) -> float:
        return float(self.n)

    @property
    def high(self) -> int:
        return self.n

    @property
    def std(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return np.full(k, self.n, dtype=np.int64)

    def quantile(self, q: float) -> float:
        return float(self.n)


@dataclass(frozen=True)
class Uniform:
    """Integers uniform in [lo, hi], both included (InferenceMAX: [0.8 L, L])."""

    lo: int
    hi: int

    def __post_init__(self):
        _check_count("lo", self.lo)
        _check_count("hi", self.hi)
        if self.lo > self.hi:
            raise InvalidInputError("Uniform.lo", self.lo, f"at most hi ({self.hi})")

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2.0

    @property
    def high(self) -> int:
        return self.hi

    @property
    def std(self) -> float:
        """Of the discrete uniform on lo..hi: sqrt(((hi - lo + 1)^2 - 1) / 12)."""
        return math.sqrt(((self.hi - self.lo + 1) ** 2 - 1) / 12.0)

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.integers(self.lo, self.hi + 1, size=k)

    def quantile(self, q: float) -> float:
        return self.lo + q * (self.hi - self.lo)


@dataclass(frozen=True)
class Samples:
    """Lengths drawn (with replacement) from observed values."""

    values: tuple

    def __post_init__(self):
        vals = tuple(self.values) if not isinstance(self.values, (str, bytes)) else ()
        if not vals:
            raise InvalidInputError("Samples.values", self.values, "a non-empty sequence of token counts")
        for v in vals:
            _check_count("Samples.values", v)
        object.__setattr__(self, "values", tuple(int(v) for v in vals))

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def high(self) -> int:
        return max(self.values)

    @property
    def std(self) -> float:
        return float(np.std(self.values))

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=k)

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.values, q))


Length = Fixed | Uniform | Samples
LONGEST_POINTS = 1024     # equally likely lengths standing for the law of a batch's longest


def longest_of(dist: Length, batch: int, points: int = LONGEST_POINTS) -> Samples:
    """The law of the longest of `batch` independent draws of `dist`, as `points` equally likely
    lengths: a static batch decodes until its longest request ends, so each of its requests holds
    the engine that long. The longest's distribution function is F(x)^batch, so its quantile q is
    dist's quantile q^(1/batch); of Samples (n equally likely values v_1 <= ... <= v_n) exactly
    v_k with k = ceil(n q^(1/batch)), taken at the midpoints q = (i + 1/2) / points."""
    for name, v in (("batch", batch), ("points", points)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise InvalidInputError(name, v, "an integer >= 1")
    q = ((np.arange(points) + 0.5) / points) ** (1.0 / batch)
    if isinstance(dist, Samples):
        ranked = np.sort(np.asarray(dist.values))
        return Samples(tuple(int(x) for x in ranked[np.ceil(len(ranked) * q).astype(int) - 1]))
    if isinstance(dist, (Fixed, Uniform)):
        return Samples(tuple(int(round(dist.quantile(float(x)))) for x in q))
    raise InvalidInputError("dist", dist, "a Fixed, Uniform or Samples length")


def _check_count(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
        raise InvalidInputError(name, v, "an integer token count >= 0")


def as_length(name: str, value, minimum: int) -> Length:
    """A number or a Fixed/Uniform/Samples, with every length >= minimum."""
    if isinstance(value, (Fixed, Uniform, Samples)):
        dist = value
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        _check_count(name, value)
        dist = Fixed(int(value))
    else:
        raise InvalidInputError(name, value, "a token count or mb.Fixed / mb.Uniform / mb.Samples")
    low = {Fixed: lambda d: d.n, Uniform: lambda d: d.lo, Samples: lambda d: min(d.values)}[type(dist)](dist)
    if low < minimum:
        raise InvalidInputError(name, value, f"lengths >= {minimum}")
    return dist
