"""`compare()`: one model on several devices side by side, each on the fewest chips that hold it
(or a count fixed with "device:N"). The CLI's `membound compare` prints this table."""
from __future__ import annotations

import html
from dataclasses import dataclass

from ..base import defaults
from ..physics.capacity import layout_for
from ..errors import DoesNotFitError, InvalidInputError
from ..physics.estimate import check_int, estimate
from ..catalog.hardware import Hardware, load_hardware, one_name_each
from ..catalog.model import Model, load_model
from ..physics.result import Result
from ..base.display import sig3, seconds_text, NO_PRICE, grid, html_grid
from ..catalog.hardware import api_price_text

COLUMNS = ("device", "chips", "layout", "tok/s/user", "tok/s total", "TTFT", "bound", "GB/chip used/cap", "$/M tok")


def device_spec(spec: str | Hardware) -> tuple[str | Hardware, int | None]:
    """'h100-sxm:8' -> ('h100-sxm', 8); 'groq-lpu' -> ('groq-lpu', None); a Hardware -> (it, None)."""
    if isinstance(spec, Hardware):
        return spec, None
    if not isinstance(spec, str):
        raise InvalidInputError("devices", spec, "a device name, 'NAME:CHIPS' (e.g. 'h100-sxm:8') or a mb.Hardware")
    name, colon, n = spec.partition(":")
    if colon and not (n.isascii() and n.isdigit() and 1 <= int(n) <= 10**9):   # not "²", "", "0"
        raise InvalidInputError("devices", spec, "NAME or NAME:CHIPS with CHIPS an integer >= 1, e.g. h100-sxm:8")
    return name, int(n) if n else None


@dataclass(frozen=True)
class CompareResult:
    """One `Result` per device that holds the model (in the order asked), and the devices left out
    with the reason (`dropped`: (device, reason) pairs)."""

    model: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    weight_dtype: str
    results: tuple[Result, ...]
    dropped: tuple[tuple[str, str], ...] = ()

    @property
    def title(self) -> str:
        return (f"{self.model}: batch {self.batch}, prompt {self.prompt_tokens}, output {self.output_tokens}, "
                f"weights {self.weight_dtype}")

    def rows(self) -> list[list[str]]:
        """The table's cells as text (the columns are `COLUMNS`)."""
        out = []
        for r in self.results:
            m, cost = r.memory, r.cost_per_million_tokens_usd
            used = "" if m is None else f"{sig3(m.total_bytes / 1e9)}/{sig3(m.capacity_bytes / 1e9)}"
            out.append([r.hardware, str(r.n_chips), r.parallel.replace("=", "").replace(" ep1", ""),
                        f"{r.decode_tok_s_per_user:,.1f}", f"{r.decode_tok_s_total:,.1f}", seconds_text(r.ttft_s), r.bound,
                        used, "-" if cost is None else f"{cost:,.2f}"])
        return out

    def notes(self) -> list[str]:
        """Lines under the table: devices without a price (never a silent blank), the published
        per-token API price beside the physics' cost on chips sold as an API, devices left out."""
        out = [f"{r.hardware}: {NO_PRICE}" for r in self.results if r.cost_per_million_tokens_usd is None]
        out += [f"{r.hardware}: API price: {api}" for r in self.results if (api := api_price_text(r.hardware, r.model))]
        return out + [f"left out {d}: {why}" for d, why in self.dropped]

    def to_dict(self) -> dict:
        """{'model', workload fields, 'results': [Result.to_dict(), ...], 'dropped': [{device, reason}]}."""
        return {"model": self.model, "batch": self.batch, "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens, "weight_dtype": self.weight_dtype,
                "results": [r.to_dict() for r in self.results],
                "dropped": [{"device": d, "reason": why} for d, why in self.dropped]}

    def to_pandas(self):
        """One row per device with `Result.to_dict()`'s columns."""
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        return pd.DataFrame([r.to_dict() for r in self.results])

    def __str__(self) -> str:
        return "\n".join([self.title, grid(list(COLUMNS), self.rows()), *self.notes(), *self.calibrations()])

    def calibrations(self) -> list[str]:
        """The footer: each distinct provenance of the results' constants, once."""
        return [f"calibration: {c}" for c in dict.fromkeys(r.calibration for r in self.results) if c]

    def _repr_html_(self) -> str:
        notes = "".join(f"<p>{html.escape(line)}</p>" for line in self.notes()) \
            + "".join(f"<p>{html.escape(c)}</p>" for c in self.calibrations())
        return f"<p><b>{html.escape(self.title)}</b></p>" + html_grid(list(COLUMNS), self.rows()) + notes


