"""membound.present.bench against real fault servers on 127.0.0.1 (standard library, one thread per
request, every loop bounded so a handler stops by itself): a server that drips one byte every
0.5 s, one that sends JSON of the wrong shape, impossible usage figures, a line with no end,
a stream cut after its finish_reason, and a Ctrl-C in the middle of a run. Also --save checked
before the first request and kept up to date while the run goes."""
import _thread
import json
import shutil
import signal
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import membound as mb
from membound.present import bench

DRIP_HOLD_S = 10.0   # how long a dripping server holds a request: a deadline test's bounds are read against it
WRONG_SHAPES = {"list": [1, 2, 3], "null": None, "string": "hello", "choices-of-int": {"choices": [1]},
                "int-content": {"choices": [{"delta": {"content": 7}, "finish_reason": None}]}}


class _Faults(BaseHTTPRequestHandler):
    """The served model name picks the behaviour; the prompt text "slow" streams for ~3 s and
    interrupts the main thread (Ctrl-C) once, 0.3 s after it arrives."""

    protocol_version = "HTTP/1.1"
    posts = 0
    interrupted_once = threading.Event()

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": m} for m in ["ok", "drip", "huge", "no-done", "neg-usage",
                                                        "bad-total", "few-tokens", *WRONG_SHAPES]]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        type(self).posts += 1
        try:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self._stream(req["model"], req["messages"][-1]["content"])
        except (BrokenPipeError, ConnectionResetError):   # the client gave up: stop
            pass

    def _event(self, obj):
        self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()

    def _text(self, t, reason=None):
        self._event({"choices": [{"delta": {"content": t}, "finish_reason": reason}]})

    def _stream(self, mode, prompt):
        if mode == "drip":                      # one byte per 0.5 s, never a newline, 10 s at most
            for _ in range(int(DRIP_HOLD_S / 0.5)):
                self.wfile.write(b"d")
                self.wfile.flush()
                time.sleep(0.5)
            return
        if mode == "huge":                      # 200 MB in one line, 1 MB at a time
            piece = b"x" * 1_000_000
            self.wfile.write(b"data: ")
            for _ in range(200):
                self.wfile.write(piece)
            return
        if mode in WRONG_SHAPES:
            self._text("a")
            self._event(WRONG_SHAPES[mode])
            self._text("b", "stop")
            self.wfile.write(b"data: [DONE]\n\n")
            return
        n = 30 if prompt.endswith("slow") else 3
        if prompt.endswith("slow") and not self.interrupted_once.is_set():
            self.interrupted_once.set()
            threading.Timer(0.3, _thread.interrupt_main).start()
        for i in range(n):
            self._text(f"t{i} ")
            time.sleep(0.1 if prompt.endswith("slow") else 0.0)
        self._text("", "stop")
        usage = {"ok": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n},
                 "neg-usage": {"prompt_tokens": 5, "completion_tokens": -5},
                 "bad-total": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 1},
                 "few-tokens": {"prompt_tokens": 5, "completion_tokens": 1}}.get(mode)
        if usage:
            self._event({"choices": [], "usage": usage})
        if mode != "no-done":
            self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture(scope="module")
def faults():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Faults)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_the_ok_stream_is_ok(faults):
    s = bench.stream_chat(faults, "ok", "hi", timeout_s=5)
    assert s.ok, s.error
    assert (s.chunks, s.output_tokens, s.prompt_tokens, s.tokens_source) == (3, 3, 5, "usage")


