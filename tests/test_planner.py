"""The capacity planner: replicas, queueing, SLO checks, ranking, explanations."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.errors import InvalidInputError
from membound.planner import _erlang_c, _wait_quantile

PRICES = {"h100-sxm": 2.5, "h200": 3.5, "b200": 5.5, "mi300x": 2.5}


def test_erlang_c_by_hand():
    # M/M/2 with a = 1 Erlang: Erlang B(1,1) = 1/2, B(2,1) = (1 x 1/2) / (2 + 1/2) = 0.2,
    # C = 2 x 0.2 / (2 - 1 x (1 - 0.2)) = 0.4 / 1.2 = 1/3
    assert _erlang_c([2], [1.0])[0] == pytest.approx(1 / 3)
    # M/M/1: C = rho
    assert _erlang_c([1], [0.7])[0] == pytest.approx(0.7)
    # p90 wait, M/M/2, a = 1, D = 1 s: P(W > t) = (1/3) exp(-(2 - 1) t) = 0.1 -> t = ln(10/3) = 1.204 s;
    # M/D/c takes half: 0.602 s
    assert _wait_quantile(0.9, 2.0, 1.0, 1.0) == pytest.approx(0.5 * math.log(10 / 3))
    # p50: (1/3) < 0.5, so the median request does not wait
    assert _wait_quantile(0.5, 2.0, 1.0, 1.0) == 0.0


def test_closed_loop_replicas_and_cost_by_hand():
    w = mb.Workload(concurrent_users=100, prompt_tokens=1000, output_tokens=200)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(), hardware=["h100-sxm"], prices={"h100-sxm": 2.0},
                  weight_dtypes=["bf16"], n_chips=[1], batches=[32])
    row = res.best
    # 100 users on 32 seats per replica: ceil(100/32) = 4 replicas, 100/128 = 78.1% of seats filled
    assert row.replicas == 4 and row.total_chips == 4
    assert row.utilisation == pytest.approx(100 / 128)
    big = mb.estimate("llama-3.1-8b", "h100-sxm", batch=32, prompt_tokens=1000, output_tokens=200)
    one = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=1000, output_tokens=200)
    tok_time = big.tpot_s + big.prefill_s / 200            # decode step + share of the batch's prefills
    seat = one.prefill_s + 200 * tok_time                   # seconds a request holds its seat
    tok_s = 100 / seat * 200                                # output tokens per second delivered
    assert row.tok_s_per_user == pytest.approx(1 / tok_time)
    assert row.ttft_p90_s == pytest.approx(0.9 * tok_time + one.prefill_s)
    assert row.cost_per_million_tokens_usd == pytest.approx(4 * 2.0 / 3600 / tok_s * 1e6)
    assert row.power_kw == pytest.approx(4 * mb.load_hardware("h100-sxm").power_w / 1e3)


def test_queueing_adds_replicas_for_a_tight_ttft():
    w = mb.Workload(arrival_rate_rps=5.0, prompt_tokens=1000, output_tokens=200)
    kw = dict(hardware=["h100-sxm"], prices={"h100-sxm": 2.0}, weight_dtypes=["bf16"], n_chips=[1], batches=[8])
    loose = mb.plan("llama-3.1-8b", w, mb.SLO(), **kw).best
    tight = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=loose.ttft_p90_s * 0.8), **kw).best
    assert tight.replicas > loose.replicas and tight.ttft_p90_s < loose.ttft_p90_s
    assert loose.utilisation <= 0.9


def test_example_question_answer_meets_slos_when_rechecked():
    w = mb.Workload(concurrent_users=2000, prompt_tokens=2048, output_tokens=500)
    slo = mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30)
    res = mb.plan("llama-3.1-70b", w, slo, prices=PRICES)
    assert res.feasible and "meet the SLOs" in res.explanation
    costs = res.ranked.cost_per_million_tokens_usd.to_numpy()
    assert (costs[1:] >= costs[:-1]).all()
    for _, r in res.ranked.head(5).iterrows():
        assert r.replicas * r.batch >= 2000
        e = mb.estimate("llama-3.1-70b", r.hardware, batch=int(r.batch), prompt_tokens=2048, output_tokens=500,
                        weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=int(r.n_chips))  # fits
        assert e.decode_tok_s_per_user >= 30
        one = mb.estimate("llama-3.1-70b", r.hardware, batch=1, prompt_tokens=2048, output_tokens=500,
                          weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=int(r.n_chips))
        assert one.ttft_s <= r.ttft_p90_s <= 1.0
    assert set(res.frontier.hardware) <= set(PRICES) and len(res.frontier) > 0


def test_unmeetable_slo_explains_which_and_best_value():
    w = mb.Workload(concurrent_users=10, prompt_tokens=2048, output_tokens=100)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=1e-4, min_tok_s_per_user=20), hardware=["h100-sxm"])
    assert not res.feasible and len(res.ranked) == 0
    assert "TTFT p90 <= 0.0001 s: met by 0; best achieved" in res.explanation
    assert "per-user decode speed" in res.explanation and str(res).startswith("no configuration")


def test_nothing_fits_is_explained():
    w = mb.Workload(concurrent_users=10, prompt_tokens=2048, output_tokens=100)
    res = mb.plan("llama-3.1-405b", w, mb.SLO(), hardware=["rtx-4090"], prices={"rtx-4090": 0.5}, n_chips=[1])
    assert not res.feasible and "nothing fits" in res.explanation


@pytest.mark.parametrize("make", [
    lambda: mb.Workload(arrival_rate_rps=-1.0),
    lambda: mb.Workload(concurrent_users=0),
    lambda: mb.Workload(concurrent_users=5, arrival_rate_rps=1.0),
    lambda: mb.Workload(concurrent_users=5, prompt_tokens=[]),
    lambda: mb.Workload(concurrent_users=5, output_tokens={0: 1.0}),
    lambda: mb.SLO(ttft_p90_s=-1),
    lambda: mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=5), mb.SLO(), hardware=[]),
    lambda: mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=5), mb.SLO(), hardware=["h100-sxm"],
                    prices={"h100-sxm": -2.0}),
])
def test_bad_input_raises(make):
    with pytest.raises(InvalidInputError):
        make()


def test_length_distribution_quantiles():
    # {1024: 1, 2048: 2, 8192: 1}: mean (1024 + 4096 + 8192) / 4 = 3328, median 2048, p90 8192
    w = mb.Workload(arrival_rate_rps=1.0, prompt_tokens={1024: 1, 2048: 2, 8192: 1})
    assert w.lengths("prompt_tokens") == {"mean": 3328, "p50": 2048, "p90": 8192, "max": 8192}


@settings(max_examples=6, deadline=None)
@given(users=st.integers(1, 3000), tok_s=st.sampled_from([10, 30, 60]), ttft=st.sampled_from([0.5, 1.0, 3.0]))
def test_property_answers_meet_their_slos(users, tok_s, ttft):
    w = mb.Workload(concurrent_users=users, prompt_tokens=1024, output_tokens=256)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=ttft, min_tok_s_per_user=tok_s),
                  hardware=["h100-sxm", "h200"], n_chips=[1, 2], batches=[1, 8, 64, 256])
    if not res.feasible:
        assert "best achieved" in res.explanation
        return
    r = res.best
    assert r.replicas * r.batch >= users
    e = mb.estimate("llama-3.1-8b", r.hardware, batch=int(r.batch), prompt_tokens=1024, output_tokens=256,
                    weight_dtype=r.weight_dtype, n_chips=int(r.n_chips))
    assert e.decode_tok_s_per_user >= tok_s and r.ttft_p90_s <= ttft
