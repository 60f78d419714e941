"""Served validation against InferenceMAX: held-out chips stay within the measured accuracy,
every covered row is predicted, fitted rows are reported apart."""
import numpy as np
import pytest

from membound.serve_validate import AMD, FIT_HARDWARE, load_rows, predict, summary


@pytest.fixture(scope="module")
def rows():
    rows, skipped = load_rows()
    predict(rows)
    return rows, skipped


def test_every_aggregated_row_with_a_profile_is_predicted(rows):
    rs, skipped = rows
    assert len(rs) >= 1400                              # 1,432 canonical good aggregated rows
    assert all("error" not in r.pred for r in rs)        # none refused (KV caps the batch instead)
    assert all("mtp" in why or "disaggregated" in why or "no " in why for _, why in skipped)


def test_held_out_chips_never_saw_the_fit(rows):
    rs, _ = rows
    assert {r.hw for r in rs if r.fitted} == set(FIT_HARDWARE)
    assert not any(r.fitted for r in rs if r.hw not in FIT_HARDWARE)


def test_held_out_accuracy_regression(rows):
    # Regression thresholds = the measured held-out medians (TPOT / TTFT / tput: 10.0 / 29.1 /
    # 10.9% overall; NVIDIA 10.8 / 33.7 / 11.1%; AMD 7.8 / 17.2 / 10.4%) plus a margin.
    rs, _ = rows
    held = [r for r in rs if not r.fitted]
    nv = summary([r for r in held if r.hw not in AMD])
    amd = summary([r for r in held if r.hw in AMD])
    assert nv["tpot_s"] < 0.12 and nv["tput_per_gpu"] < 0.13 and nv["ttft_s"] < 0.37
    assert amd["tpot_s"] < 0.09 and amd["tput_per_gpu"] < 0.13 and amd["ttft_s"] < 0.19
    assert np.isfinite([nv[k] for k in ("tpot_s", "ttft_s", "tput_per_gpu")]).all()


def test_served_fits_hold_what_the_rows_cannot_pin_and_sit_off_their_bounds():
    # a figure fitted onto its bound means missing physics: every fitted served figure in the
    # bundled runtimes lies strictly inside its bounds; the held ones are exactly their FIXED values
    from membound.runtime import load_runtime
    from membound.serve_calibrate import ENGINES, FIXED, HIGH, LOW, PARAMS, fitted_params
    for name in ENGINES:
        served = load_runtime(name).served
        assert set(fitted_params(name)) | set(FIXED[name]) == set(PARAMS)
        for k in fitted_params(name):
            assert LOW[k] < getattr(served, k) < HIGH[k], (name, k)
        for k, v in FIXED[name].items():
            assert getattr(served, k) == v, (name, k)
    assert len(fitted_params("sglang")) == 4        # 8 figures less per_step, per_moe_layer, bandwidth, tiles
