"""Latency tails of a served engine under Poisson arrivals: p99 TTFT and p99 TPOT from the physics.

The steady-state solver (`serving.solve`) gives means: the running batch b, the decode step
tau_d, the step carrying prompt tokens tau_m, the share f of steps that carry some, the prompt's
own prefill time and the mean TTFT (its open loop prices the steps Poisson arrivals make: a step
takes the prompts that came during the last, `serving.solver._State._clumped`). The tails come
from four sources, each a model here, checked against the iteration-level simulator
(tests/test_tails.py; MLPerf-like workloads at 30-85% load: p99s within -4..-23%):

1. **The load.** The decoding batch under Poisson arrivals is a processor-sharing queue whose
   completion rate mu(n) = n / (D tau(n)) flattens as the step grows with the batch, so near
   saturation the batch wanders far above its mean (`occupancy`, a birth-death chain: its law,
   the share of it a request sees, and its correlation time). A request's TPOT is the step's mean
   over its own D tau seconds: the load's spread shrunk by `window_share`. An arrival finds the
   load at its time average; the TTFT mixes the steps and own prefills of the loads it finds.
2. **Prompts per step.** A prompt waits for the running step to end (uniform over it) and runs in
   the next with the prompts that came with it, Poisson given the step's length; the steps'
   prompts form a branching chain (a long step gathers more prompts, which make the next long:
   `step_chain`), whose law sets both the step an arrival lands in and the others in its own.
3. **Queueing for prefill room.** Where the token budget binds, a prompt of S tokens takes
   S / avail of a step's prefill room: an M/G/1 queue of service S x step / avail, whose waiting
   time has an atom 1 - rho at zero and the Cramer-Lundberg tail P(W > t) ~ C exp(-theta t),
   theta > 0 the root of lambda (M_s(theta) - 1) = theta and C = (1 - rho) / (lambda M_s'(theta) - 1),
   M_s the moment generating function of the service over the prompt lengths (Asmussen, "Applied
   Probability and Queues", 2nd ed., XIII.5; M/D/1: lambda (e^{theta D} - 1) = theta).
4. **Prefill/decode interference and the spread of lengths.** A request's D decode steps carry
   K ~ Poisson(D f) prefill chunks: TPOT = tau + (tau_m - tau_d)(K / D - f), short outputs spread
   most; prompts of the length distribution take their own prefill time in proportion.

The TTFT distribution is held at the solver's mean (whose extra terms, host time, scheduler polls,
batch waits, shift it whole); the TPOT's mean is the occupancy's (above the solver's near saturation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np

from .lengths import Length, Samples
from .scheduler import Scheduler, filled
from .solver import Steady, open_loop_rates
from .step import StepModel
from statistics import NormalDist

# points of a length distribution the tails integrate over (Samples keep theirs up to this many)
LENGTH_POINTS = 64
# Poisson means of prefill chunks per request summed term by term in the TPOT tail (a normal beyond)
POISSON_TERMS = 40.0
# decoding counts at which the occupancy model reads the engine's completion rate (interpolated between)
OCCUPANCY_POINTS = 96
# equally likely decoding counts that stand for the occupancy in the TPOT mixture (and in the TTFT's)
LOAD_POINTS = 24
TTFT_LOAD_POINTS = 8
# prompts-per-step counts of the prefill chain (the last holds the rest) and the rounds that find its law
CHAIN_POINTS = 64
CHAIN_ROUNDS = 60


@dataclass(frozen=True)
class Tails:
    """p50/p90/p99 of TTFT and TPOT (seconds) at one arrival rate, and the prefill queue's load."""

    ttft: tuple[float, float, float]
    tpot: tuple[float, float, float]
    rho: float          # load of the prefill capacity (0: idle, 1: saturated)
    e2e_p99: float = math.nan   # a bound on the p99 end-to-end time: p99 TTFT + (p99 output - 1) x p99 TPOT


