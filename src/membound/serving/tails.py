"""Latency tails of a served engine under Poisson arrivals: p99 TTFT and p99 TPOT from the physics.

The steady-state solver (`serving.solve`) gives means: the running batch b, the decode step
tau_d, the step carrying prompt tokens tau_m, the share f of steps that carry some, the prompt's
own prefill time and the mean TTFT (its open loop prices the steps Poisson arrivals make: a step
takes the prompts that came during the last, `serving.solver._State._clumped`). The tails come
from four sources, each a model here, checked against the iteration-level simulator, which runs
the same steps request by request (tests/test_tails.py; benchmarks/tails_vs_simulator.py on five of
MLPerf's served workloads at 30-90% of saturation):

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
3. **Queueing for prefill room.** While prompts wait, every step carries a full chunk (the token
   budget's room beside the decodes; a decode step and a full prefill step where steps do not mix:
   `serving.solver.full_step`), so a prompt of S tokens takes S x that step / its chunk of the
   engine's time: an M/G/1 queue of that service (at the mean step's pace it took a fraction of
   it, and a queue of long prompts, whose full step lasts twenty decode steps, looked nearly
   idle), whose waiting time has an atom 1 - rho at zero and the Cramer-Lundberg tail
   P(W > t) ~ C exp(-theta t), theta > 0 the root of lambda (M_s(theta) - 1) = theta and
   C = (1 - rho) / (lambda M_s'(theta) - 1), M_s the moment generating function of the service
   over the prompt lengths (Asmussen, "Applied Probability and Queues", 2nd ed., XIII.5; M/D/1:
   lambda (e^{theta D} - 1) = theta).
4. **Prefill/decode interference and the spread of lengths.** A request's D decode steps carry
   the prefill work queued ahead of it when it starts decoding (that queue's workload: its steps
   each carry a full chunk) and the chunks of the prompts that come meanwhile, which lengthen its
   steps so that more come: a Galton-Watson total progeny, Consul's generalized Poisson law
   (`chunk_law`; the steps count chunks as Poisson(D f) did only where the prefill's share of the
   time is small). A prompt longer than a step's room brings its chunks at once, in consecutive steps:
   the chunks come in clumps (`chunk_clump`), which widen the count, not its mean. At most every step
   carries a full chunk (`tpot_quantiles`). Short outputs
   spread most: behind a queue of long prompts most of a short request's steps carry a chunk.
   Prompts of the length distribution take their own prefill time in proportion.

The TTFT distribution is held at the solver's mean where that is above the sum of its parts
(whose extra terms, host time, scheduler polls, batch waits, shift it whole); the TPOT's mean is
the occupancy's (above the solver's near saturation) plus the work ahead of a request.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np

from .lengths import Length, Samples
from .scheduler import Scheduler, filled
from .solver import Steady, full_step, open_loop_rates, rows_alone
from .step import StepModel
from statistics import NormalDist

# points of a length distribution the tails integrate over (Samples keep theirs up to this many)
LENGTH_POINTS = 64
# chunks per request summed term by term in the TPOT tail (a normal of the same mean and variance beyond)
CHUNK_TERMS = 160.0
# decoding counts at which the occupancy model reads the engine's completion rate (interpolated between)
OCCUPANCY_POINTS = 96
# equally likely decoding counts that stand for the occupancy in the TPOT mixture (and in the TTFT's)
LOAD_POINTS = 24
TTFT_LOAD_POINTS = 8
# prompts-per-step counts of the prefill chain (the last holds the rest) and the rounds that find its law
CHAIN_POINTS = 64
CHAIN_ROUNDS = 60
# survival of the prefill backlog a request starts decoding behind, halved from P(V > 0) down to this
BACKLOG_FLOOR = 1e-5
# cumulative levels between which each output length's prefill term is kept (its quantiles at their
# middles): tenths in the body, halvings of the last tenth in the tail, which the p99 reads
TPOT_LEVELS = np.concatenate([np.linspace(0.0, 0.9, 10), 1.0 - 0.1 * 0.5 ** np.arange(1, 11), [1.0]])


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
    others: np.ndarray     # the b (others beside a sequence) it evaluated the open loop at, ascending
    rates: tuple[np.ndarray, ...]   # `open_loop_rates` at those b


def _rates_at(occ: Occupancy, sm: StepModel, sched: Scheduler, prompt: float, output: float, b: np.ndarray,
              beams: int) -> tuple[np.ndarray, ...]:
    """`open_loop_rates` at b: the occupancy's figures where its evaluation holds every point of b
    and each point is computed alone (`solver.rows_alone`, both calls at two points or
    more), the same numbers to the bit; else evaluated."""
    at = np.searchsorted(occ.others, b)
    if (occ.others.size >= 2 and b.size >= 2 and np.all(at < occ.others.size)
            and np.array_equal(occ.others[at], b) and rows_alone(sm, sched)):
        return tuple(v[at] for v in occ.rates)
    return open_loop_rates(sm, sched, prompt, output, b, beams)


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
    grid = occupancy_grid(top)
    # the solver's figures at b are those a decoding sequence sees beside b others: n in the batch
    others = beams * grid - 1.0
    rates = open_loop_rates(sm, sched, prompt, output, others, beams)
    return occupancy_of(rate, np.interp(np.arange(1, top + 1, dtype=float), grid, rates[0]), output, others, rates)


def occupancy_grid(top: int) -> np.ndarray:
    """The decoding counts 1 .. top at which the occupancy model reads the step (OCCUPANCY_POINTS,
    geometric; interpolated between)."""
    return np.unique(np.round(np.geomspace(1.0, float(top), OCCUPANCY_POINTS)))


def occupancy_of(rate: float, tau: np.ndarray, output: float, others: np.ndarray | None = None,
                 rates: tuple[np.ndarray, ...] = ()) -> Occupancy:
    """`occupancy` of an engine whose seconds per output token with n = 1 .. len(tau) sequences
    decoding are `tau` (the batch's cap the last): the birth-death chain, its correlation time and
    the queue beyond the cap. others, rates: the evaluation `occupancy` read tau from (kept for
    `_rates_at`), or None."""
    top = tau.size
    others = np.zeros(0) if others is None else others
    n = np.arange(1, top + 1, dtype=float)
    p = birth_death(rate, n / max(output - 1.0, 1e-9) / np.maximum(tau, 1e-300))    # mu(n) = n / (D tau(n))
    if p is None:                  # the full batch completes fewer than arrive: the queue never drains
        return Occupancy(n, np.eye(1, top, top - 1)[0], tau, math.inf, math.inf, np.eye(1, top + 1, top)[0],
                         others, rates)
    extra = p.size - top - 1
    tau_all = np.concatenate([[tau[0]], tau, np.full(extra, tau[-1])])
    corr = correlation_time(p, tau_all, rate)
    dec = np.concatenate([p[1:top], [float(np.sum(p[top:]))]])     # P(n decoding), n = 1 .. top
    seen = n * dec
    seen /= max(float(np.sum(seen)), 1e-300)
    queued = float(np.sum(p[top + 1:] * np.arange(1.0, extra + 1.0)))
    arrive = np.concatenate([p[:top], [float(np.sum(p[top:]))]])
    return Occupancy(n, seen, tau, corr, queued, arrive, others, rates)


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


def ttft_quantiles(rate: float, steps: tuple[float, float, float], room: np.ndarray, own_s: float, mean_ttft: float,
                   prompts: np.ndarray, qs=(0.5, 0.9, 0.99), states: np.ndarray | None = None
                   ) -> tuple[tuple[float, ...], float, tuple[float, float, float] | None]:
    """TTFT quantiles (seconds) and the prefill load rho. steps: (mean step, decode step, step
    carrying prompt tokens) in seconds. A prompt's prefill work is the steps' time beyond their
    decodes shared by the rate x step prompts a step takes, per_prompt = (mean - decode) /
    (rate x mean) (compute is conserved). It arrives inside a step of K prompts (steps sampled by
    their length, K from `step_chain`), waits for its end (uniform over it), then runs in the next
    step with the J ~ Poisson(rate x that step) prompts that came with it: its own prefill (own_s at
    the mean prompt, in proportion to its length) spread by (J - E[J]) per_prompt, the mean held.
    It first waits for prefill room: an M/G/1 queue whose service is `room` (seconds, one per point
    of `prompts`: the engine's time for the prompt's tokens while prompts queue, `tails`). Shifted
    so that the mean is the solver's `mean_ttft` (never below the sum of those parts). `states`:
    rows of (mean step, decode step, carrying step, own prefill, arrival rate) at the loads an arrival
    finds (equally likely; the occupancy's), which the TTFT mixes, each load's per_prompt from its own
    rate (the open loop's there); None: the one of `steps`, `own_s` and `rate`.
    Returns the quantiles, the prefill load and the queue's (rho, theta, C) (`mg1_wait_tail`; None
    where the load reaches 1)."""
    step, step_d, _ = steps
    S = np.asarray(prompts, float)
    mean_S = max(float(np.mean(S)), 1e-30)
    per_prompt = max(step - step_d, 0.0) / max(rate * step, 1e-30)
    room = np.asarray(room, float)
    load = rate * max(per_prompt, float(np.mean(room)))
    if load >= 1.0:        # the prompts' work outgrows the engine: no finite tail
        return tuple(math.inf for _ in qs), load, None
    rho, theta, c = mg1_wait_tail(rate, room)
    st = np.array([[step, step_d, 0.0, own_s, rate]]) if states is None else np.asarray(states, float)
    Sq = S if S.size <= 16 else np.quantile(S, (np.arange(16) + 0.5) / 16)
    u = (np.arange(4) + 0.5) / 4.0
    bases, weights, parts = [], [], []
    for step_j, d_j, _, own_j, rate_j in st:
        # the prompts' work at that load: its steps' time beyond their decodes over the prompts they take
        # there (rate_j x step_j, the open loop's rate at that load; `rate` would price a load found far
        # from the mean with the mean's prompts)
        pp = max(step_j - d_j, 0.0) / max(rate_j * step_j, 1e-30)
        if rate * pp >= 1.0:
            return tuple(math.inf for _ in qs), rate * pp, None
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

    return tuple(shift + float(x) for x in wait_plus(base, wts, (rho, theta, c), qs)), load, (rho, theta, c)


def wait_plus(base: np.ndarray, wts: np.ndarray, queue: tuple[float, float, float], qs) -> np.ndarray:
    """Quantiles of W + B, W the waiting time of `mg1_wait_tail`'s queue (rho, theta, C) and B,
    independent of it, the weighted points `base` (weights `wts`, summing to 1)."""
    rho, theta, c = queue

    def exceeds(t: np.ndarray) -> np.ndarray:
        return np.sum(_wait_exceeds(t[:, None] - base[None, :], rho, theta, c) * wts, axis=1)
    top = float(np.max(base)) + (math.log(100.0 * max(c, 1e-300)) / theta if rho > 0.0 else 0.0)
    return _quantiles(exceeds, qs, max(top, 1e-9))


def _compress(values: np.ndarray, weights: np.ndarray, n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """A discrete distribution as n equally likely points (its quantiles at the midpoints of n equal
    slices), so that a tail built on it costs n evaluations."""
    order = np.argsort(values)
    v, cdf = values[order], np.cumsum(weights[order])
    cdf /= cdf[-1]
    idx = np.minimum(np.searchsorted(cdf, (np.arange(n) + 0.5) / n), v.size - 1)
    return v[idx], np.full(n, 1.0 / n)


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs) -> tuple[float, ...]:
    """Quantiles of a discrete distribution: the smallest value whose cumulative weight reaches q."""
    v, w = np.ravel(values), np.ravel(weights)
    order = np.argsort(v, kind="stable")
    cdf = np.cumsum(w[order])
    cdf /= cdf[-1]
    at = np.minimum(np.searchsorted(cdf, np.asarray(qs, float) - 1e-12), v.size - 1)
    return tuple(float(x) for x in v[order[at]])


def backlog_points(queue: tuple[float, float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """The prefill work queued ahead of a request when it starts decoding (engine seconds), as weighted
    points: the work an M/G/1 queue holds, whose law is its FIFO wait's (Poisson arrivals see time
    averages), P(V > t) = min(rho, C e^(-theta t)) of `mg1_wait_tail`'s (rho, theta, C): an atom
    1 - P(V > 0) at 0, then bins of halving survival down to BACKLOG_FLOOR, each at its geometric
    middle (the last holding the rest). None, or P(V > 0) below BACKLOG_FLOOR: one point at 0."""
    zero = (np.zeros(1), np.ones(1))
    if queue is None:
        return zero
    rho, theta, c = queue
    p0 = min(rho, c)
    if not (p0 > BACKLOG_FLOOR and math.isfinite(theta)):      # work ahead too rare to reach a tail
        return zero
    n = max(int(math.ceil(math.log2(p0 / BACKLOG_FLOOR))), 1)
    edges = p0 * 0.5 ** np.arange(n + 1)
    surv = np.concatenate([np.sqrt(edges[:-1] * edges[1:]), [edges[-1] / 2.0]])
    t = np.maximum(np.log(c / surv) / theta, 0.0)
    return np.concatenate([[0.0], t]), np.concatenate([[1.0 - p0], edges[:-1] - edges[1:], [edges[-1]]])


def _compress_rows(v: np.ndarray, w: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's weighted points (v, w: rows x n) as its quantiles at the middles of the slices between
    `levels` (0 .. 1), weighted by the slices' widths (the rows searched as one array: row i's cumulative
    weights, within (0, 1], shifted by i)."""
    rows, n = v.shape
    order = np.argsort(v, axis=1, kind="stable")
    vs = np.take_along_axis(v, order, axis=1)
    cdf = np.cumsum(np.take_along_axis(w, order, axis=1), axis=1)
    cdf /= cdf[:, -1:]
    shift = np.arange(rows, dtype=float)[:, None]
    mids = 0.5 * (levels[:-1] + levels[1:])
    at = np.searchsorted((cdf + shift).ravel(), (mids[None, :] - 1e-12 + shift).ravel()).reshape(rows, -1)
    at = np.clip(at - n * np.arange(rows)[:, None], 0, n - 1)
    return np.take_along_axis(vs, at, axis=1), np.broadcast_to(np.diff(levels), at.shape)


def chunk_law(m: np.ndarray, r: float, kmax: int) -> np.ndarray:
    """P(K = k), k = 0 .. kmax (the last cell holding the rest), of the prefill chunks that land in a
    request's steps: the chunks of the prompts that come while its steps run, each lengthening them so
    that more come. With m the chunks its steps' time without them brings (Poisson) and r the chunks a
    chunk's own time brings (Poisson, r < 1), K is a Galton-Watson total progeny from Poisson(m)
    founders: Consul's generalized Poisson law, P(k) = m (m + k r)^(k-1) e^-(m + k r) / k!, mean
    m / (1 - r), variance m / (1 - r)^3 (Consul & Jain 1973, "A generalization of the Poisson
    distribution", Technometrics 15; r = 0: Poisson). m: an array (rows); one row each."""
    m = np.maximum(np.asarray(m, float), 1e-300)[..., None]
    k = np.arange(kmax + 1, dtype=float)
    logk = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(k[1:], 1.0)))])
    p = np.exp(np.log(m) + (k - 1.0) * np.log(m + k * r) - (m + k * r) - logk)
    p[..., -1] = np.maximum(1.0 - np.sum(p[..., :-1], axis=-1), 0.0)
    return p


