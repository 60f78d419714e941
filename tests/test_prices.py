"""Prices as data (issue 32): every bundled profile has on-demand prices per chip-hour with
source and date, or says why it has none; chips sold as an API carry their per-token prices; the
default price is the median of the quotes; `--price` on every verb that shows a cost, and "no
price (pass --price)" wherever one is missing. Costs are derived by hand:
USD per million output tokens = chips x $/h / 3600 / (output tok/s) x 1e6."""
import datetime
import math
import re

import pytest

import membound as mb
from membound.base.display import NO_PRICE
from membound.catalog.hardware import Hardware, bundled_profiles_dir

from _cli import run_cli

BUNDLED = sorted(f.stem for f in bundled_profiles_dir().glob("*.yaml"))
API_KINDS = {"wafer", "lpu", "rdu"}


def _h100(**changes) -> Hardware:
    return mb.load_hardware("h100-sxm").with_overrides(**changes)


def _quote(usd, provider="A", date="2026-05-07"):
    return {"usd_per_hour": usd, "provider": provider, "source": "https://example.com/pricing", "date": date}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_profile_has_a_price_or_says_why_not(name):
    h = mb.load_hardware(name)
    assert bool(h.prices) != bool(h.no_price.strip()), f"{name}: give prices or no_price (one of them)"
    for q in h.prices:     # each quote: a URL and the date it was read, no later than this test
        assert q.source.startswith("https://"), (name, q.source)
        assert q.date[:4] >= "2024" and q.date <= datetime.date.today().isoformat(), (name, q.date)
    if h.prices:
        assert h.price_usd_per_hour is not None and h.price_source
    else:
        assert h.price_usd_per_hour is None and "--price" in h.no_price


@pytest.mark.parametrize("name", BUNDLED)
def test_api_prices_name_bundled_models_on_chips_sold_as_an_api(name):
    h = mb.load_hardware(name)
    assert bool(h.api_prices) == (h.kind in API_KINDS), name
    for a in h.api_prices:
        assert a.model in mb.list_models() and a.source.startswith("https://") and a.date[:4] >= "2024"


def test_default_price_is_the_median_of_the_quotes():
    # three quotes $2, $3, $10: the middle one, $3; two quotes $2 and $3: (2 + 3) / 2 = $2.5
    three = _h100(price_usd_per_hour=None, price_source=None, prices=[_quote(10.0), _quote(2.0), _quote(3.0)])
    assert three.price_usd_per_hour == 3.0
    two = _h100(price_usd_per_hour=None, price_source=None, prices=[_quote(2.0, "A"), _quote(3.0, "B")])
    assert two.price_usd_per_hour == 2.5
    assert two.price_source == "median of 2 on-demand list prices: A $2 (2026-05-07), B $3 (2026-05-07)"
    # a price given beside the quotes wins
    assert _h100(price_usd_per_hour=4.0, prices=[_quote(2.0)]).price_usd_per_hour == 4.0


def test_a_stated_absence_and_a_price_are_not_both_allowed():
    with pytest.raises(mb.MemboundError, match="no_price"):
        _h100(price_usd_per_hour=None, price_source=None, prices=[_quote(2.0)], no_price="a consumer card")
    # a price you set on a device without one replaces its stated absence
    mine = mb.load_hardware("rtx-3060").with_overrides(price_usd_per_hour=0.1)
    assert mine.price_usd_per_hour == 0.1 and mine.no_price == ""


@pytest.mark.parametrize("date", ["May 2026", "2026-13-01", "26-05-07", ""])
def test_a_quote_without_a_readable_date_is_refused(date):
    with pytest.raises(mb.MemboundError, match="date"):
        _h100(prices=[_quote(2.0, date=date)])


def test_estimate_cost_from_a_price_you_set():
    r = mb.estimate("llama-3.1-8b", "l4", price_usd_per_hour=0.8)
    tok_s = r.output_tokens / r.e2e_s              # output tokens over the request's end-to-end time
    assert r.cost_per_million_tokens_usd == pytest.approx(0.8 / 3600 / tok_s * 1e6, rel=1e-12)


def test_a_missing_price_is_said_never_blank():
    r = mb.estimate("llama-3.1-8b", "rtx-3060", weight_dtype="int4")
    assert r.cost_per_million_tokens_usd is None
    assert re.search(r"^cost\s+no price \(pass --price\)$", str(r), re.M)
    assert NO_PRICE in r._repr_html_()
    assert "no price (pass --price): a consumer card" in str(mb.load_hardware("rtx-3060"))


