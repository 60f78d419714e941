"""The fast chips' software generations as runtimes (Cerebras, Groq, SambaNova).

The same chip's published speed tripled with its vendor's software between 2023 and 2025, so
what the software reaches is a runtime named with its date, never a hardware figure. Each runtime
carries ONE fitted efficiency constant, fitted on the rows named here and never checked on them:

- cerebras-2024-08 / cerebras-2024-11: `fabric_efficiency`, the share of the wafer mesh's element
  rate a compiled batch-1 GEMV pipeline reaches (the mesh physics is in core: a layer's GEMV
  vectors stream across the edge of the square of cores the layer owns);
- groq-2024: `hop_latency_s`, the chip-to-chip latency per hop with the software's synchronisation
  (the link itself: 0.5 us); tensor parallel all-reduces and stage boundaries pay it;
- sambanova-2024: `per_layer_overhead_s`, the time per decoder layer beyond streaming its weights.

`python -m membound.calibrate` refits them (calibrate.calibrate_specialised calls `fit`);
`vendor_report()` lists every vendor row with its runtime, the fitted ones apart from the rest.
"""
from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import dataclass

# runtime -> (device, rows it is fitted on, the one fitted field, date of the software, bounds)
FITS = {
    "cerebras-2024-08": ("cerebras-wse-3", ("hw-014", "hw-015"), "fabric_efficiency", "2024-08", (1e-4, 1.0)),
    "cerebras-2024-11": ("cerebras-wse-3", ("hw-016",), "fabric_efficiency", "2024-11", (1e-4, 1.0)),
    "groq-2024": ("groq-lpu", ("hw-018", "hw-019"), "hop_latency_s", "2024-02", (1e-8, 1e-3)),
    "sambanova-2024": ("sambanova-sn40l", ("hw-025",), "per_layer_overhead_s", "2024-05", (0.0, 1e-3)),
}
# the runtime (software generation) of each vendor row, by the date of its figure
ROW_RUNTIME = {
    "hw-005": "cerebras-2024-08", "hw-010": "cerebras-2024-08", "hw-014": "cerebras-2024-08",
    "hw-015": "cerebras-2024-08", "hw-016": "cerebras-2024-11",
    "hw-006": "groq-2024", "hw-011": "groq-2024", "hw-018": "groq-2024", "hw-019": "groq-2024",
    "hw-020": "groq-2024", "hw-021": "groq-2024",
    "hw-004": "sambanova-2024", "hw-009": "sambanova-2024", "hw-022": "sambanova-2024",
    "hw-023": "sambanova-2024", "hw-025": "sambanova-2024",
}
# rows that state a lower bound ("more than 100", "exceeding 250", "over 4500"): met when predicted >= it
LOWER_BOUNDS = {"hw-021", "hw-023", "hw-024"}


def fitted_rows() -> set:
    return {i for _, ids, *_ in FITS.values() for i in ids}


def _runtime(name: str, value: float):
    from .runtime import Runtime, RuntimeEntry
    dev, _, field, _, _ = FITS[name]
    return Runtime(name=name, classes={dev: RuntimeEntry(**{field: value})})


def fit(scenarios) -> dict:
    """{runtime: ({field: value}, row ids, median |error| on them)}: the one constant of each vendor
    runtime, least squares on log(predicted / measured) over its named rows (membound.fitter, in
    log space within the FITS bounds)."""
    from .fitter import Param
    from .fitter import fit as least_squares
    from .reference import predict
    out = {}
    for name, (_dev, ids, field, _, (lo, hi)) in FITS.items():
        rows = [s for s in scenarios if s.id in ids]
        if not rows:
            continue

        def log_errors(p, rows=rows, name=name, field=field):
            rt = _runtime(name, p[field])
            return [math.log(predict(s, runtime=rt) / s.measured) for s in rows]

        lo = max(lo, 1e-9 * hi)         # a log-scaled constant needs lo > 0 (sambanova's bound is 0)
        report = least_squares(log_errors, [Param(field, lo, hi, math.sqrt(lo * hi), log=True)],
                               rows=[s.id for s in rows])
        x = report.params[field]
        rt = _runtime(name, x)
        err = statistics.median(abs(predict(s, runtime=rt) / s.measured - 1) for s in rows)
        out[name] = ({field: float(f"{x:.4g}")}, list(ids), err)
    return out


