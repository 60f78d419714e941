"""A lone prompt in serve() is core's prefill: one physics, not two. Hand-derived per family
(dense GQA, MLA MoE, sliding-window MoE), at two lengths each, and the token budget's chunks."""
import pytest

import membound as mb
from membound.physics.roofline import causal_pairs
from membound.serving import build

H100, H200 = 989e12, 989e12      # dense 16-bit FLOP/s (H100 SXM, H200: the same Hopper die)
L8B = 8_030_261_248              # Llama-3.1-8B parameters
LOOKUP_8B = 128256 * 4096        # untied input embedding (a lookup); the LM head is the same size
WIDE = mb.serving.Scheduler(token_budget=32_768)   # every prompt here in one step: no chunks


def pairs(layers_full: int, s: float, layers_windowed: int = 0, w: int = 0) -> float:
    """(layer, key) pairs a causal prefill of s tokens attends to: i earlier keys for token i,
    sum_{i<s} i = s (s - 1) / 2 per full layer; a window of w: w (w - 1) / 2 + (s - w) w."""
    return layers_full * s * (s - 1) / 2 + layers_windowed * (w * (w - 1) / 2 + (s - w) * w)


def lone(sm, S: float) -> float:
    """serve's step of one whole prompt with nothing else running (the solver's tau_own)."""
    return float(sm.step(0.0, 0.0, S, float(sm.held(S)), float(causal_pairs(sm.groups, S)), seqs=1.0))


def attention(sm, S: float) -> float:
    """the seconds the prompt's attention pairs add to that step (compute-bound: the difference)."""
    return lone(sm, S) - float(sm.step(0.0, 0.0, S, float(sm.held(S)), 0.0, seqs=1.0))


@pytest.mark.parametrize("S", [2_000, 8_000])
def test_dense_gqa_lone_prefill_by_hand(S):
    # Llama-3.1-8B bf16 on one ideal H100 (989 TFLOP/s, no floor or overheads), compute-bound
    # (2 x 7.5e9 x 2,000 = 3e13 FLOP, 30 ms, against 15 GB of weights, 4.5 ms):
    #   GEMMs 2 x (8,030,261,248 - 2 x 525,336,576) x S (the embedding lookup and the LM head
    #   out), the LM head for the last token 2 x 128,256 x 4,096, the attention 4 x 32 heads x 128
    #   = 16,384 FLOP per (layer, pair) over 32 x S (S - 1) / 2 pairs
    gemm = 2 * (L8B - 2 * LOOKUP_8B) * S / H100
    head = 2 * 128256 * 4096 / H100
    attn = 16_384 * pairs(32, S) / H100
    sm, _, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(S), output=mb.serving.Fixed(2), runtime="ideal",
                     scheduler=WIDE)
    assert attention(sm, S) == pytest.approx(attn, rel=1e-9)
    assert lone(sm, S) == pytest.approx(gemm + head + attn, rel=1e-9)
    kw = dict(prompt_tokens=S, output_tokens=2, runtime="ideal")
    core = mb.estimate("llama-3.1-8b", "h100-sxm", **kw).prefill_s
    assert core == pytest.approx(gemm + head + attn, rel=1e-9)
    for engine in ("solver", "simulate"):
        r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, engine=engine, n_requests=2, scheduler=WIDE, **kw)
        assert r.ttft.median == pytest.approx(core, rel=1e-9)


