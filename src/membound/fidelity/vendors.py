"""The fast chips' software generations as runtimes (Cerebras, Groq, SambaNova), and the report of
their vendor rows.

The physics is the papers' (membound.dataflow for a wafer's layers and collectives, the profiles'
links and memory tiers). What a vendor's software reached at a date beyond it is a runtime named
with that date, with ONE fitted constant, fitted on at least two rows named here and never
checked on them:

- cerebras-2024-08: `fabric_efficiency`, the share of the fabric's cycle-level schedule
  (dataflow.wafer_pass_s, each collective call paying the WSE-3's measured `call_cycles`, each
  column operation of a core's GEMV its simulated `column_op_cycles`) the August
  2024 launch software's kernels reached (Cerebras' October 2024 release says that first
  implementation "utilized only a fraction of its peak bandwidth, compute, and IO capacity" and
  rewrote its MatMul and reduce/broadcast kernels; Luczynski et al. measured Reduce/AllReduce up to
  3.27x faster than the vendor's own in 2024; docs/fast-chips.md);
- groq-2024: `hop_latency_s`, the chip-to-chip latency per hop with the software's
  synchronisation (the network's own hop: the profile's 722 ns, ISCA 2022); tensor-parallel all-reduces and stage
  boundaries pay it. It is bounded below by that 722 ns (no software hops faster than its network); since the
  LM head and embedding became stages of their own (`parallel.head_parts`) the physics alone is slower than
  both fitted rows and the fit sits on that bound: the runtime is the physics, and the rows' shortfall
  (13-18%) is physics not yet priced;
- sambanova-2024: `hop_latency_s`, the socket-to-socket hop with the 2024 software's
  synchronisation, which the 16-way tensor-parallel all-reduces pay (two hops each, twice a layer):
  the profile's 2 us hop has no source, and it and the layer-boundary synchronisation that SambaNova's
  kernel looping later removed ("they too leave performance on the table due to synchronization
  penalties at layer boundaries"; kernel looping "speeds up the decode phase ... by up to 2.2x on
  SN40L", Koeplinger et al., arXiv:2410.23668, Oct 2024, abstract) are what two rows of one
  architecture cannot tell apart. With the weights streamed from HBM every token (the profile: the
  on-chip SRAM holds a kernel's buffers) at 90% of peak (kernel looping's abstract), the hop fits at
  about the assumed 2 us and the runtime carries ~5% of the step.

A row no fit used counts as independent only when no fitted row has the same model architecture
and chip count (`independent`); the report keeps the three kinds apart. A runtime is a device's
default only when an independent row confirms it (within `CONFIRM`); elsewhere the device's
default is its physics alone. Where a row's chip count is undisclosed the report gives the range
of counts whose prediction lands within `CONFIRM` of the figure (`chip_range`), rather than
setting the row aside on an assumed layout.

`python -m membound.fidelity.calibrate` refits them (calibrate.calibrate_specialised calls `fit`);
`python -m membound.fidelity.vendors` prints the report.
"""
from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import dataclass, replace
from .reference import ROW_RUNTIME
from ..catalog.runtime import Runtime, RuntimeEntry
from .fitter import Param, fit as least_squares
from .reference import NODE, predict, load_reference, special_layout
from ..catalog.model import load_model
from ..catalog.hardware import load_hardware
from ..catalog.dtypes import get_dtype
from ..errors import DoesNotFitError, MemboundError
from ..physics.capacity import min_chips
from ..physics.estimate import estimate
from ..physics.parallel import Parallel, layout_for, streamed_room, units
from ..physics.speculative import SpeculativeDecoding

# what each runtime's one constant is, in the runtime file (the module docstring gives the sources)
MEANING = {
    "cerebras-2024-08": "the share of the wafer's cycle-level schedule (membound.dataflow, measured call "
                        "costs and simulated column-operation costs included) the Aug 2024 launch kernels "
                        "reached",
    "groq-2024": "the chip-to-chip hop with the 2024 software's synchronisation (the network's own hop: the "
                 "profile's 722 ns, ISCA 2022)",
    "sambanova-2024": "the socket-to-socket hop with the 2024 software's synchronisation (the profile's 2 us "
                      "hop is assumed; the layer-boundary penalty kernel looping later removed, "
                      "arXiv:2410.23668, is inside it)",
}
# runtime -> (device, rows it is fitted on, the one fitted field, date of the software, bounds)
FITS = {
    "cerebras-2024-08": ("cerebras-wse-3", ("hw-014", "hw-015"), "fabric_efficiency", "2024-08", (1e-3, 1.0)),
    "groq-2024": ("groq-lpu", ("hw-018", "hw-019"), "hop_latency_s", "2024-02", (7.22e-7, 1e-3)),
    "sambanova-2024": ("sambanova-sn40l", ("hw-025", "hw-009"), "hop_latency_s", "2024-05", (1e-8, 1e-3)),
}
# rows that state a lower bound ("more than 100", "exceeding 250", "over 4500"): met when predicted >= it
LOWER_BOUNDS = {"hw-021", "hw-023", "hw-024"}
CONFIRM = 0.25      # a prediction within 25% of a figure confirms it (issue 28's bar for independent rows)