@dataclass(frozen=True)
class Occupancy:
    """The decoding batch under Poisson arrivals as a birth-death process (see `occupancy`)."""

    n: np.ndarray          # decoding counts 1 .. cap
    seen: np.ndarray       # P(a decoding request shares the batch with n - 1 others): size-biased
    tau: np.ndarray        # seconds per output token at n
    corr_s: float          # correlation time of the step (integrated autocorrelation / variance)
    queued: float          # mean requests waiting for a place in the batch (beyond the cap)
    arrive: np.ndarray     # P(n decoding when a request arrives), n = 0 .. cap (Poisson arrivals see time averages)


def occupancy(sm: StepModel, sched: Scheduler, rate: float, prompt: float, output: float, cap: float,
              beams: int = 1) -> Occupancy:
    """The decoding batch's distribution under Poisson arrivals at `rate`: the engine is a
    processor-sharing server whose completion rate with n sequences decoding is
    mu(n) = n / (D tau(n)), tau(n) the open loop's step with n - 1 others beside a sequence
    (`serving.solver.open_loop_rates`, the prefill of the prompts it completes included), and
    beyond the cap the batch stays full and the rest wait. A processor-sharing queue with a
    load-dependent rate is a symmetric queue, so its stationary distribution does not depend on
    the output lengths' law beyond their mean (Kelly, "Reversibility and Stochastic Networks",
    3.3): P(n) ~ prod_{k<=n} rate / mu(k). Near saturation mu flattens (the step grows with the
    batch) and the batch wanders far above the solver's mean b, which the TPOT tail sees. A
    request in the batch sees it size-biased (n P(n)). The step's
    correlation time is that of a birth-death chain: int Cov(tau(0), tau(t)) dt =
    sum_n F(n)^2 / (P(n) rate), F(n) = sum_{k<=n} P(k) (tau(k) - mean) (Whitt, "Stochastic-Process
    Limits", or any text on the asymptotic variance of birth-death chains). n counts requests:
    under beam search each decodes `beams` sequences (cap counts sequences)."""
    top = max(int(math.floor(cap / beams)), 1)
    grid = np.unique(np.round(np.geomspace(1.0, float(top), OCCUPANCY_POINTS)))
    # the solver's figures at b are those a decoding sequence sees beside b others: n in the batch
    tau_g = open_loop_rates(sm, sched, prompt, output, beams * grid - 1.0, beams)[0]
    n = np.arange(1, top + 1, dtype=float)
    tau = np.interp(n, grid, tau_g)
    p = birth_death(rate, n / max(output - 1.0, 1e-9) / np.maximum(tau, 1e-300))    # mu(n) = n / (D tau(n))
    if p is None:                  # the full batch completes fewer than arrive: the queue never drains
        return Occupancy(n, np.eye(1, top, top - 1)[0], tau, math.inf, math.inf, np.eye(1, top + 1, top)[0])
    extra = p.size - top - 1
    tau_all = np.concatenate([[tau[0]], tau, np.full(extra, tau[-1])])
    corr = correlation_time(p, tau_all, rate)
    dec = np.concatenate([p[1:top], [float(np.sum(p[top:]))]])     # P(n decoding), n = 1 .. top
    seen = n * dec
    seen /= max(float(np.sum(seen)), 1e-300)
    queued = float(np.sum(p[top + 1:] * np.arange(1.0, extra + 1.0)))
    arrive = np.concatenate([p[:top], [float(np.sum(p[top:]))]])
    return Occupancy(n, seen, tau, corr, queued, arrive)


