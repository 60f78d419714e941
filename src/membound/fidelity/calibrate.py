"""Calibration: fit the few physical parameters of each runtime (and the latency floor of the
specialised chips) from the reference measurements, and write them, with the rows they came
from, into runtime files.

Rows: every predicted row of a fitted runtime, except rows that beat physics (faster than the
pure roofline: `beats_physics`), which are set aside with the reason. The headline error is
never measured on these rows: `membound.validate` refits without a whole chip (or a whole
source) and predicts it. The specialised chips' latency floors come from the rows named in
`vendors.FITS` (the launch figures); their other rows are held out.

What is fitted (never one figure per row):
- per runtime (`default`; per device class too only where asked, `CLASS_ENTRIES`: a class with at
  least `MIN_ROWS` rows fits one figure per `ROWS_PER_PARAM` of its rows and holds the rest at the
  default's values): the parameters `FIT[runtime]` names, out of
  bandwidth_fraction, compute_fraction (both in (0, 1]), overlap, moe_gemm_efficiency,
  per_step/per_layer/per_moe_layer/per_sequence overheads and the host's per-layer dispatch
  (>= 0); a parameter is fitted only when
  the group has rows that depend on it. A fit that ends on a bound is flagged. Figures set from
  cited facts, not fitted (`FIXED`), are held in every entry: among them llama.cpp CUDA's board
  power per fp32 TFLOP/s (`power_limit_from_sgemm`, one figure of the runtime: `RUNTIME_WIDE`).
- per specialised chip: `latency.per_layer_s` (and, for Cerebras, the wafer-to-wafer hop
  latency `interconnect.latency_s`), from the named rows.
- `ASSUMED_FROM`: backends without rows get another backend's default, marked as not fitted.

The fit is least squares on log(predicted / measured) within each figure's BOUNDS, by the one
fitter (membound.fitter.fit: scipy's trust-region least squares, run to convergence, then polished
without derivatives), cold from each figure's prior start (`prior_start`: nothing of the rows or of
a chip's profile); its FitReport (parameters, bounds hit, rows, residuals) rides on each GroupFit.

    python -m membound.fidelity.calibrate [--reference PATH] [--out DIR | --write-bundled]

prints the fits; `--out DIR` writes the updated runtime (and specialised profile) files there;
`--write-bundled` (maintainers, in a source checkout) rewrites the bundled ones. Only the keys
a fit sets are replaced; every other key of a file is kept.
"""
from __future__ import annotations

import argparse
import datetime
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import fitter
from .fitter import FitReport, Param
from ..catalog.model import Model, load_model
from .reference import SPECIALISED, Scenario, load_reference, predict
from .vendors import fit as vendor_fit
from .vendors import fitted_rows as vendor_fitted_rows
from .vendors import runtime_yaml as vendor_yaml
from ..catalog.hardware import load_hardware
from ..catalog.runtime import load_runtime, RuntimeEntry, runtimes_dir, clear_caches
from ..base.progress import track
import yaml

if TYPE_CHECKING:
    from ..catalog.runtime import Runtime

PARAMS = ("bandwidth_fraction", "compute_fraction", "per_step_overhead_s", "per_layer_overhead_s", "overlap",
          "moe_gemm_efficiency", "per_sequence_overhead_s", "per_moe_layer_overhead_s", "power_limit_w_per_tflop",
          "per_layer_overhead_cycles", "per_layer_host_s")
BOUNDS = {"bandwidth_fraction": (0.05, 1.0), "compute_fraction": (0.01, 1.0), "overlap": (0.0, 1.0),
          "moe_gemm_efficiency": (0.05, 1.0),
          "per_step_overhead_s": (0.0, 0.05), "per_layer_overhead_s": (0.0, 1e-3),
          "per_sequence_overhead_s": (0.0, 1e-3), "per_moe_layer_overhead_s": (0.0, 1e-3),
          "per_layer_s": (0.0, 1e-3), "hop_latency_s": (0.0, 1e-2), "power_limit_w_per_tflop": (1.0, 50.0),
          "per_layer_overhead_cycles": (0.0, 2e6), "per_layer_host_s": (0.0, 2e-3)}
_LLAMA_CPP = ("bandwidth_fraction", "compute_fraction", "per_layer_overhead_s", "overlap", "moe_gemm_efficiency",
              "per_moe_layer_overhead_s")
