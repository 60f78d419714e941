"""Hostile inputs to Quantization.resolve's model, predict() and the reference CSV (a user's own
measurements): each becomes the library's own error naming the field, the value and what was
expected, or a row skipped with its reason; never a bare ValueError, a NaN in the report or a
column renamed to a CLI flag."""
import csv
import dataclasses
from pathlib import Path

import pytest

import membound as mb
from membound import InvalidInputError, ProfileError
from membound.catalog.model import load_model


# ---- Quantization.resolve, predict() -------------------------------------------------------

def test_resolve_takes_names_and_refuses_other_things():
    q = mb.Quantization("q4_0")
    by_name = q.resolve("rtx-4090", "llama-2-7b")
    assert by_name == q.resolve(mb.load_hardware("rtx-4090"), load_model("llama-2-7b"))
    assert by_name.head_weights.name == "q6_k"          # the GGUF output tensor: the model was applied
    with pytest.raises(InvalidInputError, match=r"model=5 is invalid: expected a model name, a path, or a Model"):
        q.resolve("rtx-4090", 5)


def _decode_row() -> mb.fidelity.Scenario:
    return next(s for s in mb.fidelity.load_reference().scenarios if s.metric == "decode_tok_s_per_user")


def test_predict_refuses_what_is_no_scenario_and_takes_names_for_its_stand_ins():
    sc = _decode_row()
    for bad in ("lcpp-001", {"id": "x"}, None):
        with pytest.raises(InvalidInputError, match=r"scenario=.* is invalid: expected a membound.Scenario"):
            mb.fidelity.predict(bad)
    with pytest.raises(InvalidInputError, match=r"model=\{'name': 'x'\} is invalid: expected a model name"):
        mb.fidelity.predict(sc, model={"name": "x"})          # was a TypeError (unhashable) from the cache key
    assert mb.fidelity.predict(sc, model="llama-2-13b") == mb.fidelity.predict(sc, model=load_model("llama-2-13b"))


@pytest.mark.parametrize("change, field, words", [
    (dict(batch="max"), "batch", "only with metric throughput_tok_s_total"),   # was int('max'): ValueError
    (dict(batch=2.5), "batch", "an integer >= 1"), (dict(batch=True), "batch", "an integer >= 1"),
    (dict(measured=float("nan")), "measured", "a finite number > 0"), (dict(measured=0.0), "measured", "> 0"),
    (dict(metric="tok_s"), "metric", "one of decode_tok_s_per_user"),
    (dict(compute_scale=0.0), "compute_scale", "a finite number > 0"),
    (dict(depth=-5), "depth", "an integer >= 0"), (dict(n_chips=0), "n_chips", "an integer >= 1")])
def test_a_scenario_refuses_figures_it_cannot_predict(change, field, words):
    with pytest.raises(InvalidInputError, match=rf"{field}=.* is invalid: expected .*{words}"):
        dataclasses.replace(_decode_row(), **change)


# ---- the reference CSV ---------------------------------------------------------------------

def _awq_falcon_row() -> dict:
    with open(mb.fidelity.reference.reference_csv(), newline="", encoding="utf-8") as f:
        return next(r for r in csv.DictReader(f) if r["model"] == "Falcon-7B" and "AWQ" in r["weight_dtype"])


def _csv(path: Path, rows: list[dict], header: list[str] | None = None) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header or list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_a_row_whose_value_is_no_positive_number_is_skipped_with_the_reason(tmp_path):
    # 'fast' raised a bare ValueError; nan and inf went into the report as an error of nan%
    base = _awq_falcon_row()
    rows = [dict(base, id=f"v{i}", value=v) for i, v in enumerate(("fast", "nan", "inf", "-5", "0"))]
    ref = mb.fidelity.load_reference(_csv(tmp_path / "m.csv", rows))
    assert ref.scenarios == []
    # each named with its file, line and column (issue 31: loaders that refuse instead of guessing)
    assert [(rid, why) for rid, _, why in ref.skipped] == [
        (f"v{i}", f"{tmp_path / 'm.csv'} line {i + 2}: column 'value': value '{v}' is not a number of itl_ms "
                  "from 0.001 to 1e+09") for i, v in enumerate(("fast", "nan", "inf", "-5", "0"))]