def runtime_yaml(name: str, value: float, ids, err: float) -> str:
    """The text of a vendor runtime file (one fitted constant, its rows and date)."""
    dev, _, field, date, _ = FITS[name]
    latest = max((n for n, f in FITS.items() if f[0] == dev), key=lambda n: FITS[n][3])
    vendor = name.split("-")[0].capitalize()
    today = datetime.date.today().isoformat()
    return "\n".join([
        f"name: {name}",
        f"description: {vendor}'s own serving software as of {date} on {dev}; one fitted efficiency "
        f"constant, the rest is the profile's physics",
        *( [f"default_for: [{dev}]   # the latest {vendor} generation: estimate() uses it when no runtime is named"]
           if name == latest else []),
        "classes:",
        f"  {dev}:",
        f"    {field}: {value:.4g}",
        f"    evidence: fitted by membound.calibrate on {today} from {', '.join(ids)} (published tok/s); "
        f"median |error| on them {100 * err:.1f}%; never checked on them (vendors.vendor_report)",
        f"calibration: '{today}: least squares on log(predicted/measured) over the named rows only (membound.vendors.FITS); "
        f"every other {vendor} row is held out. Rerun: python -m membound.calibrate'",
        "",
    ])


@dataclass(frozen=True)
class VendorRow:
    id: str
    model: str
    hardware: str
    runtime: str
    n_chips: int
    measured: float
    predicted: float
    fitted: bool
    lower_bound: bool

    @property
    def error(self) -> float:
        """predicted / measured - 1; a stated lower bound that the prediction meets counts as 0."""
        e = self.predicted / self.measured - 1.0
        return 0.0 if (self.lower_bound and e >= 0) else e


def vendor_report(path=None) -> tuple[list[VendorRow], float, float]:
    """Every vendor row predicted with its generation's runtime: (rows, median |error| of the rows
    no fit used, median |error| of the fitted rows). The two are never mixed."""
    from .reference import load_reference, predict
    ref = load_reference(path)
    fitted = fitted_rows()
    rows = []
    for s in ref.scenarios:
        if s.id in ROW_RUNTIME and s.metric == "decode_tok_s_per_user":
            rows.append(VendorRow(s.id, s.model, s.hardware, s.runtime, s.n_chips, s.measured, predict(s),
                                  s.id in fitted, s.id in LOWER_BOUNDS))
    held = [abs(r.error) for r in rows if not r.fitted]
    fit_ = [abs(r.error) for r in rows if r.fitted]
    return rows, statistics.median(held) if held else math.nan, statistics.median(fit_) if fit_ else math.nan


def format_report(path=None) -> str:
    rows, held, fitted = vendor_report(path)
    out = [f"{'id':8s} {'model':15s} {'runtime':17s} {'chips':>5s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  set"]
    for r in sorted(rows, key=lambda r: (r.fitted, r.id)):
        out.append(f"{r.id:8s} {r.model:15s} {r.runtime:17s} {r.n_chips:5d} {r.measured:9.0f} {r.predicted:9.0f} "
                   f"{100 * r.error:+6.0f}%  {'fitted' if r.fitted else 'held out'}"
                   + ("  (lower bound)" if r.lower_bound else ""))
    out.append(f"median |error|: held out {100 * held:.0f}% (n={sum(not r.fitted for r in rows)}), "
               f"fitted {100 * fitted:.0f}% (n={sum(r.fitted for r in rows)})")
    return "\n".join(out)


if __name__ == "__main__":
    print(format_report())
