"""Product-level latency: the seeds' agent-loop figures, reasoning budgets, voice turns."""
import pytest

import membound as mb
from membound.planning.product import agent_loop_s, reasoning_time_s, thinking_tokens, voice_turn
from membound.errors import InvalidInputError


def test_agent_loop_seed_figures():
    # 20 serial calls x 800 tokens: 16,000 tokens at 70 tok/s = 228.6 s (~230 s); at 750 tok/s = 21.3 s
    assert agent_loop_s(20, 800, 70) == pytest.approx(20 * 800 / 70)
    assert agent_loop_s(20, 800, 70) == pytest.approx(228.571, abs=1e-3)
    assert agent_loop_s(20, 800, 750) == pytest.approx(21.333, abs=1e-3)


def test_agent_loop_adds_ttft_and_tools():
    # 10 calls x (0.5 s TTFT + 100 tokens / 50 tok/s + 1.5 s tool) = 10 x 4 s = 40 s
    assert agent_loop_s(10, 100, 50, ttft_s=0.5, tool_s=1.5) == pytest.approx(40.0)


def test_agent_loop_from_a_result():
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=1000, output_tokens=800)
    expect = 20 * (r.ttft_s + 800 / r.decode_tok_s_per_user)
    assert agent_loop_s(20, 800, r) == pytest.approx(expect)


def test_reasoning_budget():
    # 30 s of wall-clock at 100 tok/s after a 2 s TTFT: (30 - 2) x 100 = 2,800 thinking tokens
    assert thinking_tokens(100, 30, ttft_s=2.0) == pytest.approx(2800)
    # 10,000 thinking tokens at 750 tok/s: 13.3 s; at 70 tok/s: 142.9 s
    assert reasoning_time_s(10_000, 750) == pytest.approx(13.333, abs=1e-3)
    assert reasoning_time_s(10_000, 70) == pytest.approx(142.857, abs=1e-3)


def test_voice_turn():
    # 300 ms TTFT + 150 ms of speech recognition and TTS start = 450 ms, inside the 500 ms gap
    t = voice_turn(0.3, other_s=0.15)
    assert t.ok and t.margin_s == pytest.approx(0.05)
    assert not voice_turn(0.45, other_s=0.15).ok


@pytest.mark.parametrize("call", [lambda: agent_loop_s(0, 800, 70), lambda: agent_loop_s(20, 800, 0),
                                  lambda: agent_loop_s(20, 800, float("nan")),
                                  lambda: voice_turn(-0.1), lambda: thinking_tokens(100, -1)])
def test_bad_input(call):
    with pytest.raises(InvalidInputError):
        call()