def test_rows_with_a_bad_batch_or_chip_count_are_skipped_with_the_reason(tmp_path):
    base = _awq_falcon_row()
    ref = mb.fidelity.load_reference(_csv(tmp_path / "m.csv", [dict(base, id="b", batch_or_concurrency="-4"),
                                                      dict(base, id="c", n_chips="0")]))
    assert ref.scenarios == []
    assert dict((rid, why) for rid, _, why in ref.skipped) == {
        "b": "batch '-4' not understood",
        "c": f"{tmp_path / 'm.csv'} line 3: column 'n_chips': value '0' is not a whole number of chips from 1 to 1,000,000"}


def test_a_csv_without_the_schema_or_text_is_a_profile_error(tmp_path):
    base = _awq_falcon_row()
    no_notes = {k: v for k, v in base.items() if k != "notes"}
    with pytest.raises(ProfileError, match=r"field 'notes': column missing: .*\(missing: notes\)"):
        mb.fidelity.load_reference(_csv(tmp_path / "a.csv", [no_notes]))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ProfileError, match=r"field '<file>': empty: expected a header row naming id"):
        mb.fidelity.load_reference(tmp_path / "empty.csv")
    (tmp_path / "bin.csv").write_bytes(b"\x00\xff\xfe" * 10)
    with pytest.raises(ProfileError, match=r"field '<file>': not a CSV file of UTF-8 text"):
        mb.fidelity.load_reference(tmp_path / "bin.csv")
    with pytest.raises(InvalidInputError, match=r"expected a measurements CSV file or a folder"):
        mb.fidelity.load_reference(tmp_path / "no-such.csv")


def test_the_cli_names_a_csv_s_columns_as_the_file_does(tmp_path, capsys):
    from membound.present.cli import main
    no_kv = {k: v for k, v in _awq_falcon_row().items() if k != "kv_dtype"}
    assert main(["validate", "--reference", _csv(tmp_path / "a.csv", [no_kv])]) == 2
    err = capsys.readouterr().err
    assert "field 'kv_dtype': column missing" in err and "--kv" not in err      # not the estimate flag


def test_rows_in_the_new_dtype_spellings_predict_as_the_canonical_one(tmp_path):
    # TinyChat's Falcon-7B is int4 group 64 (4 + 16/64 = 4.25 bits): every spelling of it gives the
    # same scenario and figure; int4_g128 is the plain int4 (4 + 16/128), which this row maps to g64
    base = _awq_falcon_row()
    spellings = ("int4_g64", "int4-g64", "INT4_G64", "int4_g64 (AWQ W4A16)", "int4_g128", "int4-g128")
    ref = mb.fidelity.load_reference(_csv(tmp_path / "m.csv", [dict(base, id=f"s{i}", weight_dtype=w)
                                                      for i, w in enumerate(spellings)]))
    assert ref.skipped == [] and {s.weight_dtype for s in ref.scenarios} == {"int4_g64"}
    assert mb.catalog.dtypes.get_dtype("int4_g64").bits == 4 + 16 / 64 and mb.catalog.dtypes.get_dtype("int4-g128").name == "int4"
    figures = {round(mb.fidelity.predict(s), 9) for s in ref.scenarios}
    assert len(figures) == 1



@pytest.mark.parametrize("kw, words", [
    (dict(weight_dtype="q4-o"), r"weight_dtype='q4-o' is invalid: expected a registered weight format "
                                r"\(unknown dtype 'q4-o': did you mean 'q4_0'"),
    (dict(kv_dtype="q9"), r"kv_dtype='q9' is invalid: expected a registered KV-cache format \(unknown dtype 'q9'"),
    (dict(activation_dtype="zz"), r"activation_dtype='zz' is invalid: expected a registered format"),
    (dict(kv_dtype=5), r"kv_dtype=5 is invalid: expected a registered KV-cache format")])
def test_an_unknown_format_names_the_parameter_it_was_given_as(kw, words):
    # 'unknown dtype' alone did not say whether the weights, the KV cache or the activations were meant
    with pytest.raises(InvalidInputError, match=words):
        mb.estimate("llama-2-7b", "h100-sxm", **kw)
    with pytest.raises(InvalidInputError, match=r"expert_activation_dtype='mxfp8' is invalid: .*did you mean 'fp8'"):
        mb.Quantization("mxfp4", expert_activations="mxfp8")


