"""membound.serving.offline: throughput with every request queued at once (trtllm-bench, MLPerf Offline).
Engine limits and saturated steady states derived by hand."""
import numpy as np
import pytest

import membound as mb
from membound.errors import InvalidInputError
from membound.serving.offline import offline_throughput, trtllm_bench_scheduler
from membound.serving import build, simulate

L8B, L70B = 8_030_261_248, 70_553_706_496       # Llama-3.1-8B, Llama-3.3-70B parameters
H100_BYTES, B200_BYTES = 85_520_809_984, 1.8e11  # the profiles' usable memory


def test_trtllm_bench_limits_by_hand_short_requests():
    # Llama-3.1-8B fp8 weights and KV on one H100, 128/128. KV per token as trtllm-bench counts it:
    # 2 x 32 layers x max(tp 1, 8 kv heads) x 128 x 1 B = 65,536 B. Free: 85,520,809,984 -
    # 8,030,261,248 x 1 B = 77,490,548,736 B; requests that fit at 0.95 of it:
    # 0.95 x 77,490,548,736 / (65,536 x 256) = 4,387.9 -> min(., 4096) = 4096 -> a multiple of 256:
    # max_batch_size 4096. Tokens: min(4096 x (1 + 128/128), 32768) = 8192 -> >= 8192, a multiple of
    # 1024: 8192 (>= 128 + 4096, the unchunked prompt beside a full batch).
    requests = 0.95 * (H100_BYTES - L8B) / (65_536 * 256)
    assert requests == pytest.approx(4387.9, abs=0.1)
    s = trtllm_bench_scheduler("llama-3.1-8b", "h100-sxm", prompt_tokens=128, output_tokens=128,
                               weight_dtype="fp8", kv_dtype="fp8")
    assert (s.max_running, s.token_budget) == (4096, 8192)
    assert (s.chunked_prefill, s.mixed_steps, s.preemption, s.memory_fraction) == (False, True, "none", 0.95)


def test_trtllm_bench_limits_by_hand_long_requests():
    # the same at 20000/2000: 0.95 x 77,490,548,736 / (65,536 x 22,000) = 51.06 requests -> below 256:
    # 32 x ceil(51.06 / 32) = 64, at least 64 -> 64. Tokens min(51.06 x (1 + 10), 32768) = 561.6 ->
    # below 4096: max(2048, 256 x ceil(2.19)) = 2048; chunking off: at least 20000 + 64 = 20064.
    s = trtllm_bench_scheduler("llama-3.1-8b", "h100-sxm", prompt_tokens=20000, output_tokens=2000,
                               weight_dtype="fp8", kv_dtype="fp8")
    assert 0.95 * (H100_BYTES - L8B) / (65_536 * 22_000) == pytest.approx(51.06, abs=0.01)
    assert (s.max_running, s.token_budget) == (64, 20064)


def test_trtllm_bench_limits_by_hand_fp4_weights():
    # Llama-3.3-70B nvfp4 (0.5 B per weight) on one B200 at 1000/1000, fp8 KV: 2 x 80 x 8 x 128 =
    # 163,840 B per token. Free 1.8e11 - 70,553,706,496 x 0.5 = 144,723,146,752 B;
    # 0.95 x that / (163,840 x 2000) = 419.6 requests -> 256..1024: 128 x ceil(3.28) = 512.
    # Tokens 419.6 x 2 = 839 -> 2048 (the floor); >= 1000 + 512.
    assert 0.95 * (B200_BYTES - 0.5 * L70B) / (163_840 * 2000) == pytest.approx(419.6, abs=0.1)
    s = trtllm_bench_scheduler("llama-3.3-70b", "b200", prompt_tokens=1000, output_tokens=1000,
                               weight_dtype="nvfp4", kv_dtype="fp8")
    assert (s.max_running, s.token_budget) == (512, 2048)


def test_trtllm_bench_limits_refuse_what_does_not_fit():
    with pytest.raises(InvalidInputError, match="hardware"):
        trtllm_bench_scheduler("llama-3.1-405b", "h100-sxm", prompt_tokens=128, output_tokens=128,
                               weight_dtype="fp8", kv_dtype="fp8")
    with pytest.raises(InvalidInputError, match="output_tokens"):
        trtllm_bench_scheduler("llama-3.1-8b", "h100-sxm", prompt_tokens=128, output_tokens=0,
                               weight_dtype="fp8", kv_dtype="fp8")


