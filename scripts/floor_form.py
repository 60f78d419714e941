"""Issue 27 items 2/3: llama.cpp-cuda's per-layer floor in seconds (per_layer_overhead_s) against one in
cycles of the chip's clock (per_layer_overhead_cycles, as llama.cpp-vulkan, NeMo and TinyChat), each
refitted cold with calibrate's fitter, compared on the select groups of the committed split (membound.split).

The comparison, fixed before looking: validation (select groups: each left out, with every report group, of a
cold refit; validate.held_out_predictions) median |error| of 'llama.cpp CUDA decode', the category the floor
moves; 'llama.cpp CUDA prefill' and 'llama.cpp CUDA batched decode' as guards. Report groups are not computed.
The figures are validation figures (a form choice is made on them). Outcome (2026-12-06): see the comment
on FIT["llama.cpp-cuda"] in membound/fidelity/calibrate.py.

Usage, from the repository root:  PYTHONPATH=src python scripts/floor_form.py {seconds,cycles} [chip|source]
"""
import sys

import numpy as np

from membound.fidelity import calibrate as cal
from membound.fidelity import split
from membound.fidelity import validate as val
from membound.fidelity.reference import load_reference

RT = "llama.cpp-cuda"
FLOORS = ("per_layer_overhead_s", "per_layer_overhead_cycles")


def stripped(rt: str, _orig=val._stripped):
    """validate._stripped, less either form of the per-layer floor (the bundled file sets the seconds)."""
    return _orig(rt, FLOORS if rt == RT else ())


def main(form: str, group: str = "chip") -> None:
    if form not in ("seconds", "cycles"):
        raise SystemExit("form: 'seconds' or 'cycles'")
    if form == "cycles":
        cal.FIT[RT] = tuple("per_layer_overhead_cycles" if p == "per_layer_overhead_s" else p for p in cal.FIT[RT])
    val._stripped = stripped
    rows = [s for s in load_reference().scenarios if s.runtime == RT and not cal.beats_physics(s)]
    fits = cal.calibrate_runtimes(rows, runtimes=[RT])[RT]
    print(f"{form}, {group} groups: cold fit on all {len(rows)} rows:",
          {k: float(f"{v:.4g}") for k, v in fits[0].params.items()}, "on a bound:", fits[0].at_bounds)
    held, notes = val.held_out_predictions(rows, group)
    print("\n".join(notes))
    full = cal.runtime_from_fits(RT, fits, base=stripped(RT))
    cats: dict = {}
    for s in rows:
        c = cats.setdefault(s.category, {"in": [], "val": []})
        c["in"].append(val._safe_predict(s, full) / s.measured - 1)
        if split.role(group, val.GROUPS[group](s)) == "select" and held.get(s.id) is not None:
            c["val"].append((s.id, s.hardware, held[s.id] / s.measured - 1))
    for name, c in cats.items():
        v = [abs(e) for *_, e in c["val"]]
        print(f"{name:32s} in-sample {100 * np.median(np.abs(c['in'])):5.2f}%  validation rows {len(v):2d} "
              f"median {100 * np.median(v) if v else float('nan'):5.2f}%")
        print("    " + ", ".join(f"{i} ({h}) {100 * e:+.1f}%" for i, h, e in c["val"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
