"""Plain-text reports of benchmark results, comparisons and calibrations."""
from __future__ import annotations


def _f(x, fmt: str = ".3g", unit: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{unit}"


def _ms(x) -> str:
    return "-" if x is None else (f"{x:.3g} s" if x >= 1 else f"{x * 1e3:.3g} ms")


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def bench_text(result) -> str:
    """Medians and tails per level, the prefill cost of the long context, and failures."""
    out = [f"benchmark of {result.url} (model {result.model!r})"]
    out += [f"note: {n}" for n in result.notes]
    rows = []
    for st in result.stats():
        errs = ", ".join(f"{k} {v}" for k, v in sorted(st.errors.items())) or "-"
        rows.append([st.prompt, str(st.concurrency), f"{st.ok}/{st.requests}", _ms(st.ttft_median_s),
                     _ms(st.ttft_p90_s), _f(st.decode_median_tok_s, ".1f"), _f(st.decode_p90_tok_s, ".1f"),
                     _f(st.aggregate_median_tok_s, ".1f"), _f(st.effective_concurrency, ".2f"),
                     _f(st.output_tokens_median, ".0f"),
                     _f(st.prompt_tokens_median if st.prompt_tokens_median is not None
                        else result.prompt_tokens.get(st.prompt), ".0f"), errs])
    out.append(_table(["prompt", "conc", "ok", "TTFT p50", "TTFT p90", "decode p50", "decode p90",
                       "aggregate", "eff.conc", "out tok", "prompt tok", "errors"], rows))
    out.append("(decode tok/s per user = output tokens / (total - TTFT); p90 = the slowest 10%'s edge; "
               "aggregate tok/s = tokens of a round / its wall time; eff.conc = requests decoding at once (mean))")
    for pc in result.prefill_costs():
        extra = f" for {pc['extra_prompt_tokens']:.0f} extra prompt tokens" if pc["extra_prompt_tokens"] else ""
        out.append(f"prefill cost of the long context at concurrency {pc['concurrency']}: "
                   f"TTFT {pc['prompt']} - {pc['base']} = {_ms(pc['prefill_cost_s'])}{extra}")
    fails = result.failures()
    if fails:
        out.append(f"{len(fails)} failed request(s):")
        for s in fails[:20]:
            kept = f"; kept: {s.chunks} chunks" + (f", TTFT {_ms(s.ttft_s)}" if s.ttft_s is not None else "")
            out.append(f"  {s.prompt} conc {s.concurrency} round {s.round}: {s.error_kind}: {s.error}"
                       + (kept if s.chunks else ""))
        if len(fails) > 20:
            out.append(f"  ... and {len(fails) - 20} more")
    if result.interrupted:
        out.append("the run was interrupted; the samples above are all that was measured")
    return "\n".join(out)


def comparison_text(rows, model: str, hardware: str, runtime: str) -> str:
    """Measured / predicted / pure-roofline side by side, with measured as % of predicted."""
    def pct(a, b):
        return "-" if a is None or not b else f"{100 * a / b:.0f}%"
    table = [[c.prompt, str(c.concurrency), f"{c.prompt_tokens}{'~' if c.prompt_tokens_source == 'chars/4' else ''}",
              str(c.output_tokens),
              _ms(c.ttft_s[0]), _ms(c.ttft_s[1]), _ms(c.ttft_s[2]),
              _f(c.decode_tok_s[0], ".1f"), _f(c.decode_tok_s[1], ".1f"), _f(c.decode_tok_s[2], ".1f"),
              pct(c.decode_tok_s[0], c.decode_tok_s[1]),
              _f(c.aggregate_tok_s[0], ".1f"), _f(c.aggregate_tok_s[1], ".1f")] for c in rows]
    head = (f"measured vs predicted: {model} on {hardware}, runtime {runtime or 'device'} "
            "(ceiling = runtime 'ideal', the pure roofline; ~ = prompt tokens estimated at 4 chars/token)")
    return head + "\n" + _table(
        ["prompt", "conc", "prompt tok", "out tok", "TTFT meas", "TTFT pred", "TTFT ceil",
         "decode meas", "decode pred", "decode ceil", "meas/pred", "aggr meas", "aggr pred"], table)


def calibration_text(cal) -> str:
    rows = [[str(p.batch), str(p.prompt_tokens), str(p.output_tokens), f"{p.decode_tok_s:.1f}",
             _ms(t), _ms(f), f"{100 * (f - t) / t:+.1f}%"]
            for p, t, f in zip(cal.points, cal.measured_step_s, cal.fitted_step_s)]
    how = "fitted" if cal.identifiable else "kept at the device's figure: not identifiable from these levels"
    return "\n".join([
        f"calibrated runtime {cal.runtime.name!r}: bandwidth fraction {cal.bandwidth_fraction:.3f} ({how}), "
        f"per-step overhead {_ms(cal.per_step_overhead_s)}; rms error {100 * cal.rms_relative_error:.1f}%",
        _table(["batch", "prompt", "output", "tok/s", "step meas", "step fit", "error"], rows)])
