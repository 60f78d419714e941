"""The benchmark's prompts: the shipped rate-limiter request (~2,000 output tokens), its
long-context variant (the same request after ~30K tokens of pasted documentation), and the
user's own prompts from files."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...catalog._data import parse_json
from ...errors import InvalidInputError, ProfileError

CHARS_PER_TOKEN = 4.0   # English prose with a BPE/SPM tokenizer: ~4 characters per token (rule of thumb)


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt: a short name for reports and the user message sent."""

    name: str
    text: str


RATE_LIMITER = Prompt("rate-limiter", """\
Write a complete, production-quality Python module named `ratelimit.py` that implements
rate limiting with three interchangeable strategies:

1. Token bucket: a bucket of `capacity` tokens refilled continuously at `refill_rate`
   tokens per second; a request costs one token (or a given cost) and is allowed when
   enough tokens are present.
2. Sliding window log: allow at most `limit` requests in any window of `window_s`
   seconds, keeping the timestamps of recent requests.
3. Fixed window counter: allow at most `limit` requests per aligned window of
   `window_s` seconds, resetting the counter when a new window starts.

Requirements:
- A common abstract base class `RateLimiter` with `allow(key: str, cost: int = 1) -> bool`
  and `retry_after(key: str) -> float` (seconds until the next request would be allowed).
- Per-key state (each client key is limited independently), safe to use from several
  threads at once (use locks), with an injectable clock function so tests need not sleep.
- Input validation with clear error messages for non-positive limits, rates and costs.
- A factory `make_limiter(strategy: str, **options)` accepting "token_bucket",
  "sliding_window" and "fixed_window".
- A decorator `rate_limited(limiter, key_func)` that raises `RateLimitExceeded`
  (carrying `retry_after`) when a call is not allowed.
- Docstrings for every public class and function, and type hints throughout.

Then write a thorough pytest test module `test_ratelimit.py` that uses a fake clock and
covers, for each strategy: requests within the limit, the first rejected request, refill
or window reset over time, independent keys, costs larger than one, `retry_after`
values, invalid arguments, and concurrent use from several threads. Finish with a short
explanation of the trade-offs between the three strategies (burstiness, memory per key,
accuracy at window edges). Output the full code of both files; do not abbreviate.
""")

_TOPICS = ("configuration", "connection pooling", "request routing", "caching", "retries",
           "authentication", "logging", "metrics", "serialization", "scheduling",
           "health checks", "graceful shutdown", "back-pressure", "batching", "timeouts")


def documentation_text(tokens: int, chars_per_token: float = CHARS_PER_TOKEN) -> str:
    """Deterministic documentation-like filler of about `tokens` tokens (tokens x
    chars_per_token characters): numbered reference sections of a fictional service."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise InvalidInputError("context_tokens", tokens, "an integer >= 0")
    target = int(tokens * chars_per_token)
    parts, n, size = [], 0, 0
    while size < target:
        topic = _TOPICS[n % len(_TOPICS)]
        section = (
            f"## Section {n + 1}: {topic} (module svc_{n % 97:02d})\n"
            f"The {topic} component reads its settings from `svc.{topic.replace(' ', '_')}.*`. "
            f"Option `limit_{n}` defaults to {(n * 37) % 1000 + 10} and must be positive; "
            f"option `interval_{n}` is given in milliseconds (default {(n * 53) % 5000 + 100}). "
            f"When the {topic} layer cannot complete an operation within the interval, it logs a "
            f"warning with code E{1000 + n} and hands the request to the next stage unchanged. "
            f"Call `svc_{n % 97:02d}.reload()` after editing the file; changes apply to new "
            f"requests only, and requests already in flight keep the previous values.\n\n")
        parts.append(section)
        size += len(section)
        n += 1
    return "".join(parts)[:target]


def long_context(prompt: Prompt = RATE_LIMITER, context_tokens: int = 30_000) -> Prompt:
    """`prompt` with about `context_tokens` tokens of documentation pasted in front; its TTFT
    minus the plain prompt's TTFT is the prefill cost of that context."""
    context = documentation_text(context_tokens)
    text = ("Here is the reference documentation of our service, for context:\n\n"
            f"{context}\n\n---\n\n{prompt.text}")
    return Prompt(f"{prompt.name}+{_short(context_tokens)}ctx", text)


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


MAX_PROMPT_FILE_BYTES = 64_000_000   # ~16M tokens: more than any context window


def _prompt_text(p: Path) -> str:
    """The file as UTF-8 text; a binary, unreadable or absurdly large file is a ProfileError."""
    try:
        size = p.stat().st_size
        if size > MAX_PROMPT_FILE_BYTES:
            raise ProfileError(str(p), "<file>", f"is {size} bytes; expected at most {MAX_PROMPT_FILE_BYTES}")
        raw = p.read_bytes()
    except OSError as e:
        raise ProfileError(str(p), "<file>", f"cannot be read: {e.strerror or e}") from None
    if b"\x00" in raw:
        raise ProfileError(str(p), "<file>", "is binary (it contains NUL bytes); expected UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(str(p), "<file>", f"is not UTF-8 text (byte {e.start}); expected a text file") from None


def load_prompts(path: str | Path) -> list[Prompt]:
    """Prompts from a file: `.json` (a list of strings or of {"name", "prompt"} objects),
    `.jsonl` (one such item per line), anything else: the whole file is one prompt."""
    p = Path(path)
    if not p.is_file():
        raise ProfileError(str(p), "<file>", "no such prompt file")
    text = _prompt_text(p)
    if p.suffix.lower() not in (".json", ".jsonl"):
        if not text.strip():
            raise ProfileError(str(p), "<prompt>", "the file is empty")
        return [Prompt(p.stem, text)]
    items = parse_json(text, str(p)) if p.suffix.lower() == ".json" else [
        parse_json(line, str(p), f"line {n}") for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not isinstance(items, list) or not items:
        raise ProfileError(str(p), "<prompts>", "expected a non-empty list of prompts")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"prompt": item}
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str) or not item["prompt"].strip():
            raise ProfileError(str(p), f"[{i}]", 'expected a string or {"name": ..., "prompt": "..."}')
        out.append(Prompt(str(item.get("name") or f"{p.stem}-{i + 1}"), item["prompt"]))
    return out
