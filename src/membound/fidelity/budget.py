"""The constant budget (issue 27 item 2; docs/architecture.md, rules of honest fitting): every constant of
every runtime, fitted or not, with its unit, prior range, the rows and groups behind it and
whether it sits on a bound; a runtime with more than one free constant per two groups (chips) its
fits span is flagged.

    python -m membound.fidelity.budget            (or membound.budget.format_budget())

Kinds of constant:
- fitted: chosen by the one fitter (membound.fitter) on the rows named: a runtime entry's figures
  (membound.calibrate.FIT), an engine's served costs (membound.serve_calibrate), a fast chip's
  generation constant (membound.vendors.FITS);
- shared: a served figure fitted once on the rows of the served engines that share it (serve_calibrate.SHARED:
  {figure: engines}), listed in each of those engines' blocks but counted once, as fitted, on its own line
  ("(served, shared)") against the chips of all the rows it is fitted on;
- set: fixed from a cited fact of the engine's code or a measurement, the chip profile's own figure or
  a neutral value (calibrate.FIXED, serve_calibrate.FIXED), with the reason;
- held: a device class's figure held at the runtime default's value (too few rows to fit it);
- profile: a fraction the runtime's entry leaves to each chip (its profile's `achievable`: a published
  stream or GEMM measurement, or "assumed" where none was found), listed per chip of its rows;
- assumed: any other figure the runtime file sets (a prior, not evidence).

MLPerf's software generations (data/reference/mlperf/generations.yaml, mlperf_rows.GENERATION_FIT) are
listed one round at a time, as `<generation>-mlperf-<round>` (the runtime mlperf_rows.generation_runtime builds):
the round's fitted constant (fitted on that round's Offline rows of the fit families: its rows and chips as
the file records them; a fit the file keeps under `at_bound` is listed on its bound, and the round runs the
carried earlier fit, a "set" line naming it) and the generation's constants set from the executor's code.
Their other constants are the engine's own, counted under the engine.

Groups are chips: a fit over rows of n chips may free at most n // 2 constants. A fitted value
within a thousandth of its range from a bound is "on a bound": missing physics, not a result.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

from .fitter import Param
from .calibrate import BOUNDS, FIT, FIXED, RUNTIME_WIDE, calibrate_runtimes
from ..catalog.hardware import load_hardware
from ..catalog.runtime import load_runtime, list_runtimes
from .serve_calibrate import (ALLTOALL, ALLTOALL_RANGE, ENGINES, FIXED as SERVED_FIXED, FREE_EVIDENCE, HIGH, LOW,
                              PIPELINE_HOST, PIPELINE_HOST_RANGE, SHARED, dp_rows, fits_alltoall, fitted_params,
                              shared_of)
from .serve_validate import load_rows
from .vendors import FITS
from .mlperf_rows import carried, fitted_param, load_generations, round_key
from ..errors import InvalidInputError
from .reference import load_reference
from ..physics.quantization import DEFAULT_DEQUANT_OVERHEAD

UNITS = (("_cycles", "cycles"), ("w_per_tflop", "W per fp32 TFLOP/s"), ("_steps", "steps"), ("_tokens", "tokens"),
         ("_rows", "rows"), ("_s", "s"), ("fraction", "share"), ("efficiency", "share"), ("overlap", "share"),
         ("acceptance", "share"), ("_ratio", "share"), ("max_running", "sequences"), ("token_budget", "tokens"))
# a served block's scheduler settings: the engine's launch defaults (runtime.Served), not costs
SETTINGS = ("max_running", "token_budget", "kv_block_tokens", "memory_fraction", "dp_balance_steps",
            "recv_interval_steps", "batch_wait_steps", "batch_wait_ratio", "lookahead_steps")
KINDS = ("fitted", "frozen", "shared", "set", "held", "profile", "setting", "assumed")
SHARED_ENTRY = "(served, shared)"   # the budget line of the figures fitted once on the sharing engines' rows
FREE = ("fitted", "frozen")


def fraction_evidence(evidence: str, fraction: str) -> str:
    """"assumed" or "measured": what a profile's `achievable.evidence` says of one of its fractions
    ("bandwidth_fraction" or "compute_fraction"). Text that starts with "assumed" assumes both; else a
    fraction is assumed where its own clause says so ("bandwidth assumed ...", "compute: assumed ...")."""
    ev = evidence.strip().lower()
    if ev.startswith("assumed"):
        return "assumed"
    word = fraction.split("_")[0]
    return "assumed" if re.search(rf"\b{word}:?\s+assumed\b", ev) else "measured"


def unit_of(name: str) -> str:
    """The unit a constant's name states (membound's names carry their units)."""
    return next((u for suffix, u in UNITS if name.endswith(suffix)), "1")


@dataclass(frozen=True)
class Constant:
    runtime: str
    entry: str               # a class entry ("default", "edge", ...), "served" or "runtime"
    name: str
    value: float
    kind: str                # KINDS: fitted | frozen (fitted earlier on the same rows, then held) | set | held |
                             # profile (a chip's achievable fraction) | setting (an engine's scheduler default) |
                             # assumed
    unit: str
    prior: tuple | None      # (lo, hi) of a fitted figure
    rows: int = 0            # rows the fit used (fitted only)
    chips: tuple = ()        # chips those rows are on
    bound: str = ""          # "lower" / "upper" where a fitted value sits on a bound
    why: str = ""            # the reason a set figure gives


@dataclass
class RuntimeBudget:
    runtime: str
    constants: list = field(default_factory=list)

    @property
    def free(self) -> int:
        return sum(c.kind in FREE for c in self.constants)

    @property
    def chips(self) -> tuple:
        return tuple(sorted({h for c in self.constants if c.kind in FREE for h in c.chips}))

    @property
    def allowed(self) -> int:
        """One free constant per two groups (chips) the fits span."""
        return len(self.chips) // 2

    @property
    def over(self) -> bool:
        return self.free > self.allowed


def _numeric(d: dict) -> dict:
    return {k: float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _calibrated(scenarios) -> dict:
    """{runtime: RuntimeBudget} of the runtimes membound.calibrate fits (values as bundled)."""
    out = {}
    for rt, groups in calibrate_runtimes(scenarios).items():
        bundled = load_runtime(rt)
        b = RuntimeBudget(rt)
        by_id = {s.id: s for s in scenarios}
        for g in groups:
            entry = bundled.classes.get(g.key)
            values = entry.model_dump(exclude_none=True) if entry is not None else g.params
            chips = tuple(sorted({by_id[i].hardware for i in g.rows if i in by_id}))
            for p in g.params:
                v = float(values.get(p, g.params[p]))
                if p in FIXED.get(rt, {}):
                    b.constants.append(Constant(rt, g.key, p, v, "set", unit_of(p), None, why=FIXED[rt][p][1]))
                elif p in g.copied:
                    what = "the runtime's figure" if p in RUNTIME_WIDE else "the default's value"
                    b.constants.append(Constant(rt, g.key, p, v, "held", unit_of(p), None, why=what))
                else:
                    lo, hi = BOUNDS[p]
                    side = Param(p, lo, hi, min(max(v, lo), hi)).bound_hit(v) or ""
                    b.constants.append(Constant(rt, g.key, p, v, "fitted", unit_of(p), (lo, hi), len(g.rows), chips, side))
            named = set(g.params) | set(FIT[rt])
            set_in_file = entry.model_fields_set if entry is not None else set()
            b.constants += _profile_fractions(rt, g.key, set_in_file, chips)
            for k, v in _numeric({k: values[k] for k in set_in_file if k in values}).items():
                if k not in named:
                    b.constants.append(Constant(rt, g.key, k, v, "assumed", unit_of(k), None))
        out[rt] = b
    return out


FRACTIONS = ("bandwidth_fraction", "compute_fraction")


def _profile_fractions(rt: str, key: str, set_in_file: set, chips: tuple,
                       role: str = "the chip's profile (achievable), not fitted") -> list:
    """The fractions entry `key` of runtime `rt` leaves to the chips (`runtime._efficiency`: an unset
    fraction is the profile's `achievable`), one per chip its rows are on: measured where the
    profile cites a measurement, assumed where it says so (validate.fractions_known)."""
    out = []
    for name in (f for f in FRACTIONS if f not in set_in_file):
        for chip in chips:
            ach = load_hardware(chip).achievable
            how = fraction_evidence(ach.evidence, name)
            out.append(Constant(rt, chip, name, float(getattr(ach, name)), "profile", unit_of(name), None,
                                why=f"{how}: {role}"))
    return out


def _served(budgets: dict) -> None:
    """Add each engine's served block: fitted (on its rows of the fitting chips, serve_validate.FIT_HARDWARE),
    shared (serve_calibrate.SHARED: fitted once on the rows of the engines that share it, listed in each of them as
    "shared" and counted once, under SHARED_ENTRY, against the chips of all those rows) or set (serve_calibrate.FIXED,
    with the reason)."""
    rows, _ = load_rows()
    _shared(budgets, rows)
    for name in ENGINES:
        served = getattr(load_runtime(name), "served", None)
        if served is None:
            continue
        b = budgets.setdefault(name, RuntimeBudget(name))
        fit_rows = [r for r in rows if r.runtime == name and r.fitted]
        chips = tuple(sorted({r.device for r in fit_rows}))
        # a served block's fractions are shares of each chip's achievable ones (efficiency.served_efficiency):
        # its fits rest on the fitting chips' profile figures
        b.constants += _profile_fractions(name, "served", set(), chips,
                                          "the fitting chip's profile figure the served fractions scale")
        values = _numeric(served.model_dump())
        for k in fitted_params(name):
            v = values[k]
            side = Param(k, LOW[k], HIGH[k], min(max(v, LOW[k]), HIGH[k])).bound_hit(v) or ""
            b.constants.append(Constant(name, "served", k, v, "fitted", unit_of(k), (LOW[k], HIGH[k]), len(fit_rows),
                                        chips, side, free_reason(name, k, len(chips) // 2)))
        ep = dp_rows(name) if fits_alltoall(name) else []
        if ep:
            v = values.get(ALLTOALL, 0.0)
            side = Param(ALLTOALL, *ALLTOALL_RANGE, v).bound_hit(v) or ""
            b.constants.append(Constant(name, "served", ALLTOALL, v, "fitted", "s", ALLTOALL_RANGE, len(ep),
                                        tuple(sorted({r.device for r in ep})), side))
        for k in shared_of(name):
            b.constants.append(Constant(name, "served", k, values[k], "shared", unit_of(k), (LOW[k], HIGH[k]),
                                        why=f"fitted once on the rows of {', '.join(SHARED[k])}: counted under "
                                            f"{SHARED_ENTRY}"))
        for k, (v, why) in SERVED_FIXED.get(name, {}).items():
            # set from a cited fact, the chip profile's figure or a neutral value, with the reason
            prior = ALLTOALL_RANGE if k == ALLTOALL else PIPELINE_HOST_RANGE if k == PIPELINE_HOST else (LOW[k], HIGH[k])
            b.constants.append(Constant(name, "served", k, float(v), "set", unit_of(k), prior, why=why))
        named = set(fitted_params(name)) | set(SERVED_FIXED.get(name, {})) | set(shared_of(name)) | ({ALLTOALL} if ep else set())
        for k, v in values.items():
            if k not in named:
                kind = "setting" if k in SETTINGS else "assumed"
                b.constants.append(Constant(name, "served", k, v, kind, unit_of(k), None))



def free_reason(engine: str, figure: str, allowed: int) -> str:
    """Why served `figure` of `engine` is free (serve_calibrate.FREE_EVIDENCE: the select chips' figures with it
    set neutral, the rest refitted) and whether the budget's `allowed` free figures hold it: the engine's
    figures in FREE_EVIDENCE's order, the first `allowed` within, the rest "EXTRA" (over the budget)."""
    order = [k for k, _ in FREE_EVIDENCE.get(engine, ())]
    if figure not in order:
        return ""
    i = order.index(figure)
    where = f"within budget ({i + 1} of {len(order)})" if i < allowed else f"EXTRA ({i + 1} of {len(order)})"
    return f"{where}: {dict(FREE_EVIDENCE[engine])[figure]}"

def _shared(budgets: dict, rows) -> None:
    """The SHARED figures, once each: fitted on the rows of the engines that share it on the fitting chips, so
    they count against the chips of all those rows (the value is each sharer's: a test checks they agree)."""
    if not SHARED:
        return
    b = budgets.setdefault(SHARED_ENTRY, RuntimeBudget(SHARED_ENTRY))
    for k, engines in SHARED.items():
        fit_rows = [r for r in rows if r.runtime in engines and r.fitted]
        chips = tuple(sorted({r.device for r in fit_rows}))
        served = load_runtime(engines[0]).served
        assert served is not None
        v = float(getattr(served, k))
        side = Param(k, LOW[k], HIGH[k], min(max(v, LOW[k]), HIGH[k])).bound_hit(v) or ""
        b.constants.append(Constant(SHARED_ENTRY, "served", k, v, "fitted", unit_of(k), (LOW[k], HIGH[k]),
                                    len(fit_rows), chips, side, why=f"one figure for {', '.join(engines)}"))


def _vendors(budgets: dict, scenarios) -> None:
    by_id = {s.id: s for s in scenarios}
    for name, (dev, ids, fld, _, (lo, hi)) in FITS.items():
        try:
            rt = load_runtime(name)
        except Exception:   # noqa: BLE001 - a generation without a file has nothing to list
            continue
        entry = rt.classes.get(dev)
        if entry is None or getattr(entry, fld) is None:
            continue
        v = float(getattr(entry, fld))
        side = Param(fld, lo, hi, min(max(v, lo), hi)).bound_hit(v) or ""
        chips = tuple(sorted({by_id[i].hardware for i in ids if i in by_id}))
        budgets[name] = RuntimeBudget(name, [Constant(name, dev, fld, v, "fitted", unit_of(fld), (lo, hi), len(ids),
                                                      chips, side)])


def _others(budgets: dict) -> None:
    """What no fit touches: every figure a runtime file sets that calibrate and the fast chips' fits
    do not fit (the class entries of the served engines and of the unfitted runtimes; the served
    blocks of runtimes serve_calibrate does not fit) is assumed, or an engine's setting."""
    for name in list_runtimes():
        rt = load_runtime(name)
        b = budgets.setdefault(name, RuntimeBudget(name))
        if name not in FIT and name not in FITS:
            for key, e in rt.classes.items():
                why = e.evidence[:120]
                for k, v in _numeric(e.model_dump(exclude_none=True, exclude_defaults=True)).items():
                    b.constants.append(Constant(name, key, k, v, "assumed", unit_of(k), None, why=why))
        served = getattr(rt, "served", None)
        if served is not None and name not in ENGINES:
            for k, v in _numeric(served.model_dump(exclude_defaults=True)).items():
                b.constants.append(Constant(name, "served", k, v, "setting" if k in SETTINGS else "assumed",
                                            unit_of(k), None))


def constant_budget(path=None) -> dict:
    """{runtime: RuntimeBudget}: every constant of every bundled runtime (see the module docstring);
    `path`: the reference measurements the calibrated runtimes' rows come from (default: shipped)."""
    ref = load_reference(path)
    budgets = _calibrated(ref.scenarios)
    _served(budgets)
    _vendors(budgets, ref.scenarios)
    _others(budgets)
    _generations(budgets)
    _core(budgets)
    return dict(sorted(budgets.items()))


def _fit_rows(entry: dict) -> int:
    """How many rows a generation round's fit used: the count its `fitted_on` text starts with
    (mlperf_validate.with_fits writes "<n> Offline rows of the fit families ...")."""
    m = re.match(r"\s*(\d+)\s", str(entry.get("fitted_on", "")))
    if m is None:
        raise InvalidInputError("generations.yaml fitted_on", entry.get("fitted_on"),
                                "'<n> Offline rows ...': the rows the round's fit used")
    return int(m.group(1))


def _round_fit(name: str, rnd: str, param: str, entry: dict, why: str = "") -> Constant:
    lo, hi = (float(x) for x in entry["prior"])
    v = float(entry["value"])
    side = Param(param, lo, hi, min(max(v, lo), hi), log=True).bound_hit(v) or ""
    return Constant(name, rnd, param, v, "fitted", unit_of(param), (lo, hi), _fit_rows(entry),
                    tuple(sorted(entry.get("chips", ()))), side, why)


def _generations(budgets: dict, generations: dict | None = None) -> None:
    """Each round of each MLPerf generation (generations.yaml; `generations`: load_generations()'s
    {name: entry}, the shipped file by default) as its own budget `<name>-mlperf-<round>`: the
    round's fitted constant with its rows, chips and bound; a round whose fit the file keeps under
    `at_bound` lists that fit (on its bound) and, set, the value it runs (the carried round's fit,
    or the engine's own before any); the generation's `served` constants (set from the code)."""
    gens = load_generations() if generations is None else generations
    for name, g in gens.items():
        fitted = g.get("rounds") or {}
        at_bound = g.get("at_bound") or {}
        for rnd in sorted({*fitted, *at_bound}, key=round_key):
            param = fitted_param(g, rnd)
            label = f"{name}-mlperf-{rnd}"
            b = budgets.setdefault(label, RuntimeBudget(label))
            if rnd in fitted:
                b.constants.append(_round_fit(label, rnd, param, fitted[rnd][param]))
            else:
                b.constants.append(_round_fit(label, rnd, param, at_bound[rnd],
                                              "fitted, on a bound: not used (missing physics)"))
                src = carried(g, rnd, param)
                runs = (float(fitted[src][param]["value"]) if src else
                        float(getattr(load_runtime(g["engine"]).served, param)))
                b.constants.append(Constant(label, rnd, param, runs, "set", unit_of(param), None,
                                            why=f"runs {src}'s fit (mlperf_rows.carried)" if src else
                                            f"runs the engine's own ({g['engine']}'s served block)"))
            for k, c in (g.get("served") or {}).items():
                if isinstance(c["value"], str):     # a policy (preemption), no number to budget
                    continue
                b.constants.append(Constant(label, "served", k, float(c["value"]), "set", unit_of(k), None,
                                            why=f"{c.get('status', 'set')}: {c.get('source', c.get('meaning', ''))}"))


def _core(budgets: dict) -> None:
    """Physics constants outside any runtime file (listed so they are seen)."""
    budgets["(core)"] = RuntimeBudget("(core)", [Constant(
        "(core)", "quantization", "DEFAULT_DEQUANT_OVERHEAD", DEFAULT_DEQUANT_OVERHEAD, "set", "share", None,
        why="a weight-only GEMM's extra work: MARLIN runs ~10% below FP16 when compute-bound (arXiv 2408.11743)")])


WHY_CHARS = 120     # a set figure's reason, cut to this many characters in the printed table


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def format_budget(budgets: dict | None = None) -> str:
    budgets = constant_budget() if budgets is None else budgets
    out = ["Constant budget: every constant of every runtime (membound.budget). Kinds: fitted (the one fitter, on the "
           "rows counted), frozen (fitted earlier on the same rows, then held: free too), shared (a served figure "
           "fitted once on every served engine's rows: free once, on the '(served, shared)' line), set (a cited fact, a bound "
           "or a neutral value), held (a class at the default's value), profile (a fraction each chip's profile "
           "gives: measured or assumed there), setting (an engine's scheduler default), assumed (a prior the file "
           "sets). Budget: at most one free constant per two chips its fits span. An MLPerf generation's round "
           "(<generation>-mlperf-<round>) is its own budget: the constant fitted on that round's rows.", "",
           f"  {'entry':16s} {'constant':28s} {'value':>10s} {'unit':18s} {'kind':8s} {'prior':18s} {'rows':18s} "
           "bound hit / reason", ""]
    for name, b in budgets.items():
        n = {k: sum(c.kind == k for c in b.constants) for k in KINDS}
        flag = "  OVER BUDGET" if b.over else ""
        out.append(f"{name}: {b.free} free ({n['fitted']} fitted, {n['frozen']} frozen) over {len(b.chips)} chips "
                   f"(allowed {b.allowed}){flag}; " + ", ".join(f"{n[k]} {k}" for k in KINDS[2:]))
        for c in b.constants:
            prior = f"[{_fmt(c.prior[0])}, {_fmt(c.prior[1])}]" if c.prior and c.kind in FREE else ""
            fit = f"{c.rows} rows, {len(c.chips)} chips" if c.kind in FREE else ""
            bound = f"ON {c.bound.upper()} BOUND (missing physics)" if c.bound else ""
            why = c.why if len(c.why) <= WHY_CHARS else c.why[:WHY_CHARS - 3] + "..."
            out.append(f"  {c.entry:16s} {c.name:28s} {_fmt(c.value):>10s} {c.unit:18s} {c.kind:8s} {prior:18s} "
                       f"{fit:18s} {bound or why}".rstrip())
        out.append("")
    over = [n for n, b in budgets.items() if b.over]
    out.append(f"Over budget ({len(over)}): {', '.join(over) or 'none'}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.budget", description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=None, help="a measurements CSV or a folder holding measurements.csv")
    a = ap.parse_args(argv)
    print(format_budget(constant_budget(a.reference)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
