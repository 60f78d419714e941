"""A served engine whose GEMMs read weights at measured kernels' shares of the chip's achievable bandwidth
(Served.weight_read over the profile's achievable.weight_read_by_format for the dense tensors and
expert_read_by_format for routed experts), where every other runtime reads every weight at the served
bandwidth share. Numbers derived by hand from the profiles' cited shares (TensorRT-LLM 1.2.0rc5's kernel
timings, ai-dynamo/aiconfigurator@095f58a; scripts/kernel_tables.py --shares)."""
import pytest

import membound as mb
from membound.catalog.hardware import Hardware, load_hardware
from membound.physics.core import chip_of
from membound.physics.efficiency import efficiency, weight_reads
from membound.physics.estimate import prepare


def _served(read: bool) -> mb.Runtime:
    trt = mb.load_runtime("tensorrt-llm")
    return trt.model_copy(update={"name": f"trt-read-{read}",
                                  "served": trt.served.model_copy(update={"weight_read": read})})


def _chip(model: str, hw: str, read: bool, weights: str):
    p = prepare(model, hw, runtime=_served(read), weight_dtype=weights)
    return chip_of(p.consts, p.hardware, p.eff, p.knobs, p.chip_base, p.pinned, 0.0, 0.0)[0], p


def test_the_profiles_shares():
    # H200: Llama-2-70B's layer GEMMs read fp8 at 0.783 of 0.9 x 4.8 TB/s; Mixtral's experts at 0.885
    assert weight_reads(load_hardware("h200"), "weight") == (("fp8", 0.783),)
    assert weight_reads(load_hardware("h200"), "expert") == (("fp8", 0.885),)
    # B200: fp4 dense 0.387 (the 0.39 of the kernel tables), fp8 0.576; experts fp8 0.802, nvfp4 0.659
    assert weight_reads(load_hardware("b200"), "weight") == (("fp8", 0.576), ("nvfp4", 0.387))
    assert weight_reads(load_hardware("b200"), "expert") == (("fp8", 0.802), ("nvfp4", 0.659))
    # a part no kernel table measured (GH200) has none: its weights read at the achievable bandwidth
    assert weight_reads(load_hardware("gh200-96gb"), "weight") == ()


def test_dense_weights_read_at_the_kernels_share_and_kv_at_the_achievable():
    # tensorrt-llm's served bandwidth_fraction 1.0 x H200's 0.9 x 4.8e12 B/s = 4.32e12 B/s: a weight byte
    # 1 / 4.32e12 = 2.3148e-13 s; with the kernels' share 0.783: 1 / (4.32e12 x 0.783) = 2.9564e-13 s.
    # The KV cache keeps 1 / 4.32e12 (the attention kernels are not these GEMMs)
    plain, _ = _chip("llama-2-70b", "h200", False, "fp8")
    read, p = _chip("llama-2-70b", "h200", True, "fp8")
    assert plain.dense_inv == pytest.approx(1 / 4.32e12, rel=1e-12)
    assert read.dense_inv == pytest.approx(1 / (4.32e12 * 0.783), rel=1e-12)
    assert read.dense_inv == pytest.approx(2.9564e-13, rel=1e-4)
    assert read.kv_inv == plain.kv_inv == pytest.approx(1 / 4.32e12, rel=1e-12)
    assert p.knobs.read_dense == 0.783     # (a dense model reads no routed expert: read_expert unused)
    # a format no table measured (bf16 on H200) reads at the achievable bandwidth
    bf16, _ = _chip("llama-2-70b", "h200", True, "bf16")
    assert bf16.dense_inv == pytest.approx(1 / 4.32e12, rel=1e-12)


def test_routed_experts_at_their_grouped_gemms_share():
    # Mixtral-8x7B fp8 on one H100 SXM: 0.9 x 3.35e12 = 3.015e12 B/s achievable. Its attention and router
    # (dense) read at 0.814 of it: 1 / (3.015e12 x 0.814) = 4.0746e-13 s a byte; its experts at 0.891:
    # 1 / (3.015e12 x 0.891) = 3.7225e-13 s a byte
    read, p = _chip("mixtral-8x7b", "h100-sxm", True, "fp8")
    assert read.dense_inv == pytest.approx(1 / (3.015e12 * 0.814), rel=1e-12)
    assert read.expert_inv == pytest.approx(1 / (3.015e12 * 0.891), rel=1e-12)
    assert read.expert_inv == pytest.approx(3.7225e-13, rel=1e-4)
    assert (p.knobs.read_dense, p.knobs.read_expert) == (0.814, 0.891)


def test_a_weight_bound_decode_step_takes_the_shares_inverse():
    # Llama-2-70B fp8 on one H200 at batch 1: the step streams ~69e9 weight bytes, 16 ms at 4.32 TB/s, against
    # ~2 ms of KV (1,000 prompt tokens x 80 layers x 2 x 1,024 x 1 B = 0.16 GB: 38 us) and the engine's fixed
    # costs (80 x 26 us = 2.1 ms): the weights' share of the step is ~0.88, so the step grows by
    # 0.88 x (1 / 0.783 - 1) = 0.24, between 1.2 and 1 / 0.783 = 1.277 times
    kw = dict(batch=1, prompt_tokens=1000, output_tokens=64, weight_dtype="fp8")
    plain = mb.estimate("llama-2-70b", "h200", runtime=_served(False), **kw)
    read = mb.estimate("llama-2-70b", "h200", runtime=_served(True), **kw)
    assert 1.2 * plain.tpot_s < read.tpot_s < plain.tpot_s / 0.783


def test_a_runtime_without_the_switch_never_sees_the_shares():
    eff = efficiency(mb.load_runtime("tensorrt-llm"), load_hardware("h200"))
    assert eff.weight_read == () and eff.expert_read == ()
    assert prepare("llama-2-70b", "h200", weight_dtype="fp8").knobs.read_dense == 1.0


def test_a_share_names_a_weight_format():
    d = load_hardware("h200").model_dump()
    d["achievable"]["weight_read_by_format"] = {"fp9": 0.5}
    with pytest.raises(Exception, match="weight_read_by_format"):
        Hardware.model_validate(d)
