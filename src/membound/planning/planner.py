"""The capacity planner: the cheapest way to serve a workload under latency targets.

`plan()` sizes fleets for one model over devices x chip counts x dtypes and ranks what meets the
SLOs by cost per million output tokens (all chips' price over the tokens delivered). One
planner, two explicit modes:

- batching="served" (the default): continuous batching with `serve()`'s physics, the steady-state
  solver (`serving.solve`, one vectorised solve per device x dtype x chip count over the clients
  per replica in `batches`). Each configuration takes the most clients per replica whose figures
  meet the SLO; every figure of a ranked row is what `serve()` reports at that load (TTFT p50/p90
  and end-to-end p90 from the solver's quantiles, `serving.api.ttft_quantile`; tok/s per user =
  1 / TPOT). `concurrent_users` need ceil(users / clients) replicas (each then runs
  ceil(users / replicas) clients, re-solved); `arrival_rate_rps` needs the fewest replicas, from
  ceil(rate / (max_utilisation x replica throughput)) up, whose open-loop steady state at
  rate / replicas meets the SLO.
- batching="static": the plain bus, and it says what it assumes: a batch of `batch` requests
  arrives, prefills and decodes together (`estimate()`'s static schedule, no prefill overlapping
  the decodes); with an arrival rate a passenger waits for the seats to fill (q x (B - 1) /
  lambda_replica at quantile q) and for a free bus (M/D/c: Erlang C halved, Allen-Cunneen),
  replicas added (utilisation stepping down from `max_utilisation`) until the TTFT targets hold.

Prompt and output lengths may be a number, a list (equally likely) or {tokens: weight}: means set
throughput and cost, the p50/p90 lengths set the latency checks, the maximum sets memory.
"""
from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base import defaults
from ..catalog.dtypes import get_dtype
from ..errors import InvalidInputError, is_finite_number
from ..physics.estimate import MAX_COUNT, check_int
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from ..physics.result import equal_values, usd_per_million_tokens
from .sweep import pareto_front, sweep
from ..base.workbudget import WorkBudget
from ..serving import Fixed, Samples, solve, build, as_length
from ..errors import MemboundError
from ..serving.api import result_from_solver, e2e_quantile, ttft_quantile
from ..catalog.runtime import load_runtime
from .rate_search import limits_of, search
import html

if TYPE_CHECKING:
    import pandas as pd

# a token count, a list of equally likely counts, or {count: weight}
Lengths = int | list[int] | tuple[int, ...] | dict[int, float]

