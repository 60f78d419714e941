"""serving.solver's one-load closed loop at single points (`_closed_point`) gives the figures of
`_root`'s rounds on arrays to the bit.

Two laws carry it: the state of plain floats is the state of arrays, element by element (for a
step with no routed experts: `StepModel.float_exact`; with them, the answer is checked and its
figures taken on arrays), and `_point_root` finds `_root`'s answer for a test that turns false
once, from a handful of single points instead of 7 grids of 24.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving import solver
from membound.serving.api import build
from membound.serving.lengths import as_length
from membound.serving.solver import _Probes, _point_root, _root, _State


def _both(below_and_margin, lo: float, hi: float, n: float):
    """(_root's answer, _point_root's or None, its evaluations); hi fails the test."""
    def evaluate(b):
        below, margin = below_and_margin(b, n)
        return (b,), bool(below), float(margin)
    probes = _Probes(evaluate, lo)
    probes.at(hi)
    assert probes.failed == hi
    found = _point_root(probes, lo, hi)
    ref = _root(lambda b, arg: below_and_margin(b, arg)[0], np.array([lo]), np.array([hi]), np.array([n]))
    return float(ref[0]), None if found is None else found[0], len(probes.seen), found


@settings(max_examples=200, deadline=None)
@given(root=st.floats(1e-6, 0.999), power=st.floats(0.3, 3.0), n=st.floats(1.0, 1e4))
def test_smooth_margin_same_root_from_a_few_points(root, power, n):
    # b + X TTFT grows like b^power: the margin -log((b / (root n))^power) crosses 0 at b = root n
    def bm(b, arg):
        held = arg * (b / (root * arg)) ** power
        return held < arg, -np.log(held / arg)
    ref, got, evals, found = _both(bm, n * 1e-9, n, n)
    assert got == ref
    assert found[1] == (got,)      # the figures returned are the evaluation at the root
    # the margin is a line of slope -power in log b: hi; a step on the line of slope -1 through
    # it; a step on the line through hi and that point, which is the margin's own (to rounding);
    # where the next estimate does not stay within 1e-7 of it (a quadratic through 3 points), one
    # more; then the root's point and, where no point evaluated is on the other side of the test's
    # turn within the root's brackets, one end of them
    assert evals <= 6


@settings(max_examples=100, deadline=None)
@given(root=st.floats(1e-3, 0.999), edge=st.floats(1e-3, 1.0), n=st.floats(1.0, 1e4))
def test_a_budget_edge_the_margin_sees_same_root(root, edge, n):
    # `ok` false beyond edge * n (the prefill budget binds): below turns there, the margin the smaller
    def bm(b, arg):
        return (b < root * arg) & (b < edge * arg), -np.log(np.maximum(b / (root * arg), b / (edge * arg)))
    ref, got, _, _ = _both(bm, n * 1e-9, n, n)
    assert got == ref


@settings(max_examples=100, deadline=None)
@given(root=st.floats(1e-3, 0.999), jump_at=st.floats(1e-3, 1.0), jump=st.floats(0.0, 2.0), n=st.floats(1.0, 1e4))
def test_a_jumping_margin_same_root_or_none(root, jump_at, jump, n):
    # the margin drops by `jump` at jump_at * n (a prompt's chunks grow by one): where the points
    # cannot pin the turn, _point_root says so (None) and the caller takes _root's rounds
    def bm(b, arg):
        margin = -np.log(b / (root * arg)) - np.where(b >= jump_at * arg, jump, 0.0)
        return margin > 0, margin
    ref, got, _, _ = _both(bm, n * 1e-9, n, n)
    assert got is None or got == ref


def test_a_linear_margin_by_hand():
    # margin -log(b / 37) on (1e-7, 100]: the first step, on the line of slope -1 in log b through
    # (100, -log(100 / 37)), lands on 37 (to rounding); _root's answer is the middle of its last
    # bracket about 37
    ref, got, evals, _ = _both(lambda b, arg: (b < 37.0, -np.log(b / 37.0)), 1e-7, 100.0, 100.0)
    assert got == ref
    assert math.isclose(got, 37.0, rel_tol=1e-8)       # ln(1e9) / 23^7 = 6e-9 wide brackets
    lo, hi = 1e-7, 100.0
    j = np.linspace(0.0, 1.0, 24)
    for _ in range(7):      # _root's rounds, by hand
        grid = lo * (hi / lo) ** j
        k = int(np.count_nonzero(grid < 37.0))
        lo, hi = grid[k - 1], grid[k]
    assert got == float(np.sqrt(lo * hi))
    assert evals <= 5


def _states():
    """Closed-loop states of dense served configurations: vLLM (chunked, mixed steps), SGLang,
    TensorRT-LLM, a pipeline of 2 stages, a sliding-window model, long prompts (several chunks)."""
    cases = [("llama-3.3-70b", "h200", 8, "vllm", None, 1024, 1024),
             ("llama-3.1-8b", "h100-sxm", 1, "sglang", None, 8192, 512),
             ("llama-3.1-8b", "a100-80gb", 1, "tensorrt-llm", None, 32000, 256),
             ("llama-3.3-70b", "h100-sxm", 8, "vllm", mb.Parallel(tp=4, pp=2), 2048, 2048),
             ("gemma-3-27b", "h100-sxm", 2, "vllm", None, 12000, 700)]
    out = []
    for model, hw, chips, rt, par, S, T in cases:
        sm, sched, _ = build(model, hw, prompt=as_length("prompt_tokens", S, 0), output=as_length("output_tokens", T, 2),
                             weight_dtype="fp8", n_chips=chips, parallel=par, runtime=rt)
        assert sm.float_exact
        out.append(_State(sm, sched, float(S), float(T), True))
    return out


STATES = _states()


@settings(max_examples=60, deadline=None)
@given(case=st.integers(0, len(STATES) - 1), n=st.integers(1, 2048),
       shares=st.lists(st.floats(1e-9, 1.0), min_size=1, max_size=5))
def test_the_state_of_floats_is_the_state_of_arrays_to_the_bit(case, n, shares):
    state = STATES[case]
    b = np.array(shares) * n
    arrays = state(b[None], np.array([[float(n)]]))
    for i, bi in enumerate(b.tolist()):
        floats = state(bi, float(n))
        for a, f in zip(arrays, floats):
            assert type(f) in (float, bool)
            assert np.broadcast_to(a, (1, len(b)))[0, i] == f


def _moe_state():
    """A model with routed experts: its step takes expected_experts' power, which numpy's
    vectorised pow rounds unlike libm's."""
    sm, sched, _ = build("qwen3-30b-a3b", "h100-sxm", prompt=as_length("prompt_tokens", 1024, 0),
                         output=as_length("output_tokens", 1024, 2), n_chips=1, runtime="vllm")
    return _State(sm, sched, 1024.0, 1024.0, True)


