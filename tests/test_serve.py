"""serve(): continuous batching under load. Hand-derived cases, laws, bad input."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving import build, simulate

H100_BW = 3.35e12                 # B/s
L8B = 8_030_261_248               # Llama-3.1-8B parameters
LOOKUP_8B = 128256 * 4096         # untied input embedding: decode reads only the looked-up rows
KV_8B = 2 * 32 * 8 * 128 * 2      # bytes per cached token: K and V, 32 layers, 8 heads x 128, bf16


def w8b(tokens):
    """bf16 weight bytes one step of `tokens` tokens streams (embedding rows looked up)."""
    return 2 * (L8B - LOOKUP_8B + tokens * 4096)


@pytest.mark.parametrize("engine", ["solver", "simulate"])
def test_one_client_is_estimate_at_batch_one(engine):
    # One client in a closed loop: its prompt is prefilled alone (nothing else runs), then it
    # decodes alone, so TTFT is estimate()'s prefill at batch 1 and each decode step is
    # estimate()'s step at batch 1. The solver uses the mean context S + (T-1)/2, exactly the
    # mean of estimate()'s T steps (memory-bound, affine in context); the simulator runs the
    # T-1 steps after the first token, at contexts S .. S+T-2 = estimate(output_tokens=T-1).
    kw = dict(prompt_tokens=1000, weight_dtype="fp8", kv_dtype="fp8", runtime="device")
    r = mb.serve("llama-3.3-70b", "h200", concurrency=1, output_tokens=200, engine=engine, **kw)
    e = mb.estimate("llama-3.3-70b", "h200", batch=1, output_tokens=200 if engine == "solver" else 199, **kw)
    assert r.ttft.median == pytest.approx(e.ttft_s, rel=1e-9)
    assert r.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)
    assert r.mean_running <= 1.0
    if engine == "solver":
        # Little's law with one client: one request per end-to-end time
        assert r.e2e.mean == pytest.approx(e.e2e_s, rel=1e-9)
        assert r.requests_per_s == pytest.approx(1.0 / e.e2e_s, rel=1e-9)
        assert r.output_tok_s == pytest.approx(200 / e.e2e_s, rel=1e-9)


def test_two_staggered_sequences_by_hand():
    # Llama-3.1-8B bf16 on one H100, pure roofline ("ideal": peak bandwidth, no floor or
    # overhead); prompts of 1 token, 3 output tokens; A arrives at 0, B at 1 ms (mid-step).
    # Every step is memory-bound (16 GFLOP per token vs 15 GB per step), so a step takes
    # (weights for its tokens + KV it reads or writes) / 3.35e12 s.
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1), output=mb.serving.Fixed(3), runtime="ideal")
    tr = simulate(sm, sched, np.array([1, 1]), np.array([3, 3]), arrivals=np.array([0.0, 1e-3]))
    t1 = (w8b(1) + 1 * KV_8B) / H100_BW            # prefill A (writes 1 token of KV)
    t2 = t1 + (w8b(2) + 2 * KV_8B) / H100_BW       # A decodes at context 1, B prefills 1 token
    t3 = t2 + (w8b(2) + 3 * KV_8B) / H100_BW       # A at context 2, B at context 1: A's 3rd token
    t4 = t3 + (w8b(1) + 2 * KV_8B) / H100_BW       # B alone at context 2: B's 3rd token
    assert t1 > 1e-3                               # B arrived during A's prefill step
    assert tr.first == pytest.approx([t1, t2], rel=1e-9)
    assert tr.done == pytest.approx([t3, t4], rel=1e-9)
    ttft = tr.first - tr.arrive
    assert ttft == pytest.approx([t1, t2 - 1e-3], rel=1e-9)
    # running batch integral = 1 sequence over [t1, t2], 2 over [t2, t3], 1 over [t3, t4]
    assert tr.busy == pytest.approx((t2 - t1) + 2 * (t3 - t2) + (t4 - t3), rel=1e-9)


def test_a_prefill_chunk_pays_one_lm_head_per_prompt():
    # Llama-3.1-8B bf16 on one ideal H100 (989 TFLOP/s, no overheads). 1000 prefill tokens are
    # compute-bound (2 x 7.5e9 x 1000 = 1.5e13 FLOP, 15 ms, against 15 GB of weights, 4.5 ms).
    # Each prompt in the step computes logits for its last token only: one LM-head row,
    # 2 x 128,256 x 4,096 FLOP = 1.0507e9 -> 1.062 us; the same 1000 tokens split over 2
    # prompts cost one more row (no attention pairs given: cp = 0).
    sm, _, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(2), runtime="ideal")
    head = 2 * 128256 * 4096 / 989e12
    assert sm.head == pytest.approx(head, rel=1e-9)
    one = float(sm.step(0.0, 0.0, 1000.0, 1000.0, 0.0, seqs=1.0))
    two = float(sm.step(0.0, 0.0, 1000.0, 1000.0, 0.0, seqs=2.0))
    assert two - one == pytest.approx(head, rel=1e-6)
    # and the per-token GEMMs exclude the head: 2 x (8,030,261,248 - 2 x 525,336,576) FLOP
    assert sm.prefill_token_s == pytest.approx(2 * (L8B - 2 * LOOKUP_8B) / 989e12, rel=1e-9)


def test_a_runtime_computing_every_positions_logits_pays_the_head_per_prefill_token():
    # The same ideal H100 with prefill_logits "all" (transformers before v4.45): the LM head is a
    # row per prompt token, so the per-token GEMMs are 2 x (8,030,261,248 - 525,336,576) FLOP
    # (only the untied input embedding, a lookup, is not multiplied) and no row is paid per prompt
    from membound.catalog.runtime import IDEAL
    every = IDEAL.model_copy(update={"name": "ideal-all-logits", "prefill_logits": "all"})
    sm, _, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(2), runtime=every)
    assert sm.head == 0.0
    assert sm.prefill_token_s == pytest.approx(2 * (L8B - LOOKUP_8B) / 989e12, rel=1e-9)
    one = float(sm.step(0.0, 0.0, 1000.0, 1000.0, 0.0, seqs=1.0))
    two = float(sm.step(0.0, 0.0, 1000.0, 1000.0, 0.0, seqs=2.0))
    assert two == pytest.approx(one, rel=1e-12)


def test_littles_law_in_the_simulator():
    # The integral of the running batch over time equals the sum of the requests' decode
    # residences (L x time = sum of W), with Poisson arrivals and uniform lengths.
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Uniform(200, 600), output=mb.serving.Uniform(50, 150),
                         runtime="vllm")
    rng = np.random.default_rng(3)
    n = 300
    S, T = rng.integers(200, 601, n), rng.integers(50, 151, n)
    tr = simulate(sm, sched, S, T, arrivals=np.cumsum(rng.exponential(1 / 20.0, n)))
    assert np.all(tr.done > tr.first) and np.all(tr.first > tr.arrive)
    assert tr.busy == pytest.approx(float(np.sum(tr.done - tr.first)), rel=1e-9)
    assert tr.preemptions == 0


REFERENCE = [   # InferenceMAX-like workloads: lengths uniform in [0.8 L, L]
    dict(model="llama-3.3-70b", hardware="h200", n_chips=1, weight_dtype="fp8", concurrency=16, L=(1024, 1024)),
    dict(model="llama-3.3-70b", hardware="h200", n_chips=4, weight_dtype="fp8", concurrency=64, L=(8192, 1024)),
    dict(model="gpt-oss-120b", hardware="b200", n_chips=2, weight_dtype="mxfp4", concurrency=32, L=(1024, 8192)),
]


@pytest.mark.parametrize("runtime", ["vllm", "sglang", "tensorrt-llm"])
@pytest.mark.parametrize("case", REFERENCE, ids=lambda c: f"{c['model']}-{c['hardware']}x{c['n_chips']}-c{c['concurrency']}")
def test_solver_agrees_with_simulator_on_means(case, runtime):
    c = dict(case)
    s_len, o_len = c.pop("L")
    kw = dict(c, kv_dtype="fp8", runtime=runtime, prompt_tokens=mb.serving.Uniform(int(0.8 * s_len), s_len),
              output_tokens=mb.serving.Uniform(int(0.8 * o_len), o_len))
    a = mb.serve(engine="solver", **kw)
    b = mb.serve(engine="simulate", seed=1, **kw)
    assert a.tpot.mean == pytest.approx(b.tpot.mean, rel=0.05)
    assert a.output_tok_s == pytest.approx(b.output_tok_s, rel=0.05)
    assert a.mean_running == pytest.approx(b.mean_running, rel=0.05)


def test_kv_cache_caps_running_sequences_instead_of_refusing():
    # 70B fp8 on one H200 at 1k/8k and 32 clients: 32 x 9k tokens x 160 kB (fp8 KV, 80 layers x
    # 8 heads x 128 x 2) = 47 GB would not fit beside 70 GB of weights at full length, but the
    # server ran it: the running batch is capped by the cache, the rest wait.
    r = mb.serve("llama-3.3-70b", "h200", concurrency=32, prompt_tokens=mb.serving.Uniform(819, 1024),
                 output_tokens=mb.serving.Uniform(6553, 8192), weight_dtype="fp8", kv_dtype="fp8", runtime="vllm")
    assert r.output_tok_s > 0 and r.mean_running <= 32
    assert 0 < r.kv_occupancy <= 1.0


TOL = 1e-6   # the solver's root is found to ln(1e9) / 23^7 = 6e-9 relative (serve._root)


def _scaled(hw, bw):
    hw = mb.load_hardware(hw)
    return hw.with_overrides(memory=[dict(t.model_dump(), bandwidth_bytes_s=t.bandwidth_bytes_s * bw) for t in hw.memory])


served_cfg = st.fixed_dictionaries(dict(
    model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b"]),
    hardware=st.sampled_from(["h100-sxm", "h200", "mi300x"]),
    runtime=st.sampled_from(["vllm", "sglang", "tensorrt-llm"]),
    prompt_tokens=st.integers(1, 8192), output_tokens=st.integers(2, 2048),
    weight_dtype=st.sampled_from(["bf16", "fp8"])))


@settings(max_examples=15, deadline=None)
@given(served_cfg, st.integers(1, 256), st.integers(1, 256))
def test_more_concurrency_never_raises_speed_per_user(cfg, n, more):
    lo = mb.serve(concurrency=n, **cfg)
    hi = mb.serve(concurrency=n + more, **cfg)
    assert hi.tok_s_per_user <= lo.tok_s_per_user * (1 + TOL)


@settings(max_examples=15, deadline=None)
@given(served_cfg, st.integers(1, 256), st.floats(1.01, 10))
def test_more_bandwidth_never_slows_anything(cfg, n, factor):
    # Closed loop: a client's whole request (e2e) and the throughput never get worse. (TPOT
    # alone may rise a little: with shorter prefills more of the clients decode at once.)
    base = mb.serve(concurrency=n, **cfg)
    fast = mb.serve(concurrency=n, **{**cfg, "hardware": _scaled(cfg["hardware"], factor)})
    assert fast.e2e.mean <= base.e2e.mean * (1 + TOL)
    assert fast.output_tok_s >= base.output_tok_s * (1 - TOL)
    # Open loop at the same rate: every latency falls or stays.
    rate = 0.5 * base.requests_per_s
    base = mb.serve(arrival_rate=rate, **cfg)
    fast = mb.serve(arrival_rate=rate, **{**cfg, "hardware": _scaled(cfg["hardware"], factor)})
    for q in ("tpot", "ttft", "e2e"):
        assert getattr(fast, q).mean <= getattr(base, q).mean * (1 + TOL)


@pytest.mark.parametrize("kwargs, field", [
    (dict(concurrency=0), "concurrency"),
    (dict(arrival_rate=-1.0), "arrival_rate"),
    (dict(concurrency=4, prompt_tokens=5, output_tokens=1), "output_tokens"),
    (dict(concurrency=4, engine="exact"), "engine"),
    (dict(concurrency=4, arrival_rate=1.0), "concurrency"),
])
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(mb.MemboundError, match=field):
        mb.serve("llama-3.1-8b", "h100-sxm", **kwargs)


def test_bad_lengths_and_scheduler_name_the_field():
    with pytest.raises(mb.MemboundError, match="Uniform.lo"):
        mb.serving.Uniform(300, 200)
    with pytest.raises(mb.MemboundError, match="scheduler.token_budget"):
        mb.serving.Scheduler(max_running=64, token_budget=32)
    with pytest.raises(mb.MemboundError, match="scheduler.token_budget"):   # against the engine default
        mb.serve("llama-3.1-8b", "h100-sxm", concurrency=4, scheduler=mb.serving.Scheduler(token_budget=100))
    with pytest.raises(mb.MemboundError, match="scheduler.preemption"):
        mb.serving.Scheduler(preemption="drop")


def test_arrival_rate_beyond_capacity_is_an_error_not_an_infinity():
    with pytest.raises(mb.MemboundError, match="arrival_rate"):
        mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=1e6, prompt_tokens=512, output_tokens=128)


def test_the_simulator_refuses_a_run_too_long_to_finish_and_the_solver_takes_it():
    # 10 requests per client: 20,001 clients would be 200,010 requests (minutes of Python at ~0.5 ms
    # each; 10**8 clients, 10**9 requests, would never end); the steady-state solver does not grow
    # with the load and answers
    with pytest.raises(mb.InvalidInputError, match=r"concurrency=20001 .*at most 20,000 clients.*engine='solver'"):
        mb.serve("llama-3.1-8b", "h100-sxm", concurrency=20_001, engine="simulate")
    with pytest.raises(mb.InvalidInputError, match=r"n_requests=200001 .*from 1 to 200,000"):
        mb.serve("llama-3.1-8b", "h100-sxm", concurrency=4, engine="simulate", n_requests=200_001)
    assert mb.serve("llama-3.1-8b", "h100-sxm", concurrency=10**8).tpot.median > 0
    for seed in (-1, 1.5, True):
        with pytest.raises(mb.InvalidInputError, match="seed="):
            mb.serve("llama-3.1-8b", "h100-sxm", concurrency=2, engine="simulate", seed=seed)


def test_serve_goes_past_the_context_window_only_when_asked_as_estimate_does():
    # Llama-3.1-8B's window is 131,072 tokens: a 200,000-token prompt is refused, naming the switch
    with pytest.raises(mb.InvalidInputError, match=r"context window of 131,072.*allow_beyond_context=True"):
        mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=200_000, output_tokens=100)
    r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=200_000, output_tokens=100,
                 allow_beyond_context=True)
    assert r.ttft.median > 0


def test_result_renders_and_flattens():
    r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=8, prompt_tokens=512, output_tokens=128)
    d = r.to_dict()
    assert d["ttft_median_s"] == r.ttft.median and d["scheduler_token_budget"] == 8192
    assert "TTFT" in str(r) and "<table" in r._repr_html_()
    assert len(r.to_pandas()) == 1


def test_cli_serve_table_json_and_bad_input(capsys):
    import json

    from membound.present.cli import main
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "1,8", "--prompt", "512", "--output", "64"]) == 0
    out = capsys.readouterr().out
    assert "tok/s/user" in out and out.count("\n") == 6          # title, header, rule, 2 rows, calibration
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["concurrency"] == 2 and rows[0]["runtime"] == "device"      # the one default rule
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "concurrency" in err
    # the library's words come back as the flags: --requests, --allow-beyond-context, both accepted
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--engine", "simulate", "--requests", "0"]) == 2
    assert "--requests=0 is invalid" in capsys.readouterr().err
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "1", "--prompt", "200000"]) == 2
    assert "(--allow-beyond-context estimates past it)" in capsys.readouterr().err
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "2", "--engine", "simulate",
                 "--requests", "200", "--prompt", "200000", "--output", "16", "--allow-beyond-context"]) == 0


def test_served_planner_rows_are_serve_results_under_the_slo():
    from membound.planning.planner import plan_served
    slo = mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30)
    plan = plan_served("llama-3.1-8b", slo, users=500, prompt_tokens=1024, output_tokens=256,
                       hardware=["h100-sxm", "h200"], weight_dtypes=["fp8"], chips=(1, 2), runtime="vllm")
    assert plan.feasible
    best = plan.ranked.iloc[0]
    r = mb.serve("llama-3.1-8b", best["hardware"], concurrency=int(best["clients_per_replica"]),
                 prompt_tokens=1024, output_tokens=256, weight_dtype="fp8", kv_dtype=best["kv_dtype"],
                 n_chips=int(best["n_chips"]), runtime="vllm")
    assert best["tpot_s"] == pytest.approx(r.tpot.mean, rel=1e-12)
    assert r.ttft.p90 <= 1.0 and r.tok_s_per_user >= 30
    # 500 users at c clients per replica: ceil(500 / c) replicas; the fleet's price over its tokens
    assert best["replicas"] == -(-500 // int(best["clients_per_replica"]))
    tok_s = 500 / best["e2e_s"] * 256
    assert best["cost_per_million_output_tokens_usd"] == pytest.approx(best["usd_per_hour"] / 3600 / tok_s * 1e6)


def test_serve_curve_is_serve_at_each_concurrency():
    from membound.serving import serve_curve
    c = serve_curve("llama-3.1-8b", "h100-sxm", concurrency=[1, 8, 64], prompt_tokens=512, output_tokens=128)
    for i, n in enumerate([1, 8, 64]):
        r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=n, prompt_tokens=512, output_tokens=128)
        assert c.tok_s_per_user[i] == pytest.approx(r.tok_s_per_user, rel=1e-6)
        assert c.output_tok_s_per_chip[i] == pytest.approx(r.output_tok_s_per_chip, rel=1e-6)
    assert np.all(np.diff(c.tok_s_per_user) <= 0) and np.all(np.diff(c.output_tok_s_per_chip) >= 0)


def test_weights_that_leave_no_room_are_does_not_fit():
    with pytest.raises(mb.DoesNotFitError):
        mb.serve("llama-3.3-70b", "h100-sxm", concurrency=1, weight_dtype="bf16", n_chips=1)


def test_fast_mode_and_bus_fare_are_read_off_the_served_curve():
    c = mb.serve_curve("llama-3.3-70b", "h200", n_chips=8, weight_dtype="fp8", kv_dtype="fp8",
                       prompt_tokens=2048, output_tokens=512, concurrency=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    t = c.output_tok_s_per_chip
    knee = c.knee()
    k = list(c.concurrency).index(knee)
    assert t[k] >= 0.8 * t.max() and (k == 0 or t[k - 1] < 0.8 * t.max())
    fm = c.fast_mode(2.5)
    assert fm.slow_concurrency == knee and fm.fast_concurrency < knee
    assert fm.fast_tok_s_per_user == pytest.approx(2.5 * c.tok_s_per_user[k])
    # a chip-hour costs the same: price ratio = standard lane's throughput / the fast lane's,
    # the fast lane's throughput log-interpolated between the two client counts around it
    j = int(np.searchsorted(-c.tok_s_per_user, -fm.fast_tok_s_per_user))     # speeds fall with clients
    w = (np.log(fm.fast_tok_s_per_user) - np.log(c.tok_s_per_user[j - 1])) / \
        (np.log(c.tok_s_per_user[j]) - np.log(c.tok_s_per_user[j - 1]))
    t_fast = np.exp(np.log(t[j - 1]) + w * (np.log(t[j]) - np.log(t[j - 1])))
    assert fm.price_ratio == pytest.approx(t[k] / t_fast, rel=1e-9)
    assert c.bus_fare(int(c.concurrency[np.argmax(t)])) == pytest.approx(1.0)
    assert c.bus_fare(1) == pytest.approx(t.max() / t[0])
    with pytest.raises(mb.MemboundError, match="speedup"):
        c.fast_mode(1000.0)


def test_served_curve_plot_draws_one_line_per_device():
    import matplotlib
    matplotlib.use("Agg")
    ax = mb.plots.served_curve("llama-3.1-8b", ["h100-sxm", ("h200", 1)], concurrency=[1, 4, 16], n_chips=1,
                               prompt_tokens=512, output_tokens=128, weight_dtype="bf16")
    assert len(ax.lines) == 2 and ax.get_xlabel().startswith("tok/s per user")


def test_cli_plan_served(capsys):
    from membound.present.cli import main
    assert main(["plan", "llama-3.1-8b", "h100-sxm", "--users", "100", "--ttft", "1", "--tok-s", "30",
                 "--weights", "fp8"]) == 0         # served physics: plan's default
    out = capsys.readouterr().out
    assert "clients_per_replica" in out and "meet the SLO" in out


def test_length_std_by_hand():
    # discrete uniform on 819..1024: 206 values, variance (206^2 - 1) / 12 = 42435 / 12 = 3536.25
    assert mb.serving.Uniform(819, 1024).std == pytest.approx(3536.25 ** 0.5, rel=1e-12)
    assert mb.serving.Fixed(700).std == 0.0
    assert mb.serving.Samples((100, 300)).std == pytest.approx(100.0)       # population std of {100, 300}


def test_finite_run_share_by_hand():
    from statistics import NormalDist

    from membound.serving import finite_run_share
    out = mb.serving.Uniform(819, 1024)                 # std 59.466 tokens (above), mean 921.5
    # N = 4 clients, 10 requests each: m_4 = Phi^-1((4 - 0.375) / (4 + 0.25)) = Phi^-1(0.852941) = 1.0491;
    # the last client ends 1.0491 x sqrt(10) x 59.466 = 197.3 decode steps after the median one; at
    # tau0 = 4 ms a step and e2e = 5 s the run lasts 10 x 5 + 0.004 x 197.3 = 50.789 s instead of 50 s
    m4 = NormalDist().inv_cdf(3.625 / 4.25)
    assert m4 == pytest.approx(1.0491, abs=1e-4)
    spread = m4 * 10 ** 0.5 * 3536.25 ** 0.5
    assert spread == pytest.approx(197.3, abs=0.1)
    share = finite_run_share(5.0, 0.004, out, [1, 4])
    assert share[1] == pytest.approx(50.0 / (50.0 + 0.004 * spread), rel=1e-12)   # 0.98446
    assert share[0] == 1.0                      # one client: no drain (m_1 = Phi^-1(0.5) = 0)
    # a million clients: m = 4.9, 4.9 x 3.162 x 59.5 = 922 steps > half an output (460.75): capped
    assert finite_run_share(5.0, 0.004, out, [10 ** 6])[0] == pytest.approx(50.0 / (50.0 + 0.004 * 460.75), rel=1e-12)
    assert finite_run_share(5.0, 0.004, mb.serving.Fixed(1000), [64])[0] == 1.0     # equal lengths stay in phase
    # one request per client (runs may vary with the clients): 4 clients end 1.0491 x sqrt(1) x
    # 59.466 = 62.39 steps apart, so 5 / (5 + 0.004 x 62.39) = 0.95246
    share = finite_run_share(5.0, 0.004, out, [4, 4], runs=[1.0, 10.0])
    assert share[0] == pytest.approx(5.0 / (5.0 + 0.004 * m4 * 3536.25 ** 0.5), rel=1e-12)
    assert share[0] == pytest.approx(0.95246, abs=1e-5)
    assert share[1] == pytest.approx(50.0 / (50.0 + 0.004 * spread), rel=1e-12)


def test_finite_run_share_matches_the_simulated_run():
    # The same protocol simulated request by request: 16 clients, 160 requests sent 16 at once,
    # output tokens over the time the last one ends, against the solver's steady rate x share.
    from membound.serving import run_share, solve
    P, out = mb.serving.Uniform(819, 1024), mb.serving.Uniform(819, 1024)
    sm, sched, _ = build("llama-3.3-70b", "h200", prompt=P, output=out, weight_dtype="fp8", kv_dtype="fp8",
                         n_chips=8, runtime="vllm")
    st = solve(sm, sched, P.mean, out.mean, concurrency=np.array([16.0]))
    rates = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        S, T = P.sample(rng, 160), out.sample(rng, 160)
        tr = simulate(sm, sched, S, T, concurrency=16)
        rates.append(T.sum() / tr.done.max())
    steady = st.request_rate[0] * out.mean
    assert float(np.mean(rates)) == pytest.approx(steady * run_share(sm, st, out, [16.0])[0], rel=0.01)
    assert float(np.mean(rates)) < 0.99 * steady          # the drain costs the run more than 1%


def test_served_all_reduce_moves_the_16_bit_residual_stream_even_for_fp8_gemms():
    # Llama-3.3-70B fp8 on 2 x H200 (NVLink 450 GB/s each way, 3 us per hop, switched: 2 hops):
    # 80 layers x 2 all-reduces of 1000 tokens x 8192 hidden x 2 bytes (bf16, not fp8's 1 byte),
    # each chip moving 2 (tp - 1) / tp = 1 of the volume:
    # 160 x (16.384e6 / 4.5e11 + 2 x 3e-6) = 160 x 4.2409e-5 = 6.785 ms
    sm, _, p = build("llama-3.3-70b", "h200", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(100), weight_dtype="fp8",
                     kv_dtype="fp8", n_chips=2, runtime="vllm")
    assert p.resolved.activations.name == "fp8"
    assert float(sm.terms(0.0, 1000.0).comm) == pytest.approx(160 * (16.384e6 / 4.5e11 + 6e-6), rel=1e-6)


def test_moe_expert_rows_are_work_at_the_moes_compute_rate():
    # gpt-oss-120b: 128 experts of 3 x 2880 x 2880 + 3 x 2880 (biases) = 24,891,840 params. 4 rows of
    # every expert: 2 x 4 x 128 x 24,891,840 = 1024 x 24,891,840 = 2.54892e10 FLOPs per MoE layer per step,
    # at the runtime's compute fraction c of the experts' format's dense peak (the step's overhead terms,
    # with and without the rows, differ by that over the MoE layers)
    flops = 2 * 4 * 128 * (3 * 2880 * 2880 + 3 * 2880)
    assert flops == pytest.approx(2.54892e10, rel=1e-5)

    def per_layer(runtime, model, device, **kw):
        over = []
        for rows in (4.0, 0.0):
            sm, _, _ = build(model, device, prompt=mb.serving.Fixed(100), output=mb.serving.Fixed(10),
                             runtime=_served_runtime(runtime, moe_expert_rows=rows), **kw)
            over.append(float(sm.terms(1.0).over))
        return (over[0] - over[1]) / float(mb.load_model(model).n_moe_layers or 1), sm.eff.compute_fraction

    # H200: mxfp4 experts dequantized to bf16 (989 TFLOP/s): 2.54892e10 / (989e12 c) per layer (51.5 us at
    # c = 0.5), whatever the tensor parallelism
    for tp in (1, 8):
        got, c = per_layer("vllm", "gpt-oss-120b", "h200", weight_dtype="mxfp4", n_chips=tp)
        assert got == pytest.approx(flops / (989e12 * c), rel=1e-9)
    # B200 computes mxfp4 natively (9 PFLOP/s dense fp4): 2.54892e10 / (9e15 c)
    got, c = per_layer("vllm", "gpt-oss-120b", "b200", weight_dtype="mxfp4")
    assert got == pytest.approx(flops / (9e15 * c), rel=1e-9)
    # expert parallelism: DeepSeek-R1's 256 experts (3 x 7168 x 2048 = 44,040,192 params) over ep=8
    # leave 32 on a chip, computed in fp8 on H200 (1979 TFLOP/s): 2 x 4 x 32 x 44,040,192 / (1979e12 c)
    got, c = per_layer("sglang", "deepseek-r1", "h200", weight_dtype="fp8", kv_dtype="fp8", n_chips=8,
                       parallel=mb.Parallel(ep=8))
    assert got == pytest.approx(2 * 4 * 32 * 44040192 / (1979e12 * c), rel=1e-9)
    # a dense model has no experts: nothing to pay
    got, _ = per_layer("vllm", "llama-3.3-70b", "h200", weight_dtype="fp8")
    assert got == 0.0


def _served_runtime(name, **served):
    """A bundled runtime with some of its served figures replaced (everything else as bundled)."""
    rt = mb.load_runtime(name)
    return rt.model_copy(update={"served": rt.served.model_copy(update=served)})


def test_dp_attention_ranks_pay_their_own_sequences_and_one_dispatch_and_combine_per_moe_layer():
    # DeepSeek-R1 (61 layers, 58 of them MoE) on 8 x H200. With DP attention (ep=8) each rank
    # schedules, samples and reads the KV of its own b / 8 sequences at once, so a per-sequence cost
    # of 1 ms comes to 1 ms / 8 = 125 us per running sequence of the instance; with tp=8 one scheduler
    # runs them all: 1 ms each. 64 sequences: 64 / 8 x 1 ms = 8 ms a step, against 64 ms.
    # The expert-parallel dispatch and combine (2 per MoE layer) add 2 x 58 x 100 us = 11.6 ms a step
    # under ep=8, nothing under tp=8 (its MoE layer all-reduces instead, with the core's link terms).
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(100), weight_dtype="fp8", kv_dtype="fp8", n_chips=8)
    steps = {}
    for layout in (mb.Parallel(ep=8), mb.Parallel(tp=8)):
        for a2a in (0.0, 1e-4):
            rt = _served_runtime("sglang", per_sequence_s=1e-3, per_alltoall_s=a2a)
            sm, _, _ = build("deepseek-r1", "h200", parallel=layout, runtime=rt, **kw)
            steps[layout.ep, a2a] = sm

    def per_seq(sm):        # what one more decoding sequence adds to a step's overheads
        return float(sm.terms(2.0).over - sm.terms(1.0).over)

    def per_step(sm):       # a one-sequence step's overheads
        return float(sm.terms(1.0).over)
    assert per_seq(steps[8, 0.0]) == pytest.approx(1e-3 / 8, rel=1e-9)
    assert per_seq(steps[1, 0.0]) == pytest.approx(1e-3, rel=1e-9)
    assert 64 * per_seq(steps[8, 0.0]) == pytest.approx(8e-3, rel=1e-9)
    assert per_step(steps[8, 1e-4]) - per_step(steps[8, 0.0]) == pytest.approx(2 * 58 * 1e-4, rel=1e-9)
    assert per_step(steps[1, 1e-4]) == pytest.approx(per_step(steps[1, 0.0]), rel=1e-12)


def test_scheduler_limits_per_rank_or_per_instance_as_each_engine_counts_them():
    # TensorRT-LLM's max_batch_size / max_num_tokens are each attention-DP rank's: 4 ranks of
    # 100 sequences and 1000 tokens run 400 and 4000. SGLang divides its flags over the DP ranks:
    # the instance keeps 100 and 1000. Without DP attention (tp=4) both are the instance's.
    from membound.serving import Scheduler
    sched = Scheduler(max_running=100, token_budget=1000)
    kw = dict(prompt=mb.serving.Fixed(500), output=mb.serving.Fixed(100), weight_dtype="fp8", kv_dtype="fp8", n_chips=4,
              scheduler=sched)
    got = {}
    for rt in ("tensorrt-llm", "sglang"):
        for layout in (mb.Parallel(ep=4), mb.Parallel(tp=4)):
            _, s, _ = build("deepseek-r1", "b200", parallel=layout, runtime=rt, **kw)
            got[rt, layout.ep] = (s.max_running, s.token_budget)
    assert got["tensorrt-llm", 4] == (400, 4000)
    assert got["sglang", 4] == (100, 1000)
    assert got["tensorrt-llm", 1] == got["sglang", 1] == (100, 1000)


def test_wide_ep_decode_workers_run_their_recipes_limits():
    # the GB200 dynamo-sglang decode workers with DP attention launch with --max-running-requests
    # 18432 (global); other chips' and tensor-parallel workers keep the runtime's defaults
    from membound.fidelity.serve_validate import WIDE_EP_DECODE, load_rows
    rows, _ = load_rows(kinds=("disaggregated",))
    wide = [r for r in rows if r.scheduler is not None]
    assert wide and all(r.framework == "dynamo-sglang" and r.device == "gb200" and r.parallel.ep > 1 for r in wide)
    assert all(r.scheduler.max_running == 18432 for r in wide)
    assert not any(r.scheduler for r in rows if r.device != "gb200" or r.parallel.ep == 1)
    assert set(WIDE_EP_DECODE) == {("dynamo-sglang", "gb200")}


def test_dp_attention_balancing_holds_prompts_until_every_rank_has_one():
    # TensorRT-LLM's attention-DP balancing (InferenceMAX recipes: enable_balance, timeout_iters 60)
    # holds a new prompt until all 8 ranks have one, or 60 steps pass. A new request lands on a
    # rank that just finished one, at random: all 8 are covered after 8 x (1 + 1/2 + ... + 1/8)
    # = 8 x 2.717857 = 21.743 arrivals (coupon collector); a prompt waits half that cycle.
    # Open loop at 15 requests/s: the cycle is 21.743 / 15 = 1.4495 s (fewer than 60 steps when a
    # step is over 21.743 / (60 x 15) = 24.2 ms), so the wait is 0.7248 s, whatever the step.
    # At 2 requests/s the 60-step timeout comes first: the wait is 30 steps. At 0.05 requests/s
    # fewer than 8 sequences run, an idle rank takes the prompt at once: no wait.
    from membound.serving import Scheduler, solve
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8", n_chips=8,
              parallel=mb.Parallel(ep=8), runtime="tensorrt-llm")
    collect = 8 * sum(1 / i for i in range(1, 9))
    assert collect == pytest.approx(21.742857, rel=1e-6)
    rates = np.array([15.0, 2.0, 0.05])
    st = {}
    for hold in (60, 0):
        sm, sched, _ = build("deepseek-r1", "h200", scheduler=Scheduler(dp_balance_steps=hold), **kw)
        st[hold] = solve(sm, sched, 1000.0, 1000.0, arrival_rate=rates)
    wait = st[60].ttft - st[0].ttft
    step = st[0].tau          # no speculation: the mean step is the time per output token
    assert np.allclose(st[60].tau, st[0].tau, rtol=1e-12)
    assert step[0] > collect / (60 * 15.0)
    # (the solver finds b, so the arrival rate x(b), to about 1e-6)
    assert wait[0] == pytest.approx(0.5 * collect / 15.0, rel=1e-5) == pytest.approx(0.72476, rel=1e-4)
    assert wait[1] == pytest.approx(0.5 * 60 * step[1], rel=1e-9)
    assert st[0].running[2] < 8 and wait[2] == 0.0
    with pytest.raises(mb.MemboundError, match="dp_balance_steps"):
        Scheduler(dp_balance_steps=-1)
    # the simulator does not hold prompts: it refuses rather than report a TTFT without the wait
    with pytest.raises(mb.MemboundError, match="dp_balance_steps=0"):
        mb.serve("deepseek-r1", "h200", concurrency=64, prompt_tokens=1000, output_tokens=100, engine="simulate",
                 **{k: v for k, v in kw.items() if k not in ("prompt", "output")})


def test_a_scheduler_that_takes_requests_every_k_steps_makes_them_wait_half_of_k_minus_one():
    # SGLang --scheduler-recv-interval 10: while a batch decodes, new requests are taken in every
    # 10 decode steps; one arriving at a random time waits (10 - 1) / 2 = 4.5 steps on average.
    # A lone client (closed loop of 1) finds the scheduler idle, polling at once: no wait.
    from membound.serving import Scheduler, solve
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8", n_chips=8,
              runtime="sglang")
    st, one = {}, {}
    for k in (10, 1):
        sm, sched, _ = build("deepseek-r1", "b200", scheduler=Scheduler(recv_interval_steps=k), **kw)
        st[k] = solve(sm, sched, 1000.0, 1000.0, arrival_rate=np.array([2.0]))
        one[k] = solve(sm, sched, 1000.0, 1000.0, concurrency=np.array([1.0]))
    assert st[1].running[0] > 1.0                            # a batch is decoding when a request arrives
    assert st[10].ttft[0] - st[1].ttft[0] == pytest.approx(4.5 * st[1].tau[0], rel=1e-6)
    assert one[10].ttft[0] == pytest.approx(one[1].ttft[0], rel=1e-12)
    with pytest.raises(mb.MemboundError, match="recv_interval_steps"):
        Scheduler(recv_interval_steps=0)
    with pytest.raises(mb.MemboundError, match="recv_interval_steps=1"):
        mb.serve("deepseek-r1", "b200", concurrency=4, prompt_tokens=1000, output_tokens=100, engine="simulate",
                 scheduler=Scheduler(recv_interval_steps=10), weight_dtype="fp8", kv_dtype="fp8", n_chips=8,
                 runtime="sglang")
    # the recipes' flags: B200 polls every 30 steps from 16 clients, every 10 below; MI300X runs 4
    from membound.fidelity.serve_validate import recipe_scheduler
    assert recipe_scheduler("sglang", "b200", "deepseek-r1", 16).recv_interval_steps == 30
    assert recipe_scheduler("sglang", "b200", "deepseek-r1", 8).recv_interval_steps == 10
    assert recipe_scheduler("sglang", "mi300x", "deepseek-r1", 64).recv_interval_steps == 4
    # H200's recipe polls every step, but sets its own chunk and running limit (dsr1_fp8_h200*.sh):
    # --chunked-prefill-size 32768, --max-running-requests 512 at 1k/1k and 256 otherwise; its MTP rows: none
    assert recipe_scheduler("sglang", "h200", "deepseek-r1", 64) == Scheduler(token_budget=32768, max_running=256)
    assert recipe_scheduler("sglang", "h200", "deepseek-r1", 64, isl=1024, osl=1024) == Scheduler(
        token_budget=32768, max_running=512)
    assert recipe_scheduler("sglang", "h200", "deepseek-r1", 64, mtp=True) is None
    assert recipe_scheduler("vllm", "b200", "deepseek-r1", 64) == Scheduler(lookahead_steps=1)


def test_a_b300_sglang_deepseek_row_waits_for_its_recipes_recv_interval():
    # InferenceX single_node/dsr1_fp8_b300.sh (the B200 recipe reused): --scheduler-recv-interval 30
    # from 16 clients, 10 below. A row of 64 clients gets 30; a request arriving while a batch
    # decodes waits (30 - 1) / 2 = 14.5 decode steps for the next poll (below 16 clients:
    # (10 - 1) / 2 = 4.5). The MI325X and MI355X recipes run 4 decode steps back to back
    # (--num-continuous-decode-steps 4) at any concurrency; a chip without a recipe entry: none.
    from membound.serving import Scheduler, solve
    from membound.fidelity.serve_validate import recipe_scheduler
    rs = recipe_scheduler("sglang", "b300", "deepseek-r1", 64)
    assert rs == Scheduler(recv_interval_steps=30)
    assert recipe_scheduler("sglang", "b300", "deepseek-r1", 15) == Scheduler(recv_interval_steps=10)
    assert recipe_scheduler("sglang", "mi355x", "deepseek-r1", 256) == Scheduler(recv_interval_steps=4)
    assert recipe_scheduler("sglang", "mi325x", "deepseek-r1", 4) == Scheduler(recv_interval_steps=4)
    assert recipe_scheduler("sglang", "gb300", "deepseek-r1", 64) is None
    assert recipe_scheduler("sglang", "b300", "gpt-oss-120b", 64) is None
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8", n_chips=8,
              runtime="sglang")
    st = {}
    for name, sch in (("recipe", rs), ("every step", Scheduler(recv_interval_steps=1))):
        sm, sched, _ = build("deepseek-r1", "b300", scheduler=sch, **kw)
        st[name] = solve(sm, sched, 1000.0, 1000.0, arrival_rate=np.array([2.0]))
    step = st["every step"].tau[0]      # no speculation: the mean step is the time per output token
    assert st["every step"].running[0] > 1.0  # a batch is decoding when a request arrives
    wait = st["recipe"].ttft[0] - st["every step"].ttft[0]
    assert wait == pytest.approx((30 - 1) / 2 * step, rel=1e-6)


def _ahead(name: str, steps: int):
    """The runtime `name` with its served block's lookahead_steps set (a plain Served for `ideal`)."""
    from membound.catalog.runtime import Served, load_runtime
    rt = load_runtime(name)
    served = (rt.served or Served()).model_copy(update={"lookahead_steps": steps})
    return rt.model_copy(update={"served": served})


