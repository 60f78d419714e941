"""membound.present.bench: SSE parsing, statistics, prompts, saving, the fit, and the client against a
small paced SSE server written here (standard library, loopback only)."""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import membound as mb
from membound.present import bench
from membound.present.bench import BenchResult, Point, Round, Sample
from membound.catalog.hardware import Hardware, LatencyFloor, MemoryTier


# ---- pure functions ------------------------------------------------------------------------
def test_decode_rate_is_output_tokens_over_time_after_first_token():
    # 100 tokens, TTFT 0.5 s, total 2.0 s: 100 / (2.0 - 0.5) = 66.67 tok/s
    assert bench.decode_rate(100, 0.5, 2.0) == pytest.approx(100 / 1.5)
    assert bench.decode_rate(100, 0.5, 2.0) == pytest.approx(66.667, abs=1e-3)
    s = Sample(ttft_s=0.5, total_s=2.0, output_tokens=100)
    assert s.ok and s.decode_tok_s == pytest.approx(66.667, abs=1e-3)
    # nothing to divide by: no first token, or no time after it
    assert bench.decode_rate(100, None, 2.0) is None
    assert bench.decode_rate(1, 0.5, 0.5) is None
    assert bench.decode_rate(0, 0.5, 2.0) is None


def test_iter_sse_events_comments_multiline_and_crlf():
    lines = [b": keep-alive\r\n", b"data: {\"a\": 1}\r\n", b"\r\n",
             b"event: message\n", b"id: 7\n", b"data: line one\n", b"data: line two\n", b"\n",
             b"\n", b"data:[DONE]\n"]           # no blank line after the last event
    assert list(bench.iter_sse(lines)) == ['{"a": 1}', "line one\nline two", "[DONE]"]
    assert list(bench.iter_sse(["data: x", "", ""])) == ["x"]


def test_chat_url_forms():
    assert bench.client.chat_url("http://127.0.0.1:8000") == ("http", "127.0.0.1", 8000, "/v1/chat/completions")
    assert bench.client.chat_url("http://h:1/v1/") == ("http", "h", 1, "/v1/chat/completions")
    assert bench.client.chat_url("https://api.x.com/v1/chat/completions") == (
        "https", "api.x.com", 443, "/v1/chat/completions")
    assert bench.client.chat_url("localhost:9") == ("http", "localhost", 9, "/v1/chat/completions")
    with pytest.raises(mb.InvalidInputError, match="url"):
        bench.client.chat_url("ftp://x")


def test_percentile_is_linear_between_order_statistics():
    vals = list(range(1, 11))            # 1..10: p90 at rank 0.9 * 9 = 8.1 -> 9 + 0.1 * (10 - 9) = 9.1
    assert bench.percentile(vals, 90) == pytest.approx(9.1)
    assert bench.percentile(vals, 50) == pytest.approx(5.5)
    assert bench.percentile(vals, 10) == pytest.approx(1.9)   # rank 0.9 -> 1 + 0.9 * 1
    assert bench.percentile([None, None], 50) is None


def _sample(prompt, c, r, ttft, total, tokens, **kw):
    return Sample(prompt=prompt, concurrency=c, round=r, ttft_s=ttft, total_s=total, output_tokens=tokens, **kw)


