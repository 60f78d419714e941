"""Budgets that hold (issue 31, Medium 8; Low: plan_served's input errors): limits in seconds of
work read from a clock as a run goes, grids capped before any solve, and a plan's bad input
raised as the caller's error, not reported as "no configuration meets the SLO". Clocks here are
counters (no timed test): each read advances one second."""
import itertools

import pytest

import membound as mb
from membound.base import workbudget
from membound.errors import InvalidInputError, UnknownNameError
from membound.planning.planner import MAX_GRID_POINTS, plan_served
from membound.base.workbudget import WorkBudget


def _counter():
    ticks = itertools.count()
    return lambda: float(next(ticks))


def _refusal(elapsed):
    return InvalidInputError("run", f"{elapsed:g} s", "at most 5 s of work")


def test_a_budget_refuses_on_the_first_read_past_its_seconds():
    b = WorkBudget(5.0, _refusal, clock=_counter())      # start reads 0
    for _ in range(5):                                    # reads 1..5: not past 5 s
        b.tick()
    with pytest.raises(InvalidInputError, match="run='6 s' is invalid: expected at most 5 s of work"):
        b.tick()                                          # reads 6 > 5


def test_the_bar_appears_only_after_show_after_s():
    b = WorkBudget(100.0, _refusal, clock=_counter(), show_after_s=3.0, total=10)
    b.tick(1), b.tick(2)                                  # reads 1, 2 < 3 s: no bar
    assert b._bar is None
    b.tick(3)                                             # read 3: shown, at 3 of 10
    assert b._bar is not None and b._shown == 3
    b.close()
    assert b._bar is None


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), True, "10"])
def test_a_budget_is_a_positive_number_of_seconds(seconds):
    with pytest.raises(InvalidInputError, match="seconds="):
        WorkBudget(seconds, _refusal)


def _plan(**kw):
    return plan_served("llama-3.1-8b", mb.SLO(ttft_p90_s=1.0), **{"users": 100, "hardware": ["h100-sxm"],
                                                                     "weight_dtypes": ["bf16"], "chips": [1], **kw})


def test_plan_served_caps_its_grids_before_any_solve():
    # the attack as written: 100,000 concurrency points (minutes, 945 MB) -> refused at once
    with pytest.raises(InvalidInputError, match=f"concurrency=.* a non-empty list of at most {MAX_GRID_POINTS:,}"):
        _plan(concurrency=list(range(1, 100_001)))
    # a generator of 10**9 counts is read only to 4,097 before the refusal
    with pytest.raises(InvalidInputError, match="at most 4,096"):
        _plan(concurrency=(i for i in range(1, 10**9)))
    with pytest.raises(InvalidInputError, match="chips="):
        _plan(chips=list(range(1, 5000)))
    assert len(_plan(concurrency=list(range(1, MAX_GRID_POINTS + 1), )).frontier) == MAX_GRID_POINTS


@pytest.mark.parametrize("kw, error, words", [
    (dict(weight_dtypes=["fp9"]), UnknownNameError, "unknown dtype 'fp9'"),
    (dict(kv_dtype="fp7"), UnknownNameError, "unknown dtype 'fp7'"),
    (dict(runtime="vllmm"), UnknownNameError, "unknown runtime 'vllmm'"),
    (dict(hardware=["h100-sxmm"]), UnknownNameError, "unknown hardware 'h100-sxmm'"),
    (dict(hardware=[]), InvalidInputError, "hardware=\\[\\] is invalid: expected at least one device"),
    (dict(weight_dtypes=[]), InvalidInputError, "weight_dtypes=\\[\\]"),
    (dict(chips=[0]), InvalidInputError, "chips=0"),
    (dict(chips=[1.5]), InvalidInputError, "chips=1.5"),
])
def test_plan_served_raises_input_errors_instead_of_finding_no_configuration(kw, error, words):
    with pytest.raises(error, match=words):
        _plan(**kw)


def test_plan_served_is_refused_past_its_seconds_of_work(monkeypatch):
    # 1 s a read: the start reads 0, the k-th configuration's tick reads k; 2 devices x 2 formats x
    # 16 chip counts = 64 configurations, so with PLAN_BUDGET_S = 60 the 61st tick is refused
    from membound.planning import planner
    monkeypatch.setattr(workbudget, "CLOCK", _counter())
    assert planner.PLAN_BUDGET_S == 60.0
    with pytest.raises(InvalidInputError, match=r"plan_served='61 s' is invalid: expected a plan of at most 60 s"):
        _plan(hardware=["h100-sxm", "h200"], weight_dtypes=["bf16", "fp8"], chips=list(range(1, 17)))
