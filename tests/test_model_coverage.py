"""Presets of what users deploy now (issue 14 part 7): each from its config.json, parameter counts
derived by hand here; the published totals are compared in tests/test_model.py."""
import pytest

from membound import load_model, resolve_name

B = 1e9

# The published totals are checked in tests/test_model.py (PUBLISHED); here the hand arithmetic.


def test_mpt_7b_by_hand():
    # d=4096, 32 layers, MHA, GELU FFN 4d (2 matrices), LayerNorms without bias (d each, 2 per layer),
    # tied embeddings (one 50432 x d matrix), final norm d
    d = 4096
    layer = 4 * d * d + 2 * d * (4 * d) + 2 * d
    total = 32 * layer + 50432 * d + d
    assert total == 6_649_286_656
    assert load_model("mpt-7b").total_params == total


def test_falcon_7b_by_hand():
    # h=4544, 71 query heads of 64, one K and one V head (multi-query), GELU FFN 4h, one LayerNorm with
    # bias per layer (2h), tied embeddings; the model card's "7B" is the rounded name: 6.92B is 1.1% under
    h = 4544
    layer = 2 * h * h + 2 * h * 64 + 2 * h * (4 * h) + 2 * h
    total = 32 * layer + 65024 * h + h
    assert total == 6_921_716_160
    m = load_model("falcon-7b")
    assert m.total_params == total and m.kv_elements_per_token_per_layer == 2 * 1 * 64


def test_falcon_40b_by_hand():
    # h=8192, 128 query heads of 64, 8 KV heads, GELU FFN 4h, two LayerNorms with bias (4h), tied
    # embeddings: 41.30B (the name "40B" is rounded down)
    h = 8192
    layer = 2 * h * h + 2 * h * 8 * 64 + 2 * h * (4 * h) + 4 * h
    assert load_model("falcon-40b").total_params == 60 * layer + 65024 * h + h == 41_303_285_760


def test_glm_45_by_hand():
    h, e = 5120, 3 * 5120 * 1536                       # one expert: gate, up, down
    attn = 2 * h * 96 * 128 + 2 * h * 8 * 128 + (96 + 16) * 128   # q,o + k,v + q/k/v biases
    dense = attn + 2 * h + 3 * h * 12288
    moe = attn + 2 * h + 161 * e + h * 160            # 160 routed + 1 shared, router
    total = 3 * dense + 89 * moe + 2 * 151552 * h + h
    m = load_model("glm-4.5")
    assert m.total_params == total == 352_797_791_232   # 0.6% under 355B: the MTP layer is not described
    assert m.active_params == total - 89 * 152 * e


def test_kimi_k2_by_hand():
    # DeepSeek-V3 MLA with 64 heads; 1 dense + 60 MoE layers of 384 routed + 1 shared experts of 2048
    h = 7168
    attn = (h * 1536 + 1536 + 1536 * 64 * 192 + h * (512 + 64) + 512 + 512 * 64 * 256 + 64 * 128 * h)
    e = 3 * h * 2048
    dense = attn + 2 * h + 3 * h * 18432
    moe = attn + 2 * h + 385 * e + h * 384
    total = dense + 60 * moe + 2 * 163840 * h + h
    m = load_model("kimi-k2")
    assert m.total_params == total
    # the technical report says 1.04T total: the config's tensors give 1.026T, 1.3% under (not within 1%)
    assert total == pytest.approx(1.04e12, rel=0.015)
    assert m.active_params == total - 60 * 376 * e


def test_llama4_interleaving_and_chunked_attention():
    mav, scout = load_model("llama-4-maverick"), load_model("llama-4-scout")
    assert mav.n_moe_layers == 24 and scout.n_moe_layers == 48      # every 2nd layer vs every layer
    h = 5120
    attn = 2 * h * 40 * 128 + 2 * h * 8 * 128
    e = 3 * h * 8192
    dense = attn + 2 * h + 3 * h * 16384
    moe = attn + 2 * h + 129 * e + h * 128
    assert mav.total_params == 24 * dense + 24 * moe + 2 * 202048 * h + h
    # scout: 16 routed + 1 shared in all 48 layers; Meta's 109B includes the vision encoder
    assert scout.total_params == 48 * (attn + 2 * h + 17 * e + h * 16) + 2 * 202048 * h + h
    # 36 chunked layers hold at most 8192 tokens, 12 global layers hold all: at 100k tokens
    assert mav.context_layer_tokens(100_000) == 36 * 8192 + 12 * 100_000


@pytest.mark.parametrize("hf_id, preset", [
    ("moonshotai/Kimi-K2-Instruct", "kimi-k2"), ("zai-org/GLM-4.6", "glm-4.6"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2"), ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
    ("mistralai/Mistral-Large-Instruct-2411", "mistral-large-2"), ("tiiuae/falcon-40b", "falcon-40b"),
    ("mosaicml/mpt-30b", "mpt-30b"), ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3.1"),
])
def test_hf_ids_resolve_to_the_presets(hf_id, preset):
    assert resolve_name("model", hf_id) == preset
