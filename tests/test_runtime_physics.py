"""Runtime physics beyond fractions: memory/compute overlap, quantized GEMMs off the tensor
cores (llama.cpp MMQ), and the MoE expert-GEMM efficiency. Numbers derived by hand."""
import pytest
from hypothesis import given, strategies as st

import membound as mb
from membound.physics.estimate import prepare
from membound.catalog.runtime import QuantizedGemm, Runtime, RuntimeEntry, Served
from membound.physics.efficiency import efficiency


def _pre(*args, **kw) -> float:
    """Prefill compute seconds (FLOPs / achievable FLOP/s) of one configuration."""
    return prepare(*args, **kw).evaluate()["prefill_compute_s"]


def _rt(**entry):
    qg = entry.pop("quantized_gemm", None)
    return Runtime(name="t", use_latency_floor=False, use_device_fractions=False, quantized_gemm=qg,
                   classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=1.0, **entry)})


@pytest.mark.parametrize("overlap", [1.0, 0.5, 0.0])
def test_overlap_adds_the_hidden_share_of_the_smaller_term(overlap):
    m = mb.load_model("llama-3.1-8b")            # untied embedding: a lookup, no FLOPs
    lookup = 128256 * 4096
    B = 256
    # one step at context 0 (no KV): bf16 weights, the embedding rows of 256 tokens only
    mem = (m.total_params - lookup + B * 4096) * 2 / 3.35e12          # H100: 3.35 TB/s
    cmp = B * 2 * (m.active_params - lookup) / 989e12                   # bf16 dense 989 TFLOP/s
    step = max(mem, cmp) + (1 - overlap) * min(mem, cmp)
    r = mb.estimate(m, "h100-sxm", batch=B, prompt_tokens=0, output_tokens=1, weight_dtype="bf16",
                    runtime=_rt(overlap=overlap))
    assert r.decode_tok_s_per_user == pytest.approx(1 / step, rel=1e-9)


@pytest.mark.parametrize("overlap", [None, 0.5, 0.0])
def test_a_served_block_sets_the_overlap_of_its_steps(overlap):
    # the served block's overlap replaces the entry's (1: the roofline max) where it sets one; the step of
    # test_overlap_adds_the_hidden_share_of_the_smaller_term's by hand
    m = mb.load_model("llama-3.1-8b")
    lookup = 128256 * 4096
    B = 256
    mem = (m.total_params - lookup + B * 4096) * 2 / 3.35e12
    cmp = B * 2 * (m.active_params - lookup) / 989e12
    step = max(mem, cmp) + (1 - (1.0 if overlap is None else overlap)) * min(mem, cmp)
    rt = Runtime(name="t", use_latency_floor=False, use_device_fractions=False, served=Served(overlap=overlap))
    assert efficiency(rt, mb.load_hardware("h100-sxm")).overlap == (1.0 if overlap is None else overlap)
    r = mb.estimate(m, "h100-sxm", batch=B, prompt_tokens=0, output_tokens=1, weight_dtype="bf16", runtime=rt)
    assert r.decode_tok_s_per_user == pytest.approx(1 / step, rel=1e-9)


def test_quantized_gemm_peak_is_a_multiple_of_fp32_on_gpus_only():
    qg = QuantizedGemm(fp32_multiple=4.0)
    kw = dict(batch=1, prompt_tokens=512, output_tokens=1, weight_dtype="q4_0", activation_dtype="int8")
    on = _pre("llama-2-7b", "h100-sxm", runtime=_rt(quantized_gemm=qg), **kw)
    off = _pre("llama-2-7b", "h100-sxm", runtime=_rt(), **kw)
    # same FLOPs; the GEMMs' peak 1979e12 (int8 tensor) -> 4 x 67e12 (fp32) = 268e12 FLOP/s;
    # attention stays at the 16-bit 989e12 (the KV is fp16), dequantization adds 1/9 to GEMMs;
    # the layers' GEMMs over 512 tokens, the LM head (32,000 x 4,096) over the last one only
    gemm = 2 * ((6_738_415_616 - 2 * 32000 * 4096) * 512 + 32000 * 4096) * (1 + 1 / 9)
    attn = 4 * 32 * 128 * 32 * 512 * 511 / 2
    assert on == pytest.approx(gemm / 268e12 + attn / 989e12, rel=1e-9)
    assert off == pytest.approx(gemm / 1979e12 + attn / 989e12, rel=1e-9)
    # bf16 weights keep the tensor peak
    b_on = _pre("llama-2-7b", "h100-sxm", runtime=_rt(quantized_gemm=qg), batch=1, prompt_tokens=512,
                       output_tokens=1, weight_dtype="bf16")
    b_off = _pre("llama-2-7b", "h100-sxm", runtime=_rt(), batch=1, prompt_tokens=512,
                        output_tokens=1, weight_dtype="bf16")
    assert b_on == b_off
    # Apple silicon (kind "apple") is not a listed device kind: unchanged
    a = [_pre("llama-2-7b", "apple-m2-ultra", runtime=_rt(quantized_gemm=g), batch=1, prompt_tokens=512,
              output_tokens=1, weight_dtype="q4_0") for g in (qg, None)]
    assert a[0] == a[1]


def test_moe_gemm_efficiency_slows_only_the_expert_flops_of_prefill():
    m = mb.load_model("gpt-oss-20b")
    S = 2048
    kw = dict(batch=1, prompt_tokens=S, output_tokens=1, weight_dtype="bf16")
    slow = _pre(m, "h100-sxm", runtime=_rt(moe_gemm_efficiency=0.25), **kw)
    fast = _pre(m, "h100-sxm", runtime=_rt(), **kw)
    # expert params one token multiplies: moe layers x k x params per expert; at 1/4 the rate
    # each costs 4x, i.e. 3 extra times 2 FLOPs per token over 989e12 bf16 FLOP/s
    expert = m.n_moe_layers * m.experts_per_token * m.expert_params
    assert slow - fast == pytest.approx(S * 2 * expert * 3 / 989e12, rel=1e-9)
    # decode steps (mat-vec per expert, memory-bound) are unchanged
    d = [mb.estimate(m, "h100-sxm", runtime=_rt(moe_gemm_efficiency=e), **kw).decode_tok_s_per_user
         for e in (0.25, None)]
    assert d[0] == d[1]


def test_per_sequence_overhead_grows_with_the_batch():
    # overhead per step = per-step + layers x per-layer + sequences x per-sequence:
    # 1e-4 + 32 x 1e-6 + 16 x 2e-5 = 4.52e-4 s for llama-3.1-8b at batch 16
    rt = _rt(per_step_overhead_s=1e-4, per_layer_overhead_s=1e-6, per_sequence_overhead_s=2e-5)
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=16, output_tokens=1, runtime=rt)
    assert r.step_terms_s["overhead"] == pytest.approx(1e-4 + 32 * 1e-6 + 16 * 2e-5, rel=1e-12)


def test_a_served_per_sequence_layer_cost_is_paid_per_sequence_per_layer():
    # a served block's per_sequence_layer_s: seconds per running sequence per layer per step, beside its
    # per_sequence_s (per sequence per step). llama-3.1-8b has 32 layers, llama-3.3-70b 80; at batch 16:
    #   8B, 5e-7 alone:             16 x 32 x 5e-7          = 2.56e-4 s
    #   8B, with 2e-5 per sequence: 16 x (2e-5 + 32 x 5e-7) = 5.76e-4 s
    #   70B, 5e-7 alone:            16 x 80 x 5e-7          = 6.4e-4 s
    def overhead(model, **served):
        rt = Runtime(name="t", use_latency_floor=False, use_device_fractions=False, served=Served(**served))
        r = mb.estimate(model, "h200", batch=16, prompt_tokens=0, output_tokens=1, weight_dtype="fp8", runtime=rt)
        return r.step_terms_s["overhead"]
    assert overhead("llama-3.1-8b", per_sequence_layer_s=5e-7) == pytest.approx(2.56e-4, rel=1e-12)
    assert overhead("llama-3.1-8b", per_sequence_layer_s=5e-7, per_sequence_s=2e-5) == pytest.approx(5.76e-4, rel=1e-12)
    assert overhead("llama-3.3-70b", per_sequence_layer_s=5e-7) == pytest.approx(6.4e-4, rel=1e-12)


