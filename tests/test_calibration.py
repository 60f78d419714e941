"""Calibration: the fit recovers parameters membound itself used to make synthetic data."""

import pytest

import membound as mb
from membound.fidelity.calibrate import beats_physics, fit_group, main, write_runtimes
from membound.fidelity.reference import Scenario, _apple, predict
from membound.catalog.runtime import Runtime, RuntimeEntry
from membound.physics.efficiency import efficiency


def _truth(params: dict) -> Runtime:
    """llama.cpp's CUDA backend (its MMQ path, int8 activations and mat-vec passes of up to 8 tokens, whose
    overlap is their own) with these figures on the RTX 4090's class."""
    from membound.catalog.runtime import load_runtime
    cuda = load_runtime("llama.cpp-cuda")
    return Runtime(name="llama.cpp-cuda", quantized_gemm=cuda.quantized_gemm,
                   quantized_activations=cuda.quantized_activations, matvec_max_tokens=cuda.matvec_max_tokens,
                   matvec_overlap=cuda.matvec_overlap,
                   classes={"nvidia-consumer": RuntimeEntry(**params)})


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
                          model=model, hardware="rtx-4090", runtime="llama.cpp-cuda", weight_dtype=wd,
                          prompt_tokens=S, output_tokens=T)
            rows.append(Scenario(**{**sc.__dict__, "measured": predict(sc, runtime=truth)}))
    return rows


def test_fit_recovers_known_parameters():
    params = dict(bandwidth_fraction=0.7, compute_fraction=0.4, per_layer_overhead_s=3e-5, overlap=0.6)
    truth = _truth(params)
    fit = fit_group("llama.cpp-cuda", "nvidia-consumer", _synthetic_rows(truth),
                    start=dict(bandwidth_fraction=0.9, compute_fraction=0.9, per_layer_overhead_s=1e-5))
    assert fit.params["overlap"] == pytest.approx(0.6, rel=1e-2)
    assert fit.params["bandwidth_fraction"] == pytest.approx(0.7, rel=1e-3)
    assert fit.params["compute_fraction"] == pytest.approx(0.4, rel=1e-3)
    assert fit.params["per_layer_overhead_s"] == pytest.approx(3e-5, rel=1e-2)
    assert fit.median_error < 1e-4


def test_synthetic_decode_row_is_the_roofline_by_hand():
    # llama-2-7b q4_0 on an RTX 4090 at 70% of 1008 GB/s, 32 layers x 30 us, context 0..127:
    # weights streamed = (6.738e9 params less the 32000 x 4096 input embedding, of which one row
    # is read) x 4.5/8 bytes, the 32000 x 4096 LM head at q6_K's 6.5625 bits instead (llama.cpp's
    # quantizer gives a q4_0 file's output tensor q6_K); KV grows 2*32*4096*2 bytes per token
    truth = Runtime(name="t", classes={"default": RuntimeEntry(bandwidth_fraction=0.7, per_layer_overhead_s=3e-5)})
    sc = Scenario(id="x", category="c", metric="decode_tok_s_per_user", measured=1, model="llama-2-7b",
                  hardware="rtx-4090", runtime="t", weight_dtype="q4_0", output_tokens=128)
    m = mb.load_model("llama-2-7b")
    bw = 0.7 * 1008e9
    kv_tok = 2 * 32 * 4096 * 2
    streamed = m.total_params - 32000 * 4096 + 4096
    steps = [(streamed * 4.5 / 8 + 32000 * 4096 * (6.5625 - 4.5) / 8 + kv_tok * L) / bw + 32 * 3e-5
             for L in range(128)]
    assert predict(sc, runtime=truth) == pytest.approx(128 / sum(steps), rel=1e-6)


