"""The committed fit/select/report split (membound.fidelity.split): roles by the rule, recorded, and used
by validate's hold-outs."""
import hashlib

import pytest

import membound as mb
from membound.fidelity import split


def test_the_rule_by_hand():
    # u = first 8 hex digits of sha256("chip:h200") / 2^32: fit below 1/3, select below 2/3, else report
    for kind, name in (("chip", "h200"), ("chip", "dgx-spark"), ("source", "apple"), ("chip", "b200")):
        u = int(hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()[:8], 16) / 2**32
        want = "fit" if u < 1 / 3 else "select" if u < 2 / 3 else "report"
        assert split.rule(kind, name) == want


def test_every_recorded_role_is_the_rules_and_the_file_states_the_rule():
    rec = split.recorded()
    assert len(rec) >= 40 and set(rec.values()) == set(split.ROLES)
    assert all(split.rule(k, n) == r for (k, n), r in rec.items())
    assert "sha256" in split.split_csv().read_text().splitlines()[3]


def test_a_group_not_recorded_takes_the_rules_role_and_bad_kinds_are_refused():
    assert ("chip", "no-such-chip-yet") not in split.recorded()
    assert split.role("chip", "no-such-chip-yet") == split.rule("chip", "no-such-chip-yet")
    with pytest.raises(mb.InvalidInputError, match="kind"):
        split.rule("model", "llama-3.1-8b")


def test_a_select_chip_is_refitted_without_every_report_chip_and_a_fit_chip_is_not_held_out():
    # llama.cpp CUDA rows: DGX Spark is a select chip, the RTX 4090 a fit chip, the RTX PRO 6000 a
    # report chip (data/split.csv). Spark's held-out prediction is the refit without Spark AND
    # without every report chip's rows; the 4090 has none; the PRO 6000's refit leaves out only itself
    from membound.fidelity.reference import load_reference
    from membound.fidelity.validate import held_out_predictions, refit_without, _safe_predict
    assert (split.role("chip", "dgx-spark"), split.role("chip", "rtx-4090"),
            split.role("chip", "rtx-pro-6000-blackwell")) == ("select", "fit", "report")
    scs = [s for s in load_reference().scenarios if s.runtime == "llama.cpp-cuda"]
    held, _ = held_out_predictions(scs, "chip")
    assert not any(s.id in held for s in scs if s.hardware == "rtx-4090")
    reports = {s.id for s in scs if split.role("chip", s.hardware) == "report"}
    spark = [s for s in scs if s.hardware == "dgx-spark"]
    rt, fits = refit_without(scs, {s.id for s in spark} | reports, "llama.cpp-cuda")
    assert not any(i in f.rows for f in fits for i in reports)
    assert held[spark[0].id] == _safe_predict(spark[0], rt)
    pro = [s for s in scs if s.hardware == "rtx-pro-6000-blackwell"]
    rt2, _ = refit_without(scs, {s.id for s in pro}, "llama.cpp-cuda")
    assert held[pro[0].id] == _safe_predict(pro[0], rt2)


def test_hold_out_refits_are_cold_and_converged(monkeypatch):
    # a refit without a group never reads the bundled figures (which saw the group) and runs until the
    # solver converges: the default entry's FitReport says so
    import membound.fidelity.calibrate as cal
    from membound.fidelity.reference import load_reference
    from membound.fidelity.validate import refit_without

    def leak(rt):
        raise AssertionError(f"a hold-out refit read the bundled {rt} figures")
    monkeypatch.setattr(cal, "_bundled_entries", leak)
    scs = [s for s in load_reference().scenarios if s.runtime == "llama.cpp-vulkan"]
    _, fits = refit_without(scs, {s.id for s in scs if s.hardware == "rtx-4090"}, "llama.cpp-vulkan")
    assert fits and all(f.report is not None and f.report.converged for f in fits)
