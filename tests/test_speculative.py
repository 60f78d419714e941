"""Speculative decoding: tokens per round, round cost, best gamma, the Leviathan formula."""

import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.physics.speculative import head_cost, predicted_speedup
from membound.physics.speculative import expected_tokens_per_round

IDEAL = dict(runtime="ideal", prompt_tokens=0, output_tokens=1)   # context 0: no KV, pure roofline


def test_tokens_per_round_by_hand():
    # (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2
    assert expected_tokens_per_round(0.8, 4) == pytest.approx((1 - 0.32768) / 0.2)
    assert expected_tokens_per_round(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens_per_round(0.0, 7) == 1.0
    assert expected_tokens_per_round(1.0, 7) == 8.0


def test_leviathan_formula_matches_paper_prediction():
    # spec-001: gamma 7, alpha 0.75, c 0.02; paper predicts 3.2
    # (1 - 0.75^8) / ((1 - 0.75)(7 * 0.02 + 1)) = (1 - 0.1001129) / (0.25 * 1.14) = 3.1575
    assert predicted_speedup(0.75, 7, 0.02) == pytest.approx((1 - 0.75 ** 8) / (0.25 * 1.14))
    assert round(predicted_speedup(0.75, 7, 0.02), 1) == 3.2


def test_self_draft_memory_bound_speedup_by_hand():
    # batch 1, context 0: the verify pass over 5 positions streams the same weights as a plain step
    # (memory-bound; 4 more embedding rows of 8 KB, 2e-6 of it), so a round = 4 head steps of
    # 0.05 + 1 step: speed-up 3.3616 / 1.2
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8, draft_cost=0.05)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[1], **IDEAL)
    assert s[0] == pytest.approx(3.3616 / (4 * 0.05 + 1), rel=1e-5)


def test_self_draft_compute_bound_speedup_by_hand():
    # batch 65536: every step compute-bound; verify = 5 x the plain step's FLOPs, drafts 4 x 0.05:
    # 3.3616 / (0.2 + 5) — speculation now loses
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8, draft_cost=0.05)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[65536], **IDEAL)
    assert s[0] == pytest.approx(3.3616 / 5.2, rel=1e-3)
    assert s[0] < 1


def test_draft_model_speed_by_hand():
    # llama-3.1-8b target + llama-3.2-1b draft, bf16, batch 1, context 0, ideal H100 (3.35e12 B/s):
    # a round streams the draft's weights 4 times (tied embeddings: all of them) and the target's
    # once (less its untied input embedding, of which the 5 verified positions read 5 rows),
    # and yields 3.3616 tokens
    target, draft = mb.load_model("llama-3.1-8b"), mb.load_model("llama-3.2-1b")
    target_streamed = target.total_params - 128256 * 4096 + 5 * 4096
    round_s = (4 * draft.total_params * 2 + target_streamed * 2) / 3.35e12
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    r = mb.estimate(target, "h100-sxm", speculative=spec, **IDEAL)
    assert r.decode_tok_s_per_user == pytest.approx(3.3616 / round_s, rel=1e-3)
    # the draft's weights and KV are counted in memory
    assert r.memory.other_bytes == pytest.approx(draft.total_params * 2)


def test_tree_drafting_by_mean_accepted_length():
    # EAGLE-style tree: tau = 4 tokens per pass, depth 5, 60 tokens verified; memory-bound at batch 1:
    # 4 / (1 + 5 * 0.05)
    spec = mb.SpeculativeDecoding(gamma=5, mean_accepted_tokens=4.0, verify_tokens=60, draft_cost=0.05)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[1], **IDEAL)
    assert s[0] == pytest.approx(4 / 1.25, rel=1e-4)


def test_gain_shrinks_with_batch():
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8, draft_cost=0.05)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[1, 64, 256, 1024, 4096],
                               prompt_tokens=0, output_tokens=64)
    assert all(a >= b - 1e-12 for a, b in zip(s, s[1:]))
    assert s[0] > 2 and s[-1] < 1


def test_best_gamma_beats_every_other_gamma():
    kw = dict(draft="llama-3.2-1b", acceptance_rate=0.8, prompt_tokens=512, output_tokens=64)
    g, best = mb.best_gamma("llama-3.1-8b", "h100-sxm", gammas=range(1, 9), **kw)
    assert 1 <= g <= 8 and best.speculative["gamma"] == g
    for other in range(1, 9):
        spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=other, acceptance_rate=0.8)
        r = mb.estimate("llama-3.1-8b", "h100-sxm", speculative=spec, prompt_tokens=512, output_tokens=64)
        assert best.decode_tok_s_per_user >= r.decode_tok_s_per_user
    # a fixed tau rules out gammas too short to reach it
    g, _ = mb.best_gamma("llama-3.1-8b", "h100-sxm", mean_accepted_tokens=4.5, gammas=range(1, 9))
    assert g >= 4


