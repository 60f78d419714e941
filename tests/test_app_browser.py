"""The web app in a real browser: headless Chromium from the OS packages (apt: chromium,
chromium-driver), driven by Selenium through /usr/bin/chromedriver. Numbers are read back from
the page and compared with the library's. Screenshots are kept in tests/artifacts/ (ignored by
git). Without Chromium these tests skip, saying so."""
from urllib.parse import parse_qs, urlparse

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("selenium")
from _browser import ARTIFACTS, AppServer, chrome, chromium_paths  # noqa: E402
from pathlib import Path  # noqa: E402

import membound as mb  # noqa: E402

BROWSER, DRIVER = chromium_paths()
pytestmark = pytest.mark.skipif(BROWSER is None or DRIVER is None,
                                reason="browser tests need Chromium and chromedriver from the OS packages "
                                       "(apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def app():
    with AppServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    downloads = tmp_path_factory.mktemp("downloads")
    drv = chrome(BROWSER, DRIVER, download_dir=downloads)
    drv.downloads = downloads
    yield drv
    drv.quit()


def wait(drv, cond, timeout=60):        # a ceiling on a wait that ends when cond holds, not a speed bound
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(drv, timeout).until(cond)


def css(drv, sel):
    from selenium.webdriver.common.by import By
    return drv.find_elements(By.CSS_SELECTOR, sel)


def load(drv, url):
    """Open `url` and wait until the page has asked the server and drawn the answer (or the error)."""
    drv.get(url)
    wait(drv, lambda d: d.execute_script("return document.body.dataset.state") == "ready")


def table(drv, table_id):
    """{device: {column key: (data-value or None, text)}} of a rendered table."""
    rows = {}
    for tr in css(drv, f"#{table_id} tbody tr"):
        cells = {td.get_attribute("data-key"): (td.get_attribute("data-value"), td.text) for td in css(tr, "td")}
        rows[cells["hardware"][1]] = cells
    return rows


def set_value(drv, el, value):
    el.clear()
    if value:
        el.send_keys(value)


def test_default_page_is_the_cerebras_vs_h100_comparison(app, browser):
    load(browser, app.url + "/")
    rows = table(browser, "compare-table")
    assert list(rows) == ["h100-sxm", "cerebras-wse-3"]
    kw = dict(prompt_tokens=2048, output_tokens=256, weight_dtype="bf16")
    # 141 GB of bf16 weights over 44 GB wafers: 4 wafers (3 hold only 132 GB), one pipeline stage each
    ref = [mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=8), **kw),
           mb.estimate("llama-3.1-70b", "cerebras-wse-3", n_chips=4, parallel=mb.Parallel(pp=4), **kw)]
    for r in ref:
        cells = rows[r.hardware]
        assert float(cells["decode_tok_s_per_user"][0]) == r.decode_tok_s_per_user
        assert float(cells["ttft_s"][0]) == r.ttft_s
        assert int(cells["n_chips"][0]) == r.n_chips and cells["bound"][1] == r.bound
        # shown with one decimal at >= 100 tok/s (e.g. "450.0"), grouped and whole from 1,000 (e.g. "1,638")
        v = r.decode_tok_s_per_user
        assert cells["decode_tok_s_per_user"][1] == (f"{v:,.0f}" if v >= 1000 else f"{v:.1f}")
    assert rows["cerebras-wse-3"]["n_chips"][1] == "4"
    assert "2,100" in css(browser, "#claim")[0].text
    assert len(css(browser, "#compare-chart svg rect")) >= 3       # background + one bar per device
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "app-compare-default.png"))