FIT = {
    # CUDA: the board power its MMQ/attention kernels need per fp32 TFLOP/s at the rated clock, one
    # figure over all its chips (RUNTIME_WIDE), set from public SGEMM measurements (FIXED): boards that
    # cannot feed it (DGX Spark's 140 W SoC, the RTX PRO 6000) compute below their rated peaks
    # CUDA's per-layer floor stays in seconds: the form in cycles of the chip's clock (Vulkan's, below) was
    # compared on the split's select groups, each form refitted cold (scripts/floor_form.py; validation
    # figures, 2026-12-06): select chips, decode median |error| 3.2% (seconds) against 3.2% (cycles, 3.23 vs
    # 3.16), prefill 4.6 against 4.7, batched decode 7.9 against 7.6; the select source (lcpp), decode 12.8
    # against 17.6 (H100 -6 -> -12%, RTX 3060 -10 -> -18%: a floor in cycles charges the low-clock chips
    # more than they pay), prefill 16.4 against 16.3. Worse on the select source (and on the chips' prefill
    # by 0.16 points), so not adopted; a possible reason, not shown: a CUDA graph is launched by the host
    # and the driver, whose part of the floor does not follow the SM clock
    "llama.cpp-metal": _LLAMA_CPP, "llama.cpp-cuda": _LLAMA_CPP + ("power_limit_w_per_tflop",),
    # Vulkan: every op is a dispatch recorded in a command buffer, with a pipeline barrier before each
    # dependent one: the GPU drains, the next dispatch launches and ramps, a floor of GPU cycles per
    # layer (timed at each chip's clock: RTX 4090 and 5090 decode leave 1.60 and 1.70 ms per token over
    # their weight and KV bytes, in the ratio of their clocks 2.52 / 2.41 GHz), not of seconds
    "llama.cpp-vulkan": tuple(p if p != "per_layer_overhead_s" else "per_layer_overhead_cycles" for p in _LLAMA_CPP),
    # The engines fitted on two chips (NeMo: A100, H100; TinyChat and Hugging Face transformers: RTX 4090,
    # RTX A6000) may free one constant each (the budget: one per two chips, membound.budget). Their
    # fractions are hardware facts, not fitted: an entry that sets none takes each chip's measured stream
    # and GEMM shares from its profile (`achievable`, cited there; "assumed" where no measurement was
    # found, and validate reports those chips apart). The one free constant is each engine's per-layer
    # floor, the term every one of their rows pays. Chosen by that rule before looking at any error:
    # these runtimes have no select chip, so no figure could choose between forms.
    # eager PyTorch engines with fused layers (NeMo, TinyChat: a dozen kernels a layer): each small
    # kernel lasts a floor of GPU cycles, so their per-layer cost is fitted in cycles and timed at each
    # chip's clock (efficiency.per_layer_s). NeMo's per-step and per-sequence costs (fitted before) are
    # not priced: no source gives them, and two chips free one constant
    "nemo": ("per_layer_overhead_cycles",),
    # Hugging Face transformers' eager decode dispatches ~40 unfused ops a layer (norms, rotary, cache
    # concatenation, repeat_kv) from Python: its per-layer floor is fitted in seconds, which no GPU clock
    # changes. PyTorch's own eager Llama-7B ran at 25.5 tok/s on an A100 ('heavily CPU overhead bound',
    # pytorch.org/blog/accelerating-generative-ai-2). The host's own dispatch of a layer, which adds to the
    # step only where a model's code blocks the host (per_layer_host_s: Falcon's list index), was a second
    # constant pinned by two rows (awq-014, awq-027); two chips free one, so it is not priced (0) and those
    # two rows show the missing physics
    "hf-transformers": ("per_layer_overhead_s",),
    "tinychat": ("per_layer_overhead_cycles",),
}
# figures set from how the kernels work, not fitted (in every entry of the runtime)
FIXED = {
    "llama.cpp-cuda": {"overlap": (0.0, "MMQ's main loop loads a tile of weights and activations, "
                                  "synchronises, multiplies, synchronises (ggml-cuda/mmq.cuh, "
                                  "mul_mat_q_process_tile: no double buffering), so its loads and "
                                  "math do not overlap; free fits of all three classes land on 0"),
                       "ungraphed_layer_s": (25e-6, "ggml-cuda replays a step as a CUDA graph only when no "
                                             "node has more than one token (ggml_cuda_graph_check_compability: "
                                             "'disable CUDA graphs for batch size > 1'; llama.cpp PR 6766), so "
                                             "prefill and batched decode launch kernel by kernel; graphs off "
                                             "against on at batch 1, Llama-2-7B q4_0, same build: RTX 3090 "
                                             "116.31 -> 128.27 t/s = 25.1 us per layer, RTX 4090 13.1 us "
                                             "(PR 6766); a dense 32-layer 9B on a GTX 1080 58 us (PR 27721); "
                                             "the median, set, not fitted: a free fit takes 100-175 us and "
                                             "trades it against compute_fraction on prefill rows"),
                       "power_limit_w_per_tflop": (6.685, "set from public SGEMM measurements, not fitted "
                                                   "(power_limit_from_sgemm): torch.mm fp32 (TF32 off), the "
                                                   "best of 1024-10240 square matrices, median of each board's "
                                                   "entries (github.com/zzc0721/torch-performance-test-data, "
                                                   "database.md and issue 160): RTX 3090 24.79 TFLOP/s = 0.697 "
                                                   "of its 35.58 peak with power to spare (9.8 W per TFLOP/s); "
                                                   "RTX 4090 54.69 = 0.950 of that share at 5.45 W per TFLOP/s, "
                                                   "RTX 5090 68.37 = 0.936 at 5.49, RTX PRO 6000 75.64 = 0.868 "
                                                   "at 4.80; a share s at w W per TFLOP/s puts the limit at "
                                                   "w / s^3: 6.35, 6.69, 7.33, the median (a free fit over the "
                                                   "rows took 6.92). Not explained: RTX A6000 and L40S SGEMM "
                                                   "run 11% below the law (blower and passive coolers), RTX "
                                                   "4070 SUPER 3% above it; DGX Spark (4.5 W per TFLOP/s: 0.88 "
                                                   "of 2.52 GHz) has no public clock log under a compute-bound "
                                                   "load (under a llama.cpp benchmark it held ~2.4 GHz at 31-36 W: "
                                                   "ggml-org/llama.cpp discussion 18254, quoted in "
                                                   "tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark issue 1)")},
    "llama.cpp-vulkan": {"overlap": (0.0, "ggml-vulkan's mul_mm shader loads a tile of A and B into shared "
                                    "memory, barrier()s, multiplies (cooperative matrices or FMAs), barrier()s "
                                    "(vulkan-shaders/mul_mm.comp main loop: no double buffering), so its loads "
                                    "and math do not overlap, as CUDA's MMQ")},
}
# backends with no rows in the reference: another backend's default figures, said so in the file
ASSUMED_FROM = {"llama.cpp-hip": ("llama.cpp-cuda", "HIP compiles the CUDA backend's kernels through hipify")}
# figures of the whole runtime, held at one value in every device-class entry (a law across chips that one
# class's rows cannot pin) and not copied to a backend ASSUMED_FROM another; fitted over all its rows (the
# `default` group) unless FIXED sets them
RUNTIME_WIDE = ("power_limit_w_per_tflop",)
WHY = {"power_limit_w_per_tflop": (
    "a GPU raises its clock until it meets its power limit; CMOS dynamic power is C V^2 f and near the "
    "top of the voltage-frequency curve V rises with f, so a board whose power_w per fp32 TFLOP/s (at "
    "the rated clock) is below what the kernels draw runs at the cube root of the ratio "
    "(efficiency.power_factor): DGX Spark's 140 W SoC (4.5 W per TFLOP/s) and the RTX PRO 6000 (4.8) "
    "below an RTX 3060 (13.3) or a Jetson AGX Orin (11.3)")}
