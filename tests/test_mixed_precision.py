"""Mixed checkpoints: routed experts in one format, the other tensors in another
(mb.Quantization(dense_weights=, head_weights=), estimate(dense_weight_dtype=)). Figures derived
by hand from the models' config.json."""
import pytest

import membound as mb
from membound.catalog.dtypes import get_dtype

# gpt-oss-120b config.json: hidden 2880, 36 layers, 128 experts top-4, expert (intermediate) 2880,
# vocab 201088 (untied embeddings), 64 query heads and 8 KV heads of 64, biases on qkv, o and the
# experts, one attention sink per head, two norms per layer.
H, L, E, K, F, V, NQ, NKV, D = 2880, 36, 128, 4, 2880, 201088, 64, 8, 64
ATTN = H * NQ * D * 2 + H * NKV * D * 2 + (NQ + 2 * NKV) * D + H + NQ   # q, o; k, v; qkv bias; o bias; sinks
ATTN_EXPECTED = 26_550_144
ROUTER = H * E + E
EXPERT = 3 * H * F + 2 * F + H                                          # gate, up, down + biases
LAYER_DENSE = ATTN + 2 * H + ROUTER                                      # 26,924,672
HEAD = V * H                                                             # 579,133,440 (= the embedding)
MXFP4, BF16 = (4 + 8 / 32) / 8, 2.0                                      # bytes per weight


def test_the_config_counts_match_the_published_totals():
    assert ATTN == ATTN_EXPECTED and LAYER_DENSE == 26_924_672
    total = L * (LAYER_DENSE + E * EXPERT) + 2 * HEAD + H                # + the final norm
    assert total == 116_829_156_672                                     # OpenAI: 116.83B total
    m = mb.load_model("gpt-oss-120b")
    assert m.total_params == total and m.expert_params == EXPERT


