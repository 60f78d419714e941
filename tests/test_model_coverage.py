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


def test_gpt_j_6b_by_hand():
    # d=4096, 28 layers, 16 heads of 256 with as many K/V heads (MHA), q/k/v/out without bias (4 d^2),
    # GELU FFN 4d with biases on fc_in (4d) and fc_out (d), one LayerNorm with bias (2d) per layer,
    # untied 50400 x d input and output matrices, final norm d
    d = 4096
    layer = 4 * d * d + 2 * d * (4 * d) + 4 * d + d + 2 * d
    total = 28 * layer + 2 * 50400 * d + d
    assert total == 6_050_828_288
    m = load_model("gptj")     # MLPerf's benchmark name resolves to the preset
    assert m.name == "gpt-j-6b" and m.total_params == total
    assert m.kv_elements_per_token_per_layer == 2 * 16 * 256


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


def test_kimi_k25_is_the_kimi_k2_text_decoder_with_a_longer_context():
    # moonshotai/Kimi-K2.5 text_config: the same 61 MLA layers (64 heads), 1 dense + 60 MoE layers of
    # 384 routed + 1 shared experts of 2048, vocab 163840, as Kimi-K2; context 262,144 tokens
    h = 7168
    attn = (h * 1536 + 1536 + 1536 * 64 * 192 + h * (512 + 64) + 512 + 512 * 64 * 256 + 64 * 128 * h)
    e = 3 * h * 2048
    total = (attn + 2 * h + 3 * h * 18432) + 60 * (attn + 2 * h + 385 * e + h * 384) + 2 * 163840 * h + h
    m = load_model("moonshotai/Kimi-K2.5")
    assert m.name == "kimi-k2.5" and m.total_params == total == load_model("kimi-k2").total_params
    assert m.active_params == total - 60 * 376 * e
    assert m.max_context == 262_144
    # MLA caches the 512-wide latent plus the 64-wide rope key per layer and token
    assert m.kv_elements_per_token_per_layer == 512 + 64


def test_minimax_m25_resolves_to_the_m2_architecture():
    # MiniMax's deployment guides apply to M2.5, M2.1 and M2 alike, changing only the model name
    for hf in ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2"):
        assert resolve_name("model", hf) == "minimax-m2"


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
    ("deepseek-ai/DeepSeek-V3.2", "deepseek-v3.2"), ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b"), ("Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b"),
    ("Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b"), ("Qwen/Qwen3.5-122B-A10B-FP8", "qwen3.5-122b-a10b"),
    ("moonshotai/Kimi-K2.6", "kimi-k2.5"), ("zai-org/GLM-5", "glm-5"), ("Qwen/Qwen3.6-27B", "qwen3.6-27b"),
])
def test_hf_ids_resolve_to_the_presets(hf_id, preset):
    assert resolve_name("model", hf_id) == preset


