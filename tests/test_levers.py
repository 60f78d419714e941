"""Composing the levers: one call with all three, and each lever's share of the speed-up."""
import math
import runpy
from pathlib import Path

import pytest

import membound as mb

SPEC = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)


def test_levers_compose_and_shares_add_up():
    rep = mb.explain_levers("llama-3.1-8b", "h100-sxm", batch=16, weight_dtype="int4", kv_dtype="fp8",
                            speculative=SPEC, prompt_tokens=2048, output_tokens=512, runtime="vllm")
    assert [s.lever for s in rep.steps] == ["baseline", "batch", "weights", "kv", "speculative"]
    # sequential factors multiply to the total and log-shares sum to one
    assert math.prod(s.factor_total for s in rep.steps[1:]) == pytest.approx(rep.speedup_total)
    assert sum(s.share for s in rep.steps) == pytest.approx(1.0)
    # the last rung is the single call with every lever on
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=16, weight_dtype="int4", kv_dtype="fp8",
                    speculative=SPEC, prompt_tokens=2048, output_tokens=512, runtime="vllm")
    assert rep.full.decode_tok_s_total == pytest.approx(r.decode_tok_s_total)
    assert rep.steps[-1].total_tok_s == pytest.approx(r.decode_tok_s_total)
    # batching multiplies aggregate speed but lowers per-user speed; the others raise both
    batch = rep.steps[1]
    assert batch.factor_total > 1 > batch.factor_per_user
    assert all(s.factor_per_user > 1 for s in rep.steps[2:])
    assert "llama-3.2-1b" in str(rep)


def test_baseline_that_does_not_fit_is_flagged():
    rep = mb.explain_levers("llama-3.1-70b", "h100-sxm", speculative=SPEC, prompt_tokens=2048, output_tokens=512)
    assert not rep.steps[0].fits and rep.steps[-1].fits


@pytest.mark.parametrize("script", ["fast_mode.py", "levers.py"])
def test_examples_run(script, capsys):
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / script), run_name="__main__")
    assert "x" in capsys.readouterr().out
