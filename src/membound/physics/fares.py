"""Reading a (speed per user, throughput per chip) curve: the bus fare and the fast mode.

A chip-hour costs the same however many riders it carries, so the price of an output token is
proportional to 1 / t, t the output tokens per second per chip. Two points of a curve of speed
per user u and throughput per chip t against a load (a static batch, or the clients of a served
engine), a faster lane f and a standard lane s, read as

    speed-up    = u_f / u_s
    price ratio = t_s / t_f

- the bus fare: a rider at one load against the full bus (the curve's highest t, or a given load);
- the fast mode: the fast lane where u_f = speed-up x u_s, log-interpolated between the curve's
  points (u and t run close to power laws of the load), so the standard lane's throughput and the
  interpolated one give the price ratio.

One reading for both curves: `batching` (static batches, every batch evaluated exactly) and
`serving.curve` (the served steady state over client counts).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError


@dataclass(frozen=True)
class Fare:
    """Two points of a curve read against each other: `load` (the rider's, or the fast lane's)
    and `base` (the full bus, or the standard lane)."""

    load: float
    base: float
    speedup: float          # u(load) / u(base)
    price_ratio: float      # t(base) / t(load): USD per output token, load over base
    tok_s_per_user: float   # u(load)
    base_tok_s_per_user: float


@dataclass(frozen=True)
class SpeedCurve:
    """Speed per user and throughput per chip against a load (arrays of one length, load rising)."""

    load: np.ndarray
    tok_s_per_user: np.ndarray
    tok_s_per_chip: np.ndarray

    @property
    def full(self) -> float:
        """The load of the full bus: the curve's highest throughput per chip (the first, on a tie)."""
        return float(np.asarray(self.load)[int(np.argmax(self.tok_s_per_chip))])

    def _logs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.log(np.asarray(v, float)) for v in (self.load, self.tok_s_per_user,
                                                            self.tok_s_per_chip))

    def at_load(self, load: float) -> tuple[float, float]:
        """(u, t) at `load`: a point's own figures, log-interpolated between points."""
        hit = np.flatnonzero(np.asarray(self.load) == load)
        if hit.size:
            i = int(hit[0])
            return float(self.tok_s_per_user[i]), float(self.tok_s_per_chip[i])
        c, u, t = self._logs()
        x = math.log(load)
        return float(np.exp(np.interp(x, c, u))), float(np.exp(np.interp(x, c, t)))

    def at_speeds(self, tok_s_user) -> tuple[np.ndarray, np.ndarray]:
        """(load, t) where the curve reaches each speed per user (an array), log-interpolated;
        NaN off the curve."""
        c, u, t = self._logs()
        order = np.argsort(u)
        x = np.log(np.asarray(tok_s_user, float))
        on = (x >= u.min()) & (x <= u.max())
        return (np.where(on, np.exp(np.interp(x, u[order], c[order])), np.nan),
                np.where(on, np.exp(np.interp(x, u[order], t[order])), np.nan))

    def at_speed(self, tok_s_user: float) -> tuple[float, float]:
        """`at_speeds` of one speed; InvalidInputError (field `speedup`) off the curve."""
        load, t = (float(v) for v in self.at_speeds(tok_s_user))
        if math.isnan(load):
            u = np.asarray(self.tok_s_per_user, float)
            raise InvalidInputError("speedup", tok_s_user, f"a speed on the curve: {u.min():.3g} to "
                                    f"{u.max():.3g} tok/s per user (give more client counts)")
        return load, t

    def fare(self, load: float, base: float | None = None) -> Fare:
        """A rider at `load` against the full bus (or `base`)."""
        base = self.full if base is None else base
        (u, t), (u0, t0) = self.at_load(load), self.at_load(base)
        return Fare(float(load), float(base), u / u0, t0 / t, u, u0)

    def fast_lane(self, speedup: float, base: float) -> Fare:
        """The fast lane `speedup` times as fast per user as the standard lane at load `base`."""
        u0, t0 = self.at_load(base)
        load, t = self.at_speed(u0 * speedup)
        return Fare(load, float(base), float(speedup), t0 / t, u0 * speedup, u0)
