"""The benchmark believes nothing a server says that physics forbids (issue 31, High 2 and
Medium 4): usage above max_tokens, above the streamed chunks by more than the stated factor,
prompt + completion or running totals in completion_tokens, a speed beyond the device's
roofline; calibration refuses such samples; every output path is checked before the first
request; CR-only SSE line ends are read (Low). Real servers on 127.0.0.1, standard library."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import membound as mb
from membound.present import bench
from membound.present.bench import client, trust
from membound.present.cli import main

PROMPT_TOKENS = 40     # what every fake server reports as the prompt's tokens
MODES = ["ok", "continuous", "prompt-changes", "over-cap", "per-chunk", "at-factor", "prompt-plus", "prompt-plus-eos",
         "running", "shrinking", "honest-eos", "many-chunks", "cr", "crlf"]


class _Liar(BaseHTTPRequestHandler):
    """The served model name picks the lie; every stream sends `chunks` text chunks (default 3)."""

    protocol_version = "HTTP/1.1"
    served_total = 0        # the "running" server's count over all its requests
    lock = threading.Lock()
    posts = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": m} for m in MODES]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        type(self).posts += 1
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self._stream(req["model"], req["max_tokens"])
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, obj, eol=b"\n"):
        self.wfile.write(b"data: " + json.dumps(obj).encode() + eol + eol)

    def _stream(self, mode, max_tokens):
        n = {"many-chunks": max_tokens + 1, "long": 200}.get(mode, 3)
        eol = {"cr": b"\r", "crlf": b"\r\n"}.get(mode, b"\n")
        for i in range(n):
            self._send({"choices": [{"delta": {"content": f"t{i} "}, "finish_reason": None}]}, eol)
            if mode == "shrinking" and i == 1:
                self._send({"choices": [], "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 2}}, eol)
            if mode in ("continuous", "prompt-changes"):   # vLLM's continuous_usage_stats: a count with every chunk
                prompt = PROMPT_TOKENS + (i if mode == "prompt-changes" else 0)
                self._send({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": i + 1}}, eol)
        self._send({"choices": [{"delta": {}, "finish_reason": "stop"}]}, eol)
        with self.lock:
            type(self).served_total += n
            running = type(self).served_total
        completion = {"over-cap": 100_000, "per-chunk": 17 * n, "at-factor": 16 * n,
                      "prompt-plus": PROMPT_TOKENS + n, "prompt-plus-eos": PROMPT_TOKENS + n + 1,
                      "running": running, "shrinking": 1, "honest-eos": n + 1}.get(mode, n)
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": completion,
                 "total_tokens": PROMPT_TOKENS + completion}
        self._send({"choices": [], "usage": usage}, eol)
        self.wfile.write(b"data: [DONE]" + eol + eol)
        self.wfile.flush()


@pytest.fixture(scope="module")
def liar():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Liar)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("mode, max_tokens, message", [
    # the attack as written: 100,000 completion tokens on a request capped at 256
    ("over-cap", 256, "completion_tokens=100000 exceeds the request's max_tokens=256"),
    # 17 tokens a chunk over 3 chunks = 51 > 16 x 3 = 48 (under the cap of 256)
    ("per-chunk", 256, "completion_tokens=51 for 3 chunks of text: more than 16 tokens a chunk"),
    # prompt + completion: 40 + 3 = 43, under the cap and under 16 a chunk
    ("prompt-plus", 256, "completion_tokens=43 is prompt_tokens=40 \\+ the 3 chunks"),
    ("prompt-plus-eos", 256, "completion_tokens=44 is prompt_tokens=40 \\+ the 3 chunks"),
    # a count that falls within one stream (2, then 1)
    ("shrinking", 256, "completion_tokens=1"),
    # no usage at all, but 9 text chunks on max_tokens=8: each chunk is at least one token
    ("many-chunks", 8, "more text chunks than the request's max_tokens=8"),
    # the prompt's count changes within one stream (40, then 41)
    ("prompt-changes", 256, "prompt_tokens=41 but an earlier report of this stream said 40"),
])
def test_impossible_usage_is_a_protocol_fault(liar, mode, max_tokens, message):
    s = bench.stream_chat(liar, mode, "hi", max_tokens=max_tokens, timeout_s=5)
    assert s.error_kind == "protocol" and not s.ok, (s.error_kind, s.error)
    import re
    assert re.search(message, s.error), s.error
    assert s.output_tokens <= max_tokens          # the lie never reached the sample


@pytest.mark.parametrize("mode, tokens", [
    ("ok", 3), ("honest-eos", 4),     # an end token beyond the text chunks: 3 + 1
    ("at-factor", 48),                # exactly 16 a chunk (3 x 16) is allowed
    ("cr", 3), ("crlf", 3),           # the SSE spec's other line ends
    ("continuous", 3),                # a count with every chunk (1, 2, 3), then the final 3
])
def test_possible_usage_is_believed(liar, mode, tokens):
    s = bench.stream_chat(liar, mode, "hi", max_tokens=256, timeout_s=5)
    assert s.ok, (s.error_kind, s.error)
    assert (s.output_tokens, s.chunks, s.tokens_source) == (tokens, 3, "usage")


def test_a_larger_stated_factor_admits_larger_chunks(liar):
    # 51 tokens over 3 chunks is 17 a chunk: refused at 16, believed at 17
    s = bench.stream_chat(liar, "per-chunk", "hi", max_tokens=256, timeout_s=5, max_tokens_per_chunk=17)
    assert s.ok and s.output_tokens == 51


def test_cr_only_lines_split_across_reads():
    class _Pieces:
        def __init__(self, pieces):
            self.pieces = list(pieces)

        def read1(self, n):
            return self.pieces.pop(0) if self.pieces else b""
    dl = client._Deadline(5)
    # a CRLF cut between two reads is one line end, not two (which would end the event early)
    lines = list(client._lines(_Pieces([b"data: a\r", b"\ndata: b\r", b"\r", b"data: c\rdata: d"]), dl, None))
    assert list(bench.iter_sse(lines)) == ["a\nb", "c\nd"]


def test_running_totals_are_refused_by_the_run(liar):
    _Liar.served_total = 0
    res = bench.run(liar, "running", ["hi"], repeats=4, long_context=False, warmup=1, timeout_s=5)
    # the warm-up counted 3, so the four report 6, 9, 12, 15: each >= the one before + its own 3 chunks
    assert [s.error_kind for s in res.samples] == ["protocol"] * 4
    assert "running total" in res.samples[0].error and any("running totals" in n for n in res.notes)
    assert [s.output_tokens for s in res.samples] == [3] * 4        # counted as the chunks that came
    assert [r.tokens for r in res.rounds] == [3] * 4


def test_an_honest_run_keeps_its_counts(liar):
    res = bench.run(liar, "ok", ["hi"], repeats=4, long_context=False, warmup=1, timeout_s=5)
    assert [(s.ok, s.output_tokens) for s in res.samples] == [(True, 3)] * 4


def test_the_roofline_ceiling_by_hand():
    # llama-3.2-1b in bf16 on one H100 SXM at batch 1: the weights stream once a token.
    m, hw = mb.load_model("llama-3.2-1b"), mb.load_hardware("h100-sxm")
    weight_bytes = mb.estimate(m, hw, batch=1, prompt_tokens=1, output_tokens=2, runtime="ideal").memory.weights_bytes
    ceiling = trust.ceiling_tok_s(m, hw)
    # bytes over bandwidth: weight_bytes / bandwidth per token (the 1-token KV cache adds next to nothing)
    assert ceiling == pytest.approx(hw.bandwidth_bytes_s / weight_bytes, rel=0.02)
    assert trust.speed_limit_tok_s(m, hw) == pytest.approx(10 * ceiling)


def _fake_result(rate_tok_s: float, n: int = 3):
    """A BenchResult of `n` complete requests of 256 usage tokens decoded at rate_tok_s."""
    samples = [bench.Sample(prompt="p", round=r, ttft_s=0.1, total_s=0.1 + 256 / rate_tok_s, output_tokens=256,
                            tokens_source="usage", chunks=20) for r in range(n)]
    rounds = [bench.Round("p", 1, r, 0.1 + 256 / rate_tok_s, 256) for r in range(n)]
    return bench.BenchResult("http://x", "m", samples=samples, rounds=rounds, prompt_chars={"p": 400})


def test_a_speed_beyond_the_roofline_is_refused_and_not_calibrated():
    limit = trust.speed_limit_tok_s("llama-3.2-1b", "h100-sxm")
    fast = trust.vet(_fake_result(1e9), "llama-3.2-1b", "h100-sxm")
    assert [s.error_kind for s in fast.samples] == ["protocol"] * 3
    assert "beyond 10x the roofline ceiling of one h100-sxm" in fast.samples[0].error
    assert [r.tokens for r in fast.rounds] == [20] * 3                 # recounted as the 20 chunks
    assert fast.stats()[0].decode_median_tok_s is None
    slow = trust.vet(_fake_result(0.9 * limit), "llama-3.2-1b", "h100-sxm")
    assert all(s.ok for s in slow.samples)
    with pytest.raises(mb.InvalidInputError, match="complete requests"):      # nothing left to fit
        bench.fit_runtime(_fake_result(1e9), "llama-3.2-1b", "h100-sxm")
    with pytest.raises(mb.InvalidInputError, match="decode_tok_s"):
        bench.fit_runtime([bench.Point(1, 100, 256, 1e9)], "llama-3.2-1b", "h100-sxm")


def test_the_cli_counts_a_too_fast_server_as_failed(liar, capsys, tmp_path):
    # 405B bf16 weights (~810 GB) over an M1's 68.25 GB/s: about 0.084 tok/s, so the limit is about
    # 0.84 tok/s and the fake server's 3 chunks, sent at once (milliseconds), are far beyond it
    assert trust.speed_limit_tok_s("llama-3.1-405b", "apple-m1") == pytest.approx(10 * 68.25e9 / 810e9, rel=0.05)
    rc = main(["bench", liar, "--served-model", "ok", "--repeats", "1", "--no-long-context", "--warmup", "0",
               "--quiet", "--model", "llama-3.1-405b", "--hardware", "apple-m1",
               "--calibrate", str(tmp_path / "rt.yaml")])
    out = capsys.readouterr().out
    assert rc == 1 and "0/1" in out and "roofline" in out
    assert not (tmp_path / "rt.yaml").exists()


@pytest.mark.parametrize("flag, name, message", [
    ("--calibrate", "missing/rt.yaml", "does not exist"), ("--calibrate", "rt.txt", ".yaml or .yml"),
    ("--calibrate", "folder.yaml", "not a folder"), ("--save", "missing/raw.csv", "does not exist"),
    ("--save", "raw.txt", ".csv or .json"),
])
def test_every_output_path_is_checked_before_the_first_request(liar, tmp_path, capsys, flag, name, message):
    (tmp_path / "folder.yaml").mkdir()
    before = _Liar.posts
    rc = main(["bench", liar, "--served-model", "ok", "--repeats", "1", "--no-long-context", "--quiet",
               "--model", "llama-3.2-1b", "--hardware", "h100-sxm", flag, str(tmp_path / name)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{flag}=" in err and message in err and len(err.strip().splitlines()) == 1
    assert _Liar.posts == before


def test_saved_csv_cells_are_formula_safe(liar, tmp_path):
    import csv
    res = bench.run(liar, "over-cap", [bench.Prompt("=HYPERLINK(\"http://x\")", "hi")], repeats=1,
                    long_context=False, warmup=0, timeout_s=5, max_tokens=256)
    (row,) = csv.DictReader((res.save(tmp_path / "s.csv")).open())
    assert row["prompt"] == "'=HYPERLINK(\"http://x\")" and row["error_kind"] == "protocol"
