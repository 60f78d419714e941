"""The scorecard's reason for a speculative claim's miss (examples/fast_chips.py): the acceptance a
drafted token would need to reach the published figure, found by a root search (scipy's brentq) on estimate()."""
import importlib.util
import sys
from pathlib import Path

import pytest

import membound as mb


def _example():
    path = Path(__file__).resolve().parents[1] / "examples" / "fast_chips.py"
    spec = importlib.util.spec_from_file_location("fast_chips_example", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod    # its dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def test_the_acceptance_a_figure_needs_by_hand():
    """A round's cost does not depend on the acceptance (gamma draft steps and gamma + 1 verified
    positions whatever is accepted), so the speed is tokens a round, (1 - a^(g+1)) / (1 - a), over a
    fixed round time. With gamma 4: a = 0.7 gives (1 - 0.7^5) / 0.3 = 2.7731 tokens a round, a = 0.9
    gives (1 - 0.9^5) / 0.1 = 4.0951; a figure of speed(0.7) x 4.0951 / 2.7731 needs a = 0.9. A figure
    above speed(1) (5 tokens a round) needs more than any acceptance gives: None."""
    ex = _example()
    call = dict(model="llama-3.1-8b", hardware="h100-sxm", speculative=mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.7))
    s07 = mb.estimate(**call).decode_tok_s_per_user
    tau07, tau09 = (1 - 0.7**5) / 0.3, (1 - 0.9**5) / 0.1
    assert (tau07, tau09) == pytest.approx((2.7731, 4.0951), abs=1e-4)
    assert ex.acceptance_needed(call, s07 * tau09 / tau07) == pytest.approx(0.9, abs=1e-6)
    assert ex.acceptance_needed(call, s07 * 5 / tau07 * 1.01) is None
    # within 30% no reason is given; beyond it, the acceptance the figure needs
    assert ex.drafting_reason(call, s07, s07 * 1.2) == ""
    why = ex.drafting_reason(call, s07, s07 * tau09 / tau07)
    assert why.startswith(f"{s07 * tau09 / tau07:,.0f} tok/s needs an acceptance of 0.90 a drafted token at gamma 4")