def test_level_stats_medians_tails_aggregate_and_errors():
    # three complete requests: TTFT 0.2, 0.4, 0.6 s; 100 tokens each over (total - TTFT) = 1, 2, 4 s
    ok = [_sample("p", 2, 0, 0.2, 1.2, 100), _sample("p", 2, 0, 0.4, 2.4, 100), _sample("p", 2, 1, 0.6, 4.6, 100)]
    bad = [_sample("p", 2, 1, 0.3, 0.9, 12, error_kind="dropped", error="gone"),
           _sample("p", 2, 2, None, 0.01, 0, error_kind="connection", error="refused")]
    rounds = [Round("p", 2, 0, 2.5, 200), Round("p", 2, 1, 5.0, 112), Round("p", 2, 2, 0.01, 0)]
    st = bench.level_stats("p", 2, ok + bad, rounds)
    assert (st.requests, st.ok, st.errors) == (5, 3, {"dropped": 1, "connection": 1})
    assert st.ttft_median_s == pytest.approx(0.4)
    assert st.ttft_p90_s == pytest.approx(0.4 + 0.8 * (0.6 - 0.4))     # rank 0.9 * 2 = 1.8
    # decode 100, 50, 25 tok/s: median 50; p90 (slow tail) = 10th percentile, rank 0.2: 25 + 0.2 * 25 = 30
    assert st.decode_median_tok_s == pytest.approx(50.0)
    assert st.decode_p90_tok_s == pytest.approx(30.0)
    # aggregate per round: 200 / 2.5 = 80, 112 / 5 = 22.4, the empty round has none -> median 51.2
    assert st.aggregate_median_tok_s == pytest.approx((80 + 22.4) / 2)
    # decode intervals (all start at 0): round 0 [0.2, 1.2] and [0.4, 2.4] -> 1 + 2 = 3 s over a
    # union of 2.2 s; round 1 [0.6, 4.6] and the dropped [0.3, 0.9] -> 4.6 s over 4.3 s; round 2 none
    assert st.effective_concurrency == pytest.approx((3 / 2.2 + 4.6 / 4.3) / 2)
    assert st.output_tokens_median == 100


def test_decode_overlap_one_after_another_vs_together():
    # served one after another: decode [0.1, 1.0] then [1.1, 2.0] -> 0.9 + 0.9 over 1.8 = 1
    serial = [Sample(start_s=0, ttft_s=0.1, total_s=1.0), Sample(start_s=0, ttft_s=1.1, total_s=2.0)]
    assert bench.harness.decode_overlap(serial) == pytest.approx(1.0)
    # together: [0.1, 1.0] and [0.2, 1.0] -> 0.9 + 0.8 over 0.9
    together = [Sample(start_s=0, ttft_s=0.1, total_s=1.0), Sample(start_s=0.1, ttft_s=0.1, total_s=0.9)]
    assert bench.harness.decode_overlap(together) == pytest.approx(1.7 / 0.9)
    assert bench.harness.decode_overlap([Sample()]) is None


def test_prefill_cost_is_the_ttft_difference():
    res = BenchResult(url="u", model="m", pairs={"p+30kctx": "p"})
    res.samples += [_sample("p", 1, i, t, t + 1, 10, prompt_tokens=500) for i, t in enumerate((0.5, 0.6, 0.4))]
    res.samples += [_sample("p+30kctx", 1, i, t, t + 1, 10, prompt_tokens=30500)
                    for i, t in enumerate((2.5, 2.7, 2.6))]
    (pc,) = res.prefill_costs()
    assert pc["prefill_cost_s"] == pytest.approx(2.6 - 0.5)          # medians 2.6 and 0.5
    assert pc["extra_prompt_tokens"] == 30000
    text = str(res)
    assert "prefill cost" in text and "2.1 s" in text


def test_save_csv_and_json_keep_every_sample(tmp_path):
    res = BenchResult(url="u", model="m")
    res.samples += [_sample("p", 1, 0, 0.5, 2.0, 100, gaps_s=[0.01, 0.02]),
                    _sample("p", 1, 1, 0.5, 0.7, 3, error_kind="dropped", error="x")]
    res.rounds += [Round("p", 1, 0, 2.0, 100)]
    data = json.loads(res.save(tmp_path / "s.json").read_text())
    assert [s["ok"] for s in data["samples"]] == [True, False]
    assert data["samples"][0]["decode_tok_s"] == pytest.approx(100 / 1.5)
    assert data["rounds"][0]["wall_s"] == 2.0
    import csv
    rows = list(csv.DictReader((tmp_path / "s.csv").open()) if res.save(tmp_path / "s.csv") else [])
    assert len(rows) == 2 and rows[0]["gaps_s"] == "0.010000;0.020000" and rows[1]["error_kind"] == "dropped"
    with pytest.raises(mb.InvalidInputError, match="save"):
        res.save(tmp_path / "s.txt")