def test_a_pipelines_host_loop_is_paid_per_sequence_by_every_stage_and_not_at_pp_1():
    # a served block's pipeline_host_s: the engine's host loop over each micro-batch's requests, which every
    # pipeline rank runs in series with its forward (TensorRT-LLM's _executor_loop_pp). A static batch of 16
    # over pp = 4 goes in m = min(16, 4) = 4 micro-batches of 4; a decode step runs each rank's loop over the
    # 4 micro-batches: 4 x 4 = 16 sequences x 3e-5 = 4.8e-4 s more overhead, beside the per-layer cost
    # (16 x 80 x 5e-7 = 6.4e-4 s over the whole stack; llama-3.3-70b, 80 layers) that the stages share.
    # At pp = 1 the engine's loop runs beside the GPU's step: nothing.
    def overhead(pp, **served):
        rt = Runtime(name="t", use_latency_floor=False, use_device_fractions=False, served=Served(**served))
        r = mb.estimate("llama-3.3-70b", "h200", batch=16, prompt_tokens=0, output_tokens=1, weight_dtype="fp8",
                        runtime=rt, n_chips=pp, parallel=mb.Parallel(pp=pp))
        return r.step_terms_s["overhead"]
    base = overhead(4, per_sequence_layer_s=5e-7)
    assert overhead(4, per_sequence_layer_s=5e-7, pipeline_host_s=3e-5) - base == pytest.approx(16 * 3e-5, rel=1e-9)
    assert overhead(1, per_sequence_layer_s=5e-7, pipeline_host_s=3e-5) == overhead(1, per_sequence_layer_s=5e-7)
    # 3 sequences over pp = 4: m = min(3, 4) = 3 micro-batches of 1, each loop over 1 sequence: 3 x 3e-5
    rt = Runtime(name="t", use_latency_floor=False, use_device_fractions=False, served=Served(pipeline_host_s=3e-5))
    r = mb.estimate("llama-3.3-70b", "h200", batch=3, prompt_tokens=0, output_tokens=1, weight_dtype="fp8",
                    runtime=rt, n_chips=4, parallel=mb.Parallel(pp=4))
    assert r.step_terms_s["overhead"] == pytest.approx(3 * 3e-5, rel=1e-12)


def test_a_pipeline_stage_pays_its_ranks_host_loop_over_its_micro_batch():
    # trtllm-bench's pipeline as its one pacing stage (serving.offline.pipeline_stage): the stage's step over
    # its micro-batch pays the host loop per sequence, in its per-step per-sequence figure: TensorRT-LLM's
    # per_sequence_s 0 + pipeline_host_s 2.94e-5 = 2.94e-5 s (NVIDIA/TensorRT-LLM PR 10273: 45.11 ms a step
    # at 1,536 requests); the per-layer cost stays per layer of the stage's own layers
    from membound.serving.offline import pipeline_stage
    from membound.catalog.runtime import load_runtime
    trt = load_runtime("tensorrt-llm").served
    assert trt.pipeline_host_s == pytest.approx(45.11e-3 / 1536, rel=2e-3)    # 29.37 us, to 3 figures
    stage, _, _, _, rt = pipeline_stage("llama-3.3-70b", None, "tensorrt-llm", mb.Parallel(pp=8))
    assert stage.n_layers == 10
    assert rt.served.per_sequence_s == trt.per_sequence_s + trt.pipeline_host_s == pytest.approx(2.94e-5)
    assert rt.served.per_sequence_layer_s == trt.per_sequence_layer_s
    # an engine without the figure keeps its runtime as named
    assert pipeline_stage("llama-3.3-70b", None, "vllm", mb.Parallel(pp=8))[4] == "vllm"


@given(st.integers(1, 6000))
def test_the_per_sequence_cost_is_one_constant_from_one_to_thousands_of_sequences(batch):
    # the step's overhead per running sequence is the same at every batch: per_sequence_s + layers x
    # per_sequence_layer_s = 1e-6 + 32 x 2e-7 = 7.4e-6 s for llama-3.1-8b (no per-step or per-layer cost)
    rt = Runtime(name="t", use_latency_floor=False, use_device_fractions=False,
                 served=Served(per_sequence_s=1e-6, per_sequence_layer_s=2e-7))
    r = mb.estimate("llama-3.1-8b", "h200", batch=batch, prompt_tokens=0, output_tokens=1, weight_dtype="fp8",
                    runtime=rt)
    assert r.step_terms_s["overhead"] / batch == pytest.approx(1e-6 + 32 * 2e-7, rel=1e-12)


def test_passes_of_more_than_one_token_pay_the_ungraphed_launches():
    # ggml-cuda replays a step as a CUDA graph only when every node has one token: a batch-1 decode
    # step pays the per-layer overhead alone; a batch-2 step, and a prefill, launch kernel by kernel
    # and pay ungraphed_layer_s per layer more. llama-3.1-8b, 32 layers:
    #   batch 1: 1e-6 + 32 x 2e-6 = 6.5e-5 s;  batch 2: 6.5e-5 + 32 x 2.5e-5 = 8.65e-4 s
    rt = _rt(per_step_overhead_s=1e-6, per_layer_overhead_s=2e-6, ungraphed_layer_s=2.5e-5)
    one, two = (mb.estimate("llama-3.1-8b", "h100-sxm", batch=b, prompt_tokens=0, output_tokens=1, runtime=rt)
                for b in (1, 2))
    assert one.step_terms_s["overhead"] == pytest.approx(1e-6 + 32 * 2e-6, rel=1e-12)
    assert two.step_terms_s["overhead"] == pytest.approx(1e-6 + 32 * 2e-6 + 32 * 2.5e-5, rel=1e-12)
    # a 512-token prefill at batch 1 pays them too (its step count is one): 32 x 2.5e-5 = 8e-4 s
    kw = dict(batch=1, prompt_tokens=512, output_tokens=1)
    a, b = (prepare("llama-3.1-8b", "h100-sxm", runtime=r, **kw).evaluate()["prefill_s"]
            for r in (rt, _rt(per_step_overhead_s=1e-6, per_layer_overhead_s=2e-6)))
    assert a - b == pytest.approx(32 * 2.5e-5, rel=1e-9)
    # a one-token prompt is one token: graphed, no launches added
    kw1 = dict(kw, prompt_tokens=1)
    a, b = (prepare("llama-3.1-8b", "h100-sxm", runtime=r, **kw1).evaluate()["prefill_s"]
            for r in (rt, _rt(per_step_overhead_s=1e-6, per_layer_overhead_s=2e-6)))
    assert a == b


def test_per_moe_layer_overhead_is_paid_by_moe_layers_only():
    # an MoE layer launches more kernels than a dense one (router, top-k, gathers, a GEMM per expert,
    # the weighted sum): gpt-oss-20b has 24 layers, all MoE: 1e-6 + 24 x 2e-6 + 24 x 5e-5 = 1.249e-3 s
    rt = _rt(per_step_overhead_s=1e-6, per_layer_overhead_s=2e-6, per_moe_layer_overhead_s=5e-5)
    m = mb.load_model("gpt-oss-20b")
    assert (m.n_layers, m.n_moe_layers) == (24, 24)
    r = mb.estimate(m, "h100-sxm", output_tokens=1, runtime=rt)
    assert r.step_terms_s["overhead"] == pytest.approx(1e-6 + 24 * 2e-6 + 24 * 5e-5, rel=1e-12)
    # a dense model pays none of it: llama-3.1-8b, 32 layers: 1e-6 + 32 x 2e-6 = 6.5e-5 s
    r = mb.estimate("llama-3.1-8b", "h100-sxm", output_tokens=1, runtime=rt)
    assert r.step_terms_s["overhead"] == pytest.approx(1e-6 + 32 * 2e-6, rel=1e-12)


