"""Loaders that refuse instead of guessing (issue 31, Medium 6 and 7): the measurements loader
(reference.load_reference, stdlib csv) and the served-reference loader (serve_validate.load_rows,
pandas with every cell as text) parse each typed cell strictly and name file, row, column and
value; a bad cell skips its row (the rest of the report stands); a file that is empty, binary,
unterminated, or names a column twice is a one-line error; an Excel BOM is read."""
import csv
import io
from importlib import resources
from pathlib import Path

import pytest

from membound.errors import ProfileError
from membound.fidelity.reference import load_reference
from membound.fidelity.serve_validate import load_rows
from membound.fidelity.serve_validate import main as serve_validate_main
from membound.fidelity.validate import main as validate_main

DATA = Path(str(resources.files("membound"))) / "data" / "reference"


def _rows(path: Path, n: int, where=lambda r: True) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), [r for r in reader if where(r)][:n]


def _write(path: Path, header: list[str], rows: list[dict], prefix: str = "") -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(prefix + buf.getvalue(), encoding="utf-8")
    return path


# ---- the measurements loader --------------------------------------------------------------
# three rows the shipped report predicts: a llama.cpp decode row, a TensorRT-LLM one, an MLPerf one
KEEP = ("trt-011", "mlperf-001")


@pytest.fixture
def measurements(tmp_path):
    header, rows = _rows(DATA / "measurements.csv", 3, lambda r: r["id"] in KEEP or r["id"] == "hw-004")
    assert len(load_reference(_write(tmp_path / "ok.csv", header, rows)).scenarios) == 3
    return tmp_path, header, rows


@pytest.mark.parametrize("column, value, words", [
    ("n_chips", "1e9", "a whole number of chips from 1 to 1,000,000"),     # the attacks as written
    ("n_chips", "nan", "a whole number of chips"),
    ("n_chips", "2.5", "a whole number of chips"),
    ("n_chips", "0", "a whole number of chips"), ("n_chips", "-8", "a whole number of chips"),
    ("n_chips", "\uff18", "a whole number of chips"),      # a full-width 8: float() reads it, a CSV reader should not
    ("value", "1_000", "a number of"),                      # float() reads 1000: no CSV writes that
    ("prompt_tokens", "2.5", "a whole number of tokens"), ("prompt_tokens", "-5", "a whole number of tokens"),
    ("prompt_tokens", "1e400", "a whole number of tokens"), ("output_tokens", "nan", "a whole number of tokens"),
    ("prompt_tokens", "lots", "a number of tokens, and no rule of this row's source states one"),
    ("value", "1e-320", "a number of decode_tok_s_per_user from 0.001 to 1e\\+09"),
    ("value", "nan", "a number of"), ("value", "inf", "a number of"), ("value", "fast", "a number of"),
])
def test_a_bad_measurement_cell_skips_its_row_naming_it(measurements, column, value, words):
    tmp, header, rows = measurements
    i = [r["id"] for r in rows].index("hw-004")                      # a decode row of an API stream
    rows[i] = {**rows[i], column: value}
    ref = load_reference(_write(tmp / "bad.csv", header, rows))
    assert sorted(s.id for s in ref.scenarios) == sorted(KEEP)          # the other rows stand
    (rid, _, why), = [s for s in ref.skipped if s[0] == "hw-004"]
    import re
    assert re.search(rf"bad.csv line {i + 2}: column '{column}': value '{re.escape(value)}' is not {words}", why), why


def test_a_dataset_name_where_a_source_rule_states_the_length_still_loads(measurements):
    # mlperf rows carry "OpenOrca mix ..." as the prompt: their rule states 512/512
    assert {s.id: s.prompt_tokens for s in load_reference(_write(measurements[0] / "m.csv", *measurements[1:]))
            .scenarios}["mlperf-001"] == 512


def test_an_excel_bom_is_read(measurements):
    tmp, header, rows = measurements
    assert [s.id for s in load_reference(_write(tmp / "bom.csv", header, rows, "\ufeff")).scenarios] == \
        [s.id for s in load_reference(_write(tmp / "plain.csv", header, rows)).scenarios]


@pytest.mark.parametrize("text, words", [
    ("", "empty: expected a header row naming id"),
    ("\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a CSV file of UTF-8 text"),
    ('hw-1,"unterminated,x\n', "not a CSV file of UTF-8 text \\('unexpected end of data'\\)"),
])
def test_a_broken_measurements_file_is_one_line(tmp_path, text, words):
    f = tmp_path / "m.csv"
    header = _rows(DATA / "measurements.csv", 0)[0]
    f.write_bytes(((",".join(header) + "\n") if "unterminated" in text else "").encode() + text.encode("latin-1"))
    with pytest.raises(ProfileError, match=words) as e:
        load_reference(f)
    assert "\n" not in str(e.value)


def test_a_cell_of_200000_characters_is_one_line(measurements):
    tmp, header, rows = measurements
    rows[0] = {**rows[0], "notes": "x" * 200_000}        # past the csv module's 131,072-character field limit
    with pytest.raises(ProfileError, match="not a CSV file of UTF-8 text .*field larger than field limit") as e:
        load_reference(_write(tmp / "long.csv", header, rows))
    assert "\n" not in str(e.value)


