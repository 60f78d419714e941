"""Validation report: predict every usable reference measurement and report the error per
category on groups no fit saw, with the in-sample figures beside.

    python -m membound.fidelity.validate [--reference PATH] [--group chip|source] [--csv rows.csv] [--plot out.png]

Error of a row = predicted / measured - 1 (for latencies, ITL and TTFT, the same ratio of the
times). A group is a whole chip (`--group chip`, the hardware profile, binned parts included) or
a whole source (`--group source`, the row id's prefix: apple, lcpp, spark, trt, ...); each group
is a fit, select or report group by the committed split (membound.split, data/split.csv: a hash
of its name, fixed before any error was looked at). Per category: rows, then the median and 90th
percentile of |error| of three kinds, never mixed:

- *in-sample*: the bundled runtimes, fitted on every row (not a measure of accuracy);
- *validation*: the rows of select groups, each group left out, together with every report
  group, of a cold (from the priors) and converged refit of every runtime its rows use
  (`refit_without`); the figures model forms, frozen constants and switches are chosen on;
- *report*: the rows of report groups, each group left out of a cold, converged refit on all
  the rest; printed once, at the end, and never tuned on.

Rows of fit groups have no held-out figure. Rows of runtimes nothing fits (vLLM, SGLang, the
device's own figures) are predicted as they are. Specialised chips are calibrated on named
launch rows (`vendors.FITS`): the named ones have no held-out figure.

Rows faster than the pure roofline are set aside with the reason (`calibrate.beats_physics`);
fits that end on a bound are listed (missing physics). Coverage = rows predicted / rows whose
device is disclosed (speculative-decoding ratios are `membound.multiplier_check`'s).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass

import numpy as np

from . import split
from ..base.progress import track
from .calibrate import (FIT, FIXED, beats_physics, calibrate_runtimes, is_calibration,
                        runtime_from_fits)
from .reference import SPECIALISED, Scenario, load_reference, predict, reference_csv, source_of
from .budget import fraction_evidence
from .serve_validate import load_rows
from ..catalog.runtime import RuntimeEntry, load_runtime
from .calibrate import params_at_bounds
from ..catalog.hardware import load_hardware
from ..base.safeio import csv_row, check_output_path
from ..errors import MemboundError, require, InvalidInputError
from .serve_validate import section
from .budget import constant_budget, format_budget
import csv

FRACTION_KINDS = ("assumed", "measured", "fitted")   # a row's fractions: the profile's, or the runtime's own
NOT_DISCLOSED = ("hardware not disclosed", "mixed MI300X/MI325X system")
SPECULATIVE = ("a speculative-decoding ratio", "speculative decoding figure")


@dataclass(frozen=True)
class RowResult:
    id: str
    category: str
    metric: str
    model: str
    hardware: str
    runtime: str
    measured: float
    predicted: float            # in-sample: the bundled runtimes
    held_out: float | None      # refit without the row's group (None: a fit group's row, a named calibration row)
    calibration: bool           # a fit uses this row (in-sample)
    note: str
    role: str = "fit"           # its group's role (membound.split): fit, select (validation) or report
    fractions: str = "measured"  # FRACTION_KINDS: where its fractions come from (fractions_known)

    @property
    def error(self) -> float:
        """In-sample error."""
        return self.predicted / self.measured - 1.0

    @property
    def held_out_error(self) -> float | None:
        return None if self.held_out is None else self.held_out / self.measured - 1.0


GROUPS = {"chip": lambda sc: sc.hardware, "source": lambda sc: source_of(sc.id)}


def _stripped(rt_name: str, also: tuple[str, ...] = ()):
    """`rt_name` with every fitted figure removed (what a runtime is with no rows to fit); an
    entry left with nothing but its evidence is dropped, so that it cannot shadow a refitted
    `default` for its device class. Figures set, not fitted (calibrate.FIXED), go too: every
    refitted entry gets them again. also: further figures to remove (a model-form comparison's
    alternatives, scripts/floor_form.py)."""
    base = load_runtime(rt_name)
    fitted = FIT[rt_name] + tuple(FIXED.get(rt_name, {})) + ("evidence",) + also
    classes = {}
    for k, e in base.classes.items():
        kept = {f: v for f, v in e.model_dump(exclude_defaults=True).items() if f not in fitted}
        if kept:
            classes[k] = RuntimeEntry(**kept)
    return type(base)(**{**base.model_dump(), "classes": classes})


def refit_without(scenarios, left_out, rt_name: str):
    """Runtime `rt_name` refitted cold (from the priors, not from a fit that saw the rows) and to
    convergence on `scenarios` less the rows in `left_out` (a set of ids): entries not refitted
    lose their fitted figures, so nothing of the left-out rows remains."""
    rest = [s for s in scenarios if s.id not in left_out]
    fits = calibrate_runtimes(rest, runtimes=[rt_name]).get(rt_name, [])
    return runtime_from_fits(rt_name, fits, base=_stripped(rt_name)), fits


def held_out_predictions(scenarios, group: str = "chip") -> tuple[dict, list]:
    """({row id: prediction with that row's whole group left out of every fit}, [fit notes]) for
    the rows of select and report groups (membound.split): a select group's refit also leaves out
    every report group (a choice made on select figures never saw a report row); a report
    group's refit leaves out only itself. Rows of fit groups have no held-out prediction."""
    key = GROUPS[group]
    by_group: dict = {}
    for sc in scenarios:
        by_group.setdefault(key(sc), []).append(sc)
    roles = {g: split.role(group, g) for g in by_group}
    report_ids = {s.id for g, rows in by_group.items() if roles[g] == "report" for s in rows}
    out, notes = {}, []
    for g, rows in by_group.items():
        if roles[g] == "fit":
            continue
        ids = {s.id for s in rows} | (report_ids if roles[g] == "select" else set())
        for rt in sorted({s.runtime for s in rows if s.runtime in FIT and s.hardware not in SPECIALISED}):
            runtime, fits = refit_without(scenarios, ids, rt)
            for f in fits:
                if f.at_bounds:
                    notes.append(f"without {group} {g} ({roles[g]}): {rt} {f.key} on a bound: {', '.join(f.at_bounds)}")
            for s in rows:
                if s.runtime == rt:
                    out[s.id] = _safe_predict(s, runtime)
    return out, notes


def _safe_predict(sc: Scenario, runtime=None) -> float | None:
    try:
        return float(predict(sc, runtime=runtime))
    except Exception:   # noqa: BLE001 - reported by the caller as a failed prediction
        return None


def _stats(errs) -> tuple:
    if not errs:
        return (0, float("nan"), float("nan"))
    a = np.abs(np.asarray(errs))
    return (len(a), float(np.median(a)), float(np.percentile(a, 90)))


def validation_report(path=None, group: str = "chip") -> dict:
    """{'rows': [RowResult], 'categories': {name: {...}}, 'skipped': [(id, metric, reason)],
    'set_aside': [(id, metric, reason)], 'bounds': [..], 'coverage': {...}, 'source': file}."""
    if group not in GROUPS:
        raise InvalidInputError("group", group, f"one of {sorted(GROUPS)}")
    ref = load_reference(path)
    skipped = list(ref.skipped)
    usable, set_aside = [], []
    for sc in track(ref.scenarios, "validate", unit=" rows"):
        why = beats_physics(sc)
        if why:
            set_aside.append((sc.id, sc.metric, why))
        else:
            usable.append(sc)
    held, bound_notes = held_out_predictions(usable, group)
    rows = []
    for sc in usable:
        p = _safe_predict(sc)
        if p is None:
            try:
                predict(sc)
            except Exception as e:   # noqa: BLE001 - a scenario membound refuses is reported, not hidden
                skipped.append((sc.id, sc.metric, f"prediction failed: {type(e).__name__}: {e}"))
            continue
        calib = is_calibration(sc)
        role = split.role(group, GROUPS[group](sc))
        if role == "fit" or (sc.hardware in SPECIALISED and calib):
            h = None
        elif sc.runtime in FIT and sc.hardware not in SPECIALISED:
            h = held.get(sc.id)
        else:           # nothing fits this row: its prediction is held out as it stands
            h = p
        rows.append(RowResult(sc.id, sc.category, sc.metric, sc.model, sc.hardware, sc.runtime,
                              sc.measured, p, h, calib, sc.note, role, fractions_known(sc.hardware, sc.runtime)))
    cats = {}
    for name in dict.fromkeys(r.category for r in rows):
        rs = [r for r in rows if r.category == name]
        n, med, p90 = _stats([r.error for r in rs])
        c = dict(rows=n, median=med, p90=p90, chips=len({r.hardware for r in rs}))
        for role, label in (("select", "validation"), ("report", "report")):
            hs = [r for r in rs if r.role == role and r.held_out is not None]
            nh, medh, p90h = _stats([r.held_out_error for r in hs])
            worst = sorted(hs, key=lambda r: -abs(r.held_out_error or 0.0))[:3]
            c.update({f"{label}_rows": nh, f"{label}_median": medh, f"{label}_p90": p90h,
                      f"{label}_groups": len({GROUPS[group](r) for r in hs}),
                      f"{label}_worst": [(r.id, r.held_out_error) for r in worst]})
            for kind in FRACTION_KINDS:               # issue 27 item 4: assumed-fraction rows apart
                nk, medk, _ = _stats([r.held_out_error for r in hs if r.fractions == kind])
                c.update({f"{label}_{kind}_rows": nk, f"{label}_{kind}_median": medk})
        cats[name] = c
    disclosed = [s for s in skipped if not s[2].startswith(NOT_DISCLOSED + SPECULATIVE)]
    n_disclosed = len(rows) + len(disclosed) + len(set_aside)
    bounds = [f"{rt} {k}: " + ", ".join(_entry_bounds(rt, e)) for rt in FIT
              for k, e in load_runtime(rt).classes.items() if _entry_bounds(rt, e)]
    return dict(rows=rows, categories=cats, skipped=skipped, set_aside=set_aside, group=group,
                bounds=bounds, holdout_bounds=bound_notes,
                coverage=dict(predicted=len(rows), disclosed=n_disclosed,
                              fraction=len(rows) / n_disclosed if n_disclosed else float("nan")),
                source=str(reference_csv(path)))


def _entry_bounds(rt: str, entry) -> list:
    vals = {p: getattr(entry, p) for p in FIT[rt]           # figures the file sets and a fit chose
            if p in entry.model_fields_set and p not in FIXED.get(rt, {})}
    return params_at_bounds(vals)


def _fig(n: int, groups: int, med: float, p90: float) -> str:
    return f"{n:4d} {groups:3d} {100 * med:6.1f} {100 * p90:6.1f}" if n else f"{n:4d} {groups:3d} {'-':>6s} {'-':>6s}"


def format_report(rep: dict) -> str:
    g = rep["group"]
    out = [f"membound validation against {rep['source']}",
           f"error = predicted/measured - 1; |error| medians and 90th percentiles in %. Each {g} is a fit, select or "
           "report group, by a hash of its name fixed before looking (membound.split, data/split.csv):",
           "  in-sample: the bundled fits on every row (not a measure of accuracy);",
           f"  validation: rows of select {g}s, each {g} left out (with every report {g}) of a cold, converged refit; "
           "the figures choices are made on;",
           f"  report: rows of report {g}s, each left out of a cold, converged refit; printed once, at the end, "
           "never tuned on.", "",
           f"{'category':36s} {'rows':>4s} {'chips':>5s} | {'in-sample':>9s} {'p90':>6s} | {'val':>4s} {'grp':>3s} "
           f"{'med':>6s} {'p90':>6s} | worst validation rows"]
    for name, c in sorted(rep["categories"].items()):
        worst = ", ".join(f"{i} {100 * e:+.0f}%" for i, e in c["validation_worst"])
        out.append(f"{name:36s} {c['rows']:4d} {c['chips']:5d} | {100 * c['median']:9.1f} {100 * c['p90']:6.1f} | "
                   f"{_fig(c['validation_rows'], c['validation_groups'], c['validation_median'], c['validation_p90'])} | "
                   f"{worst}")
    cov = rep["coverage"]
    out += ["", f"Coverage: {cov['predicted']} of {cov['disclosed']} rows whose device is disclosed are predicted "
                f"({100 * cov['fraction']:.1f}%); speculative-decoding ratios are checked by membound.multiplier_check."]
    if rep["bounds"]:
        out += ["", "Bundled fits on a bound (missing physics):"] + [f"  {b}" for b in rep["bounds"]]
    if rep["set_aside"]:
        out += ["", "Set aside (faster than physics allows):"] + [f"  {i} {m}: {w}" for i, m, w in rep["set_aside"]]
    out += ["", "Specialised hardware (batch 1 per-user tok/s; calibration = the named launch rows):",
            f"{'id':9s} {'model':15s} {'hardware':16s} {'measured':>9s} {'predicted':>10s} {'error':>7s}  set"]
    for r in rep["rows"]:
        if r.hardware in SPECIALISED:
            out.append(f"{r.id:9s} {r.model:15s} {r.hardware:16s} {r.measured:9.0f} {r.predicted:10.0f} "
                       f"{100 * r.error:+6.0f}%  {'calibration' if r.calibration else 'held out'}"
                       + (f"  [{r.note}]" if r.note else ""))
    reasons = Counter(reason.split("(")[0].split(":")[0].strip() for _, _, reason in rep["skipped"])
    out += ["", f"Predicted {len(rep['rows'])} rows; set aside {len(rep['set_aside'])}; skipped {len(rep['skipped'])}:"]
    out += [f"  {n:4d}  {reason}" for reason, n in reasons.most_common()]
    out += ["", f"REPORT: rows of report {g}s, each held out of a cold, converged refit (never tuned on)",
            f"{'category':36s} {'rows':>4s} {'grp':>3s} {'med':>6s} {'p90':>6s} | worst"]
    for name, c in sorted(rep["categories"].items()):
        worst = ", ".join(f"{i} {100 * e:+.0f}%" for i, e in c["report_worst"])
        out.append(f"{name:36s} {_fig(c['report_rows'], c['report_groups'], c['report_median'], c['report_p90'])} | {worst}")
    out += ["", "Rows by where their achievable fractions come from: assumed (a fraction the prediction takes from "
            "the chip's profile has no published stream or GEMM measurement), measured (those it takes cite one), "
            "fitted (the runtime's entry sets both): held-out rows and median |error| in %",
            f"{'category':36s} | {'validation: assumed':>20s} {'measured':>14s} {'fitted':>14s} | "
            f"{'report: assumed':>16s} {'measured':>14s} {'fitted':>14s}"]
    for name, c in sorted(rep["categories"].items()):
        if c["validation_rows"] or c["report_rows"]:
            cells = [_share(c[f"{label}_{kind}_rows"], c[f"{label}_{kind}_median"])
                     for label in ("validation", "report") for kind in FRACTION_KINDS]
            out.append(f"{name:36s} | {cells[0]:>20s} {cells[1]:>14s} {cells[2]:>14s} | "
                       f"{cells[3]:>16s} {cells[4]:>14s} {cells[5]:>14s}")
    return "\n".join(ln.rstrip() for ln in out)


def _share(n: int, med: float) -> str:
    return f"{n:4d} {100 * med:6.1f}" if n else f"{n:4d} {'-':>6s}"


def fractions_known(hardware: str, runtime: str | None = None) -> str:
    """Where a row's achievable fractions come from: "assumed" where one that its prediction takes
    from the chip's profile cites no published measurement (`fraction_evidence`), "measured" where
    those it takes cite one, "fitted" where the runtime's entry for the chip sets both itself (a
    classes: runtime's fitted fractions). The profile caps an entry's stream at its measured read
    ceiling (`Hardware.read_ceiling`, a cited read_source): where that cap binds, the bandwidth the
    row streams at is the measurement's, so it counts as measured. A runtime with a served block
    scales the profile's fractions: they count."""
    hw = load_hardware(hardware)
    own: set = set()
    capped = False
    if runtime is not None:
        rt = load_runtime(runtime).backend_for(hw)
        key = rt.entry_key(hw)
        if rt.served is None and key is not None:
            entry = rt.classes[key]
            own = entry.model_fields_set
            fitted = entry.bandwidth_fraction
            capped = rt.use_device_fractions and fitted is not None and hw.read_ceiling < fitted
    kinds = {fraction_evidence(hw.achievable.evidence, f) for f in ("bandwidth_fraction", "compute_fraction")
             if f not in own} | ({"measured"} if capped else set())
    return "assumed" if "assumed" in kinds else "measured" if kinds else "fitted"


def write_csv(rep: dict, path) -> None:

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "category", "metric", "model", "hardware", "runtime", "measured", "predicted_in_sample",
                    "error_in_sample", "predicted_held_out", "error_held_out", "role", "fractions", "note"])
        for r in rep["rows"]:
            h = "" if r.held_out is None else f"{r.held_out:.6g}"
            he = "" if r.held_out is None else f"{r.held_out_error:.4f}"
            w.writerow(csv_row([r.id, r.category, r.metric, r.model, r.hardware, r.runtime, r.measured,
                                f"{r.predicted:.6g}", f"{r.error:.4f}", h, he, r.role, r.fractions, r.note]))   # formula-safe


