"""Benchmark runs: each prompt, at each concurrency level, `repeats` rounds of that many
simultaneous streamed requests; statistics over the samples; raw samples saved as CSV/JSON.

Definitions (all per request unless said): TTFT = seconds to the first generated text;
decode tok/s = output tokens / (total − TTFT); aggregate tok/s = all tokens a round
delivered / the round's wall time (first request sent to last one finished), median over
rounds. "p90" is the tail 90% of requests did at least as well as: TTFT's 90th percentile,
decode speed's 10th. Statistics use the complete requests; failed ones are counted by kind.
"""
from __future__ import annotations

import csv
import json
import math
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InvalidInputError, short_repr
from ...base.safeio import check_output_path, csv_row
from .client import MAX_TOKENS_PER_CHUNK, Sample, count_prompt_tokens, list_models, stream_chat
from .prompts import RATE_LIMITER, Prompt, long_context as make_long_context
from .trust import running_totals
from .report import bench_text


@dataclass(frozen=True)
class Round:
    """One round: `concurrency` requests of one prompt sent together."""

    prompt: str
    concurrency: int
    round: int
    wall_s: float
    tokens: int     # output tokens delivered by all its requests (complete or not)

    @property
    def aggregate_tok_s(self) -> float | None:
        return self.tokens / self.wall_s if self.wall_s > 0 and self.tokens > 0 else None


@dataclass(frozen=True)
class LevelStats:
    """Statistics of one (prompt, concurrency) level. Seconds, tokens, tokens/s; None when
    no complete request gave the figure."""

    prompt: str
    concurrency: int
    requests: int
    ok: int
    errors: dict
    ttft_median_s: float | None
    ttft_p90_s: float | None
    decode_median_tok_s: float | None
    decode_p90_tok_s: float | None
    aggregate_median_tok_s: float | None
    output_tokens_median: float | None
    prompt_tokens_median: float | None

    effective_concurrency: float | None = None


def percentile(values, q: float) -> float | None:
    """The q-th percentile (linear interpolation between order statistics), None if empty."""
    vals = [v for v in values if v is not None]
    return float(np.percentile(vals, q)) if vals else None


def decode_overlap(samples: list[Sample]) -> float | None:
    """How many requests were decoding at once, on average, while any was: the sum of their
    decode intervals [start + TTFT, start + total] over the length of the intervals' union.
    About the concurrency when the server decodes requests together, 1 when it serves them
    one after another; None without decode intervals."""
    spans = sorted((s.start_s + s.ttft_s, s.start_s + s.total_s) for s in samples
                   if s.ttft_s is not None and s.total_s is not None and s.total_s > s.ttft_s)
    if not spans:
        return None
    union, (lo, hi) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > hi:
            union, lo, hi = union + hi - lo, a, b
        else:
            hi = max(hi, b)
    union += hi - lo
    return sum(b - a for a, b in spans) / union


def level_stats(prompt: str, concurrency: int, samples: list[Sample], rounds: list[Round]) -> LevelStats:
    """Medians and tails of one level's samples and rounds."""
    good = [s for s in samples if s.ok]
    errors: dict[str, int] = {}
    for s in samples:
        if not s.ok:
            errors[s.error_kind] = errors.get(s.error_kind, 0) + 1
    ttft = [s.ttft_s for s in good]
    dec = [s.decode_tok_s for s in good]
    return LevelStats(
        prompt, concurrency, len(samples), len(good), errors,
        percentile(ttft, 50), percentile(ttft, 90), percentile(dec, 50), percentile(dec, 10),
        percentile([r.aggregate_tok_s for r in rounds], 50),
        percentile([s.output_tokens for s in good], 50), percentile([s.prompt_tokens for s in good], 50),
        percentile([decode_overlap([s for s in samples if s.round == r])
                    for r in sorted({s.round for s in samples})], 50))