def tpot_quantiles(tau: float, tau_d: float, tau_m: float, f: float, mixed: bool, outputs: np.ndarray,
                   load: np.ndarray | None = None, corr: float = 0.0, qs=(0.5, 0.9, 0.99),
                   backlog: tuple[np.ndarray, np.ndarray] | None = None, full: float = math.inf,
                   clump: float = 1.0) -> tuple[float, ...]:
    """TPOT quantiles (seconds per token). A request of T output tokens runs D = T - 1 steps, which
    take, beyond decode steps (tau_d), the prefill work waiting ahead of it when it starts decoding
    and the chunks of the prompts that come meanwhile:
    - the work ahead V (`backlog`: weighted points of engine seconds, `backlog_points`) runs in steps
      that each carry a full chunk (`full`: seconds per token of such steps; a decode step and a full
      prefill step where steps do not mix), of which the share 1 - tau_d / full is prefill;
    - the chunks that come meanwhile, K (`chunk_law`), each adding `extra` (tau_m - tau_d where steps
      mix, tau_m where a prefill step runs apart): chunks come at f / tau a second (f the share of
      steps carrying one), so the steps' own time (D tau_d and the work ahead) brings Poisson many,
      each chunk's extra time brings r = f extra / tau more;
    - the chunks come in clumps of `clump` (`chunk_clump`: a prompt's chunks at once, one where prompts fit a
      step): K = clump x P, P the clumps' total progeny (`chunk_law` from Poisson(m / clump) founders, each
      clump's extra time bringing r clumps' worth), so K's mean is m / (1 - r) as without clumps and its
      variance clump x m / (1 - r)^3 (a compound Poisson count's, Var = rate E[X^2] with X the chunks a
      prompt brings);
    - at most every one of its steps carries a full chunk:
      TPOT = tau - extra f + min(extra K + (1 - tau_d / full) V, D (full - tau_d)) / D,
      the mean held at tau where nothing waits ahead.
    Short outputs spread most: a request that starts decoding behind a queue of long prompts sees
    most of its steps carry a chunk, and the prompts that come meanwhile lengthen them further. The
    load it sees: `load`, equally likely seconds per token of the step as a decoding request finds it
    (the occupancy's), whose mean replaces tau; a request sees their mean over its own D tau seconds,
    whose spread about the mean is the load's shrunk by sqrt(window_share(D tau, corr)). The
    quantiles of the mixture over the output lengths `outputs` (equal lengths once, weighted by their
    count; K term by term up to CHUNK_TERMS terms, beyond a normal of its mean and variance at 16
    equally likely points; each length's prefill term kept at TPOT_LEVELS where work waits ahead or
    the steps are capped)."""
    D, count = np.unique(np.maximum(np.asarray(outputs, float) - 1.0, 1.0), return_counts=True)
    extra = (tau_m - tau_d) if mixed else tau_m
    ff = min(max(f, 0.0), 1.0)
    if load is None or len(load) == 0:
        dev = np.zeros(1)
    else:
        tau = float(np.mean(load))
        dev = np.asarray(load, float) - tau
    shrink = np.sqrt(window_share(D * tau, corr)) if corr > 0.0 else np.ones(D.size)
    vv, vw = backlog if backlog is not None else (np.zeros(1), np.ones(1))
    share = 1.0 - tau_d / full if math.isfinite(full) and full > 0.0 else 1.0
    cycle = max(tau_d + ff * extra, 1e-300)                 # the long-run step, tau_d + f extra
    r = min(ff * extra / cycle, 0.999)                      # chunks a chunk's extra time brings
    ahead = share * vv[None, :]                             # (1, V) prefill seconds ahead
    c = max(float(clump), 1.0)
    m = (ff / cycle) * (D[:, None] * tau_d + ahead) / c     # (D, V) founders' mean, in clumps
    mean_k, var_k = m / (1.0 - r), m / (1.0 - r) ** 3       # the clumps' count
    top = mean_k + 10.0 * np.sqrt(var_k) + 15.0
    small = top <= CHUNK_TERMS
    kmax = int(math.ceil(float(np.max(top[small])))) if small.any() else 0
    width = max(kmax + 1 if small.any() else 0, 16 if (~small).any() else 0)
    kk, kw = np.zeros(m.shape + (width,)), np.zeros(m.shape + (width,))
    if small.any():
        kk[small, :kmax + 1] = c * np.arange(kmax + 1, dtype=float)
        kw[small, :kmax + 1] = chunk_law(m[small], r, kmax)
    if (~small).any():
        z = np.array([NormalDist().inv_cdf((i + 0.5) / 16.0) for i in range(16)])
        kk[~small, :16] = c * np.maximum(mean_k[~small][:, None] + np.sqrt(var_k[~small])[:, None] * z[None, :], 0.0)
        kw[~small, :16] = 1.0 / 16.0
    cap = max(full - tau_d, 0.0)
    pv = np.minimum((extra * kk + ahead[:, :, None]) / D[:, None, None], cap)      # (D, V, K)
    pw = kw * vw[None, :, None]
    pv, pw = pv.reshape(D.size, -1), pw.reshape(D.size, -1)
    if vv.size > 1:
        pv, pw = _compress_rows(pv, pw, TPOT_LEVELS)
    base = tau - extra * ff + shrink[:, None] * dev[None, :]                   # (lengths, load points)
    v = (base[:, None, :] + pv[:, :, None]).ravel()
    w = (count[:, None, None] * pw[:, :, None] * np.ones(dev.size)[None, None, :]).ravel()
    keep = w > 1e-14 * float(np.max(w))
    if not keep.all():
        v, w = v[keep], w[keep]
    return tuple(max(x, 0.0) for x in weighted_quantiles(v, w, qs))