def test_gpt_oss_decode_bytes_with_mxfp4_experts_and_bf16_dense():
    """Batch 1, no context (prompt 0, one output token): a step reads the 4 routed experts of each
    layer in mxfp4, and in bf16 every layer's attention, router and norms, the final norm, the LM
    head and the one embedding row looked up. The ideal runtime streams at peak bandwidth."""
    experts = L * K * EXPERT * MXFP4                                     # 3,584,424,960 x 0.53125
    assert experts == 1_904_225_760
    dense = (L * LAYER_DENSE + H) * BF16 + HEAD * BF16 + H * BF16        # layers + final norm, head, 1 row
    assert dense == 1_938_582_144 + 1_158_266_880 + 5_760
    hw = mb.load_hardware("b200")
    r = mb.estimate("gpt-oss-120b", hw, weight_dtype="mxfp4", dense_weight_dtype="bf16", prompt_tokens=0,
                    output_tokens=1, runtime="ideal")
    assert r.step_terms_s["memory"] * hw.bandwidth_bytes_s == pytest.approx(experts + dense, rel=1e-9)
    assert experts + dense == 5_001_080_544                              # 5.0 GB a step, not 2.6 GB
    # everything mxfp4 (the old single format) reads 0.53125 bytes for the dense part too
    one = mb.estimate("gpt-oss-120b", hw, weight_dtype="mxfp4", prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert one.step_terms_s["memory"] * hw.bandwidth_bytes_s == pytest.approx(
        experts + (L * LAYER_DENSE + H + HEAD + H) * MXFP4, rel=1e-9)
    # memory held: all 128 experts in mxfp4, the rest (both embedding tables) in bf16
    held = L * E * EXPERT * MXFP4 + (L * LAYER_DENSE + H + 2 * HEAD) * BF16
    assert r.memory.weights_bytes == pytest.approx(held, rel=1e-9)


def test_dense_gemms_compute_in_their_own_path():
    """On B200 the mxfp4 experts compute at the fp4 peak, the bf16 dense GEMMs (LM head included)
    at the bf16 peak: 2 FLOPs per parameter a token uses, the input embedding (a lookup) aside."""
    routed = L * K * EXPERT                                              # 3,584,424,960
    dense = L * LAYER_DENSE + H + HEAD                                   # 1,548,424,512
    assert routed + dense == 5_132_849_472                               # OpenAI: 5.13B active
    hw = mb.load_hardware("b200")
    r = mb.estimate("gpt-oss-120b", hw, weight_dtype="mxfp4", dense_weight_dtype="bf16", prompt_tokens=0,
                    output_tokens=1, runtime="ideal")
    expected = 2 * dense / hw.peak_flops("bf16") + 2 * routed / hw.peak_flops("fp4")
    assert r.step_terms_s["compute"] == pytest.approx(expected, rel=1e-9)
    assert r.activation_dtype == "mxfp4"                                 # the experts' path is reported


def test_head_weights_alone():
    """NVIDIA's NVFP4 Llama-3.3-70B keeps lm_head in bf16: hidden 8192, 80 layers, 64/8 heads of
    128, ffn 28672, vocab 128256, untied; batch 1 at no context reads the layers in nvfp4 and the
    LM head and one embedding row in bf16."""
    h, n, ffn, v = 8192, 80, 28672, 128256
    layer = h * 64 * 128 * 2 + h * 8 * 128 * 2 + 3 * h * ffn + 2 * h
    nvfp4 = (4 + 8 / 16) / 8
    hw = mb.load_hardware("b200")
    q = mb.Quantization("nvfp4", head_weights="bf16")
    r = mb.estimate("llama-3.3-70b", hw, quantization=q, prompt_tokens=0, output_tokens=1, runtime="ideal")
    expected = (n * layer + h) * nvfp4 + (v * h + h) * BF16
    assert r.step_terms_s["memory"] * hw.bandwidth_bytes_s == pytest.approx(expected, rel=1e-9)


def test_dense_as_the_weights_changes_nothing():
    a = mb.estimate("gpt-oss-120b", "h100-sxm", weight_dtype="mxfp4", batch=8, prompt_tokens=512, output_tokens=64)
    b = mb.estimate("gpt-oss-120b", "h100-sxm", weight_dtype="mxfp4", dense_weight_dtype="mxfp4", batch=8,
                    prompt_tokens=512, output_tokens=64)
    assert a.tpot_s == b.tpot_s and a.ttft_s == b.ttft_s


def test_serve_takes_the_dense_format():
    kw = dict(concurrency=1, prompt_tokens=1024, output_tokens=256, weight_dtype="mxfp4", runtime="vllm")
    one = mb.serve("gpt-oss-120b", "h200", **kw)
    mixed = mb.serve("gpt-oss-120b", "h200", dense_weight_dtype="bf16", **kw)
    assert mixed.tpot.median > one.tpot.median        # 2.4 GB more a step at one client
    pools = dict(prefill=mb.serving.Pool(1, 1), decode=mb.serving.Pool(1, 1), concurrency=1, prompt_tokens=1024,
                 output_tokens=256, weight_dtype="mxfp4", runtime="vllm")
    assert mb.serve_disaggregated("gpt-oss-120b", "h200", dense_weight_dtype="bf16", **pools).tpot.median > \
        mb.serve_disaggregated("gpt-oss-120b", "h200", **pools).tpot.median


@pytest.mark.parametrize("call, field", [
    (lambda: mb.estimate("gpt-oss-120b", "b200", weight_dtype="mxfp4", dense_weight_dtype="bf17"), "dense_weight_dtype"),
    (lambda: mb.Quantization("mxfp4", dense_weights="int3"), "dense_weight_dtype"),
    (lambda: mb.Quantization("nvfp4", head_weights="nope"), "head_weight_dtype"),
    (lambda: mb.serve("gpt-oss-120b", "h200", concurrency=1, weight_dtype="mxfp4", dense_weight_dtype="fp5"),
     "dense_weight_dtype"),
    (lambda: mb.estimate("gpt-oss-120b", "b200", quantization=mb.Quantization("mxfp4"), dense_weight_dtype="bf16"),
     "dense_weight_dtype"),
])
def test_bad_dense_formats_name_the_field(call, field):
    with pytest.raises(mb.MemboundError) as e:
        call()
    assert e.value.field == field and field in str(e.value)


def test_served_rows_use_the_checkpoints_mix():
    from membound.fidelity.serve_validate import formats
    q = formats("fp4", "gpt-oss-120b", "openai/gpt-oss-120b", amd=False)
    assert (q.weights, q.dense_weights, q.head_weights, q.kv) == ("mxfp4", "bf16", None, "fp8")
    q = formats("fp4", "llama-3.3-70b", "nvidia/Llama-3.3-70B-Instruct-FP4", amd=False)
    assert (q.weights, q.dense_weights, q.head_weights) == ("nvfp4", None, "bf16")
    q = formats("fp4", "deepseek-r1", "nvidia/DeepSeek-R1-0528-FP4", amd=False)      # v1: attention bf16
    assert (q.weights, q.dense_weights) == ("nvfp4", "bf16")
    q = formats("fp4", "deepseek-r1", "nvidia/DeepSeek-R1-0528-FP4-v2", amd=False)   # v2: wo fp4 too
    assert (q.weights, q.dense_weights, q.head_weights) == ("nvfp4", None, "bf16")
    q = formats("int4", "kimi-k2.5", "moonshotai/Kimi-K2.5", amd=False)
    assert (q.weights, q.dense_weights) == ("int4_g32", "bf16")
    assert get_dtype("int4_g32").bits == 4 + 16 / 32                             # 32 int4 + a bf16 scale


def test_more_bytes_in_the_dense_tensors_never_decode_faster():
    """A law: at one sequence the step streams the dense part whole, so a wider dense format
    (mxfp4 < fp8 < bf16 < fp32 bytes per weight) is never faster, on any chip."""
    for hw in ("h200", "b200", "mi300x"):
        tpots = [mb.estimate("gpt-oss-120b", hw, weight_dtype="mxfp4", dense_weight_dtype=d, prompt_tokens=256,
                             output_tokens=16).tpot_s for d in ("mxfp4", "fp8", "bf16", "fp32")]
        assert tpots == sorted(tpots) and tpots[0] < tpots[-1], (hw, tpots)


def test_cli_dense_weights():
    """`membound estimate ... --dense-weights bf16` is estimate(dense_weight_dtype="bf16"): the ideal
    runtime at batch 1 and no context streams the 5,001,080,544 bytes derived above per step."""
    import json
    import subprocess
    import sys
    args = [sys.executable, "-m", "membound", "estimate", "gpt-oss-120b", "b200", "--weights", "mxfp4",
            "--dense-weights", "bf16", "--prompt", "0", "--output", "1", "--runtime", "ideal", "--json"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    hw = mb.load_hardware("b200")
    assert json.loads(p.stdout)["memory_s"] * hw.bandwidth_bytes_s == pytest.approx(5_001_080_544, rel=1e-9)
    bad = subprocess.run(args[:9] + ["bf17"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "dense_weight_dtype" in bad.stderr
