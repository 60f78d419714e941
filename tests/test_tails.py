"""The served latency tails (membound.serving.tails): the M/G/1 prefill queue by hand, the TPOT mixture
by hand, and the whole model against the iteration-level simulator."""
import math

import numpy as np
import pytest

import membound as mb
from membound.serving import Uniform, build, solve
from membound.serving.tails import (_quantiles, _wait_exceeds, backlog_points, birth_death, chunk_clump, chunk_law,
                                   correlation_time,
                                   log_sum_exp, mg1_wait_tail, step_chain, tails, tpot_quantiles, ttft_quantiles,
                                   weighted_quantiles, window_share)
from hypothesis import given, strategies as hst
from hypothesis.extra import numpy as hnp
from scipy.special import logsumexp


def test_md1_prefill_queue_p99_by_hand():
    # M/D/1: Poisson arrivals at 0.5/s, every prompt's prefill 1 s: rho = 0.5.
    # theta solves 0.5 (e^theta - 1) = theta; iterating theta = ln(1 + 2 theta) from 1:
    # 1.0986, 1.1623, 1.2013, 1.2255, 1.2404, ... -> 1.2564 (0.5 (e^1.2564 - 1) = 0.5 x 2.5128 = 1.2564).
    # C = (1 - rho) / (lambda D e^{theta D} - 1) = 0.5 / (0.5 x 3.5128 - 1) = 0.5 / 0.7564 = 0.6610.
    # p99: C e^{-theta t} = 0.01 -> t = ln(66.10) / 1.2564 = 4.1912 / 1.2564 = 3.336 s.
    rho, theta, c = mg1_wait_tail(0.5, np.array([1.0]))
    assert rho == pytest.approx(0.5)
    assert theta == pytest.approx(1.2564, abs=2e-4)
    assert c == pytest.approx(0.6610, abs=5e-4)
    p99 = float(_quantiles(lambda t: _wait_exceeds(t, rho, theta, c), (0.99,), 1.0)[0])
    assert p99 == pytest.approx(3.336, abs=5e-3)
    # the same queue by Lindley's recursion W' = max(0, W + D - A), A ~ Exp(rate), 200,000 prompts
    rng = np.random.default_rng(1)
    gaps = rng.exponential(2.0, 200_000)
    w, waits = 0.0, np.empty(gaps.size)
    for i, a in enumerate(gaps):
        waits[i] = w
        w = max(0.0, w + 1.0 - a)
    assert np.quantile(waits, 0.99) == pytest.approx(3.336, rel=0.05)
    assert np.mean(waits > 0) == pytest.approx(0.5, abs=0.01)     # P(W > 0) = rho


def test_log_sum_exp_by_hand():
    # log(e^0 + e^0) = ln 2 = 0.693147; log(2 e^1 + 3 e^1) = 1 + ln 5 = 2.609438;
    # log(e^1000 + e^999) = 1000 + ln(1 + e^-1) = 1000 + 0.313262 (e^1000 alone overflows a double)
    assert log_sum_exp(np.array([0.0, 0.0])) == pytest.approx(0.693147, abs=1e-6)
    assert log_sum_exp(np.array([1.0, 1.0]), np.array([2.0, 3.0])) == pytest.approx(2.609438, abs=1e-6)
    assert log_sum_exp(np.array([1000.0, 999.0])) == pytest.approx(1000.313262, abs=1e-6)
    assert log_sum_exp(np.array([5.0, 7.0]), np.array([0.0, 1.0])) == 7.0     # a zero weight adds nothing


@given(hnp.arrays(float, hst.integers(1, 80), elements=hst.floats(0.0, 50.0)), hst.floats(1e-3, 1e4))
def test_log_sum_exp_is_scipys_bit_for_bit(s, theta):
    # the root search's two sums, computed as scipy.special.logsumexp computes them (outputs byte-identical)
    assert log_sum_exp(theta * s) == float(logsumexp(theta * s))
    assert log_sum_exp(theta * s, s) == float(logsumexp(theta * s, b=s))


