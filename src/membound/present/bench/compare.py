"""Measured against predicted: `compare()` puts each benchmark level beside `estimate()` for
the same model, device, prompt and output lengths (concurrency as the batch) and beside the
pure roofline; `fit_runtime()` fits the runtime's achievable bandwidth fraction and per-step
overhead to the measured decode speeds, giving a Runtime to pass as `estimate(runtime=...)`.

The fitted step model, per level i (seconds per decode step, terms from `estimate()` with
bandwidth fraction 1 and no engine overhead, at the level's mean context):

    t_i = max(memory_i / f, compute_i, latency_i) + communication_i + o

measured t_i = 1 / (median decode tok/s per user). f in [0.01, 1] and o in [0, max t_i]
minimise the relative squared error sum ((t_i - fit_i) / t_i)^2 (membound.fitter, the one
fitter, from F_STARTS fractions spread over the range: the max() makes the objective
piecewise in f). When the memory term cannot be told apart from a constant
(one level, memory terms within 5% of each other, or weight and KV streaming at the
device's own fraction under 10% of every measured step: an endpoint limited by its software,
not its memory), f stays at the device's fraction and only o is fitted (`identifiable` False).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ...catalog._data import read_yaml, validate
from ...fidelity import fitter
from ...errors import InvalidInputError
from ...physics.estimate import estimate
from ...fidelity.fitter import FitReport, Param
from ...catalog.hardware import load_hardware
from ...catalog.model import load_model
from ...catalog.runtime import Runtime, RuntimeEntry, load_runtime
from .prompts import CHARS_PER_TOKEN
from .trust import check_points, vet
from ...physics.efficiency import efficiency

F_MIN = 0.01
F_STARTS = 9     # starting fractions of the fit, log-spaced over [F_MIN, 1]


@dataclass(frozen=True)
class Comparison:
    """One level measured beside the prediction (`runtime`) and the pure roofline ("ideal")."""

    prompt: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    prompt_tokens_source: str          # "usage" (streamed), "probe" (a non-streamed request's usage), "chars/4"
    ttft_s: tuple                      # (measured, predicted, ideal) seconds
    decode_tok_s: tuple                # per user (measured, predicted, ideal)
    aggregate_tok_s: tuple             # (measured, predicted, ideal)
    fits: bool


def _level_tokens(result, st) -> tuple[int, str, int]:
    if st.prompt_tokens_median is not None:
        prompt, src = int(round(st.prompt_tokens_median)), "usage"
    elif st.prompt in result.prompt_tokens:
        prompt, src = int(result.prompt_tokens[st.prompt]), "probe"
    else:
        prompt, src = int(round(result.prompt_chars.get(st.prompt, 0) / CHARS_PER_TOKEN)), "chars/4"
    out = max(int(round(st.output_tokens_median or 1)), 1)
    return prompt, src, out


def compare(result, model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None,
            runtime=None) -> list[Comparison]:
    """Each level of a BenchResult with at least one complete request, beside `estimate()`
    (runtime as given; None: the device's fractions) and the pure roofline."""
    m, hw = load_model(model), load_hardware(hardware)
    rows = []
    for st in result.stats():
        if st.ok == 0:
            continue
        S, src, T = _level_tokens(result, st)
        kw = dict(batch=st.concurrency, prompt_tokens=S, output_tokens=T, weight_dtype=weight_dtype,
                  kv_dtype=kv_dtype, check_memory=False)
        pred = estimate(m, hw, runtime=runtime, **kw)
        ideal = estimate(m, hw, runtime="ideal", **kw)
        rows.append(Comparison(
            st.prompt, st.concurrency, S, T, src,
            (st.ttft_median_s, pred.ttft_s, ideal.ttft_s),
            (st.decode_median_tok_s, pred.decode_tok_s_per_user, ideal.decode_tok_s_per_user),
            (st.aggregate_median_tok_s, pred.decode_tok_s_total, ideal.decode_tok_s_total),
            bool(pred.memory is not None and pred.memory.fits)))   # estimate() always sets memory
    return rows


@dataclass(frozen=True)
class Point:
    """One measured level for the fit: batch decoded together, tokens, measured speed."""

    batch: int
    prompt_tokens: int
    output_tokens: int
    decode_tok_s: float   # per user


@dataclass(frozen=True)
class Calibration:
    """A fitted runtime and how well it fits (relative errors of the step time)."""

    runtime: Runtime
    bandwidth_fraction: float
    per_step_overhead_s: float
    identifiable: bool
    points: tuple
    measured_step_s: tuple
    fitted_step_s: tuple
    report: FitReport | None = None    # the fitter's report: f and o, bounds hit, residuals (relative)

    @property
    def rms_relative_error(self) -> float:
        t, f = np.array(self.measured_step_s), np.array(self.fitted_step_s)
        return float(np.sqrt(np.mean(((t - f) / t) ** 2)))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.runtime.model_dump(mode="json"), sort_keys=False)

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(self.to_yaml())
        return p