DEFAULT_HARDWARE = ("h100-sxm", "h200", "b200", "mi300x")
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
_KEYS = ["model", "hardware", "runtime", "n_chips", "parallel", "weight_dtype", "kv_dtype", "activation_dtype"]
_UTILISATION_STEPS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def _distribution(field_name: str, value, minimum: int):
    """(values, probabilities) of a token-length distribution."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        pairs = [(v, 1.0) for v in value]
    else:
        pairs = [(value, 1.0)]
    if not pairs:
        raise InvalidInputError(field_name, value, "a token count, a list of counts or {count: weight}")
    for v, w in pairs:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
            raise InvalidInputError(field_name, v, f"integer token counts >= {minimum}")
        if not is_finite_number(w) or w <= 0:
            raise InvalidInputError(f"{field_name} weight", w, "a finite weight > 0")
    vals = np.array([int(v) for v, _ in pairs])
    probs = np.array([float(w) for _, w in pairs])
    order = np.argsort(vals)
    return vals[order], probs[order] / probs.sum()



def _check_load(users_field: str, users: object, rate_field: str, rate: object) -> None:
    """Exactly one of a client count (an integer >= 1) and an arrival rate (finite, > 0 per s)."""
    if (users is None) == (rate is None):
        raise InvalidInputError(users_field, users, f"exactly one of {users_field} or {rate_field}")
    if users is not None:
        check_int(users_field, users, 1)
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, numbers.Real)
                             or not is_finite_number(rate) or rate <= 0):
        raise InvalidInputError(rate_field, rate, "a finite rate > 0 requests per second")

@dataclass(frozen=True)
class Workload:
    """Traffic: either `concurrent_users` (requests in flight) or `arrival_rate_rps` (requests
    per second, Poisson); prompt/output lengths in tokens (number, list or {tokens: weight})."""

    concurrent_users: int | None = None
    arrival_rate_rps: float | None = None
    prompt_tokens: Lengths = defaults.PROMPT_TOKENS
    output_tokens: Lengths = defaults.OUTPUT_TOKENS

    def __post_init__(self):
        _check_load("concurrent_users", self.concurrent_users, "arrival_rate_rps", self.arrival_rate_rps)
        _distribution("prompt_tokens", self.prompt_tokens, 0)
        _distribution("output_tokens", self.output_tokens, 1)

    def lengths(self, which: str) -> dict:
        """{'mean', 'p50', 'p90', 'max'} of prompt or output tokens (quantiles are lengths in the
        distribution; the mean is rounded to whole tokens)."""
        vals, probs = _distribution(which, getattr(self, which), 0 if which == "prompt_tokens" else 1)
        cdf = np.cumsum(probs)

        def q(p):
            return int(vals[min(np.searchsorted(cdf, p - 1e-12), len(vals) - 1)])
        mean = max(int(round(float(vals @ probs))), 0 if which == "prompt_tokens" else 1)
        return {"mean": mean, "p50": q(0.5), "p90": q(0.9), "max": int(vals[-1])}


@dataclass(frozen=True)
class SLO:
    """Latency targets (None: no target). Seconds and tokens per second per user.

    ttft_p99_s, tpot_p99_s: MLPerf's Server/Interactive limits (the 99th percentile of TTFT and of a
    request's mean inter-token time). They need batching="served": with an arrival rate the planner
    sizes replicas by the highest rate a replica serves within the limits (`mb.max_rate`, the tails
    of `membound.serving.tails`); with clients in a closed loop the TPOT has no tail model (its p99 is the
    mean step)."""

    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    min_tok_s_per_user: float | None = None
    e2e_p90_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None

    def __post_init__(self):
        for name in ("ttft_p50_s", "ttft_p90_s", "min_tok_s_per_user", "e2e_p90_s", "ttft_p99_s", "tpot_p99_s"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real)
                                  or not is_finite_number(v) or v <= 0):
                raise InvalidInputError(name, v, "None or a finite number > 0")


@dataclass
class PlanResult:
    """Configurations meeting the SLOs (`ranked`, cheapest first), the interactivity frontier, and
    an `explanation` that says which target failed and the best value reached when none passes."""

    ranked: pd.DataFrame
    frontier: pd.DataFrame
    explanation: str
    candidates: int                   # configurations evaluated that fit in memory
    notes: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return len(self.ranked) > 0

    @property
    def best(self):
        """The cheapest configuration (a pandas Series), or None."""
        return self.ranked.iloc[0] if self.feasible else None

    def _cols(self) -> list:
        """The display columns this ranking has (static-batch plan or plan_served)."""
        return [c for c in self._COLUMNS + self._SERVED if c in self.ranked.columns]

    def __str__(self) -> str:
        cols = self._cols()
        head = self.explanation
        if not self.feasible:
            return head
        return head + "\n" + self.ranked[cols].head(10).to_string(index=False, float_format=lambda x: f"{x:.3g}")

    _COLUMNS = ("hardware", "n_chips", "parallel", "batch", "weight_dtype", "kv_dtype", "replicas", "total_chips",
                "utilisation", "ttft_p90_s", "tok_s_per_user", "cost_per_million_tokens_usd", "power_kw")
    _SERVED = ("clients_per_replica", "chips_total", "ttft_s", "tpot_s", "output_tok_s_per_chip",
               "cost_per_million_output_tokens_usd")

    def _repr_html_(self) -> str:
        head = f"<p>{html.escape(self.explanation)}</p>"
        if not self.feasible:
            return head
        return head + self.ranked[self._cols()].head(10).to_html(index=False, float_format=lambda x: f"{x:.3g}")

    def __eq__(self, other) -> bool:
        return equal_values(self, other)

    __hash__ = None     # type: ignore[assignment]  # unhashable: holds arrays, compared by value


def _erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Probability an arrival waits in M/M/c with c servers and a Erlangs (a < c), vectorised:
    the Erlang B recursion B_k = a B_{k-1} / (k + a B_{k-1}), then C = c B / (c - a (1 - B)).
    Rows far below saturation (c - a > 12 sqrt(a) + 12) wait with probability ~0."""
    c = np.asarray(c, dtype=float)
    a = np.asarray(a, dtype=float)
    out = np.zeros_like(a)
    busy = c - a <= 12.0 * np.sqrt(a) + 12.0
    if busy.any():
        cb, ab = c[busy], a[busy]
        b = np.ones_like(ab)
        at_c = np.ones_like(ab)
        for k in range(1, int(cb.max()) + 1):
            b = ab * b / (k + ab * b)
            at_c = np.where(cb == k, b, at_c)
        out[busy] = cb * at_c / (cb - ab * (1.0 - at_c))
    return np.clip(out, 0.0, 1.0)


def _wait_quantile(q: float, c, a, D):
    """q-quantile of the M/D/c queue wait (seconds), as half the M/M/c one (Allen-Cunneen)."""
    C = _erlang_c(c, a)
    with np.errstate(divide="ignore"):
        t = D / (c - a) * np.log(np.maximum(C, 1e-300) / (1.0 - q))
    return 0.5 * np.where(C > 1.0 - q, t, 0.0)