@pytest.mark.parametrize("rate", [1e-300, 1e-9, 1e-3])
def test_a_nearly_idle_queue_finds_its_decay_rate(rate):
    # M/D/1 with 10 ms prompts: theta solves lambda (e^(theta d) - 1) = theta, i.e. in logs
    # log lambda + log(e^(theta d)) = log(lambda + theta) up to the -1 (negligible once e^(theta d) >> 1).
    # At 1e-300 requests/s theta d ~ 700: a capped e^x made the search double theta for ever.
    d = 0.01
    rho, theta, c = mg1_wait_tail(rate, np.array([d]))
    assert rho == pytest.approx(rate * d)
    assert rate * math.expm1(theta * d) == pytest.approx(theta, rel=1e-9) if theta * d < 700 else \
        math.log(rate) + theta * d == pytest.approx(math.log(rate + theta), rel=1e-9)
    assert c > 0.0 and _wait_exceeds(np.array([0.0]), rho, theta, c)[0] <= rho   # P(W > 0) is at most the load


def test_a_queue_past_its_capacity_is_refused():
    with pytest.raises(ValueError, match="grows without end"):
        mg1_wait_tail(2.0, np.array([0.6]))


def test_tpot_tail_of_prefill_interference_by_hand():
    # every output 101 tokens: D = 100 decode steps of tau_d = 9.6 ms; a share f = 0.02 of steps carries a
    # prefill chunk adding extra = 20 ms, so tau = 9.6 + 0.02 x 20 = 10 ms and chunks come at f / tau = 2 a
    # second. The decode steps' 0.96 s bring Poisson(m = 2 x 0.96 = 1.92) chunks; each chunk's 20 ms brings
    # r = 2 x 0.02 = 0.04 more: K is Consul's generalized Poisson, P(k) = m (m + k r)^(k-1) e^-(m + k r) / k!
    # (mean m / (1 - r) = 2 = D f): P(0) = e^-1.92 = 0.14661, P(1) = 1.92 e^-1.96 = 0.27045,
    # P(2) = 1.92 x 2.00 e^-2.00 / 2 = 0.25984, P(3) = 1.92 x 2.04^2 e^-2.04 / 6 = 0.17316,
    # P(4) = 1.92 x 2.08^3 e^-2.08 / 24 = 0.08994, P(5) = 1.92 x 2.12^4 e^-2.12 / 120 = 0.03879,
    # P(6) = 1.92 x 2.16^5 e^-2.16 / 720 = 0.01446: P(K <= 5) = 0.97879 < 0.99 <= P(K <= 6) = 0.99325, so
    # the p99 is at K = 6: TPOT = tau - 20 x 0.02 + 20 x 6 / 100 ms = tau + 0.8 ms; the median at K = 2
    # (P(K <= 1) = 0.41706, P(K <= 2) = 0.6769): tau. (Poisson(2) would give K = 5 at the p99: 0.98344.)
    tau = 0.010
    q50, _, q99 = tpot_quantiles(tau, 0.0096, 0.0296, 0.02, True, np.array([101.0]))
    assert q99 == pytest.approx(tau + 0.0008, abs=2e-6)
    assert q50 == pytest.approx(tau, abs=2e-6)
    assert tpot_quantiles(tau, 0.0096, 0.0296, 0.02, True, np.array([101.0]), qs=(0.985,))[0] == \
        pytest.approx(tau + 0.0008, abs=2e-6)       # P(K <= 5) = 0.97879 < 0.985: still K = 6, not Poisson's 5