def birth_death(rate: float, mu: np.ndarray) -> np.ndarray | None:
    """P(n), n = 0, 1, ..., of a birth-death chain with births at `rate` and deaths at mu[n - 1] in
    state n (n = 1 .. len(mu)), mu[-1] beyond (a queue behind a full batch: geometric, ratio
    rate / mu[-1], kept up to a ratio^k of e^-40): P(n) ~ prod_{k<=n} rate / mu(k). None where
    rate >= mu[-1] (the chain has no stationary law)."""
    mu = np.asarray(mu, float)
    log_r = math.log(rate) - np.log(np.maximum(mu, 1e-300))
    if log_r[-1] >= 0.0:
        return None
    extra = int(min(math.ceil(40.0 / -float(log_r[-1])), 100 * mu.size))
    log_p = np.concatenate([[0.0], np.cumsum(log_r), float(np.sum(log_r)) + log_r[-1] * np.arange(1.0, extra + 1.0)])
    p = np.exp(log_p - float(np.max(log_p)))
    return p / float(np.sum(p))


def correlation_time(p: np.ndarray, f: np.ndarray, rate: float) -> float:
    """int_0^inf Corr(f(X_0), f(X_t)) dt of a stationary birth-death chain with law p over 0, 1, ...
    and birth rate `rate` (seconds): sum_n F(n)^2 / (p(n) rate) / Var f, F(n) = sum_{k<=n} p(k)
    (f(k) - mean) (F summed from the far end past the mean, where the two sums cancel). 0 where f
    does not vary."""
    p, f = np.asarray(p, float), np.asarray(f, float)
    mean = float(np.sum(p * f))
    var = float(np.sum(p * (f - mean) ** 2))
    if var <= 0.0:
        return 0.0
    g = p * (f - mean)
    lo = np.cumsum(g)
    hi = -np.concatenate([np.cumsum(g[::-1])[::-1][1:], [0.0]])
    cdf = np.cumsum(p)
    F = np.where(cdf < 0.5, lo, hi)
    ok = p > 1e-250
    return float(np.sum(F[ok] ** 2 / (p[ok] * rate))) / var


def window_share(window: np.ndarray, corr: float) -> np.ndarray:
    """The variance of a stationary process's mean over a window, as a share of its variance, for
    an exponential autocorrelation of time constant `corr`: 2 (x - 1 + e^-x) / x^2, x = window / corr
    (1 for a window far shorter than the correlation, 2 corr / window for one far longer)."""
    x = np.asarray(window, float) / max(corr, 1e-300)
    small = x < 1e-4
    xs = np.where(small, 1.0, x)
    return np.where(small, 1.0 - x / 3.0, 2.0 * (xs - 1.0 + np.exp(-xs)) / xs ** 2)


def points(length: Length, n: int = LENGTH_POINTS) -> np.ndarray:
    """Equally likely values standing for a length distribution: its quantiles at the midpoints
    of n equal slices (all values of a short Samples)."""
    if isinstance(length, Samples) and len(length.values) <= n:
        return np.asarray(length.values, float)
    q = (np.arange(n) + 0.5) / n
    return np.array([length.quantile(float(v)) for v in q], float)


def mg1_wait_tail(rate: float, service: np.ndarray) -> tuple[float, float, float]:
    """(rho, theta, C) of an M/G/1 queue's waiting time, P(W > t) ~ C exp(-theta t) for t > 0
    (P(W > 0) = rho): Poisson arrivals at `rate`, service times equally likely among `service`
    (seconds). theta = inf where the queue never waits (rho = 0); ValueError where rho >= 1."""
    s = np.asarray(service, float)
    rho = rate * float(np.mean(s))
    if rho <= 0.0:
        return 0.0, math.inf, 0.0
    if rho >= 1.0:
        raise ValueError(f"load {rho:.4g} >= 1: the queue grows without end")
    # g(theta) = lambda (M(theta) - 1) - theta is 0 at 0, convex, with one root > 0; in logs,
    # h(theta) = log lambda + log M(theta) - log(lambda + theta) has the same root and never overflows
    # (a capped exponential made g negative for ever at tiny rates: the search doubled theta without end)
    log_rate, log_n = math.log(rate), math.log(s.size)

    def h(th: float) -> float:
        return log_rate + log_sum_exp(th * s) - log_n - math.log(rate + th)
    lo, hi = 0.0, 1.0 / float(np.max(s))
    while h(hi) < 0.0:          # log M grows like theta x max(s), log(lambda + theta) like log theta: ends
        lo, hi = hi, 2.0 * hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        new = (mid, hi) if h(mid) < 0.0 else (lo, mid)
        if new == (lo, hi):     # adjacent floats: every later round would leave them as they are
            break
        lo, hi = new
    theta = 0.5 * (lo + hi)
    # g'(theta) = lambda M'(theta) - 1, M'(theta) = mean(s e^(theta s)); in logs while it can overflow
    log_dm = log_rate + log_sum_exp(theta * s, s) - log_n
    slope = math.exp(log_dm) - 1.0 if log_dm < 700.0 else math.inf
    c = (1.0 - rho) / slope if slope > 0.0 else rho
    return rho, theta, c


