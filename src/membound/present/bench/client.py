"""One streamed chat completion against an OpenAI-compatible endpoint, timed.

POST {base}/v1/chat/completions with `stream: true`; the reply is server-sent events
(`data: {json}` lines, a blank line between events, `data: [DONE]` at the end). Standard
library only (http.client). Every failure (refused connection, deadline or idle timeout, HTTP
error, a stream that stops before its end, a chunk of the wrong shape, an impossible usage
report, any exception) is recorded in the Sample with its kind, never raised; what was
measured before the failure stays in it.
"""
from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from ...errors import InvalidInputError, short_repr

ERROR_KINDS = ("connection", "timeout", "http", "dropped", "truncated", "server", "protocol", "model",
               "client", "interrupted")


@dataclass
class Sample:
    """One request's measurements. Times in seconds from sending the request.

    ttft_s: to the first chunk carrying generated text. gaps_s: between successive text
    chunks. output_tokens: the server's usage report when it sends one
    (tokens_source="usage"), else the number of text chunks ("chunks"). error_kind is ""
    for a complete stream, else one of ERROR_KINDS (partial figures are kept)."""

    prompt: str = ""
    concurrency: int = 1
    round: int = 0
    start_s: float = 0.0            # when it was sent, seconds after its round began
    ttft_s: float | None = None
    total_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    tokens_source: str = "chunks"
    chunks: int = 0
    finish_reason: str | None = None
    error_kind: str = ""
    error: str = ""
    status: int | None = None
    gaps_s: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error_kind == ""

    @property
    def decode_tok_s(self) -> float | None:
        """output_tokens / (total − TTFT) in tokens/s; None when not measurable."""
        return decode_rate(self.output_tokens, self.ttft_s, self.total_s)


def decode_rate(output_tokens: int, ttft_s: float | None, total_s: float | None) -> float | None:
    """Decode speed: output tokens over the time after the first one (tokens/s); None when
    there is no decode time to divide by (no first token, or total <= TTFT)."""
    if ttft_s is None or total_s is None or total_s <= ttft_s or output_tokens <= 0:
        return None
    return output_tokens / (total_s - ttft_s)


def iter_sse(lines: Iterable[bytes | str]) -> Iterator[str]:
    """The data payloads of a server-sent event stream, one string per event. Comment lines
    (`:`) and other fields (event:, id:, retry:) are skipped; several `data:` lines of one
    event are joined with newlines; an unterminated last event is still yielded."""
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
        line = line.rstrip("\r\n")     # one line: its end (CRLF, LF or CR) is all it can end with
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def chat_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of the chat-completions endpoint for a base URL given as
    http://host:port, http://host:port/v1 or the full .../chat/completions path."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError("url", url, "an http(s)://host:port URL of an OpenAI-compatible server")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InvalidInputError("url", url, "a port number between 0 and 65535") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = (path if path.endswith("/v1") else path + "/v1") + "/chat/completions"
    return parts.scheme, parts.hostname, port, path


def _connection(scheme: str, host: str, port: int, timeout_s: float):
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return cls(host, port, timeout=timeout_s)


class _Malformed(ValueError):
    """A stream chunk that is JSON but not the shape of a chat-completion chunk."""


def _text_of(chunk) -> str:
    """The generated text in one chunk; _Malformed when the chunk is not shaped like one."""
    if not isinstance(chunk, dict):
        raise _Malformed(f"a chunk is {type(chunk).__name__}, expected an object")
    choices = chunk.get("choices")
    if choices is None:
        return ""
    if not isinstance(choices, list):
        raise _Malformed(f"'choices' is {type(choices).__name__}, expected a list")
    text = ""
    for choice in choices:
        if not isinstance(choice, dict):
            raise _Malformed(f"a choice is {type(choice).__name__}, expected an object")
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise _Malformed(f"'delta' is {type(delta).__name__}, expected an object")
        for part in (delta.get("content"), delta.get("reasoning_content"), choice.get("text")):
            if part is not None and not isinstance(part, str):
                raise _Malformed(f"text content is {type(part).__name__}, expected a string")
            text += part or ""
        reason = choice.get("finish_reason")
        if reason is not None and not isinstance(reason, str):
            raise _Malformed(f"'finish_reason' is {type(reason).__name__}, expected a string")
    return text


MAX_TOKENS_REPORTED = 10**9   # a usage count beyond this is not a real request

# The most tokens one streamed text chunk may carry before a usage report is taken for a wrong
# count (prompt + completion, or the server's running total) rather than this request's tokens.
# Servers stream one token per chunk (llama.cpp, TGI, vLLM, SGLang at their default stream
# interval of 1); speculative decoding sends the accepted draft tokens of a step together, at
# most num_speculative_tokens + 1 of them (vLLM docs: "Speculative Decoding", typically 3-7
# draft tokens). 16 is twice that; a server streaming larger groups (a --stream-interval above
# 16) needs `max_tokens_per_chunk` raised.
MAX_TOKENS_PER_CHUNK = 16