def test_a_scheduler_one_step_ahead_admits_a_mid_step_arrival_one_step_later_by_hand():
    # The two staggered sequences above (Llama-3.1-8B bf16, one H100, pure roofline), with a
    # scheduler one step ahead of the GPU (TensorRT-LLM's overlap loop, SGLang's overlap schedule):
    # B reaches it at 1 ms, during A's prefill step, when A's next step is already launched, so
    # B joins the step after it: A decodes alone at context 1, then A at 2 beside B's prefill.
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1), output=mb.serving.Fixed(3),
                         runtime=_ahead("ideal", 1))
    tr = simulate(sm, sched, np.array([1, 1]), np.array([3, 3]), arrivals=np.array([0.0, 1e-3]))
    t1 = (w8b(1) + 1 * KV_8B) / H100_BW            # prefill A
    t2 = t1 + (w8b(1) + 1 * KV_8B) / H100_BW       # A alone at context 1 (the step launched ahead)
    t3 = t2 + (w8b(2) + 3 * KV_8B) / H100_BW       # A at context 2, B prefills 1 token: A done, B's 1st
    t4 = t3 + (w8b(1) + 1 * KV_8B) / H100_BW       # B alone at context 1
    t5 = t4 + (w8b(1) + 2 * KV_8B) / H100_BW       # B at context 2: B done
    assert tr.first == pytest.approx([t1, t3], rel=1e-9)
    assert tr.done == pytest.approx([t3, t5], rel=1e-9)
    # a request that finds the engine idle is taken at once: B alone arrives after A is done
    tr = simulate(sm, sched, np.array([1, 1]), np.array([3, 3]), arrivals=np.array([0.0, 1.0]))
    assert tr.first[1] - tr.arrive[1] == pytest.approx(t1, rel=1e-9)