# ---- the config.json figures each preset cites, read by Model.from_hf_config ------------------
CONFIGS = {
    "kimi-k2": {"model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 64,
                "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
                "first_k_dense_replace": 1, "moe_layer_freq": 1, "vocab_size": 163840,
                "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "glm-4.5": {"model_type": "glm4_moe", "hidden_size": 5120, "num_hidden_layers": 92, "num_attention_heads": 96,
                "num_key_value_heads": 8, "head_dim": 128, "attention_bias": True, "intermediate_size": 12288,
                "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1,
                "num_experts_per_tok": 8, "first_k_dense_replace": 3, "vocab_size": 151552,
                "max_position_embeddings": 131072, "tie_word_embeddings": False, "use_qk_norm": False},
    "minimax-m2": {"model_type": "minimax_m2", "hidden_size": 3072, "num_hidden_layers": 62,
                   "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 256,
                   "num_experts_per_tok": 8, "intermediate_size": 1536, "vocab_size": 200064,
                   "max_position_embeddings": 196608, "use_qk_norm": True, "tie_word_embeddings": False},
    "llama-4-maverick": {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
        "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 128, "num_experts_per_tok": 1,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "interleave_moe_layer_step": 2,
        "vocab_size": 202048, "attention_chunk_size": 8192, "max_position_embeddings": 1048576,
        "tie_word_embeddings": False}},
    "mpt-7b": {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4,
               "vocab_size": 50432, "max_seq_len": 2048, "no_bias": True},
    "gpt-j-6b": {"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None,
                 "rotary_dim": 64, "vocab_size": 50400, "n_positions": 2048, "tie_word_embeddings": False},
    "falcon-7b": {"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
                  "multi_query": True, "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
                  "vocab_size": 65024},
    "falcon-40b": {"model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128,
                   "num_kv_heads": 8, "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
                   "vocab_size": 65024},
    "qwen3-next-80b-a3b": {"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
                           "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                           "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
                           "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
                           "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
                           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
                           "vocab_size": 151936, "max_position_embeddings": 262144, "tie_word_embeddings": False},
    "qwen3.5-35b-a3b": {"model_type": "qwen3_5_moe", "text_config": {
        "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "attn_output_gate": True,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "full_attention_interval": 4,
        "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "vocab_size": 248320,
        "max_position_embeddings": 262144, "tie_word_embeddings": False}},
}
CONFIGS["deepseek-v3.2"] = {**CONFIGS["kimi-k2"], "model_type": "deepseek_v32", "num_attention_heads": 128,
                            "num_key_value_heads": 128, "n_routed_experts": 256, "first_k_dense_replace": 3,
                            "vocab_size": 129280, "max_position_embeddings": 163840, "index_topk": 2048,
                            "index_n_heads": 64, "index_head_dim": 128}
CONFIGS["glm-5"] = {**CONFIGS["kimi-k2"], "model_type": "glm_moe_dsa", "hidden_size": 6144, "num_hidden_layers": 78,
                    "q_lora_rank": 2048, "qk_nope_head_dim": 192, "v_head_dim": 256, "intermediate_size": 12288,
                    "n_routed_experts": 256, "first_k_dense_replace": 3, "vocab_size": 154880,
                    "max_position_embeddings": 202752, "index_topk": 2048, "index_n_heads": 32, "index_head_dim": 128}
CONFIGS["qwen3.6-27b"] = {"model_type": "qwen3_5", "text_config": {
    **CONFIGS["qwen3.5-35b-a3b"]["text_config"], "model_type": "qwen3_5_text", "hidden_size": 5120, "num_hidden_layers": 64,
    "num_attention_heads": 24, "num_key_value_heads": 4, "intermediate_size": 17408, "linear_num_value_heads": 48,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16, "mlp_only_layers": []}}
for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"):
    del CONFIGS["qwen3.6-27b"]["text_config"][k]
CONFIGS["qwen3.5-35b-a3b"]["text_config"]["layer_types"] *= 10
CONFIGS["qwen3.5-397b-a17b"] = {"model_type": "qwen3_5_moe", "text_config": {
    **CONFIGS["qwen3.5-35b-a3b"]["text_config"], "hidden_size": 4096, "num_hidden_layers": 60,
    "num_attention_heads": 32, "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 15,
    "linear_num_value_heads": 64, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 1024,
    "shared_expert_intermediate_size": 1024}}