def test_fill_in_a_comparison_and_its_permalink(app, browser):
    load(browser, app.url + "/")
    model = css(browser, '#common input[name="model"]')[0]
    set_value(browser, model, "llama-3.1-8b")
    set_value(browser, css(browser, '#common input[name="weight_dtype"]')[0], "fp8")
    set_value(browser, css(browser, '#common input[name="prompt_tokens"]')[0], "1000")
    names, chips = css(browser, ".device-row .dev-name"), css(browser, ".device-row .dev-chips")
    set_value(browser, names[0], "h200")
    set_value(browser, chips[0], "1")
    set_value(browser, names[1], "mi300x")
    set_value(browser, chips[1], "2")
    set_value(browser, css(browser, '#panel-compare input[name="batch"]')[0], "8")
    css(browser, "#panel-compare button.run")[0].click()       # sets the page busy until drawn
    wait(browser, lambda d: d.execute_script("return document.body.dataset.state") == "ready")
    rows = table(browser, "compare-table")
    kw = dict(batch=8, prompt_tokens=1000, output_tokens=256, weight_dtype="fp8")
    h200 = mb.estimate("llama-3.1-8b", "h200", **kw)
    mi300x = mb.estimate("llama-3.1-8b", "mi300x", n_chips=2, parallel=mb.Parallel(tp=2), **kw)
    assert float(rows["h200"]["decode_tok_s_per_user"][0]) == h200.decode_tok_s_per_user
    assert float(rows["h200"]["decode_tok_s_total"][0]) == h200.decode_tok_s_total
    assert float(rows["mi300x"]["decode_tok_s_per_user"][0]) == mi300x.decode_tok_s_per_user
    assert float(rows["mi300x"]["cost_per_million_tokens_usd"][0]) == mi300x.cost_per_million_tokens_usd

    link = css(browser, "#permalink")[0].get_attribute("href")
    q = parse_qs(urlparse(link).query)
    assert q["model"] == ["llama-3.1-8b"] and q["devices"] == ["h200:1,mi300x:2"] and q["batch"] == ["8"]
    load(browser, app.url + "/")                        # back to the default state first
    assert "h200" not in table(browser, "compare-table")
    load(browser, link)
    assert css(browser, '#common input[name="model"]')[0].get_attribute("value") == "llama-3.1-8b"
    assert css(browser, '#panel-compare input[name="batch"]')[0].get_attribute("value") == "8"
    assert table(browser, "compare-table") == rows


def test_bad_model_name_shows_the_error_next_to_the_field(app, browser):
    load(browser, app.url + "/?tab=compare&model=llama-9&devices=h100-sxm:8")
    err = css(browser, '#common .err[data-for="model"]')[0]
    assert err.text.startswith("unknown model 'llama-9'")
    assert css(browser, '#common input[name="model"]')[0].get_attribute("aria-invalid") == "true"
    assert css(browser, "#compare-table") == []           # no stale numbers
    assert "Traceback" not in browser.page_source
    browser.save_screenshot(str(ARTIFACTS / "app-bad-model.png"))


def test_config_that_does_not_fit_marks_the_device(app, browser):
    load(browser, app.url + "/?tab=compare&model=llama-3.1-70b&devices=h200:8,h100-sxm:1")
    errs = css(browser, ".device-row .err")
    assert errs[0].text == "" and errs[1].text.startswith("does not fit")


def test_explain_panel_draws_the_library_terms(app, browser):
    load(browser, app.url + "/?tab=explain&model=llama-3.1-70b&device=h100-sxm:8&batch=1")
    want = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=8),
                       prompt_tokens=2048, output_tokens=256)
    shown = {tr.find_element("css selector", "td").text: float(tr.find_elements("css selector", "td")[1]
                                                              .get_attribute("data-value"))
             for tr in css(browser, "#explain-table tbody tr")}
    assert shown == want.step_terms_s
    assert css(browser, "#explain-terms svg") and css(browser, "#explain-memory svg")


def test_downloads_csv_and_svg(app, browser):
    load(browser, app.url + "/")
    for f in browser.downloads.glob("*"):
        f.unlink()
    css(browser, '.table-box button[data-dl="csv"]')[0].click()
    css(browser, '#compare-chart button[data-dl="svg"]')[0].click()
    css(browser, '#compare-chart button[data-dl="png"]')[0].click()
    want = {"membound-compare.csv", "membound-compare.svg", "membound-compare.png"}
    wait(browser, lambda d: {f.name for f in browser.downloads.glob("*")} >= want)
    lines = (browser.downloads / "membound-compare.csv").read_text().splitlines()
    assert lines[0].split(",")[:2] == ["hardware", "n_chips"] and len(lines) == 3
    r = mb.estimate("llama-3.1-70b", "cerebras-wse-3", n_chips=4, parallel=mb.Parallel(pp=4), prompt_tokens=2048,
                    output_tokens=256)
    assert float(lines[2].split(",")[3]) == r.decode_tok_s_per_user
    assert (browser.downloads / "membound-compare.svg").read_text().startswith("<svg")
    assert (browser.downloads / "membound-compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serve_panel_reads_the_fast_mode_off_the_curve(app, browser):
    load(browser, app.url + "/?tab=serve&model=llama-3.1-70b&device=h100-sxm:8&concurrency=1,4,16,64"
         "&speedup=2.5&standard_lane=64")
    kw = dict(n_chips=8, parallel=mb.Parallel(tp=8), prompt_tokens=2048, output_tokens=256)
    want = mb.serve_curve("llama-3.1-70b", "h100-sxm", concurrency=[1, 4, 16, 64], **kw).fast_mode(
        2.5, standard_concurrency=64)
    assert css(browser, "#fast-mode")[0].text == want.reading
    # columns: device, clients, tok/s per user, ...
    cells = [[td.get_attribute("data-value") for td in css(tr, "td")[:3]] for tr in css(browser, "#serve-table tbody tr")]
    assert [float(c[2]) for c in cells] == [mb.serve("llama-3.1-70b", "h100-sxm", concurrency=c, **kw).tok_s_per_user
                                             for c in (1, 4, 16, 64)]
    assert css(browser, "#serve-chart svg polyline")
    browser.save_screenshot(str(ARTIFACTS / "app-serve.png"))


def test_plan_panel_lists_the_planners_cheapest_fleets(app, browser):
    load(browser, app.url + "/?tab=plan&model=llama-3.1-8b&prompt_tokens=1024&output_tokens=256&planner=static"
         "&hardware=h100-sxm,h200&concurrent_users=100&ttft_p90_s=1&min_tok_s_per_user=30&weight_dtypes=bf16,fp8")
    assert css(browser, '#panel-plan select[name="planner"]')[0].get_attribute("value") == "static"
    best = mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=100, prompt_tokens=1024, output_tokens=256),
                   mb.SLO(ttft_p90_s=1, min_tok_s_per_user=30), hardware=["h100-sxm", "h200"],
                   weight_dtypes=("bf16", "fp8"), batching="static").best      # the page asked for the static bus
    first = {td.get_attribute("data-key"): (td.get_attribute("data-value"), td.text)
             for td in css(browser, "#plan-table tbody tr")[0].find_elements("css selector", "td")}
    assert first["hardware"][1] == best["hardware"] and first["weight_dtype"][1] == best["weight_dtype"]
    assert int(first["total_chips"][0]) == best["total_chips"]
    assert float(first["cost_per_million_tokens_usd"][0]) == best["cost_per_million_tokens_usd"]
    assert css(browser, "#plan-chart svg circle")