def test_a_row_faster_than_the_pure_roofline_is_set_aside_by_hand():
    # llama-2-7b q4_0 decode of one token after 0 context on an RTX 4090 at its peak 1008 GB/s:
    # (6.738e9 - 32000 x 4096 + 4096) x 4.5/8 bytes = 3.716e9 B -> at best 271.3 tok/s
    m = mb.load_model("llama-2-7b")
    best = 1008e9 / ((m.total_params - 32000 * 4096 + 4096) * 4.5 / 8)
    assert best == pytest.approx(271.3, abs=0.1)
    sc = Scenario(id="x", category="c", metric="decode_tok_s_per_user", measured=1.0, model="llama-2-7b",
                  hardware="rtx-4090", runtime="llama.cpp-cuda", weight_dtype="q4_0", output_tokens=1)
    assert beats_physics(Scenario(**{**sc.__dict__, "measured": 0.99 * best})) is None
    assert "faster than the pure roofline" in beats_physics(Scenario(**{**sc.__dict__, "measured": 1.01 * best}))
    # a latency is faster when it is smaller: 1000 / 271.3 = 3.686 ms is the least an ITL can be
    itl = Scenario(**{**sc.__dict__, "metric": "itl_ms", "measured": 0.99 * 1e3 / best})
    assert beats_physics(itl) is not None


def test_calibration_writes_only_the_keys_it_fits(tmp_path):
    # another helper's key in an entry, and another helper's entry, survive a calibration
    import yaml
    from membound.fidelity.calibrate import GroupFit
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "nemo.yaml").write_text(yaml.safe_dump({
        "name": "nemo", "max_batch": 64, "served": {"chunk_tokens": 512},
        "classes": {"default": {"bandwidth_fraction": 0.5, "per_sequence_overhead_s": 1e-5},
                    "nvidia-consumer": {"per_step_overhead_s": 0.001}}}))
    fits = {"nemo": [GroupFit("nemo", "default", {"bandwidth_fraction": 0.75, "compute_fraction": 0.25},
                              ["hw-001", "hw-002"], 0.05)]}
    [path] = write_runtimes(fits, tmp_path / "out", source=tmp_path / "src")
    data = yaml.safe_load(path.read_text())
    assert data["max_batch"] == 64 and data["served"] == {"chunk_tokens": 512}
    assert data["classes"]["nvidia-consumer"] == {"per_step_overhead_s": 0.001}
    d = data["classes"]["default"]
    assert (d["bandwidth_fraction"], d["compute_fraction"], d["per_sequence_overhead_s"]) == (0.75, 0.25, 1e-5)
    assert "hw-001, hw-002" in d["evidence"]
    assert not (tmp_path / "src" / "nemo.yaml").read_text().count("0.75")   # the source is untouched


def test_a_backend_assumed_from_cuda_keeps_its_own_graph_rule(tmp_path):
    # ASSUMED_FROM copies llama.cpp-cuda's default figures (ungraphed_layer_s among them) into the HIP
    # file's entry, never CUDA's graph rule (below compute capability 8.0): HIP keeps its own (none at all)
    import yaml
    from membound.fidelity.calibrate import ASSUMED_FROM, GroupFit
    assert ASSUMED_FROM["llama.cpp-hip"][0] == "llama.cpp-cuda"
    (tmp_path / "src").mkdir()
    cuda_rule = {"below_compute_capability": 8.0, "evidence": "ggml-cuda"}
    hip_rule = {"all_devices": True, "evidence": "GGML_HIP_GRAPHS off"}
    for rt, rule in (("llama.cpp-cuda", cuda_rule), ("llama.cpp-hip", hip_rule)):
        (tmp_path / "src" / f"{rt}.yaml").write_text(yaml.safe_dump({"name": rt, "no_graph_replay": rule}))
    fits = {"llama.cpp-cuda": [GroupFit("llama.cpp-cuda", "default", {"bandwidth_fraction": 0.9,
                                                                       "ungraphed_layer_s": 25e-6}, ["lcpp-001"], 0.05)]}
    paths = write_runtimes(fits, tmp_path / "out", source=tmp_path / "src")
    out = {p.stem: yaml.safe_load(p.read_text()) for p in paths}
    assert out["llama.cpp-hip"]["no_graph_replay"] == hip_rule
    assert out["llama.cpp-cuda"]["no_graph_replay"] == cuda_rule
    assert out["llama.cpp-hip"]["classes"]["default"]["ungraphed_layer_s"] == 25e-6