@dataclass(frozen=True)
class Limits:
    """What a request's usage report may not exceed: the request's own `max_tokens` and
    `max_tokens_per_chunk` tokens per streamed text chunk."""

    max_tokens: int = MAX_TOKENS_REPORTED
    max_tokens_per_chunk: int = MAX_TOKENS_PER_CHUNK


def _usage(usage, chunks: int, limits: Limits = Limits(),
           before: tuple[int | None, int | None] = (None, None)) -> tuple[int | None, int | None]:
    """(completion tokens, prompt tokens) of a usage report, checked; _Malformed when negative,
    not integers, fewer completion tokens than text chunks received, more than the request's
    max_tokens or than `limits.max_tokens_per_chunk` per chunk (a total or cumulative count),
    exactly the prompt's tokens more than the chunks (prompt + completion), fewer than an
    earlier report of the same stream (`before`), or a total that disagrees."""
    if usage is None:
        return None, None
    if not isinstance(usage, dict):
        raise _Malformed(f"'usage' is {type(usage).__name__}, expected an object")
    got = {}
    for key in ("completion_tokens", "prompt_tokens", "total_tokens"):
        v = usage.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKENS_REPORTED:
            raise _Malformed(f"usage {key}={short_repr(v)}: expected an integer 0..{MAX_TOKENS_REPORTED}")
        got[key] = v
    out, prompt = got.get("completion_tokens"), got.get("prompt_tokens")
    if out is not None:
        _check_completion(out, chunks, limits, before[0])
        if prompt is not None and prompt >= 2 and chunks and out - chunks in (prompt, prompt + 1):
            raise _Malformed(f"usage completion_tokens={out} is prompt_tokens={prompt} + the {chunks} chunks of "
                             "text (+ at most an end token): the prompt is counted as completion")
    if prompt is not None and before[1] is not None and prompt != before[1]:
        raise _Malformed(f"usage prompt_tokens={prompt} but an earlier report of this stream said {before[1]}")
    total = got.get("total_tokens")
    if total is not None and out is not None and prompt is not None and total != out + prompt:
        raise _Malformed(f"usage total_tokens={total} is not prompt_tokens + completion_tokens = {prompt + out}")
    return out, prompt


def _check_completion(out: int, chunks: int, limits: Limits, earlier: int | None) -> None:
    """A completion_tokens count this stream could have produced, else _Malformed naming the law."""
    if out < chunks:
        raise _Malformed(f"usage completion_tokens={out} but {chunks} chunks of text arrived "
                         "(each carries at least one token)")
    if out > limits.max_tokens:
        raise _Malformed(f"usage completion_tokens={out} exceeds the request's max_tokens={limits.max_tokens} "
                         "(a server cannot generate past the cap; prompt + completion or a running total?)")
    if out > limits.max_tokens_per_chunk * max(chunks, 1):
        raise _Malformed(f"usage completion_tokens={out} for {chunks} chunks of text: more than "
                         f"{limits.max_tokens_per_chunk} tokens a chunk (max_tokens_per_chunk; prompt + "
                         "completion or a running total?)")
    if earlier is not None and out < earlier:
        raise _Malformed(f"usage completion_tokens={out} after an earlier report of {earlier} in the same stream "
                         "(counts only grow)")


def _error_message(body: bytes) -> str:
    try:
        err = json.loads(body)
        err = err.get("error", err) if isinstance(err, dict) else err
        msg = err.get("message", err) if isinstance(err, dict) else err
        return str(msg)[:300]
    except (ValueError, RecursionError):
        return body.decode("utf-8", "replace").strip()[:300]