def test_tiled_quantized_gemms_stream_the_layer_weights_once_per_tile_of_tokens():
    # llama.cpp's MMQ computes 128 x 128 output tiles and loads each tile's weight rows itself:
    # a prompt of S tokens streams the layers' matrices ceil(S / 128) times (the LM head, which
    # runs for the last token, and the embedding rows once). llama-2-7b q4_0 (4.5 bits) on an
    # RTX 4090 at its full 1008 GB/s: the layers hold 6.738e9 - 2 x 32000 x 4096 parameters
    m = mb.load_model("llama-2-7b")
    layers = m.total_params - 2 * 32000 * 4096
    mmq = QuantizedGemm(fp32_multiple=4.0)
    tiled = QuantizedGemm(fp32_multiple=4.0, tile_tokens=128)
    kw = dict(batch=1, output_tokens=1, weight_dtype="q4_0", activation_dtype="int8")

    def mem(qg, S):
        return prepare(m, "rtx-4090", runtime=_rt(quantized_gemm=qg), prompt_tokens=S, **kw).evaluate()[
            "prefill_memory_s"]
    # 512 tokens: 4 tiles, 3 more passes than one; 513 tokens: 5 tiles, 4 more
    assert mem(tiled, 512) - mem(mmq, 512) == pytest.approx(3 * layers * 4.5 / 8 / 1008e9, rel=1e-9)
    assert mem(tiled, 513) - mem(mmq, 513) == pytest.approx(4 * layers * 4.5 / 8 / 1008e9, rel=1e-9)
    # 16-bit weights do not take the MMQ path: streamed once
    f16 = dict(kw, weight_dtype="fp16", activation_dtype=None)
    a, b = (prepare(m, "rtx-4090", runtime=_rt(quantized_gemm=q), prompt_tokens=512, **f16).evaluate()[
        "prefill_memory_s"] for q in (tiled, mmq))
    assert a == b


def test_tiled_expert_gemms_count_the_tokens_each_expert_gets():
    # gpt-oss-20b: 32 experts, 4 per token; 2048 tokens touch X = 32 (1 - (1 - 4/32)^2048) ~ 32
    # experts with 2048 x 4 / X ~ 256 tokens each: ceil(256 / 128) = 2 passes over each expert,
    # one more than untiled, over 24 MoE layers (q8_0: 8.5 bits per weight, 1008 GB/s)
    m = mb.load_model("gpt-oss-20b")
    S, E, k = 2048, 32, 4
    touched = E * (1 - (1 - k / E) ** S)
    assert 2048 * k / touched == pytest.approx(256, rel=1e-9)
    layers = m.total_params - m.n_moe_layers * E * m.expert_params - 2 * m.vocab_size * m.hidden_size
    kw = dict(batch=1, output_tokens=1, weight_dtype="q8_0", activation_dtype="int8", prompt_tokens=S)
    a, b = (prepare(m, "rtx-4090", runtime=_rt(quantized_gemm=QuantizedGemm(fp32_multiple=4.0, tile_tokens=t)),
                    **kw).evaluate()["prefill_memory_s"] for t in (128, None))
    extra = (15 * layers + m.n_moe_layers * touched * m.expert_params) * 8.5 / 8 / 1008e9
    assert a - b == pytest.approx(extra, rel=1e-9)


def test_a_board_short_of_the_power_its_kernels_need_computes_below_its_rated_clock():
    # power_limit_w_per_tflop = 9 W per fp32 TFLOP/s. DGX Spark: 140 W over 31 TFLOP/s fp32 =
    # 4.516129 W per TFLOP/s, short of 9: its clock (and every compute peak) falls to the cube root
    # of 4.516129 / 9 = 0.501792 (power ~ f^3): 0.7946 (0.7946^3 = 0.50170); compute 0.7 -> 0.5563
    rt = Runtime(name="t", classes={"default": RuntimeEntry(compute_fraction=0.7, power_limit_w_per_tflop=9.0)})
    spark = efficiency(rt, mb.load_hardware("dgx-spark"))
    assert spark.power_factor == pytest.approx(0.79465, abs=1e-4)
    assert spark.compute_fraction == pytest.approx(0.7 * 0.79465, abs=1e-4)
    # RTX 3060: 170 W over 12.74 TFLOP/s = 13.34 W per TFLOP/s, above 9: its rated clock
    assert efficiency(rt, mb.load_hardware("rtx-3060")).compute_fraction == pytest.approx(0.7)
    # an Apple M1 profile gives no board power: no limit
    assert efficiency(rt, mb.load_hardware("apple-m1")).power_factor == 1.0
    # no limit in the entry: the rated clock (DGX Spark's compute 0.7 as written)
    plain = Runtime(name="t", classes={"default": RuntimeEntry(compute_fraction=0.7)})
    assert efficiency(plain, mb.load_hardware("dgx-spark")).compute_fraction == pytest.approx(0.7)


def test_the_power_limit_slows_prefill_not_the_weight_stream():
    # the same runtime with and without a 9 W/TFLOP limit on DGX Spark: a compute-bound prefill
    # takes 1 / 0.79465 = 1.2584 x as long; a batch-1 decode step (bytes over bandwidth) does not change
    kw = dict(batch=1, prompt_tokens=2048, output_tokens=1, weight_dtype="bf16")
    limited = _rt(power_limit_w_per_tflop=9.0)
    free = _rt()
    assert _pre("llama-3.1-8b", "dgx-spark", runtime=limited, **kw) \
        == pytest.approx(_pre("llama-3.1-8b", "dgx-spark", runtime=free, **kw) / 0.79465, rel=1e-4)
    dec = dict(batch=1, prompt_tokens=0, output_tokens=1, weight_dtype="bf16")
    assert mb.estimate("llama-3.1-8b", "dgx-spark", runtime=limited, **dec).decode_tok_s_per_user \
        == pytest.approx(mb.estimate("llama-3.1-8b", "dgx-spark", runtime=free, **dec).decode_tok_s_per_user)


def test_quantized_gemms_run_at_the_vector_rate_where_the_backend_has_no_matrix_path():
    # a device in vector_devices: vector_multiple x fp32 instead of fp32_multiple x fp32 (capped by int8)
    qg = QuantizedGemm(fp32_multiple=4.0, vector_devices=("arc-a770",), vector_multiple=2.0)
    kw = dict(batch=1, prompt_tokens=512, output_tokens=1, weight_dtype="q4_0", activation_dtype="int8")
    vec = _pre("llama-2-7b", "arc-a770", runtime=_rt(quantized_gemm=qg), **kw)
    mat = _pre("llama-2-7b", "arc-a770", runtime=_rt(quantized_gemm=QuantizedGemm(fp32_multiple=4.0)), **kw)
    # Arc A770: fp32 17.2 TFLOP/s -> 2 x 17.2 = 34.4 (vector) vs 4 x 17.2 = 68.8 (below its int8 275.3);
    # the GEMMs as in the test above, their dequantization +1/9 on the matrix path and 1/9 x 2/4 = 1/18
    # on the vector one (it runs at the fp32 lane rate either way); attention at the fp16 XMX peak 137.6
    flops = 2 * ((6_738_415_616 - 2 * 32000 * 4096) * 512 + 32000 * 4096)
    attn = 4 * 32 * 128 * 32 * 512 * 511 / 2
    assert vec == pytest.approx(flops * (1 + 1 / 18) / 34.4e12 + attn / 137.6e12, rel=1e-9)
    assert mat == pytest.approx(flops * (1 + 1 / 9) / 68.8e12 + attn / 137.6e12, rel=1e-9)
    # another device keeps the matrix peak: RX 9070 XT min(4 x 48.7, int8 389.3) = 194.8 TFLOP/s
    xt = mb.load_hardware("rx-9070-xt")
    assert efficiency(_rt(quantized_gemm=qg), xt).quantized_peak_flops == pytest.approx(194.8e12)