def test_calibrate_help_and_default_write_nothing(capsys, monkeypatch):
    import membound.fidelity.calibrate as cal
    called = []
    monkeypatch.setattr(cal, "write_runtimes", lambda *a, **k: called.append(a) or [])
    monkeypatch.setattr(cal, "write_specialised", lambda *a, **k: called.append(a) or [])
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--write-bundled" in capsys.readouterr().out
    monkeypatch.setattr(cal, "calibrate", lambda path=None: ({}, {}))
    assert main([]) == 0
    assert "nothing written" in capsys.readouterr().out and not called


def test_apple_binned_parts_scale_compute_by_cores():
    # 24-core M1 Max on the 32-core profile: 24/32 of its FLOP/s, same 400 GB/s
    assert _apple("Apple M1 Max (24-core GPU, 400 GB/s)") == ("apple-m1-max", 24 / 32)
    # 300 GB/s M3 Max is the binned 30-core part, which has its own profile
    assert _apple("Apple M3 Max (30-core GPU, 300 GB/s)") == ("apple-m3-max-30c", 1.0)
    assert _apple("Apple M4 Max (32-core GPU, 410 GB/s)") == ("apple-m4-max-32c", 1.0)


def test_a_class_with_few_rows_fits_its_fractions_and_holds_the_rest():
    # 12 synthetic rows made with overlap 0.6 and 30 us per layer: holding those two at their true
    # values, the fit recovers the two fractions; the held figures are in the entry, not fitted,
    # and a held figure on a bound is not reported as the fit's
    params = dict(bandwidth_fraction=0.7, compute_fraction=0.4, per_layer_overhead_s=3e-5, overlap=0.6)
    truth = _truth(params)
    fit = fit_group("llama.cpp-cuda", "nvidia-consumer", _synthetic_rows(truth),
                    start=dict(bandwidth_fraction=0.9, compute_fraction=0.9),
                    fixed=dict(per_layer_overhead_s=3e-5, overlap=0.6))
    assert fit.copied == ("per_layer_overhead_s", "overlap")
    assert fit.params["bandwidth_fraction"] == pytest.approx(0.7, rel=1e-3)
    assert fit.params["compute_fraction"] == pytest.approx(0.4, rel=1e-3)
    assert (fit.params["per_layer_overhead_s"], fit.params["overlap"]) == (3e-5, 0.6)
    fit = fit_group("llama.cpp-cuda", "nvidia-consumer", _synthetic_rows(truth),
                    fixed=dict(per_layer_overhead_s=0.0, overlap=0.6))
    assert not any("per_layer" in b for b in fit.at_bounds)


def test_an_entry_no_longer_fitted_loses_its_fitted_figures(tmp_path):
    # llama.cpp-vulkan had an 'intel-gpu' entry from an earlier calibration, with one figure of
    # another helper's beside it; a calibration that no longer fits that class removes the fitted
    # figures and keeps the other; an entry of fitted figures only is dropped
    import yaml
    from membound.fidelity.calibrate import GroupFit
    (tmp_path / "src").mkdir()
    old = "fitted by membound.calibrate on 2026-01-01 from 4 rows"
    (tmp_path / "src" / "llama.cpp-vulkan.yaml").write_text(yaml.safe_dump({
        "name": "llama.cpp-vulkan",
        "classes": {"intel-gpu": {"bandwidth_fraction": 0.4, "per_step_overhead_s": 0.001, "evidence": old},
                    "amd-consumer": {"bandwidth_fraction": 0.8, "evidence": old},
                    "apple": {"bandwidth_fraction": 0.9, "evidence": "a measurement, not a fit"}}}))
    fits = {"llama.cpp-vulkan": [GroupFit("llama.cpp-vulkan", "default", {"bandwidth_fraction": 0.6},
                                          ["lcpp-025"], 0.05)]}
    [path] = write_runtimes(fits, tmp_path / "out", source=tmp_path / "src")
    classes = yaml.safe_load(path.read_text())["classes"]
    assert classes["intel-gpu"] == {"per_step_overhead_s": 0.001}
    assert "amd-consumer" not in classes
    assert classes["apple"] == {"bandwidth_fraction": 0.9, "evidence": "a measurement, not a fit"}
    assert classes["default"]["bandwidth_fraction"] == 0.6


