"""Latency tails of a served engine under Poisson arrivals: p99 TTFT and p99 TPOT from the physics.

The steady-state solver (`serving.solve`) gives means: the running batch b, the decode step
tau_d, the step carrying a prefill chunk tau_m, the share f of steps that carry one, the prompt's
own prefill time and the mean TTFT. The tails come from three sources, each a model here:

1. **Queueing of prompts.** Each step has room for `avail = token_budget - b x positions` prompt
   tokens beside the decodes; a prompt of S tokens takes S / avail of a step's prefill room, so
   the prefill capacity is a server whose service time is s(S) = S x step / avail (its load
   rho = lambda E[S] step / avail is the solver's). With Poisson arrivals this is an M/G/1 queue;
   its waiting time has an atom 1 - rho at zero and the Cramer-Lundberg tail
   P(W > t) ~ C exp(-theta t), theta > 0 the root of lambda (M_s(theta) - 1) = theta and
   C = (1 - rho) / (lambda M_s'(theta) - 1), M_s the moment generating function of s over the
   prompt lengths (Asmussen, "Applied Probability and Queues", 2nd ed., XIII.5; for a fixed
   service D, M/D/1, theta solves lambda (e^{theta D} - 1) = theta).
2. **Prefill/decode interference inside steps.** A request's D decode steps carry a prefill chunk
   each with probability f (tau_m instead of tau_d): its TPOT is tau_d + (tau_m - tau_d) K / D,
   K ~ Binomial(D, f), variance (tau_m - tau_d)^2 f (1 - f) / D: short outputs spread most.
3. **The spread of lengths and of the load.** Prompts of the length distribution take their own
   prefill time (scaled by length, as serve() scales its TTFT percentiles); the decoding batch
   under Poisson arrivals is the occupancy of an M/G/infinity system, Poisson with mean b, and
   a request sees its time-average over its own residence R; for a residence of fixed length the
   occupancy's autocorrelation is 1 - |t| / R, so that average has variance
   b (2 / R^2) int_0^R (R - t)(1 - t / R) dt = 2 b / 3. The step's slope in b turns it into
   seconds per token.

The p99 of TTFT is that of (residual of the running step, uniform over one step) + W + the
prompt's own prefill, its mean held at the solver's (whose extra terms, host time, scheduler
polls, batch waits, shift the whole distribution). The p99 of TPOT is that of the mixture over
output lengths of normals with mean tau and the variances of 2 and 3.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
from scipy.special import logsumexp

from .serving.lengths import Length, Samples
from .serving.scheduler import Scheduler, _set
from .serving.solver import Steady
from .serving.step import StepModel

# points of a length distribution the tails integrate over (Samples keep theirs up to this many)
LENGTH_POINTS = 64
# Poisson means of prefill chunks per request summed term by term in the TPOT tail (a normal beyond)
POISSON_TERMS = 40.0


@dataclass(frozen=True)
class Tails:
    """p50/p90/p99 of TTFT and TPOT (seconds) at one arrival rate, and the prefill queue's load."""

    ttft: tuple[float, float, float]
    tpot: tuple[float, float, float]
    rho: float          # load of the prefill capacity (0: idle, 1: saturated)


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
        return log_rate + float(logsumexp(th * s)) - log_n - math.log(rate + th)
    lo, hi = 0.0, 1.0 / float(np.max(s))
    while h(hi) < 0.0:          # log M grows like theta x max(s), log(lambda + theta) like log theta: ends
        lo, hi = hi, 2.0 * hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if h(mid) < 0.0 else (lo, mid)
    theta = 0.5 * (lo + hi)
    # g'(theta) = lambda M'(theta) - 1, M'(theta) = mean(s e^(theta s)); in logs while it can overflow
    log_dm = log_rate + float(logsumexp(theta * s, b=s)) - log_n
    slope = math.exp(log_dm) - 1.0 if log_dm < 700.0 else math.inf
    c = (1.0 - rho) / slope if slope > 0.0 else rho
    return rho, theta, c


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


