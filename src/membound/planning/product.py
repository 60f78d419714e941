"""Product-level latency: what decode speed means for an agent, a reasoning model, a voice turn.

- Agent loop: N calls made one after another, each waiting for its TTFT, generating its output
  tokens, then running a tool: N x (ttft + tokens / tok_s + tool). At 70 tok/s, 20 calls of
  800 tokens take 20 x 800 / 70 = 228.6 s; at 750 tok/s, 21.3 s.
- Reasoning budget: thinking tokens that fit in a wall-clock budget: tok_s x (seconds - ttft).
- Voice turn: the reply must start within the gap people leave between turns; ~500 ms is the
  budget the project's seeds use (conversation-analysis studies put the typical gap near 200 ms,
  Stivers et al., PNAS 106(26), 2009), and speech-to-text and text-to-speech share it with TTFT.

Every function takes plain numbers (seconds, tokens/s) or a `Result` where a speed is asked for.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInputError, is_finite_number
from ..physics.estimate import check_int
from ..base.display import pre_html

VOICE_GAP_S = 0.5   # seconds of silence a listener tolerates before the reply (the seeds' figure)


def _num(field: str, value, *, positive: bool = False) -> float:
    if not is_finite_number(value) or value < 0 or (positive and value == 0):
        raise InvalidInputError(field, value, f"a finite number {'> 0' if positive else '>= 0'}")
    return float(value)


def _speed(tok_s) -> tuple[float, float]:
    """(tokens/s per user, ttft seconds) from a number or a Result."""
    if hasattr(tok_s, "decode_tok_s_per_user"):
        return _num("tok_s", tok_s.decode_tok_s_per_user, positive=True), _num("ttft_s", tok_s.ttft_s)
    return _num("tok_s", tok_s, positive=True), 0.0


def agent_loop_s(calls: int, output_tokens: int, tok_s, *, tool_s: float = 0.0, ttft_s: float | None = None) -> float:
    """Wall-clock seconds of `calls` serial model calls of `output_tokens` each, plus `tool_s` of
    tool time per call. tok_s: per-user decode speed (or a Result, whose TTFT is then added)."""
    # bounded as estimate()'s counts (MAX_COUNT): 10**400 calls overflowed a float
    calls, output_tokens = check_int("calls", calls, 1), check_int("output_tokens", output_tokens, 1)
    speed, ttft = _speed(tok_s)
    if ttft_s is not None:
        ttft = _num("ttft_s", ttft_s)
    return calls * (ttft + output_tokens / speed + _num("tool_s", tool_s))


def thinking_tokens(tok_s, seconds: float, *, ttft_s: float | None = None) -> float:
    """Reasoning tokens a model can think in `seconds` of wall-clock: tok_s x (seconds - ttft)."""
    speed, ttft = _speed(tok_s)
    if ttft_s is not None:
        ttft = _num("ttft_s", ttft_s)
    return speed * max(_num("seconds", seconds) - ttft, 0.0)


def reasoning_time_s(thinking: int, tok_s, *, ttft_s: float | None = None) -> float:
    """Seconds to think `thinking` tokens before the answer starts: ttft + thinking / tok_s."""
    speed, ttft = _speed(tok_s)
    if ttft_s is not None:
        ttft = _num("ttft_s", ttft_s)
    return ttft + _num("thinking", thinking) / speed


@dataclass(frozen=True)
class VoiceTurn:
    """Whether a spoken reply can start within the conversational gap (seconds)."""

    ttft_s: float
    other_s: float          # speech recognition, end-of-turn detection, first audio of TTS
    gap_s: float

    @property
    def latency_s(self) -> float:
        return self.ttft_s + self.other_s

    @property
    def margin_s(self) -> float:
        """Seconds to spare (negative: the listener notices the pause)."""
        return self.gap_s - self.latency_s

    @property
    def ok(self) -> bool:
        return self.margin_s >= 0

    def __str__(self) -> str:
        return (f"voice turn: TTFT {self.ttft_s * 1e3:,.0f} ms + other {self.other_s * 1e3:,.0f} ms = "
                f"{self.latency_s * 1e3:,.0f} ms against a {self.gap_s * 1e3:,.0f} ms gap: "
                + (f"{self.margin_s * 1e3:,.0f} ms to spare" if self.ok else f"{-self.margin_s * 1e3:,.0f} ms too slow"))

    def _repr_html_(self) -> str:
        return pre_html(str(self))


def voice_turn(ttft_s, *, other_s: float = 0.0, gap_s: float = VOICE_GAP_S) -> VoiceTurn:
    """Check a voice turn: ttft (seconds, or a Result) plus the rest of the pipeline against the gap."""
    ttft = _num("ttft_s", ttft_s.ttft_s if hasattr(ttft_s, "ttft_s") else ttft_s)
    return VoiceTurn(ttft, _num("other_s", other_s), _num("gap_s", gap_s, positive=True))