@pytest.mark.parametrize("S", [8_192, 30_000])
def test_mla_prefill_pairs_at_the_decompressed_rate(S):
    # DeepSeek-R1 fp8 (KV and activations bf16: the 16-bit residual stream serve all-reduces) on 8
    # ideal H200s, tensor-parallel. A prefill's MLA attention runs
    # decompressed: 2 x 128 heads x (192 qk + 128 v) = 81,920 FLOP per (layer, pair); a decode
    # step's runs absorbed into the 512-wide latent: 278,528 (3.4x). The prefill's pairs, 61 x
    # S (S - 1) / 2, split over 8 chips at 989 TFLOP/s (the KV's 16-bit attention peak):
    #   8,192: 81,920 x 2.0467e9 / 7.912e15 = 21.19 ms (at the decode rate it was 72.05 ms)
    sm, _, _ = build("deepseek-r1", "h200", prompt=mb.serving.Fixed(S), output=mb.serving.Fixed(2), runtime="ideal",
                     weight_dtype="fp8", kv_dtype="bf16", activation_dtype="bf16", n_chips=8, scheduler=WIDE)
    assert sm.alpha_pre == pytest.approx(81_920 / (8 * H200), rel=1e-12)
    assert sm.alpha == pytest.approx(278_528 / (8 * H200), rel=1e-9)       # decode: unchanged
    assert attention(sm, S) == pytest.approx(81_920 * pairs(61, S) / (8 * H200), rel=1e-9)
    kw = dict(prompt_tokens=S, output_tokens=2, runtime="ideal", weight_dtype="fp8", kv_dtype="bf16",
              activation_dtype="bf16", n_chips=8)
    e = mb.estimate("deepseek-r1", "h200", **kw)
    if S <= 8192:   # one step at the default token budget: estimate's prefill is the lone prompt's step
        assert lone(sm, S) == pytest.approx(e.prefill_s, rel=1e-9)
    r = mb.serve("deepseek-r1", "h200", concurrency=1, **kw)   # the same chunks as estimate's static schedule
    assert r.ttft.median == pytest.approx(e.ttft_s, rel=1e-9)


@pytest.mark.parametrize("S", [4_096, 20_000])
def test_sliding_window_moe_prefill_by_hand(S):
    # gpt-oss-120b (mxfp4 experts, bf16 dense) on one ideal H200: 36 layers, half of them over a
    # 128-token window; 2 x 64 heads x (64 + 64) = 16,384 FLOP per (layer, pair) at 989 TFLOP/s
    kw = dict(weight_dtype="mxfp4", dense_weight_dtype="bf16", runtime="ideal")
    sm, _, _ = build("gpt-oss-120b", "h200", prompt=mb.serving.Fixed(S), output=mb.serving.Fixed(2), scheduler=WIDE, **kw)
    assert attention(sm, S) == pytest.approx(16_384 * pairs(18, S, 18, 128) / H200, rel=1e-9)
    e = mb.estimate("gpt-oss-120b", "h200", prompt_tokens=S, output_tokens=2, **kw)
    if S <= 8192:   # one step at the default token budget: estimate's prefill is the lone prompt's step
        assert lone(sm, S) == pytest.approx(e.prefill_s, rel=1e-9)
    r = mb.serve("gpt-oss-120b", "h200", concurrency=1, prompt_tokens=S, output_tokens=2, **kw)
    assert r.ttft.median == pytest.approx(e.ttft_s, rel=1e-9)


def test_a_prompt_beyond_the_budget_is_its_chunks_not_whole_budgets():
    # Llama-3.1-8B on one ideal H100, a 20,000-token prompt, budget 8,192: chunks of 8,192,
    # 8,192 and 3,616 tokens (all compute-bound). The three steps do the prompt's GEMMs once and
    # its 32 x S (S - 1) / 2 attention pairs once, and pay the LM head (one row per prompt in a
    # step) three times: a one-pass prefill + 2 heads, 2 x 1.062 us. Pricing three whole
    # chunks of 8,192 (the solver before) counted 24,576 tokens: +23%. estimate()'s static schedule
    # prefills in the same steps (the runtime's token budget, 8,192 without a served block).
    S = 20_000
    gemm = 2 * (L8B - 2 * LOOKUP_8B) * S / H100
    head = 2 * 128256 * 4096 / H100
    attn = 16_384 * pairs(32, S) / H100
    kw = dict(prompt_tokens=S, output_tokens=2, runtime="ideal", scheduler=mb.serving.Scheduler(token_budget=8192))
    core = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=S, output_tokens=2, runtime="ideal").prefill_s
    assert core == pytest.approx(gemm + 3 * head + attn, rel=1e-9)
    for engine in ("solver", "simulate"):
        r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, engine=engine, n_requests=2, **kw)
        assert r.ttft.median == pytest.approx(gemm + 3 * head + attn, rel=1e-9)
