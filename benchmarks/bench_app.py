"""Speed of the web app's first render (issue 18 target: < 1 s on this machine).

Run: python benchmarks/bench_app.py [--loads N]

Two figures:
1. browser: time to first full render in headless Chromium (OS packages, Selenium with the
   system chromedriver) = performance.now() when the page has fetched /api/options, asked
   /api/compare and drawn the default comparison (table + chart), measured from navigation
   start. The first load after the server starts is reported apart (cold caches: profiles and
   models parsed on first use), then the median and max of N fresh page loads.
2. server: the page + its assets + /api/options + the default /api/compare through Starlette's
   TestClient, no browser (the server's share of the render), cold and then the median.
"""
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _browser import AppServer, chrome, chromium_paths  # noqa: E402

LOADS = int(sys.argv[sys.argv.index("--loads") + 1]) if "--loads" in sys.argv else 10
DEFAULT = {"model": "llama-3.1-70b", "prompt_tokens": 2048, "output_tokens": 256, "weight_dtype": "bf16",
           "devices": ["h100-sxm:8", "cerebras-wse-3"], "batch": 1}


def server_side() -> tuple[float, list[float]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from membound.present.app.server import create_app

    def once(c) -> float:
        t = time.perf_counter()
        for path in ("/", "/static/app.js", "/static/app.css", "/api/options"):
            assert c.get(path).status_code == 200
        assert c.post("/api/compare", json=DEFAULT).status_code == 200
        return time.perf_counter() - t
    with TestClient(create_app(), base_url="http://127.0.0.1") as c:
        cold = once(c)
        return cold, [once(c) for _ in range(LOADS)]


def browser_side() -> tuple[float, list[float]] | None:
    from selenium.webdriver.support.ui import WebDriverWait
    browser, driver = chromium_paths()
    if browser is None or driver is None:
        return None
    with AppServer() as srv:
        drv = chrome(browser, driver)
        try:
            def load() -> float:
                drv.get("about:blank")
                drv.get(srv.url + "/")
                ms = WebDriverWait(drv, 30).until(lambda d: d.execute_script("return document.body.dataset.firstRenderMs"))
                assert drv.find_elements("css selector", "#compare-table tbody tr")
                assert drv.find_elements("css selector", "#compare-chart svg")
                return float(ms) / 1e3
            cold = load()
            return cold, [load() for _ in range(LOADS)]
        finally:
            drv.quit()


def main() -> None:
    import membound
    print(f"membound {membound.__version__}, Python {sys.version.split()[0]}, {LOADS} loads after the first")
    cold, warm = server_side()
    print(f"server (TestClient: page + assets + options + default compare): first {cold * 1e3:.0f} ms, "
          f"then median {statistics.median(warm) * 1e3:.0f} ms, max {max(warm) * 1e3:.0f} ms")
    b = browser_side()
    if b is None:
        print("browser: skipped (no Chromium/chromedriver from the OS packages)")
        return
    cold, warm = b
    verdict = "meets" if max(cold, *warm) < 1.0 else "MISSES"
    print(f"browser (headless Chromium, navigation start -> default comparison drawn): first {cold * 1e3:.0f} ms, "
          f"then median {statistics.median(warm) * 1e3:.0f} ms, max {max(warm) * 1e3:.0f} ms: {verdict} the 1 s target")


if __name__ == "__main__":
    main()