def test_dequantisation_costs_the_share_of_a_gemm_its_path_peak_gives_it():
    # dequantising runs on the vector ALUs at the fp32 lane rate whatever multiplies: its share of a
    # GEMM scales with the path's peak over fp32 -> vector_multiple / fp32_multiple on a vector device
    from membound.physics.efficiency import dequant_scale
    a770, xt = mb.load_hardware("arc-a770"), mb.load_hardware("rx-9070-xt")
    qg = QuantizedGemm(fp32_multiple=4.0, vector_devices=("arc-a770",), vector_multiple=2.0)
    assert dequant_scale(qg, a770) == 2.0 / 4.0
    assert dequant_scale(qg, xt) == 1.0                      # not a vector device: the matrix path's share
    assert dequant_scale(QuantizedGemm(fp32_multiple=4.0, vector_devices=("arc-a770",), vector_multiple=1.0),
                         a770) == 1.0 / 4.0
    assert dequant_scale(None, a770) == 1.0
    # the bundled Vulkan backend: half the share on the A770 (q4_0: 1/9 -> 1/18), the whole on an RX 9070 XT
    rt = mb.load_runtime("llama.cpp-vulkan")
    assert efficiency(rt, a770).quantized_dequant_scale == 0.5
    assert efficiency(rt, xt).quantized_dequant_scale == 1.0


def test_llama_cpp_vulkan_on_an_arc_a770_runs_its_gemms_on_the_vector_engines():
    # the bundled Vulkan backend: no cooperative matrices on Alchemist -> 2 x 17.2 = 34.4 TFLOP/s;
    # an RTX 4090 keeps 4 x 82.6 = 330.4
    rt = mb.load_runtime("llama.cpp-vulkan")
    assert efficiency(rt, mb.load_hardware("arc-a770")).quantized_peak_flops == pytest.approx(34.4e12)
    assert efficiency(rt, mb.load_hardware("rtx-4090")).quantized_peak_flops == pytest.approx(330.4e12)


def test_llama_cpp_vulkan_gemm_peak_is_the_fp16_matrix_rate_of_the_path_it_takes():
    # ggml-vulkan dequantises q4_0 to fp16 and multiplies on cooperative matrices (coopmat2 on NVIDIA,
    # KHR coopmat WMMA on RDNA 4), so the peak is the fp16 matrix rate, = 4 x fp32 on these chips:
    # GeForce FP16-accumulate tensor rate (4090: 16384 lanes x 2 x 2.52 GHz = 82.58e12 fp32; 330.3e12
    # dense fp16 in the Ada whitepaper; 5090 21760 x 2 x 2.407 GHz = 104.75e12, 419e12), not the
    # profiles' FP32-accumulate fp16 fields (165.2e12, 209.5e12); RDNA 4 WMMA 1024 FLOP per CU per clock
    # = 4 x 256 (RX 9070: 56 CUs x 1024 x 2.52 GHz = 144.5e12; AMD: 1156 TOPS int4 sparse / 8)
    rt = mb.load_runtime("llama.cpp-vulkan")
    peak = {n: efficiency(rt, mb.load_hardware(n)).quantized_peak_flops for n in
            ("rtx-4090", "rtx-5090", "rx-9070", "rx-9070-xt", "radeon-ai-pro-r9700")}
    assert peak["rtx-4090"] == pytest.approx(330.3e12, rel=1e-3)
    assert peak["rtx-5090"] == pytest.approx(419.0e12, rel=1e-3)
    assert peak["rtx-5090"] > mb.load_hardware("rtx-5090").compute_flops["fp16"] * 1.99
    assert peak["rx-9070"] == pytest.approx(56 * 1024 * 2.52e9, rel=1e-3)
    assert peak["rx-9070"] == pytest.approx(1156e12 / 8, rel=1e-3)
    assert peak["rx-9070-xt"] == pytest.approx(64 * 1024 * 2.97e9, rel=1e-3)          # 194.7e12
    assert peak["radeon-ai-pro-r9700"] == pytest.approx(64 * 1024 * 2.92e9, rel=2e-3)  # 191.4e12


def test_a_dequantising_vector_mat_vec_costs_its_instructions_per_weight_at_the_fp32_lane_rate():
    # vector_gemv_ops=5 on arc-a770: a decode step's mat-vec runs at fp32 / 5 = 17.2e12 / 5 = 3.44e12
    # FLOP/s (2 per weight, dequantisation included); overlap 0 adds it to the weights' stream
    qg = QuantizedGemm(fp32_multiple=4.0, vector_devices=("arc-a770",), vector_gemv_ops=5.0,
                       vector_gemv_formats=("q4_0",))
    m = mb.load_model("llama-2-7b")
    kw = dict(batch=1, prompt_tokens=0, output_tokens=1, weight_dtype="q4_0", activation_dtype="int8")
    r = mb.estimate(m, "arc-a770", runtime=_rt(quantized_gemm=qg, overlap=0.0), **kw)
    lookup = 32000 * 4096
    # q4_0: 4.5 bits, the LM head q6_K's 6.5625 (llama.cpp's quantizer: quantization.py); 560 GB/s
    mem = ((m.total_params - lookup + 4096) * 4.5 + lookup * (6.5625 - 4.5)) / 8 / 560e9
    cmp = 2 * (m.active_params - lookup) / (17.2e12 / 5)               # the matmul weights, 2 FLOPs each
    # (no context: no KV read, no attention FLOPs)
    assert 1 / r.decode_tok_s_per_user == pytest.approx(mem + cmp, rel=1e-9)
    # the same runtime on a device not listed keeps the GEMMs' peak (RTX 4090: 4 x 82.6e12, +1/9 dequant)
    r2 = mb.estimate(m, "rtx-4090", runtime=_rt(quantized_gemm=qg, overlap=0.0), **kw)
    mem2 = ((m.total_params - lookup + 4096) * 4.5 + lookup * (6.5625 - 4.5)) / 8 / 1008e9
    cmp2 = 2 * (m.active_params - lookup) * (1 + 1 / 9) / 330.4e12
    assert 1 / r2.decode_tok_s_per_user == pytest.approx(mem2 + cmp2, rel=1e-9)
    # a format not listed (q8_0: 8.5 bits, its head too) keeps the GEMMs' path on the A770: 2 x 17.2e12 vector peak, +dequant
    r3 = mb.estimate(m, "arc-a770", runtime=_rt(quantized_gemm=qg, overlap=0.0), **{**kw, "weight_dtype": "q8_0"})
    mem3 = (m.total_params - lookup + 4096) * 8.5 / 8 / 560e9
    cmp3 = 2 * (m.active_params - lookup) * (1 + 1 / 18) / 34.4e12    # dequantisation 1/9 x 2/4 on the vector path
    assert 1 / r3.decode_tok_s_per_user == pytest.approx(mem3 + cmp3, rel=1e-9)


