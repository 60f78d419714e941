"""Calibration: fit the few physical parameters of each runtime (and the latency floor of the
specialised chips) from a named half of the reference measurements, and write them, with where
they came from, into the data files.

The split (deterministic, documented): a row is a *calibration* row when the first byte of
sha256(row id) is even; every other row is held out and only ever predicted. The specialised
chips have too few rows for a hash split, so their calibration rows are named in
`SPECIALISED_CALIBRATION` (the launch figures; the rest, including later software, is held out).

What is fitted (never one figure per row):
- per (runtime, device class) with at least `MIN_ROWS` calibration rows, else per runtime
  (`default`): the parameters `FIT[runtime]` names, out of bandwidth_fraction,
  compute_fraction (both in (0, 1]), per_step_overhead_s and per_layer_overhead_s (>= 0);
  a parameter is fitted only when the group has rows that depend on it (compute: prefill,
  TTFT, max-load throughput; bandwidth and overheads: decode rows or throughput).
- per specialised chip: `latency.per_layer_s` (and, for Cerebras, the wafer-to-wafer hop
  latency `interconnect.latency_s`), from the named rows.

The fit is least squares on log(predicted / measured), by a bounded Levenberg-Marquardt with a
finite-difference Jacobian (numpy only). Run: `python -m membound.calibrate [--dry-run]`.
"""
from __future__ import annotations

import datetime
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .reference import SPECIALISED, Scenario, load_reference, predict

PARAMS = ("bandwidth_fraction", "compute_fraction", "per_step_overhead_s", "per_layer_overhead_s", "overlap",
          "moe_gemm_efficiency", "per_sequence_overhead_s")
BOUNDS = {"bandwidth_fraction": (0.05, 1.0), "compute_fraction": (0.01, 1.0), "overlap": (0.0, 1.0),
          "moe_gemm_efficiency": (0.05, 1.0),
          "per_step_overhead_s": (0.0, 0.05), "per_layer_overhead_s": (0.0, 1e-3),
          "per_sequence_overhead_s": (0.0, 1e-3),
          "per_layer_s": (0.0, 1e-3), "hop_latency_s": (0.0, 1e-2)}
FIT = {
    "llama.cpp": ("bandwidth_fraction", "compute_fraction", "per_layer_overhead_s", "overlap",
                  "moe_gemm_efficiency"),
    # at maximum load thousands of sequences share a step: the host's work grows with them
    # (the PyTorch backend schedules and samples each request), so the overhead is per sequence
    "tensorrt-llm": ("compute_fraction", "per_sequence_overhead_s"),
    "nemo": ("bandwidth_fraction", "compute_fraction", "per_step_overhead_s", "per_layer_overhead_s"),
    "hf-transformers": ("bandwidth_fraction", "compute_fraction", "per_layer_overhead_s"),
    "tinychat": ("bandwidth_fraction", "compute_fraction", "per_layer_overhead_s"),
}
MIN_ROWS = 4
COMPUTE_METRICS = ("prefill_tok_s", "ttft_ms", "throughput_tok_s_total")
SPECIALISED_CALIBRATION = {
    "cerebras-wse-3": (("hw-014", "hw-015"), ("per_layer_s", "hop_latency_s")),   # launch blog, Aug 2024
    "groq-lpu": (("hw-018", "hw-019"), ("per_layer_s",)),                          # Feb 2024 press figures
    "sambanova-sn40l": (("hw-025",), ("per_layer_s",)),                             # Llama-3-8B, May 2024
}


def in_calibration(row_id: str) -> bool:
    """The documented split: sha256(id)[0] even -> calibration row."""
    return hashlib.sha256(row_id.encode()).digest()[0] % 2 == 0


def is_calibration(sc: Scenario) -> bool:
    if sc.hardware in SPECIALISED:
        return sc.id in SPECIALISED_CALIBRATION.get(sc.hardware, ((), ()))[0]
    return in_calibration(sc.id)


# ---- the optimiser -----------------------------------------------------------------------