def test_drip_server_fails_within_timeout_plus_one_second(faults, capsys):
    # one byte every 0.5 s keeps every idle wait short: only the wall-clock deadline ends it. The
    # drip holds a request 10 s; the bound is half of that (it ends after ~1.0 s), not 1 s + a thin
    # margin a loaded 2-core CI machine can eat: it tells a deadline kept from one waited out
    t = time.monotonic()
    s = bench.stream_chat(faults, "drip", "hi", timeout_s=1.0)
    assert time.monotonic() - t < DRIP_HOLD_S / 2
    assert s.error_kind == "timeout" and "1 s deadline" in s.error and not s.ok
    # the same through the command line's --timeout
    from membound.present.cli import main
    t = time.monotonic()
    rc = main(["bench", faults, "--served-model", "drip", "--timeout", "1", "--repeats", "1",
               "--no-long-context", "--warmup", "0", "--quiet"])
    assert time.monotonic() - t < DRIP_HOLD_S / 2      # one request, plus the GET /v1/models (~1.1 s)
    assert rc == 1 and "timeout 1" in capsys.readouterr().out


def test_a_200mb_line_is_not_buffered_whole(faults):
    tracemalloc.start()
    try:
        s = bench.stream_chat(faults, "huge", "hi", timeout_s=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.error_kind == "protocol" and "longer than" in s.error
    # lines are cut at MAX_LINE_BYTES = 4 MB: the client held a few of those, not 200 MB
    assert peak < 5 * bench.client.MAX_LINE_BYTES, peak


@pytest.mark.parametrize("shape", list(WRONG_SHAPES))
def test_wrong_shape_json_fails_the_request(faults, shape):
    s = bench.stream_chat(faults, shape, "hi", timeout_s=5)
    assert s.error_kind == "protocol" and not s.ok, (s.error_kind, s.error)
    assert s.chunks == 1       # the text before the bad chunk is kept


def test_wrong_shape_json_is_reported_as_failed_by_run(faults):
    res = bench.run(faults, "choices-of-int", ["hi"], repeats=2, long_context=False, warmup=0, timeout_s=5)
    (st,) = res.stats()
    assert (st.requests, st.ok, st.errors) == (2, 0, {"protocol": 2})
    assert st.ttft_median_s is None


@pytest.mark.parametrize("mode, message", [
    ("neg-usage", "completion_tokens=-5"),
    ("bad-total", "total_tokens=1 is not prompt_tokens \\+ completion_tokens = 8"),   # 5 + 3
    ("few-tokens", "completion_tokens=1 but 3 chunks"),
])
def test_impossible_usage_figures_fail_the_request(faults, mode, message):
    s = bench.stream_chat(faults, mode, "hi", timeout_s=5)
    assert s.error_kind == "protocol"
    import re
    assert re.search(message, s.error), s.error


def test_negative_usage_with_a_comparison_still_prints_the_measurements(faults, capsys):
    from membound.present.cli import main
    rc = main(["bench", faults, "--served-model", "neg-usage", "--repeats", "1", "--no-long-context",
               "--warmup", "0", "--quiet", "--model", "llama-3.2-1b", "--hardware", "h100-sxm"])
    out = capsys.readouterr().out
    assert rc == 1 and "0/1" in out and "protocol" in out and "completion_tokens=-5" in out


def test_a_stream_without_done_is_not_ok(faults):
    s = bench.stream_chat(faults, "no-done", "hi", timeout_s=5)
    assert s.error_kind == "dropped" and s.finish_reason == "stop" and not s.ok


def test_ctrl_c_marks_requests_in_flight_interrupted(faults, tmp_path):
    # Ctrl-C as Python delivers it by default (KeyboardInterrupt in the main thread): interrupt_main
    # does nothing where something earlier in the process left SIGINT ignored or at its OS default
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_marks_requests_in_flight_interrupted(tmp_path, faults)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_marks_requests_in_flight_interrupted(tmp_path, faults):
    _Faults.interrupted_once.clear()
    res = bench.run(faults, "ok", ["fast", "slow", "fast again"], repeats=1, long_context=False, warmup=0,
                    timeout_s=10, unique=False, save=tmp_path / "raw.json")
    assert res.interrupted
    # "fast" finished before the interrupt; "slow" was in flight; "fast again" was never sent
    assert [(s.prompt, s.error_kind) for s in res.samples] == [("prompt-1", ""), ("prompt-2", "interrupted")]
    stats = {st.prompt: st for st in res.stats()}
    assert stats["prompt-2"].ok == 0 and stats["prompt-2"].ttft_median_s is None
    assert stats["prompt-2"].errors == {"interrupted": 1}
    assert [r.prompt for r in res.rounds] == ["prompt-1"]        # the interrupted round is not counted
    saved = json.loads((tmp_path / "raw.json").read_text())
    assert [s["error_kind"] for s in saved["samples"]] == ["", "interrupted"] and saved["interrupted"]
    time.sleep(0.3)       # the cancelled request's thread stops at its next read ...
    assert res.samples[1].error_kind == "interrupted"            # ... and cannot change the result


@pytest.mark.parametrize("name, message", [("raw.txt", ".csv or .json"), ("missing/raw.csv", "does not exist"),
                                           ("folder.json", "not a folder")])
def test_save_is_checked_before_the_first_request(faults, tmp_path, name, message):
    (tmp_path / "folder.json").mkdir()
    before = _Faults.posts
    with pytest.raises(mb.InvalidInputError, match=message):
        bench.run(faults, "ok", ["hi"], repeats=1, long_context=False, warmup=1, save=tmp_path / name)
    assert _Faults.posts == before


def test_samples_are_appended_as_they_finish_and_a_save_failure_keeps_the_run(faults, tmp_path):
    target = tmp_path / "raw.csv"
    lines = []
    res = bench.run(faults, "ok", ["hi"], repeats=3, long_context=False, warmup=0, timeout_s=5, save=target,
                    progress=lambda s: lines.append(len((tmp_path / "raw.csv.partial").read_text().splitlines())))
    assert lines == [1, 2, 3]                  # each request is on disk before the next one starts
    assert res.saved_to == target and not (tmp_path / "raw.csv.partial").exists()
    assert target.read_text().count("\n") == 1 + 3   # header + 3 rows, written at the end
    # the folder disappears after the first request: appends and the final save fail, the run goes on
    gone = tmp_path / "gone"
    gone.mkdir()
    res = bench.run(faults, "ok", ["hi"], repeats=3, long_context=False, warmup=0, timeout_s=5,
                    save=gone / "raw.json", progress=lambda s: shutil.rmtree(gone, ignore_errors=True))
    assert [s.ok for s in res.samples] == [True, True, True] and res.saved_to is None
    assert any("could not save" in n for n in res.notes) and any("could not append" in n for n in res.notes)


def test_a_worker_exception_becomes_that_requests_error(faults, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("a bug in the client")
    monkeypatch.setattr(bench.harness, "stream_chat", boom)
    res = bench.run(faults, "ok", ["hi"], concurrency=2, repeats=1, long_context=False, warmup=0)
    assert [(s.error_kind, s.ok) for s in res.samples] == [("client", False)] * 2
    assert "a bug in the client" in res.samples[0].error


class _DripAll(BaseHTTPRequestHandler):
    """Every reply, GET /v1/models included, drips one byte per 0.5 s (10 s at most)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _drip(self):
        try:
            if self.command == "POST":
                self.rfile.read(int(self.headers["Content-Length"]))
            for _ in range(int(DRIP_HOLD_S / 0.5)):
                self.wfile.write(b"H")
                self.wfile.flush()
                time.sleep(0.5)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = _drip


def test_a_server_that_drips_even_its_headers_cannot_hold_the_run(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _DripAll)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        t = time.monotonic()
        # GET /v1/models (deadline 1 s) and one request (deadline 1 s): both give up on time
        res = bench.run(f"http://127.0.0.1:{srv.server_address[1]}", "m", ["hi"], repeats=1, warmup=0,
                        long_context=False, timeout_s=1.0)
        assert time.monotonic() - t < DRIP_HOLD_S       # ~2.0 s; waited out: 2 x 10 s
        assert [s.error_kind for s in res.samples] == ["timeout"]
    finally:
        srv.shutdown()
        srv.server_close()