def test_a_per_layer_floor_in_cycles_takes_less_time_on_a_faster_clock():
    # an eager engine's small kernels each last a floor of GPU cycles: 2e5 cycles per layer take
    # 2e5 / 1.80e9 = 111.1 us on an RTX A6000 (1800 MHz: 38.71 TFLOP/s fp32 / (2 x 10752 cores))
    # and 2e5 / 2.52e9 = 79.37 us on an RTX 4090 (2520 MHz: 82.58 / (2 x 16384)), 1.4 x less
    a6000, rtx4090 = mb.load_hardware("rtx-a6000"), mb.load_hardware("rtx-4090")
    assert a6000.compute_flops["fp32"] / (2 * 10752) == pytest.approx(1.80e9, rel=1e-3)
    assert rtx4090.compute_flops["fp32"] / (2 * 16384) == pytest.approx(2.52e9, rel=1e-3)
    rt = _rt(per_layer_overhead_cycles=2e5)
    assert efficiency(rt, a6000).per_layer_overhead_s == pytest.approx(1.1111e-4, rel=1e-4)
    assert efficiency(rt, rtx4090).per_layer_overhead_s == pytest.approx(7.9365e-5, rel=1e-4)
    # it adds to a per-layer figure in seconds: 1e-5 + 7.9365e-5 = 8.9365e-5 s
    both = _rt(per_layer_overhead_s=1e-5, per_layer_overhead_cycles=2e5)
    assert efficiency(both, rtx4090).per_layer_overhead_s == pytest.approx(8.9365e-5, rel=1e-4)
    # a decode step of llama-2-7b (32 layers) pays 32 x 7.9365e-5 = 2.5397e-3 s of it on the 4090
    r = mb.estimate("llama-2-7b", "rtx-4090", output_tokens=1, weight_dtype="fp16", runtime=rt)
    assert r.step_terms_s["overhead"] == pytest.approx(32 * 2e5 / 2.52e9, rel=1e-9)
    # a profile without a clock (the H20's fp32 rate implies no Hopper clock) is timed at
    # efficiency.DEFAULT_CLOCK_HZ, 1.8 GHz: 2e5 / 1.8e9 s
    from membound.physics.efficiency import DEFAULT_CLOCK_HZ
    h20 = mb.load_hardware("h20")
    assert h20.clock_hz is None and DEFAULT_CLOCK_HZ == 1.8e9
    assert efficiency(rt, h20).per_layer_overhead_s == pytest.approx(2e5 / 1.8e9, rel=1e-12)
    # DGX Spark's GB10 runs 6144 CUDA cores at the clock its fp32 rate implies: 31e12 / (2 x 6144) =
    # 2.5228e9, given as 2.52 GHz; 2e5 cycles there last 2e5 / 2.52e9 = 79.37 us, not 2e5 / 1.8e9 = 111.1 us
    spark = mb.load_hardware("dgx-spark")
    assert spark.compute_flops["fp32"] / (2 * 6144) == pytest.approx(2.52e9, rel=2e-3)
    assert efficiency(rt, spark).per_layer_overhead_s == pytest.approx(7.9365e-5, rel=1e-4)


def test_weight_only_gemm_tiles_stream_the_layer_weights_once_per_tile_of_tokens():
    # TinyChat's W4A16 GEMM runs 16 token rows per tile (gemm_cuda.cu, CTA_M = 16 up to 64 tokens):
    # a 32-token prompt streams the layers' int4 weights ceil(32 / 16) = 2 times, the LM head once.
    # llama-2-7b: 6,738,415,616 params less its untied embedding and LM head (32000 x 4096 each):
    # 6,738,415,616 - 2 x 131,072,000 = 6,476,271,616 layer weights x 4.125 bits / 8 = 3,339,327,552
    # bytes more, at an RTX 4090's 1.008e12 B/s (fraction 1): 3.339327552e9 / 1.008e12 = 3.3128e-3 s
    m = mb.load_model("llama-2-7b")
    assert (m.total_params, m.vocab_size, m.hidden_size, m.tied_embeddings) == (6738415616, 32000, 4096, False)
    tiled = _rt().model_copy(update={"weight_only_tile_tokens": 16})
    kw = dict(batch=1, prompt_tokens=32, output_tokens=1, weight_dtype="int4", activation_dtype="fp16")
    a, b = (prepare("llama-2-7b", "rtx-4090", runtime=r, **kw).evaluate()["prefill_memory_s"] for r in (tiled, _rt()))
    assert a - b == pytest.approx(6476271616 * 4.125 / 8 / 1.008e12, rel=1e-9)
    # 16 tokens are one tile: the weights once, as without tiles
    kw16 = dict(kw, prompt_tokens=16)
    a, b = (prepare("llama-2-7b", "rtx-4090", runtime=r, **kw16).evaluate()["prefill_memory_s"] for r in (tiled, _rt()))
    assert a == pytest.approx(b, rel=1e-12)
    # 16-bit weights are not a weight-only format: no tiles (fp16 on fp16: the weights once)
    kwf = dict(kw, weight_dtype="fp16")
    a, b = (prepare("llama-2-7b", "rtx-4090", runtime=r, **kwf).evaluate()["prefill_memory_s"] for r in (tiled, _rt()))
    assert a == pytest.approx(b, rel=1e-12)
    # a decode step (one token) never tiles
    dec = dict(kw, prompt_tokens=0)
    assert mb.estimate("llama-2-7b", "rtx-4090", runtime=tiled, **dec).decode_tok_s_per_user \
        == pytest.approx(mb.estimate("llama-2-7b", "rtx-4090", runtime=_rt(), **dec).decode_tok_s_per_user)


def test_a_context_stage_of_more_kernels_pays_the_per_layer_floor_that_many_times():
    # TinyChat's decode layer launches 12 kernels, its context-stage layer 19 (tinychat.yaml evidence):
    # with a floor of 2e5 cycles per decode layer, a prefill layer pays 2e5 x 19 / 12 = 316,666.7 cycles.
    # llama-2-7b (32 layers) on an RTX 4090 (2.52 GHz): 32 x 2e5 / 2.52e9 = 2.5397e-3 s for a decode
    # step, 32 x 316,666.7 / 2.52e9 = 4.0212e-3 s for a prefill, 1.4815e-3 s more
    plain = _rt(per_layer_overhead_cycles=2e5)
    ctx = plain.model_copy(update={"prefill_layer_kernels": 19 / 12})
    kw = dict(batch=1, prompt_tokens=32, output_tokens=1, weight_dtype="fp16")
    a, b = (prepare("llama-2-7b", "rtx-4090", runtime=r, **kw).evaluate() for r in (ctx, plain))
    assert b["prefill_overhead_s"] == pytest.approx(32 * 2e5 / 2.52e9, rel=1e-9)
    assert a["prefill_overhead_s"] == pytest.approx(32 * 2e5 * 19 / 12 / 2.52e9, rel=1e-9)
    assert a["prefill_s"] - b["prefill_s"] == pytest.approx(1.4815e-3, rel=1e-4)
    # a decode step keeps its 12 kernels: the same step either way
    dec = dict(kw, prompt_tokens=0)
    assert mb.estimate("llama-2-7b", "rtx-4090", runtime=ctx, **dec).step_terms_s["overhead"] \
        == pytest.approx(32 * 2e5 / 2.52e9, rel=1e-9)
    # TinyChat's file gives the count from the kernels its context stage launches
    from membound.catalog.runtime import load_runtime
    assert load_runtime("tinychat").prefill_layer_kernels == pytest.approx(19 / 12, rel=1e-4)
    assert load_runtime("hf-transformers").prefill_layer_kernels == 1.0


def test_hf_transformers_per_layer_floor_is_host_time_the_same_on_every_gpu():
    # HF's eager decode is host-dispatch bound: its per-layer floor is fitted in seconds, so a
    # layer costs the same on an RTX A6000 (1.80 GHz) and an RTX 4090 (2.52 GHz); a 32-layer step
    # pays 32 x that figure on both (with 2.04e-4 s: 6.528e-3 s), where a cycles floor would be
    # 1.4 x less on the faster clock
    from membound.fidelity.calibrate import FIT
    from membound.catalog.runtime import load_runtime
    assert "per_layer_overhead_s" in FIT["hf-transformers"] and "per_layer_overhead_cycles" not in FIT["hf-transformers"]
    hf = load_runtime("hf-transformers")
    assert hf.classes["default"].per_layer_overhead_cycles == 0.0
    a, b = (efficiency(hf, mb.load_hardware(n)).per_layer_overhead_s for n in ("rtx-a6000", "rtx-4090"))
    assert a == b == hf.classes["default"].per_layer_overhead_s > 0
    rt = _rt(per_layer_overhead_s=2.04e-4)
    for dev in ("rtx-a6000", "rtx-4090"):
        r = mb.estimate("llama-2-7b", dev, output_tokens=1, weight_dtype="fp16", runtime=rt)
        assert r.step_terms_s["overhead"] == pytest.approx(6.528e-3, rel=1e-9)