def test_tpot_tail_of_prompts_that_bring_their_chunks_at_once_by_hand():
    # every output 51 tokens: D = 50 decode steps of tau_d = 20 ms; a share f = 0.05 of steps carries a chunk
    # adding extra = 100 ms, so tau = 20 + 0.05 x 100 = 25 ms and chunks come at f / tau = 2 a second, r = 2 x
    # 0.1 = 0.2 more a chunk's extra time. The decode steps' 1 s brings Poisson(2) chunks' worth; a prompt
    # brings clump = 4 at once, so the founders are Poisson(m = 2 / 4 = 0.5) prompts and K = 4 P, P Consul's
    # generalized Poisson (m = 0.5, r = 0.2): P(0) = e^-0.5 = 0.60653, P(1) = 0.5 e^-0.7 = 0.24829,
    # P(2) = 0.5 x 0.9 e^-0.9 / 2 = 0.09148, P(3) = 0.5 x 1.1^2 e^-1.1 / 6 = 0.03357,
    # P(4) = 0.5 x 1.3^3 e^-1.3 / 24 = 0.01247: P(<= 1) = 0.85482, P(<= 2) = 0.94630, P(<= 3) = 0.97987,
    # P(<= 4) = 0.99234. TPOT = tau - 100 x 0.05 + 100 x 4 P / 50 ms = 20 + 8 P ms: p50 (P = 0) 20 ms,
    # p90 (P = 2) 36 ms, p99 (P = 4) 52 ms; the mean 20 + 8 x 0.5 / 0.8 = 25 ms = tau, as without clumps.
    q = tpot_quantiles(0.025, 0.020, 0.120, 0.05, True, np.array([51.0]), clump=4.0)
    assert q == pytest.approx((0.020, 0.036, 0.052), abs=1e-9)
    # one chunk a prompt (clump 1, or below: a step's room holds several prompts) is the law as it was
    one = tpot_quantiles(0.025, 0.020, 0.120, 0.05, True, np.array([51.0]))
    assert tpot_quantiles(0.025, 0.020, 0.120, 0.05, True, np.array([51.0]), clump=0.3) == one
    assert one[2] < q[2]


def test_chunk_clump_by_hand():
    # f = 0.05 of 25 ms steps carry prompt tokens, 0.5 prompts a second: 0.05 / (0.5 x 0.025) = 4 such steps a
    # prompt on average; prompts of 1,000 and 3,000 tokens: E[S^2] / E[S]^2 = 5e6 / 4e6 = 1.25 (a step takes
    # 2,000 / 4 = 500 tokens: the prompts span 2 and 6 steps, size-biased (4 + 36) / 8 = 5): clump 5
    assert chunk_clump(0.05, 0.025, 0.5, np.array([1000.0, 3000.0])) == pytest.approx(5.0, rel=1e-12)
    # at 10 prompts a second a step holds five mean prompts (0.2 steps a prompt): they share steps, clump 1
    assert chunk_clump(0.05, 0.025, 10.0, np.array([1000.0, 3000.0])) == 1.0


def test_weighted_quantiles_by_hand():
    # values 3, 1, 2 with weights 1, 1, 2: sorted 1 (1/4), 2 (2/4), 3 (1/4): cumulative 0.25, 0.75, 1.
    # p50 -> 2 (first reaching 0.5), p25 -> 1 (0.25 reached exactly), p90 -> 3. Three copies end to end
    # are the same distribution: the same quantiles.
    v, w = np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 2.0])
    assert weighted_quantiles(v, w, (0.25, 0.5, 0.9)) == (1.0, 2.0, 3.0)
    assert weighted_quantiles(np.tile(v, 3), np.tile(w, 3), (0.25, 0.5, 0.9)) == (1.0, 2.0, 3.0)


@given(hst.floats(2.0, 30000.0), hst.integers(2, 64), hst.floats(0.0, 1.0), hst.booleans(),
       hst.lists(hst.floats(0.005, 0.02), max_size=24), hst.sampled_from([0.0, 0.01, 0.5, 3.0, 100.0]))
def test_tpot_quantiles_count_equal_output_lengths_once(T, n, f, mixed, load, corr):
    # a fixed output length given n times is the same distribution as given once (tpot_quantiles keeps
    # each length once, weighted by its count: a fixed output's 64 length points cost one row)
    args = (0.010, 0.0096, 0.0296, f, mixed)
    many = tpot_quantiles(*args, np.full(n, T), load=np.array(load), corr=corr)
    one = tpot_quantiles(*args, np.array([T]), load=np.array(load), corr=corr)
    assert many == pytest.approx(one, rel=1e-12, abs=1e-15)


