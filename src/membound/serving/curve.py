"""The served curve: `serve_curve()` over concurrencies, and the fast mode it offers."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import defaults
from ..base.stacking import stack, structure
from ..errors import InvalidInputError, MemboundError, is_finite_number
from ..physics.estimate import MAX_COUNT, Prepared
from ..physics.fares import SpeedCurve
from ..physics.result import usd_per_million_tokens
from .api import build
from .lengths import Length, as_length
from .scheduler import Scheduler
from .solver import Steady, closed_cap, rows_alone, solve, solve_stack
from .step import StepModel
from ..base.display import serve_curve_text, serve_curve_html, served_fast_mode_rows, text_table, html_table


@dataclass(frozen=True)
class ServeCurve:
    """Throughput per chip against speed per user over client counts (InferenceMAX's chart),
    from one vectorised solve. Arrays indexed like `concurrency`."""

    model: str
    hardware: str
    runtime: str
    n_chips: int
    concurrency: np.ndarray
    tok_s_per_user: np.ndarray
    output_tok_s_per_chip: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    mean_running: np.ndarray
    cost_per_million_output_tokens_usd: np.ndarray | None

    def to_pandas(self):
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        return pd.DataFrame({k: getattr(self, k) for k in ("concurrency", "tok_s_per_user", "output_tok_s_per_chip",
                                                           "ttft_s", "tpot_s", "mean_running")}
                            | ({"cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd}
                               if self.cost_per_million_output_tokens_usd is not None else {}))

    def __str__(self) -> str:
        return serve_curve_text(self)

    def _repr_html_(self) -> str:
        return serve_curve_html(self)

    @property
    def speeds(self) -> SpeedCurve:
        """The curve as `fares` reads it: speed per user and throughput per chip against clients."""
        return SpeedCurve(self.concurrency, self.tok_s_per_user, self.output_tok_s_per_chip)

    def knee(self, share: float = 0.8) -> int:
        """The fewest clients whose throughput per chip reaches `share` of the curve's best (past
        it, more clients buy little throughput and cost every user speed)."""
        t = np.asarray(self.output_tok_s_per_chip, float)
        return int(self.concurrency[int(np.flatnonzero(t >= share * t.max())[0])])

    def fast_mode(self, speedup: float = 2.5, standard_concurrency: int | None = None) -> ServedFastMode:
        """Read a fast lane off the curve: where the speed per user is `speedup` times the standard
        lane's (default: the knee). The price ratio is the ratio of throughputs per chip (a
        chip-hour costs the same whoever rides)."""
        if not (isinstance(speedup, (int, float)) and is_finite_number(speedup) and speedup > 1):
            raise InvalidInputError("speedup", speedup, "a finite ratio > 1")
        std = self.knee() if standard_concurrency is None else standard_concurrency
        if not np.any(np.asarray(self.concurrency) == std):
            raise InvalidInputError("standard_concurrency", standard_concurrency,
                                    f"one of the curve's client counts {list(self.concurrency)}")
        f = self.speeds.fast_lane(float(speedup), std)
        return ServedFastMode(f.load, int(std), f.speedup, f.price_ratio, f.tok_s_per_user, f.base_tok_s_per_user)

    def bus_fare(self, concurrency: int) -> float:
        """How many times the full bus's price per token a rider pays at `concurrency` clients
        (the full bus: the curve's highest throughput per chip; `fares.SpeedCurve.fare`)."""
        return self.speeds.fare(concurrency).price_ratio


@dataclass(frozen=True)
class ServedFastMode:
    """A fast lane read off the served curve against the standard lane (its best throughput)."""

    fast_concurrency: float     # clients per instance in the fast lane (interpolated)
    slow_concurrency: int
    speedup: float              # tok/s per user, fast / slow
    price_ratio: float          # USD per output token, fast / slow
    fast_tok_s_per_user: float
    slow_tok_s_per_user: float

    @property
    def reading(self) -> str:
        """The fast lane in one sentence."""
        return (f"fast lane ~{self.fast_concurrency:.1f} clients ({self.fast_tok_s_per_user:,.0f} tok/s per user) vs "
                f"standard {self.slow_concurrency} clients ({self.slow_tok_s_per_user:,.0f}): "
                f"{self.speedup:.2f}x the speed for {self.price_ratio:.2f}x the price per token")

    def __str__(self) -> str:
        return text_table(served_fast_mode_rows(self))

    def _repr_html_(self) -> str:
        return html_table(served_fast_mode_rows(self))


DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def serve_curve(model, hardware, *, concurrency=DEFAULT_CONCURRENCY, prompt_tokens=defaults.PROMPT_TOKENS,
                output_tokens=defaults.OUTPUT_TOKENS, **kwargs) -> ServeCurve:
    """The served curve: `serve()`'s steady state at each client count, in one solve.
    kwargs as serve() (dtypes, n_chips, parallel, runtime, scheduler, price_usd_per_hour)."""
    conc = _client_counts(concurrency)
    c = _Configured(model, hardware, prompt_tokens, output_tokens, kwargs)
    return c.curve(conc, solve(c.sm, c.sched, c.prompt.mean, c.output.mean, concurrency=conc))


def serve_curves(configurations: Sequence[dict[str, Any]], *, concurrency=DEFAULT_CONCURRENCY,
                 skip: Callable[[int, MemboundError], None] | None = None) -> list[ServeCurve | None]:
    """`serve_curve(**configuration, concurrency=concurrency)` of each configuration (a dict of
    serve_curve's arguments: model, hardware, prompt_tokens, output_tokens, ...), equal to it field
    by field. The configurations whose steps differ only in their numbers (one model, scheduler,
    layout and lengths on devices, formats or prices of one structure: `base.stacking`) go through
    the solver at once, their client counts as rows of one grid (`solver.solve_stack`, on a step
    model whose differing numbers are columns: `_stacked_model`); a configuration alone, or a single
    client count, is served as serve_curve serves it. skip: None raises a configuration's
    MemboundError as serve_curve would (in their order); else skip(i, error) is called (it may
    raise) and the i-th curve is None."""
    conc = _client_counts(concurrency)
    out: list[ServeCurve | None] = [None] * len(configurations)
    runs: dict[Any, list[tuple[int, _Configured, tuple[float, float]]]] = {}
    for i, kw in enumerate(configurations):
        try:
            c = _Configured(kw["model"], kw["hardware"], kw.get("prompt_tokens", defaults.PROMPT_TOKENS),
                            kw.get("output_tokens", defaults.OUTPUT_TOKENS),
                            {k: v for k, v in kw.items() if k not in ("model", "hardware", "prompt_tokens",
                                                                      "output_tokens")})
            cap = closed_cap(c.sm, c.sched, c.prompt.mean, c.output.mean)
        except MemboundError as e:
            if skip is None:
                raise
            skip(i, e)
            continue
        key = c.signature() if conc.size > 1 else object()
        runs.setdefault(key, []).append((i, c, cap))
    for run in runs.values():
        if len(run) == 1:
            i, c, _ = run[0]
            out[i] = c.curve(conc, solve(c.sm, c.sched, c.prompt.mean, c.output.mean, concurrency=conc))
            continue
        c0 = run[0][1]
        stack = _stacked_model([c.sm for _, c, _ in run], conc.size)
        steady = solve_stack(stack, c0.sched, c0.prompt.mean, c0.output.mean, conc, [cap for _, _, cap in run])
        for (i, c, _), st in zip(run, steady):
            out[i] = c.curve(conc, st)
    return out


def _client_counts(concurrency) -> np.ndarray:
    """serve_curve's client counts as floats, checked."""
    try:
        conc = np.asarray(list(concurrency), float)
    except (TypeError, ValueError, OverflowError):     # a bare count, [{}], [10**400]
        conc = np.zeros(0)
    if conc.ndim != 1 or conc.size == 0 or not np.all(np.isfinite(conc)) or np.any(conc < 1) \
            or np.any(conc > MAX_COUNT) or np.any(conc != np.floor(conc)):    # inf, 1e300: int64 labels overflowed
        raise InvalidInputError("concurrency", concurrency, f"a non-empty sequence of integers from 1 to {MAX_COUNT:,}")
    return conc


class _Configured:
    """A served configuration as serve_curve builds it: its lengths and (StepModel, Scheduler, Prepared)."""

    def __init__(self, model, hardware, prompt_tokens, output_tokens, kwargs: dict[str, Any]):
        self.prompt: Length = as_length("prompt_tokens", prompt_tokens, 0)
        self.output: Length = as_length("output_tokens", output_tokens, 2)
        built = build(model, hardware, prompt=self.prompt, output=self.output, **kwargs)
        self.sm: StepModel = built[0]
        self.sched: Scheduler = built[1]
        self.p: Prepared = built[2]

    def curve(self, conc: np.ndarray, st: Steady) -> ServeCurve:
        """The ServeCurve of the steady states `st` at the client counts `conc`."""
        sm, p, output = self.sm, self.p, self.output
        per_chip = st.request_rate * output.mean / sm.n_chips
        cost = None if sm.price is None else usd_per_million_tokens(sm.price, per_chip)
        return ServeCurve(p.model.name, p.hardware.name, p.runtime.name, sm.n_chips, conc.astype(int), 1.0 / st.tau,
                          per_chip, st.ttft, st.tau, st.running, cost)

    def signature(self) -> Any:
        """What the configurations solved at once share: the scheduler, the mean lengths, a closed
        loop whose rows are computed alone (`_State.columnwise`: not under batch waiting) and no
        drafter; then the step model's structure (`base.stacking.structure`: its model, layout and
        paths; its numbers may differ). None of these: a key of its own."""
        sm, sched = self.sm, self.sched
        if sm.draft is not None or not rows_alone(sm, sched):
            return object()
        return repr(sched), self.prompt.mean, self.output.mean, structure(sm)


def _stacked_model(sms: list[StepModel], reps: int) -> StepModel:
    """One StepModel for step models of one structure, each number that differs among them a
    column of len(sms) x reps rows (each model's repeated `reps` times, one row per client count)."""
    return stack(sms, lambda values: np.repeat(np.array(values), reps)[:, None])