class _Deadline:
    """The request's wall-clock deadline: at `timeout_s` after the start it shuts the socket
    down, so a read blocked anywhere (headers, a line that never ends) returns at once."""

    def __init__(self, timeout_s: float):
        self.timeout_s, self.start = timeout_s, time.monotonic()
        self.expired = threading.Event()
        self._timer: threading.Timer | None = None

    def arm(self, sock) -> None:
        """Start counting down what is left of timeout_s (connecting took some of it)."""
        def fire():
            self.expired.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        left = max(0.0, self.timeout_s - (time.monotonic() - self.start))
        self._timer = threading.Timer(left, fire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def stream_chat(url: str, model: str, prompt: str, *, max_tokens: int = 2048, temperature: float = 0.0,
                timeout_s: float = 300.0, idle_timeout_s: float | None = None, api_key: str | None = None,
                include_usage: bool = True, extra_body: dict | None = None, sample: Sample | None = None,
                clock=time.perf_counter, cancel: threading.Event | None = None,
                max_tokens_per_chunk: int = MAX_TOKENS_PER_CHUNK) -> Sample:
    """Send one streamed chat completion and time it; returns the filled `sample`, never raises.

    timeout_s: wall-clock deadline of the whole request. idle_timeout_s: the longest wait for
    the next bytes (default: timeout_s). A line longer than MAX_LINE_BYTES, a chunk of the wrong
    shape or an impossible usage report fails the request ("protocol": more completion tokens than
    max_tokens, than max_tokens_per_chunk per text chunk, or than text chunks fewer than it; more
    text chunks than max_tokens); it is ok only when the stream completed: a finish_reason and
    then [DONE]. `cancel` set: the request stops
    ("interrupted"). Until it completes the sample reads "interrupted" (in flight)."""
    s = sample if sample is not None else Sample()
    s.error_kind, s.error = "interrupted", "in flight: the request had not finished"
    scheme, host, port, path = chat_url(url)
    idle = timeout_s if idle_timeout_s is None else min(idle_timeout_s, timeout_s)
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "max_tokens": max_tokens, "temperature": temperature}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra_body or {})
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn = _connection(scheme, host, port, idle)
    deadline = _Deadline(timeout_s)
    t0 = clock()

    def fail(kind: str, message: str) -> Sample:
        if deadline.expired.is_set():
            kind, message = "timeout", f"the request passed its {timeout_s:g} s deadline (after {s.chunks} chunks)"
        elif cancel is not None and cancel.is_set():
            kind, message = "interrupted", f"the run was interrupted (after {s.chunks} chunks)"
        s.error_kind, s.error = kind, message
        s.total_s = clock() - t0
        return s

    try:
        conn.connect()
        deadline.arm(conn.sock)
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        s.status = resp.status
        if resp.status >= 400:
            return fail("http", f"HTTP {resp.status} {resp.reason}: {_error_message(resp.read(65536))}")
        verdict = _read_stream(s, iter_sse(_lines(resp, deadline, cancel)), clock, t0,
                               Limits(max_tokens, max_tokens_per_chunk))
        if deadline.expired.is_set() or (cancel is not None and cancel.is_set()):
            return fail("timeout", "")        # fail() names which of the two
        if verdict is not None:
            return fail(*verdict)
        s.total_s = clock() - t0
        s.error_kind, s.error = "", ""
        return s
    except Exception as e:  # noqa: BLE001 - any failure is this request's, never the run's
        return fail(*_failure(e, s, idle, host, port))
    finally:
        deadline.cancel()
        conn.close()


def _read_stream(s: Sample, payloads: Iterator[str], clock, t0: float,
                 limits: Limits = Limits()) -> tuple[str, str] | None:
    """Fill `s` from the stream's SSE payloads; the (kind, message) of its failure, or None when
    it completed: a finish_reason and then [DONE]. Usage reports are checked against `limits`."""
    last, done = t0, False
    reported: tuple[int | None, int | None] = (None, None)
    for payload in payloads:
        if payload.strip() == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError):
            return "protocol", f"not JSON in the stream: {short_repr(payload)}"
        if isinstance(chunk, dict) and chunk.get("error"):
            return "server", f"error event: {_error_message(payload.encode())}"
        now = clock()
        if _text_of(chunk):
            s.chunks += 1
            if s.ttft_s is None:
                s.ttft_s = now - t0
            else:
                s.gaps_s.append(now - last)
            last = now
            if s.chunks > limits.max_tokens:
                raise _Malformed(f"more text chunks than the request's max_tokens={limits.max_tokens} "
                                 "(each carries at least one token)")
            if s.tokens_source == "chunks":
                s.output_tokens = s.chunks
        for choice in chunk.get("choices") or ():
            s.finish_reason = choice.get("finish_reason") or s.finish_reason
        out, prompt_tokens = _usage(chunk.get("usage"), s.chunks, limits, reported)
        if out is not None:
            s.output_tokens, s.tokens_source = out, "usage"
        if prompt_tokens is not None:
            s.prompt_tokens = prompt_tokens
        reported = (out if out is not None else reported[0], prompt_tokens if prompt_tokens is not None
                    else reported[1])
    if s.finish_reason is None:
        if done:   # e.g. llama-cpp-python's server cuts a stream short when another request arrives
            return "truncated", f"[DONE] without a finish_reason after {s.chunks} chunks: the server cut the stream short"
        return "dropped", f"the stream ended without [DONE] after {s.chunks} chunks"
    if not done:
        return "dropped", f"the stream ended after its finish_reason but without [DONE] ({s.chunks} chunks)"
    return None


