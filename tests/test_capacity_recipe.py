"""docs/capacity-planning.md's recipe (examples/capacity_recipe.py): 200 users at >= 40 tok/s each,
2,048-token prompts, 500-token answers, Llama 3.1 70B on H100, H200, MI300X or B200. It runs, its
one answer obeys the arithmetic a reader can redo by hand, and the page shows the recipe's code."""
import math
import re
import sys
from pathlib import Path

import pytest

import membound as mb

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "capacity_recipe.py"
pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="needs the source tree (examples/)")


@pytest.fixture(scope="module")
def recipe():
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import capacity_recipe
    finally:
        sys.path.pop(0)
    return capacity_recipe


def test_the_recipe_has_one_answer_that_adds_up(recipe):
    res = recipe.recipe()
    best = res.best
    assert best is not None and best["hardware"] in {"h100-sxm", "h200", "mi300x", "b200"}
    # every user holds a seat (a closed loop): 200 users / seats per replica, rounded up
    assert best["replicas"] == math.ceil(200 / best["batch"])
    assert best["total_chips"] == best["replicas"] * best["n_chips"]
    assert best["tok_s_per_user"] >= 40
    # cost = every chip's price per hour over the tokens delivered per hour
    price = mb.load_hardware(best["hardware"]).price_usd_per_hour
    assert best["cost_per_million_tokens_usd"] == pytest.approx(
        best["total_chips"] * price / 3600 / best["throughput_tok_s"] * 1e6, rel=1e-12)
    # the cheapest of all that pass, and each device's table row is its own cheapest
    assert best["cost_per_million_tokens_usd"] == res.ranked["cost_per_million_tokens_usd"].min()
    per_device = recipe.cheapest_per_device(res)
    assert list(per_device["hardware"]) == list(dict.fromkeys(res.ranked["hardware"]))
    for row in per_device.itertuples():
        assert row.cost_per_million_tokens_usd == res.ranked[res.ranked.hardware == row.hardware][
            "cost_per_million_tokens_usd"].min()


def test_the_page_shows_the_recipes_code_and_its_answer(recipe):
    page = (ROOT / "docs" / "capacity-planning.md").read_text()
    shown = re.search(r"This is `examples/capacity_recipe.py`:\n\n```python\n(.*?)```", page, re.S).group(1)
    source = EXAMPLE.read_text()
    for line in shown.splitlines():
        assert line.strip() in source, line
    best = recipe.recipe().best
    assert (f"**The answer:** {best['replicas']} replicas of {best['n_chips']} x {best['hardware']} with "
            f"{best['weight_dtype']} weights") in page