def _check_plan_args(workload: Workload, slo: SLO, batching: str, max_utilisation: float, hardware,
                     batches) -> tuple[list[str], list[int]]:
    """plan()'s argument checks; the candidate devices and the sorted batch sizes."""
    if not isinstance(workload, Workload):
        raise InvalidInputError("workload", workload, "a mb.Workload")
    if not isinstance(slo, SLO):
        raise InvalidInputError("slo", slo, "a mb.SLO")
    if batching not in ("served", "continuous", "static"):
        raise InvalidInputError("batching", batching, "'served' (continuous batching, serve()'s physics; "
                                "'continuous' is the same) or 'static' (batches decoded together)")
    if batching == "static":
        for name in ("ttft_p99_s", "tpot_p99_s"):
            if getattr(slo, name) is not None:
                raise InvalidInputError(f"slo.{name}", getattr(slo, name), "None with batching='static' (p99 "
                                        "targets need the served tails: batching='served')")
    _check_utilisation(max_utilisation)
    devices = [hardware] if isinstance(hardware, str) else list(hardware)
    if not devices:
        raise InvalidInputError("hardware", hardware, "at least one candidate device")
    return devices, sorted(set(_counts("batches", batches)))


def _check_utilisation(max_utilisation) -> None:
    if not is_finite_number(max_utilisation) or not 0 < max_utilisation <= 1:
        raise InvalidInputError("max_utilisation", max_utilisation, "a fraction in (0, 1]")


def _check_prices(prices) -> None:
    if prices is not None and not isinstance(prices, Mapping):
        raise InvalidInputError("prices", prices, "None or a dict {device name: USD per chip-hour}")


# the most values one count axis (batch sizes, clients, chips) may list: each is a solve per
# configuration and a frontier row (100,000 client counts ran for minutes and took 945 MB)
MAX_GRID_POINTS = 4096


def _counts(field_name: str, values) -> list[int]:
    """A non-empty list of at most MAX_GRID_POINTS integers from 1 to MAX_COUNT (batch sizes,
    clients), in the order given; one integer is a list of it. NaN, 2.5 or True raised
    ValueError or ran as a count."""
    items = [values] if isinstance(values, numbers.Number) else values
    try:
        counts = [check_int(field_name, v, 1) for v in itertools.islice(items, MAX_GRID_POINTS + 1)]
    except TypeError:                       # not iterable
        counts = []
    if not counts or len(counts) > MAX_GRID_POINTS:
        raise InvalidInputError(field_name, values, f"a non-empty list of at most {MAX_GRID_POINTS:,} "
                                f"integers from 1 to {MAX_COUNT:,}")
    return counts


def _prices(devices: list[str], prices: dict | None) -> tuple[dict[str, float], list[str]]:
    """USD per chip-hour by device name (`prices` over the profiles'), and notes on those left out."""
    price_map: dict[str, float] = {}
    notes: list[str] = []
    for name in devices:
        hw = load_hardware(name)
        p = (prices or {}).get(name, (prices or {}).get(hw.name, hw.price_usd_per_hour))
        if p is None:
            notes.append(f"{hw.name} left out: no price in its profile and none given in prices")
            continue
        if not is_finite_number(p) or p <= 0:
            raise InvalidInputError(f"prices[{hw.name!r}]", p, "a finite price > 0 per chip-hour")
        price_map[hw.name] = float(p)
    if not price_map:
        raise InvalidInputError("prices", prices, f"a price per chip-hour for at least one of {devices} "
                                "(none has one in its profile: give prices)")
    return price_map, notes