def fit_bounded(residuals, x0, lo, hi, iters: int = 60):
    """Minimise sum(residuals(x)^2) for lo <= x <= hi (Levenberg-Marquardt, projected; x is
    scaled to [0, 1] internally). Returns x."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = np.clip((np.asarray(x0, float) - lo) / span, 0.0, 1.0)

    def f(zz):
        return np.asarray(residuals(lo + np.clip(zz, 0, 1) * span), float)

    r = f(z)
    cost = r @ r
    lam = 1e-2
    for _ in range(iters):
        J = np.empty((r.size, z.size))
        for j in range(z.size):
            h = 1e-4 if z[j] < 0.5 else -1e-4
            zz = z.copy()
            zz[j] += h
            J[:, j] = (f(zz) - r) / h
        g = J.T @ r
        A = J.T @ J
        improved = False
        for _ in range(8):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-9), -g)
            zn = np.clip(z + step, 0.0, 1.0)
            rn = f(zn)
            cn = rn @ rn
            if cn < cost:
                z, r, cost, lam, improved = zn, rn, cn, lam / 3, True
                break
            lam *= 4
        if not improved or cost < 1e-12:
            break
    return lo + z * span


# ---- runtimes ----------------------------------------------------------------------------

@dataclass
class GroupFit:
    runtime: str
    key: str                 # device class or "default"
    params: dict
    rows: list               # calibration row ids
    median_error: float      # on those rows, |pred/meas - 1|


def _is_moe(model: str) -> bool:
    from .model import load_model
    return load_model(model).n_experts > 0


def _params_for(rt: str, rows) -> tuple:
    wanted = FIT.get(rt, ())
    has_compute = any(s.metric in COMPUTE_METRICS for s in rows)
    has_decode = any(s.metric not in ("prefill_tok_s", "ttft_ms") for s in rows)
    has_moe_compute = any(s.metric in COMPUTE_METRICS and _is_moe(s.model) for s in rows)
    keep = []
    for p in wanted:
        if p == "compute_fraction" and not has_compute:
            continue
        if p == "moe_gemm_efficiency":
            if not has_moe_compute:
                continue
        elif p != "compute_fraction" and not has_decode:
            continue
        keep.append(p)
    return tuple(keep)


def _runtime_with(base, key: str, params: dict, others: dict):
    from .runtime import RuntimeEntry
    classes = {k: v for k, v in others.items()}
    classes[key] = RuntimeEntry(**params)
    return type(base)(**{**base.model_dump(), "classes": classes})   # a fresh instance: its own hash


def fit_group(rt_name: str, key: str, rows, start: dict | None = None, others: dict | None = None) -> GroupFit:
    """Fit FIT[rt_name]'s parameters for one (runtime, device class or 'default') group."""
    from .hardware import load_hardware
    from .runtime import load_runtime
    base = load_runtime(rt_name)
    names = _params_for(rt_name, rows)
    hw0 = load_hardware(rows[0].hardware)
    x0 = []
    for p in names:
        if start and p in start:
            x0.append(start[p])
        elif p == "bandwidth_fraction":
            x0.append(hw0.achievable.bandwidth_fraction)
        elif p == "compute_fraction":
            x0.append(hw0.achievable.compute_fraction)
        elif p in ("overlap", "moe_gemm_efficiency"):
            x0.append(0.5)
        else:
            x0.append(1e-5 if "layer" in p else 1e-4)
    lo = [BOUNDS[p][0] for p in names]
    hi = [BOUNDS[p][1] for p in names]
    meas = np.log([s.measured for s in rows])

    def res(x):
        rt = _runtime_with(base, key, dict(zip(names, map(float, x))), others or {})
        return np.log([predict(s, runtime=rt) for s in rows]) - meas

    x = fit_bounded(res, x0, lo, hi) if names else np.array([])
    params = {p: float(v) for p, v in zip(names, x)}
    err = float(np.median(np.abs(np.exp(res(x)) - 1.0))) if names else float("nan")
    return GroupFit(rt_name, key, params, [s.id for s in rows], err)


def calibrate_runtimes(scenarios) -> dict:
    """{runtime: [GroupFit, ...]} from the calibration rows."""
    from .hardware import load_hardware
    out = {}
    from .progress import track
    for rt in track(list(FIT), "calibrate", unit=" runtimes"):
        rows = [s for s in scenarios if s.runtime == rt and is_calibration(s) and s.hardware not in SPECIALISED]
        if not rows:
            continue
        fits = [fit_group(rt, "default", rows)]
        default_entry = fits[0].params
        by_class: dict = {}
        for s in rows:
            by_class.setdefault(load_hardware(s.hardware).device_class or "default", []).append(s)
        for cls, rs in sorted(by_class.items()):
            if len(rs) >= MIN_ROWS and cls != "default" and len(by_class) > 1:
                fits.append(fit_group(rt, cls, rs, start=default_entry))
        out[rt] = fits
    return out


# ---- specialised chips -------------------------------------------------------------------

def _special_hw(name: str, params: dict):
    from .hardware import load_hardware
    hw = load_hardware(name)
    ch = {}
    if "per_layer_s" in params:
        ch["latency"] = {**hw.latency.model_dump(), "per_layer_s": params["per_layer_s"]}
    if "hop_latency_s" in params and hw.interconnect is not None:
        ch["interconnect"] = {**hw.interconnect.model_dump(), "latency_s": params["hop_latency_s"]}
    return hw.with_overrides(**ch) if ch else hw