# models common in published benchmark tables (llama.cpp, vLLM, SGLang); sources in each preset
_QWEN25 = {"model_type": "qwen2", "use_sliding_window": False, "max_position_embeddings": 32768, "vocab_size": 151936}
CONFIGS.update({
    "qwen2.5-0.5b": {**_QWEN25, "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "intermediate_size": 4864, "tie_word_embeddings": True},
    "qwen2.5-1.5b": {**_QWEN25, "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
                     "num_key_value_heads": 2, "intermediate_size": 8960, "tie_word_embeddings": True},
    "qwen2.5-3b": {**_QWEN25, "hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
                   "num_key_value_heads": 2, "intermediate_size": 11008, "tie_word_embeddings": True},
    "qwen2.5-14b": {**_QWEN25, "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "intermediate_size": 13824, "vocab_size": 152064,
                    "tie_word_embeddings": False},
    "qwen2.5-32b": {**_QWEN25, "hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "intermediate_size": 27648, "vocab_size": 152064,
                    "tie_word_embeddings": False},
    "deepseek-r1-distill-qwen-1.5b": {**_QWEN25, "hidden_size": 1536, "num_hidden_layers": 28,
                                      "num_attention_heads": 12, "num_key_value_heads": 2, "intermediate_size": 8960,
                                      "tie_word_embeddings": False, "max_position_embeddings": 131072,
                                      "sliding_window": 4096, "max_window_layers": 21},
    "qwen3-0.6b": {"model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936,
                   "tie_word_embeddings": True, "max_position_embeddings": 40960, "use_sliding_window": False},
    "gemma-2-2b": {"model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
                   "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000,
                   "sliding_window": 4096, "max_position_embeddings": 8192},
    "gemma-2-9b": {"model_type": "gemma2", "hidden_size": 3584, "num_hidden_layers": 42, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
                   "sliding_window": 4096, "max_position_embeddings": 8192},
    "gemma-2-27b": {"model_type": "gemma2", "hidden_size": 4608, "num_hidden_layers": 46, "num_attention_heads": 32,
                    "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 36864, "vocab_size": 256000,
                    "sliding_window": 4096, "max_position_embeddings": 8192},
    "gemma-3-1b": {"model_type": "gemma3_text", "hidden_size": 1152, "num_hidden_layers": 26,
                   "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 6912,
                   "vocab_size": 262144, "sliding_window": 512, "sliding_window_pattern": 6,
                   "max_position_embeddings": 32768},
    "gemma-3-12b": {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 3840, "num_hidden_layers": 48, "num_attention_heads": 16,
        "num_key_value_heads": 8, "intermediate_size": 15360, "sliding_window": 1024}},
    "mistral-nemo-12b": {"model_type": "mistral", "hidden_size": 5120, "num_hidden_layers": 40,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                         "intermediate_size": 14336, "vocab_size": 131072, "sliding_window": None,
                         "tie_word_embeddings": False},
    "phi-3-mini": {"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
                   "max_position_embeddings": 131072, "sliding_window": 262144, "tie_word_embeddings": False},
    "phi-3-medium": {"model_type": "phi3", "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 40,
                     "num_key_value_heads": 10, "intermediate_size": 17920, "vocab_size": 32064,
                     "max_position_embeddings": 131072, "sliding_window": 131072, "tie_word_embeddings": False},
    "gemma-7b": {"model_type": "gemma", "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                 "num_key_value_heads": 16, "head_dim": 256, "intermediate_size": 24576, "vocab_size": 256000,
                 "max_position_embeddings": 8192},
    "phi-4-mini": {"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 24,
                   "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 200064,
                   "max_position_embeddings": 131072, "sliding_window": 262144, "partial_rotary_factor": 0.75,
                   "tie_word_embeddings": True},
    "codellama-34b": {"model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 48, "num_attention_heads": 64,
                      "num_key_value_heads": 8, "intermediate_size": 22016, "vocab_size": 32000,
                      "max_position_embeddings": 16384, "rope_theta": 1000000, "tie_word_embeddings": False},
    "deepseek-v2-lite": {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
                         "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": None,
                         "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                         "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 64,
                         "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
                         "moe_layer_freq": 1, "vocab_size": 102400, "max_position_embeddings": 163840,
                         "tie_word_embeddings": False},
    "command-r": {"model_type": "cohere", "hidden_size": 8192, "num_hidden_layers": 40, "num_attention_heads": 64,
                  "num_key_value_heads": 64, "intermediate_size": 22528, "vocab_size": 256000,
                  "use_qk_norm": False, "logit_scale": 0.0625,
                  "tie_word_embeddings": True},
    "mixtral-8x22b": {"model_type": "mixtral", "hidden_size": 6144, "num_hidden_layers": 56, "num_attention_heads": 48,
                      "num_key_value_heads": 8, "intermediate_size": 16384, "vocab_size": 32000,
                      "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 65536,
                      "sliding_window": None, "tie_word_embeddings": False},
})


