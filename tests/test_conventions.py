"""The conventions a newcomer expects: --version, defaults in --help, plan --price, a parquet hint."""
from pathlib import Path

import pytest

import membound as mb
from _cli import run_cli as run

ROOT = Path(__file__).resolve().parents[1]


def test_version():
    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"membound {mb.__version__}"


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_version_has_one_source():
    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["dynamic"] == ["version"]
    assert meta["tool"]["hatch"]["version"]["path"] == "src/membound/__init__.py"


def test_help_shows_the_shared_defaults():
    out = run("estimate", "--help").stdout
    assert "(default: 2048)" in out and "(default: 256)" in out and "(default: bf16)" in out
    assert "(default: 10)" in run("plan", "--help").stdout


def test_help_states_each_default_once():
    # an option whose help says its default in words ("(default: measured)") was followed by
    # argparse's own "(default: None)"; every option of every verb now says it once
    import argparse

    from membound.present.cli import build_parser
    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in verbs.choices.items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            text = formatter._expand_help(action) if action.help else ""
            assert text.count("(default:") <= 1, (name, action.dest, text)
    sweep = run("sweep", "--help").stdout
    assert "(default: the weights' or bf16)" in sweep and "(default: None)" not in sweep.split("--kv KV")[1][:80]


def test_plan_price_flag_admits_a_device_without_a_price():
    # rtx-4090 has no price in its profile: without --price nothing is left to plan on
    bad = run("plan", "llama-3.1-8b", "rtx-4090", "--users", "4")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--price" in bad.stderr and "prices" not in bad.stderr
    ok = run("plan", "llama-3.1-8b", "rtx-4090", "h100-sxm", "--users", "4", "--price", "rtx-4090=0.5",
             "--price", "h100-sxm=2", "--weights", "fp8", "--prompt", "512", "--output", "128", "--json")
    assert ok.returncode == 0, ok.stderr
    import json
    ranked = json.loads(ok.stdout)["ranked"]
    assert {r["hardware"] for r in ranked} <= {"rtx-4090", "h100-sxm"} and ranked
    assert "rtx-4090" in {r["hardware"] for r in ranked}


@pytest.mark.parametrize("value", ["rtx-4090", "rtx-4090=", "=2", "rtx-4090=cheap"])
def test_plan_price_flag_needs_device_equals_usd(value):
    p = run("plan", "llama-3.1-8b", "rtx-4090", "--users", "4", "--price", value)
    assert p.returncode == 2 and "DEVICE=USD" in p.stderr and p.stderr.count("\n") == 1


def test_parquet_error_is_one_line(capsys, tmp_path, monkeypatch):
    from membound.present import cli
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    code = cli.main(["sweep", "--models", "llama-3.1-8b", "--hardware", "h100-sxm", "-o", str(tmp_path / "g.parquet")])
    err = capsys.readouterr().err
    assert code == 1 and not (tmp_path / "g.parquet").exists()
    assert err == "membound: error: writing .parquet needs pyarrow: pip install 'membound[parquet]'\n"


def test_license_and_py_typed_ship():
    assert (ROOT / "src" / "membound" / "py.typed").exists()
    if (ROOT / "LICENSE").exists() or (ROOT / "pyproject.toml").exists():
        assert "MIT License" in (ROOT / "LICENSE").read_text()