def test_head_cost_by_hand():
    # vicuna-7b: hidden 4096, vocab 32000, 32 layers, untied: one layer + one LM-head read over active
    m = mb.load_model("vicuna-7b")
    layer = (m.active_params - 2 * 32000 * 4096 - 4096) / 32
    assert head_cost(m) == pytest.approx((layer + 32000 * 4096) / m.active_params)
    assert 0.04 < head_cost(m) < 0.06


@pytest.mark.parametrize("kwargs, field", [
    (dict(gamma=0, acceptance_rate=0.5), "gamma"),
    (dict(gamma=4, acceptance_rate=1.5), "acceptance_rate"),
    (dict(gamma=4), "acceptance_rate"),
    (dict(gamma=2, mean_accepted_tokens=3.5), "mean_accepted_tokens"),
    (dict(gamma=4, acceptance_rate=0.5, verify_tokens=3), "verify_tokens"),
    (dict(gamma=4, acceptance_rate=0.5, draft_cost=-1.0), "draft_cost"),
    (dict(gamma=4, acceptance_rate=0.5, head_params=-1.0), "head_params"),
    (dict(gamma=4, acceptance_rate=0.5, head_vocab=-5), "head_vocab"),
    (dict(gamma=4, acceptance_rate=0.5, route_correlation=1.5), "route_correlation"),
    (dict(gamma=4, acceptance_rate=0.5, draft="llama-3.2-1b", head_params=1e8), "draft"),
    (dict(gamma=4, acceptance_rate=0.5, draft="llama-3.2-1b", draft_cost=0.1), "draft"),
    (dict(gamma=4, acceptance_rate=0.5, draft_cost=0.1, head_params=1e8), "draft_cost"),
])
def test_bad_speculative_inputs(kwargs, field):
    with pytest.raises(mb.InvalidInputError) as e:
        mb.SpeculativeDecoding(**kwargs)
    assert e.value.field == field


def test_best_gamma_bad_gammas():
    with pytest.raises(mb.InvalidInputError):
        mb.best_gamma("llama-3.1-8b", "h100-sxm", acceptance_rate=0.5, gammas=[])
    with pytest.raises(mb.InvalidInputError):
        mb.best_gamma("llama-3.1-8b", "h100-sxm", acceptance_rate=0.5, gammas=[0, 1])


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0, 1), gamma=st.integers(1, 16))
def test_tokens_per_round_in_range(alpha, gamma):
    t = expected_tokens_per_round(alpha, gamma)
    assert 1.0 - 1e-12 <= t <= gamma + 1 + 1e-12


@settings(max_examples=40, deadline=None)
@given(gamma=st.integers(1, 16), eps=st.floats(1e-12, 1e-6))
def test_alpha_one_limit_is_continuous(gamma, eps):
    # near alpha = 1: (1 - a^(g+1)) / (1 - a) = g + 1 - eps g (g+1) / 2 + O(eps^2)
    t = expected_tokens_per_round(1.0 - eps, gamma)
    assert t == pytest.approx(gamma + 1 - eps * gamma * (gamma + 1) / 2, abs=1e-5)


@settings(max_examples=25, deadline=None)
@given(gamma=st.integers(1, 8), cost=st.floats(0, 0.5), ctx=st.integers(0, 4096),
       batch_exp=st.integers(0, 10))
def test_alpha_zero_never_faster(gamma, cost, ctx, batch_exp):
    # alpha = 0: one token per round, and the round costs gamma drafts plus a verify pass that is
    # never cheaper than a plain step, so speed <= plain / (1 + gamma * cost)
    spec = mb.SpeculativeDecoding(gamma=gamma, acceptance_rate=0.0, draft_cost=cost)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[2 ** batch_exp],
                               prompt_tokens=ctx, output_tokens=16, runtime="vllm")
    assert s[0] <= 1.0 / (1.0 + gamma * cost) * (1 + 1e-9)


# ---- a drafter costed by its own physics --------------------------------------------------------
L8_VOCAB, L8_H = 128256, 4096


def _l8_layer():
    # one llama-3.1-8b decoder layer: (active - input embedding - LM head - final norm) / 32
    m = mb.load_model("llama-3.1-8b")
    return (m.active_params - 2 * L8_VOCAB * L8_H - L8_H) / 32


