"""The served TTFT's two prompt terms: the upcast MoE GEMMs' rate (Served.moe_upcast_efficiency) and
the host time per prompt token (Served.per_prompt_token_s)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.catalog.runtime import load_runtime
from membound.serving import Fixed, build, serve, solve


def _vllm(**served):
    rt = load_runtime("vllm")
    return rt.model_copy(update={"served": rt.served.model_copy(update=served)})


GPT_OSS = mb.Quantization("mxfp4", "fp8", dense_weights="bf16")     # MXFP4 experts, bf16 elsewhere (model card)
GPT_OSS_B200 = mb.Quantization("mxfp4", "fp8", dense_weights="bf16", expert_activations="fp8")


def _gamma(model, device, q, **served):
    sm, _, _ = build(model, device, prompt=Fixed(1024), output=Fixed(256), quantization=q,
                     runtime=_vllm(compute_fraction=0.5, **served))
    return sm.prefill_token_s


def test_upcast_experts_pay_the_efficiency_in_a_prefill_token():
    # gpt-oss-120b on one H200: MXFP4 experts upcast to bf16 activations (no fp4 on Hopper), the
    # weight-only path (dequant 1/9). Its routed GEMMs per token: 36 MoE layers x 4 experts x
    # 24,891,840 params (3 x 2880 x 2880 + 5760 + 2880 biases) = 3,584,424,960 params, 2 FLOPs each,
    # x (1 + 1/9) for the dequantisation, at bf16 989 TFLOP/s x 0.5 (served) x 0.8 (the H200's
    # achievable): 7,965,388,800 / 3.956e14 = 20.135 us per token at the dense rate. The chip's upcast
    # rate (quantization.upcast_rate): its matrix-to-ALU ratio 989 / 67 = 14.7612 over the A10's
    # 125 / 31.24 = 4.00128 is 3.68912, so (1 + 1/9) / (1 + 3.68912 / 9) = 1.111111 / 1.409902 = 0.788077.
    # At the runtime's efficiency e the experts run at e x 0.788077 of the dense rate: e = 0.5 costs
    # 20.135 / 0.788077 x (1 / 0.5 - 1) = 25.549 us more per prefill token than e = 1.
    routed = 36 * 4 * 24_891_840
    dense_rate_s = 2 * routed * (1 + 1 / 9) / (989e12 * 0.5 * 0.8)
    assert dense_rate_s == pytest.approx(20.135e-6, rel=1e-4)
    chip = (1 + 1 / 9) / (1 + (989 / 67) / (125 / 31.24) / 9)
    assert chip == pytest.approx(0.788077, rel=1e-5)
    slow = _gamma("gpt-oss-120b", "h200", GPT_OSS, moe_upcast_efficiency=0.5)
    plain = _gamma("gpt-oss-120b", "h200", GPT_OSS, moe_upcast_efficiency=1.0)
    assert slow - plain == pytest.approx(25.549e-6, rel=1e-4)
    assert slow - plain == pytest.approx(dense_rate_s / chip * (1 / 0.5 - 1), rel=1e-9)


def test_the_chip_upcast_rate_prices_a_prefill_token_where_the_runtime_fits_none():
    # the same H200 prefill token at efficiency 1 (none fitted): its routed GEMMs cost 20.135 us at the
    # dense rate and 20.135 / 0.788077 = 25.549 us upcast, 5.414 us more than the fixed share alone
    # gave; against a runtime whose kernels do not fuse the upcast (llama.cpp's, `fused` False)
    routed = 36 * 4 * 24_891_840
    dense_rate_s = 2 * routed * (1 + 1 / 9) / (989e12 * 0.5 * 0.8)
    chip = (1 + 1 / 9) / (1 + (989 / 67) / (125 / 31.24) / 9)
    assert dense_rate_s / chip - dense_rate_s == pytest.approx(5.414e-6, rel=1e-3)
    from membound.physics.estimate import upcast
    from membound.physics.efficiency import efficiency
    from membound.catalog.hardware import load_hardware
    hw = load_hardware("h200")
    res = GPT_OSS.resolve(hw, "gpt-oss-120b")
    eff = efficiency(_vllm(compute_fraction=0.5), hw)
    assert upcast(eff, res, hw).moe_gemm_efficiency == pytest.approx(chip, rel=1e-9)
    assert upcast(eff, res, hw, fused=False).moe_gemm_efficiency == eff.moe_gemm_efficiency == 1.0


def test_experts_not_upcast_to_16_bits_keep_the_dense_rate():
    # B200 takes MXFP4 weights with MXFP8 activations natively (TensorRT-LLM's GPT-OSS MoE support
    # matrix: Blackwell mxfp8 x mxfp4); Llama's fp8 GEMMs are no MoE and no weight-only path
    for model, device, q in (("gpt-oss-120b", "b200", GPT_OSS_B200),
                             ("llama-3.3-70b", "h200", mb.Quantization("fp8", "fp8"))):
        assert _gamma(model, device, q, moe_upcast_efficiency=0.5) == _gamma(model, device, q, moe_upcast_efficiency=1.0)


def _one_client_ttft(per_token: float, prompt: int) -> float:
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=Fixed(prompt), output=Fixed(64),
                         runtime=_vllm(per_prompt_token_s=per_token, per_request_s=0.02))
    return float(solve(sm, sched, prompt, 64, concurrency=np.array([1.0])).ttft[0])


def test_host_time_per_prompt_token_adds_to_the_ttft():
    # one client: nothing else runs, so the TTFT is the host time, then the prompt's own step.
    # 10 us per token on a 2,000-token prompt: 20 ms more
    assert _one_client_ttft(1e-5, 2000) - _one_client_ttft(0.0, 2000) == pytest.approx(0.020, rel=1e-9)


@settings(max_examples=8, deadline=None)
@given(st.floats(0.0, 1e-4), st.integers(16, 4096))
def test_the_host_term_is_linear_in_the_prompt(per_token, prompt):
    assert _one_client_ttft(per_token, prompt) - _one_client_ttft(0.0, prompt) == pytest.approx(
        per_token * prompt, rel=1e-9, abs=1e-12)


def test_the_simulated_request_waits_its_prompts_host_time():
    # the simulator sends a request to the engine host(S) after it leaves the client: one client,
    # 1,000-token prompts, 20 us a token -> every request's TTFT 20 ms longer, and that time is no
    # queueing
    runs = [serve("llama-3.1-8b", "h100-sxm", prompt_tokens=1000, output_tokens=32, concurrency=1, n_requests=4,
                  engine="simulate", runtime=_vllm(per_prompt_token_s=k)) for k in (0.0, 2e-5)]
    assert runs[1].ttft.mean - runs[0].ttft.mean == pytest.approx(0.020, rel=1e-6)
    assert runs[1].queueing_s == pytest.approx(runs[0].queueing_s, abs=1e-9)