# ---- prompts -------------------------------------------------------------------------------
def test_shipped_prompts():
    p = bench.RATE_LIMITER
    for word in ("token bucket", "sliding window", "fixed window", "pytest"):
        assert word in p.text.lower().replace("-", " ").replace("_", " ")
    lc = bench.long_context(p, 30_000)
    assert lc.name == "rate-limiter+30kctx" and lc.text.endswith(p.text)
    doc = bench.documentation_text(30_000)
    assert len(doc) == 30_000 * 4                      # 4 characters per token
    assert doc == bench.documentation_text(30_000)     # deterministic
    assert len(bench.documentation_text(0)) == 0
    with pytest.raises(mb.InvalidInputError, match="context_tokens"):
        bench.documentation_text(-1)


def test_load_prompts(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["one", {"name": "two", "prompt": "second"}]))
    (tmp_path / "b.jsonl").write_text('{"prompt": "x"}\n\n"y"\n')
    (tmp_path / "c.txt").write_text("whole\n\nfile")
    assert [(p.name, p.text) for p in bench.load_prompts(tmp_path / "a.json")] == [("a-1", "one"), ("two", "second")]
    assert [p.text for p in bench.load_prompts(tmp_path / "b.jsonl")] == ["x", "y"]
    assert bench.load_prompts(tmp_path / "c.txt") == [bench.Prompt("c", "whole\n\nfile")]
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(mb.ProfileError, match=r"\[0\]"):
        bench.load_prompts(tmp_path / "bad.json")
    with pytest.raises(mb.ProfileError, match="no such"):
        bench.load_prompts(tmp_path / "missing.txt")


# ---- the fit -------------------------------------------------------------------------------
BW = 1.0e11   # B/s

def _device():
    return Hardware(name="test-dev", display_name="test", vendor="t", kind="cpu",
                    memory=(MemoryTier(name="m", capacity_bytes=1e12, bandwidth_bytes_s=BW, source="test"),),
                    compute_flops={"bf16": 1e18, "fp32": 1e18}, compute_source="test",
                    latency=LatencyFloor(per_layer_s=0.0, per_step_s=0.0))


def _model():
    return mb.Model(name="fit-test", n_layers=4, hidden_size=1024, n_heads=8, n_kv_heads=8, head_dim=128,
                    ffn_size=4096, vocab_size=32000)


def _memory_s(m, batch, S, T):
    # bf16: 2 bytes per weight; KV per (layer, token) = 2 (K,V) * 8 heads * 128 * 2 bytes = 4096 bytes;
    # a step at the mean context (the steps see S .. S+T-1 tokens: mean S + (T-1)/2) streams the
    # weights once (of the untied 32000 x 1024 input embedding only the `batch` rows looked up)
    # and the KV of every sequence.
    weights = (m.total_params - 32000 * 1024 + batch * 1024) * 2
    kv = batch * m.n_layers * (S + (T - 1) / 2) * 2 * 8 * 128 * 2
    return (weights + kv) / BW


def test_fit_recovers_fraction_and_overhead():
    m, hw = _model(), _device()
    f_true, o_true = 0.5, 2e-3
    levels = [(1, 4096, 256), (8, 4096, 256), (32, 4096, 256)]
    pts = [Point(b, S, T, 1.0 / (_memory_s(m, b, S, T) / f_true + o_true)) for b, S, T in levels]
    cal = bench.fit_runtime(pts, m, hw)
    assert cal.identifiable
    assert cal.bandwidth_fraction == pytest.approx(0.5, rel=0.01)
    assert cal.per_step_overhead_s == pytest.approx(2e-3, rel=0.02)
    assert cal.rms_relative_error < 0.01
    # the Runtime goes back into estimate(): the batch-8 speed comes back within 1%
    r = mb.estimate(m, hw, batch=8, prompt_tokens=4096, output_tokens=256, runtime=cal.runtime)
    assert r.decode_tok_s_per_user == pytest.approx(pts[1].decode_tok_s, rel=0.01)