def chunk_clump(f: float, step: float, rate: float, prompts: np.ndarray) -> float:
    """The chunk-carrying steps a prompt brings at once, size-biased (the clump of `tpot_quantiles`): a prompt
    of S tokens spans S / g of them, g = rate x mean S x step / f the prompt tokens such a step takes (f the
    share of steps of `step` seconds that carry some, `rate` prompts/s), and a request's steps see the
    clumps by their size, E[X^2] / E[X] = (f / (rate x step)) x E[S^2] / E[S]^2 (`prompts`: equally likely
    lengths); at least 1: prompts shorter than a step's room share steps, which then come one by one."""
    S = np.asarray(prompts, float)
    per_prompt = f / max(rate * step, 1e-300)
    return max(per_prompt * float(np.mean(S * S)) / max(float(np.mean(S)) ** 2, 1e-300), 1.0)


def seen_loads(occ: Occupancy) -> np.ndarray:
    """LOAD_POINTS equally likely seconds per output token of the step as a decoding request finds
    it (the occupancy's size-biased law), which `tpot_quantiles` mixes."""
    cdf = np.cumsum(occ.seen)
    pick = np.searchsorted(cdf / cdf[-1], (np.arange(LOAD_POINTS) + 0.5) / LOAD_POINTS)
    return occ.tau[np.minimum(pick, occ.n.size - 1)]


