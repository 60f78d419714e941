"""The web app's JSON API through Starlette's TestClient (no browser): each answer equals the
library's own figures, bad input is a 400 naming the field, limits hold."""
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
import warnings  # noqa: E402

import anyio  # noqa: E402

with warnings.catch_warnings():       # starlette 1.x: "install httpx2" (httpx works)
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

import membound as mb  # noqa: E402
from membound.planning.planner import plan_served  # noqa: E402
from membound.present.app import api, server  # noqa: E402

STATIC = Path(server.__file__).resolve().parent / "static"
SMALL_LLAMA = {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 8,
               "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
               "max_position_embeddings": 8192, "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def client():
    with TestClient(server.create_app(), base_url="http://127.0.0.1") as c:    # the Host a loopback app answers to
        yield c


def test_page_and_assets_are_served_and_load_nothing_from_the_internet(client):
    page = client.get("/")
    assert page.status_code == 200 and "<title>membound" in page.text
    for asset in ("/static/app.js", "/static/app.css"):
        assert client.get(asset).status_code == 200
    # every src/href of the page is local; the only absolute URL in the script is the SVG namespace
    assert all(not ref.startswith(("http:", "https:", "//"))
               for ref in re.findall(r'(?:src|href)="([^"]*)"', page.text))
    for name in ("app.js", "app.css"):
        urls = set(re.findall(r"https?://[^\s\"'`)]+", (STATIC / name).read_text()))
        assert urls <= {"http://www.w3.org/2000/svg"}, urls


def test_compare_default_is_the_seed_comparison_and_equals_estimate(client):
    r = client.post("/api/compare", json={"model": "llama-3.1-70b"})
    assert r.status_code == 200
    rows = {row["hardware"]: row for row in r.json()["rows"]}
    assert list(rows) == ["h100-sxm", "cerebras-wse-3"]
    # 70.55e9 parameters x 2 bytes = 141 GB of bf16 weights; one wafer holds 44 GB: 141 / 44 = 3.2,
    # so the fewest wafers is 4, pipelined (one stage of 20 layers per wafer)
    wafer = rows["cerebras-wse-3"]
    assert wafer["n_chips"] == 4 and wafer["parallel"] == "tp=1 pp=4 ep=1"
    kw = dict(prompt_tokens=2048, output_tokens=256, weight_dtype="bf16")
    want = mb.estimate("llama-3.1-70b", "cerebras-wse-3", n_chips=4, parallel=mb.Parallel(pp=4), **kw)
    assert wafer["decode_tok_s_per_user"] == want.decode_tok_s_per_user
    assert wafer["ttft_s"] == want.ttft_s and wafer["bound"] == want.bound
    gpu = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=8), **kw)
    assert rows["h100-sxm"]["decode_tok_s_per_user"] == gpu.decode_tok_s_per_user
    assert rows["h100-sxm"]["cost_per_million_tokens_usd"] == gpu.cost_per_million_tokens_usd
    assert wafer["speedup_vs_first"] == want.decode_tok_s_per_user / gpu.decode_tok_s_per_user
    # 8 GPUs split 141 GB of weights: 17.6 GB each, about one fifth of an 85.5 GB H100
    assert rows["h100-sxm"]["memory_used_bytes"] == pytest.approx(141.1e9 / 8, rel=0.03)


def test_unknown_model_is_a_400_naming_the_field(client):
    r = client.post("/api/compare", json={"model": "llama-9"})
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "model" and body["error"].startswith("unknown model 'llama-9'")
    assert "\n" not in body["error"] and "Traceback" not in body["error"]


def test_a_device_that_cannot_hold_the_model_points_at_its_entry(client):
    # 141 GB of bf16 weights on one 85.5 GB H100 does not fit: entry 1 is left out with the reason
    r = client.post("/api/compare", json={"model": "llama-3.1-70b", "devices": ["h200:8", "h100-sxm:1"]})
    assert r.status_code == 200
    d = r.json()
    assert [row["hardware"] for row in d["rows"]] == ["h200"]
    assert d["dropped"][0]["index"] == 1 and d["dropped"][0]["error"].startswith("does not fit")
    # when no device holds it, the request is bad, pointing at the first entry
    r = client.post("/api/compare", json={"model": "llama-3.1-70b", "devices": ["h100-sxm:1"]})
    assert r.status_code == 400 and (r.json()["field"], r.json()["index"]) == ("devices", 0)
    r = client.post("/api/compare", json={"model": "llama-3.1-70b", "devices": ["h100-sxm:8", "h100-sxm:x"]})
    assert r.status_code == 400 and (r.json()["field"], r.json()["index"]) == ("devices", 1)
    r = client.post("/api/compare", json={"model": "llama-3.1-70b", "devices": ["h100-sxm:8", "no-chip"]})
    assert r.status_code == 400 and (r.json()["field"], r.json()["index"]) == ("devices", 1)
    r = client.post("/api/explain", json={"model": "llama-3.1-70b", "device": "h100-sxm:1"})
    assert r.status_code == 400 and r.json()["field"] == "device" and "does not fit" in r.json()["error"]