def load_runtime_file(path: str | Path) -> Runtime:
    """A Runtime from a YAML file (e.g. one `Calibration.save` wrote), for estimate(runtime=...)."""
    return validate(Runtime, read_yaml(path), str(path))


def points_from(result) -> list[Point]:
    """Fit points of a BenchResult: each level's median per-user decode speed, with the batch
    the server really ran (its effective concurrency, rounded, within 1..concurrency)."""
    pts = []
    for st in result.stats():
        if not st.decode_median_tok_s:
            continue
        eff = st.effective_concurrency or 1.0
        S, _, T = _level_tokens(result, st)
        pts.append(Point(int(min(max(round(eff), 1), st.concurrency)), S, T, st.decode_median_tok_s))
    return pts


def fit_runtime(measured, model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None,
                name: str = "calibrated", source: str = "") -> Calibration:
    """Fit bandwidth fraction and per-step overhead (see module docstring). measured: a
    BenchResult or a list of Point. Requests faster than the roofline allows are left out
    (trust.vet); a Point that fast is an InvalidInputError."""
    kw: dict = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    pts = list(measured) if isinstance(measured, (list, tuple)) else points_from(vet(measured, model, hardware, **kw))
    if not pts or not all(isinstance(p, Point) and p.decode_tok_s > 0 for p in pts):
        raise InvalidInputError("measured", measured, "a BenchResult with complete requests or a list of Point")
    check_points(pts, model, hardware, **kw)
    m, hw = load_model(model), load_hardware(hardware)
    probe = Runtime(name="probe", classes={"default": RuntimeEntry(bandwidth_fraction=1.0)})
    terms = np.array([[estimate(m, hw, batch=p.batch, prompt_tokens=p.prompt_tokens, output_tokens=p.output_tokens,
                                weight_dtype=weight_dtype, kv_dtype=kv_dtype, runtime=probe,
                                check_memory=False).step_terms_s[k]
                       for k in ("memory", "compute", "latency", "communication")] for p in pts])
    mem, comp, lat, comm = terms.T
    t = np.array([1.0 / p.decode_tok_s for p in pts])

    def fitted_steps(q: dict) -> np.ndarray:
        return np.maximum(np.maximum(mem / q.get("f", f), comp), lat) + comm + q["o"]

    prior = min(max(efficiency(load_runtime(None), hw).bandwidth_fraction, F_MIN), 1.0)
    spread = (mem.max() - mem.min()) / mem.max() if mem.max() > 0 else 0.0
    # weight and KV streaming must matter at a plausible fraction (the device's own) for the
    # fraction to be told apart from the overhead; otherwise any f would "fit" the noise
    identifiable = len(pts) >= 2 and spread > 0.05 and bool(np.any(mem / prior > 0.1 * t))
    f = prior
    params = [Param("o", 0.0, float(t.max()), 0.0)]
    starts: list = []
    if identifiable:   # the max() makes f's objective piecewise: start from a spread of fractions
        params.insert(0, Param("f", F_MIN, 1.0, prior, log=True))
        starts = [{"f": float(g)} for g in np.logspace(np.log10(F_MIN), 0.0, F_STARTS)]
    report = fitter.fit(lambda q: (t - fitted_steps(q)) / t, params, rows=[f"level {i}" for i in range(len(pts))],
                        starts=starts)
    f, o = float(report.params.get("f", f)), float(report.params["o"])
    fitted = fitted_steps({"f": f, "o": o})
    how = "fitted" if identifiable else "device's own (not identifiable from these levels)"
    rt = Runtime(
        name=name, description=f"calibrated on {hw.name} for {m.name}" + (f" at {source}" if source else ""),
        classes={"default": RuntimeEntry(bandwidth_fraction=f, per_step_overhead_s=o,
                                         evidence=f"bandwidth fraction {how}; overhead fitted")},
        calibration=(f"least squares over {len(pts)} levels (batch, prompt, output, tok/s): "
                     + "; ".join(f"({p.batch}, {p.prompt_tokens}, {p.output_tokens}, {p.decode_tok_s:.4g})"
                                 for p in pts)))
    return Calibration(rt, f, o, identifiable, tuple(pts), tuple(t.tolist()), tuple(fitted.tolist()), report)