def test_duplicate_headers_are_refused(measurements):
    tmp, header, rows = measurements
    f = tmp / "dup.csv"
    f.write_text(",".join(header + ["n_chips"]) + "\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="field 'n_chips': column named twice"):
        load_reference(f)


def test_a_row_with_missing_cells_is_skipped(measurements):
    tmp, header, rows = measurements
    f = _write(tmp / "short.csv", header, rows)
    f.write_text(f.read_text() + "hw-999,h100-sxm,1\n", encoding="utf-8")
    ref = load_reference(f)
    assert len(ref.scenarios) == 3 and any(s[0] == "hw-999" and "3 cells" in s[2] for s in ref.skipped)


# ---- the served-reference loader ----------------------------------------------------------
SERVED = DATA / "serving" / "inferencemax.csv"


@pytest.fixture
def served(tmp_path):
    header, rows = _rows(SERVED, 4, lambda r: r["canonical"] == "1" and r["quality"] == "good"
                         and r["disagg"] == "false" and r["spec_decoding"] == "none")
    good, _ = load_rows(_write(tmp_path / "ok.csv", header, rows))
    assert len(good) == 4
    return tmp_path, header, rows


@pytest.mark.parametrize("column, value, words", [
    ("conc", "nan", "a whole number of clients from 1 to 10,000,000"),        # a NaN cell
    ("isl", "abc", "a number of tokens from 1e-06 to 1e\\+09"),               # a text cell
    ("ttft_median_ms", "1e-320", "a number of ms from 1e-06"),               # an absurd magnitude
    ("tpot_median_ms", "", "empty: expected a value"), ("n_gpus", "2.5", "a whole number of GPUs"),
    ("disagg", "yes", "true or false"), ("canonical", "2", "a whole number of flags"),
    ("output_tput_per_gpu", "-inf", "a number of tok/s"),
    ("isl", "\u0661\u0660\u0662\u0664", "a number of tokens"),   # 1024 in Arabic-Indic digits
])
def test_a_bad_served_cell_skips_its_row_naming_it(served, column, value, words):
    tmp, header, rows = served
    rows[1] = {**rows[1], column: value}
    good, skipped = load_rows(_write(tmp / "bad.csv", header, rows))
    assert [r.id for r in good] == [rows[i]["id"] for i in (0, 2, 3)]
    (why,) = [w for rid, w in skipped if rid == rows[1]["id"]]
    import re
    assert re.search(rf"bad.csv row 3: column '{column}': value '{re.escape(value)}' is not {words}", why), why


def test_a_served_bom_is_read(served):
    tmp, header, rows = served
    assert len(load_rows(_write(tmp / "bom.csv", header, rows, "\ufeff"))[0]) == 4


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a CSV file of UTF-8 text"),
    ('imx-1,"unterminated,x\n', "not a CSV file of UTF-8 text"),
    ("id,hw,id\n1,2,3\n", "field 'id': column named twice"),
])
def test_a_broken_served_file_is_a_one_line_error(tmp_path, capsys, text, words):
    f = tmp_path / "s.csv"
    header = _rows(SERVED, 0)[0]
    f.write_bytes(((",".join(header) + "\n") if "unterminated" in text else "").encode() + text.encode("latin-1"))
    with pytest.raises(ProfileError, match=words):
        load_rows(f)
    with pytest.raises(SystemExit) as e:
        serve_validate_main(["--reference", str(f)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and words.split(":")[0] in err


def test_validate_keeps_the_measurements_report_when_the_served_file_is_broken(tmp_path, capsys):
    folder = tmp_path / "ref"
    (folder / "serving").mkdir(parents=True)
    header, rows = _rows(DATA / "measurements.csv", 3, lambda r: r["id"] in KEEP or r["id"] == "hw-004")
    _write(folder / "measurements.csv", header, rows)
    (folder / "serving" / "inferencemax.csv").write_text(",".join(_rows(SERVED, 0)[0]) + '\n"unterminated\n',
                                                          encoding="utf-8")
    assert validate_main(["--reference", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "skipped 0" in out and "hw-004" in out and "served workloads: not reported:" in out and "not a CSV file" in out


@pytest.mark.parametrize("args, words", [(["--csv", "missing/x.csv"], "does not exist"),
                                         (["--plot", "x.txt"], ".png")])
def test_validate_checks_its_outputs_first(tmp_path, capsys, args, words):
    from membound.fidelity.validate import _main_one_line
    assert _main_one_line(args) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_validate_json_keeps_the_measurements_when_the_served_file_is_broken(tmp_path, capsys):
    import json

    from membound.present.cli import main
    folder = tmp_path / "ref"
    (folder / "serving").mkdir(parents=True)
    header, rows = _rows(DATA / "measurements.csv", 3, lambda r: r["id"] in KEEP or r["id"] == "hw-004")
    _write(folder / "measurements.csv", header, rows)
    (folder / "serving" / "inferencemax.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    assert main(["validate", "--json", "--reference", str(folder)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"] == [] and "not a CSV file of UTF-8 text" in out["served"]["error"]


def test_mlperf_validate_checks_its_csv_first(capsys):
    from membound.fidelity.mlperf_validate import main
    with pytest.raises(SystemExit) as e:
        main(["--csv", "missing-folder/x.csv"])
    assert e.value.code == 2 and "--csv='missing-folder/x.csv'" in capsys.readouterr().err