def calibrate_specialised(scenarios) -> dict:
    """{chip: (params, calibration ids, median error on them)}: latency floor from named rows."""
    out = {}
    for chip, (ids, names) in SPECIALISED_CALIBRATION.items():
        rows = [s for s in scenarios if s.id in ids]
        if not rows:
            continue
        meas = np.log([s.measured for s in rows])

        def res(x, names=names, rows=rows, chip=chip, meas=meas):
            hw = _special_hw(chip, dict(zip(names, map(float, x))))
            return np.log([predict(s, hw=hw) for s in rows]) - meas

        x0 = [2e-5 if n == "per_layer_s" else 1e-5 for n in names]
        x = fit_bounded(res, x0, [BOUNDS[n][0] for n in names], [BOUNDS[n][1] for n in names])
        out[chip] = ({n: float(v) for n, v in zip(names, x)}, list(ids),
                     float(np.median(np.abs(np.exp(res(x)) - 1.0))))
    return out


# ---- writing the data files --------------------------------------------------------------

SPLIT_RULE = ("rows of ../shared/reference/measurements.csv whose sha256(id) first byte is even "
              "(membound.calibrate.in_calibration); the others are held out")


def write_runtimes(fits: dict, folder: Path | None = None) -> list:
    """Rewrite each fitted runtime's YAML with the fitted entries and their provenance."""
    import yaml
    from .runtime import runtimes_dir
    folder = folder or runtimes_dir()
    today = datetime.date.today().isoformat()
    written = []
    for rt, groups in fits.items():
        path = folder / f"{rt}.yaml"
        data = yaml.safe_load(path.read_text()) if path.exists() else {"name": rt}
        classes = {}
        for g in groups:
            entry = {k: float(f"{v:.4g}") for k, v in g.params.items()}
            entry["evidence"] = (f"fitted by membound.calibrate on {today} from {len(g.rows)} calibration rows "
                                 f"({', '.join(g.rows[:12])}{', ...' if len(g.rows) > 12 else ''}); "
                                 f"median |error| on them {100 * g.median_error:.1f}%")
            classes[g.key] = entry
        data["classes"] = classes
        data["calibration"] = (f"{today}: least squares on log(predicted/measured) over {SPLIT_RULE}; "
                               f"one entry per device class with >= {MIN_ROWS} calibration rows, else 'default'. "
                               "Rerun: python -m membound.calibrate")
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
        written.append(path)
    return written


def write_specialised(fits: dict, folder: Path | None = None) -> list:
    """Surgically replace `latency.per_layer_s`/`evidence` (and the interconnect `latency_s`) of
    each specialised profile; the rest of the file is left as it is."""
    from .hardware import bundled_profiles_dir
    folder = folder or bundled_profiles_dir()
    today = datetime.date.today().isoformat()
    written = []
    for chip, (params, ids, err) in fits.items():
        path = Path(folder) / f"{chip}.yaml"
        if not path.exists():
            continue
        text = path.read_text()
        lat = re.search(r"^latency:\n(?:  .*\n?)+", text, re.M)
        if lat is None:
            continue
        block = lat.group(0)
        new = re.sub(r"(  per_layer_s: ).*", lambda m: f"{m.group(1)}{params['per_layer_s']:.4g}", block, count=1)
        ev = (f'"fitted by membound.calibrate on {today} from {", ".join(ids)} (published tok/s); '
              f'median |error| on them {100 * err:.1f}%; held-out error in python -m membound.validate"')
        new = re.sub(r"(  evidence: ).*", lambda m: f"{m.group(1)}{ev}", new, count=1)
        if not new.endswith("\n"):
            new += "\n"
        text = text.replace(block, new)
        if "hop_latency_s" in params:
            ic = re.search(r"^interconnect:\n(?:  .*\n?)+", text, re.M)
            if ic:
                b = ic.group(0)
                nb = re.sub(r"(  latency_s: )[^#\n]*(#.*)?",
                            lambda m: f"{m.group(1)}{params['hop_latency_s']:.4g}   # fitted by membound.calibrate "
                                      f"({', '.join(ids)}): wafer-to-wafer hop incl. software sync", b, count=1)
                text = text.replace(b, nb)
        path.write_text(text)
        written.append(path)
    return written


def calibrate(write: bool = True, path=None):
    """Fit everything from the calibration rows; with write=True update the data files."""
    from .runtime import clear_caches
    ref = load_reference(path)
    fits = calibrate_runtimes(ref.scenarios)
    special = calibrate_specialised(ref.scenarios)
    if write:
        write_runtimes(fits)
        write_specialised(special)
        clear_caches()
    return fits, special


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fits, special = calibrate(write="--dry-run" not in argv)
    for rt, groups in fits.items():
        for g in groups:
            ps = ", ".join(f"{k}={v:.3g}" for k, v in g.params.items())
            print(f"{rt:16s} {g.key:18s} rows={len(g.rows):3d} median|err|={100 * g.median_error:5.1f}%  {ps}")
    for chip, (params, ids, err) in special.items():
        ps = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
        print(f"{chip:16s} {'latency':18s} rows={len(ids):3d} median|err|={100 * err:5.1f}%  {ps}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
