"""One streamed chat completion against an OpenAI-compatible endpoint, timed.

POST {base}/v1/chat/completions with `stream: true`; the reply is server-sent events
(`data: {json}` lines, a blank line between events, `data: [DONE]` at the end). Standard
library only (http.client). Every failure (refused connection, timeout, HTTP error, a
stream that stops before its end) is recorded in the Sample, never raised; what was
measured before the failure stays in it.
"""
from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from urllib.parse import urlsplit

from ..errors import InvalidInputError

ERROR_KINDS = ("connection", "timeout", "http", "dropped", "truncated", "server", "protocol", "model")


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
        line = line.rstrip("\r\n")
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


def _text_of(chunk: dict) -> str:
    text = ""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        text += (delta.get("content") or "") + (delta.get("reasoning_content") or "") + (choice.get("text") or "")
    return text


def _error_message(body: bytes) -> str:
    try:
        err = json.loads(body)
        err = err.get("error", err) if isinstance(err, dict) else err
        msg = err.get("message", err) if isinstance(err, dict) else err
        return str(msg)[:300]
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300]


def stream_chat(url: str, model: str, prompt: str, *, max_tokens: int = 2048, temperature: float = 0.0,
                timeout_s: float = 300.0, api_key: str | None = None, include_usage: bool = True,
                extra_body: dict | None = None, sample: Sample | None = None,
                clock=time.perf_counter) -> Sample:
    """Send one streamed chat completion and time it; returns the filled `sample`.
    timeout_s bounds each wait for data and the whole request."""
    s = sample if sample is not None else Sample()
    scheme, host, port, path = chat_url(url)
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "max_tokens": max_tokens, "temperature": temperature}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra_body or {})
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn = _connection(scheme, host, port, timeout_s)
    t0 = clock()
    last = None
    done = False

    def fail(kind: str, message: str) -> Sample:
        s.error_kind, s.error = kind, message
        s.total_s = clock() - t0
        return s

    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        s.status = resp.status
        if resp.status >= 400:
            return fail("http", f"HTTP {resp.status} {resp.reason}: {_error_message(resp.read())}")
        for payload in iter_sse(_lines(resp, t0, timeout_s, clock)):
            if payload.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(payload)
            except ValueError:
                return fail("protocol", f"not JSON in the stream: {payload[:120]!r}")
            if isinstance(chunk, dict) and chunk.get("error"):
                return fail("server", f"error event: {_error_message(payload.encode())}")
            now = clock()
            if _text_of(chunk):
                s.chunks += 1
                if s.ttft_s is None:
                    s.ttft_s = now - t0
                else:
                    s.gaps_s.append(now - last)
                last = now
                if s.tokens_source == "chunks":
                    s.output_tokens = s.chunks
            for choice in chunk.get("choices") or ():
                s.finish_reason = choice.get("finish_reason") or s.finish_reason
            usage = chunk.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                s.output_tokens, s.tokens_source = usage["completion_tokens"], "usage"
                if isinstance(usage.get("prompt_tokens"), int):
                    s.prompt_tokens = usage["prompt_tokens"]
        s.total_s = clock() - t0
        if s.finish_reason is None:
            if done:   # e.g. llama-cpp-python's server cuts a stream short when another request arrives
                return fail("truncated", f"[DONE] without a finish_reason after {s.chunks} chunks: "
                                         "the server cut the stream short")
            return fail("dropped", f"the stream ended without [DONE] after {s.chunks} chunks")
        return s
    except (socket.timeout, TimeoutError):
        return fail("timeout", f"no data for {timeout_s:g} s (after {s.chunks} chunks)")
    except ConnectionRefusedError as e:
        return fail("connection", f"cannot connect to {host}:{port}: {e.strerror or e}")
    except (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError) as e:
        kind = "dropped" if s.status is not None else "connection"
        return fail(kind, f"connection lost after {s.chunks} chunks: {type(e).__name__}: {e}")
    except (OSError, http.client.HTTPException) as e:
        kind = "dropped" if s.status is not None else "connection"
        return fail(kind, f"{type(e).__name__}: {e} (after {s.chunks} chunks)")
    finally:
        conn.close()


def _lines(resp, t0: float, timeout_s: float, clock) -> Iterator[bytes]:
    """The response's lines until EOF; a TimeoutError once the whole request exceeds timeout_s."""
    while True:
        line = resp.readline()
        if not line:
            return
        if clock() - t0 > timeout_s:
            raise TimeoutError
        yield line


def count_prompt_tokens(url: str, model: str, prompt: str, *, timeout_s: float = 300.0,
                        api_key: str | None = None) -> int | None:
    """The prompt tokens the server counts for `prompt` as a chat message (its usage report
    of one non-streamed request with max_tokens=1), or None when it gives none."""
    scheme, host, port, path = chat_url(url)
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1, "stream": False}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn = _connection(scheme, host, port, timeout_s)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        data = json.loads(resp.read()) if resp.status == 200 else {}
        n = (data.get("usage") or {}).get("prompt_tokens")
        return n if isinstance(n, int) and n > 0 else None
    except (OSError, ValueError, http.client.HTTPException, AttributeError):
        return None
    finally:
        conn.close()


def list_models(url: str, *, timeout_s: float = 10.0, api_key: str | None = None) -> list[str] | None:
    """The model ids the server lists at GET /v1/models, or None when it cannot be asked."""
    scheme, host, port, path = chat_url(url)
    conn = _connection(scheme, host, port, timeout_s)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        conn.request("GET", path[: -len("/chat/completions")] + "/models", headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        data = json.loads(resp.read())
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (OSError, ValueError, http.client.HTTPException, AttributeError):
        return None
    finally:
        conn.close()