def _lengths_table(table: pd.DataFrame, S: dict, T: dict, batches: list[int]) -> pd.DataFrame:
    """One row per configuration and batch, with the figures at the mean, p50 and p90 lengths
    (the prefill of one prompt alone at batch 1), kept where the longest request fits."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it

    def at(s, t, cols, batch_one=False):
        sel = table[(table.prompt_tokens == s) & (table.output_tokens == t)]
        sel = sel[sel.batch == 1] if batch_one else sel
        keys = _KEYS if batch_one else _KEYS + ["batch"]
        return sel.set_index(keys)[cols]

    figs = ["tpot_s", "prefill_s", "ttft_s", "decode_s_", "e2e_s"]
    table["decode_s_"] = table.tpot_s * table.output_tokens
    mean = at(S["mean"], T["mean"], figs + ["memory_fits"]).add_suffix("_mean")
    tail = at(S["p90"], T["p90"], figs).add_suffix("_p90")
    med = at(S["p50"], T["p90"], ["ttft_s"]).add_suffix("_p50")
    fit = at(S["max"], T["max"], ["memory_fits"]).add_suffix("_max")
    one = pd.concat([at(S[q], T["p90"], ["prefill_s"], batch_one=True).add_suffix(f"_one_{q}")
                     for q in ("mean", "p50", "p90")], axis=1)
    df = mean.join([tail, med, fit]).reset_index()
    df = df.merge(one.reset_index(), on=_KEYS, how="left")
    return df[df.batch.isin(batches) & df.memory_fits_max & df.memory_fits_mean].reset_index(drop=True)


def _seat_times(df: pd.DataFrame):
    """The static bus (the module docstring): (time per output token at the mean and the p90
    lengths, a seat's hold time D = the batch's end-to-end time, TTFT before any queue at p50 and
    p90)."""
    return (df.tpot_s_mean.to_numpy(), df.tpot_s_p90.to_numpy(), df.e2e_s_mean.to_numpy(),
            df.ttft_s_p50.to_numpy(), df.ttft_s_p90.to_numpy())


def _fleet(workload: Workload, slo: SLO, B, D, base50, base90, per_user, t_p90: float, tok_time_tail,
           batching: str, max_utilisation: float):
    """(replicas, offered load in Erlangs, queue wait at p50, at p90) per configuration: a seat per
    user, or replicas added (utilisation stepping down) until the TTFT targets hold."""
    if workload.concurrent_users is not None:
        users = float(workload.concurrent_users)
        zero = np.zeros_like(B)      # every user holds a seat: no queue
        return np.ceil(users / B), np.full_like(B, users), zero, zero
    assert workload.arrival_rate_rps is not None    # exactly one of the two (Workload)
    lam = float(workload.arrival_rate_rps)
    load = lam * D
    replicas = w50 = w90 = done = None
    for u in (s for s in _UTILISATION_STEPS if s <= max_utilisation):
        r_try = np.maximum(np.ceil(load / (B * u)), 1.0)
        r_try = np.where(r_try * B <= load, r_try + 1.0, r_try)      # stability: c > a
        c = r_try * B
        q50, q90 = _wait_quantile(0.5, c, load, D), _wait_quantile(0.9, c, load, D)
        lam_r = lam / r_try             # the bus leaves full: a passenger waits for the seats to fill
        q50, q90 = q50 + 0.5 * (B - 1) / lam_r, q90 + 0.9 * (B - 1) / lam_r
        ok = _meets(slo, base50 + q50, base90 + q90, per_user, base90 + q90 + t_p90 * tok_time_tail)
        if done is None:          # the first step (replicas is None too)
            replicas, w50, w90 = r_try, q50, q90
        else:
            take = ~done & ok
            replicas, w50, w90 = (np.where(take, r_try, replicas), np.where(take, q50, w50),
                                  np.where(take, q90, w90))
        done = ok if done is None else done | ok
    return replicas, load, w50, w90


def _cheapest_text(ranked: pd.DataFrame, total: int) -> str:
    b = ranked.iloc[0]
    return (f"{len(ranked)} of {total} configurations meet the SLOs; cheapest: {b.replicas} x "
            f"{b.n_chips} {b.hardware} ({b.parallel}, batch {b.batch}, {b.weight_dtype} weights, "
            f"{b.kv_dtype} KV) at ${b.cost_per_million_tokens_usd:.3g} per million output tokens, "
            f"{b.total_chips} chips, utilisation {b.utilisation:.0%}")


def plan(model, workload: Workload, slo: SLO, *, hardware=DEFAULT_HARDWARE, prices: dict | None = None,
         weight_dtypes=("bf16", "fp8"), kv_dtypes=("bf16",), n_chips=(1, 2, 4, 8), batches=DEFAULT_BATCHES,
         runtime=None, speculative=None, batching: str = "served", max_utilisation: float = 0.9,
         chunk_size: int | None = None) -> PlanResult:
    """Rank the configurations that carry `workload` within `slo` by cost per million output tokens.

    hardware: candidate device names (prices from their profiles; `prices` {name: USD per
    chip-hour} overrides). Devices without a price are left out, with a note. batching: "served"
    (default; continuous batching with serve()'s physics: `batches` are the clients per replica
    tried, and each ranked row is what serve() reports there) or "static" (the plain bus: batches
    that arrive, prefill and decode together; see the module docstring). runtime: as estimate()'s
    and serve()'s (None: the device's default). The Python API, `membound plan` and the web page
    all call this function. Returns a PlanResult; bad input raises InvalidInputError.
    """
    devices, batches = _check_plan_args(workload, slo, batching, max_utilisation, hardware, batches)
    m = load_model(model)
    _check_prices(prices)
    price_map, notes = _prices(devices, prices)
    if batching != "static":
        prompt = as_length("prompt_tokens", _as_served_length(workload.prompt_tokens), 0)
        output = as_length("output_tokens", _as_served_length(workload.output_tokens), 2)
        _, wds, chip_counts = _served_inputs(m, list(price_map), weight_dtypes, None, n_chips, runtime)
        kds = [kv_dtypes] if isinstance(kv_dtypes, str) or kv_dtypes is None else list(kv_dtypes)
        for kd in kds:
            if kd is not None:
                get_dtype(kd)
        return _plan_served(m, workload.concurrent_users, workload.arrival_rate_rps, prompt, output, slo, price_map,
                            notes, wds, kds, chip_counts, batches, runtime, speculative, max_utilisation)
    S, T = workload.lengths("prompt_tokens"), workload.lengths("output_tokens")
    kw: dict[str, Any] = dict(chunk_size=chunk_size) if chunk_size else {}
    table = sweep(model=m, hardware=list(price_map), batch=sorted({1, *batches}),
                  prompt_tokens=sorted(set(S.values())), output_tokens=sorted(set(T.values())),
                  weight_dtype=list(weight_dtypes), kv_dtype=list(kv_dtypes), n_chips=list(n_chips),
                  runtime=runtime, speculative=speculative, price_usd_per_hour=price_map,
                  include_unfit=True, on_invalid="skip", **kw)
    for cfg, why in table.attrs["skipped"]:
        notes.append(f"skipped {cfg}: {why}")
    if len(table) == 0:
        return PlanResult(table, table, "no configuration could run: " + "; ".join(notes), 0, notes)
    for k in _KEYS:
        if k != "n_chips":
            table[k] = table[k].astype(str)
    df = _lengths_table(table, S, T, batches)
    if len(df) == 0:
        return PlanResult(df, df, f"nothing fits in memory: {m.name} with a batch's KV cache at "
                          f"{S['max'] + T['max']} tokens of context needs more chips than {list(n_chips)} "
                          f"of {list(price_map)} hold at batch {batches[0]}", 0, notes)

    B = df.batch.to_numpy(float)
    nchips = df.n_chips.to_numpy(float)
    price = df.hardware.map(price_map).to_numpy(float)
    watts = df.hardware.map({h: load_hardware(h).power_w or 0.0 for h in price_map}).to_numpy(float)
    tok_time, tok_time_tail, D, base50, base90 = _seat_times(df)
    per_user = 1.0 / tok_time_tail
    replicas, load, w50, w90 = _fleet(workload, slo, B, D, base50, base90, per_user, T["p90"], tok_time_tail,
                                      batching, max_utilisation)
    ttft50, ttft90 = base50 + w50, base90 + w90
    e2e90 = ttft90 + T["p90"] * tok_time_tail
    tok_s = load / D * T["mean"]                                   # output tokens per second delivered
    chips_total = replicas * nchips
    df = df[_KEYS + ["batch"]].assign(
        replicas=replicas.astype(int), total_chips=chips_total.astype(int),
        utilisation=load / (replicas * B), ttft_p50_s=ttft50, ttft_p90_s=ttft90, tok_s_per_user=per_user,
        e2e_p90_s=e2e90, throughput_tok_s=tok_s, tok_s_per_chip=tok_s / chips_total,
        seat_tok_s_per_chip=B / (tok_time * nchips),
        cost_per_million_tokens_usd=usd_per_million_tokens(chips_total * price, tok_s),
        power_kw=chips_total * watts / 1e3, price_usd_per_chip_hour=price)
    ok = _meets(slo, ttft50, ttft90, per_user, e2e90)
    ranked = df[ok].sort_values(["cost_per_million_tokens_usd", "total_chips", "ttft_p90_s"]).reset_index(drop=True)
    text = _cheapest_text(ranked, len(df)) if len(ranked) else _explain_failure(slo, df, ttft50, ttft90, per_user, e2e90)
    return PlanResult(ranked, _frontier(df), text, len(df), notes)


def _meets(slo: SLO, t50, t90, per_user, e2e, t99=None, tpot99=None):
    ok = np.ones_like(np.asarray(per_user, dtype=float), dtype=bool)
    for target, got, upper in ((slo.ttft_p50_s, t50, True), (slo.ttft_p90_s, t90, True),
                               (slo.min_tok_s_per_user, per_user, False), (slo.e2e_p90_s, e2e, True),
                               (slo.ttft_p99_s, t99, True), (slo.tpot_p99_s, tpot99, True)):
        if target is not None:
            ok &= (got <= target) if upper else (got >= target)
    return ok


def _explain_failure(slo: SLO, df, t50, t90, per_user, e2e) -> str:
    lines = [f"no configuration of the {len(df)} that fit meets all SLOs:"]
    checks = (("TTFT p50", slo.ttft_p50_s, t50, True, "s"), ("TTFT p90", slo.ttft_p90_s, t90, True, "s"),
              ("per-user decode speed", slo.min_tok_s_per_user, per_user, False, "tok/s"),
              ("end-to-end p90", slo.e2e_p90_s, e2e, True, "s"))
    for name, target, got, upper, unit in checks:
        if target is None:
            continue
        i = int(np.argmin(got) if upper else np.argmax(got))
        met = int(np.sum(got <= target if upper else got >= target))
        r = df.iloc[i]
        lines.append(f"- {name} {'<=' if upper else '>='} {target:g} {unit}: met by {met}; best achieved "
                     f"{got[i]:.3g} {unit} ({r.n_chips} x {r.hardware}, batch {r.batch}, {r.weight_dtype})")
    return "\n".join(lines)


def _frontier(df):
    """Per device, the configurations not beaten on both per-user speed and tokens/s per chip
    (with every seat full): the interactivity curve."""
    parts = []
    for _, g in df.groupby("hardware", sort=True, observed=True):
        idx = pareto_front(g.tok_s_per_user.to_numpy(), g.seat_tok_s_per_chip.to_numpy())
        parts.append(g.iloc[idx])
    cols = ["hardware", "n_chips", "parallel", "batch", "weight_dtype", "tok_s_per_user", "seat_tok_s_per_chip"]
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    return pd.concat(parts)[cols].reset_index(drop=True) if parts else df[cols]


# ---- served physics (membound.serving) ------------------------------------------------------

def _as_served_length(value: Lengths):
    """A Workload's lengths as serve()'s: a count is mb.Fixed; a list, or {count: weight} with
    weights in whole ratios (rounded to thousandths of the smallest otherwise), mb.Samples."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return Fixed(int(value))
    vals, probs = _distribution("lengths", value, 0)
    reps = np.maximum(np.round(probs / probs.min() * (1 if np.allclose(probs / probs.min(),
                                                                       np.round(probs / probs.min())) else 1000)), 1)
    return Samples(tuple(int(v) for v, k in zip(vals, reps) for _ in range(int(k))))


