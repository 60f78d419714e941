"""TensorRT-LLM batch waiting (Scheduler.batch_wait_steps / batch_wait_ratio; serve.batch_wait):
new prompts are held while a batch decodes, until their tokens reach a share of the token budget
or a number of steps pass. Expected values derived by hand below."""
import math

import numpy as np
import pytest

import membound as mb
from membound.serving import Scheduler, batch_wait, build, solve


def test_a_hold_ended_by_the_steps_alone():
    # K = 20 steps, prompts arriving at a = 0.05 per step: mu = a K = 1 during a hold. With no
    # token threshold in reach (1e9 tokens) the hold lasts K; the N ~ Poisson(1) prompts arriving
    # in it wait K minus their arrival time, K / 2 on average. Mean over the 1 + N prompts:
    # (K + mu K / 2) / (1 + mu) = (20 + 10) / 2 = 15 steps. The release holds k = 1 + N prompts;
    # as a prompt sees it (size-biased) E[k^2] / E[k] = (1 + 3 mu + mu^2) / (1 + mu) = 5 / 2.
    steps, k = batch_wait(20, 1e9, 2e9, 1000.0, 0.0, 0.05)
    assert float(steps) == pytest.approx(15.0, rel=1e-9)
    assert float(k) == pytest.approx(2.5, rel=1e-9)
    # rare prompts: every one waits the full 20 steps, alone
    steps, k = batch_wait(20, 1e9, 2e9, 1000.0, 0.0, 1e-9)
    assert float(steps) == pytest.approx(20.0, rel=1e-6) and float(k) == pytest.approx(1.0, rel=1e-6)


def test_a_hold_ended_by_the_next_prompt():
    # Threshold 2000 tokens, prompts of 1000, nothing decoding: the second prompt ends the hold
    # (m = 2000 / 1000 - 1 = 1 more). The hold lasts min(K, T_1): E = (1 - e^-mu) / a; the one
    # prompt that may arrive waits nothing more. q0 = P(N(K) > 0) = 1 - e^-1 = 0.632121:
    # mean wait q0 / (a (1 + q0)) = 0.632121 / (0.05 x 1.632121) = 7.7459 steps;
    # prompts per release as seen: (1 + 3 q0) / (1 + q0) = 2.896362 / 1.632121 = 1.77460.
    q0 = 1.0 - math.exp(-1.0)
    steps, k = batch_wait(20, 2000.0, 4096.0, 1000.0, 0.0, 0.05)
    assert float(steps) == pytest.approx(q0 / (0.05 * (1 + q0)), rel=1e-9) == pytest.approx(7.7459, rel=1e-4)
    assert float(k) == pytest.approx((1 + 3 * q0) / (1 + q0), rel=1e-9) == pytest.approx(1.77460, rel=1e-4)
    # 1000 decode tokens in the step: one prompt reaches 2000 at once, no hold
    steps, k = batch_wait(20, 2000.0, 4096.0, 1000.0, 1000.0, 0.05)
    assert float(steps) == 0.0 and float(k) == 1.0
    # a budget of 1500 takes one prompt of 1000 at a time: the threshold is never reached, the
    # steps end every hold (as in the first test: 15 steps, 2.5 prompts)
    steps, k = batch_wait(20, 2000.0, 1500.0, 1000.0, 0.0, 0.05)
    assert float(steps) == pytest.approx(15.0, rel=1e-9) and float(k) == pytest.approx(2.5, rel=1e-9)


def test_held_prompts_wait_twenty_decode_steps_at_low_load():
    # Llama-3.3-70B fp8 on one H200, TensorRT-LLM, 1000-token prompts and outputs, 4 clients:
    # about 4 sequences decode, one finishes every 999 / 4 = 250 steps, so a ~ 0.004 prompts per
    # step and mu = 20 a ~ 0.08: a prompt waits 20 (1 + mu / 2) / (1 + mu) ~ 19.26 decode steps,
    # and is released with (1 + 3 mu + mu^2) / (1 + mu) ~ 1.15 prompts: its prefill step grows by
    # the GEMMs of the 0.15 extra prompt, (k - 1) x its prefill (~9.5 decode steps here). TTFT
    # rises by about 19.3 + 1.4 decode steps over the same engine without waiting; TPOT does not
    # move. (a = x tau from the solved state; the rest by hand.)
    kw = dict(prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8",
              runtime="tensorrt-llm")
    st = {}
    for hold, ratio in ((20, 0.9), (0, 0.0)):
        sm, sched, _ = build("llama-3.3-70b", "h200", scheduler=Scheduler(
            token_budget=16384, batch_wait_steps=hold, batch_wait_ratio=ratio), **kw)
        st[hold] = solve(sm, sched, 1000.0, 1000.0, concurrency=np.array([4.0, 1.0]))
    s0 = st[0]
    mu = 20 * float(s0.request_rate[0] * s0.tau[0])
    assert 0.07 < mu < 0.09
    wait = 20 * (1 + mu / 2) / (1 + mu)
    k = (1 + 3 * mu + mu * mu) / (1 + mu)
    extra = (st[20].ttft - s0.ttft) / s0.tau_d
    assert extra[0] == pytest.approx(wait + (k - 1) * float(s0.prefill[0] / s0.tau_d[0]), rel=0.03)
    assert 20.0 < extra[0] < 21.5
    assert np.allclose(st[20].tau, s0.tau, rtol=1e-3)
    # a lone client finds nothing decoding: TensorRT-LLM does not hold its prompt
    assert extra[1] == pytest.approx(0.0, abs=1e-9)
    # both knobs are needed (TensorRT-LLM stops waiting at once when either is 0)
    sm, sched, _ = build("llama-3.3-70b", "h200", scheduler=Scheduler(batch_wait_steps=20, batch_wait_ratio=0.0), **kw)
    assert solve(sm, sched, 1000.0, 1000.0, concurrency=np.array([4.0])).ttft[0] == pytest.approx(
        solve(*build("llama-3.3-70b", "h200", **kw)[:2], 1000.0, 1000.0, concurrency=np.array([4.0])).ttft[0],
        rel=1e-12)


