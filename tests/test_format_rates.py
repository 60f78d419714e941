"""A served engine whose GEMMs run each tensor format at its own measured share of that format's peak
(Served.format_rates over the profile's achievable.compute_by_format), where every other runtime
computes at the profile's one compute_fraction (its 16-bit MAMF) whatever the format. Numbers derived
by hand from the profiles' cited shares."""
import pytest

import membound as mb
from membound.catalog.hardware import load_hardware
from membound.physics.efficiency import efficiency, format_rates
from membound.physics.estimate import prepare


def _served(rates: bool) -> mb.Runtime:
    trt = mb.load_runtime("tensorrt-llm")
    return trt.model_copy(update={"name": f"trt-rates-{rates}",
                                  "served": trt.served.model_copy(update={"format_rates": rates})})


def test_each_format_runs_at_its_own_share_over_the_16_bit_one():
    # B200: bf16 MAMF 77.6% is the profile's compute_fraction; fp8 MAMF 76.3%, cuBLAS MXF4 58.2%:
    #   fp4 0.582 / 0.776 = 0.75, fp8 0.763 / 0.776 = 0.983247...
    b200 = dict(format_rates(load_hardware("b200")))
    assert sorted(b200) == ["fp4", "fp8"]
    assert b200["fp4"] == pytest.approx(0.75, rel=1e-12) and b200["fp8"] == pytest.approx(0.983247, rel=1e-6)
    # H200: fp8 73.4% of 1,979 TFLOP/s over its 0.8: 0.9175
    h200 = dict(format_rates(load_hardware("h200")))
    assert list(h200) == ["fp8"] and h200["fp8"] == pytest.approx(0.9175, rel=1e-12)
    # a profile that measured no format apart: none
    assert format_rates(load_hardware("a100-80gb")) == ()


def test_the_gemm_peak_a_step_computes_at():
    # tensor-llm's served compute_fraction 0.5293 x B200's 0.776 applies to every format; with format_rates the
    # fp4 GEMMs' peak is 9e15 x 0.75 = 6.75e15 FLOP/s (x the same fraction), fp8's 4.5e15 x 0.763 / 0.776
    for fmt, peak, rate in (("fp4", 9e15, 0.75), ("fp8", 4.5e15, 0.763 / 0.776)):
        plain = prepare("llama-3.1-8b", "b200", runtime=_served(False), weight_dtype=fmt)
        rated = prepare("llama-3.1-8b", "b200", runtime=_served(True), weight_dtype=fmt)
        assert plain.knobs.peak_flops == pytest.approx(peak, rel=1e-12)
        assert rated.knobs.peak_flops == pytest.approx(peak * rate, rel=1e-12)
        assert rated.eff.compute_fraction == plain.eff.compute_fraction == pytest.approx(0.5293 * 0.776)
    # bf16 (not measured apart) keeps the tensor peak: 2.25e15
    assert prepare("llama-3.1-8b", "b200", runtime=_served(True), weight_dtype="bf16").knobs.peak_flops \
        == pytest.approx(2.25e15, rel=1e-12)
    # a runtime without the switch never sees the shares (the InferenceMAX engines)
    assert efficiency(mb.load_runtime("tensorrt-llm"), load_hardware("b200")).format_rates == ()


def test_a_compute_bound_prefill_takes_the_rate_s_inverse():
    # a 4,096-token prefill of Llama-3.1-8B in fp4 on one B200 is compute-bound. Its GEMMs (2 x ~6.98e9
    # parameters x 4,096 tokens = 5.7e13 FLOPs at the fp4 peak 9e15: 6.35 ms at full rate) take 1 / 0.75 as long;
    # its attention (32 layers x 4,096^2 / 2 causal pairs x 4 x 4,096 FLOPs = 4.4e12 at the 16-bit peak 2.25e15:
    # 1.96 ms) as long as before: GEMMs 6.35 / 8.31 = 0.764 of the compute, so the prefill takes
    # 0.764 / 0.75 + 0.236 = 1.255x as long, a little less with the step's fixed costs beside it
    kw = dict(batch=1, prompt_tokens=4096, output_tokens=1, weight_dtype="fp4")
    plain = mb.estimate("llama-3.1-8b", "b200", runtime=_served(False), **kw)
    rated = mb.estimate("llama-3.1-8b", "b200", runtime=_served(True), **kw)
    assert 1.2 * plain.prefill_s < rated.prefill_s < 1.256 * plain.prefill_s