class _Served:
    """serve()'s figures of one configuration over client counts (arrays): what the SLO checks."""

    def __init__(self, sm, st, prompt, output):
        self.st = st
        self.ttft50, self.ttft90 = ttft_quantile(sm, st, prompt, 0.5), ttft_quantile(sm, st, prompt, 0.9)
        self.ttft99 = ttft_quantile(sm, st, prompt, 0.99)
        self.e2e90 = e2e_quantile(sm, st, prompt, output, 0.9)
        self.per_user = 1.0 / st.tau
        self.tpot99 = st.tau            # a closed loop's TPOT has no tail model: every sequence sees the mean step
        self.e2e_mean = st.ttft + (output.mean - 1.0) * st.tau

    def meets(self, slo: SLO):
        return _meets(slo, self.ttft50, self.ttft90, self.per_user, self.e2e90, self.ttft99, self.tpot99)

    def at(self, i: int) -> dict[str, float]:
        return dict(ttft_s=float(self.st.ttft[i]), ttft_p50_s=float(self.ttft50[i]), ttft_p90_s=float(self.ttft90[i]),
                    ttft_p99_s=float(self.ttft99[i]), tpot_s=float(self.st.tau[i]), tpot_p99_s=float(self.tpot99[i]),
                    tok_s_per_user=float(self.per_user[i]), e2e_s=float(self.e2e_mean[i]),
                    e2e_p90_s=float(self.e2e90[i]))