def test_a_model_with_routed_experts_is_not_float_exact():
    assert not _moe_state().sm.float_exact


@pytest.mark.parametrize("case", range(len(STATES) + 1))
def test_solve_at_single_points_equals_solve_by_rounds(case, monkeypatch):
    # the last case has routed experts: its answer is checked, and its figures taken, on arrays
    state = STATES[case] if case < len(STATES) else _moe_state()
    loads = [1, 2, 7, 64, 300, 2048]
    got = [solver.solve(state.sm, state.sched, state.S, state.T, concurrency=float(n)) for n in loads]
    monkeypatch.setattr(solver, "_closed_point", lambda *args: None)
    ref = [solver.solve(state.sm, state.sched, state.S, state.T, concurrency=float(n)) for n in loads]
    for g, r in zip(got, ref):
        for field in r.__dataclass_fields__:
            a, b = getattr(r, field), getattr(g, field)
            assert np.shape(a) == np.shape(b) and np.array_equal(a, b), field


def test_the_engines_scheduler_is_resolved_once_per_served_block():
    # serve() without a scheduler takes the engine's knobs: the Scheduler of Scheduler().resolved,
    # built once per served block (frozen) and handed out again
    from membound.catalog.runtime import Served
    from membound.serving.scheduler import Scheduler, engine_scheduler
    served = Served(max_running=64, token_budget=2048, chunked_prefill=False)
    first = engine_scheduler(served)
    assert first == Scheduler().resolved(served)
    assert (first.max_running, first.token_budget, first.chunked_prefill) == (64, 2048, False)
    assert engine_scheduler(Served(max_running=64, token_budget=2048, chunked_prefill=False)) is first


def _open_states():
    """Open-loop states: the closed cases' engines under Poisson arrivals, a model with routed
    experts, the device runtime (no served block), short prompts with long outputs."""
    out = [_State(s.sm, s.sched, s.S, s.T, False) for s in STATES]
    moe = _moe_state()
    out.append(_State(moe.sm, moe.sched, moe.S, moe.T, False))
    for model, hw, rt, S, T in [("llama-3.1-8b", "h100-sxm", None, 1024, 256), ("llama-3.1-8b", "mi300x", "vllm", 128, 2048)]:
        sm, sched, _ = build(model, hw, prompt=as_length("prompt_tokens", S, 0), output=as_length("output_tokens", T, 2),
                             n_chips=1, runtime=rt)
        out.append(_State(sm, sched, float(S), float(T), False))
    return out


OPEN_STATES = _open_states()


@pytest.mark.parametrize("case", range(len(OPEN_STATES)))
def test_open_loop_ahead_equals_open_loop_by_rounds(case, monkeypatch):
    # one arrival rate: _root_ahead with the capacity grid beside its first round (columns computed
    # alone: _State.columnwise) gives the figures of the capacity grid, then _root's 7 rounds, to the bit
    state = OPEN_STATES[case]
    assert state.columnwise
    cap, _ = solver._running_cap(state, state.S)
    grid = cap * np.geomspace(1e-6, 1.0, 200)
    _, _, _, _, x, _, _, ok = state(grid)
    capacity = float(np.max(np.where(ok, x, 0.0)))
    rates = [capacity * s for s in (1e-6, 0.01, 0.3, 0.7, 0.95, 0.999)] + [capacity, 2.0 * capacity]

    def run():
        out = []
        for rate in rates:
            try:
                out.append(solver.solve(state.sm, state.sched, state.S, state.T, arrival_rate=rate))
            except mb.MemboundError as e:
                out.append(str(e))
        return out
    got = run()
    monkeypatch.setattr(solver._State, "columnwise", property(lambda self: False))
    ref = run()
    assert isinstance(ref[-1], str) and isinstance(ref[-2], str)     # at and past the capacity: refused
    for g, r in zip(got, ref):
        if isinstance(r, str):
            assert g == r
            continue
        for field in r.__dataclass_fields__:
            a, b = getattr(r, field), getattr(g, field)
            assert np.shape(a) == np.shape(b) and np.array_equal(a, b), field