def log_sum_exp(a: np.ndarray, b: np.ndarray | None = None) -> float:
    """log(sum(b e^a)) of 1-D arrays (b > 0, None: ones), as scipy.special.logsumexp computes it (scipy
    1.15+, the terms at the maximum kept apart for precision: log1p(sum of the rest / m) + log m + max,
    m the weight at the maximum), bit for bit, without its array-API dispatch, which cost
    mg1_wait_tail's root search about 0.25 ms a round (tests/test_tails.py checks the agreement)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = a if b is None else np.where(b == 0, -np.inf, a)
        x_max = np.max(x, keepdims=True)
        at_max = x == x_max
        m = np.sum(at_max.astype(float) if b is None else b * at_max, keepdims=True)
        shifted = np.exp(np.where(at_max, -np.inf, x) - x_max)
        rest = np.sum(shifted if b is None else b * shifted, keepdims=True)
        if rest[0] != 0.0:
            rest = rest / m
        out = float((np.log1p(rest) + np.log(m) + x_max)[0])
        if math.isfinite(out):
            return out
        return float(np.log(np.sum(np.exp(a) if b is None else b * np.exp(a))))  # infinite: the direct sum's log


def _wait_exceeds(t: np.ndarray, rho: float, theta: float, c: float) -> np.ndarray:
    """P(W > t) of `mg1_wait_tail`'s queue, 1 for t < 0."""
    if rho <= 0.0:
        return np.where(t < 0.0, 1.0, 0.0)
    tail = np.minimum(rho, c * np.exp(-theta * np.maximum(t, 0.0)))
    return np.where(t < 0.0, 1.0, tail)


def _mean_wait(rho: float, theta: float, c: float) -> float:
    """int_0^inf min(rho, C exp(-theta t)) dt: rho t0 + rho / theta past t0 = ln(C / rho) / theta."""
    if rho <= 0.0:
        return 0.0
    if c <= rho:
        return c / theta
    return rho * (math.log(c / rho) + 1.0) / theta


def _normal_sf(z: np.ndarray) -> np.ndarray:
    """P(Z > z) of a standard normal, elementwise: erfc(z / sqrt 2) / 2 by Abramowitz & Stegun
    7.1.26 (absolute error below 1.5e-7 in erf), vectorised."""
    x = np.asarray(z, float) / math.sqrt(2.0)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erfc_a = poly * np.exp(-a * a)
    return np.where(x >= 0.0, 0.5 * erfc_a, 1.0 - 0.5 * erfc_a)


def _quantiles(exceeds, qs, hi: float) -> np.ndarray:
    """The t where the decreasing `exceeds(t)` falls to 1 - q, for each q of `qs` (bisection on
    [0, hi], hi grown): the searches run side by side, `exceeds` taking one t per q (an array)."""
    target = 1.0 - np.asarray(qs, float)
    top = np.full(target.size, float(hi))
    while (grow := exceeds(top) > target).any():
        top = np.where(grow, 2.0 * top, top)
    lo = np.zeros(target.size)
    for _ in range(60):
        mid = 0.5 * (lo + top)
        up = exceeds(mid) > target
        lo, top = np.where(up, mid, lo), np.where(up, top, mid)
    return 0.5 * (lo + top)


