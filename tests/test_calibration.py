"""Calibration: the fit recovers parameters membound itself used to make synthetic data."""

import numpy as np
import pytest

import membound as mb
from membound.calibrate import fit_bounded, fit_group, in_calibration
from membound.reference import Scenario, _apple, predict
from membound.runtime import Runtime, RuntimeEntry


def test_bounded_least_squares_on_a_line_and_at_a_bound():
    # y = 2x + 1 sampled exactly: the fit returns (2, 1)
    x = np.arange(5.0)
    a, b = fit_bounded(lambda p: p[0] * x + p[1] - (2 * x + 1), [0.5, 0.0], [0, 0], [10, 10])
    assert a == pytest.approx(2, rel=1e-6) and b == pytest.approx(1, abs=1e-6)
    # the unconstrained optimum a = 2 lies above the bound 1.5: the fit stops at the bound
    a, b = fit_bounded(lambda p: p[0] * x + p[1] - (2 * x + 1), [0.5, 0.0], [0, 0], [1.5, 10])
    assert a == pytest.approx(1.5, abs=1e-6)


def _synthetic_rows(truth: Runtime):
    rows = []
    for i, (wd, metric, S, T) in enumerate([("fp16", "decode_tok_s_per_user", 0, 128),
                                             ("q8_0", "decode_tok_s_per_user", 0, 128),
                                             ("q4_0", "decode_tok_s_per_user", 0, 128),
                                             ("q4_0", "decode_tok_s_per_user", 4096, 32),
                                             ("q4_0", "prefill_tok_s", 512, 1),
                                             ("fp16", "prefill_tok_s", 512, 1)]):
        for model in ("llama-2-7b", "qwen2.5-7b"):
            sc = Scenario(id=f"syn-{model}-{i}", category="synthetic", metric=metric, measured=1.0,
                          model=model, hardware="rtx-4090", runtime="llama.cpp", weight_dtype=wd,
                          prompt_tokens=S, output_tokens=T)
            rows.append(Scenario(**{**sc.__dict__, "measured": predict(sc, runtime=truth)}))
    return rows


def test_fit_recovers_known_parameters():
    from membound.runtime import load_runtime
    params = dict(bandwidth_fraction=0.7, compute_fraction=0.4, per_layer_overhead_s=3e-5, overlap=0.6)
    truth = Runtime(name="llama.cpp", quantized_gemm=load_runtime("llama.cpp").quantized_gemm,
                    classes={"nvidia-consumer": RuntimeEntry(**params)})
    fit = fit_group("llama.cpp", "nvidia-consumer", _synthetic_rows(truth),
                    start=dict(bandwidth_fraction=0.9, compute_fraction=0.9, per_layer_overhead_s=1e-5))
    assert fit.params["overlap"] == pytest.approx(0.6, rel=1e-2)
    assert fit.params["bandwidth_fraction"] == pytest.approx(0.7, rel=1e-3)
    assert fit.params["compute_fraction"] == pytest.approx(0.4, rel=1e-3)
    assert fit.params["per_layer_overhead_s"] == pytest.approx(3e-5, rel=1e-2)
    assert fit.median_error < 1e-4


def test_synthetic_decode_row_is_the_roofline_by_hand():
    # llama-2-7b q4_0 on an RTX 4090 at 70% of 1008 GB/s, 32 layers x 30 us, context 0..127:
    # weights streamed = (6.738e9 params less the 32000 x 4096 input embedding, of which one row
    # is read) x 4.5/8 bytes; KV grows 2*32*4096*2 bytes per token
    truth = Runtime(name="t", classes={"default": RuntimeEntry(bandwidth_fraction=0.7, per_layer_overhead_s=3e-5)})
    sc = Scenario(id="x", category="c", metric="decode_tok_s_per_user", measured=1, model="llama-2-7b",
                  hardware="rtx-4090", runtime="t", weight_dtype="q4_0", output_tokens=128)
    m = mb.load_model("llama-2-7b")
    bw = 0.7 * 1008e9
    kv_tok = 2 * 32 * 4096 * 2
    streamed = m.total_params - 32000 * 4096 + 4096
    steps = [(streamed * 4.5 / 8 + kv_tok * L) / bw + 32 * 3e-5 for L in range(128)]
    assert predict(sc, runtime=truth) == pytest.approx(128 / sum(steps), rel=1e-6)


def test_split_is_deterministic_and_about_half():
    ids = [f"row-{i:03d}" for i in range(400)]
    picked = [in_calibration(i) for i in ids]
    assert picked == [in_calibration(i) for i in ids]
    assert 160 < sum(picked) < 240


def test_apple_binned_parts_scale_compute_by_cores():
    # 24-core M1 Max on the 32-core profile: 24/32 of its FLOP/s, same 400 GB/s
    assert _apple("Apple M1 Max (24-core GPU, 400 GB/s)") == ("apple-m1-max", 24 / 32)
    # 300 GB/s M3 Max is the binned 30-core part, which has its own profile
    assert _apple("Apple M3 Max (30-core GPU, 300 GB/s)") == ("apple-m3-max-30c", 1.0)
    assert _apple("Apple M4 Max (32-core GPU, 410 GB/s)") == ("apple-m4-max-32c", 1.0)