def test_fit_with_one_level_keeps_the_device_fraction(tmp_path):
    m, hw = _model(), _device()          # device fraction: the Achievable default 0.8
    mem = _memory_s(m, 1, 100, 100)
    t = mem / 0.8 + 5e-3                  # measured step: memory at 80% plus 5 ms
    cal = bench.fit_runtime([Point(1, 100, 100, 1.0 / t)], m, hw)
    assert not cal.identifiable and cal.bandwidth_fraction == 0.8
    assert cal.per_step_overhead_s == pytest.approx(5e-3, rel=1e-6)
    back = bench.load_runtime_file(cal.save(tmp_path / "rt.yaml"))
    assert back == cal.runtime
    with pytest.raises(mb.InvalidInputError, match="measured"):
        bench.fit_runtime([], m, hw)


def test_compare_puts_the_ceiling_beside_the_measurement():
    m, hw = _model(), _device()
    res = BenchResult(url="u", model="m")
    res.samples += [_sample("p", 1, i, 0.1, 1.1, 100, prompt_tokens=1000) for i in range(3)]
    res.rounds += [Round("p", 1, i, 1.1, 100) for i in range(3)]
    (row,) = bench.compare(res, m, hw)
    assert row.prompt_tokens == 1000 and row.output_tokens == 100 and row.prompt_tokens_source == "usage"
    assert row.decode_tok_s[0] == pytest.approx(100.0)          # 100 tokens over 1.0 s
    # ceiling (ideal: full bandwidth) ~ 1 / memory time at the mean context 1000 + 49.5
    assert row.decode_tok_s[2] == pytest.approx(1.0 / _memory_s(m, 1, 1000, 100), rel=0.01)
    assert row.decode_tok_s[1] < row.decode_tok_s[2]            # the device's 80% is below it


def test_local_cpu_hardware_given_bandwidth():
    hw = bench.local_cpu_hardware(bandwidth_bytes_s=2.5e10)
    assert hw.kind == "cpu" and hw.bandwidth_bytes_s == 2.5e10 and hw.peak_flops("fp32") > 0
    assert "given" in hw.memory[0].source and "assumed" in hw.compute_source


