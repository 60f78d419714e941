"""serving.solver._root_ahead gives _root's answer to the bit, in fewer evaluations.

_root refines a 24-point geometric grid 7 times, one evaluation per round; _root_ahead evaluates
the rounds it predicts from the margin's last values beside the one it knows, and counts each round
on its own grid as _root does. Whatever the test (smooth, kinked, or a below that disagrees with
the margin's sign somewhere), the answers are equal as floats, not within a tolerance.
"""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from membound.serving.solver import _root, _root_ahead


def _both(below_and_margin, lo: float, hi: float, n: float):
    """(_root's answer, _root_ahead's, _root_ahead's evaluations); each call also asks for the
    points of the first bracket beside (its ends and their geometric middle), whose figures (the
    points themselves) must come back, the bracket holding the root."""
    calls, brackets = [], []

    def beside(low, high):
        brackets.append((low, high))
        return np.array([low, math.sqrt(low * high), high])

    def state(b, arg):          # the "figures" are the points themselves
        calls.append(np.shape(b))
        return b, arg

    def test(figures, b, arg):
        return below_and_margin(b, arg)

    ref = _root(lambda b, arg: below_and_margin(b, arg)[0], np.array([lo]), np.array([hi]), np.array([n]))
    got, at_hi, at_root, at_beside = _root_ahead(state, test, np.array([lo]), np.array([hi]), np.array([n]),
                                                 beside=beside)
    (low, high), = brackets
    assert low <= float(np.asarray(got)[0]) <= high
    assert at_beside[0].tolist() == [low, math.sqrt(low * high), high]
    return float(np.asarray(ref)[0]), float(np.asarray(got)[0]), len(calls), at_hi, at_root


@settings(max_examples=150, deadline=None)
@given(root=st.floats(1e-6, 0.999), power=st.floats(0.3, 3.0), n=st.floats(1.0, 1e4))
def test_smooth_margin_same_root_in_fewer_evaluations(root, power, n):
    # b + X TTFT grows like b^power: the margin n - n (b / (root n))^power crosses 0 at b = root n
    def bm(b, arg):
        held = arg * (b / (root * arg)) ** power
        return held < arg, arg - held
    ref, got, evals, _, at_root = _both(bm, n * 1e-9, n, n)
    assert got == ref
    assert evals <= 7
    # the figures returned at the root are the state's there: here the point itself
    assert np.asarray(at_root[0]).reshape(-1)[0] == got


@settings(max_examples=100, deadline=None)
@given(root=st.floats(1e-3, 0.999), edge=st.floats(1e-3, 1.0), n=st.floats(1.0, 1e4))
def test_below_false_past_an_edge_same_root(root, edge, n):
    # `ok` false beyond edge * n (the prefill budget binds): below turns there whatever the margin says
    def bm(b, arg):
        margin = arg * (root - b / arg)
        return (margin > 0) & (b < edge * arg), margin
    ref, got, _, _, _ = _both(bm, n * 1e-9, n, n)
    assert got == ref


def test_all_below_ends_at_the_top_bracket():
    # below everywhere: each round keeps its top bracket (k = 23 of 24 points), as _root does
    ref, got, evals, _, _ = _both(lambda b, arg: (b < 2 * arg, 2 * arg - b), 1e-9, 1.0, 1.0)
    assert got == ref
    top = 1.0
    lo = 1e-9
    j = np.linspace(0.0, 1.0, 24)
    for _ in range(7):      # by hand: the last two points of each round's grid
        grid = lo * (top / lo) ** j
        lo, top = grid[22], grid[23]
    assert got == float(np.sqrt(lo * top))
    assert evals == 2       # the first grid with hi, then every round predicted at once


def test_smooth_case_takes_fewer_evaluations():
    # a linear margin: _root evaluates 7 grids; the first brackets the root within a factor
    # 1e9^(1/23) = 2.46, and the rounds predicted from each grid's margins are checked on their own
    ref, got, evals, _, _ = _both(lambda b, arg: (b < 0.37 * arg, 0.37 * arg - b), 1e-7, 100.0, 100.0)
    assert got == ref
    assert math.isclose(got, 37.0, rel_tol=1e-7)     # ln(1e9) / 23^7 = 6e-9 wide brackets
    assert evals < 7
