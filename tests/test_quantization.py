"""Quantization: bytes per weight with block scales, the compute peak of the activation dtype,
the dequantization cost of weight-only formats once compute-bound."""
import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.catalog.dtypes import get_dtype, register_dtype

IDEAL = dict(runtime="ideal", prompt_tokens=0, output_tokens=1)   # context 0: weights only


def test_int4_g128_weight_bytes_by_hand():
    # 4 bits + one fp16 scale per 128 weights = 4.125 bits; llama-3.1-8b has ~8.030e9 parameters
    m = mb.load_model("llama-3.1-8b")
    r = mb.estimate(m, "h100-sxm", weight_dtype="int4")
    assert r.memory.weights_bytes == pytest.approx(m.total_params * 4.125 / 8)
    assert r.memory.weights_bytes == pytest.approx(8.030e9 * 4.125 / 8, rel=2e-3)


def test_kv_fp8_halves_kv_bytes():
    # llama-3.1-8b KV per token: 32 layers x 2 x 8 heads x 128 x bytes; 4 sequences of 1024 + 128
    per_token_bf16 = 32 * 2 * 8 * 128 * 2
    kw = dict(batch=4, prompt_tokens=1024, output_tokens=128)
    bf16 = mb.estimate("llama-3.1-8b", "h100-sxm", kv_dtype="bf16", **kw).memory.kv_bytes
    fp8 = mb.estimate("llama-3.1-8b", "h100-sxm", kv_dtype="fp8", **kw).memory.kv_bytes
    assert bf16 == pytest.approx(4 * 1152 * per_token_bf16)
    assert fp8 == pytest.approx(bf16 / 2)


def test_int4_speedup_at_batch_1_is_the_byte_ratio():
    # memory-bound: speed-up = 16 bits / 4.125 bits
    q = mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtypes=["int4"], batches=[1], **IDEAL)
    assert q.speedup["int4"][0] == pytest.approx(16 / 4.125, rel=1e-4)


def test_int4_stops_paying_when_compute_bound():
    # batch 65536: both compute-bound at the bf16 peak; int4 pays 1/9 more GEMM work to dequantize, so it
    # runs at 1 / (1 + 1/9) = 0.9 of bf16's speed (MARLIN's ~10% below FP16 when compute-bound)
    q = mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtypes=["int4"], batches=[1, 65536], **IDEAL)
    assert q.speedup["int4"][1] == pytest.approx(0.9, rel=1e-3)
    assert q.speedup["int4"][0] > 3.8
    # a kernel with no dequantization cost breaks even instead
    free = mb.Quantization("int4", dequant_overhead=0.0)
    q = mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtypes=[free], batches=[65536], **IDEAL)
    assert list(q.speedup.values())[0][0] == pytest.approx(1.0, rel=1e-3)


def test_fp8_w8a8_doubles_the_compute_peak_on_h100():
    # compute-bound: speed-up = fp8 peak / bf16 peak = 1.979e15 / 9.89e14
    q = mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtypes=["fp8"], batches=[1, 65536], **IDEAL)
    assert q.speedup["fp8"][0] == pytest.approx(2.0, rel=1e-4)          # memory-bound: 16 / 8 bits
    assert q.speedup["fp8"][1] == pytest.approx(1.979e15 / 9.89e14, rel=1e-3)


def test_no_fp8_on_a100():
    with pytest.raises(mb.InvalidInputError) as e:
        mb.estimate("llama-3.1-8b", "a100-80gb", weight_dtype="fp8", activation_dtype="fp8")
    assert e.value.field == "activation_dtype" and e.value.value == "fp8"
    # left to default, fp8 weights are dequantized to bf16 compute (weight-only, with its cost)
    r = mb.estimate("llama-3.1-8b", "a100-80gb", weight_dtype="fp8")
    assert r.activation_dtype == "bf16"
    q = mb.quantization_speedup("llama-3.1-8b", "a100-80gb", weight_dtypes=["fp8"], batches=[65536], **IDEAL)
    assert q.speedup["fp8"][0] == pytest.approx(0.9, rel=1e-3)


def test_speedup_rejects_mixed_arguments():
    with pytest.raises(mb.InvalidInputError):
        mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtype="int4")
    with pytest.raises(mb.InvalidInputError):
        mb.quantization_speedup("llama-3.1-8b", "h100-sxm", batches=[0])


