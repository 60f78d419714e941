"""The capacity planner: replicas, queueing, SLO checks, ranking, explanations."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.errors import InvalidInputError
from membound.planning.planner import _erlang_c, _wait_quantile

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
    # served (the default): 100 users, at most 32 clients per replica: ceil(100/32) = 4 replicas, each
    # then running ceil(100/4) = 25 clients; every figure is serve()'s at 25 clients
    w = mb.Workload(concurrent_users=100, prompt_tokens=1000, output_tokens=200)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(), hardware=["h100-sxm"], prices={"h100-sxm": 2.0},
                  weight_dtypes=["bf16"], n_chips=[1], batches=[32])
    row = res.best
    assert (row.replicas, row.clients_per_replica, row.total_chips) == (4, 25, 4)
    s = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=25, prompt_tokens=1000, output_tokens=200)
    assert row.tok_s_per_user == pytest.approx(s.tok_s_per_user, rel=1e-12)
    assert row.ttft_p90_s == pytest.approx(s.ttft.p90, rel=1e-12)
    tok_s = 100 / s.e2e.mean * 200                  # Little: 100 users, each in the system e2e seconds
    assert row.cost_per_million_tokens_usd == pytest.approx(4 * 2.0 / 3600 / tok_s * 1e6, rel=1e-9)


def test_static_closed_loop_replicas_and_cost_by_hand():
    # the explicit static bus: batches of 32 that prefill and decode together (estimate()'s schedule)
    w = mb.Workload(concurrent_users=100, prompt_tokens=1000, output_tokens=200)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(), hardware=["h100-sxm"], prices={"h100-sxm": 2.0},
                  weight_dtypes=["bf16"], n_chips=[1], batches=[32], batching="static")
    row = res.best
    # 100 users on 32 seats per replica: ceil(100/32) = 4 replicas, 100/128 = 78.1% of seats filled
    assert row.replicas == 4 and row.total_chips == 4
    assert row.utilisation == pytest.approx(100 / 128)
    big = mb.estimate("llama-3.1-8b", "h100-sxm", batch=32, prompt_tokens=1000, output_tokens=200)
    tok_s = 100 / big.e2e_s * 200                   # a seat is held for the batch's whole run
    assert row.tok_s_per_user == pytest.approx(1 / big.tpot_s)
    assert row.ttft_p90_s == pytest.approx(big.ttft_s)
    assert row.cost_per_million_tokens_usd == pytest.approx(4 * 2.0 / 3600 / tok_s * 1e6)
    assert row.power_kw == pytest.approx(4 * mb.load_hardware("h100-sxm").power_w / 1e3)


def test_queueing_adds_replicas_for_a_tight_ttft():
    # 50 requests/s: a replica near its capacity queues prompts; a tighter TTFT needs more replicas, each
    # taking rate / replicas, where serve() in an open loop gives the row's figures
    w = mb.Workload(arrival_rate_rps=50.0, prompt_tokens=1000, output_tokens=200)
    kw = dict(hardware=["h100-sxm"], prices={"h100-sxm": 2.0}, weight_dtypes=["bf16"], n_chips=[1], batches=[64])
    loose = mb.plan("llama-3.1-8b", w, mb.SLO(), **kw).best
    # a target between the loose fleet's TTFT and what 8 replicas give (the lone prompt's ~20 ms is the floor)
    eight = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=50.0 / 8, prompt_tokens=1000, output_tokens=200)
    target = (loose.ttft_p90_s + eight.ttft.p90) / 2
    tight = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=target), **kw).best
    assert loose.replicas < tight.replicas <= 8 and tight.ttft_p90_s <= target < loose.ttft_p90_s
    s = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=50.0 / tight.replicas, prompt_tokens=1000, output_tokens=200)
    assert s.ttft.p90 == pytest.approx(tight.ttft_p90_s, rel=1e-12)


def test_static_queueing_keeps_utilisation_below_its_cap():
    w = mb.Workload(arrival_rate_rps=5.0, prompt_tokens=1000, output_tokens=200)
    row = mb.plan("llama-3.1-8b", w, mb.SLO(), hardware=["h100-sxm"], prices={"h100-sxm": 2.0},
                  weight_dtypes=["bf16"], n_chips=[1], batches=[8], batching="static").best
    assert row.utilisation <= 0.9


def test_example_question_answer_meets_slos_when_rechecked():
    w = mb.Workload(concurrent_users=2000, prompt_tokens=2048, output_tokens=500)
    slo = mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30)
    res = mb.plan("llama-3.1-70b", w, slo, prices=PRICES)
    assert res.feasible and "meet the SLOs" in res.explanation
    costs = res.ranked.cost_per_million_tokens_usd.to_numpy()
    assert (costs[1:] >= costs[:-1]).all()
    for _, r in res.ranked.head(5).iterrows():
        assert r.replicas * r.clients_per_replica >= 2000
        s = mb.serve("llama-3.1-70b", r.hardware, concurrency=int(r.clients_per_replica), prompt_tokens=2048,
                     output_tokens=500, weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=int(r.n_chips))
        assert s.tok_s_per_user >= 30 and s.ttft.p90 <= 1.0
    assert set(res.frontier.hardware) <= set(PRICES) and len(res.frontier) > 0


def test_unmeetable_slo_explains_which_and_best_value():
    w = mb.Workload(concurrent_users=10, prompt_tokens=2048, output_tokens=100)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=1e-4, min_tok_s_per_user=20), hardware=["h100-sxm"])
    assert not res.feasible and len(res.ranked) == 0
    assert "TTFT p90 (s): best achieved" in res.explanation
    assert "per-user decode speed" in res.explanation and str(res).startswith("no configuration")
    static = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=1e-4, min_tok_s_per_user=20), hardware=["h100-sxm"],
                     batching="static")
    assert "TTFT p90 <= 0.0001 s: met by 0; best achieved" in static.explanation


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


@settings(max_examples=8, deadline=None)
@given(users=st.integers(1, 3000), tok_s=st.sampled_from([10, 30, 60]), ttft=st.sampled_from([0.5, 1.0, 3.0]),
       prompt=st.sampled_from([128, 1024, 4096]), output=st.sampled_from([64, 256, 1024]),
       runtime=st.sampled_from([None, "vllm", "sglang"]))
def test_property_every_row_of_the_plan_meets_its_slo_in_serve(users, tok_s, ttft, prompt, output, runtime):
    # issue 26: each row of the cheapest plan, re-checked with serve(), meets its SLO
    w = mb.Workload(concurrent_users=users, prompt_tokens=prompt, output_tokens=output)
    slo = mb.SLO(ttft_p90_s=ttft, min_tok_s_per_user=tok_s)
    res = mb.plan("llama-3.1-8b", w, slo, hardware=["h100-sxm", "h200"], n_chips=[1, 2], batches=[1, 8, 64, 256],
                  runtime=runtime)
    if not res.feasible:
        assert "best achieved" in res.explanation
        return
    for _, r in res.ranked.head(3).iterrows():
        assert r.replicas * r.clients_per_replica >= users
        s = mb.serve("llama-3.1-8b", r.hardware, concurrency=int(r.clients_per_replica), prompt_tokens=prompt,
                     output_tokens=output, weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=int(r.n_chips),
                     runtime=runtime)
        assert s.tok_s_per_user >= tok_s and s.ttft.p90 <= ttft
        assert s.tok_s_per_user == pytest.approx(r.tok_s_per_user, rel=1e-12)


@settings(max_examples=4, deadline=None)
@given(rate=st.floats(0.5, 50.0), ttft=st.sampled_from([0.5, 2.0]))
def test_property_a_rate_plans_rows_meet_their_slo_in_serve(rate, ttft):
    w = mb.Workload(arrival_rate_rps=rate, prompt_tokens=1024, output_tokens=256)
    res = mb.plan("llama-3.1-8b", w, mb.SLO(ttft_p90_s=ttft, min_tok_s_per_user=30), hardware=["h100-sxm"],
                  n_chips=[1], batches=[8, 64])
    for _, r in res.ranked.iterrows():
        s = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=rate / r.replicas, prompt_tokens=1024, output_tokens=256,
                     weight_dtype=r.weight_dtype)
        assert s.tok_s_per_user >= 30 and s.ttft.p90 <= ttft


def test_the_issues_200_user_task_has_one_answer_serve_confirms(capsys):
    # 200 users at >= 40 tok/s each, 2k prompts, 500-token answers on MI300X (issue 26): the Python API,
    # the CLI and the web page call one planner; serve() at the answer's clients per replica confirms it
    import json

    from membound.present.cli import main
    w = mb.Workload(concurrent_users=200, prompt_tokens=2048, output_tokens=500)
    best = mb.plan("llama-3.1-70b", w, mb.SLO(min_tok_s_per_user=40), hardware=["mi300x"]).best
    s = mb.serve("llama-3.1-70b", "mi300x", concurrency=int(best.clients_per_replica), prompt_tokens=2048,
                 output_tokens=500, weight_dtype=best.weight_dtype, kv_dtype=best.kv_dtype, n_chips=int(best.n_chips))
    assert s.tok_s_per_user >= 40 and s.tok_s_per_user == pytest.approx(best.tok_s_per_user, rel=1e-12)
    assert best.replicas == math.ceil(200 / best.clients_per_replica)
    assert main(["plan", "llama-3.1-70b", "mi300x", "--users", "200", "--prompt", "2048", "--output", "500",
                 "--tok-s", "40", "--json"]) == 0
    out = capsys.readouterr().out
    cli = json.loads(out)["ranked"][0]
    keys = ("n_chips", "weight_dtype", "clients_per_replica", "replicas", "chips_total")
    assert [cli[k] for k in keys] == [best[k] for k in keys]
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from membound.present.app.server import create_app
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:     # the Host a loopback app answers to
        web = client.post("/api/plan", json={
            "model": "llama-3.1-70b", "hardware": ["mi300x"], "concurrent_users": 200, "prompt_tokens": 2048,
            "output_tokens": 500, "min_tok_s_per_user": 40}).json()["ranked"][0]
    assert [web[k] for k in keys] == [best[k] for k in keys]


def test_a_p99_rate_plan_sizes_replicas_by_max_rate():
    # MLPerf's question as a plan: Poisson arrivals at 2.5 x the highest rate one replica serves with
    # p99 TTFT <= 2 s and p99 TPOT <= 50 ms (mb.max_rate, the same tails): ceil(2.5) = 3 replicas, and
    # serve() at rate / 3 (below that highest rate, where the p99s rise with the rate) meets both.
    slo = mb.SLO(ttft_p99_s=2.0, tpot_p99_s=0.05)
    top = mb.max_rate("llama-3.1-8b", "h100-sxm", slo=slo, prompt_tokens=1024, output_tokens=256,
                      weight_dtype="fp8", runtime="vllm")
    assert top.rate > 0.0 and top.binding in ("ttft_p99_s", "tpot_p99_s", "")
    w = mb.Workload(arrival_rate_rps=2.5 * top.rate, prompt_tokens=1024, output_tokens=256)
    res = mb.plan("llama-3.1-8b", w, slo, hardware=["h100-sxm"], prices={"h100-sxm": 2.0}, weight_dtypes=["fp8"],
                  n_chips=[1], batches=[8, 64], runtime="vllm", max_utilisation=1.0)
    row = res.best
    assert row.replicas == 3
    s = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=2.5 * top.rate / 3, prompt_tokens=1024, output_tokens=256,
                 weight_dtype="fp8", runtime="vllm")
    assert s.ttft.p99 <= 2.0 and s.tpot.p99 <= 0.05
    assert row.ttft_p99_s == pytest.approx(s.ttft.p99, rel=1e-12) and row.tpot_p99_s == pytest.approx(s.tpot.p99)


def test_p99_targets_are_checked():
    with pytest.raises(InvalidInputError, match="ttft_p99_s"):
        mb.SLO(ttft_p99_s=-1.0)
    with pytest.raises(InvalidInputError, match="tpot_p99_s"):
        mb.SLO(tpot_p99_s=float("nan"))
    w = mb.Workload(arrival_rate_rps=5.0, prompt_tokens=1024, output_tokens=256)
    with pytest.raises(InvalidInputError, match="batching='served'"):
        mb.plan("llama-3.1-8b", w, mb.SLO(tpot_p99_s=0.05), hardware=["h100-sxm"], batching="static")