def test_a_model_whose_code_blocks_the_host_pays_the_hosts_dispatch_of_every_layer():
    # fp16 on an RTX 4090 (1.008e12 B/s, fractions 1), one token at context 0. Falcon-7B: 6,921,716,160
    # params (tied head, read once) x 2 B = 13,843,432,320 B = 13.73357 ms; LLaMA-2-7B: 6,738,415,616 less
    # its untied 32,000 x 4,096 lookup, plus the token's row: 6,607,347,712 x 2 B = 13,214,695,424 B.
    # A runtime whose Falcon code blocks the host (a list index: a synchronising copy) adds its host's
    # 32 layers x 400 us = 12.8 ms to Falcon's step; LLaMA's dispatch stays hidden behind its kernels,
    # and so does Falcon's under a runtime that does not list it
    from membound.catalog.runtime import load_runtime

    def rt(blocking):
        return Runtime(name="t", use_latency_floor=False, use_device_fractions=False,
                       host_blocking_model_types=blocking,
                       classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=1.0,
                                                        per_layer_host_s=4e-4)})

    def itl(model, runtime):
        return 1.0 / mb.estimate(model, "rtx-4090", prompt_tokens=0, output_tokens=1, weight_dtype="fp16",
                                 runtime=runtime).decode_tok_s_per_user
    assert mb.load_model("falcon-7b").model_type == "falcon"
    assert itl("falcon-7b", rt(("falcon",))) == pytest.approx(13_843_432_320 / 1.008e12 + 32 * 4e-4, rel=1e-6)
    assert itl("falcon-7b", rt(())) == pytest.approx(13_843_432_320 / 1.008e12, rel=1e-6)
    assert itl("llama-2-7b", rt(("falcon",))) == pytest.approx(13_214_695_424 / 1.008e12, rel=1e-6)
    # the bundled HF runtime names Falcon, with the source of the synchronising index; its host's dispatch
    # is not priced (0): two chips free one constant, its per-layer floor (calibrate.FIT)
    hf = load_runtime("hf-transformers")
    assert hf.host_blocking_model_types == ("falcon",) and hf.classes["default"].per_layer_host_s == 0.0
    assert "fused_qkv[..., [-2], :]" in hf.host_blocking_evidence
    assert "cudaStreamSynchronize" in hf.host_blocking_evidence


def test_only_rows_of_a_host_blocking_model_fit_the_hosts_dispatch(monkeypatch):
    # the host's dispatch is hidden behind the kernels of a model whose code does not block the host,
    # so only Falcon rows (hf-transformers lists falcon) could pin per_layer_host_s, where a runtime's
    # FIT asks for it (the bundled one no longer does: its budget frees one constant)
    from membound.fidelity import calibrate
    from membound.fidelity.calibrate import _params_for
    from membound.fidelity.reference import Scenario
    assert "per_layer_host_s" not in calibrate.FIT["hf-transformers"]
    monkeypatch.setitem(calibrate.FIT, "hf-transformers", ("per_layer_overhead_s", "per_layer_host_s"))

    def row(model):
        return Scenario(id="x", category="c", metric="itl_ms", measured=20.0, model=model, hardware="rtx-4090",
                        runtime="hf-transformers", weight_dtype="fp16", prompt_tokens=0, output_tokens=128)
    assert "per_layer_host_s" not in _params_for("hf-transformers", [row("llama-2-7b"), row("mpt-7b")])
    assert "per_layer_host_s" in _params_for("hf-transformers", [row("llama-2-7b"), row("falcon-7b")])


def test_no_runtime_streams_faster_than_the_chips_measured_reads(tmp_path):
    # DGX Spark: 273 GB/s LPDDR5x peak, a saturating-read kernel measures 232 GB/s (read_bytes_s):
    # a runtime fitted at 0.95 of the peak elsewhere streams at min(0.95, 232 / 273 = 0.8498) of it
    m = mb.load_model("llama-2-7b")
    lookup = 32000 * 4096
    rt = Runtime(name="t", use_latency_floor=False,
                 classes={"default": RuntimeEntry(bandwidth_fraction=0.95, compute_fraction=1.0)})
    assert efficiency(rt, mb.load_hardware("dgx-spark")).bandwidth_fraction == pytest.approx(232 / 273, rel=1e-12)
    kw = dict(batch=1, prompt_tokens=0, output_tokens=1, weight_dtype="bf16")
    step = (m.total_params - lookup + 4096) * 2 / 232e9           # bf16 weights at 232 GB/s
    assert 1 / mb.estimate(m, "dgx-spark", runtime=rt, **kw).decode_tok_s_per_user == pytest.approx(step, rel=1e-9)
    # below the ceiling a fraction stands (0.80 x 273 GB/s); the pure roofline keeps the peak
    low = Runtime(name="t", use_latency_floor=False,
                  classes={"default": RuntimeEntry(bandwidth_fraction=0.8, compute_fraction=1.0)})
    assert efficiency(low, mb.load_hardware("dgx-spark")).bandwidth_fraction == 0.8
    ideal = mb.estimate(m, "dgx-spark", runtime="ideal", **kw).decode_tok_s_per_user
    assert 1 / ideal == pytest.approx((m.total_params - lookup + 4096) * 2 / 273e9, rel=1e-9)
    # a chip without a measured read rate: the fraction as fitted (L40S, 0.95)
    assert efficiency(rt, mb.load_hardware("l40s")).bandwidth_fraction == 0.95
    # RTX 5090: CUB's BabelStream add/triad measure 1573 GB/s of its 1792 (read_bytes_s), so 0.95 -> 1573 / 1792
    assert efficiency(rt, mb.load_hardware("rtx-5090")).bandwidth_fraction == pytest.approx(1573 / 1792, rel=1e-12)
    # a read rate above the peak, or without its source, is refused naming the field
    from membound.catalog.hardware import load_hardware_file
    text = (mb.catalog.hardware.bundled_profiles_dir() / "dgx-spark.yaml").read_text()
    for bad, field in ((text.replace("read_bytes_s: 2.32e+11", "read_bytes_s: 3.0e+11"), "read_bytes_s"),
                       (text.replace("read_source:", "#"), "read_source")):
        f = tmp_path / "dgx-spark.yaml"
        f.write_text(bad)
        with pytest.raises(mb.MemboundError, match=field):
            load_hardware_file(f)


def test_a_pass_of_two_to_eight_tokens_adds_the_mat_vec_instructions_of_each_further_column():
    # llama.cpp CUDA: up to 8 tokens (MMVQ_MAX_BATCH_SIZE) each weight is streamed once and every token
    # (column) issues its own dot-product instructions: 0.875 per q4_0 weight at one lane-instruction
    # per CUDA core per clock, fp32 / 2 = 82.6e12 / 2 = 41.3e12 lane-instructions/s on an RTX 4090. A
    # batch-1 step keeps its own figure (one token at the GEMMs' 4 x 82.6e12 = 330.4e12 FLOP/s, +1/9
    # dequantisation; the fitted batch-1 fractions hold its column), each further column adds
    # P x 0.875 / 41.3e12; above 8 tokens the tiled GEMM (MMQ) at 330.4e12 for every token
    qg = QuantizedGemm(fp32_multiple=4.0, mmvq_max_tokens=8, mmvq_column_ops={"q4_0": 0.875})
    m = mb.load_model("llama-2-7b")
    lookup = 32000 * 4096
    P = m.active_params - lookup                       # the matmul weights
    one = 2 * P * (1 + 1 / 9) / 330.4e12              # 0.0468 ms
    kw = dict(prompt_tokens=0, output_tokens=1, weight_dtype="q4_0", activation_dtype="int8")
    for B, cmp in ((1, one), (2, one + P * 0.875 / 41.3e12), (8, one + 7 * P * 0.875 / 41.3e12),
                   (16, 16 * one)):
        r = mb.estimate(m, "rtx-4090", batch=B, runtime=_rt(quantized_gemm=qg, overlap=0.0), **kw)
        # q4_0 4.5 bits, the LM head q6_K's 6.5625 (llama.cpp's quantizer: quantization.py); 1008 GB/s
        mem = ((m.total_params - lookup + B * 4096) * 4.5 + lookup * (6.5625 - 4.5)) / 8 / 1008e9
        assert B / r.decode_tok_s_total == pytest.approx(mem + cmp, rel=1e-9)
    # batch 8: 7 x 6.61e9 x 0.875 / 41.3e12 = 0.98 ms of columns against the GEMM's 7 x 0.0484 = 0.34 ms
    # a format without a count (q8_0 here, its head too) keeps the GEMMs' rate and their dequantisation
    r = mb.estimate(m, "rtx-4090", batch=8, runtime=_rt(quantized_gemm=qg, overlap=0.0), **{**kw, "weight_dtype": "q8_0"})
    mem = (m.total_params - lookup + 8 * 4096) * 8.5 / 8 / 1008e9
    assert 8 / r.decode_tok_s_total == pytest.approx(mem + 8 * one, rel=1e-9)
    # the bundled CUDA backend has the path; Apple's Metal backend has no quantized_gemm at all
    from membound.catalog.runtime import load_runtime
    q = load_runtime("llama.cpp-cuda").quantized_gemm
    assert q is not None and q.mmvq_max_tokens == 8 and q.mmvq_column_ops["q8_0"] == 1.25