def _users_fleet(sm, sched, prompt, output, slo: SLO, users: int, conc: np.ndarray, fig: _Served, i: int):
    """(replicas, clients per replica, figures, output tok/s) for `users` clients at conc[i] clients
    per replica: ceil(users / conc[i]) replicas, each then running ceil(users / replicas) clients
    (re-solved; conc[i]'s figures where that load misses the SLO)."""
    replicas = math.ceil(users / conc[i])
    load = math.ceil(users / replicas)
    figs = fig.at(i)
    if load < conc[i]:
        fewer = _Served(sm, solve(sm, sched, prompt.mean, output.mean, concurrency=np.array([float(load)])),
                        prompt, output)
        if bool(fewer.meets(slo)[0]):
            return replicas, load, fewer.at(0), users / fewer.at(0)["e2e_s"] * output.mean
    return replicas, int(conc[i]), figs, users / figs["e2e_s"] * output.mean


def _rate_fleet(sm, sched, p, prompt, output, slo: SLO, rate: float, x: float, max_utilisation: float):
    """(replicas, requests in a replica, figures, output tok/s) for Poisson arrivals at `rate`: the
    fewest replicas from ceil(rate / (max_utilisation x x)) up (x: a replica's throughput at the
    clients that met the SLO) whose serve() result at rate / replicas (its open-loop steady state
    and tails) meets the SLO; None where 64 more do not. With a p99 target, from
    ceil(rate / r) up instead, r the highest rate a replica serves within the SLO's latency limits
    (`rate_search.search`, mb.max_rate's search: the tails' p99s rise with the rate); None where
    no rate meets them."""
    first = max(math.ceil(rate / (max_utilisation * x)), 1)
    if slo.ttft_p99_s is not None or slo.tpot_p99_s is not None:
        top = search(sm, sched, prompt, output, limits_of(slo, skip_e2e=True))
        if top.rate <= 0.0:
            return None
        first = max(math.ceil(rate / top.rate * (1.0 - 1e-9)), 1)
    for replicas in range(first, first + 64):
        r_rate = rate / replicas
        try:
            st = solve(sm, sched, prompt.mean, output.mean, arrival_rate=r_rate)
        except MemboundError:            # beyond a replica's capacity: add one
            continue
        r = result_from_solver(sm, sched, p, st, prompt, output, None, r_rate)     # what serve() returns there
        if bool(_meets(slo, r.ttft.median, r.ttft.p90, r.tok_s_per_user, r.e2e.p90, r.ttft.p99, r.tpot.p99)):
            figs = dict(ttft_s=r.ttft.mean, ttft_p50_s=r.ttft.median, ttft_p90_s=r.ttft.p90, ttft_p99_s=r.ttft.p99,
                        tpot_s=r.tpot.mean, tpot_p99_s=r.tpot.p99, tok_s_per_user=r.tok_s_per_user, e2e_s=r.e2e.mean,
                        e2e_p90_s=r.e2e.p90)
            return replicas, r_rate * r.e2e.mean, figs, rate * output.mean
    return None