def test_api_price_shown_beside_the_physics():
    text = str(mb.estimate("llama-3.1-8b", "groq-lpu", price_usd_per_hour=1.0))
    cost = re.search(r"^cost\s+\$([\d,.]+) per million output tokens$", text, re.M)
    api = re.search(r"^API price\s+GroqCloud lists \$0.08 per million output tokens \(\$0.05 input;", text, re.M)
    assert cost and api
    c = mb.compare("gpt-oss-120b", ["cerebras-wse-3", "sambanova-sn40l"])
    assert "cerebras-wse-3: API price: Cerebras Inference lists $0.75 per million output tokens" in str(c)
    assert "sambanova-sn40l: API price: SambaNova Cloud lists $0.59 per million output tokens" in str(c)


# ---- the CLI -----------------------------------------------------------------------------------
def _cost(text: str) -> float:
    return float(re.search(r"^cost\s+\$([\d,.]+) per million", text, re.M).group(1).replace(",", ""))


@pytest.mark.parametrize("price", ["0.8", "l4=0.8", "NVIDIA L4=0.8"])
def test_cli_estimate_price(price):
    p = run_cli("estimate", "llama-3.1-8b", "l4", "--price", price)
    assert p.returncode == 0, p.stderr
    r = mb.estimate("llama-3.1-8b", "l4", price_usd_per_hour=0.8)
    # $0.8/h / 3600 / (256 tokens / e2e s) x 1e6, printed to three decimals
    assert _cost(p.stdout) == pytest.approx(0.8 / 3600 / (256 / r.e2e_s) * 1e6, abs=5e-4)


def test_cli_price_for_a_device_not_asked_about_is_refused():
    p = run_cli("estimate", "llama-3.1-8b", "l4", "--price", "h100-sxm=2")
    assert p.returncode == 2 and "a price for a device asked here: l4" in p.stderr
    p = run_cli("estimate", "llama-3.1-8b", "l4", "--price", "-1")
    assert p.returncode == 2 and "a number >= 0" in p.stderr


def test_cli_compare_prices_some_and_names_the_rest():
    p = run_cli("compare", "llama-3.1-8b", "l4", "rtx-3090", "h100-sxm", "--price", "l4=1,h100-sxm=3.6")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines()[3:6]}
    r = mb.estimate("llama-3.1-8b", "h100-sxm", price_usd_per_hour=3.6)
    # $3.6/h = $0.001/s; cost = 0.001 x e2e / 256 tokens x 1e6
    assert float(rows["h100-sxm"][-1]) == pytest.approx(0.001 * r.e2e_s / 256 * 1e6, abs=5e-3)
    assert rows["rtx-3090"][-1] == "-" and "rtx-3090: no price (pass --price)" in p.stdout


def test_cli_serve_price_and_column():
    p = run_cli("serve", "llama-3.1-8b", "rtx-3090", "--concurrency", "1,4")
    assert p.returncode == 0, p.stderr
    assert "$/M out" in p.stdout and "rtx-3090: no price (pass --price)" in p.stdout
    p = run_cli("serve", "llama-3.1-8b", "rtx-3090", "--concurrency", "4", "--price", "0.36", "--json")
    d = __import__("json").loads(p.stdout)[0]
    # 1 chip x $0.36/h = $0.0001/s over the output tok/s: 0.0001 / tok_s x 1e6
    assert d["cost_per_million_output_tokens_usd"] == pytest.approx(1e-4 / d["output_tok_s"] * 1e6, rel=1e-9)


def test_cli_sweep_price_column(tmp_path):
    import pandas as pd
    out = tmp_path / "g.csv"
    p = run_cli("sweep", "--models", "llama-3.1-8b", "--hardware", "l4,rtx-3090", "--price", "l4=0.72", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "rtx-3090: no price (pass --price); its cost column is blank" in p.stdout
    df = pd.read_csv(out).set_index("hardware")
    # $0.72/h = $0.0002/s; cost = 0.0002 x e2e / 256 x 1e6 (one chip, batch 1)
    assert df.loc["l4", "cost_per_million_tokens_usd"] == pytest.approx(0.0002 * df.loc["l4", "e2e_s"] / 256 * 1e6)
    assert math.isnan(df.loc["rtx-3090", "cost_per_million_tokens_usd"])


def test_cli_plan_takes_one_price_for_every_device():
    p = run_cli("plan", "llama-3.1-8b", "rtx-3090", "l4", "--users", "4", "--tok-s", "10", "--price", "0.5", "--json")
    assert p.returncode == 0, p.stderr
    ranked = __import__("json").loads(p.stdout)["ranked"]
    assert {r["hardware"] for r in ranked} == {"rtx-3090", "l4"}
    assert all(r["price_usd_per_chip_hour"] == 0.5 for r in ranked)
