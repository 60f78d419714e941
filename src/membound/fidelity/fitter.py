"""The one fitter: bounded least squares over named physical constants, and its one report.

Every fit in membound goes through `fit()`: the runtimes' efficiencies (`membound.calibrate`),
the served engines' costs (`membound.serve_calibrate`), the fast chips' one constant each
(`membound.fidelity.vendors`) and a user's own benchmark (`membound.present.bench.fit_runtime`). The solver is
scipy's Trust Region Reflective least squares (`scipy.optimize.least_squares(method="trf")`,
docs.scipy.org/doc/scipy/reference/generated/scipy.optimize.least_squares.html) with a
two-point finite-difference Jacobian. Each parameter is mapped onto [0, 1] (linearly, or in
log space for a constant that spans decades) so that one difference step suits them all.

A `FitReport` says what came out: the parameters, which landed on a bound (reported as missing
physics, never as a result: docs/architecture.md, rules of honest fitting), the rows the residuals came
from, the residuals at the optimum, and whether the solver converged.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError

# the relative distance from a bound (as a share of the parameter's range, or of its decades for a
# log-scaled one) within which a fitted value counts as on it
BOUND_TOLERANCE = 1e-3
DIFF_STEP = 1e-4          # the finite-difference step, in the [0, 1] coordinates (a kink-tolerant step)
TOLERANCE = 1e-10         # ftol, xtol and gtol of the solver: run to convergence
POLISH_XTOL = 1e-7        # a polish's line-search tolerance, in the [0, 1] coordinates (`fit(polish=True)`)


@dataclass(frozen=True)
class Param:
    """One constant to fit: its name, its prior range [lo, hi] and a starting value; `log`
    fits it in log space (a latency that may be 1e-8 or 1e-4 s), which needs lo > 0."""

    name: str
    lo: float
    hi: float
    start: float
    log: bool = False

    def __post_init__(self):
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise InvalidInputError(f"{self.name} bounds", (self.lo, self.hi), "finite lo < hi")
        if self.log and self.lo <= 0:
            raise InvalidInputError(f"{self.name} lo", self.lo, "> 0 for a log-scaled parameter")
        if not math.isfinite(self.start):
            raise InvalidInputError(f"{self.name} start", self.start, "a finite number")

    def to_unit(self, x: float) -> float:
        x = min(max(x, self.lo), self.hi)
        if self.log:
            return math.log(x / self.lo) / math.log(self.hi / self.lo)
        return (x - self.lo) / (self.hi - self.lo)

    def from_unit(self, z: float) -> float:
        z = min(max(z, 0.0), 1.0)
        if self.log:
            return self.lo * (self.hi / self.lo) ** z
        return self.lo + z * (self.hi - self.lo)

    def bound_hit(self, x: float) -> str | None:
        """'lower' or 'upper' when `x` lies within BOUND_TOLERANCE of that bound, else None."""
        z = self.to_unit(x)
        if z <= BOUND_TOLERANCE:
            return "lower"
        if z >= 1.0 - BOUND_TOLERANCE:
            return "upper"
        return None


@dataclass(frozen=True)
class FitReport:
    """What a fit gave: `params` {name: value}; `bounds` {name: (lo, hi)}; `at_bounds` the
    parameters that ended on a bound, as "name=value (lower|upper bound)" (missing physics);
    `rows` the ids of the rows behind the residuals (one id may stand for several residuals);
    `residuals` at the optimum, a tuple of floats (log(predicted / measured) where the caller
    fits ratios);
    `converged` and `message` from the solver; `evaluations` of the residual function."""

    params: dict
    bounds: dict
    at_bounds: tuple
    rows: tuple
    residuals: tuple
    converged: bool
    message: str
    evaluations: int

    @property
    def cost(self) -> float:
        """Half the sum of squared residuals (scipy's convention)."""
        r = np.asarray(self.residuals, float)
        return 0.5 * float(r @ r)

    @property
    def median_abs_error(self) -> float:
        """Median |exp(r) - 1| over the residuals: the median relative error where r is a log ratio."""
        return float(np.median(np.abs(np.expm1(self.residuals)))) if self.residuals else float("nan")

    def summary(self) -> str:
        ps = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        flag = f"; ON A BOUND (missing physics): {', '.join(self.at_bounds)}" if self.at_bounds else ""
        return (f"{ps} from {len(self.rows)} rows ({len(self.residuals)} residuals), median |error| "
                f"{100 * self.median_abs_error:.1f}%{'' if self.converged else ' (NOT CONVERGED: ' + self.message + ')'}"
                f"{flag}")


def at_bounds(params: Mapping[str, float], spec: Sequence[Param]) -> tuple:
    """"name=value (side bound)" for each of `params` on a bound of its `spec`."""
    out = []
    for p in spec:
        if p.name in params:
            side = p.bound_hit(float(params[p.name]))
            if side:
                out.append(f"{p.name}={float(params[p.name]):.3g} ({side} bound)")
    return tuple(out)


def fit(residuals: Callable[[dict], np.ndarray], params: Sequence[Param], rows: Sequence[str] = (),
        starts: Sequence[Mapping[str, float]] = (), max_iterations: int = 200, polish: bool = False) -> FitReport:
    """Minimise sum(residuals(p) ** 2) over the `params` within their bounds, from each of their
    own starts and then each mapping in `starts` (missing names take the Param's start); the best
    optimum wins. `residuals` takes {name: value} and returns a 1-D array of finite numbers.
    `max_iterations` caps the solver's steps (scipy's max_nfev; each step's Jacobian costs another
    len(params) evaluations). `polish` then searches on from the best optimum without derivatives
    (scipy's Powell method, bounded, in the same [0, 1] coordinates, line searches to POLISH_XTOL, at
    most max_iterations x (len(params) + 1) evaluations) and keeps what it finds where the cost fell:
    the trust region, on finite-difference Jacobians, can stop short in a long flat valley of nearly
    collinear constants (llama.cpp-cuda's compute share, per-layer and MoE costs: three starts
    stopped 1e-6 apart in cost and a unit apart in the fourth digit), which line searches cross."""
    from scipy.optimize import least_squares   # scipy.optimize: deferred, slow to import; only fits need it

    params = tuple(params)
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise InvalidInputError("params", names, "distinct parameter names")

    def values(z) -> dict:
        return {p.name: p.from_unit(float(v)) for p, v in zip(params, z)}

    def res(z) -> np.ndarray:
        r = np.asarray(residuals(values(z)), float)
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise InvalidInputError("residuals", r, "a 1-D array of finite numbers")
        return r

    if not params:
        r = res(np.zeros(0))
        return FitReport({}, {}, (), tuple(rows), tuple(r.tolist()), True, "nothing to fit", 1)
    candidates = [[p.start for p in params]] + [[s.get(p.name, p.start) for p in params] for s in starts]
    best = None
    for x0 in candidates:
        z0 = np.array([p.to_unit(float(v)) for p, v in zip(params, x0)])
        sol = least_squares(res, z0, bounds=(0.0, 1.0), method="trf", jac="2-point", diff_step=DIFF_STEP,
                            x_scale=1.0, ftol=TOLERANCE, xtol=TOLERANCE, gtol=TOLERANCE,
                            max_nfev=max_iterations)
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    z, fun, message, evaluations = best.x, best.fun, str(best.message), int(best.nfev)
    if polish:
        from scipy.optimize import minimize   # deferred with least_squares
        out = minimize(lambda z: 0.5 * float(np.sum(res(z) ** 2)), best.x, method="Powell",
                       bounds=[(0.0, 1.0)] * len(params),
                       options=dict(xtol=POLISH_XTOL, ftol=TOLERANCE, maxfev=max_iterations * (len(params) + 1)))
        evaluations += int(out.nfev)
        if out.fun < best.cost:
            z, fun, message = out.x, res(out.x), f"{message}; polished without derivatives: {out.message}"
    p_out = values(z)
    return FitReport(p_out, {p.name: (p.lo, p.hi) for p in params}, at_bounds(p_out, params), tuple(rows),
                     tuple(float(v) for v in fun), bool(best.status > 0), message, evaluations)