# torch.mm fp32 TFLOP/s (TF32 off; the best of 1024-10240 square matrices), every entry per board, from
# github.com/zzc0721/torch-performance-test-data (database.md; RTX PRO 6000 74.03: issue 160). An SGEMM
# keeps the SMs' fp32 lanes busy as MMQ keeps them with dequantisation and dp4a: its share of the rated
# fp32 peak falls, against a board with power to spare, as the clock its power sustains
SGEMM_TFLOPS = {"rtx-3090": (24.46, 24.84, 24.79),                  # 9.8 W per TFLOP/s: power to spare
                "rtx-4090": (54.69, 55.01, 54.77, 46.48, 54.67),    # the 24 GB boards
                "rtx-5090": (69.16, 67.57),
                "rtx-pro-6000-blackwell": (77.24, 74.03)}
SGEMM_SPARE = "rtx-3090"


def power_limit_from_sgemm(tflops: dict | None = None, spare: str = SGEMM_SPARE) -> float:
    """The board watts per fp32 TFLOP/s (at the rated clock) below which a board computes under its
    rated clock, from measured SGEMM rates: each board's median share of its fp32 peak over the
    `spare` board's share is the clock its power sustains, (w / limit) ** (1/3) at w watts per
    TFLOP/s (efficiency.power_factor), so limit = w / ratio ** 3; the median over the power-short boards."""
    tflops = tflops or SGEMM_TFLOPS

    def share(name: str) -> float:
        return float(np.median(tflops[name])) / (load_hardware(name).compute_flops["fp32"] / 1e12)

    limits = []
    for name in (n for n in tflops if n != spare):
        hw = load_hardware(name)
        w = (hw.power_w or 0.0) / (hw.compute_flops["fp32"] / 1e12)
        limits.append(w / (share(name) / share(spare)) ** 3)
    return float(np.median(limits))