BIG = dict(quantization=mb.Quantization("fp8", "fp8"))


def test_token_budget_limits_the_running_batch():
    # 1000-token prompts, 11 output tokens (D = 10 decode steps), a budget of 2020 tokens a step,
    # mixed steps, on an H200 with room for thousands of such requests. Each step carries one token
    # per decoding sequence and, on average, b x 1000 / 10 = 100 b prompt tokens: 101 b <= 2020,
    # so at most b = 20 decode at once, whatever the queue (the batch limit, 1000, and the KV
    # cache do not bind).
    sched = mb.serving.Scheduler(max_running=1000, token_budget=2020, chunked_prefill=False, preemption="none")
    r = offline_throughput("llama-3.1-8b", "h200", prompt_tokens=1000, output_tokens=11, runtime="tensorrt-llm",
                           scheduler=sched, **BIG)
    assert r.running == pytest.approx(20.0, rel=1e-6)
    assert r.limit == "token budget"
    # every sequence emits one token a step: X = b / (D tau) requests/s, T X output tokens/s
    assert r.requests_per_s == pytest.approx(20.0 / (10 * r.step_s), rel=1e-6)
    assert r.output_tok_s == pytest.approx(11 * r.requests_per_s, rel=1e-12)


def test_batch_limit_and_kv_cache_limit_the_running_batch():
    # max_running 8 at 100/100 on an H200: 8 decode, the rest wait
    sched = mb.serving.Scheduler(max_running=8, token_budget=8192, preemption="none")
    r = offline_throughput("llama-3.1-8b", "h200", prompt_tokens=100, output_tokens=100, scheduler=sched,
                           runtime="tensorrt-llm", **BIG)
    assert (r.running, r.limit) == (pytest.approx(8.0, rel=1e-9), "max batch")
    # 4000/4000 with the whole length reserved at admission (no eviction): a request holds
    # 32 layers x 8000 tokens = 256,000 (layer, token) pairs, so b = free pairs / 256,000
    sched = mb.serving.Scheduler(max_running=4096, token_budget=8192, preemption="none", memory_fraction=0.5)
    r = offline_throughput("llama-3.1-8b", "h100-sxm", prompt_tokens=4000, output_tokens=4000, scheduler=sched,
                           runtime="tensorrt-llm", **BIG)
    sm, resolved, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(4000), output=mb.serving.Fixed(4000),
                            runtime="tensorrt-llm", scheduler=sched, **BIG)
    assert r.limit == "kv cache"
    assert r.running == pytest.approx(sm.kv_pairs_capacity(resolved) / (32 * 8000), rel=1e-6)


def test_saturated_solver_agrees_with_simulating_the_whole_offline_run():
    # trtllm-bench's run: n requests of 1000/1000 all queued at t = 0 (uniform lengths), the
    # engine limits its heuristic sets; the iteration-level simulation of the whole run against the
    # saturated steady state X. A whole run lasts n x 1000 / X plus its ramp-up and drain, a time
    # t_edge that does not grow with n, so 1 / X_run(n) = 1 / X + t_edge / (n x 1000): linear in 1 / n.
    # Runs of 1500 and 3000 requests give the line; at 1 / n = 0 it reads
    # 1 / X = 2 / X_run(3000) - 1 / X_run(1500), which the solver's steady state must match.
    # (At 1500 requests alone the edges take ~4-5% of the run, which is the finite run, not the solver.)
    sched = trtllm_bench_scheduler("llama-3.1-8b", "h100-sxm", prompt_tokens=1000, output_tokens=1000,
                                   weight_dtype="fp8", kv_dtype="fp8")
    kw = dict(runtime="tensorrt-llm", scheduler=sched, **BIG)
    r = offline_throughput("llama-3.1-8b", "h100-sxm", prompt_tokens=1000, output_tokens=1000, **kw)
    sm, resolved, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), **kw)
    run = {n: n * 1000 / float(np.max(simulate(sm, resolved, np.full(n, 1000), np.full(n, 1000), concurrency=n).done))
           for n in (1500, 3000)}
    assert run[1500] < run[3000] < r.output_tok_s   # the edges' share falls as the run grows
    assert r.output_tok_s == pytest.approx(1 / (2 / run[3000] - 1 / run[1500]), rel=0.01)