@dataclass
class BenchResult:
    """Everything one benchmark run measured: raw samples, rounds, and which prompt is the
    long-context variant of which (`pairs`: long name -> plain name)."""

    url: str
    model: str
    samples: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    pairs: dict = field(default_factory=dict)
    prompt_chars: dict = field(default_factory=dict)   # prompt name -> characters sent
    prompt_tokens: dict = field(default_factory=dict)  # prompt name -> tokens, where the stream gave no usage
    notes: list = field(default_factory=list)
    interrupted: bool = False
    saved_to: Path | None = None    # where run(save=...) wrote the samples, None if it could not

    def stats(self) -> list[LevelStats]:
        """One LevelStats per (prompt, concurrency), in the order they were run."""
        keys = list(dict.fromkeys((s.prompt, s.concurrency) for s in self.samples))
        return [level_stats(p, c, [s for s in self.samples if (s.prompt, s.concurrency) == (p, c)],
                            [r for r in self.rounds if (r.prompt, r.concurrency) == (p, c)])
                for p, c in keys]

    def prefill_costs(self) -> list[dict]:
        """Per long-context prompt and concurrency: median TTFT minus the plain prompt's (s),
        with the extra prompt tokens where the server reported them."""
        by = {(st.prompt, st.concurrency): st for st in self.stats()}
        out = []
        for (p, c), st in by.items():
            base = by.get((self.pairs[p], c)) if p in self.pairs else None
            if base is None or st.ttft_median_s is None or base.ttft_median_s is None:
                continue
            extra = (st.prompt_tokens_median - base.prompt_tokens_median
                     if st.prompt_tokens_median is not None and base.prompt_tokens_median is not None else None)
            out.append(dict(prompt=p, base=base.prompt, concurrency=c,
                            prefill_cost_s=st.ttft_median_s - base.ttft_median_s, extra_prompt_tokens=extra))
        return out

    def failures(self) -> list[Sample]:
        return [s for s in self.samples if not s.ok]

    def save(self, path: str | Path) -> Path:
        """Raw samples: `.json` (samples, rounds, notes) or `.csv` (one row per request,
        gaps as a ';'-separated list), written to a temporary file and renamed into place, so
        the file is either the old one or complete. Returns the path."""
        p = check_save_path(path)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", newline="", encoding="utf-8") as fh:
                if p.suffix.lower() == ".json":
                    data = dict(url=self.url, model=self.model, interrupted=self.interrupted, notes=self.notes,
                                pairs=self.pairs, prompt_chars=self.prompt_chars, prompt_tokens=self.prompt_tokens,
                                samples=[_sample_dict(s) for s in self.samples],
                                rounds=[asdict(r) for r in self.rounds])
                    fh.write(json.dumps(data, indent=1))
                else:
                    w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
                    w.writeheader()
                    w.writerows(csv_row(_csv_row(s)) for s in self.samples)   # formula-safe (safeio)
            os.replace(tmp, p)
        finally:
            tmp.unlink(missing_ok=True)
        return p

    def __str__(self) -> str:
        return bench_text(self)


def _sample_dict(s: Sample) -> dict:
    d = asdict(s)
    d["ok"], d["decode_tok_s"] = s.ok, s.decode_tok_s
    return d


CSV_FIELDS = [f.name for f in fields(Sample)] + ["ok", "decode_tok_s"]


def _csv_row(s: Sample) -> dict:
    row = _sample_dict(s)
    row["gaps_s"] = ";".join(f"{g:.6f}" for g in s.gaps_s)
    return row


def check_save_path(path) -> Path:
    """`path` as a Path when samples can be saved there: a .csv or .json name in an existing,
    writable folder, not a folder itself; else InvalidInputError (before any request is sent)."""
    return check_output_path(path, "save", (".csv", ".json"))


class _Journal:
    """Samples appended as they finish (JSON Lines, one per request) to `<save>.partial`, so a
    run that dies keeps what it measured; removed once the final file is written. A write
    that fails is noted once and the run goes on."""

    def __init__(self, target: Path, notes: list):
        self.path = target.with_name(target.name + ".partial")
        self.notes, self.failed = notes, False
        self._lock = threading.Lock()
        try:
            self.path.write_text("", encoding="utf-8")
        except OSError as e:
            raise InvalidInputError("save", str(target), f"a file this process may write ({e.strerror or e})") from None

    def append(self, s: Sample) -> None:
        line = json.dumps(_sample_dict(s)) + "\n"
        with self._lock:
            try:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line)
            except OSError as e:
                if not self.failed:
                    self.failed = True
                    self.notes.append(f"could not append to {self.path}: {e.strerror or e}")

    def finish(self, result: BenchResult, target: Path) -> Path | None:
        """Write the final file (atomically); the journal goes once that worked."""
        try:
            result.save(target)
        except (OSError, InvalidInputError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            kept = "" if self.failed else f"; the samples are in {self.path}"
            result.notes.append(f"could not save {target}: {why}{kept}")
            return None
        self.path.unlink(missing_ok=True)
        return target


def _check_levels(concurrency) -> list[int]:
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    if not levels or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in levels):
        raise InvalidInputError("concurrency", concurrency, "integers >= 1, e.g. [1, 4, 16]")
    return levels


