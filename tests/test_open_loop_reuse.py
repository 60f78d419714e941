"""The open loop's tails take the TTFT's loads from the occupancy's evaluation of the open loop
(`serving.tails._rates_at`) where it holds them: one state evaluation fewer per serve(arrival_rate=...),
the same numbers to the bit (issue 33: outputs unchanged)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving import tails as tails_module
from membound.serving.api import build
from membound.serving.lengths import as_length
from membound.serving.solver import open_loop_rates, rows_alone

# (model, device, runtime, prompt, output, rates): loads from nearly idle to near the capacity
# (8B on one H100 under vllm holds about 15 requests/s at 1024/256), so the TTFT's 8 loads fall on
# the occupancy's grid (low loads: every count up to about 20 is on it) and off it (high loads)
CASES = [("llama-3.1-8b", "h100-sxm", "vllm", 1024, 256, (0.5, 5.0, 14.0)),
         ("llama-3.1-8b", "h100-sxm", "sglang", 2048, 128, (1.0, 8.0)),
         ("qwen3-30b-a3b", "h100-sxm", "vllm", 512, 512, (2.0, 20.0))]


def _serve_all(monkeypatch, reuse: bool):
    if not reuse:     # every TTFT load evaluated again, as before the reuse
        monkeypatch.setattr(tails_module, "rows_alone", lambda sm, sched: False)
    out = []
    for model, hw, rt, S, T, rates in CASES:
        for rate in rates:
            try:
                r = mb.serve(model, hw, runtime=rt, arrival_rate=rate, prompt_tokens=S, output_tokens=T)
            except mb.MemboundError as e:       # past the capacity: the same refusal either way
                out.append(str(e))
                continue
            out.append((r.ttft, r.tpot, r.itl, r.e2e, r.queueing_s))
    monkeypatch.undo()
    return out


def test_tails_reusing_the_occupancy_are_bit_identical(monkeypatch):
    calls = []
    real = tails_module.open_loop_rates

    def counted(*args, **kwargs):
        calls.append(np.size(args[4]))
        return real(*args, **kwargs)
    monkeypatch.setattr(tails_module, "open_loop_rates", counted)
    reused = _serve_all(monkeypatch, True)
    monkeypatch.setattr(tails_module, "open_loop_rates", counted)
    evaluated = calls.copy()
    calls.clear()
    again = _serve_all(monkeypatch, False)
    # == on floats (tuples of Quantiles): every figure to the bit
    assert reused == again
    # the reuse happened: a call at the occupancy's grid and none at the TTFT's 8 loads, at least once
    assert evaluated.count(8) < calls.count(8)


def _state_inputs(model, hw, rt, S, T):
    sm, sched, _ = build(model, hw, prompt=as_length("prompt_tokens", S, 0), output=as_length("output_tokens", T, 2),
                         n_chips=1, runtime=rt)
    return sm, sched, float(S), float(T)


STATES = [_state_inputs("llama-3.1-8b", "h100-sxm", "vllm", 1024, 256),
          _state_inputs("llama-3.1-8b", "mi300x", "sglang", 128, 2048)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, len(STATES) - 1), st.lists(st.integers(0, 63), min_size=2, max_size=8))
def test_open_loop_points_are_computed_alone(case, picks):
    # the law `_rates_at` rests on: with two points or more, each point's figures do not depend on
    # the points beside it (solver.rows_alone), so a subset of a grid gives the grid's numbers
    sm, sched, S, T = STATES[case]
    assert rows_alone(sm, sched)
    grid = np.arange(64.0) * 3.0          # b = 0, 3, ..., 189 others
    whole = open_loop_rates(sm, sched, S, T, grid)
    part = open_loop_rates(sm, sched, S, T, grid[picks])
    for w, p in zip(whole, part):
        assert w[picks].tobytes() == p.tobytes()


def test_batch_waiting_evaluates_the_ttft_loads_again(monkeypatch):
    # TensorRT-LLM's batch waiting sizes its Poisson sums by the call's largest rate, so its points
    # are not computed alone: _rates_at evaluates them rather than reading the occupancy's
    sm, sched, S, T = STATES[0]
    waiting = dataclasses.replace(sched, batch_wait_steps=10, batch_wait_ratio=0.5)
    assert not rows_alone(sm, waiting)
    occ = tails_module.occupancy(sm, waiting, 1.0, S, T, 64.0)
    calls = []
    monkeypatch.setattr(tails_module, "open_loop_rates", lambda *a: calls.append(a) or open_loop_rates(*a))
    b = occ.others[:8].copy()             # on the grid, yet evaluated
    got = tails_module._rates_at(occ, sm, waiting, S, T, b, 1)
    want = open_loop_rates(sm, waiting, S, T, b)
    assert len(calls) == 1
    assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))


@pytest.mark.parametrize("b", [np.array([0.0, 1.0]), np.array([1.0, 1.0, 2.0])])
def test_points_on_the_grid_are_read(b, monkeypatch):
    sm, sched, S, T = STATES[0]
    occ = tails_module.occupancy(sm, sched, 1.0, S, T, 64.0)
    # occupancy's grid: b = n - 1 for n = round(geomspace(1, 64, 96)), which holds every n <= 64
    assert occ.others[:3].tolist() == [0.0, 1.0, 2.0]
    monkeypatch.setattr(tails_module, "open_loop_rates", None)    # read, not evaluated
    got = tails_module._rates_at(occ, sm, sched, S, T, b, 1)
    assert all(g.tolist() == r[b.astype(int)].tolist() for g, r in zip(got, occ.rates))