def test_pasted_config_json_is_compared(app, browser):
    import json
    cfg = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "max_position_embeddings": 8192, "tie_word_embeddings": True}
    load(browser, app.url + "/")
    css(browser, "#config-box summary")[0].click()
    box = css(browser, '#common textarea[name="config"]')[0]
    box.send_keys(json.dumps(cfg))
    names, chips = css(browser, ".device-row .dev-name"), css(browser, ".device-row .dev-chips")
    set_value(browser, names[0], "rtx-4090")
    set_value(browser, chips[0], "1")
    css(browser, ".device-row .remove")[1].click()
    css(browser, "#panel-compare button.run")[0].click()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.state") == "ready")
    want = mb.estimate(mb.Model.from_hf_config(cfg), "rtx-4090", prompt_tokens=2048, output_tokens=256)
    assert float(table(browser, "compare-table")["rtx-4090"]["decode_tok_s_per_user"][0]) == want.decode_tok_s_per_user
    # a malformed one: the JSON error next to the box
    box.send_keys("}")
    css(browser, "#panel-compare button.run")[0].click()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.state") == "ready")
    assert "malformed JSON" in css(browser, '#common .err[data-for="config"]')[0].text


def submit(drv, tab):
    css(drv, f"#panel-{tab} button.run")[0].click()        # sets the page busy until drawn
    wait(drv, lambda d: d.execute_script("return document.body.dataset.state") == "ready", timeout=120)


DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "app.png"


