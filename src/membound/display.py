"""Text and HTML renderings of results (presentation layer)."""
from __future__ import annotations

import html


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _secs(x: float) -> str:
    if x >= 1:
        return f"{x:.3g} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.3g} µs"


def result_rows(r) -> list[tuple[str, str]]:
    rows = [
        ("model", r.model), ("hardware", f"{r.n_chips} x {r.hardware} ({r.parallel})"),
        ("runtime", r.runtime),
        ("workload", f"batch {r.batch}, prompt {r.prompt_tokens}, output {r.output_tokens} tokens"),
        ("dtypes", f"weights {r.weight_dtype}, KV {r.kv_dtype}, activations {r.activation_dtype}"),
        ("decode per user", f"{r.decode_tok_s_per_user:,.1f} tok/s"),
        ("decode total", f"{r.decode_tok_s_total:,.1f} tok/s"),
        ("time per output token", _secs(r.tpot_s)),
        ("TTFT", _secs(r.ttft_s)),
        ("end to end", _secs(r.e2e_s)),
        ("bound", r.bound),
        ("step terms", ", ".join(f"{k} {_secs(v)}" for k, v in r.step_terms_s.items())),
    ]
    if r.memory is not None:
        m = r.memory
        rows.append(("memory per chip", f"weights {_si(m.weights_bytes, 'B')}, KV {_si(m.kv_bytes, 'B')}, "
                     f"activations {_si(m.activation_bytes, 'B')}"
                     + (f", other {_si(m.other_bytes, 'B')}" if m.other_bytes else "")
                     + f" of {_si(m.capacity_bytes, 'B')} ({'fits' if m.fits else 'DOES NOT FIT'})"))
        if len(m.placement) > 1:
            rows.append(("placement", "; ".join(f"{p.tier}: weights {_si(p.weights_bytes, 'B')}, "
                                                 f"KV {_si(p.kv_bytes, 'B')}" for p in m.placement)))
    if r.speculative:
        s = r.speculative
        rows.append(("speculative", f"gamma {s['gamma']}, {s['tokens_per_round']:.2f} tokens/round, "
                     f"draft {s['draft'] or 'self-drafting head'}"))
    if r.cost_per_million_tokens_usd is not None:
        rows.append(("cost", f"${r.cost_per_million_tokens_usd:,.3f} per million output tokens"))
    if r.joules_per_token is not None:
        rows.append(("energy", f"{r.joules_per_token:.3g} J per output token"))
    return rows


def text_table(rows) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def html_table(rows) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def result_text(r) -> str:
    return text_table(result_rows(r))


def result_html(r) -> str:
    return html_table(result_rows(r))