def test_chunk_law_by_hand():
    # r = 0: Poisson(m); m = 1, r = 0.5: P(0) = e^-1 = 0.36788, P(1) = 1 x e^-1.5 = 0.22313,
    # P(2) = 1 x 2 x e^-2 / 2 = 0.13534; mean m / (1 - r) = 2, variance m / (1 - r)^3 = 8
    assert chunk_law(np.array([2.0]), 0.0, 60)[0, :3] == pytest.approx([0.135335, 0.270671, 0.270671], abs=1e-6)
    p = chunk_law(np.array([1.0]), 0.5, 4000)[0]
    assert p[:3] == pytest.approx([0.36788, 0.22313, 0.13534], abs=1e-5)
    k = np.arange(p.size)
    mean = float(np.sum(k * p))
    assert mean == pytest.approx(2.0, rel=1e-3) and float(np.sum((k - mean) ** 2 * p)) == pytest.approx(8.0, rel=1e-2)


def test_work_ahead_of_a_decoding_request_by_hand():
    # no chunks come (f = 0); every output 11 tokens: D = 10 steps of tau_d = 10 ms. Steps that each carry a
    # full chunk take full = 100 ms a token, of which 1 - 10 / 100 = 0.9 is prefill. The work waiting ahead
    # when a request starts decoding: none (weight 0.5), 0.5 s (0.45) or 10 s (0.05). 0.5 s adds
    # 0.9 x 0.5 / 10 = 45 ms a token: TPOT 55 ms; 10 s would add 900 ms, beyond every step carrying a
    # chunk (90 ms): TPOT = full = 100 ms. Median: 10 ms (weight 0.5 at it); p90: 55 ms (0.95); p99: 100 ms.
    backlog = (np.array([0.0, 0.5, 10.0]), np.array([0.5, 0.45, 0.05]))
    q = tpot_quantiles(0.010, 0.010, 0.030, 0.0, True, np.array([11.0]), backlog=backlog, full=0.100)
    assert q == pytest.approx((0.010, 0.055, 0.100), abs=1e-9)
    # the M/G/1 workload as points: P(V > 0) = rho = 0.5, P(V > t) = 0.6 e^-2t beyond t0 = ln(1.2) / 2 = 0.091:
    # an atom 0.5 at 0, then bins between survivals 0.5, 0.25, 0.125, ... (ceil(log2(0.5 / 1e-5)) = 16 of
    # them and the rest), each at the t whose survival is its edges' geometric mean: the first
    # ln(0.6 / sqrt(0.5 x 0.25)) / 2 = 0.26445 s (weight 0.25), the second ln(0.6 / sqrt(0.25 x 0.125)) / 2
    # = 0.61102 s (weight 0.125)
    v, w = backlog_points((0.5, 2.0, 0.6))
    assert v.size == 1 + 16 + 1 and float(np.sum(w)) == pytest.approx(1.0)
    assert v[:3] == pytest.approx([0.0, 0.26445, 0.61102], abs=1e-5)
    assert w[:3] == pytest.approx([0.5, 0.25, 0.125])
    assert backlog_points(None)[0].tolist() == [0.0]


def test_occupancy_chain_by_hand():
    # A batch whose step does not grow with it: mu(n) = n / R, R = 1 s a request's residence, arrivals
    # at 2/s: M/G/infinity, Poisson(2): P(0) = e^-2 = 0.13534, P(2) = 2^2 / 2! e^-2 = 0.27067. Its
    # count decorrelates as e^(-t / R) (exponential residences): correlation time R = 1 s.
    p = birth_death(2.0, np.arange(1, 200) / 1.0)
    assert p[0] == pytest.approx(0.13534, abs=1e-5) and p[2] == pytest.approx(0.27067, abs=1e-5)
    assert correlation_time(p, np.arange(p.size, dtype=float), 2.0) == pytest.approx(1.0, rel=1e-6)
    # A batch of one that completes 1/s (M/M/1), arrivals at 0.5/s: P(n) = 0.5 x 0.5^n; the queue
    # length's integrated autocorrelation over its variance is (1 + rho) / (1 - rho)^2 / mu
    # = 1.5 / 0.25 = 6 s (Whitt 1989, "Planning queueing simulations": asymptotic variance
    # 2 rho (1 + rho) / (1 - rho)^4, variance rho / (1 - rho)^2).
    p = birth_death(0.5, np.array([1.0]))
    assert p[:3] == pytest.approx([0.5, 0.25, 0.125], abs=1e-12)
    assert correlation_time(p, np.arange(p.size, dtype=float), 0.5) == pytest.approx(6.0, rel=1e-6)
    assert birth_death(1.0, np.array([1.0])) is None            # a full batch that keeps no pace: no law
    # a window's mean keeps all the variance of a window far shorter than the correlation, 2 corr /
    # window of one far longer (2 (1e4 - 1) / 1e8), and 2 (1 - 1 + e^-1) = 0.7358 at one correlation time
    assert window_share(np.array([1e-6, 1.0, 1e4]), 1.0) == pytest.approx([1.0, 0.73576, 1.9998e-4], rel=1e-4)