def tails(sm: StepModel, sched: Scheduler, st: Steady, rate: float, prompt: Length, output: Length,
          i: int = 0, beams: int = 1) -> Tails:
    """The TTFT and TPOT quantiles (p50, p90, p99) of element i of an open-loop steady state `st`
    at `rate` requests/s (see the module docstring); beams: as the solver's (solve(beams=...))."""
    b, tau, tau_d, tau_m, f, ttft, pre = (float(np.ravel(v)[i]) for v in (st.running, st.tau, st.tau_d, st.tau_m, st.mixed_share,
                                                                         st.ttft, st.prefill))
    step = tau * sm.tokens_per_step
    split = not filled(sched.mixed_steps)
    # while prompts wait, every step carries a full chunk (after a decode step where steps do not mix):
    # a queued prompt's tokens take the engine that cycle's seconds per token (its prefill room's service)
    full_s, full_c = full_step(sm, sched, prompt.mean, output.mean, b, beams)
    cycle = full_s + (tau_d if split else 0.0)
    S = points(prompt)
    room = S * cycle / max(full_c, 1.0)
    own = pre + sm.host_token_s * prompt.mean
    occ = occupancy(sm, sched, rate, prompt.mean, output.mean, st.cap, beams)
    # requests that wait for a place in a full batch wait for completions: Little's law on the queue
    ttft += occ.queued / rate if math.isfinite(occ.queued) else math.inf
    # the loads arrivals find: equally likely decoding counts, the steps and own prefill there
    cdf_a = np.cumsum(occ.arrive)
    found = np.searchsorted(cdf_a / cdf_a[-1], (np.arange(TTFT_LOAD_POINTS) + 0.5) / TTFT_LOAD_POINTS).astype(float)
    tau_n, x_n, d_n, m_n, pre_n = _rates_at(occ, sm, sched, prompt.mean, output.mean, np.minimum(beams * found, st.cap),
                                          beams)
    tps = sm.tokens_per_step
    host = sm.host_token_s * prompt.mean
    states = np.column_stack([tau_n * tps, d_n, m_n + (d_n if split else 0.0), pre_n + host, x_n])
    t_q, rho, queue = ttft_quantiles(rate, (step, tau_d, tau_m + (tau_d if split else 0.0)), room, own,
                                     ttft, S, states=states)
    p_q = tpot_quantiles(tau, tau_d / tps, tau_m / tps, f, not split, points(output), load=seen_loads(occ),
                         corr=occ.corr_s if math.isfinite(occ.corr_s) else 0.0, backlog=backlog_points(queue),
                         full=cycle / tps, clump=chunk_clump(f, step, rate, S))
    e2e = t_q[2] + (output.quantile(0.99) - 1.0) * p_q[2]
    return Tails((t_q[0], t_q[1], t_q[2]), (p_q[0], p_q[1], p_q[2]), rho, e2e)
