"""The comparison with published multiplier measurements runs and its formula rows check out."""
import pytest

from membound.fidelity import multiplier_check as mc

ROWS = mc.load_rows()   # the measurements ship with the package: never skipped


def test_leviathan_rows_reproduce_the_papers_prediction():
    # the paper's own prediction (Theorem 3.8), printed to one decimal in the notes
    for row in mc.leviathan(ROWS):
        paper = mc._num(ROWS[row.ids]["notes"], "speedup")
        if paper is not None:
            assert row.predicted == pytest.approx(paper, abs=0.1)   # alpha and c are rounded too


def test_report_has_every_section_and_finite_errors():
    rows = mc.all_rows()
    sections = {r.section for r in rows}
    assert any(s.startswith("spec: Leviathan") for s in sections)
    assert any("AWQ" in s for s in sections) and any("Marlin" in s for s in sections)
    assert any("llama.cpp q4_0" in s for s in sections)
    assert all(r.measured > 0 and r.predicted > 0 for r in rows)
    # Marlin's 3.87x at batch 1..32 is the byte ratio 16 / 4.125
    assert all(r.predicted == pytest.approx(16 / 4.125, rel=0.01) for r in rows if "Marlin" in r.section)
    assert "summary" in mc.report()


def test_help_answers_without_running_the_check(capsys):
    from membound.fidelity.multiplier_check import main
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--reference" in capsys.readouterr().out