def _failure(e: Exception, s: Sample, idle: float, host: str, port: int) -> tuple[str, str]:
    """The (kind, message) of a request that raised `e` after `s.chunks` chunks."""
    after = f"(after {s.chunks} chunks)"
    if isinstance(e, _Malformed):
        return "protocol", f"{e} {after}"
    if isinstance(e, _LineTooLong):
        return "protocol", f"a line longer than {MAX_LINE_BYTES} bytes without a newline {after}"
    if isinstance(e, TimeoutError):
        return "timeout", f"no data for {idle:g} s {after}"
    if isinstance(e, ConnectionRefusedError):
        return "connection", f"cannot connect to {host}:{port}: {e.strerror or e}"
    lost = "dropped" if s.status is not None else "connection"
    if isinstance(e, (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError)):
        return lost, f"connection lost after {s.chunks} chunks: {type(e).__name__}: {short_repr(str(e))}"
    if isinstance(e, (OSError, http.client.HTTPException)):
        return lost, f"{type(e).__name__}: {short_repr(str(e))} {after}"
    return "client", f"{type(e).__name__}: {short_repr(str(e))} {after}"


MAX_LINE_BYTES = 4_000_000   # an SSE line is a chunk of a few hundred bytes; a few MB is no stream


class _LineTooLong(ValueError):
    pass


_EOL = re.compile(rb"\r\n|\r|\n")   # the SSE spec's line ends: CRLF, LF or a lone CR


def _lines(resp, deadline: _Deadline, cancel: threading.Event | None) -> Iterator[bytes]:
    """The response's lines until EOF (ended by CRLF, LF or a lone CR, as the SSE spec allows),
    read in pieces (never a whole unbounded line): stops when the deadline passes or `cancel` is
    set; _LineTooLong past MAX_LINE_BYTES. A CR last in a piece waits for the next one, so a CRLF
    cut in two is one line end."""
    buf = bytearray()
    while not deadline.expired.is_set() and not (cancel is not None and cancel.is_set()):
        data = resp.read1(65536)
        if not data:
            break
        start = max(len(buf) - 1, 0)         # what was left holds no line end but a last CR
        buf += data
        yield from _split_lines(buf, start)
        if len(buf) > MAX_LINE_BYTES:
            raise _LineTooLong
    if buf and not deadline.expired.is_set():
        yield bytes(buf.rstrip(b"\r"))


def _split_lines(buf: bytearray, start: int = 0) -> Iterator[bytes]:
    """The complete lines at the front of `buf` (each with its line end; none before `start`),
    removed from it; a CR last in `buf` stays, since an LF may follow."""
    cut = 0
    for m in _EOL.finditer(buf, start):
        if m.group() == b"\r" and m.end() == len(buf):
            break
        yield bytes(buf[cut:m.end()])
        cut = m.end()
    del buf[:cut]


MAX_REPLY_BYTES = 4_000_000   # a non-streamed reply (usage, the model list) is a few kB


def _small_request(url: str, method: str, body: dict | None, timeout_s: float, api_key: str | None,
                   models: bool = False):
    """One short request within a wall-clock deadline; its JSON reply when the status is 200
    and the body is at most MAX_REPLY_BYTES, else None. Never raises for what the server does."""
    scheme, host, port, path = chat_url(url)
    if models:
        path = path[: -len("/chat/completions")] + "/models"
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn = _connection(scheme, host, port, timeout_s)
    deadline = _Deadline(timeout_s)
    try:
        conn.connect()
        deadline.arm(conn.sock)
        conn.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        raw = resp.read(MAX_REPLY_BYTES + 1)
        if len(raw) > MAX_REPLY_BYTES or deadline.expired.is_set():
            return None
        return json.loads(raw)
    except Exception:  # noqa: BLE001 - a probe that fails gives no answer, never an error
        return None
    finally:
        deadline.cancel()
        conn.close()


def count_prompt_tokens(url: str, model: str, prompt: str, *, timeout_s: float = 300.0,
                        api_key: str | None = None) -> int | None:
    """The prompt tokens the server counts for `prompt` as a chat message (its usage report
    of one non-streamed request with max_tokens=1), or None when it gives none."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1, "stream": False}
    data = _small_request(url, "POST", body, timeout_s, api_key)
    usage = data.get("usage") if isinstance(data, dict) else None
    n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_TOKENS_REPORTED else None


def list_models(url: str, *, timeout_s: float = 10.0, api_key: str | None = None) -> list[str] | None:
    """The model ids the server lists at GET /v1/models, or None when it cannot be asked."""
    chat_url(url)                       # a malformed URL is the caller's error, raised
    data = _small_request(url, "GET", None, timeout_s, api_key, models=True)
    listed = data.get("data") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return None
    return [str(m.get("id"))[:200] for m in listed[:10_000] if isinstance(m, dict)]