def step_chain(rate: float, d0: float, per_prompt: float, rounds: int = CHAIN_ROUNDS) -> np.ndarray:
    """The stationary law of the prompts K a step takes under Poisson arrivals: the prompts that
    came during the step before, K' ~ Poisson(rate (d0 + per_prompt K)) (a step of K prompts lasts
    its decodes' d0 and their prefill work), a branching process with immigration whose offspring
    mean is the prefill load r = rate x per_prompt < 1. From K ~ Poisson(rate d0 / (1 - r)) (the
    stationary mean), `rounds` rounds of the map; K = 0 .. len - 1, the last cell holding the rest."""
    r = rate * per_prompt
    mean = rate * d0 / max(1.0 - r, 1e-9)
    kmax = int(min(math.ceil(mean + 12.0 * math.sqrt(mean / max(1.0 - r, 1e-9)) + 12.0), CHAIN_POINTS))
    k = np.arange(kmax + 1, dtype=float)
    logf = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(k[1:], 1.0)))])

    def pois(m):            # rows: Poisson(m_i) over k, the last cell the rest
        m = np.maximum(np.asarray(m, float), 1e-300)
        pm = np.exp(k[None, :] * np.log(m)[:, None] - m[:, None] - logf[None, :])
        pm[:, -1] = np.maximum(1.0 - np.sum(pm[:, :-1], axis=1), 0.0)
        return pm
    p = pois(np.array([mean]))[0]
    step = pois(rate * (d0 + per_prompt * k))           # row K: the law of the next step's prompts
    for _ in range(rounds):
        p = p @ step
    return p / float(np.sum(p))


