"""The highest Poisson arrival rate an engine instance serves within latency limits.

MLPerf Inference's Server and Interactive scenarios, and a capacity planner, ask the same thing:
how many requests per second does this configuration take while the p99 TTFT and the p99 TPOT
stay within the limits? `max_rate` searches the arrival rate: the steady state at each rate
(`serving.solve`, open loop) and its latency percentiles from the tail model (`membound.tails`:
prompt queueing, prefill/decode interference, the spread of lengths and load), up to the
engine's saturation throughput. Percentiles rise with the rate, so the answer is the rate where
the first limit is reached (bisection between the last rate that passes and the first that
fails, on a grid from 1% of saturation).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError, MemboundError, is_finite_number
from ..serving.lengths import Length, as_length
from ..serving.scheduler import Scheduler
from ..serving.solver import solve
from ..serving.step import StepModel
from ..serving.tails import Tails, tails
from ..serving.api import build
from ..serving.disagg import Pool, Pools, build_pools, disaggregated_tails, open_pools

LIMITS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "e2e_p99_s")
SATURATED = 1e9        # closed-loop clients far beyond any engine's running batch: its saturation
GRID = 16              # rates tried between 1% and 99.5% of saturation before the bisection
BISECTIONS = 10        # halvings of the bracket: 2^-10 of it


@dataclass(frozen=True)
class MaxRate:
    """The highest rate within the limits, and the engine there (seconds; tokens/s)."""

    rate: float                     # requests per second (0: no rate meets the limits)
    output_tok_s: float             # completed output tokens per second at that rate
    output_tok_s_per_chip: float
    saturation_rate: float          # requests per second with the queue never empty (Offline)
    ttft: tuple[float, float, float]    # p50, p90, p99 at that rate
    tpot: tuple[float, float, float]
    binding: str                    # the limit reached first ("" where the engine saturates first)
    limits: dict


def limits_of(slo, skip_e2e: bool = False) -> dict[str, float]:
    """The latency limits of `slo`: a mapping of LIMITS keys to seconds, or a mb.SLO (its TTFT
    p50/p90/p99 targets, its TPOT p99 and min_tok_s_per_user as a median TPOT of 1 / that).
    skip_e2e: leave an SLO's e2e_p90_s out (the planner checks it itself) instead of refusing it."""
    if not isinstance(slo, Mapping) and hasattr(slo, "min_tok_s_per_user"):   # a planner.SLO (planner imports this module)
        if slo.e2e_p90_s is not None and not skip_e2e:
            raise InvalidInputError("slo.e2e_p90_s", slo.e2e_p90_s, "None in max_rate (its limits are TTFT and TPOT)")
        out = {"ttft_p50_s": slo.ttft_p50_s, "ttft_p90_s": slo.ttft_p90_s, "ttft_p99_s": slo.ttft_p99_s,
               "tpot_p50_s": None if slo.min_tok_s_per_user is None else 1.0 / slo.min_tok_s_per_user,
               "tpot_p99_s": slo.tpot_p99_s}
        lim = {k: float(v) for k, v in out.items() if v is not None}
    elif isinstance(slo, Mapping):
        lim = {}
        for k, v in slo.items():
            if k not in LIMITS:
                raise InvalidInputError("slo", k, f"limit names among {', '.join(LIMITS)}")
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not is_finite_number(v) or v <= 0:
                raise InvalidInputError(f"slo[{k!r}]", v, "a finite number of seconds > 0")
            lim[k] = float(v)
    else:
        raise InvalidInputError("slo", slo, "a mapping such as {'ttft_p99_s': 2.0, 'tpot_p99_s': 0.2} or a mb.SLO")
    if not lim:
        raise InvalidInputError("slo", slo, "at least one latency limit")
    return lim


def _failing(t: Tails, lim: dict[str, float]) -> str:
    """The first limit `t` breaks, or ''."""
    got = {"ttft_p50_s": t.ttft[0], "ttft_p90_s": t.ttft[1], "ttft_p99_s": t.ttft[2],
           "tpot_p50_s": t.tpot[0], "tpot_p90_s": t.tpot[1], "tpot_p99_s": t.tpot[2], "e2e_p99_s": t.e2e_p99}
    return next((k for k, v in lim.items() if got[k] > v), "")


def saturation(sm: StepModel, sched: Scheduler, prompt: Length, output: Length, beams: int = 1) -> float:
    """Requests per second of the engine with its queue never empty (MLPerf Offline); beams: beam
    search's width (serving.solve)."""
    return float(solve(sm, sched, prompt.mean, output.mean, concurrency=np.array([SATURATED]), beams=beams).request_rate[0])


