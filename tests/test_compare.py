"""mb.compare(): one model on several devices, the table the CLI prints; the context window."""
import json
import subprocess
import sys

import pytest

import membound as mb
from membound.present.cli import in_flags


def test_compare_picks_the_fewest_chips_and_keeps_fixed_counts():
    res = mb.compare("llama-3.1-70b", ["h100-sxm", "h100-sxm:8", "h200"], prompt_tokens=1024, output_tokens=128)
    # bf16 weights 70.55e9 x 2 B = 141.1 GB: more than one H100's 85.5 GB (80 GiB), so 2 H100s;
    # one H200 holds 150.75 GB (143,771 MiB): 141.1 GB + KV 1,152 x 327,680 B = 0.38 GB fits
    assert [(r.hardware, r.n_chips) for r in res.results] == [("h100-sxm", 2), ("h100-sxm", 8), ("h200", 1)]
    # each row is estimate() of that configuration, the same engine
    r8 = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.layout_for("llama-3.1-70b", "h100-sxm", 8),
                     prompt_tokens=1024, output_tokens=128)
    assert res.results[1] == r8
    assert res.dropped == ()


def test_compare_leaves_out_what_does_not_fit_with_the_reason():
    # 70B fp8 = 70.55 GB of weights; an RTX 4090 holds 24 GB: ':1' pins one chip, which cannot hold it
    res = mb.compare("llama-3.1-70b", ["rtx-4090:1", "h200"], weight_dtype="fp8")
    assert [r.hardware for r in res.results] == ["h200"]
    (device, reason), = res.dropped
    assert device == "rtx-4090:1" and "does not fit" in reason
    assert "left out rtx-4090:1" in str(res)


def test_compare_result_renders_everywhere():
    res = mb.compare("llama-3.1-8b", ["h100-sxm", "h200"])
    text = str(res).splitlines()
    assert text[0] == "llama-3.1-8b: batch 1, prompt 2048, output 256, weights bf16"
    assert text[1].split()[:3] == ["device", "chips", "layout"]
    assert [line.split()[0] for line in text[3:5]] == ["h100-sxm", "h200"]
    assert text[5:] == [f"calibration: {mb.estimate('llama-3.1-8b', 'h100-sxm').calibration}"]   # one runtime
    html = res._repr_html_()
    assert html.count("<tr>") == 3 and "<th>tok/s/user</th>" in html
    df = res.to_pandas()
    assert list(df["hardware"]) == ["h100-sxm", "h200"] and list(df["n_chips"]) == [1, 1]
    d = res.to_dict()
    assert d["prompt_tokens"] == 2048 and [r["hardware"] for r in d["results"]] == ["h100-sxm", "h200"]
    json.dumps(d)


def test_cli_compare_prints_mb_compare():
    p = subprocess.run([sys.executable, "-m", "membound", "compare", "llama-3.1-8b", "h100-sxm", "h200:2",
                        "--prompt", "512"], capture_output=True, text=True,
                       timeout=600)      # a hang guard: a busy 2-core machine stretches a 1 s run many times
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip("\n") == str(mb.compare("llama-3.1-8b", ["h100-sxm", "h200:2"], prompt_tokens=512))


@pytest.mark.parametrize("devices", [[], ["h100-sxm:0"], ["h100-sxm:two"], [3]])
def test_compare_bad_devices(devices):
    with pytest.raises(mb.InvalidInputError, match="devices"):
        mb.compare("llama-3.1-8b", devices)


def test_context_window_is_an_error_with_an_opt_out():
    # llama-2-7b's window is 4,096 tokens: 8,000 + 256 is past it
    with pytest.raises(mb.InvalidInputError, match="context window of 4,096 tokens") as e:
        mb.estimate("llama-2-7b", "h100-sxm", prompt_tokens=8000)
    assert e.value.value == 8000 + 256
    # exactly at the window is fine: 3,840 + 256 = 4,096
    mb.estimate("llama-2-7b", "h100-sxm", prompt_tokens=3840)
    r = mb.estimate("llama-2-7b", "h100-sxm", prompt_tokens=8000, allow_beyond_context=True)
    assert r.prompt_tokens == 8000
    with pytest.raises(mb.InvalidInputError, match="131,072"):
        mb.compare("llama-3.1-8b", ["h100-sxm"], prompt_tokens=200_000)


def test_context_error_on_the_cli_is_one_line_in_flags(capsys):
    from membound.present.cli import main
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--prompt", "200000"]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert out == "" and "--prompt + --output=200256" in line and "--allow-beyond-context" in line
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--prompt", "200000", "--allow-beyond-context",
                 "--chips", "2"]) == 0


def test_in_flags_rewords_parameter_names():
    assert in_flags("concurrent_users=None is invalid: expected exactly one of concurrent_users or "
                    "arrival_rate_rps") == "--users=None is invalid: expected exactly one of --users or --rate"
    assert in_flags("n_chips_max stays") == "n_chips_max stays"


def test_api_and_cli_share_the_default_workload(capsys):
    from membound.base import defaults
    r = mb.estimate("llama-3.1-8b", "h100-sxm")
    assert (r.batch, r.prompt_tokens, r.output_tokens, r.weight_dtype) == (1, 2048, 256, "bf16")
    assert (defaults.BATCH, defaults.PROMPT_TOKENS, defaults.OUTPUT_TOKENS) == (1, 2048, 256)
    from membound.present.cli import main
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decode_tok_s_per_user"] == r.decode_tok_s_per_user
