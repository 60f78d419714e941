"""Pictures of the physics (matplotlib, an optional extra, imported when a function runs).

Every function takes `ax=None` (a new figure when None) and returns the axes. Curves come
from one vectorised `core.evaluate` per device (`estimate.prepare(...).evaluate(...)` with
arrays), not from a loop over points. Units on the axes: tok/s, FLOP/s, FLOP/byte, GB.
"""
from __future__ import annotations

import numpy as np

from ..base import defaults
from ..physics.capacity import layout_for, min_chips
from ..errors import DoesNotFitError, InvalidInputError, require
from ..physics.estimate import prepare
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from ..serving.curve import serve_curves


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt   # matplotlib: the plot extra
    # constrained layout: tick labels, titles and legends outside the axes fit in the figure
    # when it is saved (`ax.figure.savefig(...)` clipped memory_breakdown's device labels)
    return plt.subplots(figsize=(7, 4.5), layout="constrained")[1]


def _plain(axis, tokens=False, decades_only=False):
    """Tick labels as plain numbers (1, 30, 1,000) or token counts (512, 4k, 128k), not 10^x;
    decades_only for axes that span many decades (1, 2, 5 labels would collide)."""
    from matplotlib.ticker import FuncFormatter, LogLocator   # matplotlib: the plot extra

    def fmt(v, _):
        if tokens and v >= 1024:
            return f"{v / 1024:g}k"
        return f"{v:,.0f}" if v >= 1 else f"{v:g}"
    if not tokens:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if decades_only else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(fmt))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _log_log(ax, xlabel: str, ylabel: str, title: str, *, x_base: int = 10, x_tokens: bool = False,
             x_decades: bool = False, y_decades: bool = False) -> None:
    """Log-log axes with plain tick labels (`_plain`), their labels, the title, a light grid."""
    ax.set_xscale("log", base=x_base)
    ax.set_yscale("log")
    _plain(ax.xaxis, tokens=x_tokens, decades_only=x_decades)
    _plain(ax.yaxis, decades_only=y_decades)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def _label(hw, n):
    return hw.display_name if n == 1 else f"{n} x {hw.display_name}"


def _fewest(model, hw, batch, contexts, weight_dtype, kv_dtype, runtime):
    """The fewest chips that hold batch x the longest context that any chip count holds (on a tiered
    chip, in the tiers a decode streams at speed: the default count of estimate and serve)."""
    err = None
    for c in sorted({int(c) for c in contexts}, reverse=True):
        try:
            return min_chips(model, hw, batch=batch, context_tokens=c, weight_dtype=weight_dtype,
                             kv_dtype=kv_dtype, runtime=runtime, at_speed=True)
        except DoesNotFitError as e:
            err = e
    raise err


def _per_device(model, hardwares, n_chips, *, fewest_batch, fewest_contexts, batch, context,
                weight_dtype, kv_dtype, runtime):
    """(hw, chips, Prepared) per device: chips from `n_chips` (an int or a {name: int} dict), else
    the fewest that hold fewest_batch x the longest of fewest_contexts; prepared at batch x context."""
    for h in hardwares:
        hw = load_hardware(h)
        n = n_chips.get(hw.name) if isinstance(n_chips, dict) else n_chips
        if n is None:
            n = _fewest(model, hw, fewest_batch, fewest_contexts, weight_dtype, kv_dtype, runtime)
        par = layout_for(model, hw, n)
        yield hw, n, prepare(model, hw, batch=batch, prompt_tokens=max(context - 1, 0), output_tokens=1,
                             weight_dtype=weight_dtype, kv_dtype=kv_dtype, n_chips=n, parallel=par,
                             runtime=runtime)


def _axis_values(values, default, field, expected):
    """A non-empty 1-D float array of values >= 1 (the default when None), else an error."""
    a = np.asarray(values if values is not None else default, dtype=float)
    if a.ndim != 1 or len(a) == 0 or np.any(a < 1):
        raise InvalidInputError(field, values, expected)
    return a