def test_the_released_step_is_priced_as_the_prompts_own_step_under_sparse_attention():
    # DeepSeek-V3.2 (its prefill also runs the indexer over every earlier token: 16000^2 / 2 pairs
    # a prompt here) on 8 x H200, 16,000-token prompts, a budget of 32,768 and a threshold of all
    # of it: 3 prompts would be needed (2 x 16,000 + the decodes < 32,768) and only 2 fit, so the
    # 20 steps alone end every hold (as in the first test). The step that releases k held prompts
    # costs the prompt's own prefill step plus the other k - 1 prompts' work, indexer included:
    # TTFT rises by wait + (k - 1) x (prefill / tau_d) decode steps (a = x tau of the plain state).
    kw = dict(prompt=mb.serving.Fixed(16000), output=mb.serving.Fixed(1000), weight_dtype="fp8", kv_dtype="fp8",
              runtime="tensorrt-llm", n_chips=8)
    st = {}
    for hold, ratio in ((20, 1.0), (0, 0.0)):
        sm, sched, _ = build("deepseek-v3.2", "h200", scheduler=Scheduler(
            token_budget=32768, batch_wait_steps=hold, batch_wait_ratio=ratio), **kw)
        st[hold] = solve(sm, sched, 16000.0, 1000.0, concurrency=np.array([4.0]))
    s0 = st[0]
    mu = 20 * float(s0.request_rate[0] * s0.tau[0])
    wait = 20 * (1 + mu / 2) / (1 + mu)
    k = (1 + 3 * mu + mu * mu) / (1 + mu)
    release = (k - 1) * float(s0.prefill[0] / s0.tau_d[0])
    assert release > 4.0          # the extra prompts' prefill is several decode steps here
    extra = float((st[20].ttft[0] - s0.ttft[0]) / s0.tau_d[0])
    assert extra == pytest.approx(wait + release, rel=0.03)


def test_batch_wait_knobs_are_checked_and_the_simulator_refuses_them():
    with pytest.raises(mb.MemboundError, match="batch_wait_steps"):
        Scheduler(batch_wait_steps=-1)
    with pytest.raises(mb.MemboundError, match="batch_wait_ratio"):
        Scheduler(batch_wait_ratio=1.5)
    with pytest.raises(mb.MemboundError, match="batch_wait_steps=0"):
        mb.serve("llama-3.3-70b", "h200", concurrency=4, prompt_tokens=1000, output_tokens=100, engine="simulate",
                 scheduler=Scheduler(batch_wait_steps=20, batch_wait_ratio=0.9), weight_dtype="fp8",
                 runtime="tensorrt-llm")


def test_the_trt_llama_recipes_flags():
    # InferenceMAX 70b_fp8_h200_trt_slurm.sh / 70b_fp*_b200_trt_slurm.sh (v1): --max_num_tokens 16384;
    # 1k/1k below TP 8 adds batch_wait_timeout_iters 20, batch_wait_max_tokens_ratio 0.9
    from membound.fidelity.serve_validate import recipe_scheduler
    assert recipe_scheduler("trtllm", "h200", "llama-3.3-70b", 4, isl=1024, osl=1024, tp=1) == Scheduler(
        token_budget=16384, batch_wait_steps=20, batch_wait_ratio=0.9)
    assert recipe_scheduler("trtllm", "b200", "llama-3.3-70b", 64, isl=1024, osl=1024, tp=4).batch_wait_steps == 20
    for isl, osl, tp in ((1024, 1024, 8), (1024, 8192, 1), (8192, 1024, 2)):
        assert recipe_scheduler("trtllm", "h200", "llama-3.3-70b", 4, isl=isl, osl=osl, tp=tp) == Scheduler(
            token_budget=16384, batch_wait_steps=0, batch_wait_ratio=0.0)
    assert recipe_scheduler("trtllm", "b300", "llama-3.3-70b", 4, isl=1024, osl=1024, tp=1) is None
    # vLLM's recipes wait for no batch; they run one step ahead (--async-scheduling)
    assert recipe_scheduler("vllm", "h200", "llama-3.3-70b", 4, isl=1024, osl=1024, tp=1) == Scheduler(lookahead_steps=1)