def _quantile(exceeds, q: float, hi: float) -> float:
    """The t where the decreasing `exceeds(t)` falls to 1 - q (bisection on [0, hi], hi grown)."""
    target = 1.0 - q
    while exceeds(hi) > target:
        hi *= 2.0
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if exceeds(mid) > target else (lo, mid)
    return 0.5 * (lo + hi)


def ttft_quantiles(rate: float, steps: tuple[float, float, float], avail: float, own_s: float, mean_ttft: float,
                   prompts: np.ndarray, qs=(0.5, 0.9, 0.99)) -> tuple[tuple[float, ...], float]:
    """TTFT quantiles (seconds) and the prefill load rho. steps: (mean step, decode step, step
    carrying a prefill chunk) in seconds, the share f of steps that carry one being
    (mean - decode) / (prefill - decode). A prompt arrives inside a step and waits for its end:
    inside a prefill step with probability f x prefill / mean (steps are sampled by their length),
    the residual uniform over that step, else over a decode step; then the M/G/1 wait for prefill
    room (service: the prompt's prefill seconds beyond a decode step, (prefill - decode) S / mean S,
    or S x mean step / avail where the budget binds first); then its own prefill (own_s at the mean prompt, in
    proportion to its length). Shifted so that the mean is the solver's `mean_ttft` (never below
    the sum of those parts)."""
    step, step_d, step_m = steps
    S = np.asarray(prompts, float)
    mean_S = max(float(np.mean(S)), 1e-30)
    # the prefill work a prompt brings (compute is conserved: k prompts in a step take k times
    # the chunk's extra seconds), or its share of the steps' prefill room, whichever binds
    work = np.maximum((step_m - step_d) * S / mean_S, S * step / max(avail, 1e-30))
    if rate * float(np.mean(work)) >= 1.0:        # the prompts' work outgrows the engine: no finite tail
        return tuple(math.inf for _ in qs), rate * float(np.mean(work))
    rho, theta, c = mg1_wait_tail(rate, work)
    own = own_s * S / mean_S
    f = min(max((step - step_d) / max(step_m - step_d, 1e-30), 0.0), 1.0) if step_m > step_d else 0.0
    in_m = f * step_m / max(step, 1e-30)
    grid = (np.arange(8) + 0.5) / 8.0
    u = np.concatenate([grid * step_m, grid * step_d])       # the residual of the running step
    w = np.concatenate([np.full(8, in_m / 8.0), np.full(8, (1.0 - in_m) / 8.0)])
    mean_residual = 0.5 * (in_m * step_m + (1.0 - in_m) * step_d)
    mean_wait = _mean_wait(rho, theta, c)
    shift = max(mean_ttft - (mean_residual + mean_wait + own_s), 0.0)
    base = own[:, None] + u[None, :]

    def exceeds(t: float) -> float:
        return float(np.sum(np.mean(_wait_exceeds(t - base, rho, theta, c), axis=0) * w))
    top = step_m + step_d + float(np.max(own)) + (math.log(100.0 * max(c, 1e-300)) / theta if rho > 0.0 else 0.0)
    return tuple(shift + _quantile(exceeds, q, max(top, 1e-9)) for q in qs), rho