# The models a vendor documents serving with speculative decoding on its chip, by device and the
# model's architecture (`architecture`): its figures come from a draft proposing tokens the target
# checks, several a pass. The draft, its length and its acceptance are not published, so nothing is
# predicted from it: the prediction stays the target's physics and the report says what the figure
# needs (`VendorRow.why`, `_figures`). A model the list names with no optimisation (SambaNova's
# Llama 3.1 8B, the rows sambanova-2024 is fitted on) is not here.
_SAMBASTACK = ("SambaStack's model list, docs.sambanova.ai/docs/en/models/sambastack-models: "
               "'Optimizations: Speculative decoding'")
SPECULATIVE_DEPLOYMENTS = {
    ("sambanova-sn40l", "llama-3.3-70b"): _SAMBASTACK,
    ("sambanova-sn40l", "llama-3.1-405b"): _SAMBASTACK,
}


def speculative_deployment(hardware: str, model) -> str:
    """The source saying the vendor serves `model`'s architecture on `hardware` with speculative
    decoding (`SPECULATIVE_DEPLOYMENTS`), or ""."""
    arch = architecture(model)
    return next((src for (dev, m), src in SPECULATIVE_DEPLOYMENTS.items()
                 if dev == hardware and architecture(m) == arch), "")


# A vendor's own word on the format its compiler stores a MoE layer's routed-expert weights in, by
# device. Groq: "Our compiler applies precision strategically: ... Block Floating Point for
# Mixture-of-experts (MoE) weights where robustness studies show no measurable degradation" (Andrew Ling,
# "Inside the LPU: Deconstructing Groq's Speed", groq.com/blog/inside-the-lpu-deconstructing-groq-speed,
# 2025-08-01, written for Kimi K2 on GroqCloud). The width is not stated, so nothing is predicted from
# it: under a result for a model with routed experts, the notes and the report print the same call with
# the experts in BLOCK_FORMAT and every other tensor as the call has it, on the count the call's own
# rule picks (`block_experts`; issue 28, protocol in docs/fast-chips.md, helper fast23). An 8-bit block
# format is the call's own 8 bits to within 3% of the bytes, so it is not printed apart.
MOE_WEIGHT_FORMATS = {
    "groq-lpu": "Groq's compiler stores MoE weights in block floating point, width not stated "
                "(groq.com/blog/inside-the-lpu-deconstructing-groq-speed, 2025-08-01)",
}
BLOCK_FORMAT = "mxfp4"   # OCP MX fp4: 32 elements share an 8-bit scale, 4.25 bits (catalog.dtypes)


def block_experts(model, hardware: str, expert_dtype: str, run) -> tuple[int, float] | None:
    """On a device whose vendor states a block floating-point format for MoE weights
    (`MOE_WEIGHT_FORMATS`), for a model with routed experts stored wider than BLOCK_FORMAT: (chips,
    tok/s per user) of `run(weight_dtype=BLOCK_FORMAT, n_chips=None)`, the same call with the routed
    experts in BLOCK_FORMAT on the fewest chips that hold it (`run` keeps every other tensor's format:
    the caller passes its dense_weight_dtype); None elsewhere, or where it does not run."""
    if hardware not in MOE_WEIGHT_FORMATS or not load_model(model).n_experts:
        return None
    if get_dtype(expert_dtype).bits <= get_dtype(BLOCK_FORMAT).bits:
        return None
    try:
        x = run(weight_dtype=BLOCK_FORMAT, n_chips=None)
    except MemboundError:
        return None
    return x.n_chips, x.decode_tok_s_per_user


def _block_text(hardware: str, dense: str, chips: int, speed: float) -> str:
    return (f"{MOE_WEIGHT_FORMATS[hardware]}: with the routed experts in {BLOCK_FORMAT} ({get_dtype(BLOCK_FORMAT).bits:g} "
            f"bits), the rest {dense}: {chips} chips, {speed:,.0f} tok/s")


def _how_faster(speculative: str) -> str:
    """What lets a figure outrun the physics: the vendor's documented speculative deployment
    (`speculative_deployment`'s source), else the two readings that could."""
    return (f": served with speculative decoding, draft and acceptance not published ({speculative})"
            if speculative else " (speculative decoding, or fewer bits a weight)")


def fitted_rows() -> set:
    return {i for _, ids, *_ in FITS.values() for i in ids}


def _runtime(name: str, value: float):
    dev, _, field, _, _ = FITS[name]
    return Runtime(name=name, classes={dev: RuntimeEntry(**{field: value})})