def plot(rep: dict, path) -> None:
    """Held-out prediction vs measured, log-log, one colour per category (needs matplotlib)."""
    import matplotlib   # matplotlib: the plot extra
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt   # matplotlib: the plot extra
    fig, ax = plt.subplots(figsize=(8, 7))
    rows = [r for r in rep["rows"] if r.held_out is not None]
    for name in rep["categories"]:
        rs = [r for r in rows if r.category == name]
        ax.scatter([r.measured for r in rs], [r.held_out for r in rs], s=14, label=name, alpha=0.8)
    lo = min(min(r.measured, r.held_out) for r in rows)
    hi = max(max(r.measured, r.held_out) for r in rows)
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="measured", ylabel=f"membound ({rep['group']} held out)",
           title="membound vs published measurements (units per metric)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def split_groups(path=None) -> set:
    """{(kind, name)} of every chip and source of the reference measurements and served rows."""
    ref = load_reference(path)
    out = {("chip", s.hardware) for s in ref.scenarios} | {("source", source_of(s.id)) for s in ref.scenarios}
    rows = []
    for kind in ("aggregated", "mtp", "disaggregated"):
        rows += load_rows(kinds=(kind,))[0]
    return out | {("chip", r.device) for r in rows if getattr(r, "device", None)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.validate",
                                 description="Predict every reference measurement and report the error per "
                                             "category on groups no fit saw, with in-sample figures beside.")
    ap.add_argument("--reference", default=None, help="a measurements CSV or a folder holding measurements.csv "
                    "(default: $MEMBOUND_REFERENCE_DIR or the copy shipped with membound)")
    ap.add_argument("--group", choices=sorted(GROUPS), default="chip",
                    help="what a held-out group is: a whole chip (default) or a whole source")
    ap.add_argument("--csv", default=None, help="write every row's predictions and errors to this CSV")
    ap.add_argument("--plot", default=None, help="write held-out predicted vs measured to this PNG")
    ap.add_argument("--budget", action="store_true", help="print the constant budget instead: every constant of every "
                    "runtime, fitted or not, its unit, prior, rows, chips and bound (membound.budget)")
    ap.add_argument("--write-split", action="store_true",
                    help="record the groups of the shipped data not yet in data/split.csv (membound.fidelity.split)")
    args = ap.parse_args(argv)
    if args.write_split:
        print(f"wrote {split.write(split_groups(args.reference))}")
        return 0
    if args.budget:
        print(format_budget(constant_budget(args.reference)))
        return 0
    if args.plot:       # before the fits, not after them
        require("matplotlib", "plot", "validate --plot")
    for option, path, suffixes in (("--csv", args.csv, (".csv",)), ("--plot", args.plot, (".png",))):
        if path is not None:     # every output path checked before the work
            check_output_path(path, option, suffixes)
    rep = validation_report(args.reference, args.group)
    print(format_report(rep))
    try:
        print("\n" + section(args.reference))
    except MemboundError as e:               # the measurements report above stands
        print(f"\nserved workloads: not reported: {e}")
    if args.csv:
        write_csv(rep, args.csv)
    if args.plot:
        plot(rep, args.plot)
    return 0


def _main_one_line(argv=None) -> int:
    """main() for `python -m membound.fidelity.validate`: an error of membound's is one line, exit 2."""
    try:
        return main(argv)
    except MemboundError as e:
        print(f"python -m membound.fidelity.validate: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(_main_one_line())