def test_qwen35_397b_by_hand():
    # h=4096; DeltaNet with 16 key heads and 64 value heads of 128: qkvz h x (2*2048 + 2*8192), ba h x 128,
    # conv 12288 x 4, dt_bias + A_log 128, norm 128, out 8192 x h
    h = 4096
    lin = h * (4096 + 16384) + h * 128 + 12288 * 4 + 128 + 128 + 8192 * h
    full = h * 2 * 32 * 256 + 2 * h * 512 + 32 * 256 * h + 2 * 256
    e = 3 * h * 1024
    moe = 513 * e + h * 512 + h
    total = 45 * (lin + 2 * h + moe) + 15 * (full + 2 * h + moe) + 2 * 248320 * h + h
    m = load_model("qwen3.5-397b-a17b")
    assert m.total_params == total == 396_346_350_336          # Qwen: 397B with the vision encoder
    assert m.active_params == total - 60 * 502 * e              # 17.35B: "A17B"
    assert m.linear_state_window == -(-(64 * 128 * 128 + 12288 * 3) // (2 * 2 * 256)) == 1060


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_config_json_reproduces_the_preset(preset):
    from membound import Model
    m, p = Model.from_hf_config(CONFIGS[preset], name=preset), load_model(preset)
    for attr in ("total_params", "active_params", "dense_params", "n_moe_layers",
                 "kv_elements_per_token_per_layer", "attn_flops_per_ctx_token_per_layer",
                 "index_bytes_per_token_per_layer", "index_flops_per_ctx_token_per_layer"):
        assert getattr(m, attr) == getattr(p, attr), attr
    assert m.window_groups() == p.window_groups() and m.attended_groups() == p.attended_groups()


def test_qwen3_next_by_hand():
    # h=2048; a Gated DeltaNet layer: in_proj_qkvz h x (2*16*128 + 2*32*128), in_proj_ba h x 64,
    # conv (2*2048 + 4096) x 4 taps, dt_bias + A_log 2*32, gated norm 128, out_proj 4096 x h
    h = 2048
    lin = h * (4096 + 8192) + h * 64 + 8192 * 4 + 64 + 128 + 4096 * h
    # gated full attention: q (with gate) h x 2*16*256, k and v h x 2*256 each, o 16*256 x h, q/k norms
    full = h * 2 * 4096 + 2 * h * 512 + 4096 * h + 2 * 256
    moe = 513 * 3 * h * 512 + h * 512 + h           # 512 routed + 1 shared expert, router, shared gate
    total = 36 * (lin + 2 * h + moe) + 12 * (full + 2 * h + moe) + 2 * 151936 * h + h
    m = load_model("qwen3-next-80b-a3b")
    assert total == m.total_params == 79_674_391_296
    assert m.active_params == total - 48 * 502 * 3 * h * 512 == 3_874_929_408
    # the recurrent state: 32 value heads x 128 x 128 plus the conv's last 3 inputs of 8192 channels,
    # described as the KV of ceil(548864 / (2*2*256)) = 536 tokens on the 36 linear layers
    assert m.linear_state_elements == 32 * 128 * 128 + 8192 * 3 == 548_864
    assert m.window_groups() == ((536, 36), (None, 12))
    assert m.kv_bytes_per_token("bf16", context=100_000) == (36 * 536 + 12 * 100_000) * 1024 * 2


def test_a_hybrid_layer_pattern_other_than_the_interval_is_refused():
    from membound import Model, ProfileError
    cfg = {**CONFIGS["qwen3.5-35b-a3b"]["text_config"], "layer_types": ["full_attention"] * 40}
    with pytest.raises(ProfileError, match="layer_types"):
        Model.from_hf_config(cfg)


# ---- models common in published benchmark tables (llama.cpp, vLLM, SGLang) ----------------------


@pytest.mark.parametrize("name, h, layers, heads, kv, ffn, vocab, tied, total", [
    # Qwen2.5: head_dim 128 (64 for 0.5B), q/k/v biases, SwiGLU, 2 RMSNorms a layer, final norm
    ("qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, True, 494_032_768),
    ("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936, True, 1_543_714_304),
    ("qwen2.5-3b", 2048, 36, 16, 2, 11008, 151936, True, 3_085_938_688),
    ("qwen2.5-14b", 5120, 48, 40, 8, 13824, 152064, False, 14_770_033_664),
    ("qwen2.5-32b", 5120, 64, 40, 8, 27648, 152064, False, 32_763_876_352),
    # the 1.5B's shape with its own lm_head: 151936 x 1536 = 233,373,696 more
    ("deepseek-r1-distill-qwen-1.5b", 1536, 28, 12, 2, 8960, 151936, False, 1_543_714_304 + 233_373_696),
])
def test_qwen25_by_hand(name, h, layers, heads, kv, ffn, vocab, tied, total):
    hd = h // heads
    attn = 2 * h * heads * hd + 2 * h * kv * hd + (heads + 2 * kv) * hd
    layer = attn + 3 * h * ffn + 2 * h
    assert layers * layer + vocab * h * (1 if tied else 2) + h == total
    assert load_model(name).total_params == total


def test_gemma2_by_hand():
    # google/gemma-2-9b: 16 query heads and 8 KV heads of 256, GeGLU 14336, four RMSNorms a layer,
    # tied 256000-token embeddings; layers 0, 2, 4, ... attend 4096 tokens, 1, 3, 5, ... all
    h = 3584
    layer = 2 * h * 16 * 256 + 2 * h * 8 * 256 + 3 * h * 14336 + 4 * h
    total = 42 * layer + 256000 * h + h
    m = load_model("gemma-2-9b")
    assert m.total_params == total == 9_241_705_984
    assert m.window_groups() == ((4096, 21), (None, 21))
    assert m.kv_bytes_per_token("bf16", context=8192) == (21 * 4096 + 21 * 8192) * 2 * 8 * 256 * 2
    # 27B: head_dim 128, 32/16 heads, 46 layers
    h = 4608
    layer = 2 * h * 32 * 128 + 2 * h * 16 * 128 + 3 * h * 36864 + 4 * h
    assert load_model("gemma-2-27b").total_params == 46 * layer + 256000 * h + h == 27_227_128_320


def test_gemma3_1b_and_12b_by_hand():
    # 1B: 4 query heads and one KV head of 256, q/k norms (256 each), 4 norms a layer, vocab 262144,
    # every 6th layer global and the others a 512-token window: 26 layers -> 4 global, 22 local
    h = 1152
    layer = 2 * h * 4 * 256 + 2 * h * 1 * 256 + 2 * 256 + 3 * h * 6912 + 4 * h
    m = load_model("gemma-3-1b")
    assert m.total_params == 26 * layer + 262144 * h + h == 999_885_952
    assert m.window_groups() == ((512, 22), (None, 4))
    # 12B text decoder: 16/8 heads of 256, ffn 15360, 48 layers (8 global), vocab 262208
    h = 3840
    layer = 2 * h * 16 * 256 + 2 * h * 8 * 256 + 2 * 256 + 3 * h * 15360 + 4 * h
    m = load_model("gemma-3-12b")
    assert m.total_params == 48 * layer + 262208 * h + h == 11_766_034_176
    assert m.window_groups() == ((1024, 40), (None, 8))


def test_phi3_and_nemo_by_hand():
    # Phi-3-mini: multi-head attention (32 KV heads of 96), SwiGLU 8192, untied 32064-token embeddings
    h = 3072
    assert load_model("phi-3-mini").total_params == 32 * (4 * h * h + 3 * h * 8192 + 2 * h) + 2 * 32064 * h + h
    assert load_model("phi-3-mini").kv_elements_per_token_per_layer == 2 * 32 * 96
    # Phi-3-medium: phi-4's layers (40/10 heads of 128, ffn 17920) with the 32064-token vocabulary
    h = 5120
    layer = 2 * h * 40 * 128 + 2 * h * 10 * 128 + 3 * h * 17920 + 2 * h
    assert load_model("phi-3-medium").total_params == 40 * layer + 2 * 32064 * h + h == 13_960_238_080
    # Mistral-Nemo: 32/8 heads of 128 (4096 < hidden 5120), ffn 14336, vocab 131072, untied
    layer = 2 * h * 32 * 128 + 2 * h * 8 * 128 + 3 * h * 14336 + 2 * h
    assert load_model("mistral-nemo-12b").total_params == 40 * layer + 2 * 131072 * h + h == 12_247_782_400


def test_mixtral_8x22b_by_hand():
    h, e = 6144, 3 * 6144 * 16384
    layer = 2 * h * 48 * 128 + 2 * h * 8 * 128 + 2 * h + 8 * e + h * 8      # 8 experts and the router
    total = 56 * layer + 2 * 32000 * h + h
    m = load_model("mixtral-8x22b")
    assert m.total_params == total == 140_620_634_112
    assert m.active_params == total - 56 * 6 * e == 39_152_031_744         # 2 of 8 experts a token


def test_gemma_v1_by_hand():
    # gemma: GeGLU, 2 RMSNorms a layer, tied 256000-token embeddings; the Gemma report's non-embedding
    # counts (7,751,248,896 and 1,981,884,416) are the layers plus the final norm
    h = 3072                          # 7B: 16 heads of 256 for queries, keys and values alike
    layer = 4 * h * 16 * 256 + 3 * h * 24576 + 2 * h
    assert 28 * layer + h == 7_751_248_896
    assert load_model("gemma-7b").total_params == 28 * layer + h + 256000 * h
    h = 2048                          # 2B: 8 query heads, one KV head of 256
    layer = 2 * h * 8 * 256 + 2 * h * 256 + 3 * h * 16384 + 2 * h
    assert 18 * layer + h == 1_981_884_416
    assert load_model("gemma-2b").total_params == 18 * layer + h + 256000 * h


def test_phi4_mini_and_codellama_34b_by_hand():
    h = 3072                          # 24 query heads and 8 KV heads of 128, tied 200064-token embeddings
    layer = 2 * h * 24 * 128 + 2 * h * 8 * 128 + 3 * h * 8192 + 2 * h
    assert load_model("phi-4-mini").total_params == 32 * layer + 200064 * h + h == 3_836_021_760
    h = 8192                          # 64 query heads and 8 KV heads of 128, ffn 22016, untied 32000-token embeddings
    layer = 2 * h * 64 * 128 + 2 * h * 8 * 128 + 3 * h * 22016 + 2 * h
    assert load_model("codellama-34b").total_params == 48 * layer + 2 * 32000 * h + h == 33_743_970_304


def test_deepseek_v2_lite_by_hand():
    # MLA without q compression: q h x 16*(128+64), kv_a h x (512+64) with its 512 norm, kv_b 512 x 16*(128+128),
    # o 16*128 x h; layer 0 dense (10944), layers 1-26: 64 routed + 2 shared experts of 1408, router h x 64
    h = 2048
    attn = h * 16 * 192 + h * (512 + 64) + 512 + 512 * 16 * 256 + 16 * 128 * h
    e = 3 * h * 1408
    dense = attn + 2 * h + 3 * h * 10944
    moe = attn + 2 * h + 66 * e + h * 64
    total = dense + 26 * moe + 2 * 102400 * h + h
    m = load_model("deepseek-v2-lite")
    assert m.total_params == total == 15_706_484_224                     # "15.7B total"
    assert m.active_params == total - 26 * 58 * e
    # DeepSeek's "2.4B activated": 2.45B here without the input embedding (2.1% over), 2.66B with it
    assert (m.active_params - 102400 * h) / 1e9 == pytest.approx(2.4, rel=0.025)
    assert m.kv_elements_per_token_per_layer == 512 + 64


def test_command_r_by_hand():
    # 64 heads of 128 for q, k, v (MHA), SwiGLU 22528, one weight-only LayerNorm a layer, tied embeddings
    h = 8192
    layer = 4 * h * h + 3 * h * 22528 + h
    assert load_model("command-r").total_params == 40 * layer + 256000 * h + h == 34_980_831_232
    from membound import Model, ProfileError
    with pytest.raises(ProfileError, match="use_qk_norm"):     # Command R+'s per-head norms are not described
        Model.from_hf_config({**CONFIGS["command-r"], "use_qk_norm": True})


def test_qwen3_06b_by_hand():
    # 16 query heads of 128 = 2048 > hidden 1024, 8 KV heads, q/k norms, tied embeddings
    h = 1024
    layer = 2 * h * 16 * 128 + 2 * h * 8 * 128 + 2 * 128 + 3 * h * 3072 + 2 * h
    assert load_model("qwen3-0.6b").total_params == 28 * layer + 151936 * h + h == 596_049_920


@pytest.mark.parametrize("spelling, preset", [
    ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-32b"), ("Qwen2.5-Coder-32B-Instruct", "qwen2.5-32b"),
    ("Qwen/QwQ-32B", "qwen2.5-32b"), ("QwQ-32B", "qwen2.5-32b"), ("Qwen2.5-14B-Instruct", "qwen2.5-14b"),
    ("DeepSeek-R1-Distill-Qwen-1.5B", "deepseek-r1-distill-qwen-1.5b"),
    ("DeepSeek-R1-Distill-Qwen-7B", "qwen2.5-7b"), ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "qwen2.5-14b"),
    ("DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b"), ("DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b"),
    ("DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"), ("Qwen2.5-Math-1.5B-Instruct", "qwen2.5-1.5b"),
    ("Qwen2.5-Math-7B", "qwen2.5-7b"), ("Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b"), ("Qwen/Qwen3-0.6B", "qwen3-0.6b"),
    ("google/gemma-2-9b-it", "gemma-2-9b"), ("gemma-2-27b-it", "gemma-2-27b"), ("gemma-3-1b-it", "gemma-3-1b"),
    ("google/gemma-3-12b-it", "gemma-3-12b"), ("Mistral-Nemo-Instruct-2407", "mistral-nemo-12b"),
    ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini"), ("Phi-3.5-mini-instruct", "phi-3-mini"),
    ("Phi-3-medium-128k-instruct", "phi-3-medium"), ("Phi-4-mini-instruct", "phi-4-mini"),
    ("Qwen2-7B-Instruct", "qwen2.5-7b"), ("Qwen/Qwen2-72B-Instruct", "qwen2.5-72b"), ("Qwen2-1.5B", "qwen2.5-1.5b"),
    ("Qwen3-Coder-30B-A3B-Instruct", "qwen3-30b-a3b"), ("CodeLlama-34b-Instruct-hf", "codellama-34b"),
    ("c4ai-command-r-v01", "command-r"),
    ("gemma-7b-it", "gemma-7b"), ("google/gemma-1.1-2b-it", "gemma-2b"), ("DeepSeek-Coder-V2-Lite-Instruct", "deepseek-v2-lite"),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
])
def test_benchmark_table_spellings_resolve(spelling, preset):
    assert resolve_name("model", spelling) == preset


def test_phi3_sliding_window_is_not_applied():
    # Phi-3-mini-4k's config gives sliding_window 2047 and no layers it covers; llama.cpp disables it
    from membound import Model
    m = Model.from_hf_config({**CONFIGS["phi-3-mini"], "max_position_embeddings": 4096, "sliding_window": 2047})
    assert m.window_groups() == ((None, 32),) and m.total_params == load_model("phi-3-mini").total_params


def test_gemma2_layer_types_override_the_alternation():
    from membound import Model
    types = ["full_attention"] * 2 + ["sliding_attention"] * 24
    m = Model.from_hf_config({**CONFIGS["gemma-2-2b"], "layer_types": types})
    assert m.window_groups() == ((None, 2), (4096, 24)) and m.norms_per_layer == 4 and m.tied_embeddings


# ---- what users deploy in late 2026 ----------------------------------------------------------------


def test_glm_5_by_hand():
    # zai-org/GLM-5: MLA with 64 heads (q latent 2048; nope 192 + rope 64 for q and k, v 256), a lightning indexer
    # per layer (32 heads of 128 from the q latent, one key h x 128 with its LayerNorm, weights h x 32),
    # 3 dense layers (12288) and 75 MoE layers of 256 routed + 1 shared experts of 2048, untied 154880-token vocab
    h = 6144
    attn = (h * 2048 + 2048 + 2048 * 64 * 256 + h * (512 + 64) + 512 + 512 * 64 * (192 + 256) + 64 * 256 * h)
    indexer = 2048 * 32 * 128 + h * 128 + 2 * 128 + h * 32
    e = 3 * h * 2048
    dense = attn + indexer + 2 * h + 3 * h * 12288
    moe = attn + indexer + 2 * h + 257 * e + h * 256
    total = 3 * dense + 75 * moe + 2 * 154880 * h + h
    m = load_model("zai-org/GLM-5")
    assert m.name == "glm-5" and m.total_params == total == 743_911_199_232      # "744B"
    assert m.active_params == total - 75 * 248 * e
    # "40B active": 40.83B without the input embedding (a token reads one row of it), 2.1% over the rounded figure
    assert (m.active_params - 154880 * h) / 1e9 == pytest.approx(40.0, rel=0.025)
    assert m.kv_elements_per_token_per_layer == 512 + 64 and m.attended_groups() == ((2048, 78),)


@pytest.mark.parametrize("key, value", [("indexer_types", ["full"] * 3 + ["shared"] * 75),
                                        ("index_topk_freq", 4), ("index_topk_pattern", "FFFS" * 19 + "FS")])
def test_layers_sharing_an_indexer_are_refused(key, value):
    # GLM-5.2's IndexShare: a shared layer reuses another layer's top-k and holds no indexer: not described
    from membound import Model, ProfileError
    with pytest.raises(ProfileError, match=key):
        Model.from_hf_config({**CONFIGS["glm-5"], key: value})


def test_qwen36_27b_by_hand():
    # h=5120; DeltaNet with 16 key heads and 48 value heads of 128: qkvz h x (2*2048 + 2*6144), ba h x 96,
    # conv 10240 x 4, dt_bias + A_log 96, norm 128, out 6144 x h; gated full attention 24/4 heads of 256 with
    # q/k norms; a dense SwiGLU FFN of 17408 on every layer; untied 248320-token embeddings
    h = 5120
    lin = h * (4096 + 12288) + h * 96 + 10240 * 4 + 96 + 128 + 6144 * h
    full = h * 2 * 24 * 256 + 2 * h * 4 * 256 + 24 * 256 * h + 2 * 256
    ffn = 3 * h * 17408
    total = 48 * (lin + 2 * h + ffn) + 16 * (full + 2 * h + ffn) + 2 * 248320 * h + h
    m = load_model("Qwen/Qwen3.6-27B")
    assert m.name == "qwen3.6-27b" and m.total_params == m.active_params == total == 26_895_998_464   # "27B"
    # the recurrent state (48 x 128 x 128 + conv 10240 x 3) as KV of 2 x 4 x 256 elements a token: 399 tokens
    assert m.linear_state_window == -(-(48 * 128 * 128 + 10240 * 3) // (2 * 4 * 256)) == 399
    assert m.window_groups() == ((399, 48), (None, 16))
    assert resolve_name("model", "Qwen/Qwen3.5-27B") == "qwen3.6-27b"
    assert resolve_name("model", "Qwen/Qwen3.6-35B-A3B-FP8") == "qwen3.5-35b-a3b"    # Qwen3.5-35B-A3B's shapes