def run(url: str, model: str | None = None, prompts=None, *, concurrency=(1,), repeats: int = 3,
        max_tokens: int = 2048, long_context: bool = True, context_tokens: int = 30_000,
        temperature: float = 0.0, timeout_s: float = 300.0, idle_timeout_s: float | None = None,
        warmup: int = 1, api_key: str | None = None,
        extra_body: dict | None = None, include_usage: bool = True, check_model: bool = True,
        unique: bool = True, save=None, progress=None,
        max_tokens_per_chunk: int = MAX_TOKENS_PER_CHUNK) -> BenchResult:
    """Benchmark an OpenAI-compatible endpoint; never raises for what the server does.

    url: e.g. http://127.0.0.1:8000. model: the served model name (None: the first one
    GET /v1/models lists; check_model: when the server lists models and `model` is not
    among them, every request is recorded as a "model" error instead of being sent, since
    some servers silently answer with their default model). prompts: Prompt objects or strings (default: the rate-limiter
    prompt). long_context: also send each prompt with ~context_tokens of documentation in
    front (the TTFT difference is the prefill cost). concurrency: the levels; at each,
    `repeats` rounds of that many simultaneous requests. warmup: unmeasured requests first.
    unique: start every request with its own tag ("[request 1a2b3c-7]") so a server's prefix
    cache cannot serve a repeated prompt's prefill from memory (TTFT would then be too low).
    timeout_s: each request's wall-clock deadline; idle_timeout_s: the longest wait for the
    next bytes (default timeout_s). save: a .csv/.json path, checked before the first request;
    each finished request is appended to `<save>.partial` and the file is written (atomically)
    at the end, so a run that fails keeps what it measured. progress: called with each finished
    Sample. Ctrl-C stops the run and returns what was measured (interrupted=True); requests in
    flight are marked "interrupted" and stay out of the statistics. A usage report that the
    request cannot have produced (more completion tokens than max_tokens, or than
    max_tokens_per_chunk per streamed text chunk) fails that request as "protocol".
    """
    levels = _check_levels(concurrency)
    _check_run_args(repeats, max_tokens, warmup, timeout_s, idle_timeout_s, max_tokens_per_chunk)
    target = check_save_path(save) if save is not None else None
    plain = [p if isinstance(p, Prompt) else Prompt(f"prompt-{i + 1}", str(p))
             for i, p in enumerate(prompts or [RATE_LIMITER])]
    result = BenchResult(url=url, model=model or "")
    journal = _Journal(target, result.notes) if target is not None else None
    refuse = _resolve_model(result, model, check_model, api_key, timeout_s)
    todo = list(plain)
    if long_context:
        for p in plain:
            lp = make_long_context(p, context_tokens)
            result.pairs[lp.name] = p.name
            todo.append(lp)
    result.prompt_chars = {p.name: len(p.text) for p in todo}
    tag = secrets.token_hex(3) if unique else ""
    send: dict[str, Any] = dict(max_tokens=max_tokens, temperature=temperature, timeout_s=timeout_s,
                idle_timeout_s=idle_timeout_s, api_key=api_key, include_usage=include_usage,
                extra_body=extra_body, max_tokens_per_chunk=max_tokens_per_chunk)
    try:
        for i in range(0 if refuse else warmup):
            w = stream_chat(url, result.model, plain[0].text, **send)
            if not w.ok:
                result.notes.append(f"warm-up request {i + 1} failed: {w.error_kind}: {w.error}")
        for c in levels:
            for p in todo:
                for r in range(repeats):
                    _round(result, p, c, r, send, progress, refuse, tag, journal)
        _probe_prompt_tokens(result, todo, tag, api_key, timeout_s)
    except KeyboardInterrupt:
        result.interrupted = True
        result.notes.append("interrupted: the samples measured so far are kept; requests in flight "
                            "are marked 'interrupted' and left out of the statistics")
    result = running_totals(result)
    if journal is not None and target is not None:     # both or neither
        result.saved_to = journal.finish(result, target)
    return result