def test_a_scheduler_one_step_ahead_adds_one_step_to_the_ttft_while_a_batch_decodes():
    # Poisson arrivals (open loop: the running batch b is set by the rate, not by the TTFT): an
    # arrival waits the rest of the running step (half a step), then the whole step launched
    # ahead of it: TTFT grows by exactly one mean step, tau; a lone client finds the engine idle.
    from membound.serving import solve
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8", n_chips=8)
    st, one = {}, {}
    for k in (0, 1):
        sm, sched, _ = build("llama-3.3-70b", "h200", runtime=_ahead("tensorrt-llm", k), **kw)
        st[k] = solve(sm, sched, 1000.0, 1000.0, arrival_rate=np.array([4.0]))
        one[k] = solve(sm, sched, 1000.0, 1000.0, concurrency=np.array([1.0]))
    assert st[0].running[0] > 1.0 and st[1].running[0] == pytest.approx(st[0].running[0], rel=1e-9)
    assert st[1].ttft[0] - st[0].ttft[0] == pytest.approx(st[0].tau[0], rel=1e-6)
    assert one[1].ttft[0] == pytest.approx(one[0].ttft[0], rel=1e-12)


def test_a_launch_flags_lookahead_overrides_the_engines_and_adds_one_step_to_the_ttft():
    # vLLM schedules one step at a time by default (lookahead 0); InferenceMAX's recipes launch it
    # with --async-scheduling, two batches in flight, so an arrival waits the rest of the running
    # step and then the whole step already launched: under Poisson arrivals (the running batch set
    # by the rate) the TTFT grows by exactly one mean step, tau, and nothing else moves. The knob
    # given is the one used: Scheduler(lookahead_steps=0) takes TensorRT-LLM's overlap loop (1) out.
    from membound.serving import Scheduler, solve
    from membound.fidelity.serve_validate import recipe_scheduler
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8", n_chips=8)
    st = {}
    for k in (None, 0, 1):
        sm, sched, _ = build("llama-3.3-70b", "h200", runtime="vllm", scheduler=Scheduler(lookahead_steps=k), **kw)
        assert sm.lookahead == (0 if k is None else k) == sched.lookahead_steps
        st[k] = solve(sm, sched, 1000.0, 1000.0, arrival_rate=np.array([4.0]))
    assert st[0].running[0] > 1.0 and st[1].running[0] == pytest.approx(st[0].running[0], rel=1e-9)
    assert st[1].ttft[0] - st[0].ttft[0] == pytest.approx(st[0].tau[0], rel=1e-6)
    assert st[1].tau[0] == st[0].tau[0] and st[None].ttft[0] == st[0].ttft[0]
    trt = {k: build("llama-3.3-70b", "h200", runtime="tensorrt-llm", scheduler=Scheduler(lookahead_steps=k), **kw)
           for k in (None, 0)}
    assert trt[None][0].lookahead == 1 and trt[0][0].lookahead == 0
    for bad in (-1, 17, True, 1.0):
        with pytest.raises(mb.MemboundError, match="scheduler.lookahead_steps"):
            Scheduler(lookahead_steps=bad)
    # every vLLM recipe of the four chips with vLLM rows sets it; other engines' and chips' rows: none
    for chip in ("h100-sxm", "h200", "b200", "mi300x"):
        assert recipe_scheduler("vllm", chip, "gpt-oss-120b", 4) == Scheduler(lookahead_steps=1)
    assert recipe_scheduler("vllm", "gb200", "gpt-oss-120b", 4) is None
    # the MI300X Llama scripts pass --max-num-batched-tokens=131072; the other vLLM recipes keep 8192
    assert recipe_scheduler("vllm", "mi300x", "llama-3.3-70b", 64) == Scheduler(lookahead_steps=1, token_budget=131072)
    assert recipe_scheduler("vllm", "h200", "llama-3.3-70b", 64).token_budget is None
    assert recipe_scheduler("atom", "mi300x", "gpt-oss-120b", 4) is None