def test_default_head_is_one_layer_plus_target_lm_head_by_hand():
    # draft=None and no draft_cost: an EAGLE head = one bf16 decoder layer + a re-read of the target's
    # LM head. Batch 1, context 0, ideal H100 (3.35e12 B/s), everything memory-bound:
    # round = 4 head steps + one verify of 5 positions (target less its input table, + 5 rows)
    m = mb.load_model("llama-3.1-8b")
    head_bytes = (_l8_layer() + L8_VOCAB * L8_H) * 2
    verify_bytes = (m.total_params - L8_VOCAB * L8_H + 5 * L8_H) * 2
    round_s = (4 * head_bytes + verify_bytes) / 3.35e12
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8)
    r = mb.estimate(m, "h100-sxm", speculative=spec, **IDEAL)
    assert r.decode_tok_s_per_user == pytest.approx(3.3616 / round_s, rel=1e-6)
    # the draft's share is its own step term: 4 head steps per 3.3616 tokens
    assert r.step_terms_s["draft"] == pytest.approx(4 * head_bytes / 3.35e12 / 3.3616, rel=1e-6)
    assert r.step_terms_s["memory"] == pytest.approx(verify_bytes / 3.35e12 / 3.3616, rel=1e-6)
    # the head's own layer (not the shared LM head) is held in memory
    assert r.memory.other_bytes == pytest.approx(_l8_layer() * 2)


def test_head_stays_bf16_when_the_target_is_int4_by_hand():
    # int4 target (0.515625 bytes/weight with its scales): the head's layer stays bf16 (2 bytes),
    # the target's LM head it re-reads is int4. A fraction of the target's step would shrink both.
    m = mb.load_model("llama-3.1-8b")
    q = 0.515625
    head_bytes = _l8_layer() * 2 + L8_VOCAB * L8_H * q
    verify_bytes = (m.total_params - L8_VOCAB * L8_H + 5 * L8_H) * q
    round_s = (4 * head_bytes + verify_bytes) / 3.35e12
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8)
    r = mb.estimate(m, "h100-sxm", speculative=spec, weight_dtype="int4", **IDEAL)
    assert r.decode_tok_s_per_user == pytest.approx(3.3616 / round_s, rel=1e-6)


def test_head_with_own_vocab_and_params_by_hand():
    # EAGLE-3-like: 300M own parameters + its own 32,000-token LM head, all bf16; no target LM-head read
    m = mb.load_model("llama-3.1-8b")
    head_bytes = (300e6 + 32000 * L8_H) * 2
    verify_bytes = (m.total_params - L8_VOCAB * L8_H + 5 * L8_H) * 2
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8, head_params=300e6, head_vocab=32000)
    r = mb.estimate(m, "h100-sxm", speculative=spec, **IDEAL)
    assert r.decode_tok_s_per_user == pytest.approx(3.3616 / ((4 * head_bytes + verify_bytes) / 3.35e12), rel=1e-6)
    assert r.memory.other_bytes == pytest.approx(head_bytes)


def test_legacy_draft_cost_reports_its_draft_term():
    # draft_cost 0.05 of a plain step (batch 1, context 0, ideal): draft term = 4 * 0.05 * plain / 3.3616
    m = mb.load_model("llama-3.1-8b")
    plain_s = (m.total_params - L8_VOCAB * L8_H + L8_H) * 2 / 3.35e12
    spec = mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.8, draft_cost=0.05)
    r = mb.estimate(m, "h100-sxm", speculative=spec, **IDEAL)
    assert r.step_terms_s["draft"] == pytest.approx(4 * 0.05 * plain_s / 3.3616, rel=1e-6)
    plain = mb.estimate(m, "h100-sxm", **IDEAL)
    assert plain.step_terms_s["draft"] == 0.0


def test_moe_tree_tokens_route_together_by_hand():
    # qwen3-30b-a3b (48 MoE layers, 128 experts, 8 per token, 4,718,592 params each), batch 1,
    # 60 verified positions, rho = 0.5: they route like 1 + 59 * 0.5 = 30.5 independent tokens,
    # 128 * (1 - (1 - 8/128)^30.5) experts per layer; the dense part is read once (input table:
    # only its 60 rows)
    m = mb.load_model("qwen3-30b-a3b")
    experts = m.n_moe_layers * 128 * 4718592
    dense = m.total_params - experts - 151936 * 2048 + 60 * 2048
    for rho in (0.5, 0.0, 1.0):
        touched = 128 * (1 - (1 - 8 / 128) ** (1 + 59 * (1 - rho)))
        verify_bytes = (dense + 48 * touched * 4718592) * 2
        spec = mb.SpeculativeDecoding(gamma=5, mean_accepted_tokens=3.0, verify_tokens=60, draft_cost=0.0,
                                      route_correlation=rho)
        r = mb.estimate(m, "h100-sxm", speculative=spec, **IDEAL)
        assert r.step_terms_s["memory"] == pytest.approx(verify_bytes / 3.35e12 / 3.0, rel=1e-9)
    # rho = 1: the 60 positions read exactly the 8 experts of one token
    assert 128 * (1 - (1 - 8 / 128) ** 1) == 8