MIN_ROWS = 4
# Device-class entries (a runtime's figures fitted again per class of chip) are off: a chip class that
# differs physically (LPDDR SoCs, desktop GDDR, HBM parts) differs by hardware facts in its profile
# (memory technology, clocks, measured read ceiling), not by a fitted class (issue 27 item 2), and per-class
# fits broke the budget of one free figure per two chips (llama.cpp-cuda: 15 figures over 11 chips). The
# mechanism stays for a caller who asks (calibrate_runtimes(classes=True)). Chosen by that rule, before
# looking; the select chips' figures did not get worse (validation, python -m membound.fidelity.validate: CUDA
# decode 3.3 -> 3.3%, prefill 5.3 -> 4.5%, batched decode 8.1 -> 8.1%, Vulkan 3.7 / 8.3 -> 3.7 / 8.3%).
CLASS_ENTRIES = False
LOW_COMPUTE_START = 0.3   # the second starting compute_fraction of a cold fit (`fit_group`)
# Where a cold fit starts each figure: a property of its prior, never of the rows or of a chip's profile (issue 27:
# a start read off the first fit row's chip profile let a profile edit, or a hold-out dropping that chip, move a
# fit whose objective had not changed). A share bounded on both sides by physics starts at the middle of its
# BOUNDS; a cost open at 0 (linear in the fit, its range spanning decades) at a typical magnitude: 10 us a layer
# (a few kernels' launches), 100 us otherwise, 1e5 GPU cycles a layer (~50 us at 2 GHz), and the power limit at
# 8 W per fp32 TFLOP/s (between the boards SGEMM_TFLOPS names, 4.8 to 9.8). The fit is polished past the trust
# region's stop (fitter.fit(polish=True)) so that it reaches the same optimum from any start (tested)
MIDDLE_STARTS = ("bandwidth_fraction", "compute_fraction", "overlap", "moe_gemm_efficiency")
TYPICAL_STARTS = {"power_limit_w_per_tflop": 8.0, "per_layer_overhead_cycles": 1e5}


def prior_start(name: str) -> float:
    """The start of figure `name` in a cold fit (see MIDDLE_STARTS)."""
    if name in MIDDLE_STARTS:
        lo, hi = BOUNDS[name]
        return (lo + hi) / 2
    return TYPICAL_STARTS.get(name, 1e-5 if "layer" in name else 1e-4)


ROWS_PER_PARAM = 2   # a device class fits one figure per this many of its rows (fractions first) and
                     # holds the rest at the default's values: four rows for four figures fit
                     # exactly, and land on bounds
COMPUTE_METRICS = ("prefill_tok_s", "ttft_ms", "throughput_tok_s_total")


def is_calibration(sc: Scenario) -> bool:
    """Whether a fit uses `sc`: a row of a fitted runtime, or a named specialised-chip row."""
    if sc.hardware in SPECIALISED:
        return sc.id in vendor_fitted_rows()
    return sc.runtime in FIT


_PER_TOKEN = ("decode_tok_s_per_user", "decode_tok_s_total", "prefill_tok_s", "throughput_tok_s_total")