def test_past_the_context_window_names_the_prompt(client):
    # llama-2-7b reads 4,096 tokens: 4,000 + 256 is past it
    r = client.post("/api/compare", json={"model": "llama-2-7b", "prompt_tokens": 4000, "output_tokens": 256})
    assert r.status_code == 400 and r.json()["field"] == "prompt_tokens" and "4,096" in r.json()["error"]


@pytest.mark.parametrize("field, value", [("prompt_tokens", -1), ("output_tokens", 0), ("batch", "many"),
                                          ("weight_dtype", "fp7"), ("runtime", "warp-drive")])
def test_bad_values_name_their_field(client, field, value):
    r = client.post("/api/compare", json={"model": "llama-3.1-8b", field: value})
    assert r.status_code == 400 and r.json()["field"] == field, r.json()


def test_pasted_config_json(client):
    r = client.post("/api/compare", json={"config": json.dumps(SMALL_LLAMA), "devices": ["h100-sxm:1"]})
    assert r.status_code == 200, r.json()
    want = mb.estimate(mb.Model.from_hf_config(SMALL_LLAMA), "h100-sxm", prompt_tokens=2048, output_tokens=256)
    assert r.json()["rows"][0]["decode_tok_s_per_user"] == want.decode_tok_s_per_user
    bad = client.post("/api/compare", json={"config": '{"model_type": "llama",'})
    assert bad.status_code == 400 and bad.json()["field"] == "config" and "malformed JSON" in bad.json()["error"]
    missing = client.post("/api/compare", json={"config": '{"model_type": "llama"}'})
    assert missing.status_code == 400 and missing.json()["field"] == "config"


def test_explain_returns_the_step_terms_and_memory_of_estimate(client):
    r = client.post("/api/explain", json={"model": "llama-3.1-70b", "device": "h100-sxm:8", "batch": 4})
    assert r.status_code == 200
    d = r.json()
    want = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=8), batch=4,
                       prompt_tokens=2048, output_tokens=256)
    assert d["step_terms_s"] == want.step_terms_s and d["tpot_s"] == want.tpot_s
    assert d["memory"]["weights_bytes"] == want.memory.weights_bytes
    assert d["memory"]["kv_bytes"] == want.memory.kv_bytes
    # KV per chip: 4 sequences x 2304 tokens x 327,680 B/token (80 layers x 8 KV heads x 128 x 2 x 2 B)
    # over 8 chips = 377.5 MB
    assert d["memory"]["kv_bytes"] == pytest.approx(4 * 2304 * 327_680 / 8, rel=1e-9)


def test_plan_returns_the_planners_cheapest_fleet(client):
    body = {"model": "llama-3.1-8b", "hardware": ["h100-sxm", "h200"], "concurrent_users": 100,
            "ttft_p90_s": 1, "min_tok_s_per_user": 30, "prompt_tokens": 1024, "output_tokens": 256,
            "prices": "h100-sxm=2.0", "planner": "static"}
    r = client.post("/api/plan", json=body)
    assert r.status_code == 200, r.json()
    best = r.json()["ranked"][0]
    want = mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=100, prompt_tokens=1024, output_tokens=256),
                   mb.SLO(ttft_p90_s=1, min_tok_s_per_user=30), hardware=["h100-sxm", "h200"],
                   prices={"h100-sxm": 2.0}, batching="static").best
    for key in ("hardware", "n_chips", "batch", "replicas", "cost_per_million_tokens_usd"):
        assert best[key] == want[key]
    r = client.post("/api/plan", json={**body, "concurrent_users": 0})
    assert r.status_code == 400 and r.json()["field"] == "concurrent_users"
    r = client.post("/api/plan", json={**body, "prices": "h100-sxm=cheap"})
    assert r.status_code == 400 and r.json()["field"] == "prices"


