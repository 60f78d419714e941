"""Served coverage (issue 12 'no configuration the servers ran is refused'; issue 14 'chips not in
the shared folder'): the standard InferenceMAX configurations on the chips the shipped rows do not
hold are all predicted. A small grid here (seconds); the full one is
`python -m membound.fidelity.serve_coverage --mtp --disagg` (55,809 configurations x concurrencies, 100%)."""
import pytest

import membound as mb
from membound.fidelity.serve_coverage import Coverage, main, runnable, smoke, weight_dtype

NEW_CHIPS = ("b300", "gb300", "gb200", "mi325x", "mi355x")


def test_new_chips_new_models_every_runnable_configuration_is_served():
    cov = smoke(chips=NEW_CHIPS, models=(("kimi-k2.5", "int4"), ("deepseek-r1", "fp4"), ("minimax-m2", "fp8"),
                                         ("qwen3.5-397b-a17b", "bf16")),
                scenarios={"8k1k": (8192, 1024)}, concurrency=(4, 1024), sizes=(8,), mtp_drafts=(1,))
    assert not cov.refused, str(cov)
    # 5 chips x 4 models x (tp8, ep8) x 3 engines x 2 concurrencies, plus MTP on SGLang (and
    # TensorRT-LLM on NVIDIA) for the 3 models with MTP layers: every one of them fits on 8 chips
    plain = 5 * 4 * 2 * 3 * 2
    mtp = (3 * 2 + 2 * 1) * 3 * 2 * 2        # (NVIDIA chips x 2 engines + AMD x 1) x models x layouts x conc
    assert cov.tried == cov.predicted == plain + mtp


def test_wide_expert_parallel_pools_on_an_nvl72_rack_are_served():
    # the GB200/GB300 disaggregated recipes decode on 16 to 72 chips of one NVLink domain: EP sizes
    # 24, 48 and 72 do not divide DeepSeek-R1's 256 experts (refused before ceil(E/ep) per chip)
    cov = smoke(chips=("gb300",), models=(("deepseek-r1", "fp4"),), scenarios={"1k1k": (1024, 1024)},
                concurrency=(64, 4096), sizes=(), disagg=True)
    assert not cov.refused, str(cov)
    assert cov.tried == 7 * 2 * 2       # decode EP 8..72 (7 sizes) x SGLang, TensorRT-LLM x 2 concurrencies


def test_runnable_by_hand():
    # DeepSeek-R1 in fp8 (1 byte a weight): 58 MoE layers x 256 experts of 3 x 7168 x 2048 weights
    m = mb.load_model("deepseek-r1")
    expert = 3 * 7168 * 2048
    non_expert = m.total_params - 58 * 256 * expert
    room = 0.85 * 180e9                               # WEIGHT_SHARE of a B200's 180 GB
    # tp=4: a quarter of everything, 167.8 GB > 153 GB; ep=4 replicates the non-expert weights and
    # holds 64 experts per layer, 180.6 GB; tp=8: 83.9 GB fits
    assert m.total_params / 4 > room and non_expert + 58 * 64 * expert > room and m.total_params / 8 < room
    b200 = mb.load_hardware("b200")
    assert not runnable(m, b200, "fp8", mb.Parallel(tp=4))
    assert not runnable(m, b200, "fp8", mb.Parallel(ep=4))
    assert runnable(m, b200, "fp8", mb.Parallel(tp=8))


def test_weight_formats_and_report():
    assert weight_dtype("fp4", "deepseek-r1", "NVIDIA") == "nvfp4"
    assert weight_dtype("fp4", "deepseek-r1", "AMD") == "mxfp4"
    assert weight_dtype("fp4", "gpt-oss-120b", "NVIDIA") == "mxfp4"
    assert weight_dtype("int4", "kimi-k2.5", "NVIDIA") == "int4"
    cov = Coverage()
    cov.add(9, "a", "parallel.ep=48 is invalid: expected a divisor")
    cov.add(9, "b")
    assert (cov.tried, cov.predicted, cov.share) == (18, 9, 0.5)
    assert "9/18" in str(cov) and "(50.0%)" in str(cov) and "parallel.ep=48" in str(cov)


def test_cli_bad_chip_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["--chips", "h100"])
    assert "did you mean" in capsys.readouterr().err