def roofline(hardware, model=None, batches=(1, 8, 64, 512), *, prompt_tokens: int = 2048,
             weight_dtype: str = "bf16", kv_dtype: str | None = None, compute_dtype: str = "bf16",
             runtime=None, ax=None):
    """The roofline of one chip: attainable FLOP/s = min(peak, intensity x bandwidth) against
    arithmetic intensity (FLOP per byte moved), log-log. With `model`, its decode steps (one per
    batch size, at a context of `prompt_tokens`) and its prefill of `prompt_tokens` tokens are
    marked at their intensity and predicted FLOP/s (below the roof by the overheads)."""
    require("matplotlib", "plot", "membound.plots.roofline")
    hw = load_hardware(hardware)
    ax = _axes(ax)
    peak = hw.peak_flops(compute_dtype)
    bw = hw.bandwidth_bytes_s
    ridge = peak / bw
    x = np.logspace(-1, max(4.0, np.log10(ridge) + 1.5), 200)
    ax.plot(x, np.minimum(peak, x * bw) / 1e12, color="black", lw=2,
            label=f"peak: {bw / 1e12:.3g} TB/s, {peak / 1e12:,.0f} TFLOP/s {compute_dtype}")
    a = hw.achievable
    ax.plot(x, np.minimum(peak * a.compute_fraction, x * bw * a.bandwidth_fraction) / 1e12, color="gray",
            ls="--", lw=1, label=f"achievable ({a.bandwidth_fraction:.0%} bw, {a.compute_fraction:.0%} compute)")
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:,.0f} FLOP/B", (ridge, peak / 1e12), textcoords="offset points", xytext=(4, -14),
                fontsize=8, color="gray")
    if model is not None:
        m = load_model(model)
        B = np.asarray(batches, dtype=float)
        p = prepare(m, hw, batch=1, prompt_tokens=prompt_tokens, output_tokens=1, weight_dtype=weight_dtype,
                    kv_dtype=kv_dtype, activation_dtype=compute_dtype, runtime=runtime)
        r = p.evaluate(batch=B)
        C = p.knobs.peak_flops * p.eff.compute_fraction
        bw_eff = bw * p.eff.bandwidth_fraction
        flops, moved = r["compute_s"] * C, r["memory_s"] * bw_eff     # per decode step
        ai, done = flops / moved, flops / r["tpot_s"]
        fits = np.broadcast_to(np.asarray(r["fits"], dtype=bool), B.shape)
        ax.plot(ai, done / 1e12, "-", color="tab:blue", lw=1)
        ax.plot(ai[fits], done[fits] / 1e12, "o", color="tab:blue", ms=6,
                label=f"{m.name} decode (context {prompt_tokens})")
        if not fits.all():   # hollow and labelled: the physics of a batch that the chip cannot hold
            ax.plot(ai[~fits], done[~fits] / 1e12, "o", mfc="none", mec="tab:red", mew=1.5, ms=7,
                    label=f"does not fit in {hw.capacity_bytes / 1e9:,.0f} GB")
        for b, xi, yi, ok in zip(batches, ai, done / 1e12, fits):
            ax.annotate(f"B={b}" + ("" if ok else " (does not fit)"), (xi, yi), textcoords="offset points",
                        xytext=(6, -10), fontsize=8, color="tab:blue" if ok else "tab:red")
        pre_flops = r["prefill_compute_s"][0] * C
        pre_ai = pre_flops / (r["prefill_memory_s"][0] * bw_eff)
        ax.plot([pre_ai], [pre_flops / r["prefill_s"][0] / 1e12], "s", color="tab:red", ms=7,
                label=f"{m.name} prefill of {prompt_tokens} tokens")
    _log_log(ax, "arithmetic intensity (FLOP per byte of memory traffic)", "attainable TFLOP/s (one chip)",
             f"Roofline: {hw.display_name}", x_decades=True)
    ax.legend(fontsize=8, loc="lower right")
    return ax


def context_curve(model, hardwares, contexts=None, *, batch: int = 1, weight_dtype: str = "bf16",
                  kv_dtype: str | None = None, n_chips=None, runtime=None, ax=None):
    """Decode tok/s per user against context length (tokens already cached), one line per
    device. n_chips: an int, a {device name: int} dict, or None for the fewest chips that hold
    the model at the longest context any chip count can hold. A line stops where the model and
    its KV cache no longer fit."""
    require("matplotlib", "plot", "membound.plots.context_curve")
    m = load_model(model)
    ax = _axes(ax)
    L = _axis_values(contexts, 2 ** np.arange(9, 18), "contexts",
                     "a non-empty list of context lengths >= 1 token")
    for hw, n, p in _per_device(m, hardwares, n_chips, fewest_batch=batch, fewest_contexts=L, batch=batch,
                                context=int(L.max()), weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                runtime=runtime):
        r = p.evaluate(prompt=L - 1)
        y = np.where(r["fits"], r["decode_tok_s_per_user"], np.nan)
        ax.plot(L, y, "o-", ms=3, label=_label(hw, n))
    _log_log(ax, "context length (tokens in the KV cache)", "decode tok/s per user",
             f"{m.name}, {weight_dtype} weights, batch {batch}", x_base=2, x_tokens=True)
    ax.legend(fontsize=8)
    return ax