def test_served_plan_is_plan_served(client):
    body = {"model": "llama-3.1-8b", "hardware": "h100-sxm,h200", "concurrent_users": 500, "ttft_p90_s": 1,
            "min_tok_s_per_user": 30, "prompt_tokens": 1024, "output_tokens": 256}
    r = client.post("/api/plan", json=body)
    assert r.status_code == 200, r.json()
    d = r.json()
    assert d["planner"] == "served"
    want = mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=500, prompt_tokens=1024, output_tokens=256),
                   mb.SLO(ttft_p90_s=1, min_tok_s_per_user=30), hardware=["h100-sxm", "h200"]).best   # the one planner
    assert want.equals(plan_served("llama-3.1-8b", mb.SLO(ttft_p90_s=1, min_tok_s_per_user=30), users=500,
                                   prompt_tokens=1024, output_tokens=256, hardware=["h100-sxm", "h200"]).best)
    best = d["ranked"][0]
    for key in ("hardware", "n_chips", "clients_per_replica", "replicas", "chips_total",
                "cost_per_million_output_tokens_usd"):
        assert best[key] == want[key]
    # the fleet carries every user: replicas x clients per replica >= 500
    assert best["replicas"] * best["clients_per_replica"] >= 500
    r = client.post("/api/plan", json={**body, "planner": "magic"})
    assert r.status_code == 400 and r.json()["field"] == "planner"


def test_request_limits(client):
    as_json = {"Content-Type": "application/json"}
    assert client.post("/api/compare", content=b"x" * 300_000, headers=as_json).status_code == 413
    r = client.post("/api/compare", content=b"not json", headers=as_json)
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]
    assert client.post("/api/compare", json={"model": "llama-3.1-8b", "devices": ["h100-sxm"] * 9}).status_code == 400