def test_compare_with_a_price_and_speculative_decoding(app, browser):
    """The page's opening comparison with a price for the wafer and an 8B draft model: the numbers
    are the library's, and this view is the docs' screenshot (docs/app.png), so it cannot go stale."""
    load(browser, app.url + "/")
    form = "#panel-compare"
    set_value(browser, css(browser, f'{form} input[name="prices"]')[0], "cerebras-wse-3=12")
    set_value(browser, css(browser, f'{form} input[name="draft"]')[0], "llama-3.1-8b")
    set_value(browser, css(browser, f'{form} input[name="gamma"]')[0], "4")
    set_value(browser, css(browser, f'{form} input[name="acceptance_rate"]')[0], "0.7")
    submit(browser, "compare")
    rows = table(browser, "compare-table")
    assert list(rows) == ["h100-sxm", "cerebras-wse-3"]
    spec = mb.SpeculativeDecoding(draft="llama-3.1-8b", gamma=4, acceptance_rate=0.7)
    kw = dict(prompt_tokens=2048, output_tokens=256, weight_dtype="bf16", speculative=spec)
    # the draft's weights and cache count too: the fewest wafers that hold both
    wafers = mb.min_chips("llama-3.1-70b", "cerebras-wse-3", context_tokens=2304, speculative=spec)
    assert int(rows["cerebras-wse-3"]["n_chips"][0]) == wafers
    wse = mb.estimate("llama-3.1-70b", "cerebras-wse-3", n_chips=wafers, price_usd_per_hour=12.0, **kw)
    gpu = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, **kw)
    assert float(rows["cerebras-wse-3"]["decode_tok_s_per_user"][0]) == wse.decode_tok_s_per_user
    assert float(rows["h100-sxm"]["decode_tok_s_per_user"][0]) == gpu.decode_tok_s_per_user
    # $12 per wafer-hour: the wafers' dollars for one request's whole time (TTFT included) over its
    # 256 tokens, per million
    cost = float(rows["cerebras-wse-3"]["cost_per_million_tokens_usd"][0])
    assert cost == pytest.approx(wafers * 12.0 / 3600 * wse.e2e_s / 256 * 1e6, rel=1e-12)
    # the H100 keeps its profile's price
    assert rows["h100-sxm"]["price_usd_per_hour"][1] == f"{mb.load_hardware('h100-sxm').price_usd_per_hour:.2f}"
    note = css(browser, "#compare-speculative")[0].text
    assert "llama-3.1-8b drafts 4 tokens" in note and "0.7" in note
    # each answer's calibration: the runtime it ran, with its note
    assert rows["h100-sxm"]["calibration"][1] == gpu.runtime and rows["cerebras-wse-3"]["calibration"][1] == wse.runtime
    notes = [(p.get_attribute("data-runtime"), p.get_attribute("data-note"))
             for p in css(browser, "#panel-compare-calibration p")]
    assert notes == list(dict.fromkeys((r.runtime, " ".join(r.calibration.split())) for r in (gpu, wse)))   # one line each
    shot = css(browser, "body")[0].screenshot_as_png
    if not DOCS_SCREENSHOT.exists() or DOCS_SCREENSHOT.read_bytes() != shot:
        DOCS_SCREENSHOT.write_bytes(shot)


def test_compare_served_answers_are_mb_serve(app, browser):
    load(browser, app.url + "/?tab=compare&model=llama-3.1-8b&devices=h100-sxm:1,h200:1&weight_dtype=fp8")
    from selenium.webdriver.support.ui import Select
    Select(css(browser, '#panel-compare select[name="mode"]')[0]).select_by_value("served")
    set_value(browser, css(browser, '#panel-compare input[name="batch"]')[0], "32")
    submit(browser, "compare")
    rows = table(browser, "compare-table")
    kw = dict(concurrency=32, n_chips=1, prompt_tokens=2048, output_tokens=256, weight_dtype="fp8")
    for hw in ("h100-sxm", "h200"):
        want = mb.serve("llama-3.1-8b", hw, **kw)
        assert float(rows[hw]["decode_tok_s_per_user"][0]) == want.tok_s_per_user
        assert float(rows[hw]["decode_tok_s_total"][0]) == want.output_tok_s
        assert float(rows[hw]["ttft_s"][0]) == want.ttft.median
        assert rows[hw]["calibration"][1] == want.runtime
    assert "32 clients served" in css(browser, "#panel-compare .summary")[0].text
    assert "mode=served" in css(browser, "#permalink")[0].get_attribute("href")


def test_serve_overlays_two_devices_on_one_chart(app, browser):
    load(browser, app.url + "/?tab=serve&model=llama-3.1-70b&weight_dtype=fp8")
    form = "#panel-serve"
    set_value(browser, css(browser, f'{form} input[name="devices"]')[0], "h100-sxm:8,h200:8")
    set_value(browser, css(browser, f'{form} input[name="concurrency"]')[0], "1,4,16,64")
    submit(browser, "serve")
    assert len(css(browser, "#serve-chart svg polyline")) == 2           # one curve per device
    legend = [t.text for t in css(browser, "#serve-chart svg text")]
    assert "8 × h100-sxm" in legend and "8 × h200" in legend
    kw = dict(n_chips=8, parallel=mb.Parallel(tp=8), prompt_tokens=2048, output_tokens=256, weight_dtype="fp8")
    by_device: dict = {}
    for tr in css(browser, "#serve-table tbody tr"):
        tds = css(tr, "td")
        by_device.setdefault(tr.get_attribute("data-hardware"), []).append(
            (int(tds[1].get_attribute("data-value")), float(tds[2].get_attribute("data-value"))))
    for hw in ("h100-sxm", "h200"):
        assert by_device[hw] == [(c, mb.serve("llama-3.1-70b", hw, concurrency=c, **kw).tok_s_per_user) for c in (1, 4, 16, 64)]
        reading = mb.serve_curve("llama-3.1-70b", hw, concurrency=[1, 4, 16, 64], **kw).fast_mode(2.5)
        shown = [p.text for p in css(browser, f'#panel-serve .reading[data-hardware="{hw}"]')]
        assert shown == [f"8 × {hw}: {reading.reading}"]
    browser.save_screenshot(str(ARTIFACTS / "app-serve-two-devices.png"))