# ---- the client against a paced server written here ---------------------------------------
class _Paced(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: after `first_s`, `n` text chunks `gap_s` apart, then a
    usage chunk and [DONE]. `mode` in the request's model name picks a fault."""

    protocol_version = "HTTP/1.1"
    first_s, gap_s, n = 0.15, 0.01, 20

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "paced"}, {"id": "drop"}, {"id": "stall"}, {"id": "cut"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):   # the client gave up (timeout test)
            pass

    def _post(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = req["model"]
        if mode == "missing":
            body = b'{"error": {"message": "The model `missing` does not exist."}}'
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(obj):
            self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        event({"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]})
        time.sleep(self.first_s)
        for i in range(self.n):
            if i:
                time.sleep(self.gap_s)
            if mode == "drop" and i == 5:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if mode == "stall" and i == 5:
                time.sleep(1.0)
            event({"choices": [{"delta": {"content": f"t{i} "}, "finish_reason": None}]})
        if mode != "cut":
            event({"choices": [{"delta": {}, "finish_reason": "length"}]})
            event({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": self.n}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def paced():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Paced)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_stream_timing_against_a_paced_server(paced):
    s = bench.stream_chat(paced, "paced", "hi")
    assert s.ok, s.error
    assert (s.output_tokens, s.tokens_source, s.prompt_tokens, s.chunks) == (20, "usage", 42, 20)
    # lower bounds are the server's pacing; upper bounds only leave room for a busy machine
    assert 0.15 <= s.ttft_s < 2.0                      # the server waits 0.15 s before the first text
    assert len(s.gaps_s) == 19 and 0.0095 <= float(np.median(s.gaps_s)) < 0.1
    # 20 tokens over 19 gaps of >= 0.01 s: at most 20 / 0.19 = 105 tok/s (+10% for the reader's jitter)
    assert 5 < s.decode_tok_s <= 1.1 * 20 / 0.19


def test_stream_faults_are_recorded_not_raised(paced):
    drop = bench.stream_chat(paced, "drop", "hi")
    assert drop.error_kind == "dropped" and drop.chunks == 5 and drop.ttft_s is not None
    cut = bench.stream_chat(paced, "cut", "hi")
    assert cut.error_kind == "truncated" and cut.chunks == 20
    stall = bench.stream_chat(paced, "stall", "hi", timeout_s=0.4)
    assert stall.error_kind == "timeout" and stall.chunks == 5
    missing = bench.stream_chat(paced, "missing", "hi")
    assert missing.error_kind == "http" and missing.status == 404 and "does not exist" in missing.error
    port = paced.rsplit(":", 1)[1]
    with socket.socket() as s:          # a port nobody listens on: bind, do not listen
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
        refused = bench.stream_chat(f"http://127.0.0.1:{free}", "paced", "hi", timeout_s=2)
    assert refused.error_kind == "connection" and str(free) in refused.error and port != str(free)


def test_run_levels_rounds_and_model_check(paced, tmp_path):
    res = bench.run(paced, "paced", ["hello"], concurrency=[1, 3], repeats=2, long_context=False,
                    warmup=0, save=tmp_path / "raw.json")
    stats = res.stats()
    assert [(s.concurrency, s.requests, s.ok) for s in stats] == [(1, 2, 2), (3, 6, 6)]
    # this server streams requests in parallel: aggregate ~ 3 x per user at concurrency 3
    assert stats[1].effective_concurrency > 2.0
    assert len(json.loads((tmp_path / "raw.json").read_text())["samples"]) == 8
    unserved = bench.run(paced, "other", ["hello"], repeats=2, long_context=False)
    assert [s.error_kind for s in unserved.samples] == ["model", "model"]
    assert "not served" in str(unserved) and "other" in str(unserved)


def test_cli_bench_against_the_paced_server(paced, tmp_path, capsys):
    from membound.present.cli import main
    rc = main(["bench", paced, "--served-model", "paced", "--concurrency", "1,2", "--repeats", "1",
               "--context-tokens", "200", "--warmup", "0", "--quiet", "--model", "llama-3.2-1b",
               "--hardware", "h100-sxm", "--save", str(tmp_path / "raw.csv")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "prefill cost of the long context" in out and "measured vs predicted" in out
    assert "rate-limiter+200ctx" in out
    # 2 prompts (plain, long) x (1 + 2 requests at the two levels) = 6 rows after the header
    assert (tmp_path / "raw.csv").read_text().count("\n") == 1 + 2 * (1 + 2)


def test_cli_bench_progress_counts_every_request(paced, tmp_path, capsys, monkeypatch):
    import membound.base.progress as progress
    import membound.present.bench.cli as bench_cli
    from membound.present.cli import main
    made = []
    real = progress.bar

    def forced(total, desc, **kw):
        b = real(total, desc, **{**kw, "force": True, "quiet": False})
        made.append(b)
        return b
    monkeypatch.setattr(bench_cli, "bar", forced)          # the name bench's CLI calls
    rc = main(["bench", paced, "--served-model", "paced", "--concurrency", "1,2", "--repeats", "2",
               "--context-tokens", "200", "--warmup", "0"])
    assert rc == 0
    (b,) = made
    # (1 + 2 concurrent requests) x 2 prompts (plain, long) x 2 rounds = 12 requests, all counted
    assert b.total == 12 and b.n == 12
    assert "12/12" in capsys.readouterr().err