def test_busy_server_answers_503_instead_of_queueing():
    gate = server._Gate(workers=1, pending=1)
    first_running = anyio.Event()
    release = anyio.Event()

    async def scenario():
        def slow(_body):
            anyio.from_thread.run_sync(first_running.set)
            anyio.from_thread.run(release.wait)
            return {"ok": True}
        results = []

        async def first():
            results.append(await gate.run(slow, {}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await first_running.wait()
            with pytest.raises(server._Busy):            # one request in flight fills a gate of 1
                await gate.run(lambda b: b, {})
            release.set()
        assert results == [{"ok": True}] and gate.inflight == 0
    anyio.run(scenario)


def test_an_internal_error_is_one_line_without_a_traceback(monkeypatch):
    def broken(_body):
        raise RuntimeError("boom")
    monkeypatch.setattr(api, "compare", broken)
    with TestClient(server.create_app(), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        r = c.post("/api/compare", json={})
    assert r.status_code == 500
    assert r.json()["error"] == "internal error (RuntimeError); see the server log"


def test_cli_without_the_app_extra_names_the_install_command(monkeypatch, capsys):
    from membound.present import cli
    monkeypatch.setitem(sys.modules, "starlette", None)          # as if starlette were not installed
    for mod in [m for m in sys.modules if m.startswith("starlette.") or m == "membound.present.app.server"]:
        monkeypatch.delitem(sys.modules, mod)
    assert cli.main(["app"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and 'pip install "membound[app]"' in err


def test_membound_app_serves_the_page():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "membound", "app", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60      # a hang guard: a loaded 2-core machine starts slowly
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
                    assert resp.status == 200 and b"<title>membound" in resp.read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_curve_is_mb_serve_at_each_load_with_the_fast_mode_reading(client):
    body = {"model": "llama-3.1-70b", "device": "h100-sxm:8", "weight_dtype": "fp8", "concurrency": "1,4,16,64,256",
            "speedup": 2.5, "standard_lane": 64}
    r = client.post("/api/serve", json=body)
    assert r.status_code == 200, r.json()
    d = r.json()
    assert [p["concurrency"] for p in d["points"]] == [1, 4, 16, 64, 256]
    kw = dict(n_chips=8, parallel=mb.Parallel(tp=8), prompt_tokens=2048, output_tokens=256, weight_dtype="fp8")
    got = {p["concurrency"]: p for p in d["points"]}
    for c in (4, 64):
        w = mb.serve("llama-3.1-70b", "h100-sxm", concurrency=c, **kw)
        assert got[c]["tok_s_per_user"] == w.tok_s_per_user
        assert got[c]["output_tok_s_per_chip"] == w.output_tok_s_per_chip
    fm = d["fast_mode"]
    want = mb.serve_curve("llama-3.1-70b", "h100-sxm", concurrency=[1, 4, 16, 64, 256], **kw).fast_mode(
        2.5, standard_concurrency=64)
    assert (fm["speedup"], fm["price_ratio"], fm["reading"]) == (2.5, want.price_ratio, want.reading)
    # a 2.5x faster stream is 2.5x the per-user speed of the standard lane (64 clients)
    assert fm["fast"]["tok_s_per_user"] == pytest.approx(2.5 * got[64]["tok_s_per_user"], rel=1e-6)
    # same 8 chips at the same hourly price: price per token goes as 1 / throughput per chip
    assert fm["fast"]["output_tok_s_per_chip"] * fm["price_ratio"] == pytest.approx(fm["slow"]["output_tok_s_per_chip"])


@pytest.mark.parametrize("extra, field", [({"concurrency": "0,4"}, "concurrency"),
                                          ({"arrival_rate_rps": "1000"}, "arrival_rate_rps"),
                                          ({"standard_lane": 5}, "standard_lane"),
                                          ({"speedup": 1}, "speedup"),
                                          ({"device": "no-such-chip:8"}, "device")])
def test_serve_bad_input_names_the_field(client, extra, field):
    # 1000 requests/s of 2048 + 256 tokens is far past what one 8-GPU node completes (a few per second)
    r = client.post("/api/serve", json={"model": "llama-3.1-70b", "device": "h100-sxm:8", **extra})
    assert r.status_code == 400 and r.json()["field"] == field, r.json()


def test_plan_frontier_is_each_devices_pareto_front(client):
    r = client.post("/api/plan", json={"model": "llama-3.1-8b", "hardware": "h100-sxm,h200", "concurrent_users": 500,
                                       "ttft_p90_s": 1, "prompt_tokens": 1024, "output_tokens": 256})
    front = r.json()["frontier"]
    assert {p["hardware"] for p in front} == {"h100-sxm", "h200"}
    for hw in ("h100-sxm", "h200"):
        pts = [(p["tok_s_per_user"], p["tok_s_per_chip"]) for p in front if p["hardware"] == hw]
        # along a front sorted by speed per user, throughput per chip only falls: no point dominates another
        assert pts == sorted(pts) and all(b[1] < a[1] for a, b in zip(pts, pts[1:]))


def test_compare_takes_a_price_and_speculative_decoding(client):
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=3, acceptance_rate=0.6)
    r = client.post("/api/compare", json={"model": "llama-3.1-8b", "devices": ["h100-sxm:1", "l4:1"], "prices": "2.5",
                                          "draft": "llama-3.2-1b", "gamma": 3, "acceptance_rate": 0.6})
    assert r.status_code == 200, r.json()
    rows = {row["hardware"]: row for row in r.json()["rows"]}
    for hw in ("h100-sxm", "l4"):
        want = mb.estimate("llama-3.1-8b", hw, speculative=spec, price_usd_per_hour=2.5)
        assert rows[hw]["decode_tok_s_per_user"] == want.decode_tok_s_per_user
        # one chip at $2.50 an hour for the request's whole time, over its 256 tokens, per million
        assert rows[hw]["cost_per_million_tokens_usd"] == pytest.approx(2.5 / 3600 * want.e2e_s / 256 * 1e6, rel=1e-12)
        assert rows[hw]["price_usd_per_hour"] == 2.5 and rows[hw]["calibration"]["runtime"] == "device"
    assert r.json()["speculative"].startswith("speculative decoding: llama-3.2-1b drafts 3 tokens")


def test_compare_served_is_mb_serve_at_batch_clients(client):
    r = client.post("/api/compare", json={"model": "llama-3.1-8b", "devices": ["h100-sxm:1"], "mode": "served",
                                          "batch": 16, "prices": "h100-sxm=2"})
    row = r.json()["rows"][0]
    want = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=16, n_chips=1, prompt_tokens=2048, output_tokens=256,
                    price_usd_per_hour=2.0)
    assert row["decode_tok_s_per_user"] == want.tok_s_per_user and row["ttft_s"] == want.ttft.median
    assert row["cost_per_million_tokens_usd"] == want.cost_per_million_output_tokens_usd
    # the one default rule (runtime.default_runtime): h100-sxm's is `device`, as estimate()'s
    assert row["calibration"]["runtime"] == want.runtime == "device" and row["calibration"]["note"] == want.calibration


@pytest.mark.parametrize("extra, field", [({"draft": "no-such-model", "acceptance_rate": 0.7}, "draft"),
                                          ({"draft": "llama-3.2-1b"}, "acceptance_rate"),
                                          ({"draft": "llama-3.2-1b", "acceptance_rate": 1.5}, "acceptance_rate"),
                                          ({"draft": "llama-3.2-1b", "acceptance_rate": 0.7, "gamma": 0}, "gamma"),
                                          ({"prices": "-2"}, "prices"), ({"prices": "h200=3"}, "prices"),
                                          ({"mode": "batch"}, "mode")])
def test_compare_bad_new_fields_name_their_field(client, extra, field):
    r = client.post("/api/compare", json={"model": "llama-3.1-8b", "devices": ["h100-sxm:1"], **extra})
    assert r.status_code == 400 and r.json()["field"] == field, r.json()


def test_serve_overlays_several_devices(client):
    body = {"model": "llama-3.1-8b", "devices": ["h100-sxm:1", "h200:1"], "concurrency": "1,8,64"}
    d = client.post("/api/serve", json=body).json()
    assert [c["hardware"] for c in d["curves"]] == ["h100-sxm", "h200"]
    for c in d["curves"]:
        want = [mb.serve("llama-3.1-8b", c["hardware"], concurrency=n, n_chips=1, prompt_tokens=2048,
                         output_tokens=256).tok_s_per_user for n in (1, 8, 64)]
        assert [p["tok_s_per_user"] for p in c["points"]] == want
        assert c["calibration"]["runtime"] == "device"        # the one default rule, as estimate()'s
    assert d["points"] == d["curves"][0]["points"]          # the first curve is also the answer's own
    bad = client.post("/api/serve", json={**body, "devices": ["h100-sxm:1", "no-such-chip"]})
    assert bad.status_code == 400 and (bad.json()["field"], bad.json()["index"]) == ("devices", 1)


def test_compare_shows_the_api_price_beside_the_physics(client):
    from membound.catalog.hardware import api_price_text
    rows = client.post("/api/compare", json={"model": "llama-3.1-8b", "devices": ["groq-lpu", "h100-sxm:1"]}).json()["rows"]
    by = {r["hardware"]: r for r in rows}
    listed = mb.load_hardware("groq-lpu").api_price("llama-3.1-8b")
    assert listed is not None and by["groq-lpu"]["api_price"] == api_price_text("groq-lpu", "llama-3.1-8b")
    assert f"${listed.output_usd_per_million:g} per million output tokens" in by["groq-lpu"]["api_price"]
    assert by["h100-sxm"]["api_price"] is None          # a GPU is rented by the hour, not sold per token


def test_a_bug_in_the_fast_mode_reading_is_a_note_and_the_curve_still_comes(client, monkeypatch, caplog):
    import membound.present.app.api as app_api
    def broken(*_a, **_k):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(app_api, "serve_curve", broken)
    r = client.post("/api/serve", json={"model": "llama-3.1-8b", "device": "h100-sxm:1", "concurrency": "1,8"})
    assert r.status_code == 200 and [p["concurrency"] for p in r.json()["points"]] == [1, 8]
    assert r.json()["fast_mode"] is None
    assert r.json()["notes"] == ["fast mode not shown: internal error (ZeroDivisionError); see the server log"]
    assert "fast-mode reading failed" in caplog.text          # the traceback goes to the server's log


def test_name_fields_pass_the_bundled_name_not_the_text(client):
    # "NVIDIA H100 SXM" and "meta-llama/Llama-3.1-8B" are aliases: the answer names the bundled entries
    r = client.post("/api/compare", json={"model": "meta-llama/Llama-3.1-8B", "devices": ["NVIDIA H100 SXM:1"],
                                          "runtime": "VLLM"})
    assert r.status_code == 200, r.json()
    d = r.json()
    assert (d["model"], d["rows"][0]["hardware"], d["workload"]["runtime"]) == ("llama-3.1-8b", "h100-sxm", "vllm")
