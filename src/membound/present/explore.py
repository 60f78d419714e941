"""`explore()`: an interactive explorer for notebooks (ipywidgets and matplotlib: the `notebook`
extra, imported when the explorer is built).

    import membound as mb
    mb.explore("llama-3.1-70b", "h100-sxm")      # in Jupyter: controls, a live table and a plot

Controls: model, device, chips (0 = the fewest that hold it, as `compare` does), weight and
KV dtypes, a mode, batch (or clients), prompt and output tokens. In "batch" mode every change
re-runs `compare()` for the one device (the table is its `Result`: a static batch) and redraws
the interactivity curve (`plots.interactivity`) with the current batch marked; in "concurrency"
mode the slider counts clients in a closed loop served by continuous batching (`serve()`, vLLM's
scheduler; the table is its `ServeResult`) on the same chips. A bad combination shows the
library's one-line error in place of the table.
"""
from __future__ import annotations

import html
import io

from ..base import defaults
from ..planning.compare import compare
from ..errors import InvalidInputError, MemboundError
from ..physics.estimate import check_int
from ..catalog.hardware import list_hardware
from ..catalog.model import list_models
from ..physics.result import Result
from ..serving import ServeResult, serve
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from . import plots

WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4", "q8_0", "q4_k_m")
KV_DTYPES = ("bf16", "fp8")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MAX_CHIPS, MAX_TOKENS = 100_000, 10_000_000      # the chips and length controls' upper bounds
SETTINGS = ("n_chips", "weight_dtype", "kv_dtype", "batch", "prompt_tokens", "output_tokens")


class Explorer:
    """The widgets of `explore()`. Controls: `model`, `hardware`, `chips`, `weights`, `kv`, `batch`,
    `prompt`, `output`; outputs: `table` (HTML), `plot` (a PNG image), `error` (HTML, empty when
    the configuration runs) and `result` (the current `Result`, None on an error). `widget` is the
    whole box; an Explorer displays as it."""

    def __init__(self, model: str, hardware: str, *, n_chips: int = 0, weight_dtype: str = defaults.WEIGHT_DTYPE,
                 kv_dtype: str = "bf16", batch: int = defaults.BATCH, prompt_tokens: int = defaults.PROMPT_TOKENS,
                 output_tokens: int = defaults.OUTPUT_TOKENS):
        import ipywidgets as w   # ipywidgets: the notebook extra
        model, hardware = load_model(model).name, load_hardware(hardware).name   # names checked up front
        # within the controls' bounds: a bounded widget clamped an out-of-range value silently
        # (prompt_tokens=-5 ran as 0, n_chips=-1 as the fewest, 10**6 as 100,000)
        n_chips = check_int("n_chips", n_chips, 0, MAX_CHIPS)
        batch = check_int("batch", batch, 1)
        prompt_tokens = check_int("prompt_tokens", prompt_tokens, 0, MAX_TOKENS)
        output_tokens = check_int("output_tokens", output_tokens, 1, MAX_TOKENS)
        self.model = w.Dropdown(options=list_models(), value=model, description="model")
        self.hardware = w.Dropdown(options=list_hardware(), value=hardware, description="device")
        self.chips = w.BoundedIntText(value=n_chips, min=0, max=MAX_CHIPS, description="chips (0=auto)")
        self.weights = w.Dropdown(options=_with(WEIGHT_DTYPES, weight_dtype), value=weight_dtype, description="weights")
        self.kv = w.Dropdown(options=_with(KV_DTYPES, kv_dtype), value=kv_dtype, description="KV cache")
        self.mode = w.ToggleButtons(options=("batch", "concurrency"), value="batch", description="mode")
        self.batch = w.SelectionSlider(options=_with(BATCHES, batch, sort=True), value=batch,
                                       description="batch/clients")
        self.prompt = w.BoundedIntText(value=prompt_tokens, min=0, max=MAX_TOKENS, description="prompt")
        self.output = w.BoundedIntText(value=output_tokens, min=1, max=MAX_TOKENS, description="output")
        self.table = w.HTML()
        self.error = w.HTML()
        self.plot = w.Image(format="png")
        self.result: Result | None = None
        self.served: ServeResult | None = None
        controls = [self.model, self.hardware, self.chips, self.weights, self.kv, self.mode, self.batch, self.prompt,
                    self.output]
        for c in controls:
            c.observe(lambda _change: self.update(), names="value")
        self.widget = w.VBox([w.HBox([w.VBox(controls), w.VBox([self.error, self.table])]), self.plot])
        self.update()

    def update(self) -> None:
        """Recompute the table and the plot from the controls (called on every change)."""
        try:
            res = compare(self.model.value, [f"{self.hardware.value}:{self.chips.value}" if self.chips.value
                                             else self.hardware.value],
                          batch=self.batch.value, prompt_tokens=self.prompt.value, output_tokens=self.output.value,
                          weight_dtype=self.weights.value, kv_dtype=self.kv.value)
            if not res.results:
                raise MemboundError(res.dropped[0][1])
            r = res.results[0]
            self.served = None if self.mode.value == "batch" else serve(
                r.model, r.hardware, concurrency=r.batch, prompt_tokens=r.prompt_tokens,
                output_tokens=r.output_tokens, weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=r.n_chips)
        except MemboundError as err:
            self.result = self.served = None
            self.error.value = f"<p style='color:#b00'>{html.escape(str(err))}</p>"
            self.table.value = ""
            return
        self.result = r
        self.error.value = ""
        self.table.value = (self.served or self.result)._repr_html_()
        self.plot.value = self._png()

    def _png(self) -> bytes:
        from matplotlib.figure import Figure   # matplotlib: the plot extra
        r, s = self.result, self.served
        assert r is not None, "drawn only after a result was set"
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        if s is None:
            plots.interactivity(r.model, [r.hardware], BATCHES, context_tokens=r.prompt_tokens + r.output_tokens,
                                weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, n_chips=r.n_chips, ax=ax)
            ax.plot([r.decode_tok_s_per_user], [r.decode_tok_s_total / r.n_chips], "*", ms=14, color="k",
                    label=f"batch {r.batch} (here)")
        else:
            plots.served_curve(r.model, [(r.hardware, r.n_chips)], concurrency=BATCHES, prompt_tokens=r.prompt_tokens,
                               output_tokens=r.output_tokens, weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype,
                               ax=ax)
            ax.plot([s.tok_s_per_user], [s.output_tok_s_per_chip], "*", ms=14, color="k",
                    label=f"{r.batch} clients (here)")
        ax.legend(fontsize=8)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
        return buf.getvalue()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _with(options, value, sort=False):
    out = list(options) if value in options else [*options, value]
    return sorted(out) if sort else out


def explore(model: str = "llama-3.1-8b", hardware: str = "h100-sxm", **settings) -> Explorer:
    """An interactive explorer (see the module): `settings` are Explorer's starting values
    (n_chips, weight_dtype, kv_dtype, batch, prompt_tokens, output_tokens)."""
    try:
        import ipywidgets  # noqa: F401 - ipywidgets: the notebook extra
        import matplotlib  # noqa: F401 - matplotlib: the plot extra
    except ImportError as err:
        raise ImportError(f"explore() needs ipywidgets and matplotlib: pip install 'membound[notebook]' ({err})") \
            from None
    for name in settings:
        if name not in SETTINGS:           # was a TypeError from Explorer.__init__
            raise InvalidInputError("setting", name, f"one of explore()'s settings: {', '.join(SETTINGS)}")
    return Explorer(model, hardware, **settings)