def test_prompts_per_step_chain_by_hand():
    # Steps of d0 = 10 ms with no prompt work: the prompts a step takes are those that came during
    # the last one, Poisson(rate d0) = Poisson(0.5) at 50/s: P(0) = e^-0.5 = 0.60653.
    p = step_chain(50.0, 0.010, 0.0)
    assert p[0] == pytest.approx(0.60653, abs=1e-5) and p[1] == pytest.approx(0.30327, abs=1e-5)
    # each prompt adding 8 ms: offspring mean r = 50 x 0.008 = 0.4 a prompt; the chain's mean
    # m = rate d0 + r m, m = 0.5 / 0.6 = 0.8333 prompts a step (a branching process with immigration)
    p = step_chain(50.0, 0.010, 0.008)
    assert float(np.sum(np.arange(p.size) * p)) == pytest.approx(0.5 / 0.6, rel=1e-3)


def test_a_load_found_far_from_the_mean_prices_prompts_at_its_own_rate():
    # Arrivals at 1e-6/s; an arrival finds a load whose steps last 19.2 ms against 17.0 ms of decodes,
    # the open loop's rate there being 0.15 prompts/s: a prompt's work there is (19.2 - 17.0) ms /
    # (0.15/s x 19.2 ms) = 0.764 s. At 1e-6/s the next step takes Poisson(1e-6 x 19.2 ms) ~ 0 other
    # prompts, so the TTFT is the wait for the running step's end (at most 19.2 ms) plus its own prefill,
    # 1.0 s at the mean prompt of 2,000 tokens in proportion: 0.5, 1.0, 1.5 s for 1,000, 2,000 and
    # 3,000 tokens. At the mean load (the solver's, at 1e-6/s) the steps are the decodes' 17.0 ms, and the
    # prefill queue (room 0.5..1.5 s, mean 1.0) is idle: rho = 1e-6 x 1.0 s. p99 in [1.5, 1.5192] s.
    # Priced at the arrival rate instead, the prompt's work was 0.0022 / (1e-6 x 0.0192) = 114,583 s
    # and the p99 ran to days (405B on 8 H200 under MLPerf's Server limits: no rate passed at 1% of
    # saturation, though 5% did, and the search answered 0).
    S = np.array([1000.0, 2000.0, 3000.0])
    states = np.array([[0.0192, 0.0170, 1.33, 1.0, 0.15]])
    q, rho, _ = ttft_quantiles(1e-6, (0.0170, 0.0170, 1.33), S / 2000.0, 1.0, 1.0, S, states=states)
    assert rho == pytest.approx(1e-6)
    assert 1.5 <= q[2] <= 1.5 + 0.0192
    assert 1.0 <= q[0] <= 1.0 + 0.0192


