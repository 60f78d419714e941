"""The open-loop (Poisson) rate search of a disaggregated system: a prefill pool that binds (its
prompt queue's p99 reaches the TTFT limit), a decode pool that binds (its queue for decode places,
then its capacity), and a law: more decode workers never lower the rate."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.errors import InvalidInputError
from membound.planning.rate_search import highest, search_disaggregated
from membound.serving import Fixed, Pool, Scheduler, Uniform
from membound.serving.disagg import OpenPools, build_pools, disaggregated_tails

# the bisection of rate_search leaves the rate within 2^-10 of a bracket at most 0.455 of it wide
# (the grid's geometric ratio 90^(1/12) = 1.455): 4.4e-4 of the rate
SEARCH_REL = 1e-3


def _root(f, lo: float, hi: float) -> float:
    """The root of an increasing f on [lo, hi] by bisection (f(lo) < 0 < f(hi))."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0.0 else (lo, mid)
    return 0.5 * (lo + hi)


def _stub(w_p: int, w_d: int):
    """Pools as disaggregated_tails reads them: worker counts and a prefill worker without host time."""
    return SimpleNamespace(w_p=w_p, w_d=w_d, sm_p=SimpleNamespace(host=lambda S: 0.0 * S))


def _search(pools, op: OpenPools, prompt, output, lim, chips: int):
    return highest(lambda r: disaggregated_tails(pools, op, r, prompt, output), op.capacity, lim, output, chips)


def test_the_prefill_pool_binds_at_its_queues_p99():
    # One prefill worker, prompts of exactly S = 1000 tokens, prefilled at 10,000 tokens/s with full
    # steps: each prompt is d = 0.1 s of the worker (an M/D/1 queue, load rho = lambda d); alone it
    # takes pre = 0.05 s, and its KV moves in xfer = 0.01 s: TTFT = W + 0.06 s.
    # The wait's tail (Cramer-Lundberg): P(W > t) = C e^(-theta t), lambda (e^(theta d) - 1) = theta,
    # C = (1 - rho) / (lambda d e^(theta d) - 1), so p99 TTFT = 0.06 + ln(100 C) / theta.
    # The decode worker is idle by comparison (1000 places, 1 ms a token, 10 tokens: 100,000 requests/s),
    # its step flat: TPOT = 1 ms at every load. With a TTFT limit of 1 s the rate is the lambda where
    # ln(100 C) / theta = 0.94 s.
    d, own, limit = 0.1, 0.06, 1.0

    def p99_wait(lam: float) -> float:
        theta = _root(lambda th: lam * (math.exp(th * d) - 1.0) - th, 1e-9, 1e3)
        c = (1.0 - lam * d) / (lam * d * math.exp(theta * d) - 1.0)
        return math.log(100.0 * c) / theta
    lam = _root(lambda x: p99_wait(x) - (limit - own), 1.0, 9.99)
    op = OpenPools(pre=0.05, tokens_s=10_000.0, xfer=0.01, tau=np.full(1000, 1e-3), capacity=10.0)
    mr = _search(_stub(1, 1), op, Fixed(1000), Fixed(11), {"ttft_p99_s": limit, "tpot_p99_s": 0.02}, chips=2)
    assert mr.binding == "ttft_p99_s"
    assert mr.rate == pytest.approx(lam, rel=SEARCH_REL)
    assert mr.ttft[2] == pytest.approx(limit, rel=1e-3)
    assert mr.tpot[2] == pytest.approx(1e-3, rel=1e-9)
    assert mr.output_tok_s_per_chip == pytest.approx(mr.rate * 11 / 2, rel=1e-12)


def _erlang_wait(lam: float, mu: float, c: int) -> float:
    """Mean wait for a place of an M/M/c queue (Erlang C): a = lambda / mu, rho = a / c,
    P(wait) = (a^c / c! / (1 - rho)) / (sum_{k<c} a^k / k! + a^c / c! / (1 - rho)), Wq = P(wait) / (c mu - lambda)."""
    a = lam / mu
    top = a ** c / math.factorial(c) / (1.0 - a / c)
    p_wait = top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam)