def ttft_quantiles(rate: float, steps: tuple[float, float, float], avail: float, own_s: float, mean_ttft: float,
                   prompts: np.ndarray, qs=(0.5, 0.9, 0.99), states: np.ndarray | None = None
                   ) -> tuple[tuple[float, ...], float]:
    """TTFT quantiles (seconds) and the prefill load rho. steps: (mean step, decode step, step
    carrying prompt tokens) in seconds. A prompt's prefill work is the steps' time beyond their
    decodes shared by the rate x step prompts a step takes, per_prompt = (mean - decode) /
    (rate x mean) (compute is conserved). It arrives inside a step of K prompts (steps sampled by
    their length, K from `step_chain`), waits for its end (uniform over it), then runs in the next
    step with the J ~ Poisson(rate x that step) prompts that came with it: its own prefill (own_s at
    the mean prompt, in proportion to its length) spread by (J - E[J]) per_prompt, the mean held.
    Where the budget binds, it first waits for prefill room: an M/G/1 queue of service
    S x mean step / avail. Shifted so that the mean is the solver's `mean_ttft` (never below the
    sum of those parts). `states`: rows of (mean step, decode step, carrying step, own prefill) at
    the loads an arrival finds (equally likely; the occupancy's), which the TTFT mixes; None: the
    one of `steps` and `own_s`."""
    step, step_d, _ = steps
    S = np.asarray(prompts, float)
    mean_S = max(float(np.mean(S)), 1e-30)
    per_prompt = max(step - step_d, 0.0) / max(rate * step, 1e-30)
    room = S * step / max(avail, 1e-30)
    load = rate * max(per_prompt, float(np.mean(room)))
    if load >= 1.0:        # the prompts' work outgrows the engine: no finite tail
        return tuple(math.inf for _ in qs), load
    rho, theta, c = mg1_wait_tail(rate, room)
    st = np.array([[step, step_d, 0.0, own_s]]) if states is None else np.asarray(states, float)
    Sq = S if S.size <= 16 else np.quantile(S, (np.arange(16) + 0.5) / 16)
    u = (np.arange(4) + 0.5) / 4.0
    bases, weights, parts = [], [], []
    for step_j, d_j, _, own_j in st:
        pp = max(step_j - d_j, 0.0) / max(rate * step_j, 1e-30)
        if rate * pp >= 1.0:
            return tuple(math.inf for _ in qs), rate * pp
        p = step_chain(rate, d_j, pp)
        kk = np.arange(p.size, dtype=float)
        dur = d_j + pp * kk
        q = p * dur / max(float(np.sum(p * dur)), 1e-300)       # the step an arrival lands in
        m = rate * dur                                          # prompts that come with it
        jmax = int(math.ceil(float(np.max(m)) + 8.0 * math.sqrt(float(np.max(m))) + 8.0))
        j = np.arange(jmax + 1, dtype=float)
        pj = np.exp(j[None, :] * np.log(np.maximum(m, 1e-300))[:, None] - m[:, None]
                    - np.concatenate([[0.0], np.cumsum(np.log(np.maximum(j[1:], 1.0)))])[None, :])
        ej = float(np.sum(q * m))
        wait = u[None, :, None] * dur[:, None, None] + (j[None, None, :] - ej) * pp     # (K, U, J)
        wt = np.broadcast_to(q[:, None, None] * pj[:, None, :] / u.size, wait.shape)
        wait, wt = _compress(wait.ravel(), wt.ravel(), 64)
        own = own_j * Sq / mean_S
        bases.append((wait[:, None] + own[None, :]).ravel())
        weights.append(np.full(wait.size * own.size, 1.0 / (wait.size * own.size)))
        parts.append(0.5 * float(np.sum(q * dur)) + own_j)
    base, wts = _compress(np.concatenate(bases), np.concatenate(weights) / len(st))
    mean_wait = _mean_wait(rho, theta, c)
    shift = max(mean_ttft - (float(np.mean(parts)) + mean_wait), 0.0)

    def exceeds(t: np.ndarray) -> np.ndarray:
        return np.sum(_wait_exceeds(t[:, None] - base[None, :], rho, theta, c) * wts, axis=1)
    top = float(np.max(base)) + (math.log(100.0 * max(c, 1e-300)) / theta if rho > 0.0 else 0.0)
    return tuple(shift + float(x) for x in _quantiles(exceeds, qs, max(top, 1e-9))), load


def _compress(values: np.ndarray, weights: np.ndarray, n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """A discrete distribution as n equally likely points (its quantiles at the midpoints of n equal
    slices), so that a tail built on it costs n evaluations."""
    order = np.argsort(values)
    v, cdf = values[order], np.cumsum(weights[order])
    cdf /= cdf[-1]
    idx = np.minimum(np.searchsorted(cdf, (np.arange(n) + 0.5) / n), v.size - 1)
    return v[idx], np.full(n, 1.0 / n)


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs, repeats: int = 1) -> tuple[float, ...]:
    """Quantiles of a discrete distribution: the smallest value whose cumulative weight reaches q.
    repeats: the distribution is `repeats` copies of (values, weights) end to end (np.tile), taken
    without sorting the copies: the same bits as the tiled arrays' quantiles (`_Tiled`)."""
    v, w = np.ravel(values), np.ravel(weights)
    order = np.argsort(v, kind="stable")
    vs, ws = v[order], w[order]
    tiled = _Tiled(vs, repeats) if repeats > 1 else None
    cdf = np.cumsum(ws if tiled is None else tiled.spread(ws))
    cdf /= cdf[-1]
    at = np.minimum(np.searchsorted(cdf, np.asarray(qs, float) - 1e-12), cdf.size - 1)
    return tuple(float(x) for x in vs[at if tiled is None else tiled.source(at)])