def tpot_quantiles(tau: float, tau_d: float, tau_m: float, f: float, mixed: bool, b: float, slope: float,
                   outputs: np.ndarray, qs=(0.5, 0.9, 0.99)) -> tuple[float, ...]:
    """TPOT quantiles (seconds per token). A request of T output tokens runs D = T - 1 steps;
    the prefill chunks that land in them are K ~ Poisson(D f) (prompts arrive as a Poisson stream),
    each adding `extra` (tau_m - tau_d where steps mix, tau_m where a prefill step runs apart):
    TPOT = tau - extra f + extra K / D, plus a normal of variance slope^2 2 b / 3 (the load it
    sees; slope: seconds per token per decoding sequence). The quantile of the mixture over the
    output lengths `outputs` (K summed term by term up to a Poisson mean of POISSON_TERMS, a
    normal of the same variance beyond)."""
    D = np.maximum(np.asarray(outputs, float) - 1.0, 1.0)
    extra = (tau_m - tau_d) if mixed else tau_m
    ff = min(max(f, 0.0), 1.0)
    sd_b = max(math.sqrt(slope ** 2 * 2.0 * max(b, 0.0) / 3.0), 1e-12 * max(tau, 1e-30))
    mu = D * ff
    levels, weights, sds = [], [], []
    small = mu <= POISSON_TERMS
    if small.any():
        ms, Ds = mu[small], D[small]
        kmax = int(math.ceil(float(np.max(ms)) + 10.0 * math.sqrt(float(np.max(ms))) + 15.0))
        k = np.arange(kmax + 1, dtype=float)
        logk = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(k[1:], 1.0)))])
        pmf = np.exp(k[None, :] * np.log(np.maximum(ms[:, None], 1e-300)) - ms[:, None] - logk[None, :])
        levels.append((tau - extra * ff + extra * k[None, :] / Ds[:, None]).ravel())
        weights.append(pmf.ravel())
        sds.append(np.full(pmf.size, sd_b))
    if (~small).any():
        ml, Dl = mu[~small], D[~small]
        levels.append(np.full(ml.size, tau))
        weights.append(np.ones(ml.size))
        sds.append(np.sqrt(extra ** 2 * ml / Dl ** 2 + sd_b ** 2))
    lv, w, sd = np.concatenate(levels), np.concatenate(weights) / len(D), np.concatenate(sds)
    keep = w > 1e-14
    lv, w, sd = lv[keep], w[keep], sd[keep]

    def exceeds(t):
        t = np.atleast_1d(np.asarray(t, float))
        return np.sum(w[None, :] * _normal_sf((t[:, None] - lv[None, :]) / sd[None, :]), axis=1)
    grid = np.linspace(float(np.min(lv - 40.0 * sd)), float(np.max(lv + 40.0 * sd)), 257)
    ex = exceeds(grid)
    out = []
    for q in qs:
        i = int(np.searchsorted(-ex, -(1.0 - q)))           # ex falls: the first grid point at or below 1 - q
        lo, hi = grid[max(i - 1, 0)], grid[min(i, len(grid) - 1)]
        for _ in range(24):      # the grid step / 2^24
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if exceeds(mid)[0] > 1.0 - q else (lo, mid)
        out.append(max(0.5 * (lo + hi), 0.0))
    return tuple(out)


def tails(sm: StepModel, sched: Scheduler, st: Steady, rate: float, prompt: Length, output: Length,
          i: int = 0) -> Tails:
    """The TTFT and TPOT quantiles (p50, p90, p99) of element i of an open-loop steady state `st`
    at `rate` requests/s (see the module docstring)."""
    b, tau, tau_d, tau_m, f, ttft, pre = (float(np.ravel(v)[i]) for v in (st.b, st.tau, st.tau_d, st.tau_m, st.f,
                                                                         st.ttft, st.prefill))
    step = tau * sm.tokens_per_step
    budget = float(_set(sched.token_budget))
    avail = max(budget - (b * sm.positions if _set(sched.mixed_steps) else 0.0), 1.0)
    own = pre + sm.host_token_s * prompt.mean
    t_q, rho = ttft_quantiles(rate, (step, tau_d, tau_m + (tau_d if not _set(sched.mixed_steps) else 0.0)), avail, own,
                              ttft, points(prompt))
    db = max(0.05 * b, 0.5)
    hi_b = min(b + db, st.cap)
    lo_b = max(b - db, 0.0)
    slope = (float(sm.step(hi_b, st.u_mean, h=st.h_mean)) - float(sm.step(lo_b, st.u_mean, h=st.h_mean))) \
        / max(hi_b - lo_b, 1e-12) / sm.tokens_per_step
    p_q = tpot_quantiles(tau, tau_d / sm.tokens_per_step, tau_m / sm.tokens_per_step, f, bool(_set(sched.mixed_steps)),
                         b, slope, points(output))
    return Tails((t_q[0], t_q[1], t_q[2]), (p_q[0], p_q[1], p_q[2]), rho)