def test_llama_cpp_cuda_overlap_is_set_from_the_kernel_not_fitted():
    # MMQ loads a tile, synchronises, multiplies, synchronises: no overlap of loads and math. Rows
    # made with overlap 0.6 do not move it: the entry holds 0 and says why
    from membound.fidelity.calibrate import FIXED, _evidence, calibrate_runtimes
    from membound.catalog.runtime import load_runtime
    truth = _truth(dict(bandwidth_fraction=0.7, compute_fraction=0.4, per_layer_overhead_s=3e-5, overlap=0.6))
    [g] = calibrate_runtimes(_synthetic_rows(truth), runtimes=["llama.cpp-cuda"], iters=5)["llama.cpp-cuda"]
    assert g.params["overlap"] == 0.0 and "overlap" in g.copied
    assert "overlap" not in " ".join(g.at_bounds)
    assert "overlap=0 set, not fitted" in _evidence(g, "2026-12-01") and "mmq.cuh" in FIXED["llama.cpp-cuda"]["overlap"][1]
    assert all(e.overlap == 0.0 for e in load_runtime("llama.cpp-cuda").classes.values())


def test_the_cuda_power_limit_is_one_figure_of_the_runtime():
    # set from public SGEMM measurements (FIXED), held at that value in every device-class entry (a
    # class's rows cannot pin a law across chips) and not copied to the HIP backend (the watts per
    # TFLOP/s of NVIDIA boards); rows made with another limit do not move it
    from membound.fidelity.calibrate import FIXED, RUNTIME_WIDE, _evidence, calibrate_runtimes
    from membound.catalog.runtime import load_runtime
    assert RUNTIME_WIDE == ("power_limit_w_per_tflop",)
    value, why = FIXED["llama.cpp-cuda"]["power_limit_w_per_tflop"]
    assert "torch-performance-test-data" in why
    cuda = load_runtime("llama.cpp-cuda").classes
    assert all(e.power_limit_w_per_tflop == value for e in cuda.values())
    assert all(e.power_limit_w_per_tflop is None for e in load_runtime("llama.cpp-hip").classes.values())
    truth = _truth(dict(bandwidth_fraction=0.7, compute_fraction=0.4, power_limit_w_per_tflop=9.0))
    [g] = calibrate_runtimes(_synthetic_rows(truth), runtimes=["llama.cpp-cuda"], iters=3)["llama.cpp-cuda"]
    assert g.params["power_limit_w_per_tflop"] == value and "power_limit_w_per_tflop" in g.copied
    assert f"power_limit_w_per_tflop={value:g} set, not fitted" in _evidence(g, "2026-12-01")