def fit(scenarios) -> dict:
    """{runtime: ({field: value}, row ids, median |error| on them)}: the one constant of each vendor
    runtime, least squares on log(predicted / measured) over its named rows (membound.fitter, in
    log space within the FITS bounds)."""
    out = {}
    for name, (_dev, ids, field, _, (lo, hi)) in FITS.items():
        rows = [s for s in scenarios if s.id in ids]
        if not rows:
            continue

        def log_errors(p, rows=rows, name=name, field=field):
            rt = _runtime(name, p[field])
            return [math.log(predict(s, runtime=rt) / s.measured) for s in rows]

        lo = max(lo, 1e-9 * hi)         # a log-scaled constant needs lo > 0 (a bound of 0)
        report = least_squares(log_errors, [Param(field, lo, hi, math.sqrt(lo * hi), log=True)],
                               rows=[s.id for s in rows])
        x = report.params[field]
        rt = _runtime(name, x)
        err = statistics.median(abs(predict(s, runtime=rt) / s.measured - 1) for s in rows)
        out[name] = ({field: float(f"{x:.4g}")}, list(ids), err)
    return out


def runtime_yaml(name: str, value: float, ids, err: float, path=None) -> str:
    """The text of a vendor runtime file (one fitted constant, its rows and date); the device's
    default only where an independent row confirms it (`confirming_rows`)."""
    dev, _, field, date, bounds = FITS[name]
    vendor = name.split("-")[0].capitalize()
    today = datetime.date.today().isoformat()
    confirmed = confirming_rows(name, value, path)
    default = ([f"default_for: [{dev}]   # confirmed by independent rows {', '.join(confirmed)} "
                f"(within {100 * CONFIRM:.0f}%): estimate() uses it when no runtime is named"] if confirmed else
               [f"# not a default: no independent row confirms it (membound.vendors.confirming_rows); "
                f"{dev}'s default is its physics alone"])
    return "\n".join([
        f"name: {name}",
        f"description: {vendor}'s own serving software as of {date} on {dev}; one fitted constant, "
        f"the rest is the profile's physics",
        f'provenance: "{vendor} software of {date}: {field} fitted on {len(ids)} published rows '
        f'({", ".join(ids)}); the rest is the {dev} profile\'s physics"',
        *default,
        f"# {field}: {MEANING[name]}",
        "classes:",
        f"  {dev}:",
        f"    {field}: {value:.4g}",
        f"    evidence: fitted by membound.calibrate on {today} from {', '.join(ids)} (published tok/s); "
        f"median |error| on them {100 * err:.1f}%; never checked on them (vendors.vendor_report)"
        + (f"; ON ITS LOWER BOUND ({bounds[0]:g}), the physics alone being slower than these rows (missing physics)"
           if value <= 1.01 * bounds[0] else ""),
        f"calibration: '{today}: least squares on log(predicted/measured) over the named rows only "
        f"(membound.vendors.FITS); every other {vendor} row is held out. Rerun: python -m membound.fidelity.calibrate'",
        "",
    ])


def architecture(model: str) -> tuple:
    """What makes two presets the same network for a speed figure: their shapes (not names,
    context limits or rope settings: Llama 3 8B and Llama 3.1 8B are one architecture)."""
    m = load_model(model)
    return (m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads, m.head_dim, m.ffn_size, m.vocab_size,
            m.n_experts, m.experts_per_token, m.expert_ffn_size)


def independent(sc, fitted_scenarios) -> bool:
    """Whether row `sc` tests a fit: no fitted row has its model architecture and chip count."""
    key = (architecture(sc.model), sc.n_chips)
    return all((architecture(f.model), f.n_chips) != key for f in fitted_scenarios)


def _scenarios(path=None) -> list:
    return [s for s in load_reference(path, only=ROW_RUNTIME).scenarios
            if s.id in ROW_RUNTIME and s.metric == "decode_tok_s_per_user"]


def confirming_rows(name: str, value: float, path=None) -> list[str]:
    """The independent rows of runtime `name` that no fit used and that its constant at `value`
    predicts within CONFIRM (a stated lower bound: met)."""
    scs = _scenarios(path)
    fitted = [s for s in scs if s.id in fitted_rows()]
    rt = _runtime(name, value)
    out = []
    for s in scs:
        if ROW_RUNTIME[s.id] != name or s.id in fitted_rows() or not independent(s, fitted):
            continue
        e = predict(s, runtime=rt) / s.measured - 1.0
        if (e >= -CONFIRM if s.id in LOWER_BOUNDS else abs(e) <= CONFIRM):
            out.append(s.id)
    return out