def test_the_trt_gpt_oss_and_deepseek_recipes_token_budgets():
    # InferenceX gptoss_fp4_{h200,b200}_trt_slurm.sh: --max_num_tokens 20000; dsr1_fp*_{h200,b200}_trt_slurm.sh:
    # MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 )): 64 clients at 1k: (64 + 1024 + 127) // 64 = 18 -> 1152;
    # 4 clients at 8k: (4 + 8192 + 127) // 64 = 130 -> 8320. The running sequences are capped by the smaller
    # of that and the engine's max batch (2048, trtllm-serve's default); the MTP scripts size it otherwise.
    from membound.serving import Scheduler
    from membound.fidelity.serve_validate import recipe_scheduler
    assert recipe_scheduler("trtllm", "h200", "gpt-oss-120b", 64) == Scheduler(token_budget=20000)
    assert recipe_scheduler("trtllm", "b200", "gpt-oss-120b", 4) == Scheduler(token_budget=20000)
    assert recipe_scheduler("trtllm", "h200", "deepseek-r1", 64, isl=1024) == Scheduler(token_budget=1152,
                                                                                       max_running=1152)
    assert recipe_scheduler("trtllm", "b200", "deepseek-r1", 4, isl=8192) == Scheduler(token_budget=8320,
                                                                                      max_running=2048)
    assert recipe_scheduler("trtllm", "h200", "deepseek-r1", 64, isl=1024, mtp=True) is None
    assert recipe_scheduler("trtllm", "gb200", "gpt-oss-120b", 64) is None