def beats_physics(sc: Scenario) -> str | None:
    """The reason `sc` is set aside, when its measured figure is faster than the pure roofline
    (peak bandwidth and compute, no floor, no overhead, and the fewest weight bytes its batch can
    read: `fewest_experts`); else None. A specialised chip's row whose chip count or weight format
    the source does not state is never set aside on the assumed layout or format: membound.vendors
    reports the range of counts that give its figure and the tokens a pass it needs (issue 28)."""
    if sc.hardware in SPECIALISED and not (sc.chips_stated and sc.weights_stated):
        return None
    try:
        ideal = predict(sc, runtime="ideal", model=fewest_experts(sc))
    except Exception:   # noqa: BLE001 - a row membound cannot lay out is reported by validate
        return None
    faster = sc.measured > ideal if sc.metric in _PER_TOKEN else sc.measured < ideal
    if not faster:
        return None
    return (f"faster than the pure roofline: measured {sc.measured:.4g} against at best {ideal:.4g} "
            f"({sc.metric}) on {sc.hardware}'s peak figures")


def fewest_experts(sc: Scenario) -> Model | None:
    """The model whose bytes bound a batch of `sc` from below: an MoE whose sequences all route to
    the same experts_per_token experts (correlated or identical inputs) reads no more experts than
    one token does, where `estimate()` assumes independent routing and counts the expected
    distinct experts of the whole batch; a faster row is beyond membound's routing assumption,
    not beyond physics. The preset itself for a dense model or one token at a time (None)."""
    m = load_model(sc.model)
    if not m.n_experts or sc.batch == 1:
        return None
    return m.model_copy(update={"n_experts": m.experts_per_token})


# ---- runtimes ----------------------------------------------------------------------------

@dataclass
class GroupFit:
    runtime: str
    key: str                 # device class or "default"
    params: dict
    rows: list[str] | str    # calibration row ids, or the evidence of an entry copied unfitted
    median_error: float      # on those rows, |pred/meas - 1|
    at_bounds: list = field(default_factory=list)   # "name=value (bound)" for fits ending on a bound
    copied: tuple = ()       # figures held at the runtime's default (too few rows to fit them)
    report: FitReport | None = None   # the fitter's report (None: an entry copied, not fitted)


def param_spec(name: str, start: float) -> Param:
    """The fitter's Param for calibrate's figure `name` (its BOUNDS, linear scale)."""
    lo, hi = BOUNDS[name]
    return Param(name, lo, hi, min(max(start, lo), hi))


def params_at_bounds(params: dict) -> list:
    return list(fitter.at_bounds(params, [param_spec(p, BOUNDS[p][0]) for p in params]))


def _is_moe(model: str) -> bool:
    return load_model(model).n_experts > 0


def _blocks_host(rt: str, model: str) -> bool:
    return load_model(model).model_type in load_runtime(rt).host_blocking_model_types


def _params_for(rt: str, rows) -> tuple:
    wanted = FIT.get(rt, ())
    has_compute = any(s.metric in COMPUTE_METRICS for s in rows)
    has_decode = any(s.metric not in ("prefill_tok_s", "ttft_ms") for s in rows)
    has_moe_compute = any(s.metric in COMPUTE_METRICS and _is_moe(s.model) for s in rows)
    # an MoE layer's own kernels show apart from a dense layer's only beside dense rows' decode
    moe_decode = {_is_moe(s.model) for s in rows if s.metric not in COMPUTE_METRICS}
    keep = []
    for p in wanted:
        if p in ("compute_fraction", "power_limit_w_per_tflop") and not has_compute:
            continue
        if p == "moe_gemm_efficiency":
            if not has_moe_compute:
                continue
        elif p == "per_moe_layer_overhead_s":
            if moe_decode != {True, False}:
                continue
        elif p == "per_layer_host_s":
            # the host's dispatch shows only where a model's code blocks the host (it is hidden elsewhere)
            if not any(_blocks_host(rt, s.model) for s in rows):
                continue
        elif p not in ("compute_fraction", "power_limit_w_per_tflop") and not has_decode:
            continue
        keep.append(p)
    return tuple(keep)


def _runtime_with(base, key: str, params: dict, others: dict):
    classes = {k: v for k, v in others.items()}
    classes[key] = RuntimeEntry(**params)
    return type(base)(**{**base.model_dump(), "classes": classes})   # a fresh instance: its own hash