def test_a_closed_loop_beyond_the_token_budget_queues_the_rest():
    # serve() with 5000 clients and the budget of the first test: a sequence sees b (N - 1) / N
    # others, so 101 x b x 4999 / 5000 = 2020 and b = 20 x 5000 / 4999. The clients that do not
    # decode wait, so X = b / (D tau) and, by Little's law over all 5000,
    # TTFT = (5000 - b) / X (the solver once counted the queue as decoding: X = N / (TTFT + D tau)
    # with an unqueued TTFT)
    sched = mb.serving.Scheduler(max_running=1000, token_budget=2020)
    r = mb.serve("llama-3.1-8b", "h200", concurrency=5000, prompt_tokens=1000, output_tokens=11,
                 weight_dtype="fp8", kv_dtype="fp8", runtime="vllm", scheduler=sched)
    assert r.mean_running == pytest.approx(20.0 * 5000 / 4999, rel=1e-6)
    assert r.requests_per_s == pytest.approx(r.mean_running / (10 * r.tpot.mean), rel=1e-6)
    assert r.ttft.mean == pytest.approx((5000 - r.mean_running) / r.requests_per_s, rel=1e-6)


def test_a_pipeline_runs_at_its_largest_stage():
    # Llama-3.1-8B over pp = 4 stages of tp = 2: a stage holds ceil(32 / 4) = 8 layers with the
    # embedding and the LM head. A layer: attention 4096 x (4096 + 2 x 1024 + 4096) = 41,943,040,
    # FFN 3 x 4096 x 14336 = 176,160,768, two norms 8,192: 218,112,000; outside the layers
    # 8,030,261,248 - 32 x 218,112,000 = 1,050,677,248 (embedding, head, final norm). The stage:
    # 1,050,677,248 + 8 x 218,112,000 = 2,795,573,248. Each chip caches its layers' KV for all 4
    # micro-batches: a micro-batch has a quarter of the cache's share of memory (0.8 / 4 = 0.2).
    from membound.serving.offline import pipeline_stage
    stage, sched, n, layout, rt = pipeline_stage("llama-3.1-8b", mb.serving.Scheduler(memory_fraction=0.8),
                                                 "tensorrt-llm", mb.Parallel(tp=2, pp=4))
    assert stage.n_layers == 8 and stage.total_params == 2_795_573_248
    assert sched.memory_fraction == pytest.approx(0.2) and sched.max_running == 2048   # TRT's served default
    assert (n, layout.tp, layout.pp) == (2, 2, 1)
    # the pipeline's throughput is the stage's: 8 layers on 2 chips with a quarter of the cache
    a = offline_throughput("llama-3.1-8b", "h100-sxm", prompt_tokens=500, output_tokens=500, n_chips=8,
                           parallel=mb.Parallel(tp=2, pp=4), scheduler=mb.serving.Scheduler(memory_fraction=0.8), **BIG)
    b = offline_throughput(stage, "h100-sxm", prompt_tokens=500, output_tokens=500, n_chips=2, scheduler=sched,
                           **{**BIG, "runtime": rt})
    assert a.output_tok_s == pytest.approx(b.output_tok_s, rel=1e-12)
    with pytest.raises(InvalidInputError, match="parallel.pp"):
        pipeline_stage("mixtral-8x7b", None, "tensorrt-llm", mb.Parallel(pp=2))


@pytest.mark.parametrize("field, value", [("prompt_tokens", 1.5), ("prompt_tokens", float("nan")),
                                          ("prompt_tokens", True), ("prompt_tokens", -5), ("output_tokens", 1)])
def test_bad_lengths_are_refused_by_name(field, value):
    # a fractional, NaN or boolean length was truncated (1.5 -> 1, True -> 1) or raised a bare
    # ValueError; -5 was reported as "n"
    kw = {"prompt_tokens": 128, "output_tokens": 128, field: value}
    with pytest.raises(InvalidInputError, match=field):
        offline_throughput("llama-3.1-8b", "h100-sxm", **kw)