def _plan_served(m, users: int | None, rate: float | None, prompt, output, slo: SLO, price_map: dict[str, float],
                 notes: list[str], weight_dtypes: list[str], kv_dtypes: list, chips: list[int], conc_list: list[int],
                 runtime, speculative, max_utilisation: float) -> PlanResult:
    """plan(batching="served"): see the module docstring."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it

    conc = np.asarray(sorted(set(conc_list)), float)
    rows: list[dict[str, Any]] = []
    frontier: list[dict[str, Any]] = []
    best: dict[str, tuple[float, str]] = {}          # per SLO target, the best value reached, and where
    budget = WorkBudget(PLAN_BUDGET_S, _plan_refusal, desc="plan",
                        total=len(price_map) * len(weight_dtypes) * len(kv_dtypes) * len(chips), unit=" configurations")
    for hw_name, price in price_map.items():
        for wd in weight_dtypes:
            for kd in kv_dtypes:
                for n in chips:
                    budget.tick(len(notes) + len(rows))
                    where = f"{n} x {hw_name}, {wd} weights, {kd or 'default'} KV"
                    try:
                        sm, sched, p = build(m, hw_name, prompt=prompt, output=output, weight_dtype=wd, kv_dtype=kd,
                                             n_chips=n, runtime=runtime, price_usd_per_hour=price,
                                             speculative=speculative)
                        st = solve(sm, sched, prompt.mean, output.mean, concurrency=conc)
                    except MemboundError as e:
                        notes.append(f"{where}: {str(e)[:160]}")
                        continue
                    fig = _Served(sm, st, prompt, output)
                    per_chip = st.request_rate * output.mean / n
                    frontier += [dict(hardware=hw_name, n_chips=n, weight_dtype=wd, kv_dtype=p.resolved.kv.name,
                                      concurrency=int(c), tok_s_per_user=float(u), output_tok_s_per_chip=float(t))
                                 for c, u, t in zip(conc, fig.per_user, per_chip)]
                    _track_best(best, slo, fig, where)
                    ok = np.flatnonzero(fig.meets(slo))
                    if users is not None:
                        if not ok.size:
                            continue
                        i = int(ok[-1])                      # the most clients per replica that pass
                        replicas, clients, figs, tok_s = _users_fleet(sm, sched, prompt, output, slo, users, conc, fig, i)
                    else:   # from the throughput of the most clients that pass (the fewest tried where none does)
                        assert rate is not None
                        x = float(st.request_rate[int(ok[-1]) if ok.size else 0])
                        found = _rate_fleet(sm, sched, p, prompt, output, slo, rate, x, max_utilisation)
                        if found is None:
                            continue
                        replicas, clients, figs, tok_s = found
                    usd_h = replicas * n * price
                    cost = usd_per_million_tokens(usd_h, tok_s)
                    # the static plan's column names beside the served ones (batch: the clients a replica
                    # runs; total_chips; throughput_tok_s delivered; cost_per_million_tokens_usd): one schema
                    rows.append(dict(model=p.model.name, hardware=hw_name, runtime=p.runtime.name, n_chips=n,
                                     parallel=f"tp={p.layout.tp} pp={p.layout.pp} ep={p.layout.ep}", weight_dtype=wd,
                                     kv_dtype=p.resolved.kv.name, clients_per_replica=clients, batch=clients,
                                     replicas=replicas, chips_total=replicas * n, total_chips=replicas * n, **figs,
                                     throughput_tok_s=tok_s, output_tok_s_per_chip=tok_s / (replicas * n),
                                     tok_s_per_chip=tok_s / (replicas * n), usd_per_hour=usd_h,
                                     cost_per_million_output_tokens_usd=cost, cost_per_million_tokens_usd=cost,
                                     power_kw=replicas * n * (p.hardware.power_w or 0.0) / 1e3,
                                     price_usd_per_chip_hour=price, calibration=p.labels["calibration"]))
    budget.close()
    ranked = pd.DataFrame(rows)
    if len(ranked):
        ranked = ranked.sort_values(["cost_per_million_output_tokens_usd", "chips_total"], ignore_index=True)
        b = ranked.iloc[0]
        text = (f"{len(ranked)} configurations meet the SLOs (continuous batching, serve()'s physics); cheapest: "
                f"{b.replicas} x {b.n_chips} {b.hardware} ({b.parallel}, {b.clients_per_replica:g} clients each, "
                f"{b.weight_dtype} weights, {b.kv_dtype} KV) at ${b.cost_per_million_output_tokens_usd:.3g} per "
                f"million output tokens, {b.tok_s_per_user:.3g} tok/s per user, TTFT p90 {b.ttft_p90_s:.3g} s")
    elif not frontier:
        text = "nothing fits or could run: " + "; ".join(notes)
    else:
        text = "\n".join(["no configuration meets all SLOs at any client count (continuous batching):",
                          *(f"- {name}: best achieved {v:.3g} ({where})" for name, (v, where) in best.items())])
    return PlanResult(ranked=ranked, frontier=pd.DataFrame(frontier), explanation=text, candidates=len(frontier),
                      notes=notes)


def _track_best(best: dict, slo: SLO, fig: _Served, where: str) -> None:
    """Keep, per SLO target, the best value any client count of any configuration reached."""
    for name, target, got, upper in (("TTFT p50 (s)", slo.ttft_p50_s, fig.ttft50, True),
                                     ("TTFT p90 (s)", slo.ttft_p90_s, fig.ttft90, True),
                                     ("per-user decode speed (tok/s)", slo.min_tok_s_per_user, fig.per_user, False),
                                     ("end-to-end p90 (s)", slo.e2e_p90_s, fig.e2e90, True),
                                     ("TTFT p99 (s)", slo.ttft_p99_s, fig.ttft99, True),
                                     ("TPOT p99 (s)", slo.tpot_p99_s, fig.tpot99, True)):
        if target is None:
            continue
        v = float(np.min(got) if upper else np.max(got))
        if name not in best or (v < best[name][0] if upper else v > best[name][0]):
            best[name] = (v, where)


# the most seconds of work one plan_served may take (time.monotonic, read before each
# configuration's solve); a plan this large is refused by name, not left to run
PLAN_BUDGET_S = 60.0


def _plan_refusal(elapsed_s: float) -> InvalidInputError:
    return InvalidInputError("plan_served", f"{elapsed_s:.3g} s", f"a plan of at most {PLAN_BUDGET_S:g} s of work "
                             "(PLAN_BUDGET_S): fewer devices, weight formats, chip counts or client counts")


def _served_inputs(model, hardware, weight_dtypes, kv_dtype, chips, runtime):
    """(devices, weight formats, chip counts) checked before any solve: a name that is not known
    is the caller's error, raised, not a configuration that "does not meet the SLO"."""
    load_model(model)
    devices = [load_hardware(h) for h in ([hardware] if isinstance(hardware, str) else list(hardware))]
    if not devices:
        raise InvalidInputError("hardware", hardware, "at least one device name")
    wds = [weight_dtypes] if isinstance(weight_dtypes, str) else list(weight_dtypes)
    if not wds:
        raise InvalidInputError("weight_dtypes", weight_dtypes, "at least one weight format")
    for wd in wds:
        get_dtype(wd)
    if kv_dtype is not None:
        get_dtype(kv_dtype)
    load_runtime(runtime)
    return devices, wds, _counts("chips", chips)