def fit_group(rt_name: str, key: str, rows, start: dict | None = None, others: dict | None = None,
              iters: int = 200, fixed: dict | None = None) -> GroupFit:
    """Fit FIT[rt_name]'s parameters for one (runtime, device class or 'default') group; the
    figures in `fixed` are held at their values (copied into the entry, not fitted)."""
    base = load_runtime(rt_name)
    fixed = fixed or {}
    # a device class's entry takes the runtime-wide figures from `fixed` (the default's), never fits them
    names = tuple(p for p in _params_for(rt_name, rows)
                  if p not in fixed and (key == "default" or p not in RUNTIME_WIDE))
    x0 = [start[p] if start and p in start else prior_start(p) for p in names]
    meas = np.log([s.measured for s in rows])

    def res(p: dict) -> np.ndarray:
        rt = _runtime_with(base, key, {**fixed, **p}, others or {})
        return np.log([predict(s, runtime=rt) for s in rows]) - meas

    # a cold fit also starts from a low compute share: a prefill row is memory- or compute-bound
    # on either side of it, and a fit from the device's share can settle on the wrong side
    starts = ([{"compute_fraction": LOW_COMPUTE_START}] if not start and "compute_fraction" in names else [])
    report = fitter.fit(res, [param_spec(p, v) for p, v in zip(names, x0)], rows=[s.id for s in rows],
                        starts=starts, max_iterations=iters, polish=True)
    err = report.median_abs_error if names else float("nan")
    return GroupFit(rt_name, key, {**fixed, **report.params}, [s.id for s in rows], err, list(report.at_bounds),
                    tuple(fixed), report)


def fit_rows(scenarios, rt: str) -> list:
    """The rows a fit of runtime `rt` uses: its rows, less specialised chips and rows that beat
    physics."""
    return [s for s in scenarios if s.runtime == rt and s.hardware not in SPECIALISED and not _set_aside(s)]


@functools.lru_cache(maxsize=4096)
def _set_aside(sc: Scenario) -> bool:
    return beats_physics(sc) is not None