def test_the_cli_names_the_flag_of_an_unknown_format(capsys):
    from membound.present.cli import main
    assert main(["estimate", "llama-2-7b", "h100-sxm", "--kv", "q9"]) == 2
    assert "--kv='q9' is invalid: expected a registered KV-cache format" in capsys.readouterr().err


def test_a_row_s_kv_cache_format_is_read_not_assumed(tmp_path):
    # llama.cpp's -ctk q8_0 -ctv q8_0 rows were predicted with an f16 cache: every text but 'fp8...'
    # became fp16/bf16. A named format is used; a text naming none skips the row
    with open(mb.fidelity.reference.reference_csv(), newline="", encoding="utf-8") as f:
        base = next(r for r in csv.DictReader(f) if "@ d" in r["notes"] and r["metric"] == "decode_tok_s_per_user"
                    and r["kv_dtype"] == "f16")
    rows = [dict(base, id="f16"), dict(base, id="q8", kv_dtype="q8_0"), dict(base, id="Q8", kv_dtype="Q8_0 (-ctk/-ctv)"),
            dict(base, id="odd", kv_dtype="q8/q4 mix")]
    ref = mb.fidelity.load_reference(_csv(tmp_path / "m.csv", rows))
    kv = {s.id: s.kv_dtype for s in ref.scenarios}
    assert kv == {"f16": "fp16", "q8": "q8_0", "Q8": "q8_0"}
    assert [(rid, why) for rid, _, why in ref.skipped] == [("odd", "KV-cache format 'q8/q4 mix' unknown")]
    by_id = {s.id: s for s in ref.scenarios}
    assert by_id["q8"].depth > 0
    # law: at a deep context the q8_0 cache (8.5 bits) streams fewer bytes than f16 (16): faster decode
    assert mb.fidelity.predict(by_id["q8"]) > mb.fidelity.predict(by_id["f16"])


# ---- issue 14 fuzz: a blank cell, a path that is no path, a scenario's lengths and layout ----

def test_a_blank_batch_cell_is_skipped_and_a_path_must_be_a_path(tmp_path):
    # '' raised IndexError (''.split()[0]) out of load_reference; 5 raised pathlib's TypeError
    ref = mb.fidelity.load_reference(_csv(tmp_path / "m.csv", [dict(_awq_falcon_row(), id="e", batch_or_concurrency="")]))
    assert ref.scenarios == [] and ref.skipped == [("e", "itl_ms", "batch '' not understood")]
    with pytest.raises(InvalidInputError, match=r"reference=5 is invalid: expected a path"):
        mb.fidelity.load_reference(5)


def _prefill_row() -> mb.fidelity.Scenario:
    return next(s for s in mb.fidelity.load_reference().scenarios if s.metric == "prefill_tok_s")


@pytest.mark.parametrize("change, words", [
    # a prefill of 0 tokens divided by zero (B x S / t with t = 0); nan, 'x', None were bare errors
    (dict(prompt_tokens=0), r"prompt_tokens=0 is invalid: expected an integer from 1 to 1,000,000,000 for "
                            r"metric prefill_tok_s"),
    (dict(prompt_tokens=float("nan")), r"prompt_tokens=nan is invalid"),
    (dict(prompt_tokens=None), r"prompt_tokens=None is invalid"),
    (dict(prompt_tokens=2**70), r"prompt_tokens=1180591620717411303424 is invalid"),
    (dict(output_tokens=-1), r"output_tokens=-1 is invalid: expected an integer from 0"),
    (dict(parallel=0), r"parallel=0 is invalid: expected \(tp, pp, ep\): three integers >= 1"),   # TypeError
    (dict(parallel=(2, 0, 1)), r"parallel=\(2, 0, 1\) is invalid"),
    (dict(parallel="x"), r"parallel='x' is invalid")])
def test_a_scenario_refuses_lengths_and_layouts_it_cannot_predict(change, words):
    with pytest.raises(InvalidInputError, match=words):
        dataclasses.replace(_prefill_row(), **change)
    # a decode row needs an output token and takes an empty prompt (the reference's decode rows)
    with pytest.raises(InvalidInputError, match=r"output_tokens=0 is invalid: expected an integer from 1"):
        dataclasses.replace(_decode_row(), output_tokens=0)
    assert dataclasses.replace(_decode_row(), prompt_tokens=0).prompt_tokens == 0