def test_the_cuda_power_limit_is_derived_from_the_cited_sgemm_rates():
    # torch.mm fp32 medians: RTX 3090 24.79 of 35.58 TFLOP/s = 0.696740 (power to spare). A board's
    # share over that is (w / limit)^(1/3), so limit = w / ratio^3:
    #   RTX 4090  54.69 / 82.6 = 0.662107; / 0.696740 = 0.950292; ^3 = 0.858167; 450 / 82.6 = 5.447942 -> 6.3483
    #   RTX 5090  (69.16 + 67.57) / 2 = 68.365; / 104.8 = 0.652338; 0.936272; 0.820740; 575 / 104.8 = 5.486641 -> 6.6850
    #   RTX PRO 6000  (77.24 + 74.03) / 2 = 75.635; / 125 = 0.605080; 0.868445; 0.654978; 600 / 125 = 4.8 -> 7.3285
    # the median: 6.6850, the figure FIXED holds
    from membound.fidelity.calibrate import FIXED, power_limit_from_sgemm
    assert power_limit_from_sgemm() == pytest.approx(6.6850, abs=5e-4)
    assert FIXED["llama.cpp-cuda"]["power_limit_w_per_tflop"][0] == pytest.approx(power_limit_from_sgemm(), abs=5e-4)
    # a board whose share equals the spare board's sits exactly at the limit: its own watts per TFLOP/s
    # (RTX 5090: 575 / 104.8 = 5.486641 at 0.696740 x 104.8 = 73.018 TFLOP/s)
    same = {"rtx-3090": (24.79,), "rtx-5090": (0.696740 * 104.8,)}
    assert power_limit_from_sgemm(same) == pytest.approx(575 / 104.8, rel=1e-5)


def test_llama_cpp_vulkan_overlap_is_set_from_the_shader_not_fitted():
    # ggml-vulkan's mul_mm loads a tile to shared memory, barrier()s, multiplies, barrier()s: no overlap;
    # every bundled entry holds 0 and its evidence says why
    from membound.fidelity.calibrate import FIXED
    from membound.catalog.runtime import load_runtime
    value, why = FIXED["llama.cpp-vulkan"]["overlap"]
    assert value == 0.0 and "mul_mm.comp" in why
    classes = load_runtime("llama.cpp-vulkan").classes
    assert classes and all(e.overlap == 0.0 and "overlap=0 set, not fitted" in e.evidence for e in classes.values())


def test_llama_cpp_vulkan_dispatch_cost_is_fitted_in_gpu_cycles():
    # Vulkan's per-layer dispatch and barrier cost is a floor of GPU cycles, timed at each chip's clock
    from membound.fidelity.calibrate import FIT
    from membound.catalog.runtime import load_runtime
    assert "per_layer_overhead_cycles" in FIT["llama.cpp-vulkan"] and "per_layer_overhead_s" not in FIT["llama.cpp-vulkan"]
    rt = load_runtime("llama.cpp-vulkan")
    cyc = rt.classes["default"].per_layer_overhead_cycles      # one entry for every chip (calibrate.CLASS_ENTRIES)
    assert cyc > 0 and rt.classes["default"].per_layer_overhead_s == 0.0
    # RTX 5090 at 2.407 GHz, RTX 4090 at 2.52 GHz: cycles / clock seconds per layer
    for name, clock in (("rtx-5090", 2.407e9), ("rtx-4090", 2.52e9)):
        assert efficiency(rt, mb.load_hardware(name)).per_layer_overhead_s == pytest.approx(cyc / clock, rel=1e-12)
    # the evidence (lcpp-026/028, Llama-2-7B q4_0 tg128): time per token less its bytes at peak bandwidth.
    # Bytes: (6,738,415,616 - 32000 x 4096 + 4096) weights x 4.5 / 8 = 3,716,637,184, plus the KV at the
    # mean context 63.5 x 32 layers x 2 x 4096 x 2 B = 33,292,288 -> 3,749,929,472 B.
    # RTX 4090: 1/187.97 - 3.749929472e9/1.008e12 = 5.31999e-3 - 3.72017e-3 = 1.59982e-3 s;
    # RTX 5090: 1/263.63 - 3.749929472e9/1.792e12 = 3.79319e-3 - 2.09259e-3 = 1.70060e-3 s;
    # their ratio 1.0630 is the clocks' 2.52 / 2.407 = 1.0469 within 2%, not 1 (a cost in seconds)
    w = (6738415616 - 32000 * 4096 + 4096) * 4.5 / 8 + 63.5 * 32 * 2 * 4096 * 2
    r4090, r5090 = 1 / 187.97 - w / 1.008e12, 1 / 263.63 - w / 1.792e12
    assert r5090 / r4090 == pytest.approx(1.0630, abs=1e-3)
    assert abs(r5090 / r4090 / (2.52 / 2.407) - 1) < 0.02 < abs(r5090 / r4090 - 1)