def _counts(sc, tries: int = 48) -> list[tuple[int, tuple[int, int, int]]]:
    """The chip counts a row allows, with their layouts: the stated one, else from the fewest that
    hold the model (by the layout rule; on a tiered chip, in the tiers a decode streams at speed,
    below the row's assumed count where fewer do) up to `tries` steps of an eighth of it beyond."""
    if sc.chips_stated:
        return [(sc.n_chips, sc.parallel)]
    hw = load_hardware(sc.hardware)
    n0 = sc.n_chips
    if streamed_room(hw) is not None:
        n0 = min(n0, min_chips(sc.model, hw, context_tokens=sc.prompt_tokens + sc.output_tokens,
                               weight_dtype=sc.weight_dtype, at_speed=True))
    step = max(1, n0 // 8)
    out = []
    for n in range(n0, n0 + tries * step + 1, step):
        if hw.interconnect is not None and n > hw.interconnect.max_chips:
            break
        out.append(special_layout(sc.model, hw, sc.weight_dtype, n, context=sc.prompt_tokens + sc.output_tokens))
    return out


def chip_range(sc, tries: int = 48) -> tuple[int, int] | None:
    """The smallest and largest chip counts (`_counts`) whose prediction lands within CONFIRM of
    `sc`'s figure (a lower bound: at or above it); None where no count does."""
    hits = []
    for chips, par in _counts(sc, tries):
        e = predict(replace(sc, n_chips=chips, parallel=par)) / sc.measured - 1.0
        if (e >= -CONFIRM if sc.id in LOWER_BOUNDS else abs(e) <= CONFIRM):
            hits.append(chips)
    return (min(hits), max(hits)) if hits else None


def physics_ceiling(sc, tries: int = 48) -> float:
    """The fastest the physics alone (the device's own figures, no runtime constant) runs `sc` on
    any chip count it allows (`_counts`): a figure above it is faster than the physics."""
    return max(predict(replace(sc, n_chips=chips, parallel=par), runtime="device") for chips, par in _counts(sc, tries))


@dataclass(frozen=True)
class VendorRow:
    id: str
    model: str
    hardware: str
    runtime: str
    n_chips: int
    measured: float
    predicted: float
    physics: float          # the prediction with the physics alone (the device's own figures)
    fitted: bool
    independent: bool       # no fitted row has this architecture and chip count
    lower_bound: bool
    chips_stated: bool
    chips: tuple[int, int] | None = None   # undisclosed count: the range that gives the figure
    ceiling: float = math.inf   # the physics' fastest over the counts the row allows (`physics_ceiling`)
    speculative: str = ""       # the source saying the vendor serves it speculatively (`speculative_deployment`)
    readings: tuple[tuple[str, float], ...] = ()   # format not stated: (other format, its prediction) (`_readings`)
    users: int | None = None    # undisclosed count on a pipeline: requests whose KV it holds (`_users`)
    block: tuple[int, float] | None = None   # undisclosed count: routed experts in BLOCK_FORMAT (`_block_reading`)
    dense: str = ""             # the format of the tensors that are not routed experts

    @property
    def said(self) -> str:
        """What the report prints beside the row: `why`, the other reading of a format the source does
        not state, and the requests an undisclosed pipeline count holds the KV of."""
        parts = [self.why] if self.why else []
        parts += [f"format not stated: in {wd} {x:,.0f} tok/s ({100 * (x / self.measured - 1):+.0f}%)"
                  for wd, x in self.readings]
        if self.users is not None:
            parts.append(f"{self.n_chips} chips hold the KV of up to {self.users} request{'s' if self.users > 1 else ''} "
                         "of its length (the users a deployment served are not published)")
        if self.block is not None:
            n, x = self.block
            parts.append(_block_text(self.hardware, self.dense, n, x) + f" ({100 * (x / self.measured - 1):+.0f}%)")
        return "; ".join(parts)

    @property
    def why(self) -> str:
        """The physics' own numbers behind a miss beyond CONFIRM (25%) where the figure beats it: the
        fastest the physics runs the row, and how many tokens each pass over the weights would have to
        yield to reach the figure (figure / that speed: more than 1 needs speculative decoding, or fewer
        bytes per weight than the row states)."""
        if abs(self.error) <= CONFIRM or self.measured <= self.ceiling:
            return ""
        where = f"at its stated {self.n_chips} chips" if self.chips_stated else "on every chip count tried"
        why = _how_faster(self.speculative)
        return (f"faster than the physics {where}: at most {self.ceiling:,.0f} tok/s; the figure needs "
                f"{self.measured / self.ceiling:.1f} tokens a pass over the weights{why}")

    @property
    def error(self) -> float:
        """predicted / measured - 1 (a stated lower bound the prediction meets: 0)."""
        e = self.predicted / self.measured - 1.0
        return 0.0 if (self.lower_bound and e >= 0) else e

    @property
    def runtime_share(self) -> float:
        """The share of the predicted step the runtime's constant adds beyond the physics:
        1 - (physics' step / predicted step) = 1 - predicted tok/s / physics tok/s."""
        return 1.0 - self.predicted / self.physics

    @property
    def kind(self) -> str:
        return "fitted" if self.fitted else ("independent" if self.independent else "same as a fitted row")


def _readings(sc) -> tuple[tuple[str, float], ...]:
    """A row whose source does not state its weight format, on a chip with memory tiers (where the
    format decides what spills to the capacity tier on the same sockets): the prediction in the
    8-bit format the chip computes in (fp8 where it lists none), at the row's count and runtime.
    The row itself keeps the reference rule's reading (not stated: bf16); this one is reported,
    not chosen."""
    hw = load_hardware(sc.hardware)
    if sc.weights_stated or streamed_room(hw) is None or get_dtype(sc.weight_dtype).bits <= 8:
        return ()
    out = []
    for wd in [k for k in ("int8", "fp8") if k in hw.compute_flops] or ["fp8"]:
        try:
            out.append((wd, predict(replace(sc, weight_dtype=wd))))
        except MemboundError:
            continue
    return tuple(out)


def _users(sc, top: int = 4096) -> int | None:
    """On a pipeline of whole layers (`Interconnect.layout` "pipeline") at an undisclosed count: the
    most requests of the row's prompt + output whose KV the row's chips hold beside the weights
    (bisection on `estimate`'s memory check, batch 1 to `top`); None elsewhere."""
    hw = load_hardware(sc.hardware)
    if sc.chips_stated or hw.interconnect is None or hw.interconnect.layout != "pipeline":
        return None

    layout = Parallel(*sc.parallel)

    def fits(b: int) -> bool:
        mem = estimate(sc.model, hw, n_chips=sc.n_chips, parallel=layout, weight_dtype=sc.weight_dtype,
                       kv_dtype=sc.kv_dtype, batch=b, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                       check_memory=False).memory
        return mem is not None and mem.fits
    if not fits(1):
        return None
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _block_reading(sc) -> tuple[int, float] | None:
    """`block_experts` for a vendor row whose chip count is undisclosed (at a stated count the format
    moves no byte a matrix unit takes in, only the count): the row's call, its other tensors in their
    own format, the experts in BLOCK_FORMAT, on the fewest chips that hold it (its own request's KV
    beside the weights, as the row's own count is found)."""
    if sc.chips_stated:
        return None

    def run(**kw):
        return estimate(sc.model, sc.hardware, kv_dtype=sc.kv_dtype, batch=int(sc.batch), prompt_tokens=sc.prompt_tokens,
                        output_tokens=sc.output_tokens, runtime=sc.runtime,
                        dense_weight_dtype=sc.dense_dtype or sc.weight_dtype, **kw)
    return block_experts(sc.model, sc.hardware, sc.weight_dtype, run)


def _median(xs) -> float:
    return statistics.median(xs) if xs else math.nan


def vendor_report(path=None) -> tuple[list[VendorRow], float, float]:
    """Every vendor row predicted with its generation's runtime: (rows, median |error| of the
    independent rows, median |error| of the fitted rows). Rows no fit used that repeat a fitted
    row's architecture and chip count are in `rows` (kind "same as a fitted row") and in neither
    median; so are stated lower bounds (met or not, said per row)."""
    scs = _scenarios(path)
    fitted_ids = fitted_rows()
    fitted = [s for s in scs if s.id in fitted_ids]
    rows = []
    for s in scs:
        alone = s.id not in fitted_ids and independent(s, fitted)
        rows.append(VendorRow(s.id, s.model, s.hardware, s.runtime, s.n_chips, s.measured, predict(s),
                              predict(s, runtime="device"), s.id in fitted_ids, alone, s.id in LOWER_BOUNDS,
                              s.chips_stated, None if s.chips_stated else chip_range(s), physics_ceiling(s),
                              speculative_deployment(s.hardware, s.model), _readings(s), _users(s),
                              _block_reading(s), s.dense_dtype or s.weight_dtype))
    ind = [abs(r.error) for r in rows if r.independent and not r.lower_bound]
    fit_ = [abs(r.error) for r in rows if r.fitted]
    return rows, _median(ind), _median(fit_)


def format_report(path=None) -> str:
    rows, ind, fitted = vendor_report(path)
    out = [f"{'id':8s} {'model':15s} {'runtime':17s} {'chips':>7s} {'measured':>9s} {'predicted':>9s} {'error':>7s} "
           f"{'physics':>8s} {'runtime share':>13s}  set; chip counts within {100 * CONFIRM:.0f}% (undisclosed)"]
    order = {"independent": 0, "same as a fitted row": 1, "fitted": 2}
    for r in sorted(rows, key=lambda r: (order[r.kind], r.id)):
        chips = f"{r.n_chips}" + ("" if r.chips_stated else "?")
        rng = "" if r.chips_stated else ("; none" if r.chips is None else f"; {r.chips[0]}-{r.chips[1]}")
        out.append(f"{r.id:8s} {r.model:15s} {r.runtime:17s} {chips:>7s} {r.measured:9.0f} {r.predicted:9.0f} "
                   f"{100 * r.error:+6.0f}% {r.physics:8.0f} {100 * r.runtime_share:12.0f}%  {r.kind}"
                   + (" (lower bound)" if r.lower_bound else "") + rng + (f"; {r.said}" if r.said else ""))
    n_ind = sum(r.independent and not r.lower_bound for r in rows)
    out.append(f"median |error|: independent rows {100 * ind:.0f}% (n={n_ind}); fitted rows {100 * fitted:.0f}% "
               f"(n={sum(r.fitted for r in rows)}); rows repeating a fitted scenario and lower bounds apart. "
               "'?': chip count not disclosed (shown: the vendor's deployment unit where documented, "
               "reference.NODE, else the fewest that hold its weights and its own request's KV, as estimate "
               "picks); runtime share: "
               "1 - physics step / predicted step")
    return "\n".join(out)


# ---- what decides a fast chip's figure, printed under estimate's result ----------------------

def _published(r) -> list:
    """The vendor rows of `r`'s device whose model has `r`'s architecture (decode speed per user)."""
    arch = architecture(r.model)
    return [s for s in _scenarios() if s.hardware == r.hardware and architecture(s.model) == arch]


def _top(r) -> int:
    """The most chips `_reaching` tries for `r`: 8x its count, or the interconnect's domain where larger."""
    link = load_hardware(r.hardware).interconnect
    return max(8 * r.n_chips, link.max_chips if link is not None else 1)


def _reaching(r, again, figure: float, tries: int = 24) -> tuple[int | None, tuple[int, float] | None]:
    """The fewest chips above `r`'s count, up to `_top` (at most `tries` counts, evenly spaced among
    those the layout rule uses whole), whose prediction under `r`'s runtime reaches `figure` (None
    where none does), and the fastest of the counts tried, (chips, tok/s) (None where none ran)."""
    hw = load_hardware(r.hardware)
    if hw.interconnect is None:
        return None, None
    m = load_model(r.model)
    whole = sorted({layout_for(m, hw, n).chips for n in range(r.n_chips + 1, _top(r) + 1)} - {r.n_chips})
    best: tuple[int, float] | None = None
    for n in whole[::max(1, -(-len(whole) // tries))]:
        try:
            speed = again(n_chips=n).decode_tok_s_per_user
        except MemboundError:
            continue
        if speed >= figure:
            return n, (n, speed)
        best = (n, speed) if best is None or speed > best[1] else best
    return None, best


def _spill(r, again) -> list[str]:
    """On a chip with memory tiers: the bytes in its slowest tier, and the count that streams it all
    from the faster tiers (`min_chips(..., at_speed=True)`)."""
    hw = load_hardware(r.hardware)
    if streamed_room(hw) is None or r.memory is None:
        return []
    slowest = min(hw.memory, key=lambda t: t.bandwidth_bytes_s)
    use = {u.tier: u for u in r.memory.placement}.get(slowest.name)
    spilled = 0.0 if use is None else use.weights_bytes + use.kv_bytes
    if spilled <= 0:
        return []
    out = [f"{spilled / 1e9:,.1f} GB a chip sit in {slowest.name}, the capacity tier "
           f"({slowest.bandwidth_bytes_s / 1e9:,.0f} GB/s): they set the step"]
    try:
        n = min_chips(r.model, hw, batch=r.batch, context_tokens=r.prompt_tokens + r.output_tokens,
                      weight_dtype=r.weight_dtype, at_speed=True)
    except MemboundError:
        return out
    if n > r.n_chips:
        out.append(f"{n} chips hold it in the faster tiers: {again(n_chips=n).decode_tok_s_per_user:,.0f} tok/s "
                   f"(--chips {n})")
    return out


def _narrower(r, again, spilled: bool) -> list[str]:
    """The same call in 8-bit weights on the fewest chips that hold them (a chip whose SRAM sets the
    count needs fewer, and each streams fewer bytes): the formats the chip computes in, or fp8 storage
    where the weights spill to a capacity tier."""
    hw = load_hardware(r.hardware)
    formats = [k for k in ("int8", "fp8") if k in hw.compute_flops] or (["fp8"] if spilled else [])
    out = []
    for wd in formats:
        if get_dtype(wd).bits >= get_dtype(r.weight_dtype).bits:
            continue
        try:
            x = again(weight_dtype=wd, n_chips=None)
        except MemboundError:
            continue
        out.append(f"in {wd} weights: {x.n_chips} chips, {x.decode_tok_s_per_user:,.0f} tok/s (--weights {wd})")
    return out


def _runtimes(r, again) -> list[str]:
    """The vendor's software generations on this chip, each predicting the same call; or, where the
    call ran one, the physics alone and the constant's share of the step."""
    out = []
    for name, (dev, ids, field, date, _) in FITS.items():
        if dev != r.hardware or name == r.runtime:
            continue
        x = again(runtime=name).decode_tok_s_per_user
        out.append(f"{name} ({dev.split('-')[0].capitalize()} software of {date}, {field} fitted on "
                   f"{', '.join(ids)}): {x:,.0f} tok/s here")
    if r.runtime in FITS:
        phys = again(runtime="device").decode_tok_s_per_user
        out.append(f"the physics alone (runtime device): {phys:,.0f} tok/s; {r.runtime}'s constant is "
                   f"{100 * (1 - r.decode_tok_s_per_user / phys):.0f}% of the step")
    return out


def _figures(r, again) -> list[str]:
    """The published figures of this architecture on this chip, against the same call without
    speculative decoding (the rows state none), with what the prediction needs to reach them."""
    rows = _published(r)
    if not rows:
        return []
    plain = r if r.speculative is None else again(speculative=None)
    speed, out = plain.decode_tok_s_per_user, []
    for s in rows:
        chips = f"on {s.n_chips}" if s.chips_stated else "chips not stated"
        fitted = ", a fitted row" if s.id in fitted_rows() else ""
        text = (f"published {'at least ' if s.id in LOWER_BOUNDS else ''}{s.measured:,.0f} tok/s ({s.id}{fitted}; "
                f"{chips}; predicted there with {s.runtime}): this call"
                f"{' without speculative decoding' if r.speculative is not None else ''} gives "
                f"{speed / s.measured:.2f}x")
        if s.measured > speed * (1.0 + CONFIRM) and r.batch == 1:
            served = speculative_deployment(s.hardware, s.model)
            text += (f"; on {r.n_chips} chip{'s' if r.n_chips > 1 else ''} the figure needs "
                     f"{s.measured / speed:.1f} tokens a pass over the weights"
                     + _how_faster(served))
            if not s.chips_stated:
                n, best = _reaching(plain, again, s.measured)
                if n is not None:
                    text += f", or {n} chips"
                else:
                    text += f", and no count up to {_top(r):,} reaches it" + (
                        "" if best is None else
                        f" (the fastest tried: {best[0]:,} chips, {best[1]:,.0f} tok/s, {best[1] / s.measured:.2f}x)")
        out.append(text)
    return out


def _deployment(r, again) -> list[str]:
    """Where the vendor documents the unit it deploys a model on (`reference.NODE`: a SambaRack node
    of 16 SN40L sockets) and the call runs on fewer chips: the same call on that unit. The call's
    count is the fewest that hold the model (issue 28: as for GPUs); the vendor's figures come from
    its unit, so this is what a published figure is measured on."""
    if r.hardware not in NODE or r.n_chips >= NODE[r.hardware][0]:
        return []
    n, why = NODE[r.hardware]
    try:
        x = again(n_chips=n)
    except MemboundError:
        return []
    return [f"on {why} ({n} chips; the published figures' unit): {x.decode_tok_s_per_user:,.0f} tok/s (--chips {n})"]


def _drafting(spec, again) -> list[str]:
    """A speculative call (`spec`, its SpeculativeDecoding) at a per-token acceptance: the fastest its
    draft and gamma give, every drafted token accepted (gamma + 1 tokens a pass); the acceptance the
    call names is the user's assumption (no vendor publishes one), so a figure above this is beyond
    this drafting."""
    if not isinstance(spec, SpeculativeDecoding) or spec.acceptance_rate is None or spec.acceptance_rate >= 1.0:
        return []
    try:
        x = again(speculative=replace(spec, acceptance_rate=1.0))
    except MemboundError:
        return []
    return [f"speculative: acceptance {spec.acceptance_rate:g} is assumed; with every drafted token accepted "
            f"this drafting (gamma {spec.gamma}: {spec.gamma + 1} tokens a pass) gives at most "
            f"{x.decode_tok_s_per_user:,.0f} tok/s"]


def _scaled(hw, path: str, k: float):
    """`hw` with the figure at dotted `path` (a memory tier by its name) times `k` (an integer stays one)."""
    head, *rest = path.split(".")
    data = hw.model_dump()
    node = data
    for part in [head, *rest[:-1]]:
        node = next(t for t in node if t["name"] == part) if isinstance(node, (list, tuple)) else node[part]
    key = rest[-1] if rest else head
    if not rest:
        node = data
    node[key] = max(1, round(node[key] * k)) if isinstance(node[key], int) else node[key] * k
    return hw.with_overrides(**{head: data[head]})


MOVES = 0.05   # an assumed figure that moves a prediction by more than this, halved or doubled, decides it


def _assumed(r, again) -> list[str]:
    """Each figure of the profile with no source (`Hardware.assumed`) that decides `r`: halved or
    doubled, it moves the prediction by more than MOVES, or the model no longer fits."""
    hw = load_hardware(r.hardware)
    out = []
    for path in hw.assumed:
        if r.n_chips == 1 and path.startswith(("interconnect.", "scale_out.")):
            continue
        speeds: list[float | None] = []
        for k in (0.5, 2.0):
            try:
                speeds.append(again(hardware=_scaled(hw, path, k)).decode_tok_s_per_user)
            except DoesNotFitError:
                speeds.append(None)
        if all(v is not None and abs(v / r.decode_tok_s_per_user - 1.0) <= MOVES for v in speeds):
            continue
        said = [f"does not fit on {r.n_chips}" if v is None else f"{v:,.0f} tok/s" for v in speeds]
        out.append(f"assumed {path} = {hw._figure(path):g} (no source) decides it: halved {said[0]}, doubled {said[1]}")
    return out


def _layer_home(r, again) -> list[str]:
    """On a chip whose layout is a pipeline of whole layers (`Interconnect.layout`): no source says
    where a layer's KV cache sits; membound keeps it with the layer (the LM head and embedding are
    stages of their own: `parallel.head_parts`), which can take more chips a layer than its weights
    alone. Where it does, the same call with each layer's weights alone on the fewest chips that hold
    them (a divisor of the heads), the caches on chips of their own (capacity not checked, their hops
    not priced)."""
    hw, m = load_hardware(r.hardware), load_model(r.model)
    link = hw.interconnect
    if link is None or link.layout != "pipeline" or r.memory is None:
        return []
    head = m.vocab_size * m.hidden_size * (1 if m.tied_embeddings else 2)
    layer_bytes = (m.total_params - head) / m.n_layers * get_dtype(r.weight_dtype).bits / 8
    tp = next((t for t in range(1, m.n_heads + 1) if m.n_heads % t == 0 and layer_bytes / t <= hw.capacity_bytes),
              m.n_heads)
    now, stages = layout_for(m, hw, r.n_chips), units(m, hw)
    if tp >= now.tp or now.pp < stages:
        return []
    try:
        x = again(n_chips=None, parallel={"tp": tp, "pp": stages}, check_memory=False)
    except MemboundError:
        return []
    return [f"assumed: a layer's KV cache sits with it (no source); on chips of their own, a layer's "
            f"{layer_bytes / 1e6:,.0f} MB of weights take {tp} chip{'s' if tp > 1 else ''}, not {now.tp}: "
            f"{x.decode_tok_s_per_user:,.0f} tok/s (tp {tp} x {stages} stages, plus the caches' chips; their hops "
            "not priced)"]


def _moe_schedule(r, again) -> list[str]:
    """On a chip that runs a MoE layer dense (`Hardware.moe_schedule` "every_expert": a compiled
    program with no data-dependent control flow streams every expert), for a model with routed
    experts: that reading rests on one step of interpretation (the profile's `moe_source`), so the
    same call with each token's k experts gathered instead."""
    hw, m = load_hardware(r.hardware), load_model(r.model)
    if hw.moe_schedule != "every_expert" or not m.n_experts:
        return []
    x = again(hardware=hw.model_copy(update={"moe_schedule": "routed"}))
    return [f"interpreted: a MoE layer runs dense here, all {m.n_experts} experts streamed each token (no "
            f"data-dependent control flow in a compiled program; the profile's moe_source); with each token's "
            f"{m.experts_per_token} gathered instead: {x.decode_tok_s_per_user:,.0f} tok/s"]


def _block_note(r, again, dense) -> list[str]:
    """`block_experts` under `membound estimate`'s result: the same call with the routed experts in
    BLOCK_FORMAT (`dense`: the call's dense_weight_dtype; None: its weight format, kept for the rest)."""
    rest = dense or r.weight_dtype
    got = block_experts(r.model, r.hardware, r.weight_dtype,
                        lambda **kw: again(dense_weight_dtype=rest, **kw))
    if got is None:
        return []
    return [_block_text(r.hardware, rest, *got) + f" (--weights {BLOCK_FORMAT} --dense-weights {rest})"]


def notes(r, again, spec=None, dense=None) -> list[str]:
    """What decides `r`, a prediction on a chip a vendor runtime here models (Cerebras, Groq,
    SambaNova), printed under `membound estimate`'s result: the vendor's deployment unit where the
    call runs on fewer chips (`_deployment`), its spill to a capacity tier and the count that avoids
    it (`_spill`), the same call in 8-bit weights (`_narrower`), how far each
    assumed figure of the profile moves it (`_assumed`), where a pipeline's KV caches sit when that
    decides the chips a layer (`_layer_home`), a MoE layer run dense (`_moe_schedule`), its routed
    experts in a vendor's block format (`_block_note`), the ceiling of a speculative call's drafting
    (`_drafting`), the vendor's
    software generations here (`_runtimes`) and the published figures of this architecture on this
    chip, the vendor rows, each with what the physics needs to reach it (`_figures`).
    `again(**overrides)` reruns the call with arguments changed (n_chips=None: the default count).
    `spec`: the call's SpeculativeDecoding, if any (the result keeps no acceptance); `dense`: the
    call's dense_weight_dtype, if any (a MoE's routed experts in a vendor's block format: `_block_note`).
    No model or row is named in the code: rows are found by device and architecture."""
    if r.hardware not in {dev for dev, *_ in FITS.values()}:
        return []
    spill = _spill(r, again)
    return _deployment(r, again) + spill + _narrower(r, again, bool(spill)) + _assumed(r, again) \
        + _layer_home(r, again) + _moe_schedule(r, again) + _block_note(r, again, dense) + _drafting(spec, again) \
        + _runtimes(r, again) \
        + _figures(r, again)


def notes_for(r, call: dict) -> list[str]:
    """`notes` for `r = estimate(**call)`: the reruns keep `call`'s arguments and `r`'s chip count
    (a rerun that names another count drops `call`'s explicit layout)."""
    same = {**call, "n_chips": r.n_chips}

    def again(**kw):
        return estimate(**{**same, **({"parallel": None} if "n_chips" in kw else {}), **kw})
    return notes(r, again, call.get("speculative"), call.get("dense_weight_dtype"))


if __name__ == "__main__":
    print(format_report())