def interactivity(model, hardwares, batches=None, *, context_tokens: int = 4096, weight_dtype: str = "bf16",
                  kv_dtype: str | None = None, n_chips=None, runtime=None, ax=None):
    """The interactivity frontier: aggregate decode tok/s per chip against tok/s per user as the
    batch grows, one line per device (batch sizes marked at the ends). n_chips as in
    `context_curve` (None: the fewest chips that hold the largest batch). Points that do not
    fit in memory are left out."""
    require("matplotlib", "plot", "membound.plots.interactivity")
    m = load_model(model)
    ax = _axes(ax)
    B = _axis_values(batches, 2 ** np.arange(0, 10), "batches", "a non-empty list of batch sizes >= 1")
    for hw, n, p in _per_device(m, hardwares, n_chips, fewest_batch=int(B.max()), fewest_contexts=[context_tokens],
                                batch=1, context=context_tokens, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                runtime=runtime):
        r = p.evaluate(batch=B)
        ok = np.asarray(r["fits"], dtype=bool) & np.ones_like(B, dtype=bool)
        x, y = r["decode_tok_s_per_user"][ok], r["decode_tok_s_total"][ok] / n
        line, = ax.plot(x, y, "o-", ms=3, label=_label(hw, n))
        for i in (0, len(x) - 1) if len(x) else ():
            ax.annotate(f"B={B[ok][i]:.0f}", (x[i], y[i]), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=line.get_color())
    _log_log(ax, "decode tok/s per user (interactivity)", "decode tok/s per chip (throughput)",
             f"{m.name}, {weight_dtype}, context {context_tokens}: bigger batches, up and to the left")
    ax.margins(x=0.12, y=0.1)
    ax.legend(fontsize=8)
    return ax


def memory_breakdown(result_or_results, ax=None):
    """Per-chip bytes of weights, KV cache, activations (and a draft model) as stacked bars, one
    per result, with each chip's capacity marked; bars past the mark do not fit."""
    require("matplotlib", "plot", "membound.plots.memory_breakdown")
    results = result_or_results if isinstance(result_or_results, (list, tuple)) else [result_or_results]
    if not results or any(getattr(r, "memory", None) is None for r in results):
        raise InvalidInputError("result_or_results", result_or_results, "one or more mb.Result with a memory breakdown")
    ax = _axes(ax)
    y = np.arange(len(results))
    parts = [("weights", "weights_bytes", "tab:blue"), ("KV cache", "kv_bytes", "tab:orange"),
             ("activations", "activation_bytes", "tab:green"), ("draft / other", "other_bytes", "tab:purple")]
    left = np.zeros(len(results))
    for label, key, colour in parts:
        v = np.array([getattr(r.memory, key) for r in results]) / 1e9
        if key == "other_bytes" and not v.any():
            continue
        ax.barh(y, v, left=left, color=colour, label=label, height=0.6)
        left += v
    cap = np.array([r.memory.capacity_bytes for r in results]) / 1e9
    ax.scatter(cap, y, marker="|", s=900, color="black", linewidths=2, label="capacity per chip", zorder=3)
    for yi, r, tot in zip(y, results, left):
        ax.annotate(f"{tot:,.3g} of {cap[yi]:,.3g} GB" + ("" if r.memory.fits else ": DOES NOT FIT"),
                    (max(tot, cap[yi]), yi), textcoords="offset points", xytext=(8, -3), fontsize=8,
                    color="black" if r.memory.fits else "tab:red")
    ax.set_yticks(y, [f"{r.model}\n{r.n_chips} x {r.hardware}, B={r.batch}, L={r.prompt_tokens + r.output_tokens}"
                      for r in results], fontsize=8)
    ax.invert_yaxis()
    # room right of the longest bar for its label ("187 of 151 GB: DOES NOT FIT" is the longest)
    ax.set_xlim(0, max(left.max(), cap.max()) * (1.45 if all(r.memory.fits for r in results) else 1.85))
    ax.set_xlabel("GB per chip (decimal)")
    ax.set_title("Memory per chip")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=5, frameon=False)
    return ax


def _column(df, name, hints):
    if name is not None:
        if name not in df.columns:
            raise InvalidInputError("column", name, f"one of the table's columns {list(df.columns)}")
        return name
    for c in df.columns:
        if any(h in str(c).lower() for h in hints):
            return c
    raise InvalidInputError("column", None, f"a column named like {hints} in {list(df.columns)}")