def test_a_class_without_moe_prefill_rows_takes_the_defaults_moe_gemm_rate():
    # synthetic llama.cpp CUDA rows made with one entry for every chip: expert GEMMs at 0.3 of the
    # dense rate. DGX Spark (class 'edge') has gpt-oss-20b prefill rows; the RTX 4090 (class
    # 'nvidia-consumer') only dense rows, which cannot pin the MoE rate. The default group (all
    # rows) recovers 0.3, and the 4090's class entry holds that figure, copied, not fitted: left
    # unset it would read 1.0, and a gpt-oss prefill there would run its expert GEMMs
    # 1 / 0.3 = 3.3x faster than the rows say
    from membound.fidelity.calibrate import calibrate_runtimes, runtime_from_fits
    from membound.catalog.runtime import load_runtime
    cuda = load_runtime("llama.cpp-cuda")
    entry = RuntimeEntry(bandwidth_fraction=0.8, compute_fraction=0.7, per_layer_overhead_s=3e-5, overlap=0.0,
                         moe_gemm_efficiency=0.3, per_moe_layer_overhead_s=2e-5, ungraphed_layer_s=25e-6,
                         power_limit_w_per_tflop=6.685)
    truth = Runtime(name="llama.cpp-cuda", quantized_gemm=cuda.quantized_gemm,
                    quantized_activations=cuda.quantized_activations, classes={"default": entry})
    shapes = [("dgx-spark", "gpt-oss-20b", "mxfp4", m, S, T) for m, S, T in
              [("prefill_tok_s", 512, 1), ("prefill_tok_s", 2048, 1), ("decode_tok_s_per_user", 0, 32),
               ("decode_tok_s_per_user", 4096, 32)]] + \
             [(hw, "llama-2-7b", "q4_0", m, S, T) for hw in ("dgx-spark", "rtx-4090") for m, S, T in
              [("prefill_tok_s", 512, 1), ("prefill_tok_s", 2048, 1), ("decode_tok_s_per_user", 0, 128),
               ("decode_tok_s_per_user", 4096, 32)]]
    rows = []
    for i, (hw, model, wd, metric, S, T) in enumerate(shapes):
        sc = Scenario(id=f"moe-{i}", category="synthetic", metric=metric, measured=1.0, model=model, hardware=hw,
                      runtime="llama.cpp-cuda", weight_dtype=wd, prompt_tokens=S, output_tokens=T)
        rows.append(Scenario(**{**sc.__dict__, "measured": predict(sc, runtime=truth)}))
    fits = {g.key: g for g in calibrate_runtimes(rows, runtimes=["llama.cpp-cuda"], classes=True)["llama.cpp-cuda"]}
    assert fits["default"].params["moe_gemm_efficiency"] == pytest.approx(0.3, rel=1e-3)
    consumer = fits["nvidia-consumer"]
    assert "moe_gemm_efficiency" in consumer.copied
    assert consumer.params["moe_gemm_efficiency"] == fits["default"].params["moe_gemm_efficiency"]
    fitted = runtime_from_fits("llama.cpp-cuda", fits.values())
    assert efficiency(fitted, mb.load_hardware("rtx-4090")).moe_gemm_efficiency == pytest.approx(0.3, rel=1e-3)