def test_the_decode_pool_binds_by_its_places_then_its_capacity():
    # Two decode workers of c = 4 places each, a flat step: 2 ms a token over D = 100 tokens, so a
    # sequence leaves at mu = 1 / (100 x 0.002) = 5 a second and a worker's chain is an M/M/4 queue at
    # lambda / 2 (requests that find the places full wait: Erlang C). The prefill pool is far from
    # its load (1e6 tokens/s for 100-token prompts: rho = lambda x 1e-4 < 1%), so its p99 wait is 0 and
    # p99 TTFT = pre + Wq = 0.01 + Wq(lambda / 2). Capacity: 2 x 4 x 5 = 40 requests/s.
    mu, c, pre = 5.0, 4, 0.01
    op = OpenPools(pre=pre, tokens_s=1e6, xfer=0.0, tau=np.full(c, 0.002), capacity=2 * c * mu)
    pools, prompt, output = _stub(1, 2), Fixed(100), Fixed(101)
    lam_d = _root(lambda x: _erlang_wait(x, mu, c) - 0.05, 1e-6, c * mu * (1 - 1e-9))
    mr = _search(pools, op, prompt, output, {"ttft_p99_s": pre + 0.05}, chips=3)
    assert mr.binding == "ttft_p99_s"
    assert mr.rate == pytest.approx(2 * lam_d, rel=SEARCH_REL)
    assert mr.tpot == pytest.approx((0.002, 0.002, 0.002), rel=1e-9)
    # the places alone: at a rate, TTFT is pre + the Erlang wait, every quantile alike
    t = disaggregated_tails(pools, op, 30.0, prompt, output)
    assert t.ttft[2] == pytest.approx(pre + _erlang_wait(15.0, mu, c), rel=1e-6)
    # with limits no rate below the capacity breaks, the search ends at its last grid point, 0.995 of it
    free = _search(pools, op, prompt, output, {"tpot_p99_s": 1.0}, chips=3)
    assert free.binding == "" and free.rate == pytest.approx(0.995 * 40.0, rel=1e-12)
    assert disaggregated_tails(pools, op, 40.0, prompt, output) is None


@settings(max_examples=6, deadline=None)
@given(w_p=st.integers(1, 2), w_d=st.integers(1, 4))
def test_more_decode_workers_never_lower_the_rate(w_p, w_d):
    # within one 8-GPU NVLink domain (the KV crosses the same link); the search's resolution aside
    kw = dict(slo={"ttft_p99_s": 0.5, "tpot_p99_s": 0.012}, prompt_tokens=Uniform(500, 1500),
              output_tokens=Uniform(100, 300), runtime="vllm")
    a = mb.max_rate("llama-3.1-8b", "h100-sxm", prefill=Pool(w_p, 1), decode=Pool(w_d, 1), **kw)
    b = mb.max_rate("llama-3.1-8b", "h100-sxm", prefill=Pool(w_p, 1), decode=Pool(w_d + 1, 1), **kw)
    assert b.rate >= a.rate * (1 - SEARCH_REL)
    assert b.output_tok_s_per_chip == pytest.approx(b.rate * 200 / (w_p + w_d + 1), rel=1e-9)


def test_max_rate_takes_both_pools_or_neither():
    kw = dict(slo={"ttft_p99_s": 1.0}, prompt_tokens=1000, output_tokens=100, runtime="vllm")
    with pytest.raises(InvalidInputError, match="prefill, decode"):
        mb.max_rate("llama-3.1-8b", "h100-sxm", prefill=Pool(1, 1), **kw)
    with pytest.raises(InvalidInputError, match="prefill, decode"):
        mb.max_rate("llama-3.1-8b", "h100-sxm", prefill=Pool(1, 1), decode=Pool(1, 1), n_chips=2, **kw)
    with pytest.raises(InvalidInputError, match="Pool.scheduler"):
        Pool(1, 1, scheduler="fast")


def test_each_pool_runs_its_own_scheduler():
    # a pool's scheduler stands over the call's: the decode pool's cap of 8 sequences bounds the
    # capacity at 8 x tokens / (D x step at 8), the prefill pool's budget its prefill rate
    kw = dict(prompt=Fixed(1000), output=Fixed(101), runtime="vllm")
    pools, _ = build_pools("llama-3.1-8b", "h100-sxm", Pool(1, 1, scheduler=Scheduler(token_budget=2048)),
                           Pool(2, 1, scheduler=Scheduler(max_running=8)), **kw)
    assert pools.sched_d.max_running == 8 and pools.sched_p.token_budget == 2048
    mr = search_disaggregated(pools, Fixed(1000), Fixed(101), {"tpot_p99_s": 1.0})
    step8 = float(pools.sm_d.step(8.0, float(pools.sm_d.attended(1050.0)), h=float(pools.sm_d.held(1050.0))))
    assert mr.saturation_rate == pytest.approx(2 * 8 / (100 * step8), rel=1e-9)      # decode binds: 2 workers x 8