def _check_run_args(repeats, max_tokens, warmup, timeout_s, idle_timeout_s, max_tokens_per_chunk=1) -> None:
    for name, v, lo in (("repeats", repeats, 1), ("max_tokens", max_tokens, 1), ("warmup", warmup, 0),
                        ("max_tokens_per_chunk", max_tokens_per_chunk, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InvalidInputError(name, v, f"an integer >= {lo}")
    for name, secs in (("timeout_s", timeout_s), ("idle_timeout_s", idle_timeout_s)):
        if secs is not None and (isinstance(secs, bool) or not isinstance(secs, (int, float)) or not math.isfinite(secs)
                                 or secs <= 0):
            raise InvalidInputError(name, secs, "a positive number of seconds")
    if timeout_s is None:
        raise InvalidInputError("timeout_s", timeout_s, "a positive number of seconds")


def _resolve_model(result: BenchResult, model: str | None, check_model: bool, api_key, timeout_s: float) -> str:
    """Set result.model (the first model GET /v1/models lists when `model` is None) and note it;
    the reason to send no request ("" to send them): `model` is not among those served."""
    served = list_models(result.url, timeout_s=min(10.0, timeout_s), api_key=api_key)
    if model is None:
        result.model = served[0] if served else "default"
        result.notes.append(f"served model: {result.model!r}" + ("" if served else " (GET /v1/models gave no list)"))
    if model is None or served is None or model in served:
        return ""
    refuse = f"model {model!r} is not served by {result.url} (it serves {served})"
    result.notes.append(refuse + ("; no request sent" if check_model else "; sent anyway"))
    return refuse if check_model else ""


def _probe_prompt_tokens(result: BenchResult, todo: list[Prompt], tag: str, api_key, timeout_s) -> None:
    """Where the streams reported no prompt tokens but requests succeeded, ask the server
    once per prompt (a non-streamed request with max_tokens=1) and keep its count."""
    for p in todo:
        mine = [s for s in result.samples if s.prompt == p.name]
        if any(s.ok for s in mine) and all(s.prompt_tokens is None for s in mine):
            text = f"[request {tag}-probe]\n{p.text}" if tag else p.text
            n = count_prompt_tokens(result.url, result.model, text, timeout_s=timeout_s, api_key=api_key)
            if n is not None:
                result.prompt_tokens[p.name] = n


def _round(result: BenchResult, p: Prompt, c: int, r: int, send: dict, progress, refuse: str = "",
           tag: str = "", journal: _Journal | None = None) -> None:
    """One round of `c` simultaneous requests. On Ctrl-C the requests still in flight are
    frozen as "interrupted" (copies: their threads may still write to the originals), told
    to stop, and the interrupt goes on to the caller; the round is not counted."""
    first = len(result.samples)
    samples = [Sample(prompt=p.name, concurrency=c, round=r) for _ in range(c)]
    finished = [threading.Event() for _ in samples]
    cancel = threading.Event()
    result.samples.extend(samples)

    def one(i: int, s: Sample):
        text = f"[request {tag}-{first + i}]\n{p.text}" if tag else p.text
        s.start_s = time.perf_counter() - t0
        try:
            if refuse:
                s.error_kind, s.error = "model", refuse
            else:
                stream_chat(result.url, result.model, text, sample=s, cancel=cancel, **send)
        except Exception as e:  # noqa: BLE001 - a failure is this request's, never the run's
            s.error_kind, s.error = "client", f"{type(e).__name__}: {short_repr(str(e))}"
        if cancel.is_set():
            return
        finished[i].set()
        if journal is not None:
            journal.append(s)
        if progress:
            try:
                progress(s)
            except Exception as e:  # noqa: BLE001
                result.notes.append(f"the progress callback failed: {type(e).__name__}: {short_repr(str(e))}")

    threads = [threading.Thread(target=one, args=(i, s), daemon=True) for i, s in enumerate(samples)]
    t0 = time.perf_counter()
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.1)
    except KeyboardInterrupt:
        cancel.set()
        for i, s in enumerate(samples):
            if not finished[i].is_set():
                result.samples[first + i] = replace(
                    s, gaps_s=list(s.gaps_s), error_kind="interrupted",
                    error=f"the run was interrupted while this request was in flight (after {s.chunks} chunks)")
        raise
    wall = time.perf_counter() - t0
    result.rounds.append(Round(p.name, c, r, wall, sum(s.output_tokens for s in samples)))