def plan_served(model, slo: SLO, *, users: int | None = None, rate: float | None = None,
                prompt_tokens=defaults.PROMPT_TOKENS, output_tokens=defaults.OUTPUT_TOKENS, hardware=DEFAULT_HARDWARE,
                weight_dtypes=("bf16", "fp8"), kv_dtype: str | None = "bf16", chips=(1, 2, 4, 8),
                concurrency=DEFAULT_BATCHES, runtime=None, prices: dict | None = None,
                max_utilisation: float = 0.9) -> PlanResult:
    """`plan(batching="served")` with serve()'s length types (mb.Fixed, mb.Uniform, mb.Samples or a
    count): the same planner with plan()'s defaults (kv_dtype: one KV format; chips: plan's n_chips;
    concurrency: plan's batches, the clients per replica tried), one answer."""
    _check_load("users", users, "rate", rate)
    _check_utilisation(max_utilisation)
    _check_prices(prices)
    prompt = as_length("prompt_tokens", prompt_tokens, 0)
    output = as_length("output_tokens", output_tokens, 2)
    conc = _counts("concurrency", concurrency)
    devices, wds, chip_counts = _served_inputs(model, hardware, weight_dtypes, kv_dtype, chips, runtime)
    price_map, notes = _prices([hw.name for hw in devices], prices)
    return _plan_served(load_model(model), users, rate, prompt, output, slo, price_map, notes, wds, [kv_dtype],
                        chip_counts, conc, runtime, None, max_utilisation)