def calibrate_runtimes(scenarios, runtimes=None, warm: bool = False, iters: int = 200,
                       classes: bool = CLASS_ENTRIES) -> dict:
    """{runtime: [GroupFit, ...]} from every usable row (`fit_rows`). `runtimes` limits the
    runtimes refitted; warm=True starts from the bundled figures; classes=True also fits an entry
    per device class with at least MIN_ROWS rows (off by default: CLASS_ENTRIES)."""
    out = {}
    names = list(runtimes or FIT)
    for rt in (names if runtimes else track(names, "calibrate", unit=" runtimes")):
        rows = fit_rows(scenarios, rt)
        if not rows:
            continue
        start = _bundled_entries(rt) if warm else {}
        set_ = {p: v for p, (v, _) in FIXED.get(rt, {}).items()}
        fits = [fit_group(rt, "default", rows, start=start.get("default"), iters=iters,
                          fixed=set_)]
        default_entry = fits[0].params
        by_class: dict = {}
        for s in rows:
            by_class.setdefault(load_hardware(s.hardware).device_class or "default", []).append(s)
        for cls, rs in sorted(by_class.items()):
            if classes and len(rs) >= MIN_ROWS and cls != "default" and len(by_class) > 1:
                # the first figures (fractions first) the rows can pin, ROWS_PER_PARAM rows each; the
                # rest stay at the default's values
                wanted = _params_for(rt, rs)
                free = [p for p in wanted if p not in set_ and p not in RUNTIME_WIDE]
                # figures no row of the class can pin (an MoE GEMM rate without MoE prefill rows)
                # are the default's too, not the entry's unset value (1.0, 0): the class's chips
                # run those kernels as the runtime's other chips do
                unpinned = [p for p in FIT.get(rt, ()) if p not in wanted and p not in set_]
                fixed = {**set_, **{p: default_entry[p] for p in free[len(rs) // ROWS_PER_PARAM:] + unpinned
                                    if p in default_entry},
                         **{p: default_entry[p] for p in RUNTIME_WIDE if p in default_entry}}
                fits.append(fit_group(rt, cls, rs, start=start.get(cls, default_entry), iters=iters,
                                      fixed=fixed))
        out[rt] = fits
    return out


def _bundled_entries(rt: str) -> dict:
    return {k: e.model_dump(exclude_none=True) for k, e in load_runtime(rt).classes.items()}


def runtime_from_fits(rt_name: str, groups, base: Runtime | None = None) -> Runtime:
    """The runtime `rt_name` (or `base`) with its fitted entries replaced by `groups` (in memory only)."""
    base = base or load_runtime(rt_name)
    classes = dict(base.classes)
    for g in groups:
        old = classes[g.key].model_dump() if g.key in classes else {}
        classes[g.key] = RuntimeEntry(**{**old, **g.params})
    return type(base)(**{**base.model_dump(), "classes": classes})


# ---- specialised chips -------------------------------------------------------------------

def calibrate_specialised(scenarios) -> dict:
    """{vendor runtime: (params, calibration ids, median error on them)}: each software generation's
    one constant from its named rows (membound.vendors.fit)."""
    return vendor_fit(scenarios)


# ---- writing the data files --------------------------------------------------------------

SPLIT_RULE = ("every row of the runtime in the reference measurements.csv that membound predicts, less rows "
              "faster than the pure roofline (membound.calibrate.fit_rows); held-out errors come from cold, converged "
              "refits without each select or report chip of the committed split (membound.split; python -m "
              "membound.fidelity.validate)")

def _evidence(g: GroupFit, today: str) -> str:
    ids = ", ".join(g.rows[:12]) + (", ..." if len(g.rows) > 12 else "")
    text = (f"fitted by membound.calibrate on {today} from {len(g.rows)} rows ({ids}); "
            f"median |error| on them (in-sample) {100 * g.median_error:.1f}%")
    why = FIXED.get(g.runtime, {})
    held = [p for p in g.copied if p not in why and p not in RUNTIME_WIDE]
    text += "".join(f"; {p}={v:g} set, not fitted: {r}" for p, (v, r) in why.items() if p in g.copied)
    for p in (p for p in RUNTIME_WIDE if p in g.params and p not in why):
        how = "the runtime's figure, fitted over all its rows" if p in g.copied else "fitted, one figure of the runtime"
        text += f"; {p}: {how}: {WHY[p]}"
    if held:
        text += f"; {', '.join(held)} held at the default's values ({ROWS_PER_PARAM} rows per fitted figure)"
    if g.at_bounds:
        text += "; ON A BOUND (missing physics): " + ", ".join(g.at_bounds)
    return text


def write_runtimes(fits: dict, folder: Path | str, source: Path | None = None) -> list:
    """Write each fitted runtime's YAML into `folder`: the file from `source` (default: the
    bundled runtimes) with only the fitted keys of the fitted entries, their evidence and the
    `calibration` note replaced; every other key is kept."""

    source = Path(source or runtimes_dir())
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    written = []
    for rt, groups in {**fits, **_assumed(fits)}.items():
        src = source / f"{rt}.yaml"
        data = yaml.safe_load(src.read_text()) if src.exists() else {"name": rt}
        classes = data.get("classes") or {}
        if rt in fits:   # an entry this calibration fitted before and no longer fits loses its figures
            for key in [k for k in classes if k not in {g.key for g in groups}]:
                if str(classes[key].get("evidence", "")).startswith("fitted by membound.calibrate"):
                    # the figures a calibration sets (FIT and FIXED) go with it; another writer's keys stay
                    kept = {f: v for f, v in classes[key].items() if f not in FIT[rt] + tuple(FIXED.get(rt, {})) + ("evidence",)}
                    if kept:
                        classes[key] = kept
                    else:
                        del classes[key]
        for g in groups:
            entry = dict(classes.get(g.key) or {})
            entry.update({k: float(f"{v:.4g}") for k, v in g.params.items()})
            entry["evidence"] = g.rows if isinstance(g.rows, str) else _evidence(g, today)
            classes[g.key] = entry
        data["classes"] = classes
        if rt in fits:
            entries = (f"one entry per device class with >= {MIN_ROWS} rows (one figure fitted per {ROWS_PER_PARAM} "
                       "rows, the rest the default's), else 'default'" if any(g.key != "default" for g in groups) else
                       "one 'default' entry for every chip (no fitted device classes: membound.calibrate.CLASS_ENTRIES)")
            data["calibration"] = (f"{today}: least squares on log(predicted/measured) over {SPLIT_RULE}; {entries}. "
                                   "Rerun: python -m membound.fidelity.calibrate --out DIR (or --write-bundled)")
            data["provenance"] = provenance(rt, groups, today)
        path = folder / f"{rt}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
        written.append(path)
    return written


def provenance(rt: str, groups, today: str) -> str:
    """The runtime file's one-line `provenance` (Result.calibration) for what this calibration fitted:
    the free figures, their rows and chips, the figures set rather than fitted, and any bound hit."""
    chips = {s.id: s.hardware for s in load_reference().scenarios}
    parts = []
    for g in groups:
        if isinstance(g.rows, str):
            continue
        free = [p for p in g.params if p not in g.copied]
        on = {chips[i] for i in g.rows if i in chips}
        what = f"{len(free)} figure{'' if len(free) == 1 else 's'} ({', '.join(free)})"
        text = (f"{what} fitted by membound.calibrate on {today} on {len(g.rows)} "
                f"rows of {len(on)} chips" + ("" if g.key == "default" else f" (class {g.key})"))
        set_ = [p for p in g.copied if p in FIXED.get(rt, {})]
        if set_:
            text += f"; {', '.join(set_)} set from the engine's code or measurements, not fitted"
        if g.at_bounds:
            text += f"; on a bound (missing physics): {', '.join(g.at_bounds)}"
        parts.append(text)
    return f"{rt}: " + ("; ".join(parts) or "nothing fitted") + (
        "; one entry for every chip" if all(g.key == "default" for g in groups) else "")


def _assumed(fits: dict) -> dict:
    """Entries for backends without rows: the default of the backend ASSUMED_FROM names."""
    out = {}
    for rt, (src, why) in ASSUMED_FROM.items():
        if rt in fits or src not in fits:
            continue
        g = next(g for g in fits[src] if g.key == "default")
        # the power a kernel draws is the source's NVIDIA boards' figure: not copied
        params = {p: v for p, v in g.params.items() if p not in RUNTIME_WIDE}
        out[rt] = [GroupFit(rt, "default", params, f"not fitted (no {rt} rows in the reference): {src}'s default "
                            f"figures, copied by membound.calibrate on {datetime.date.today().isoformat()}; {why}",
                            float("nan"))]
    return out


def write_specialised(fits: dict, folder: Path | str, source: Path | None = None) -> list:
    """Write each vendor runtime file (its one fitted constant, rows and date) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (params, ids, err) in fits.items():
        path = folder / f"{name}.yaml"
        path.write_text(vendor_yaml(name, next(iter(params.values())), ids, err))
        written.append(path)
    return written

def calibrate(path=None, warm: bool = False):
    """Fit everything from the reference rows (nothing is written): (runtime fits, specialised fits)."""
    ref = load_reference(path)
    return calibrate_runtimes(ref.scenarios, warm=warm), calibrate_specialised(ref.scenarios)


def format_fits(fits: dict, special: dict) -> str:
    out = []
    for rt, groups in fits.items():
        for g in groups:
            ps = ", ".join(f"{k}={v:.3g}" for k, v in g.params.items())
            flag = f"  ON A BOUND: {', '.join(g.at_bounds)}" if g.at_bounds else ""
            out.append(f"{rt:16s} {g.key:18s} rows={len(g.rows):3d} median|err|={100 * g.median_error:5.1f}%  {ps}{flag}")
    for chip, (params, ids, err) in special.items():
        ps = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
        out.append(f"{chip:16s} {'latency':18s} rows={len(ids):3d} median|err|={100 * err:5.1f}%  {ps}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m membound.fidelity.calibrate",
        description="Fit the runtimes' efficiencies (and the specialised chips' latency floors) to the "
                    "reference measurements. Prints the fits; writes files only where told to.")
    ap.add_argument("--reference", default=None, help="a measurements CSV or a folder holding measurements.csv "
                    "(default: $MEMBOUND_REFERENCE_DIR or the copy shipped with membound)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help="write the updated runtime and specialised-profile YAML files into DIR")
    where.add_argument("--write-bundled", action="store_true",
                       help="maintainers: rewrite the runtime and profile files bundled in this source checkout")
    args = ap.parse_args(argv)
    fits, special = calibrate(args.reference)
    print(format_fits(fits, special))
    if args.out or args.write_bundled:
        rt_dir = Path(args.out) if args.out else runtimes_dir()
        paths = write_runtimes(fits, rt_dir) + write_specialised(special, rt_dir)
        clear_caches()
        print("\nwrote " + ", ".join(str(p) for p in paths))
    else:
        print("\nnothing written (--out DIR writes the files there; --write-bundled rewrites the bundled ones)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