class _Tiled:
    """The stable sort of `repeats` copies of an array end to end, from the stable sort of one copy
    (`sorted_values`): equal values keep the order of their copies, so a run of m equal values
    (NaNs together, as argsort puts them) starting at s comes back as its m positions in turn,
    `repeats` times over: copy r's element p of the run lands at p + s (repeats - 1) + r m."""

    def __init__(self, sorted_values: np.ndarray, repeats: int):
        s = sorted_values
        same = (s[1:] == s[:-1]) | (np.isnan(s[1:]) & np.isnan(s[:-1]))
        self.starts = np.flatnonzero(np.concatenate(([True], ~same)))
        self.sizes = np.diff(np.append(self.starts, s.size))
        self.repeats = repeats

    def spread(self, sorted_weights: np.ndarray) -> np.ndarray:
        """The weights of the tiled copies in their stable sorted order."""
        n, r = sorted_weights.size, self.repeats
        start, size = np.repeat(self.starts, self.sizes), np.repeat(self.sizes, self.sizes)
        dest = (np.arange(n) + start * (r - 1))[None, :] + np.arange(r)[:, None] * size[None, :]
        out = np.empty(n * r)
        out[dest] = sorted_weights[None, :]
        return out

    def source(self, at: np.ndarray) -> np.ndarray:
        """The positions in one sorted copy of positions `at` in the tiled sorted order."""
        g = np.searchsorted(self.starts * self.repeats, at, side="right") - 1
        s = self.starts[g]
        return s + (at - s * self.repeats) % self.sizes[g]


def _repeats(D: np.ndarray) -> int:
    """How many rows one row of the TPOT mixture stands for: each row is a function of its D alone,
    so equal lengths (a fixed output) give equal rows, sorted once and counted D.size times
    (weighted_quantiles(..., repeats): the same bits); 1 where the lengths differ."""
    return D.size if D.size > 1 and bool(np.all(D == D[0])) else 1


def tpot_quantiles(tau: float, tau_d: float, tau_m: float, f: float, mixed: bool, outputs: np.ndarray,
                   load: np.ndarray | None = None, corr: float = 0.0, qs=(0.5, 0.9, 0.99)) -> tuple[float, ...]:
    """TPOT quantiles (seconds per token). A request of T output tokens runs D = T - 1 steps;
    the prefill chunks that land in them are K ~ Poisson(D f) (prompts arrive as a Poisson stream),
    each adding `extra` (tau_m - tau_d where steps mix, tau_m where a prefill step runs apart):
    TPOT = tau - extra f + extra K / D. The load it sees: `load`, equally likely seconds per token
    of the step as a decoding request finds it (the occupancy's), whose mean replaces tau; a request
    sees their mean over its own D tau seconds, whose spread about the mean is the load's shrunk by
    sqrt(window_share(D tau, corr)). The quantiles of the mixture over the output lengths `outputs`
    (K term by term up to a Poisson mean of POISSON_TERMS; beyond, a normal at 16 equally likely
    points)."""
    D = np.maximum(np.asarray(outputs, float) - 1.0, 1.0)
    repeats = _repeats(D)
    D = D[:1] if repeats > 1 else D
    extra = (tau_m - tau_d) if mixed else tau_m
    ff = min(max(f, 0.0), 1.0)
    if load is None or len(load) == 0:
        dev = np.zeros(1)
    else:
        tau = float(np.mean(load))
        dev = np.asarray(load, float) - tau
    shrink = np.sqrt(window_share(D * tau, corr)) if corr > 0.0 else np.ones(D.size)
    base = tau + shrink[:, None] * dev[None, :]                        # (outputs, load points)
    mu = D * ff
    vals, wts = [], []
    small = mu <= POISSON_TERMS
    if small.any():
        ms, Ds = mu[small], D[small]
        kmax = int(math.ceil(float(np.max(ms)) + 10.0 * math.sqrt(float(np.max(ms))) + 15.0))
        k = np.arange(kmax + 1, dtype=float)
        logk = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(k[1:], 1.0)))])
        pmf = np.exp(k[None, :] * np.log(np.maximum(ms[:, None], 1e-300)) - ms[:, None] - logk[None, :])
        step = extra * (k[None, :] / Ds[:, None] - ff)                  # (outputs, K)
        vals.append((base[small][:, :, None] + step[:, None, :]).ravel())
        wts.append(np.broadcast_to(pmf[:, None, :], (ms.size, dev.size, k.size)).ravel())
    if (~small).any():
        z = np.array([NormalDist().inv_cdf((i + 0.5) / 16.0) for i in range(16)])
        ml, Dl = mu[~small], D[~small]
        step = extra * np.sqrt(ml)[:, None] / Dl[:, None] * z[None, :]
        vals.append((base[~small][:, :, None] + step[:, None, :]).ravel())
        wts.append(np.full(ml.size * dev.size * z.size, 1.0 / z.size))
    v, w = (vals[0], wts[0]) if len(vals) == 1 else (np.concatenate(vals), np.concatenate(wts))
    keep = w > 1e-14
    if not keep.all():
        v, w = v[keep], w[keep]
    return tuple(max(x, 0.0) for x in weighted_quantiles(v, w, qs, repeats))