def _prices(price_usd_per_hour):
    """compare's prices: None, one number, or {device name (any spelling): USD per chip-hour}."""
    if not isinstance(price_usd_per_hour, dict):
        return price_usd_per_hour        # None or a number (estimate checks it)
    return {load_hardware(k).name: v for k, v in price_usd_per_hour.items()}


def compare(model: str | Model, devices, *, batch: int = defaults.BATCH,
            prompt_tokens: int = defaults.PROMPT_TOKENS, output_tokens: int = defaults.OUTPUT_TOKENS,
            weight_dtype: str = defaults.WEIGHT_DTYPE, kv_dtype: str | None = None,
            activation_dtype: str | None = None, runtime=None, n_chips: int | str | None = None,
            allow_beyond_context: bool = False, speculative=None, price_usd_per_hour=None) -> CompareResult:
    """`estimate()` of `model` on each device of `devices` ("name", "name:CHIPS" or a Hardware).

    A device without a chip count gets `n_chips`, or else (None / "auto") estimate()'s own default:
    the fewest chips that hold this configuration (the weights, the batch's KV cache at prompt +
    output tokens, the prefill's activations; on a chip with memory tiers in the tiers a decode
    streams at speed), laid out as `layout_for` does, by estimate's one search, whose last
    evaluation is the device's result (no second evaluation of the count found). A device that
    cannot hold the model (or has no layout for the count asked) is left out with the reason in
    `dropped`; unknown names and bad values raise. `speculative` (a
    `SpeculativeDecoding`) drafts on every device; `price_usd_per_hour` is one price for every
    device or {device name: USD per chip-hour} (a device it does not name keeps its profile's).

        mb.compare("llama-3.1-70b", ["h100-sxm:8", "h200", "cerebras-wse-3"], weight_dtype="fp8")
    """
    m = load_model(model)
    specs = [devices] if isinstance(devices, (str, Hardware)) else list(devices)
    if not specs:
        raise InvalidInputError("devices", devices, "at least one device name")
    default_n = None if n_chips is None or n_chips == "auto" else check_int("n_chips", n_chips, 1)
    prices = _prices(price_usd_per_hour)
    results, dropped = [], []
    loaded = [(load_hardware(name), n) for name, n in map(device_spec, specs)]
    one_name_each([hw for hw, _ in loaded], "devices")
    for hw, n in loaded:
        n = n or default_n
        try:
            par = None if n is None else layout_for(m, hw, n)
        except InvalidInputError as err:     # a device without links, asked for several chips
            dropped.append((f"{hw.name}:{n}", str(err)))
            continue
        try:        # n None: estimate's own fewest count, whose search's last evaluation is the answer
            results.append(estimate(m, hw, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                    weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                    activation_dtype=activation_dtype, n_chips=n, parallel=par, runtime=runtime,
                                    allow_beyond_context=allow_beyond_context, speculative=speculative,
                                    price_usd_per_hour=prices.get(hw.name) if isinstance(prices, dict) else prices))
        except DoesNotFitError as err:
            dropped.append((hw.name if n is None else f"{hw.name}:{n}", str(err)))
    first = results[0] if results else None
    return CompareResult(model=m.name, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         weight_dtype=first.weight_dtype if first else weight_dtype,
                         results=tuple(results), dropped=tuple(dropped))
