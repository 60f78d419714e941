"""Every verb runs as the real command (`python -m membound ...`) in a subprocess."""
import json
import subprocess
import sys

import pandas as pd
import pytest


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "membound", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_estimate_json_matches_hand_ceiling():
    p = run("estimate", "llama-3.1-70b", "h100-sxm", "--weights", "fp8", "--prompt", "0", "--output", "16", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    # 70.55e9 fp8 weights = 70.55 GB per token over 3.35e12 B/s: at most 3.35e12 / 70.55e9 = 47.5 tok/s
    assert 0 < d["decode_tok_s_per_user"] < 3.35e12 / 70.55e9


def test_estimate_human_table():
    p = run("estimate", "llama-3.1-8b", "h100-sxm")
    assert p.returncode == 0 and "decode per user" in p.stdout and "tok/s" in p.stdout


def test_compare_side_by_side():
    p = run("compare", "llama-3.1-70b", "h100-sxm:8", "h200", "--weights", "fp8")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[1].split()[:2] == ["device", "chips"]
    assert lines[3].split()[:2] == ["h100-sxm", "8"]
    # 70.55 GB of fp8 weights fit in one H200 (151 GB usable): the fewest chips is 1
    assert lines[4].split()[:2] == ["h200", "1"]
    j = json.loads(run("compare", "llama-3.1-8b", "h100-sxm", "h200", "--json").stdout)
    assert [r["hardware"] for r in j["results"]] == ["h100-sxm", "h200"]


def test_sweep_writes_csv(tmp_path):
    out = tmp_path / "grid.csv"
    p = run("sweep", "--models", "llama-3.1-8b", "--hardware", "h100-sxm,h200", "--batch", "1,8",
            "--prompt", "512,4096", "-o", str(out), "--progress")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(out)
    assert len(df) == 1 * 2 * 2 * 2 and set(df.hardware) == {"h100-sxm", "h200"}
    assert "8/8 [" in p.stderr and "wrote 8 rows" in p.stdout


def test_models_and_hardware_list_and_show():
    p = run("models", "list")
    assert p.returncode == 0 and "llama-3.1-70b" in p.stdout and "70.55" in p.stdout
    m = json.loads(run("models", "show", "llama-3.1-8b", "--json").stdout)
    assert m["n_layers"] == 32 and m["kv_bytes_per_token_bf16"] == 2 * 32 * 8 * 128 * 2
    h = run("hardware", "list", "--markdown")
    assert h.returncode == 0 and h.stdout.startswith("| device |") and "| cerebras-wse-3 |" in h.stdout
    d = json.loads(run("hardware", "show", "h100-sxm", "--json").stdout)
    assert d["memory"][0]["bandwidth_bytes_s"] == 3.35e12
    assert "3.35 TB/s" in run("hardware", "show", "h100-sxm").stdout


def test_plan_ranks_configurations():
    p = run("plan", "llama-3.1-8b", "h100-sxm", "--users", "10", "--tok-s", "30", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["ranked"] and all(r["tok_s_per_user"] >= 30 for r in d["ranked"])
    assert "configurations meet" in run("plan", "llama-3.1-8b", "h100-sxm", "--users", "10").stdout


def test_validate_prints_the_report(tmp_path):
    # the verb's plumbing on six rows of the shipped file (the full run's figures are tests/test_validation.py's,
    # from its module fixture; running all 408 rows here again cost ~20 s of CPU): spark-002 is a select chip's
    # (DGX Spark), so it is held out of a cold refit and named among the worst validation rows
    from membound.fidelity.reference import reference_dir
    ids = ("apple-001", "apple-002", "lcpp-007", "lcpp-008", "spark-002", "trt-011")
    lines = (reference_dir() / "measurements.csv").read_text().splitlines(keepends=True)
    (tmp_path / "mine.csv").write_text("".join([lines[0]] + [ln for ln in lines if ln.split(",", 1)[0] in ids]))
    p = run("validate", "--reference", str(tmp_path / "mine.csv"), "--csv", str(tmp_path / "v.csv"))
    assert p.returncode == 0, p.stderr
    assert "category" in p.stdout and "med" in p.stdout and "Coverage: 6 of 6 rows" in p.stdout
    assert "| spark-002 " in p.stdout
    rows = (tmp_path / "v.csv").read_text().splitlines()
    assert rows[0].startswith("id,category") and sorted(r.split(",", 1)[0] for r in rows[1:]) == sorted(ids)


@pytest.mark.parametrize("args, needle", [
    (["estimate", "no-such-model", "h100-sxm"], "unknown model 'no-such-model'"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--batch", "0"], "batch=0"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--batch", "x"], "invalid int value"),
    (["compare", "llama-3.1-8b", "h100-sxm:x"], "NAME:CHIPS"),
    (["hardware", "show", "no-such-chip"], "unknown hardware"),
    (["sweep", "--models", "llama-3.1-8b", "--hardware", "h100-sxm", "-o", "out.txt"], ".csv or .parquet"),
    (["frobnicate"], "invalid choice"),
    (["plan", "llama-3.1-8b", "h100-sxm"], "exactly one of --users or --rate"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1 and needle in p.stderr


def test_console_script_is_declared():
    import tomllib
    from pathlib import Path
    conf = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert conf["project"]["scripts"]["membound"] == "membound.present.cli:main"
