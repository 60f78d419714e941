"""mb.max_rate: the highest Poisson rate within latency limits, and the Offline saturation."""
import math

import numpy as np
import pytest

import membound as mb
from membound.planning import rate_search
from membound.planning.rate_search import limits_of, saturation, search
from membound.serving import Fixed, Scheduler, Uniform, build, solve
from membound.serving.tails import Tails, tails

PROMPT, OUT = Uniform(800, 1200), Uniform(100, 300)


def _engine():
    return build("llama-3.1-8b", "h100-sxm", prompt=PROMPT, output=OUT, runtime="tensorrt-llm", weight_dtype="fp8")


def test_a_server_search_lands_on_the_limit():
    # Set the p99 TPOT limit to what the tail model gives at 40% of saturation: TPOT rises with the
    # rate, so the search must land on that rate, with TPOT binding and its p99 on the limit. The p99 of
    # the discrete mixture (chunk counts, lengths, work ahead) moves in steps of about 0.1-0.3% as the rate
    # crosses its cells, not strictly monotone within a step: 0.9985 r0 gives 8.4418 ms, r0 8.4398 ms
    # (main at 363ddac), so the search may stop up to a step below r0: 0.5%.
    sm, sched, _ = _engine()
    cap = saturation(sm, sched, PROMPT, OUT)
    r0 = 0.4 * cap
    t0 = tails(sm, sched, solve(sm, sched, PROMPT.mean, OUT.mean, arrival_rate=np.array([r0])), r0, PROMPT, OUT)
    got = search(sm, sched, PROMPT, OUT, {"tpot_p99_s": t0.tpot[2], "ttft_p99_s": 10.0})
    assert got.rate == pytest.approx(r0, rel=5e-3)
    assert got.binding == "tpot_p99_s"
    assert got.tpot[2] == pytest.approx(t0.tpot[2], rel=5e-3) and got.tpot[2] <= t0.tpot[2]
    assert got.output_tok_s == pytest.approx(got.rate * OUT.mean)     # completed tokens: rate x mean output
    # the public entry point builds the same engine
    pub = mb.max_rate("llama-3.1-8b", "h100-sxm", slo={"tpot_p99_s": t0.tpot[2], "ttft_p99_s": 10.0},
                      prompt_tokens=PROMPT, output_tokens=OUT, runtime="tensorrt-llm", weight_dtype="fp8")
    assert pub.rate == pytest.approx(got.rate, rel=1e-9)


def test_a_server_search_lands_on_a_limit_derived_by_hand(monkeypatch):
    # Percentiles that rise with the rate as an M/M/1 queue's mean wait does: p99 TTFT = 0.5 s / (1 - r / cap),
    # cap the engine's saturation (the tail model replaced by that law). A 2 s limit is met while
    # 1 - r / cap >= 0.25: up to r = 0.75 cap. The search tries 13 rates geometric from 1% to 90% of cap
    # (ratio 90^(1/12) = 1.4550: ..., 0.42517, 0.61860, 0.90000) and 95, 98, 99.5%; the first to fail
    # is 0.9, the last to pass 0.6186, and 10 halvings of that bracket (0.2814 cap) leave the answer below
    # 0.75 cap by less than 0.2814 / 1024 = 0.000275 of cap, with TTFT binding.
    sm, sched, _ = _engine()
    cap = saturation(sm, sched, PROMPT, OUT)

    def law(sm_, sched_, st, rate, prompt, output, beams=1):
        x = 0.5 / (1.0 - rate / cap)
        return Tails((x, x, x), (0.01, 0.01, 0.01), 0.0, math.nan)
    monkeypatch.setattr(rate_search, "tails", law)
    got = search(sm, sched, PROMPT, OUT, {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2})
    assert got.binding == "ttft_p99_s"
    assert 0.75 * cap - 0.000275 * cap <= got.rate <= 0.75 * cap
    assert got.ttft[2] <= 2.0 and got.ttft[2] == pytest.approx(2.0, rel=0.002)     # 0.5 / 0.25 at the limit


def test_limits_nothing_meets_and_bad_limits():
    sm, sched, _ = _engine()
    none = search(sm, sched, PROMPT, OUT, {"tpot_p99_s": 1e-6})         # below one decode step: no rate passes
    assert none.rate == 0.0 and none.binding == "tpot_p99_s"
    # the engine saturates first: at the open loop's capacity, a little below the Offline saturation
    # (Poisson arrivals clump prompts into steps, which costs compute: serving.solver._State._clumped)
    loose = search(sm, sched, PROMPT, OUT, {"ttft_p99_s": 1e6, "tpot_p99_s": 1e6})
    assert loose.binding == "" and 0.9 * loose.saturation_rate <= loose.rate < loose.saturation_rate
    solve(sm, sched, PROMPT.mean, OUT.mean, arrival_rate=np.array([loose.rate * 0.999]))
    with pytest.raises(mb.InvalidInputError, match="capacity"):
        solve(sm, sched, PROMPT.mean, OUT.mean, arrival_rate=np.array([loose.rate * 1.01]))
    assert limits_of(mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=20.0)) == {"ttft_p90_s": 1.0, "tpot_p50_s": 0.05}
    for bad in ({"ttft_p95_s": 1.0}, {"ttft_p99_s": -1.0}, {}, 3.0, mb.SLO(e2e_p90_s=3.0)):
        with pytest.raises(mb.InvalidInputError):
            limits_of(bad)


