"""Text and HTML renderings of results (presentation layer)."""
from __future__ import annotations

import html


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def seconds_text(x: float) -> str:
    if x >= 1:
        return f"{x:.3g} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.3g} µs"


def result_rows(r, api_price: str = "") -> list[tuple[str, str]]:
    rows = [
        ("model", r.model), ("hardware", f"{r.n_chips} x {r.hardware} ({r.parallel})"),
        ("runtime", r.runtime),
        ("workload", f"batch {r.batch}, prompt {r.prompt_tokens}, output {r.output_tokens} tokens"),
        ("dtypes", f"weights {r.weight_dtype}, KV {r.kv_dtype}, activations {r.activation_dtype}"),
        ("decode per user", f"{r.decode_tok_s_per_user:,.1f} tok/s"),
        ("decode total", f"{r.decode_tok_s_total:,.1f} tok/s"),
        ("time per output token", seconds_text(r.tpot_s)),
        ("TTFT", seconds_text(r.ttft_s)),
        ("end to end", seconds_text(r.e2e_s)),
        ("bound", r.bound),
        ("step terms", ", ".join(f"{k} {seconds_text(v)}" for k, v in r.step_terms_s.items()
                                 if v or k not in ("draft", "communication", "overhead"))),
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
    rows.append(("cost", NO_PRICE if r.cost_per_million_tokens_usd is None
                 else f"${r.cost_per_million_tokens_usd:,.3f} per million output tokens"))
    if api_price:     # the device's published per-token API price (catalog.hardware.api_price_text)
        rows.append(("API price", api_price))
    if r.joules_per_token is not None:
        rows.append(("energy", f"{r.joules_per_token:.3g} J per output token"))
    if getattr(r, "assumptions", ()):
        rows.append(("assumed", "; ".join(r.assumptions)))
    if r.calibration:
        rows.append(("calibration", r.calibration))
    return rows


def pre_html(text: str) -> str:
    """A monospaced text table for Jupyter (the same text `str()` gives)."""
    return f"<pre>{html.escape(text)}</pre>"


def text_table(rows) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def html_table(rows) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def result_text(r, api_price: str = "") -> str:
    return text_table(result_rows(r, api_price))


def result_html(r, api_price: str = "") -> str:
    return html_table(result_rows(r, api_price))


# ---- models and devices ------------------------------------------------------------------
def sig3(x: float) -> str:
    """3 significant figures, without exponents: 0.23, 85.5, 1,540, 21,000."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def model_rows(m) -> list[tuple[str, str]]:
    """A model's shape and costs: params in billions, bytes in GB/kB (decimal)."""
    moe = (f"{m.experts_per_token} of {m.n_experts} routed experts"
           + (f" + {m.n_shared_experts} shared" if m.n_shared_experts else "")) if m.n_experts else "dense"
    attn = "MLA" if m.kv_lora_rank else ("MHA" if m.n_kv_heads == m.n_heads else "GQA")
    rows = [
        ("model", m.name),
        ("parameters", f"{m.total_params / 1e9:.2f} B total, {m.active_params / 1e9:.2f} B active per token"),
        ("layers", f"{m.n_layers} ({moe})"),
        ("attention", f"{attn}: {m.n_heads} query heads, {m.n_kv_heads} KV heads, head dim {m.head_dim}"),
        ("hidden / vocab", f"{m.hidden_size} / {m.vocab_size}"),
        ("weights (bf16)", _si(m.weight_bytes("bf16"), "B")),
        ("KV cache (bf16)", f"{_si(m.kv_bytes_per_token('bf16'), 'B')} per token"),
    ]
    if m.layer_windows and any(w is not None for w in m.layer_windows):
        rows.append(("sliding windows", ", ".join(f"{n} layers {'global' if w is None else f'window {w}'}"
                                                  for w, n in m.window_groups())))
    if m.index_topk:
        rows.append(("sparse attention", f"top {m.index_topk:,} tokens per query, picked by an indexer of "
                                         f"{m.index_n_heads} heads x {m.index_head_dim}"))
    if m.max_context:
        rows.append(("max context", f"{m.max_context:,} tokens"))
    return rows


def hardware_rows(h) -> list[tuple[str, str]]:
    """A device per chip: memory in GB, bandwidth in TB/s, compute in TFLOP/s (decimal)."""
    rows = [("device", f"{h.name} ({h.display_name}, {h.vendor}, {h.kind})")]
    for t in h.memory:
        rows.append((f"memory {t.name}", f"{sig3(t.capacity_bytes / 1e9)} GB at {sig3(t.bandwidth_bytes_s / 1e12)} TB/s"))
    rows.append(("compute (dense)", ", ".join(f"{k} {sig3(v / 1e12)} TFLOP/s" for k, v in h.compute_flops.items())))
    if h.interconnect is not None:
        i = h.interconnect
        rows.append(("interconnect", f"{i.name}: {sig3(i.bandwidth_bytes_s / 1e9)} GB/s per direction, "
                     f"{seconds_text(i.latency_s)} per hop, up to {i.max_chips} chips"))
    a = h.achievable
    rows.append(("achievable", f"{a.bandwidth_fraction:.0%} of bandwidth, {a.compute_fraction:.0%} of compute"))
    if h.latency.per_layer_s or h.latency.per_step_s:
        rows.append(("latency floor", f"{seconds_text(h.latency.per_layer_s)} per layer, "
                                      f"{seconds_text(h.latency.per_step_s)} per step"))
    if h.power_w:
        rows.append(("power", f"{h.power_w:,.0f} W"))
    rows.append(("price", price_text(h)))
    for a in h.api_prices:
        rows.append((f"API {a.model}", f"{a.provider} ${a.input_usd_per_million:g} in / "
                     f"${a.output_usd_per_million:g} out per million tokens ({a.date})"))
    return rows


NO_PRICE = "no price (pass --price)"
"""What a cost shows where no price per chip-hour is known: never silence (the CLI's --price, the
library's price_usd_per_hour=)."""


def price_text(h) -> str:
    """A device's price per chip-hour and where it comes from, or why it has none."""
    if h.price_usd_per_hour:
        return f"${h.price_usd_per_hour:,.2f} per chip-hour" + (f" ({h.price_source})" if h.price_source else "")
    return NO_PRICE + (f": {h.no_price}" if h.no_price else "")


def model_text(m) -> str:
    return text_table(model_rows(m))


def model_html(m) -> str:
    return html_table(model_rows(m))


def hardware_text(h) -> str:
    return text_table(hardware_rows(h))


def hardware_html(h) -> str:
    return html_table(hardware_rows(h))


def hardware_repr(h) -> str:
    """One line: Hardware('h100-sxm', 80 GB at 3.35 TB/s, 989 TFLOP/s bf16)."""
    peak = h.compute_flops.get("bf16") or h.compute_flops.get("fp16") or max(h.compute_flops.values())
    return (f"Hardware({h.name!r}, {sig3(h.capacity_bytes / 1e9)} GB at {sig3(h.bandwidth_bytes_s / 1e12)} TB/s, "
            f"{sig3(peak / 1e12)} TFLOP/s 16-bit)")


def grid(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with a header row, columns left-aligned (for the CLI)."""
    cols = list(zip(header, *rows)) if rows else [(h,) for h in header]
    widths = [max(len(str(c)) for c in col) for col in cols]
    line = lambda cells: "  ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def html_grid(header: list[str], rows: list[list[str]]) -> str:
    """The same table as `grid`, as HTML (for Jupyter)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def model_list_rows(models) -> tuple[list[str], list[list[str]]]:
    """One row per model for `membound models list` and docs/catalogue.md."""
    header = ["model", "params (B)", "active (B)", "layers", "KV per token (bf16)", "max context"]
    rows = [[m.name, f"{m.total_params / 1e9:.2f}", f"{m.active_params / 1e9:.2f}", str(m.n_layers),
             _si(m.kv_bytes_per_token("bf16"), "B"), f"{m.max_context:,}" if m.max_context else ""] for m in models]
    return header, rows


def hardware_list_rows(devices) -> tuple[list[str], list[list[str]]]:
    """One row per device for `membound hardware list` and docs/catalogue.md (per chip)."""
    header = ["device", "vendor", "kind", "memory (GB)", "bandwidth (TB/s)", "16-bit (TFLOP/s)", "$/chip-hour"]
    rows = []
    for h in devices:
        peak = h.compute_flops.get("bf16") or h.compute_flops.get("fp16") or max(h.compute_flops.values())
        rows.append([h.name, h.vendor, h.kind, sig3(h.capacity_bytes / 1e9), sig3(h.bandwidth_bytes_s / 1e12),
                     sig3(peak / 1e12), f"{h.price_usd_per_hour:.2f}" if h.price_usd_per_hour else "none"])
    return header, rows


# ---- served curves ---------------------------------------------------------------------------
_CURVE_HEADER = ["clients", "tok/s/user", "out tok/s/chip", "TTFT", "TPOT", "running", "$/M out"]


def serve_curve_table(c) -> tuple[str, list[str], list[list[str]], str]:
    """A `ServeCurve` as (title, header, rows, footnote): one row per client count."""
    title = f"{c.model} on {c.n_chips} x {c.hardware}, {c.runtime}: served curve"
    cost = c.cost_per_million_output_tokens_usd
    rows = [[f"{int(n):,}", f"{u:,.1f}", f"{t:,.0f}", seconds_text(float(f)), seconds_text(float(p)), f"{r:.1f}",
             "-" if cost is None else f"{cost[i]:,.3g}"]
            for i, (n, u, t, f, p, r) in enumerate(zip(c.concurrency, c.tok_s_per_user, c.output_tok_s_per_chip,
                                                         c.ttft_s, c.tpot_s, c.mean_running))]
    return title, _CURVE_HEADER, rows, "" if cost is not None else f"cost: {NO_PRICE}"


def serve_curve_text(c) -> str:
    title, header, rows, foot = serve_curve_table(c)
    return "\n".join(line for line in (title, grid(header, rows), foot) if line)


def serve_curve_html(c) -> str:
    title, header, rows, foot = serve_curve_table(c)
    return (f"<p><b>{html.escape(title)}</b></p>" + html_grid(header, rows)
            + (f"<p>{html.escape(foot)}</p>" if foot else ""))


def served_fast_mode_rows(f) -> list[tuple[str, str]]:
    """A `ServedFastMode`: the two lanes side by side, and what the fast one costs."""
    return [("standard lane", f"{f.slow_concurrency:,} clients, {f.slow_tok_s_per_user:,.1f} tok/s per user"),
            ("fast lane", f"~{f.fast_concurrency:,.1f} clients, {f.fast_tok_s_per_user:,.1f} tok/s per user"),
            ("speed-up", f"{f.speedup:.2f}x the speed per user"),
            ("price ratio", f"{f.price_ratio:.2f}x the price per output token")]
