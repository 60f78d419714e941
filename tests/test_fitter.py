"""The one fitter (membound.fidelity.fitter): bounded least squares and its report."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.fidelity.fitter import FitReport, Param, at_bounds, fit

X = np.arange(5.0)


def _line(p):
    # residuals of a p["a"] x + p["b"] model against y = 2x + 1 sampled exactly at x = 0..4
    return p["a"] * X + p["b"] - (2 * X + 1)


def test_a_line_is_recovered_and_the_report_says_so():
    rep = fit(_line, [Param("a", 0, 10, 0.5), Param("b", 0, 10, 0.0)], rows=[f"x{i}" for i in range(5)])
    assert rep.params["a"] == pytest.approx(2, rel=1e-6) and rep.params["b"] == pytest.approx(1, abs=1e-6)
    assert rep.converged and rep.at_bounds == () and rep.rows == ("x0", "x1", "x2", "x3", "x4")
    assert len(rep.residuals) == 5 and rep.cost == pytest.approx(0, abs=1e-10)
    assert rep.bounds == {"a": (0, 10), "b": (0, 10)}


def test_an_optimum_beyond_a_bound_stops_on_it_and_is_reported_as_missing_physics():
    # a is held to [0, 1.5] while the data want 2: b then takes the least-squares intercept of
    # y - 1.5x = 0.5x + 1 over x = 0..4, i.e. 1 + 0.5 * mean(x) = 1 + 0.5 * 2 = 2
    rep = fit(_line, [Param("a", 0, 1.5, 0.5), Param("b", 0, 10, 0.0)])
    assert rep.params["a"] == pytest.approx(1.5, abs=1e-6)
    assert rep.params["b"] == pytest.approx(2.0, abs=1e-5)
    assert rep.at_bounds == ("a=1.5 (upper bound)",)
    assert "ON A BOUND (missing physics): a=1.5 (upper bound)" in rep.summary()


def test_a_log_scaled_latency_spanning_decades():
    # one row measured at 3 ms of which 1 ms is fixed: the latency is 2e-3 s, found within [1e-8, 1e-1]
    rep = fit(lambda p: [math.log((1e-3 + p["t"]) / 3e-3)], [Param("t", 1e-8, 1e-1, 1e-6, log=True)])
    assert rep.params["t"] == pytest.approx(2e-3, rel=1e-6)
    assert rep.median_abs_error == pytest.approx(0, abs=1e-9)


def test_the_best_of_several_starts_wins():
    # r(x) = (x - 1)(x - 4) has a root at 1 and one at 4 with a hump between; |r| is least at either
    # root, so each start finds one; from x = 0.2 alone the fit finds 1, with a start at 4.5 it still
    # keeps a root (cost 0 either way): the report's cost is 0
    rep = fit(lambda p: [(p["x"] - 1) * (p["x"] - 4)], [Param("x", 0, 5, 0.2)], starts=[{"x": 4.5}])
    assert rep.cost == pytest.approx(0, abs=1e-12)
    assert min(abs(rep.params["x"] - 1), abs(rep.params["x"] - 4)) < 1e-5
    # a problem with a worse local minimum: r = [x^2 - 4x + 5] (least 1 at x = 2) or 0 beyond x = 4.5;
    # from 0.5 the fit stalls at 2 (cost 0.5), from 4.8 it reaches the flat zero (cost 0)
    r = lambda p: [0.0 if p["x"] > 4.5 else p["x"] ** 2 - 4 * p["x"] + 5]   # noqa: E731
    assert fit(r, [Param("x", 0, 5, 0.5)]).cost == pytest.approx(0.5, abs=1e-6)
    assert fit(r, [Param("x", 0, 5, 0.5)], starts=[{"x": 4.8}]).cost == 0


def test_nothing_to_fit_still_reports_the_residuals():
    rep = fit(lambda p: [0.1, -0.1], [], rows=["a", "b"])
    assert rep.params == {} and rep.residuals == (0.1, -0.1) and rep.cost == pytest.approx(0.01)


def test_bad_input_is_a_clear_error():
    with pytest.raises(mb.InvalidInputError, match="bounds"):
        Param("a", 1.0, 1.0, 1.0)
    with pytest.raises(mb.InvalidInputError, match="log-scaled"):
        Param("a", 0.0, 1.0, 0.5, log=True)
    with pytest.raises(mb.InvalidInputError, match="start"):
        Param("a", 0.0, 1.0, float("nan"))
    with pytest.raises(mb.InvalidInputError, match="distinct"):
        fit(_line, [Param("a", 0, 1, 0.5), Param("a", 0, 1, 0.5)])
    with pytest.raises(mb.InvalidInputError, match="residuals"):
        fit(lambda p: [float("nan")], [Param("a", 0, 1, 0.5)])


def test_at_bounds_within_a_thousandth_of_the_range():
    spec = [Param("f", 0.0, 1.0, 0.5), Param("o", 0.0, 2e-3, 1e-3)]
    # 0.9995 is within 1e-3 of 1; 1.5e-6 is within 1e-3 x 2e-3 = 2e-6 of 0; 3e-6 is not
    assert at_bounds({"f": 0.9995, "o": 1.5e-6}, spec) == ("f=1 (upper bound)", "o=1.5e-06 (lower bound)")
    assert at_bounds({"f": 0.998, "o": 3e-6}, spec) == ()


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.1, 9.9), b=st.floats(0.1, 9.9))
def test_law_an_exact_line_inside_the_bounds_is_recovered(a, b):
    rep = fit(lambda p: p["a"] * X + p["b"] - (a * X + b), [Param("a", 0, 10, 5.0), Param("b", 0, 10, 5.0)])
    assert rep.params["a"] == pytest.approx(a, abs=1e-6) and rep.params["b"] == pytest.approx(b, abs=1e-6)
    assert isinstance(rep, FitReport) and rep == rep