def search(sm: StepModel, sched: Scheduler, prompt: Length, output: Length, lim: dict[str, float],
           beams: int = 1) -> MaxRate:
    """`max_rate` on a built engine (serving.build): see the module docstring. e2e_p99_s is checked
    against a bound, p99 TTFT + (p99 output - 1) x p99 TPOT (Tails.e2e_p99)."""
    cap = saturation(sm, sched, prompt, output, beams)

    def at(rate: float) -> Tails | None:
        try:
            st = solve(sm, sched, prompt.mean, output.mean, arrival_rate=np.array([rate]), beams=beams)
        except MemboundError:      # beyond the open loop's capacity
            return None
        return tails(sm, sched, st, rate, prompt, output, beams=beams)
    return highest(at, cap, lim, output, sm.n_chips)


def search_disaggregated(pools: Pools, prompt: Length, output: Length, lim: dict[str, float]) -> MaxRate:
    """`max_rate` of a prefill pool and a decode pool (serving.disagg.build_pools) under Poisson
    arrivals (serving.disagg's open loop: `disaggregated_tails`), up to the pools' capacity; tokens
    per chip over the chips of both pools."""
    op = open_pools(pools, prompt, output)
    return highest(lambda rate: disaggregated_tails(pools, op, rate, prompt, output), op.capacity, lim, output,
                   pools.chips)


def highest(at: Callable[[float], Tails | None], cap: float, lim: dict[str, float], output: Length,
            chips: int) -> MaxRate:
    """The highest rate below `cap` (requests/s: saturation) whose tails `at(rate)` (None: beyond the
    capacity) meet the limits `lim`: a grid from 1% of cap, then a bisection between the last rate
    that passes and the first that fails (module docstring); output tokens per chip over `chips`."""
    grid = cap * np.concatenate([np.geomspace(0.01, 0.9, GRID - 3), [0.95, 0.98, 0.995]])
    best, best_t, fail, why = 0.0, None, None, ""
    for r in grid:
        t = at(float(r))
        why = "saturation" if t is None else _failing(t, lim)
        if why:
            fail = float(r)
            break
        best, best_t = float(r), t
    if fail is not None and best > 0.0:
        lo, hi = best, fail
        for _ in range(BISECTIONS):
            mid = 0.5 * (lo + hi)
            t = at(mid)
            w = "saturation" if t is None else _failing(t, lim)
            if w:
                hi, why = mid, w
            else:
                lo, best_t = mid, t
        best = lo
    binding = "" if why in ("", "saturation") else why
    if best_t is None:
        nan3 = (math.nan, math.nan, math.nan)
        return MaxRate(0.0, 0.0, 0.0, cap, nan3, nan3, binding or "saturation", lim)
    tok = best * output.mean
    return MaxRate(best, tok, tok / chips, cap, best_t.ttft, best_t.tpot, binding, lim)


def max_rate(model, hardware, *, slo, prompt_tokens=1024, output_tokens=1024, weight_dtype: str = "bf16",
             kv_dtype: str | None = None, n_chips: int = 1, parallel=None, runtime="vllm",
             scheduler: Scheduler | None = None, quantization=None, speculative=None,
             prefill: Pool | None = None, decode: Pool | None = None) -> MaxRate:
    """The highest Poisson arrival rate (requests/s) one engine instance of `n_chips` serves while
    the latency percentiles stay within `slo` (e.g. {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2}, the
    keys of LIMITS, or a mb.SLO); lengths a count or a distribution (mb.Fixed, Uniform, Samples);
    the other arguments as serve()'s. The percentiles come from `membound.tails`.
    prefill, decode: a disaggregated system instead, a pool of prefill workers and one of decode
    workers (mb.Pool, as serve_disaggregated's; n_chips and parallel are then the pools'), the
    arrivals spread over each pool's workers (serving.disagg's open loop); speculative decoding,
    where given, runs on both pools (its drafter prefills too); tokens per chip over both pools."""
    lim = limits_of(slo)
    prompt = as_length("prompt_tokens", prompt_tokens, 0)
    output = as_length("output_tokens", output_tokens, 2)
    kw = dict(prompt=prompt, output=output, weight_dtype=weight_dtype, kv_dtype=kv_dtype, runtime=runtime,
              scheduler=scheduler, quantization=quantization, speculative=speculative)
    if prefill is not None or decode is not None:
        if prefill is None or decode is None or n_chips != 1 or parallel is not None:
            raise InvalidInputError("prefill, decode", (prefill, decode), "both pools (mb.Pool), with n_chips and "
                                    "parallel left to them, for a disaggregated system; neither for one engine")
        pools, _ = build_pools(model, hardware, prefill, decode, **kw)
        return search_disaggregated(pools, as_length("prompt_tokens", prompt_tokens, 1), output, lim)
    sm, sched, _ = build(model, hardware, n_chips=n_chips, parallel=parallel, **kw)
    return search(sm, sched, prompt, output, lim)
