"""The README's generated tables match their generator (scripts/readme_tables.py)."""
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "readme_tables.py"


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the source tree (or the sdist)")
def test_readme_tables_are_fresh():
    gen = runpy.run_path(str(SCRIPT))
    text = (ROOT / "README.md").read_text()
    assert gen["render"](text) == text, "README.md is stale: run python scripts/readme_tables.py"


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the source tree (or the sdist)")
def test_readme_prices_are_the_profiles():
    import membound as mb
    text = (ROOT / "README.md").read_text()
    # the H200 row shows the profile's $4.00 per chip-hour (it once showed a stale $10)
    h200 = next(line for line in text.splitlines() if line.startswith("| h200 |"))
    assert h200.rstrip(" |").endswith(f"{mb.load_hardware('h200').price_usd_per_hour:.2f}")


def test_the_notebooks_capacity_plan_is_the_planners():
    # examples/tour.ipynb section 6: 2,000 users, 2048/500 tokens, >= 30 tok/s, TTFT p90 <= 1 s, 8-GPU nodes
    import membound as mb
    res = mb.plan("llama-3.1-70b", mb.Workload(concurrent_users=2000, prompt_tokens=2048, output_tokens=500),
                  mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30), hardware=["h100-sxm"], weight_dtypes=("fp8",),
                  n_chips=(8,))
    best = res.best
    # 2,000 users / 256 seats = 7.8 -> 8 replicas of 8 chips
    assert (best.batch, best.replicas, best.total_chips) == (256, 8, 64)
    # the count by hand it replaces: batch 512 prefilled together takes > 10 s to the first token
    r = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, batch=512, weight_dtype="fp8", prompt_tokens=2048,
                    output_tokens=500)
    assert r.ttft_s > 10 and r.decode_tok_s_per_user > 30