def tails(sm: StepModel, sched: Scheduler, st: Steady, rate: float, prompt: Length, output: Length,
          i: int = 0, beams: int = 1) -> Tails:
    """The TTFT and TPOT quantiles (p50, p90, p99) of element i of an open-loop steady state `st`
    at `rate` requests/s (see the module docstring); beams: as the solver's (solve(beams=...))."""
    b, tau, tau_d, tau_m, f, ttft, pre = (float(np.ravel(v)[i]) for v in (st.running, st.tau, st.tau_d, st.tau_m, st.mixed_share,
                                                                         st.ttft, st.prefill))
    step = tau * sm.tokens_per_step
    budget = float(filled(sched.token_budget))
    avail = max(budget - (b * sm.positions if filled(sched.mixed_steps) else 0.0), 1.0)
    own = pre + sm.host_token_s * prompt.mean
    occ = occupancy(sm, sched, rate, prompt.mean, output.mean, st.cap, beams)
    # requests that wait for a place in a full batch wait for completions: Little's law on the queue
    ttft += occ.queued / rate if math.isfinite(occ.queued) else math.inf
    # the loads arrivals find: equally likely decoding counts, the steps and own prefill there
    cdf_a = np.cumsum(occ.arrive)
    found = np.searchsorted(cdf_a / cdf_a[-1], (np.arange(TTFT_LOAD_POINTS) + 0.5) / TTFT_LOAD_POINTS).astype(float)
    tau_n, _, d_n, m_n, pre_n = open_loop_rates(sm, sched, prompt.mean, output.mean,
                                                np.minimum(beams * found, st.cap), beams)
    tps = sm.tokens_per_step
    host = sm.host_token_s * prompt.mean
    split = not filled(sched.mixed_steps)
    states = np.column_stack([tau_n * tps, d_n, m_n + (d_n if split else 0.0), pre_n + host])
    t_q, rho = ttft_quantiles(rate, (step, tau_d, tau_m + (tau_d if split else 0.0)), avail, own,
                              ttft, points(prompt), states=states)
    cdf = np.cumsum(occ.seen)
    pick = np.searchsorted(cdf / cdf[-1], (np.arange(LOAD_POINTS) + 0.5) / LOAD_POINTS)
    load = occ.tau[np.minimum(pick, occ.n.size - 1)]
    p_q = tpot_quantiles(tau, tau_d / sm.tokens_per_step, tau_m / sm.tokens_per_step, f, bool(filled(sched.mixed_steps)),
                         points(output), load=load, corr=occ.corr_s if math.isfinite(occ.corr_s) else 0.0)
    e2e = t_q[2] + (output.quantile(0.99) - 1.0) * p_q[2]
    return Tails((t_q[0], t_q[1], t_q[2]), (p_q[0], p_q[1], p_q[2]), rho, e2e)