def test_tails_against_the_simulator():
    # Llama-3.1-8B fp8 on an H100 with vLLM, Poisson arrivals at 30% and 85% of saturation; lengths
    # uniform. Measured (simulator seeds 0, 1, 2; 3,000 requests): at 30% the p99s are -6..-9% (TTFT)
    # and -3..-9% (TPOT) off the simulator's; at 85% -21..-36% (TTFT) and -18..+4% (TPOT), where
    # before the clumped steps and the occupancy model they were -59% and -54% on the MLPerf
    # workloads (the seed's scatter is 20% of a p99 there). They sit above their own medians.
    PROMPT, OUT = Uniform(500, 1500), Uniform(50, 400)
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=PROMPT, output=OUT, runtime="vllm", weight_dtype="fp8")
    cap = float(solve(sm, sched, PROMPT.mean, OUT.mean, concurrency=np.array([1e9])).request_rate[0])
    for load, tol_ttft, tol_tpot in ((0.3, 0.15, 0.15), (0.85, 0.4, 0.25)):
        lam = load * cap
        t = tails(sm, sched, solve(sm, sched, PROMPT.mean, OUT.mean, arrival_rate=np.array([lam])), lam, PROMPT, OUT)
        r = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=lam, prompt_tokens=PROMPT, output_tokens=OUT,
                     runtime="vllm", weight_dtype="fp8", engine="simulate", n_requests=3000)
        assert t.ttft[2] == pytest.approx(r.ttft.p99, rel=tol_ttft)
        assert t.tpot[2] == pytest.approx(r.tpot.p99, rel=tol_tpot)
        assert t.ttft[0] == pytest.approx(r.ttft.median, rel=0.15)
        assert t.ttft[2] > t.ttft[1] > t.ttft[0] and t.tpot[2] > t.tpot[0]
        assert 0.0 < t.rho < 1.0 and math.isfinite(t.ttft[2])


def test_tails_of_long_widely_spread_prompts_against_the_simulator():
    # MLPerf's Llama-3.1-405B shape (lengths as mlperf_validate builds them: prompts of mean 9,400 tokens,
    # 200..20,000, cv 0.6; outputs of mean 685, cv 1.2) in fp8 on 8 B200 under TensorRT-LLM: a step carrying
    # a full 8,192-token chunk lasts about 20 decode steps, so the prompts' queue and the steps that carry
    # them set the tails. Simulator, seeds 0 and 1, 2,000 requests each (benchmarks/tails_vs_simulator.py
    # prints more): at 50% of saturation TTFT p99 3.6 / 4.4 s against the model's 4.5, TPOT p99 66 / 81 ms
    # against 65; at 80% TTFT p99 6.1 / 6.9 s against 8.2, TPOT p99 189 / 292 ms against 200 (seed 2: 333).
    # Before the work ahead of a decoding request and the chunks' own arrivals (chunk_law), the model's TPOT
    # p99 was 42 ms at 50% and 88 ms at 80%, and with the prompts' room served at the mean step's pace
    # (not the full chunk's) its TTFT median 0.77 and 0.81 s: each of the asserts below failed.
    from membound.fidelity.mlperf_rows import length_distribution
    prompt, out = length_distribution(9400, 200, 20000, 0.6), length_distribution(685, 2, 20000, 1.2)
    kw = dict(prompt_tokens=prompt, output_tokens=out, runtime="tensorrt-llm", weight_dtype="fp8", n_chips=8)
    sm, sched, _ = build("llama-3.1-405b", "b200", prompt=prompt, output=out, runtime="tensorrt-llm",
                         weight_dtype="fp8", n_chips=8)
    cap = float(solve(sm, sched, prompt.mean, out.mean, concurrency=np.array([1e9])).request_rate[0])
    for load, tol_ttft, tol_tpot in ((0.5, 0.3, 0.3), (0.8, 0.35, 0.3)):
        lam = load * cap
        t = tails(sm, sched, solve(sm, sched, prompt.mean, out.mean, arrival_rate=np.array([lam])), lam, prompt, out)
        runs = [mb.serve("llama-3.1-405b", "b200", arrival_rate=lam, engine="simulate", n_requests=2000, seed=seed, **kw)
                for seed in (0, 1)]
        assert t.ttft[2] == pytest.approx(np.mean([r.ttft.p99 for r in runs]), rel=tol_ttft)
        assert t.tpot[2] == pytest.approx(np.mean([r.tpot.p99 for r in runs]), rel=tol_tpot)
        assert t.tpot[0] == pytest.approx(np.mean([r.tpot.median for r in runs]), rel=0.15)
        assert t.ttft[0] == pytest.approx(np.mean([r.ttft.median for r in runs]), rel=0.15)