def _kv_bound_engine():
    """Llama-3.1-8B in bf16 on one H100 SXM under TensorRT-LLM, 3,000-token prompts and 3,001-token
    outputs, an engine that reserves each request's whole KV (preemption "none") with no batch or token
    cap in reach; and the KV room in (layer, token) pairs of 4,096 B: 0.9 x (capacity - weights -
    activations) / 4,096."""
    S, T = 3000, 3001
    sched = Scheduler(max_running=4096, token_budget=16_384, chunked_prefill=True, preemption="none",
                      memory_fraction=0.9)
    sm, rs, _ = build("llama-3.1-8b", "h100-sxm", prompt=Fixed(S), output=Fixed(T), runtime="tensorrt-llm",
                      weight_dtype="bf16", kv_dtype="bf16", scheduler=sched)
    m, hw = mb.load_model("llama-3.1-8b"), mb.load_hardware("h100-sxm")
    act = float(sm.prepared.evaluate(batch=1.0, prompt=16384.0, output=1.0)["activation_bytes_chip"])
    room = 0.9 * (hw.capacity_bytes - m.total_params * 2 - act) / 4096
    return sm, rs, S, T, room


def test_offline_saturation_of_a_kv_bound_engine_by_hand():
    # Llama-3.1-8B in bf16 on one H100 SXM, 3,000-token prompts and 3,001-token outputs, an engine
    # that reserves each request's whole KV (preemption "none") with no batch or token cap in reach.
    # KV per token: 2 (K, V) x 32 layers x 8 heads x 128 dims x 2 B = 131,072 B, i.e. 4,096 B a
    # (layer, token) pair; a request reserves 32 x 6,001 = 192,032 pairs. The cache holds
    # 0.9 x (capacity - weights - activations) / 4,096 pairs, so the engine runs
    # b = that / 192,032 sequences at once, and completes b / (D tau) requests a second (D = 3,000).
    sm, rs, S, T, room = _kv_bound_engine()
    assert sm.kv_pair_bytes == 2 * 8 * 128 * 2                      # 4,096 B a pair
    b = room / (32 * (S + T))
    st = solve(sm, rs, S, T, concurrency=np.array([1e9]))
    assert float(st.running[0]) == pytest.approx(b, rel=1e-6)
    x = saturation(sm, rs, Fixed(S), Fixed(T))
    assert x == pytest.approx(b / ((T - 1) * float(st.tau[0])), rel=1e-6)


def test_offline_saturation_with_beams_by_hand():
    # gptj's rule: beam search of 4 beams, each request 4 sequences after one prefill; the beams share
    # the prompt's KV blocks (TensorRT-LLM's KVCacheManager.add_sequence), each holds its own tokens.
    # Llama-3.1-8B bf16 on an H100 as above (preemption "none" reserves a request's whole KV):
    # a beam holds 32 x (3,000 / 4 + 3,001) = 32 x 3,751 = 120,032 pairs (a request 4 x that:
    # 32 x 3,000 + 4 x 32 x 3,001), so b = room / 120,032 sequences decode at once, b / 4 requests,
    # completing b / (4 D tau) requests a second.
    sm, rs, S, T, room = _kv_bound_engine()
    b = room / (32 * (S / 4 + T))
    st = solve(sm, rs, S, T, concurrency=np.array([1e9]), beams=4)
    assert float(st.running[0]) == pytest.approx(b, rel=1e-6)
    x = saturation(sm, rs, Fixed(S), Fixed(T), beams=4)
    assert x == pytest.approx(b / (4 * (T - 1) * float(st.tau[0])), rel=1e-6)
    # one beam is the plain engine: the same figures as without the argument
    assert saturation(sm, rs, Fixed(S), Fixed(T), beams=1) == saturation(sm, rs, Fixed(S), Fixed(T))


def test_an_end_to_end_limit_lands_on_its_bound():
    # gptj's Server limit is a p99 end-to-end time; the search checks the bound
    # p99 TTFT + (p99 output - 1) x p99 TPOT, so a limit set to that bound at 40% of saturation lands there.
    sm, sched, _ = _engine()
    cap = saturation(sm, sched, PROMPT, OUT)
    r0 = 0.4 * cap
    t0 = tails(sm, sched, solve(sm, sched, PROMPT.mean, OUT.mean, arrival_rate=np.array([r0])), r0, PROMPT, OUT)
    assert t0.e2e_p99 == pytest.approx(t0.ttft[2] + (OUT.quantile(0.99) - 1) * t0.tpot[2], rel=1e-12)
    got = search(sm, sched, PROMPT, OUT, {"e2e_p99_s": t0.e2e_p99})
    assert got.binding == "e2e_p99_s" and got.rate == pytest.approx(r0, rel=5e-3)
