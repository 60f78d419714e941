"""DeepSeek Sparse Attention (DeepSeek-V3.2): each query attends the index_topk tokens a lightning
indexer picks; the indexer reads and scores every cached token; the cache holds every token."""
import pytest

import membound as mb
from membound.errors import InvalidInputError

N_LAYERS, TOPK = 61, 2048
INDEX_KEY = 128 + 4 * 1        # fp8 index key of 128 + one fp32 scale per 128 elements: 132 bytes
MLA_PAIR = 2 * 128 * (2 * 512 + 64)   # absorbed MLA decode: 278,528 FLOPs per (layer, cached token)
INDEX_PAIR = 2 * 64 * 128      # 64 index heads x 128: 16,384 FLOPs per (layer, cached token)


def test_the_indexer_adds_its_parameters_to_deepseek_v31():
    # per layer: wq_b 1536 x 64*128, wk 7168 x 128, k_norm weight + bias 2 x 128, weights_proj 7168 x 64
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert per_layer == 13_959_424
    v31, v32 = mb.load_model("deepseek-v3.1"), mb.load_model("deepseek-v3.2")
    assert v32.total_params - v31.total_params == N_LAYERS * per_layer
    assert v32.active_params - v31.active_params == N_LAYERS * per_layer


def test_the_cache_holds_every_token_and_each_query_attends_topk():
    m = mb.load_model("deepseek-v3.2")
    # held: the MLA latent (512 + 64 fp8 bytes) and the index key (132 bytes), per layer
    assert m.kv_bytes_per_token("fp8") == N_LAYERS * (576 + INDEX_KEY) == 43_188
    assert m.kv_bytes_per_token("fp8", context=10_000) == 10_000 * 43_188
    assert m.context_layer_tokens(10_000) == N_LAYERS * TOPK               # attended
    assert m.context_layer_tokens(1_000) == N_LAYERS * 1_000               # fewer than top-k: all
    assert m.context_layer_tokens(10_000, held=True) == N_LAYERS * 10_000
    assert m.flops_per_token(10_000) == 2 * m.active_params + MLA_PAIR * N_LAYERS * TOPK \
        + INDEX_PAIR * N_LAYERS * 10_000


def test_beyond_topk_decode_grows_only_by_the_indexer_reading_its_keys():
    # 8 x H200, fp8, batch 1, the pure roofline: a step at 100k cached tokens against one at 50k.
    # The attention reads 2048 tokens at both; the indexer kernel (run before it, on every
    # tensor-parallel rank) reads 50,000 more index keys per layer: 61 x 50,000 x 132 B at 4.8 TB/s
    # = 83.9 us (its 16,384 FLOPs per key at 1,979 TFLOP/s fp8 take 25 us: memory-bound)
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="fp8", output_tokens=1, runtime="ideal")
    t = {L: 1 / mb.estimate("deepseek-v3.2", "h200", prompt_tokens=L, **kw).decode_tok_s_per_user
         for L in (50_000, 100_000)}
    assert t[100_000] - t[50_000] == pytest.approx(N_LAYERS * 50_000 * INDEX_KEY / 4.8e12, rel=1e-9)
    # the same step without sparse attention reads all 50,000 more latents (576 B each)
    d = {L: 1 / mb.estimate("deepseek-v3.1", "h200", prompt_tokens=L, **kw).decode_tok_s_per_user
         for L in (50_000, 100_000)}
    assert d[100_000] - d[50_000] == pytest.approx(N_LAYERS * 50_000 * 576 / 4.8e12, rel=1e-9)


def test_the_memory_check_counts_the_index_keys():
    r = mb.estimate("deepseek-v3.2", "h200", n_chips=8, weight_dtype="fp8", kv_dtype="fp8", batch=4,
                    prompt_tokens=30_000, output_tokens=2_000, runtime="ideal")
    # MLA's latent is not split by tensor parallelism: each chip holds all 4 x 32,000 tokens
    assert r.memory.kv_bytes == 4 * 32_000 * 43_188


def test_a_sparse_attention_model_needs_its_indexer_and_mla():
    d = mb.load_model("deepseek-v3.2").model_dump() | {"name": "x", "index_n_heads": 0}
    with pytest.raises(InvalidInputError, match="index_n_heads"):
        mb.Model(**d)


def test_the_indexer_scores_at_the_fp8_rate_whatever_the_kv_format():
    # DeepSeek-V3.2's indexer keeps fp8 keys and scores in fp8 (its inference code's fp8_index), so
    # with a bf16 KV cache (attention at the bf16 rate) it still runs at H200's 1,979 TFLOP/s. Doubling
    # its heads (64 -> 128) adds, to a 4,096-token prefill on 8 x H200 (fp8 weights, pure roofline):
    # the GEMMs of 61 x (1536 x 64 x 128 + 7168 x 64) more parameters, 2 FLOPs each per token, split
    # over tp 8 at the fp8 rate; and 16,384 more FLOPs per (layer, causal pair), on every rank
    from membound.physics.estimate import prepare
    S, fp8 = 4096, 1.979e15
    m = mb.load_model("deepseek-v3.2")
    wide = mb.Model(**(m.model_dump() | {"name": "v32-wide-indexer", "index_n_heads": 128}))
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="bf16", prompt_tokens=S, runtime="ideal")
    extra_params = N_LAYERS * (1536 * 64 * 128 + 7168 * 64)
    pairs = N_LAYERS * S * (S - 1) / 2
    expected = 2 * extra_params * S / (8 * fp8) + INDEX_PAIR * pairs / fp8
    delta = prepare(wide, "h200", **kw).evaluate()["prefill_compute_s"] \
        - prepare(m, "h200", **kw).evaluate()["prefill_compute_s"]
    assert delta == pytest.approx(expected, rel=1e-9)
