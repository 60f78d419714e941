"""Issue 31's low list (not the app's): huge integers and repeated keys in YAML and JSON are
one-line ProfileErrors; CSV outputs are formula-safe without breaking negative numbers; the
sweep's output path is checked before the grid runs; a large reference shows its progress."""
import json

import pandas as pd
import pytest
import yaml

import membound as mb
from membound.catalog import hardware
from membound.errors import ProfileError
from membound.base.safeio import csv_cell, csv_frame


def _profile(**changes) -> str:
    data = yaml.safe_load((hardware.bundled_profiles_dir() / "l4.yaml").read_text())
    data.pop("aliases", None)
    return yaml.safe_dump({**data, "name": "my-chip", **changes}, sort_keys=False)


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "9" * 5000, "1" * 401, "+" + "1" * 4301])
def test_a_huge_yaml_integer_is_one_line(tmp_path, number):
    # the attack as written: 5,000 digits (Python refuses to read over 4,300: a ValueError traceback)
    f = tmp_path / "my-chip.yaml"
    f.write_text(_profile() + f"year: {number}\n".replace("year", "clock_hz"))
    with pytest.raises(ProfileError, match=r"an integer of [\d,]+ digits: expected a number of at most 400") as e:
        mb.load_hardware(f)
    assert "\n" not in str(e.value)


def test_a_400_digit_integer_is_read_and_refused_by_its_range(tmp_path):
    f = tmp_path / "my-chip.yaml"
    f.write_text(_profile() + "clock_hz: " + "9" * 400 + "\n")
    with pytest.raises(ProfileError, match="clock_hz"):
        mb.load_hardware(f)


@pytest.mark.parametrize("text, words", [
    ("vendor: AMD\n", "key 'vendor' is written twice \\(lines \\d+ and \\d+\\)"),    # the last would win
    ("scale_out: {a: 1, a: 2}\n", "key 'a' is written twice"),                             # nested, one line
    ("display_name: NVIDIA L4 24GB\n", "key 'display_name' is written twice"),            # the same value twice
])
def test_a_key_written_twice_in_yaml_is_refused(tmp_path, text, words):
    f = tmp_path / "my-chip.yaml"
    f.write_text(_profile() + text)
    with pytest.raises(ProfileError, match=words):
        mb.load_hardware(f)


def _config() -> dict:
    return {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 131072}


def test_a_config_json_with_a_key_twice_is_refused(tmp_path):
    good = json.dumps(_config())
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "config.json").write_text(good)
    assert mb.load_model(str(tmp_path / "ok" / "config.json")).n_layers == 16
    (tmp_path / "twice.json").write_text(good[:-1] + ', "num_hidden_layers": 80}')   # last would win: 80 layers
    with pytest.raises(ProfileError, match="key 'num_hidden_layers' is written twice"):
        mb.load_model(str(tmp_path / "twice.json"))
    (tmp_path / "huge.json").write_text(good[:-1] + ', "rope_theta": ' + "9" * 5000 + "}")
    with pytest.raises(ProfileError, match="an integer of 5,000 digits"):
        mb.load_model(str(tmp_path / "huge.json"))


@pytest.mark.parametrize("cell, written", [
    ("=1+2", "'=1+2"), ("@SUM(A1:A9)", "'@SUM(A1:A9)"), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"), ("\t=1", "'\t=1"), ("\r=1", "'\r=1"),
    ("-1+2", "'-1+2"), ("-inf", "'-inf"), ("-", "'-"), ("=", "'="),
    # a signed numeral stays a number: the errors column's "-0.1234", a "+1.5e3"
    ("-0.1234", "-0.1234"), ("+1.5e3", "+1.5e3"), ("-.5", "-.5"), ("-5", "-5"),
    ("h100-sxm", "h100-sxm"), ("", ""), (-3, -3), (-0.25, -0.25), (None, None),
])
def test_csv_cells_are_formula_safe_and_numbers_keep_their_sign(cell, written):
    assert csv_cell(cell) == written


def test_a_frame_of_text_categories_and_numbers():
    df = pd.DataFrame({"model": pd.Categorical(["=HYPERLINK(1)", "llama"]), "error": ["-0.5", "=2"],
                       "x": [-1.0, 2.0], "=head": [1, 2]})
    out = csv_frame(df)
    assert out["model"].tolist() == ["'=HYPERLINK(1)", "llama"] and out["error"].tolist() == ["-0.5", "'=2"]
    assert out["x"].tolist() == [-1.0, 2.0] and list(out.columns)[-1] == "'=head"
    assert df["error"].tolist() == ["-0.5", "=2"]                 # the caller's frame is not changed


def test_the_sweep_checks_its_output_before_the_grid(tmp_path, capsys):
    from membound.present.cli import main
    rc = main(["sweep", "--models", "llama-3.2-1b", "--hardware", "h100-sxm", "--out", str(tmp_path / "no" / "x.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and "--out=" in err and "does not exist" in err


def test_a_large_reference_shows_its_progress(monkeypatch):
    from membound.fidelity import reference
    shown = []

    def track(items, desc, **kw):
        shown.append(desc)
        return items
    monkeypatch.setattr(reference, "track", track)               # base.progress.track, as the loader calls it
    monkeypatch.setattr(reference, "PROGRESS_ROWS", 10)         # the shipped file has 554 rows > 10
    assert len(reference.load_reference().scenarios) > 0 and shown == ["reference rows"]
    shown.clear()
    monkeypatch.setattr(reference, "PROGRESS_ROWS", 10_000)     # 554 <= 10,000: no bar
    reference.load_reference()
    assert shown == []


def test_a_large_served_reference_shows_its_progress(monkeypatch):
    from membound.fidelity import serve_validate
    shown = []

    def track(items, desc, **kw):
        shown.append((desc, kw.get("total")))
        return items
    monkeypatch.setattr(serve_validate, "track", track)          # base.progress.track, as the loader calls it
    monkeypatch.setattr(serve_validate, "PROGRESS_ROWS", 10)     # reference.PROGRESS_ROWS, as it reads it
    load_rows = serve_validate.load_rows
    rows, skipped = load_rows(all_rows=True)
    # every row of the shipped file is either predicted or skipped with a reason, and was counted
    assert shown == [("served rows", len(rows) + len(skipped))]
