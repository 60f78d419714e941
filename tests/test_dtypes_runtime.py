"""The dtype registry and runtime lookup."""
import pytest

import membound as mb
from membound.catalog.dtypes import get_dtype, register_dtype
from membound.catalog.runtime import Runtime, RuntimeEntry
from membound.physics.efficiency import efficiency


@pytest.mark.parametrize("name, bits", [
    ("bf16", 16), ("f16", 16), ("fp8", 8), ("int8", 8),
    ("int4", 4 + 16 / 128),      # group-128 fp16 scales: 4.125
    ("mxfp4", 4 + 8 / 32),       # 32 fp4 + an 8-bit scale: 4.25
    ("nvfp4", 4 + 8 / 16),       # 16 fp4 + an fp8 scale: 4.5
    ("q8_0", (32 * 8 + 16) / 32),  # 34 bytes per 32 weights: 8.5
    ("q4_0", (32 * 4 + 16) / 32),  # 18 bytes per 32 weights: 4.5
    ("q6_k", 210 * 8 / 256),     # 6.5625
])
def test_bits_per_element(name, bits):
    assert get_dtype(name).bits == pytest.approx(bits)


def test_register_and_errors():
    d = register_dtype("q3_test", 3.4375)
    assert get_dtype("Q3_TEST") is d
    with pytest.raises(mb.UnknownNameError, match="unknown dtype 'int3'"):
        get_dtype("int3")
    for bad in (0, -1, float("nan"), float("inf"), 100):
        with pytest.raises(mb.InvalidInputError, match="bits"):
            register_dtype("bad", bad)


def test_runtime_lookup_order_name_class_kind_default():
    hw = mb.load_hardware("h100-sxm")
    rt = Runtime(name="t", classes={
        "default": RuntimeEntry(bandwidth_fraction=0.1),
        "gpu": RuntimeEntry(bandwidth_fraction=0.2),
        "nvidia-datacenter": RuntimeEntry(bandwidth_fraction=0.3),
    })
    assert efficiency(rt, hw).bandwidth_fraction == 0.3
    rt2 = Runtime(name="t2", classes={"h100-sxm": RuntimeEntry(per_step_overhead_s=1e-4),
                                      "gpu": RuntimeEntry(bandwidth_fraction=0.2)})
    e = efficiency(rt2, hw)
    # the name entry wins; its missing fractions come from the device profile
    assert e.per_step_overhead_s == 1e-4
    assert e.bandwidth_fraction == hw.achievable.bandwidth_fraction


def test_ideal_runtime_is_the_pure_roofline():
    hw = mb.load_hardware("h100-sxm")
    e = efficiency(mb.load_runtime("ideal"), hw)
    assert (e.bandwidth_fraction, e.compute_fraction, e.per_layer_floor_s, e.per_step_overhead_s) == (1, 1, 0, 0)
    assert set(mb.list_runtimes()) >= {"ideal", "device", "llama.cpp", "vllm", "tensorrt-llm"}


def test_llama_cpp_quantizes_activations_to_int8_for_block_quantized_weights():
    # llama.cpp's CUDA backend quantizes activations to q8_1 and multiplies q4_0 weights as int8
    # (MMQ): estimate() with no activation_dtype must price that path, as the explicit int8 does;
    # before, only the reference loader knew it and a user's estimate() ran q4_0 at the bf16 peak
    kw = dict(weight_dtype="q4_0", prompt_tokens=512, output_tokens=1, runtime="llama.cpp-cuda")
    implied = mb.estimate("llama-2-7b", "rtx-4090", **kw)
    assert implied.activation_dtype == "int8"
    assert implied.prefill_s == mb.estimate("llama-2-7b", "rtx-4090", activation_dtype="int8", **kw).prefill_s
    # the dispatcher picks the backend first: llama.cpp on NVIDIA is llama.cpp-cuda
    assert mb.estimate("llama-2-7b", "rtx-4090", **{**kw, "runtime": "llama.cpp"}).activation_dtype == "int8"
    # 16-bit weights multiply in 16 bits; Metal has no such rule; an explicit format wins
    assert mb.estimate("llama-2-7b", "rtx-4090", **{**kw, "weight_dtype": "fp16"}).activation_dtype != "int8"
    assert mb.estimate("llama-2-7b", "apple-m4-max", **{**kw, "runtime": "llama.cpp-metal"}).activation_dtype != "int8"
    assert mb.estimate("llama-2-7b", "rtx-4090", activation_dtype="fp8", **kw).activation_dtype == "fp8"
    # vLLM has no rule: q4_0 activations follow the formats' default
    assert mb.load_runtime("vllm").default_activations("q4_0", mb.load_hardware("rtx-4090")) is None