def test_a_batched_moe_row_is_beyond_physics_only_past_the_fewest_experts_its_batch_can_read():
    # gpt-oss-20b: 32 experts, 4 per token. Sixteen sequences that route independently touch
    # 32 x (1 - (1 - 4/32)^16) = 28.2 experts a layer on average (estimate()'s assumption); sixteen
    # that route alike read the 4 one token reads. Physics bounds the row by the latter: the
    # weights of one token's step, streamed once for all sixteen.
    from membound.fidelity.calibrate import fewest_experts
    assert 32 * (1 - (1 - 4 / 32) ** 16) == pytest.approx(28.2, abs=0.05)
    sc = Scenario(id="x", category="c", metric="decode_tok_s_total", measured=1.0, model="gpt-oss-20b",
                  hardware="dgx-spark", runtime="llama.cpp-cuda", weight_dtype="mxfp4", batch=16, output_tokens=1)
    assert fewest_experts(sc).n_experts == 4 and fewest_experts(Scenario(**{**sc.__dict__, "batch": 1})) is None
    uniform = predict(sc, runtime="ideal")
    alike = predict(sc, runtime="ideal", model=fewest_experts(sc))
    one = predict(Scenario(**{**sc.__dict__, "batch": 1}), runtime="ideal")
    # one token's weights per step for all sixteen: 16 x the batch-1 rate, less the fifteen other
    # sequences' KV reads and activations (a token of context each: under 0.1% here)
    assert alike == pytest.approx(16 * one, rel=2e-3) and alike > 2 * uniform
    between = Scenario(**{**sc.__dict__, "measured": 1.3 * uniform})      # DGX Spark's gpt-oss rows sit here
    assert beats_physics(between) is None
    assert "faster than the pure roofline" in beats_physics(Scenario(**{**sc.__dict__, "measured": 1.01 * alike}))


def test_a_cold_fit_starts_at_its_priors_not_at_a_chips_profile():
    # the middle of each share's BOUNDS: bandwidth (0.05 + 1.0) / 2 = 0.525, compute (0.01 + 1.0) / 2 = 0.505,
    # overlap (0 + 1) / 2 = 0.5, MoE GEMM rate (0.05 + 1.0) / 2 = 0.525; a cost at its typical magnitude
    from membound.fidelity.calibrate import prior_start
    assert [prior_start(p) for p in ("bandwidth_fraction", "compute_fraction", "overlap", "moe_gemm_efficiency")] == \
        pytest.approx([0.525, 0.505, 0.5, 0.525])
    assert (prior_start("per_layer_overhead_s"), prior_start("per_sequence_overhead_s"),
            prior_start("per_layer_overhead_cycles"), prior_start("power_limit_w_per_tflop")) == (1e-5, 1e-4, 1e5, 8.0)


def test_a_cold_fit_reaches_one_optimum_from_any_start_and_row_order():
    # llama.cpp-vulkan's 12 rows (3 figures): cold, from a second start set and with its rows reversed (the old
    # start read the first row's chip profile), the same figures to the 4 digits the runtime file keeps
    from membound.fidelity.calibrate import FIXED, fit_rows
    from membound.fidelity.reference import load_reference
    rows = fit_rows(load_reference().scenarios, "llama.cpp-vulkan")
    fixed = {p: v for p, (v, _) in FIXED["llama.cpp-vulkan"].items()}
    fits = [fit_group("llama.cpp-vulkan", "default", rows, fixed=fixed),
            fit_group("llama.cpp-vulkan", "default", rows, fixed=fixed,
                      start=dict(bandwidth_fraction=0.8, compute_fraction=0.6, per_layer_overhead_cycles=3e5)),
            fit_group("llama.cpp-vulkan", "default", rows[::-1], fixed=fixed)]
    digits = [{k: f"{v:.4g}" for k, v in f.params.items()} for f in fits]
    assert digits[0] == digits[1] == digits[2] and set(digits[0]) >= {"bandwidth_fraction", "compute_fraction"}
