"""Each accuracy pin of the test suite beside the figure the code measures now, to re-pin after an intended change.

    PYTHONPATH=src python scripts/accuracy_pins.py [validate] [served] [mlperf] [vendors]   # default: all four

The pins live in one table per test module (tests/test_validation.py MEASURED, MEASURED_BY_SOURCE,
IN_SAMPLE_ONLY; tests/test_serve_validate.py MEASURED, BY_ENGINE_MODEL_CHIP; tests/test_mlperf_accuracy.py
MEASURED; tests/test_vendor_accuracy.py MEASURED, MEDIANS), each with its limit 1.25 x pinned + 1 point. A line
reads `key: pinned -> now (limit)`, flagged FAIL where the figure is over its limit and `moved` where it is
more than 1 point off the pin either way (a better figure is re-pinned too, or the margin grows silently).
Write the new figures into the tables with the commit they were measured on (PINNED_ON) and, in the commit
message, say that the change was intended. The figures come from the same helpers the tests use.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _line(key, pinned: float | None, now: float | None, limit) -> str:
    if pinned is None or now is None:
        return f"  {key}: {pinned} -> {now}" + ("" if pinned == now else "   moved (rows appeared or went)")
    flag = "   FAIL" if now > limit(pinned) else "   moved" if abs(now - pinned) > 0.01 else ""
    return f"  {key}: {pinned:.3f} -> {now:.3f} (limit {limit(pinned):.3f}){flag}"


def validate() -> list[str]:
    import test_validation as t
    from membound.fidelity.validate import validation_report
    out = [f"tests/test_validation.py (pinned on {t.PINNED_ON})"]
    for group, table in (("chip", t.MEASURED), ("source", t.MEASURED_BY_SOURCE)):
        cats = validation_report(group=group)["categories"]
        for name in sorted(set(table) | {n for n, c in cats.items() if c["validation_rows"] or c["report_rows"]}):
            c = cats.get(name, {})
            for i, kind in enumerate(("validation", "report")):
                pinned = table.get(name, (None, None))[i]
                now = c.get(f"{kind}_median") if c.get(f"{kind}_rows") else None
                out.append(_line((group, name, kind), pinned, now, t._limit))
        if group == "chip":
            out += [_line(("chip", n, "in-sample"), m, cats[n]["median"], t._limit) for n, m in t.IN_SAMPLE_ONLY.items()]
    return out


def served() -> list[str]:
    import test_serve_validate as t
    from membound.fidelity.serve_validate import load_rows, other_categories, predict, summary
    rows, _ = load_rows()
    cats = {"aggregated": predict(rows), **other_categories()}
    out = [f"tests/test_serve_validate.py (pinned on {t.PINNED_ON}): TPOT, TTFT, tput/GPU"]
    for (cat, part), ms in t.MEASURED.items():
        s = summary(t._part(cats[cat], part))
        out += [_line((cat, part, k), m, s[k], t._limit) for k, m in zip(t.KEYS, ms)]
    for name, rs in cats.items():
        for c in sorted({r.category for r in rs}):
            s = summary([r for r in rs if r.category == c])
            key = c if name != "mtp" else (name, c)
            ms = t.BY_ENGINE_MODEL_CHIP.get(key, (None,) * 3)
            out += [_line((key, k), m, s[k], t._limit) for k, m in zip(t.KEYS, ms)]
    return out


def mlperf() -> list[str]:
    import test_mlperf_accuracy as t
    from membound.fidelity import mlperf_validate as mv
    from membound.fidelity import mlperf_rows as mrows
    rows, _ = mrows.load_rows()
    figs = t._figures(mv.predict(t._sample(rows)))
    out = [f"tests/test_mlperf_accuracy.py (pinned on {t.PINNED_ON}): (rows predicted) median |error|"]
    for key, (n, m) in sorted(t.MEASURED.items()):
        out.append(_line(key, m, figs[key]["median_abs"], t._limit) + f"   rows {n} -> {figs[key]['predicted']}")
    return out


def vendors() -> list[str]:
    import test_vendor_accuracy as t
    from membound.fidelity.vendors import vendor_report
    rows, ind, fitted = vendor_report()
    out = [f"tests/test_vendor_accuracy.py (pinned on {t.PINNED_ON}): |error|"]
    out += [_line(r.id, t.MEASURED.get(r.id), abs(r.error), t._limit) for r in sorted(rows, key=lambda r: r.id)]
    return out + [_line(k, m, now, t._limit) for k, m, now in zip(("independent", "fitted"), t.MEDIANS, (ind, fitted))]


PARTS = {"validate": validate, "served": served, "mlperf": mlperf, "vendors": vendors}


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a not in PARTS]
    if unknown:
        print(f"unknown part {unknown}: expected any of {', '.join(PARTS)}", file=sys.stderr)
        return 2
    for name in argv or list(PARTS):
        print("\n".join(PARTS[name]()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