def validation(df, *, predicted: str | None = None, measured: str | None = None, category: str | None = None,
               ax=None):
    """Predicted against measured (log-log), one colour per category, with the y = x line and
    a ±25% band. Columns default to the first whose names contain 'pred', 'meas' and 'categ'
    (or 'kind'/'metric')."""
    require("matplotlib", "plot", "membound.plots.validation")
    pc = _column(df, predicted, ("pred",))
    mc = _column(df, measured, ("meas",))
    try:
        cc = _column(df, category, ("categ", "kind", "metric"))
    except InvalidInputError:
        cc = None
    x, y = df[mc].to_numpy(float), df[pc].to_numpy(float)
    groups = [(None, np.ones(len(df), bool))] if cc is None else [(c, (df[cc] == c).to_numpy())
                                                                    for c in sorted(df[cc].unique(), key=str)]
    if ax is None:   # room on the right for one legend row per category
        import matplotlib.pyplot as plt   # matplotlib: the plot extra
        ax = plt.subplots(figsize=(7 + (3.5 if len(groups) > 8 else 0), 5.5), layout="constrained")[1]
    for (c, sel), (colour, marker) in zip(groups, _styles(len(groups))):
        ax.scatter(x[sel], y[sel], s=22, alpha=0.85, color=colour, marker=marker, linewidths=0.6,
                   label=None if c is None else f"{c} ({sel.sum()})")
    lo = np.nanmin(np.concatenate([x, y])) / 1.5
    hi = np.nanmax(np.concatenate([x, y])) * 1.5
    line = np.array([lo, hi])
    ax.plot(line, line, color="black", lw=1, label="predicted = measured")
    ax.fill_between(line, line / 1.25, line * 1.25, color="gray", alpha=0.15, label="±25%")
    many = bool(np.log10(hi / lo) > 3)          # 1, 2, 5 labels of every decade would collide
    _log_log(ax, "measured" if mc == "measured" else f"measured ({mc})",
             "predicted" if pc == "predicted" else f"predicted ({pc})",
             "membound against published measurements", x_decades=many, y_decades=many)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    if len(groups) > 8:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        if ax.figure.get_layout_engine() is None:     # a figure of the caller's; ours is constrained
            ax.figure.tight_layout()
    else:
        ax.legend(fontsize=8)
    return ax


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")   # 7 shapes against 10 colours: 70 distinct pairs


def _styles(n: int) -> list[tuple[str, str]]:
    """n distinct (colour, marker) pairs: the 10 tab colours with 7 shapes, both cycling (lcm 70)."""
    from matplotlib import colormaps   # matplotlib: the plot extra
    colours = colormaps["tab10"].colors     # type: ignore[attr-defined]  # tab10 is a ListedColormap
    return [(colours[i % 10], _MARKERS[i % len(_MARKERS)]) for i in range(n)]


def served_curve(model, hardwares, *, concurrency=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                 prompt_tokens=defaults.PROMPT_TOKENS, output_tokens=defaults.OUTPUT_TOKENS,
                 weight_dtype: str = "fp8", kv_dtype: str | None = "fp8", n_chips: int = 8,
                 runtime=None, ax=None):
    """The served interactivity curve (InferenceMAX's chart): output tok/s per chip against tok/s
    per user as clients grow, continuous batching (membound.serve_curve of each device, those of
    one structure solved at once: `serve_curves`), one line per device; hardwares: names or
    (name, chips) pairs. The knee (80% of the best throughput) is marked with a diamond, its client
    count in the legend."""
    require("matplotlib", "plot", "membound.plots.served_curve")
    ax = _axes(ax)
    conc = _axis_values(concurrency, None, "concurrency", "a non-empty list of client counts >= 1")
    devices = [item if isinstance(item, tuple) else (item, n_chips)
               for item in ([hardwares] if isinstance(hardwares, str) else list(hardwares))]
    curves = serve_curves([dict(model=model, hardware=name, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                weight_dtype=weight_dtype, kv_dtype=kv_dtype, n_chips=n, runtime=runtime)
                           for name, n in devices], concurrency=conc.astype(int))   # devices of one structure: one solve
    for (name, n), c in zip(devices, curves):
        assert c is not None            # serve_curves raises (no skip)
        k = int(np.flatnonzero(c.concurrency == c.knee())[0])
        # the knee's client count goes in the legend, not beside the point: curves of similar chips
        # bend at the same place, and labels there overlapped
        line, = ax.plot(c.tok_s_per_user, c.output_tok_s_per_chip, "o-", ms=3,
                        label=f"{n} x {name} (knee: {c.concurrency[k]:,} clients)")
        ax.scatter([c.tok_s_per_user[k]], [c.output_tok_s_per_chip[k]], marker="D", s=50, facecolors="none",
                   edgecolors=line.get_color(), zorder=3)
    _log_log(ax, "tok/s per user (interactivity)", "output tok/s per chip (throughput)",
             f"{load_model(model).name}, {weight_dtype}, {runtime}: served, {prompt_tokens}/{output_tokens} tokens")
    ax.legend(fontsize=8)
    return ax