_FORMATS = ["fp32", "bf16", "fp8", "int8", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "mxfp4", "int4", "fp4"]


@settings(max_examples=30, deadline=None)
@given(a=st.sampled_from(_FORMATS), b=st.sampled_from(_FORMATS),
       model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-4b"]))
def test_fewer_bits_never_add_bytes(a, b, model):
    lo, hi = sorted((a, b), key=lambda n: get_dtype(n).bits)
    kw = dict(prompt_tokens=512, output_tokens=16, check_memory=False, runtime="ideal")
    r_lo = mb.estimate(model, "h200", weight_dtype=lo, kv_dtype=lo if lo in ("bf16", "fp8", "fp32") else "fp8", **kw)
    r_hi = mb.estimate(model, "h200", weight_dtype=hi, kv_dtype=hi if hi in ("bf16", "fp8", "fp32") else "bf16", **kw)
    assert r_lo.memory.weights_bytes <= r_hi.memory.weights_bytes
    assert r_lo.memory.kv_bytes <= r_hi.memory.kv_bytes
    # at batch 1 the step is memory-bound, so fewer bytes never slow it down
    assert r_lo.decode_tok_s_per_user >= r_hi.decode_tok_s_per_user * (1 - 1e-9)


def test_the_residual_stream_is_16_bit_where_an_engine_keeps_it_and_the_chips_own_on_a_dataflow_chip():
    # GPU engines keep and all-reduce the hidden state in 16 bits whatever the GEMMs compute in (fp8,
    # int8, fp4: quantized inside the kernel); CPUs computing in fp32 are counted at 16 bits too.
    # Groq's compiler streams its int8 activations (1 byte); Cerebras and SambaNova compute in 16 bits.
    cases = [("h100-sxm", "fp8", None, 2.0), ("b200", "nvfp4", None, 2.0), ("a100-80gb", "int8", "int8", 2.0),
             ("h100-sxm", "bf16", None, 2.0), ("apple-m1-max-cpu", "q4_0", None, 2.0),
             ("groq-lpu", "int8", None, 1.0), ("groq-lpu", "fp16", None, 2.0),
             ("cerebras-wse-3", "fp8", None, 2.0), ("sambanova-sn40l", "int8", None, 2.0)]
    for hw, weights, acts, residual in cases:
        res = mb.Quantization(weights, activations=acts).resolve(mb.load_hardware(hw))
        assert res.residual_bytes == residual, (hw, weights, res.activations.name)


def test_expert_activations_set_the_experts_compute_path_alone():
    # gpt-oss on B200: MXFP4 experts with MXFP8 activations (W4A8), bf16 attention and projections.
    # B200 dense peaks: bf16 2.25e15, fp8 4.5e15, fp4 9.0e15 FLOP/s. The experts compute at the
    # fp8 rate (4.5e15), half what the fp4 rule gives (9.0e15); the dense path stays at bf16.
    b200 = mb.load_hardware("b200")
    w4a8 = mb.Quantization("mxfp4", "fp8", dense_weights="bf16", expert_activations="fp8").resolve(b200)
    w4a4 = mb.Quantization("mxfp4", "fp8", dense_weights="bf16").resolve(b200)
    assert w4a8.peak_flops == pytest.approx(4.5e15) and w4a8.activations.name == "fp8"
    assert w4a4.peak_flops == pytest.approx(9.0e15) and w4a4.activations.name == "mxfp4"
    assert w4a8.dense_peak_flops == w4a4.dense_peak_flops == pytest.approx(2.25e15)
    assert w4a8.dense_activations.name == "bf16"
    # Blackwell's kind::mxf8f6f4 MMA multiplies the mxfp4 weights by the mxfp8 activations as they
    # are: no dequantising pass, so neither path pays the weight-only overhead
    assert w4a8.dequant == 0.0 and w4a4.dequant == 0.0
    # one format for every tensor: `expert_activations` still leaves the dense path to `activations`
    same = mb.Quantization("fp8", expert_activations="bf16").resolve(b200)
    assert same.peak_flops == pytest.approx(2.25e15) and same.dense_peak_flops == pytest.approx(4.5e15)
    with pytest.raises(mb.InvalidInputError) as e:
        mb.Quantization("mxfp4", expert_activations="q4_0")
    assert e.value.field == "expert_activation_dtype"


def test_weights_the_matrix_units_take_beside_the_activations_pay_no_dequantisation():
    # The weight-only overhead (DEFAULT_DEQUANT_OVERHEAD = 1/9 of the GEMM FLOPs) is a dequantising
    # pass. Blackwell (tcgen05 kind::f8f6f4 / kind::mxf8f6f4) and CDNA4 (scaled f8f6f4 MFMA) multiply
    # an e2m1 operand by an e4m3 one in one instruction, MX block scales (ue8m0 per 32) applied in
    # hardware, at the fp8 rate. So:
    #   mxfp4 experts x fp8 activations, B200 (fp4 9.0e15, fp8 4.5e15): 0 overhead, fp8 peak 4.5e15
    #   the same on MI355X (fp4 1.01e16, fp8 5.0e15): 0 overhead, fp8 peak 5.0e15
    #   bare fp4 x fp8 on B200 (kind::f8f6f4, no scales): 0
    #   mxfp4 x bf16 on H200 (no fp4 units; Triton upcasts the experts to bf16): 1/9
    #   mxfp4 x fp8 on H100 (fp8 units, no fp4): the weights are dequantised to fp8: 1/9
    #   nvfp4 x fp8 on B200: NVFP4's e4m3 scales per 16 go only into kind::mxf4nvf4 (both e2m1): 1/9
    #   int4 (no compute format at all) x fp8 on B200: 1/9
    cases = [("b200", "mxfp4", "fp8", 0.0, 4.5e15), ("mi355x", "mxfp4", "fp8", 0.0, 5.0e15),
             ("b200", "fp4", "fp8", 0.0, 4.5e15), ("h200", "mxfp4", "bf16", 1 / 9, None),
             ("h100-sxm", "mxfp4", "fp8", 1 / 9, None), ("b200", "nvfp4", "fp8", 1 / 9, 4.5e15),
             ("b200", "int4", "fp8", 1 / 9, 4.5e15)]
    for hw, w, act, dq, peak in cases:
        res = mb.Quantization(w, "fp8", expert_activations=act, dense_weights="bf16").resolve(hw)
        assert res.dequant == pytest.approx(dq), (hw, w, act)
        assert res.dense_dequant == 0.0       # bf16 dense tensors in the bf16 path
        if peak is not None:
            assert res.peak_flops == pytest.approx(peak), (hw, w, act)
    # a user's overhead is charged where a dequantising pass exists, never where none does
    q = mb.Quantization("mxfp4", "fp8", expert_activations="fp8", dense_weights="bf16", dequant_overhead=0.3)
    assert q.resolve("b200").dequant == 0.0 and q.resolve("h100-sxm").dequant == pytest.approx(0.3)


def test_a_chip_multiplies_fp4_beside_fp8_only_where_it_has_fp4_matrix_units():
    b200, h100 = mb.load_hardware("b200"), mb.load_hardware("h100-sxm")
    assert b200.multiplies("fp4", "fp8") and b200.multiplies("fp8", "fp4")
    assert b200.multiplies("bf16", "fp16")               # the 16-bit formats stand in for each other
    assert not b200.multiplies("fp4", "bf16")            # f8f6f4 takes no 16-bit operand
    assert not b200.multiplies("int8", "fp8")
    assert not h100.multiplies("fp4", "fp8") and h100.multiplies("fp8", "fp8")
    assert not h100.multiplies("fp4", "fp4")


def test_a_registered_format_says_whether_mixed_matrix_instructions_take_it():
    import membound.catalog.dtypes as dt
    try:
        d = register_dtype("mxfp4_test", 4.25, "fp4", mixed_operand=True)
        plain = register_dtype("fp4_test_scaled", 4.5, "fp4")
        assert d.mixed_operand and not plain.mixed_operand
        assert mb.Quantization("mxfp4_test", expert_activations="fp8").resolve("b200").dequant == 0.0
        assert mb.Quantization("fp4_test_scaled", expert_activations="fp8").resolve("b200").dequant == pytest.approx(1 / 9)
        with pytest.raises(mb.InvalidInputError) as e:
            register_dtype("bad_flag", 4, "fp4", mixed_operand="yes")
        assert e.value.field == "mixed_operand"
    finally:
        for n in ("mxfp4_test", "fp4_test_scaled"):
            if n in dt._registry:
                del dt._registry[n]


def test_llama_cpp_converts_mxfp4_to_int8_whatever_pairs_the_chip_could_take():
    # llama.cpp's MMQ quantizes activations to int8 blocks and turns MXFP4 weights into int8 through
    # its e2m1 value table: a dequantising pass on every chip. On an RTX 5090, whose profile lists no
    # int8 rate, its activations stand in at the fp8 rate (Runtime.default_activations), which the
    # chip could pair with MXFP4 as it is; the runtime converts anyway: 1/9, as on a chip with int8.
    from membound.physics.estimate import prepare
    cpp = prepare("gpt-oss-20b", "rtx-5090", runtime="llama.cpp-cuda", weight_dtype="mxfp4").resolved
    assert cpp.activations.name == "fp8" and cpp.dequant == pytest.approx(1 / 9)
    # the same formats in an engine whose MoE GEMM takes MXFP4 x MXFP8 (vLLM's FlashInfer path): none
    vllm = prepare("gpt-oss-20b", "rtx-5090", runtime="vllm", weight_dtype="mxfp4", activation_dtype="fp8").resolved
    assert vllm.activations.name == "fp8" and vllm.dequant == 0.0
    q = mb.Quantization("mxfp4", activations="fp8")
    assert q.resolve("rtx-5090", native_mixed=False).dequant == pytest.approx(1 / 9)
    assert q.resolve("rtx-5090").dequant == 0.0


def test_upcast_rate_scales_the_dequantisation_share_by_the_chips_matrix_to_alu_ratio():
    # quantization.upcast_rate: (1 + d) / (1 + d r / r_A10), d = 1/9 (MARLIN on an A10), r = the chip's
    # bf16 matrix rate over its fp32 ALU rate, r_A10 = 125 / 31.24 = 4.00128.
    # H200: 989 / 67 = 14.7612 -> 1.111111 / (1 + 14.7612 / 4.00128 / 9) = 1.111111 / 1.409902 = 0.788077
    # MI300X: 1307.4 / 163.4 = 8.00122 -> 1.111111 / (1 + 1.999676 / 9) = 1.111111 / 1.222186 = 0.909117
    # A10 itself: r = r_A10 -> 1 exactly; B200 with MXFP8 expert activations: no upcast (d = 0) -> 1
    from membound.physics.quantization import upcast_rate
    q = mb.Quantization("mxfp4", "fp8", dense_weights="bf16")
    h200, mi300x, a10 = (mb.load_hardware(n) for n in ("h200", "mi300x", "a10"))
    assert upcast_rate(h200, q.resolve(h200, "gpt-oss-120b")) == pytest.approx(0.788077, rel=1e-5)
    assert upcast_rate(mi300x, q.resolve(mi300x, "gpt-oss-120b")) == pytest.approx(0.909117, rel=1e-5)
    assert upcast_rate(a10, mb.Quantization("int4").resolve(a10, "mixtral-8x7b")) == pytest.approx(1.0, rel=1e-12)
    b200 = mb.load_hardware("b200")
    native = mb.Quantization("mxfp4", "fp8", dense_weights="bf16", expert_activations="fp8")
    assert upcast_rate(b200, native.resolve(b200, "gpt-oss-120b")) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 1.0), st.floats(0.5, 40.0), st.floats(0.5, 40.0))
def test_upcast_rate_falls_as_the_matrix_units_outrun_the_alus(d, r1, r2):
    # law: the more the matrix units outrun the ALUs, the larger the upcast's share of a GEMM; at the
    # A10's ratio the fixed share is the chip's own (rate 1)
    from types import SimpleNamespace
    from membound.physics.quantization import DEQUANT_MEASURED_RATIO, upcast_rate

    def rate(r):
        hw = SimpleNamespace(compute_flops={"fp32": 1e13})
        res = SimpleNamespace(dequant=d, peak_flops=r * 1e13, activations=SimpleNamespace(bits=16))
        return upcast_rate(hw, res)
    lo, hi = sorted((r1, r2))
    assert rate(lo) >= rate(hi)
    assert rate(DEQUANT_MEASURED_RATIO) == pytest.approx(1.0, rel=1e-12)