def test_a_weight_only_runtime_keeps_the_lm_head_in_16_bits():
    # TinyChat runs AWQ checkpoints, whose LM head stays fp16 (weight_only_head): Llama-3-8B int4 on an
    # RTX 4090 streams its 128256 x 4096 = 525,336,576-param head and one 4096-wide embedding row at 2 B
    # instead of 4.125/8 B: 525,340,672 x (2 - 0.515625) = 779,802,560 B = 7.7361e-4 s more a step at
    # 1.008e12 B/s; 16-bit weights are unchanged
    plain = _rt()
    awq = plain.model_copy(update={"weight_only_head": "fp16"})
    kw = dict(output_tokens=1, prompt_tokens=0, weight_dtype="int4")
    a, b = (mb.estimate("llama-3-8b", "rtx-4090", runtime=r, **kw).step_terms_s["memory"] for r in (awq, plain))
    assert a - b == pytest.approx(779_802_560 / 1.008e12, rel=1e-9)
    kw16 = dict(kw, weight_dtype="fp16")
    a, b = (mb.estimate("llama-3-8b", "rtx-4090", runtime=r, **kw16).step_terms_s["memory"] for r in (awq, plain))
    assert a == pytest.approx(b, rel=1e-12)
    from membound.catalog.runtime import load_runtime
    assert load_runtime("tinychat").weight_only_head == "fp16"
    assert load_runtime("tinychat").default_head("int4", mb.load_hardware("rtx-4090")) == "fp16"


def test_the_runtime_head_holds_whether_the_formats_come_as_dtypes_or_as_a_quantization():
    # the same TinyChat Llama-3-8B int4 step as above: a mb.Quantization("int4") without a head format
    # gets the runtime's fp16 head too; an explicit head_weights wins, so "int4" streams the head at
    # 4.125/8 B again: 779,802,560 B = 7.7361e-4 s a step less at 1.008e12 B/s
    awq = _rt().model_copy(update={"weight_only_head": "fp16"})
    kw = dict(output_tokens=1, prompt_tokens=0, runtime=awq)
    by_dtype = mb.estimate("llama-3-8b", "rtx-4090", weight_dtype="int4", **kw).step_terms_s["memory"]
    by_q = mb.estimate("llama-3-8b", "rtx-4090", quantization=mb.Quantization("int4"), dense_weight_dtype=None,
                       **kw).step_terms_s["memory"]
    pure = mb.estimate("llama-3-8b", "rtx-4090", quantization=mb.Quantization("int4", head_weights="int4"),
                       dense_weight_dtype=None, **kw).step_terms_s["memory"]
    assert by_q == by_dtype
    assert by_dtype - pure == pytest.approx(779_802_560 / 1.008e12, rel=1e-9)


def test_a_mat_vec_column_takes_the_longer_of_its_issue_and_its_dp4a_on_the_int32_lanes():
    # Llama-2-7B q4_0, the second token (column) of a pass in llama.cpp CUDA's mat-vec: 0.875
    # instructions per weight, of which the dp4a are 0.25 (4 of the 14 per call of 16 weights). The
    # dp4a run on INT32 lanes only: half the FP32 lanes on an RTX 4090 (Ada), all of them on an RTX 5090
    # (Blackwell). One instruction issues per clock to either datapath, so a column takes
    # max(0.875, 0.25 / share) lane-clocks per weight: 0.875 on both (0.25 / 0.5 = 0.5 < 0.875), i.e.
    #   RTX 4090: P x 0.875 / (82.6e12 / 2)  = 6.607e9 x 0.875 / 41.3e12 = 0.140 ms
    #   RTX 5090: P x 0.875 / (104.8e12 / 2) = 6.607e9 x 0.875 / 52.4e12 = 0.110 ms (x 82.6 / 104.8)
    # A kernel whose column were all dp4a (0.5 of 0.5) would be INT32-bound on Ada only:
    #   RTX 4090: P x 0.5 / 0.5 / 41.3e12 = 0.160 ms;  RTX 5090: P x 0.5 / 52.4e12 = 0.063 ms
    m = mb.load_model("llama-2-7b")
    lookup = 32000 * 4096
    P = m.active_params - lookup                       # the matmul weights, 6.607e9
    # fp8 activations stand in for llama.cpp's int8 ones (the RTX 5090 profile lists no int8 peak)
    kw = dict(prompt_tokens=0, output_tokens=1, weight_dtype="q4_0", activation_dtype="fp8")
    for ops, int_ops, col_4090, col_5090 in ((0.875, 0.25, P * 0.875 / 41.3e12, P * 0.875 / 52.4e12),
                                             (0.5, 0.5, P * 0.5 / 0.5 / 41.3e12, P * 0.5 / 52.4e12)):
        qg = QuantizedGemm(fp32_multiple=4.0, mmvq_max_tokens=8, mmvq_column_ops={"q4_0": ops},
                           mmvq_column_int_ops={"q4_0": int_ops})
        for chip, fp32, bw, col in (("rtx-4090", 82.6e12, 1008e9, col_4090), ("rtx-5090", 104.8e12, 1792e9, col_5090)):
            one = 2 * P * (1 + 1 / 9) / (4 * fp32)      # the first column at the GEMMs' 4 x fp32, +1/9 dequant
            # q4_0 4.5 bits, the LM head q6_K's 6.5625, 2 embedding rows
            mem = ((m.total_params - lookup + 2 * 4096) * 4.5 + lookup * (6.5625 - 4.5)) / 8 / bw
            r = mb.estimate(m, chip, batch=2, runtime=_rt(quantized_gemm=qg, overlap=0.0), **kw)
            assert 2 / r.decode_tok_s_total == pytest.approx(mem + one + col, rel=1e-9)
    assert P * 0.875 / 41.3e12 == pytest.approx(0.140e-3, rel=2e-3)
    # the bundled CUDA backend: dp4a 0.25 per weight in each format; on an Ada, Ampere GA10x or Hopper
    # chip (INT32 on half the lanes) no format's column is INT32-bound (0.5 < 0.8125..1.25) ...
    from membound.catalog.runtime import load_runtime
    cuda = load_runtime("llama.cpp-cuda")
    assert cuda.quantized_gemm is not None and dict(cuda.quantized_gemm.mmvq_column_int_ops) == \
        {"q8_0": 0.25, "q4_0": 0.25, "mxfp4": 0.25}
    for chip in ("rtx-4090", "rtx-3090", "h100-sxm", "rtx-5090", "dgx-spark", "a100-80gb"):
        assert dict(efficiency(cuda, mb.load_hardware(chip)).mmvq_column_ops) == \
            {"q8_0": 1.25, "q4_0": 0.875, "mxfp4": 0.8125}
    # ... it would be on a chip with INT32 on a fifth of its lanes: q4_0 0.25 / 0.2 = 1.25 > 0.875
    fifth = mb.load_hardware("rtx-4090").with_overrides(int32_lanes_per_fp32=0.2, int32_source="a test")
    assert dict(efficiency(cuda, fifth).mmvq_column_ops) == pytest.approx(
        {"q8_0": 1.25, "q4_0": 1.25, "mxfp4": 1.25}, rel=1e-12)