def test_draft_model_prefill_counts_in_ttft_by_hand():
    # llama-3.2-1b draft (tied embeddings, 16 layers, 4*32*64 = 8192 attention FLOPs per cached
    # token per layer) prefills the same 4096-token prompt; compute-bound on an ideal H100 (989 TFLOP/s):
    # its layers' GEMMs over 4096 tokens, its (tied) LM head 128,256 x 2,048 = 262,668,288 over the
    # last one: 2 * (1,235,814,400 - 262,668,288) * 4096 + 2 * 262,668,288 + 8192 * 16 * 4096 * 4095 / 2
    # FLOPs, added to the target's prefill
    S = 4096
    head = 128256 * 2048
    draft_flops = 2 * (1235814400 - head) * S + 2 * head + 8192 * 16 * S * (S - 1) / 2
    kw = dict(runtime="ideal", prompt_tokens=S, output_tokens=8)
    plain = mb.estimate("llama-3.1-8b", "h100-sxm", **kw)
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    r = mb.estimate("llama-3.1-8b", "h100-sxm", speculative=spec, **kw)
    assert r.prefill_s == pytest.approx(plain.prefill_s, rel=1e-12)
    assert r.ttft_s - plain.ttft_s == pytest.approx(draft_flops / 9.89e14, rel=1e-9)


def test_draft_model_is_split_over_tensor_parallel_chips():
    # tp=2: each chip holds half the draft's bf16 weights, as it holds half the target's
    draft = mb.load_model("llama-3.2-1b")
    spec = mb.SpeculativeDecoding(draft=draft, gamma=4, acceptance_rate=0.8)
    r = mb.estimate("llama-3.1-8b", "h100-sxm", n_chips=2, parallel=mb.Parallel(tp=2), speculative=spec, **IDEAL)
    assert r.memory.other_bytes == pytest.approx(draft.total_params * 2 / 2)


def test_unknown_head_dtype():
    with pytest.raises(mb.MemboundError):
        mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.5, head_dtype="fp7")


@settings(max_examples=20, deadline=None)
@given(gamma=st.integers(1, 8), ctx=st.integers(0, 4096), batch_exp=st.integers(0, 10))
def test_alpha_zero_default_head_never_faster(gamma, ctx, batch_exp):
    # one token per round, and a round is a verify pass (never cheaper than a plain step) plus drafts
    spec = mb.SpeculativeDecoding(gamma=gamma, acceptance_rate=0.0)
    s = mb.speculative_speedup("llama-3.1-8b", "h100-sxm", spec, batches=[2 ** batch_exp],
                               prompt_tokens=ctx, output_tokens=16, runtime="vllm")
    assert s[0] < 1.0


def test_route_correlation_default_is_physics_neutral():
    # the default routes every verified position independently (rho = 0): qwen3-30b-a3b, batch 1,
    # 60 positions read 128 * (1 - (1 - 8/128)^60) ≈ 125.3 experts per layer, as 60 batched tokens do;
    # the one fitted value is a named option, not a default
    from membound.physics.speculative import ANGELSLIM_ROUTE_CORRELATION, ROUTE_CORRELATION
    assert ROUTE_CORRELATION == 0.0 and ANGELSLIM_ROUTE_CORRELATION == 0.996
    spec = mb.SpeculativeDecoding(gamma=5, mean_accepted_tokens=3.0, verify_tokens=60, draft_cost=0.0)
    assert spec.route_correlation == 0.0
    m = mb.load_model("qwen3-30b-a3b")
    touched = 128 * (1 - (1 - 8 / 128) ** 60)
    assert touched == pytest.approx(125.34, abs=0.005)
    dense = m.total_params - m.n_moe_layers * 128 * 4718592 - 151936 * 2048 + 60 * 2048
    r = mb.estimate(m, "h100-sxm", speculative=spec, **IDEAL)
    assert r.step_terms_s["memory"] == pytest.approx((dense + 48 * touched * 4718592) * 2 / 3.35e12 / 3.0, rel=1e-9)