def test_a_format_share_names_a_format_the_profile_has_a_peak_for():
    hw = load_hardware("h200").model_dump()
    hw["achievable"]["compute_by_format"] = {"fp4": 0.5}      # an H200 has no fp4 peak
    with pytest.raises(ValueError, match="compute_by_format"):
        mb.Hardware.model_validate(hw)


def _fp8_rated(rate: float, rates: bool = False) -> mb.Runtime:
    trt = mb.load_runtime("tensorrt-llm")
    return trt.model_copy(update={"name": f"trt-fp8-{rate}-{rates}",
                                  "served": trt.served.model_copy(update={"fp8_rate": rate, "format_rates": rates})})


def test_an_fp8_rate_scales_the_fp8_gemms_only():
    # Served.fp8_rate (an MLPerf generation's fitted factor, mlperf_rows.fitted_param): H200's fp8 GEMMs at 1.5 x
    # the rate compute_fraction gives every format: the fp8 tensor peak 1.979e15 x 1.5 = 2.9685e15 FLOP/s, at the
    # same compute_fraction 0.5293 x 0.8 = 0.42344 (0.42344 x 2.9685e15 = 1.2570e15 FLOP/s, 63.5% of the peak)
    h200 = load_hardware("h200")
    assert efficiency(_fp8_rated(1.5), h200).format_rates == (("fp8", 1.5),)
    rated = prepare("llama-3.1-8b", "h200", runtime=_fp8_rated(1.5), weight_dtype="fp8")
    assert rated.knobs.peak_flops == pytest.approx(1.979e15 * 1.5, rel=1e-12)
    assert rated.eff.compute_fraction == pytest.approx(0.5293 * 0.8, rel=1e-12)
    # bf16 GEMMs keep the bf16 tensor peak (the profile's 989 TFLOP/s dense)
    assert prepare("llama-3.1-8b", "h200", runtime=_fp8_rated(1.5), weight_dtype="bf16").knobs.peak_flops \
        == pytest.approx(989e12, rel=1e-12)
    # beside format_rates, it stands over the profile's fp8 share (H200's 0.9175) and leaves the others (B200 fp4 0.75)
    assert efficiency(_fp8_rated(1.5, rates=True), h200).format_rates == (("fp8", 1.5),)
    assert dict(efficiency(_fp8_rated(1.2, rates=True), load_hardware("b200")).format_rates) \
        == pytest.approx({"fp4": 0.75, "fp8": 1.2}, rel=1e-12)
    # 0 (the default): nothing
    assert efficiency(_fp8_rated(0.0), h200).format_rates == ()


def test_an_fp8_rate_divides_a_compute_bound_prefill():
    # a 4,096-token prefill of Llama-3.1-8B in fp8 on one H200 is compute-bound: its GEMMs take 1 / 1.5 of the time
    # at fp8_rate 1.5 (the prompt token's GEMM seconds, StepModel.prefill_token_s, exactly)
    from membound.serving.api import build
    from membound.serving.lengths import Fixed
    kw = dict(prompt=Fixed(1000), output=Fixed(100), weight_dtype="fp8")
    plain = build("llama-3.1-8b", "h200", runtime=_fp8_rated(0.0), **kw)[0]
    rated = build("llama-3.1-8b", "h200", runtime=_fp8_rated(1.5), **kw)[0]
    assert plain.prefill_token_s / rated.prefill_token_s == pytest.approx(1.5, rel=1e-12)