def test_the_int32_lane_share_is_sourced_and_the_int32_ops_are_part_of_the_column(tmp_path):
    from membound.catalog._data import validate
    from membound.catalog.hardware import load_hardware_file
    assert mb.load_hardware("rtx-4090").int32_lanes_per_fp32 == 0.5      # Ada: 64 INT32 of 128 lanes per SM
    assert mb.load_hardware("h100-sxm").int32_lanes_per_fp32 == 0.5      # Hopper: 64 INT32, 128 FP32 per SM
    assert mb.load_hardware("rtx-5090").int32_lanes_per_fp32 == 1.0      # Blackwell: all lanes FP32/INT32
    assert mb.load_hardware("a100-80gb").int32_lanes_per_fp32 == 1.0     # GA100: 64 INT32 beside 64 FP32
    text = (mb.catalog.hardware.bundled_profiles_dir() / "rtx-4090.yaml").read_text()
    for bad, field in ((text.replace("int32_source:", "#"), "int32_source"),
                       (text.replace("int32_lanes_per_fp32: 0.5", "int32_lanes_per_fp32: 2"), "int32_lanes_per_fp32"),
                       (text.replace("int32_lanes_per_fp32: 0.5", "int32_lanes_per_fp32: 0"), "int32_lanes_per_fp32")):
        f = tmp_path / "rtx-4090.yaml"
        f.write_text(bad)
        with pytest.raises(mb.MemboundError, match=field):
            load_hardware_file(f)
    for bad_int in ({"q4_0": 0.9}, {"q8_0": 0.25}):        # more than the column's, or a format it lacks
        with pytest.raises(mb.MemboundError, match="mmvq_column_int_ops"):
            validate(QuantizedGemm, {"fp32_multiple": 4.0, "mmvq_max_tokens": 8, "mmvq_column_ops": {"q4_0": 0.875},
                                     "mmvq_column_int_ops": bad_int}, "a runtime")


@given(ops=st.floats(0.01, 100.0), frac=st.floats(0.0, 1.0), share=st.floats(0.01, 1.0))
def test_a_column_is_bound_by_its_issue_or_by_its_int32_work_whichever_is_longer(ops, frac, share):
    # law: the INT32 lanes bind exactly where the column's INT32 share of instructions exceeds the
    # device's INT32 share of lanes; with every lane INT32-capable (share 1) the issue always binds
    from membound.physics.efficiency import _column_clocks
    int_ops = frac * ops
    c = _column_clocks(ops, int_ops, share)
    assert c >= ops and c >= int_ops / share
    assert c == pytest.approx(ops if frac <= share else int_ops / share, rel=1e-12)
    assert _column_clocks(ops, int_ops, 1.0) == ops


def _mv(overlap: float, matvec: float | None, max_tokens: int | None = 8) -> Runtime:
    """A pure-roofline runtime whose tiled GEMMs overlap by `overlap` and whose mat-vec kernels (passes
    of at most `max_tokens` tokens) by `matvec`."""
    return Runtime(name="t", use_latency_floor=False, use_device_fractions=False, matvec_max_tokens=max_tokens,
                   matvec_overlap=matvec,
                   classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=1.0, overlap=overlap)})


@pytest.mark.parametrize("B, step", [
    # llama-3.1-8b bf16 on an H100 at context 0: the weights less the untied embedding (525,336,576 of
    # 8,030,261,248 params) and B embedding rows at 2 bytes over 3.35e12 B/s; 2 FLOPs per matmul weight
    # per token at 989e12 FLOP/s. A pass of at most 8 tokens runs mat-vecs (overlap 1: the larger term),
    # above 8 the tiled GEMMs (overlap 0: both terms)
    (1, (8030261248 - 525336576 + 4096) * 2 / 3.35e12),                       # 4.4806 ms of bytes
    (8, (8030261248 - 525336576 + 8 * 4096) * 2 / 3.35e12),                   # bytes still the larger
    (9, (8030261248 - 525336576 + 9 * 4096) * 2 / 3.35e12 + 9 * 2 * (8030261248 - 525336576) / 989e12),
    (64, (8030261248 - 525336576 + 64 * 4096) * 2 / 3.35e12 + 64 * 2 * (8030261248 - 525336576) / 989e12),
])
def test_a_pass_of_at_most_matvec_max_tokens_overlaps_as_its_mat_vec_kernels_do(B, step):
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=B, prompt_tokens=0, output_tokens=1, weight_dtype="bf16",
                    runtime=_mv(overlap=0.0, matvec=1.0))
    assert B / r.decode_tok_s_total == pytest.approx(step, rel=1e-9)


def test_the_mat_vec_overlap_defaults_to_the_entrys_and_governs_small_prefills_and_verify_passes():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    # unset: every pass overlaps as the entry says (the runtimes that name no mat-vec path are unchanged)
    kw = dict(prompt_tokens=0, output_tokens=1, weight_dtype="bf16")
    for B in (1, 8, 9):
        a, b = (mb.estimate("llama-3.1-8b", "h100-sxm", batch=B, runtime=rt, **kw).decode_tok_s_total
                for rt in (_mv(0.0, None, None), _rt(overlap=0.0)))
        assert a == b
    # a prefill is one pass of B x S tokens: 4 tokens run as mat-vecs (the larger of bytes and FLOPs),
    # 512 as tiled GEMMs (their sum)
    for S, law in ((4, max), (512, lambda m, c: m + c)):
        r = prepare("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=S, output_tokens=1, weight_dtype="bf16",
                    runtime=_mv(0.0, 1.0)).evaluate()
        assert r["prefill_s"] == pytest.approx(law(r["prefill_memory_s"], r["prefill_compute_s"]), rel=1e-12)

    # law: at any batch, the step is max(m, c) as mat-vecs and m + c as tiled GEMMs, m and c the step's
    # own bytes and FLOPs terms (no floor, overhead or communication in this runtime)
    @settings(max_examples=25, deadline=None)
    @given(st.integers(1, 40), st.sampled_from([1, 4, 8, 16]))
    def law(B, limit):
        r = mb.estimate("llama-3.2-1b", "h100-sxm", batch=B, runtime=_mv(0.0, 1.0, limit), **kw)
        m, c = r.step_terms_s["memory"], r.step_terms_s["compute"]
        assert B / r.decode_tok_s_total == pytest.approx(max(m, c) if B <= limit else m + c, rel=1e-9)

    law()


def test_a_sweep_splits_mat_vec_and_tiled_passes_as_estimate_does():
    from membound.planning.sweep import sweep
    t = sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 8, 9, 32], prompt_tokens=[0, 4, 512],
              output_tokens=4, weight_dtype="bf16", runtime=_mv(0.0, 1.0), as_frame=False)
    assert len(t["batch"]) == 12
    for B, S, tok, ttft in zip(t["batch"], t["prompt_tokens"], t["decode_tok_s_per_user"], t["ttft_s"]):
        r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=int(B), prompt_tokens=int(S), output_tokens=4,
                        weight_dtype="bf16", runtime=_mv(0.0, 1.0))
        assert tok == pytest.approx(r.decode_tok_s_per_user, rel=1e-9)
        assert ttft == pytest.approx(r.ttft_s, rel=1e-9)


def test_llama_cpp_mat_vec_passes_are_set_serial_from_the_rows_that_measure_them():
    # ggml-cuda's mmvq/mmvf and ggml-vulkan's mul_mat_vec shaders take passes of at most 8 tokens
    # (MMVQ_MAX_BATCH_SIZE, MMVF_MAX_BATCH_SIZE, mul_mat_vec_max_cols); their loops have no barrier, but
    # DGX Spark's 2-8 sequence steps and the A770's dequantising mat-vec add their instructions to their
    # bytes: overlap 0, as the tiled GEMMs', each with its own evidence
    from membound.catalog.runtime import load_runtime
    for name in ("llama.cpp-cuda", "llama.cpp-hip", "llama.cpp-vulkan"):
        rt = load_runtime(name)
        assert (rt.matvec_max_tokens, rt.matvec_overlap) == (8, 0.0)
        assert "no __syncthreads" in rt.matvec_evidence or "no barrier()" in rt.matvec_evidence
    assert "spark-062" in load_runtime("llama.cpp-cuda").matvec_evidence
    assert "lcpp-040" in load_runtime("llama.cpp-vulkan").matvec_evidence