def test_a_subnormal_arrival_rate_prices_no_cost_rather_than_infinity():
    # 2.2e-309 requests/s x 128 output tokens = 2.8e-307 tok/s; an H100's price (dollars/hour) / 3600 / 2.8e-307
    # x 1e6 is above the largest float (1.8e308), so there is no finite cost to report: None, never inf
    r = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=2.2e-309, prompt_tokens=128, output_tokens=128)
    assert r.cost_per_million_output_tokens_usd is None
    assert 0 < r.output_tok_s_per_chip < 1e-300


def test_prompts_admitted_in_one_pass_never_share_the_same_free_room():
    # vLLM (preemption "recompute") admits a waiting prompt if its KV fits. Two 1,000-token
    # prompts reach an empty engine whose cache holds 1.5 prompts: the first is admitted
    # (0 + 1,000 x p <= 1,500 x p), the second must wait (1,000 x p claimed by the first +
    # 1,000 x p > 1,500 x p), where 1,000 x p is what kv_of gives a 1,000-token prompt (its
    # blocks rounded up); the cache is set in those units.
    from membound.serving.simulator import _Simulation
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Uniform(1000, 1000),
                         output=mb.serving.Uniform(10, 10), runtime="vllm")
    assert sched.preemption == "recompute"
    sim = _Simulation(sm, sched, np.array([1000, 1000]), np.array([10, 10]), None, np.array([0.0, 0.0]))
    sim.cap = 1.5 * float(sim.kv_of(1000))
    sim.waiting.extend([0, 1])
    sim._admit(0)
    assert sim.prefilling == [0] and list(sim.waiting) == [1]
    # with room for two, both go in one pass
    sim2 = _Simulation(sm, sched, np.array([1000, 1000]), np.array([10, 10]), None, np.array([0.0, 0.0]))
    sim2.cap = 2.0 * float(sim2.kv_of(1000))
    sim2.waiting.extend([0, 1])
    sim2._admit(0)
    assert sim2.prefilling == [0, 1] and not sim2.waiting
