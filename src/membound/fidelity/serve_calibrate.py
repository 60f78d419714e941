"""Fit the served costs of each engine (the `served` block of vllm, sglang, tensorrt-llm) on the
InferenceMAX rows of the fitting chip (serve_validate.FIT_HARDWARE, H200), and write only those
keys. Every other chip is held out whole (serve_validate reports both).

Parameters (physical, one set per engine and software generation):
  bandwidth_fraction  share of the chip's achievable HBM bandwidth (its profile's measured
                      fraction of peak) the engine's decode kernels reach
  compute_fraction    share of the chip's achievable dense FLOP/s its GEMMs reach (prefill,
                      large batches); relative shares carry over to chips the fit never saw
  per_step_s          host and launch time per step (scheduler, sampling, graph replay)
  per_layer_s         per layer per step (small kernels and launches the graph does not hide)
  moe_expert_rows     rows of every expert's GEMM an MoE layer computes per step whatever routes
                      to it: 2 x rows x experts x expert params FLOPs at the MoE's compute rate
                      (serve.moe_expert_s), so a chip computing that format faster pays less (an
                      fp4 MoE on Blackwell, against the same weights dequantized to bf16 on Hopper)
  moe_tile_tokens     rows each touched expert's GEMM computes at least (padded tiles): FLOPs,
                      so the cost scales with the chip's compute
(per_allreduce_s, an all-reduce's latency beyond the link's, is not fitted: with the link latency
in the core's communication term it came out ~0 on every engine.)
  per_alltoall_s      latency of an expert-parallel dispatch or combine kernel (2 per MoE layer
                      under DP attention), fitted apart on the TPOT of the engine's H200 rows with
                      DP attention, aggregated and disaggregated (their decode workers), the
                      other figures held; the aggregated fit is then redone with it, once
  per_sequence_s      per running sequence per step (block tables, sampling, detokenisation)
  per_request_s       host time of a request before its first token (HTTP, detokenisation)
  per_prompt_token_s  host time per prompt token before its first step (the server tokenises the
                      prompt text and prepares its inputs): TTFT that tensor parallelism does not
                      divide. At 4 clients the part of the measured TTFT that does not shrink with
                      tp (TTFT = a + b / tp over tp 1..8) grows 7-10 us per prompt token from 1k
                      to 8k prompts on vLLM's gpt-oss rows on B200, H100, H200 and MI300X alike
  moe_upcast_efficiency  a prefill's expert GEMMs' rate relative to the dense GEMMs' where the
                      engine's MoE kernel upcasts weight-only experts to 16-bit activations
                      (serving.step.upcast_efficiency: vLLM's Triton MoE for MXFP4 with bf16
                      inputs, gpt_oss_triton_kernels_moe.py, on SM90 and gfx942; TensorRT-LLM's
                      TRITON backend on Hopper); 1 elsewhere (fp8 GEMMs, MXFP4 x MXFP8 on Blackwell)
Set from the engine's code, not fitted: lookahead_steps (runtime.Served: 1 for TensorRT-LLM's
and SGLang's overlap loops; vLLM's 0, its default without --async-scheduling).
Each engine fits only the figures its H200 rows can pin (FIXED holds the rest, with the reason):
vLLM 3 (the TTFT figures: per_request_s and the prompt's two, per_prompt_token_s and
moe_upcast_efficiency; its 7 step figures held at their earlier joint fit), SGLang 4 (one model at
one layout: one per-layer cost; bandwidth at what the chip achieves; no MoE terms, no prompt
figures), TensorRT-LLM 5 (no per_step_s, no tiles; bandwidth at what the chip achieves; no prompt
figures).

The shapes, from the engines' code (each runtime file's description cites the functions):
  per step: the host's scheduling and launch (one CUDA-graph replay per step) and per layer what the
  graph leaves (per_layer_s); per running sequence per step (per_sequence_s): the executor's work on
  each request every iteration (TensorRT-LLM PyExecutor: _schedule, resource_manager.prepare_resources,
  ModelEngine._prepare_tp_inputs, _update_requests, _handle_responses; vLLM EngineCore.step's
  Scheduler.schedule / update_from_output; SGLang Scheduler.get_next_batch_to_run /
  process_batch_result), linear in the running sequences and added to the step; per request and per
  prompt token: host time before the first step, in TTFT only. Attention reads the batch's KV at the
  bandwidth and the LM head's FLOPs are counted per sequence (core.pass_terms); sampling over the
  batch's logits is b x vocab x 4 bytes per pass (0.5 MB per sequence for a 128k vocabulary: under a
  microsecond at HBM rates), left out.
Forms tried on the select chips and set aside (2026-12-06, validation figures, InferenceMAX):
  - the overlap scheduler's shape (TensorRT-LLM _executor_loop_overlap, SGLang event_loop_overlap:
    the host's per-step and per-sequence work runs while the GPU runs the step before, so a step lasts
    max(GPU, host)): refitted on the H200 rows (per-step cost held at 0), 159 us per sequence, in-sample
    TPOT 5.9% against the additive form's 4.9%, and on B200 TensorRT-LLM Llama-3.3-70B TPOT 14.1 ->
    17.3%, DeepSeek-R1 23.4 -> 25.5%; with a host per-step cost free as well (4.7 ms, 105 us per
    sequence; fitted with the attention form below) the H200 rows fit (TPOT 5.6%) but gpt-oss on B200,
    whose GPU steps are shorter, went 10.5 -> 61.5% TPOT; SGLang's B200 and MI300X figures worsened
    too (TPOT 9.3 -> 9.9%, 29.6 -> 32.6%). The measured TPOT
    at tp 8 grows ~110 us per sequence from 4 clients on (Llama-3.3-70B fp8, H200: 6.25 -> 21.99 ms at
    4 -> 128 clients), where the GPU step is ~6 ms and a hidden host cost would not show: the
    per-sequence cost adds to the step.
  - attention in kernels of its own (max(weights, GEMM FLOPs) + max(KV, attention FLOPs) per step):
    the InferenceMAX figures moved by < 0.5 point, and MLPerf's large batches went further below the
    measurements (the select families B200 and MI300X): no evidence for it yet.
  - TensorRT-LLM's per_prompt_token_s fitted with the rest (the TTFT at 4 clients splits into a part
    tensor parallelism divides and one it does not, TTFT = a + b / tp over tp 1..8: Llama-3.3-70B fp8
    on H200, a = 45 ms at 1k prompts and 149 ms at 7k, ~16 us per prompt token; b = 107 and 830 ms, the
    prefill at 61-68% of the fp8 peak): 13 us per token, compute share 0.51 -> 0.68 (41 -> 55% of the
    fp8 peak), in-sample TPOT/TTFT/throughput 4.9/19.5/4.5 -> 4.7/17.4/4.3%, B200 DeepSeek-R1
    23.4/39.8/33.8 -> 21.5/33.1/29.2%, but gpt-oss on B200 TTFT 61.9 -> 84.3% (its measured TTFT, 44 ms,
    is below the H200 rows' per-request host time alone) and the trtllm-bench maximum-load rows'
    held-out error 8.7 -> 13.8% (past tests/test_validation.py's pin): set aside.
What the linear per-sequence term misses (reported, not fitted): at trtllm-bench's maximum load
(thousands of sequences, NVIDIA perf-overview rows, membound.serving.offline) the bundled figure predicts
Llama-3.3-70B and Llama-3.1-405B within 10% (median per model and chip) but Llama-3.1-8B on H100 36%
slow (its 128/128 row 61%); with it at 0 every model is 17-52% fast. So the cost is there at large
batch, and it is smaller for the small model: scaled by the layers (32 of Llama-3.3-70B's 80) the 8B
rows go to -9% (405B scaled by 126/80: -6 to -13%), a hint that the work is per sequence per layer
(kernels that walk each sequence's block table, append its KV, rotate its query) rather than per
sequence. Refitted in that form (per sequence per layer, TensorRT-LLM's H200 rows) it is not better:
in-sample TPOT/TTFT/throughput 6.2/20.4/5.7% against 4.9/19.5/4.5%, B200 within a point either way,
the maximum-load rows 12.8% against 9.4% (8B -14%, 405B -14 to -17%): set aside too. The cost's
large-batch shape is open.
Objective: least squares on log(pred / meas) of TPOT, TTFT and throughput per GPU (median
figures), bounded least squares (membound.fitter.fit, the one fitter).

Apart, `--mtp` fits one figure of the workload, not of an engine: the per-token acceptance of
DeepSeek-R1's MTP drafts on InferenceMAX's random-token prompts (fit_mtp_acceptance), on the H200
MTP rows only with the engines' served costs as bundled; it prints the figure, which lives in
membound.serve_validate.INFERENCEMAX_MTP_ACCEPTANCE.

    python -m membound.fidelity.serve_calibrate [--out DIR | --write-bundled] [--mtp]   (prints only by default)
"""
from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

from . import fitter
from .fitter import Param
from ..catalog.runtime import Runtime, clear_caches, load_runtime, runtimes_dir
from .serve_validate import FIT_HARDWARE, load_rows, predict
from ..physics.speculative import mtp
import yaml

PARAMS = ("bandwidth_fraction", "compute_fraction", "per_step_s", "per_layer_s", "moe_expert_rows",
          "moe_tile_tokens", "per_sequence_s", "per_request_s", "moe_upcast_efficiency", "per_prompt_token_s")
ALLTOALL = "per_alltoall_s"
ALLTOALL_RANGE = (0.0, 1e-3)
LOW = dict(zip(PARAMS, (0.3, 0.15, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.05, 0.0)))
HIGH = dict(zip(PARAMS, (1.0, 1.0, 0.02, 2e-4, 256.0, 512.0, 5e-4, 0.3, 1.0, 1e-4)))
START = dict(zip(PARAMS, (0.8, 0.6, 2e-3, 1e-5, 10.0, 32.0, 2e-5, 0.03, 0.7, 1e-6)))
ENGINES = ("vllm", "sglang", "tensorrt-llm")
# Figures an engine's H200 rows cannot pin are held, not fitted (a fit left free lands on a bound):
# moe_tile_tokens (padded expert tiles) is held at 0 for SGLang and TensorRT-LLM: free, it moved
# their fitted rows' median errors by at most 0.1 point (its FLOPs hide under the weight stream).
# vLLM keeps it: gpt-oss there computes its experts in bf16 (weight-only mxfp4), where the tiles show.
# The prompt figures (per_prompt_token_s, moe_upcast_efficiency) are neutral (0, 1) where not fitted.
NEUTRAL = {"moe_upcast_efficiency": 1.0, "per_prompt_token_s": 0.0}
FIXED: dict[str, dict[str, float]] = {
    # vLLM fits the TTFT figures (per_request_s, per_prompt_token_s, moe_upcast_efficiency) with the
    # step's figures held at their fit of 2026-12-01 (all 8 jointly on the same 162 H200 rows, before
    # the TTFT figures existed). Refitted jointly with the TTFT figures, those moved (compute_fraction
    # 0.4167 -> 0.559, per_step_s 0.93 -> 0.82 ms, moe_expert_rows 1.41 -> 0.65) and the held-out
    # chips' TPOT went 9.3 -> 9.9% and throughput/GPU 9.6 -> 10.6% (TTFT 17.8%): on one chip's rows the
    # step's figures trade against the prompt's, and the compute share a refit gives Llama's fp8 GEMMs
    # on H200 does not carry over to B200 and MI300X (their Llama TTFT -24..-30% under it).
    "vllm": {"bandwidth_fraction": 0.8723, "compute_fraction": 0.4167, "per_step_s": 0.0009348,
             "per_layer_s": 3.994e-05, "moe_expert_rows": 1.41, "moe_tile_tokens": 25.66,
             "per_sequence_s": 3.267e-05},
    # one model (DeepSeek-R1) at one layout (tp=8): the step, layer and MoE-layer costs are one
    # figure (per_layer_s carries it); bandwidth reaches what the chip achieves (free, it sat on
    # its bound 1.0: the expert GEMMs stream as fast as a copy kernel); one model at one layout
    # cannot pin the prompt figures either
    "sglang": {"per_step_s": 0.0, "moe_expert_rows": 0.0, "bandwidth_fraction": 1.0, "moe_tile_tokens": 0.0,
               **NEUTRAL},
    # free, the per-step cost sat on its bound 0 (the layer costs of three models carry it) and
    # the bandwidth share on its bound 1 (as SGLang's). The prompt figures are not fitted: with the
    # other figures held, its H200 rows gave moe_upcast_efficiency 0.77, per_prompt_token_s 8.3 us
    # and the held-out TTFT of all engines rose 17.2 -> 18.7% (TensorRT-LLM on B200: Llama-3.3-70B 16.8
    # -> 18.0%, gpt-oss 61.9 -> 66.5%, DeepSeek-R1 alone fell 39.9 -> 37.4%): its TTFT lacks other
    # structure (batch waiting, its MoE backends). Fitted jointly with the rest (2026-12-06, 'Forms
    # tried' in the module docstring) it is 13 us per token and the compute share 0.68, and the
    # maximum-load rows' held-out error rises 8.7 -> 13.8%
    "tensorrt-llm": {"per_step_s": 0.0, "moe_tile_tokens": 0.0, "bandwidth_fraction": 1.0, **NEUTRAL},
}


def fitted_params(name: str) -> tuple[str, ...]:
    return tuple(k for k in PARAMS if k not in FIXED.get(name, {}))


def with_params(name: str, x, extra: dict[str, float] | None = None) -> Runtime:
    base = load_runtime(name)
    assert base.served is not None      # ENGINES all have a served block
    update = {**FIXED.get(name, {}), **(extra or {}), **{k: float(v) for k, v in zip(fitted_params(name), x)}}
    return base.model_copy(update={"served": base.served.model_copy(update=update)})


def residuals(name: str, rows, x, extra: dict[str, float] | None = None,
              metrics: tuple[str, ...] = ("tpot_s", "ttft_s", "tput_per_gpu")) -> np.ndarray:
    rt = with_params(name, x, extra)
    predict(rows, {name: rt})
    out = []
    for r in rows:
        if "error" in r.pred:
            out += [3.0] * len(metrics)
            continue
        out += [np.log(r.pred[k] / getattr(r, k)) for k in metrics]
    return np.asarray(out)


def dp_rows(name: str) -> list:
    """The engine's rows on the fitting chips with DP attention (ep > 1): aggregated, and the
    disaggregated ones (their decode workers' TPOT)."""
    rows = load_rows(kinds=("aggregated",))[0] + load_rows(kinds=("disaggregated",))[0]
    return [r for r in rows if r.runtime == name and r.fitted and r.parallel.ep > 1]


def fit_engine(name: str, rows) -> dict:
    """{'params', 'n', 'on_bounds', 'note', 'report'} of engine `name`'s fit on its rows of the
    fitting chips (`rows`: ServedRows), {} where it has none; 'report' is the fitter's FitReport
    of the aggregated fit (its residuals: log(pred / meas) of TPOT, TTFT and throughput per GPU,
    row by row)."""
    fit_rows = [r for r in rows if r.runtime == name and r.fitted]
    if not fit_rows:
        return {}
    keys = fitted_params(name)
    ep_rows = dp_rows(name)
    extra = {ALLTOALL: 0.0}
    x = [START[k] for k in keys]
    ids = [f"{r.runtime}/{r.model}/{r.hw}/{r.date}" for r in fit_rows]
    report = None
    a2a = None

    def aggregated(p: dict) -> np.ndarray:
        return residuals(name, fit_rows, [p[k] for k in keys], extra)

    def dp_tpot(p: dict) -> np.ndarray:
        return residuals(name, ep_rows, x, {ALLTOALL: p[ALLTOALL]}, ("tpot_s",))

    for _ in range(2 if ep_rows else 1):    # the aggregated fit, the all-to-all on the DP rows' TPOT, again
        report = fitter.fit(aggregated, [Param(k, LOW[k], HIGH[k], v) for k, v in zip(keys, x)], rows=ids,
                            max_iterations=30)
        x = [report.params[k] for k in keys]
        if ep_rows:
            a2a = fitter.fit(dp_tpot, [Param(ALLTOALL, *ALLTOALL_RANGE, 1e-5)], max_iterations=30)
            extra = {ALLTOALL: float(f"{a2a.params[ALLTOALL]:.4g}")}
    assert report is not None
    res = residuals(name, fit_rows, x, extra).reshape(-1, 3)
    med = np.median(np.abs(np.expm1(res)), axis=0)
    hws = sorted({r.hw for r in fit_rows})
    dates = sorted(r.date.lstrip("~<=") for r in fit_rows)
    bound = [b.split("=")[0] for b in report.at_bounds] + ([ALLTOALL] if a2a is not None and a2a.at_bounds else [])
    a2a_note = (f"; {ALLTOALL} from the TPOT of its {len(ep_rows)} DP-attention rows there (aggregated and "
                f"disaggregated decode workers)" if ep_rows else f"; {ALLTOALL} held at 0 (no DP-attention rows there)")
    return {"params": {**FIXED.get(name, {}), **dict(zip(keys, (float(f"{v:.4g}") for v in x))), **extra},
            "n": len(fit_rows), "on_bounds": bound, "report": report,
            "note": (f"fitted by membound.serve_calibrate on {datetime.date.today()} from {len(fit_rows)} canonical good "
                     f"InferenceMAX rows on {', '.join(hws)} (dates {dates[0]} .. {dates[-1]}): {', '.join(keys)}{a2a_note}; "
                     f"held, not fitted: {', '.join(FIXED.get(name, {})) or 'none'}; median |error| on them: "
                     f"TPOT {100 * med[0]:.1f}%, TTFT {100 * med[1]:.1f}%, throughput/GPU {100 * med[2]:.1f}%; "
                     f"every other chip held out (python -m membound.fidelity.serve_validate)")}


def mtp_residuals(rows, acceptance: float) -> np.ndarray:
    """log(pred / meas) of TPOT, TTFT and throughput per GPU of MTP `rows` (serve_validate
    ServedRows of kind "mtp"), predicted with every drafter at per-token `acceptance` (3.0 for a
    refused row's metrics, as `residuals`)."""
    drafters: dict = {}
    for r in rows:
        assert r.spec is not None, "an MTP row without its drafter"
        r.spec = drafters.setdefault((r.model, r.spec.gamma), mtp(r.model, r.spec.gamma, acceptance))
    predict(rows)
    return np.asarray([3.0 if "error" in r.pred else np.log(r.pred[k] / getattr(r, k))
                       for r in rows for k in ("tpot_s", "ttft_s", "tput_per_gpu")])


MTP_ACCEPTANCE_RANGE = (0.0, 0.99)


def fit_mtp_acceptance(rows=None) -> dict:
    """The per-token MTP acceptance of the served data set (one figure for every engine and chip:
    a property of its prompts), fitted on the MTP rows of the fitting chips only (FIT_HARDWARE)
    with the served costs as bundled: {"acceptance", "n", "dates", "on_bound"}. rows: ServedRows
    of kind "mtp" (default: the shipped file's); rows on other chips are ignored."""
    if rows is None:
        rows = load_rows(kinds=("mtp",))[0]
    fit_rows = [r for r in rows if r.fitted and r.kind == "mtp"]
    if not fit_rows:
        raise SystemExit("no MTP rows on the fitting chips")
    lo, hi = MTP_ACCEPTANCE_RANGE
    rep = fitter.fit(lambda p: mtp_residuals(fit_rows, p["acceptance"]), [Param("acceptance", lo, hi, 0.6)],
                     max_iterations=30)
    x = rep.params["acceptance"]
    dates = sorted(r.date.lstrip("~<=") for r in fit_rows)
    return {"acceptance": float(f"{x:.2g}"), "exact": x, "n": len(fit_rows), "dates": (dates[0], dates[-1]),
            "on_bound": bool(rep.at_bounds)}


def write(name: str, fit: dict, folder: Path) -> Path:
    """Update only the fitted keys of the runtime file's `served` block (the file's last block;
    the text above it is left byte for byte), writing the result into `folder` (the bundled
    file is the starting point when `folder` has none)."""
    path = folder / f"{name}.yaml"
    text = (path if path.is_file() else runtimes_dir() / f"{name}.yaml").read_text()
    head, sep, _ = text.partition("\nserved:\n")
    if not sep:
        raise SystemExit(f"{path}: no 'served:' block at the end to update")
    served = yaml.safe_load(text)["served"]
    served.update(fit["params"])
    served["calibration"] = fit["note"]
    block = yaml.safe_dump({"served": served}, sort_keys=False, width=110)
    path.write_text(head + "\n" + block)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.serve_calibrate", description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help="write the updated runtime files into DIR (default: print only)")
    where.add_argument("--write-bundled", action="store_true",
                       help="maintainers: rewrite the runtime files bundled in this source checkout")
    ap.add_argument("--engine", action="append", choices=ENGINES)
    ap.add_argument("--mtp", action="store_true", help="fit only the MTP rows' per-token acceptance (printed; the "
                    "figure lives in membound.serve_validate.INFERENCEMAX_MTP_ACCEPTANCE)")
    a = ap.parse_args(argv)
    if a.mtp:
        m = fit_mtp_acceptance()
        print(f"MTP acceptance per token on {', '.join(FIT_HARDWARE)} MTP rows ({m['n']} rows, dates "
              f"{m['dates'][0]} .. {m['dates'][1]}): {m['acceptance']} ({m['exact']:.4f})"
              + ("  ON A BOUND" if m["on_bound"] else ""))
        return 0
    rows, _ = load_rows()
    print(f"fitting on {', '.join(FIT_HARDWARE)} rows")
    for name in a.engine or ENGINES:
        fit = fit_engine(name, rows)
        if not fit:
            print(f"{name}: no rows to fit")
            continue
        print(f"{name}: {fit['params']}\n  on bounds: {fit['on_bounds'] or 'none'}\n  {fit['note']}")
        if a.out or a.write_bundled:
            folder = Path(a.out) if a.out else runtimes_dir()
            folder.mkdir(parents=True, exist_ok=True)
            print(f"  wrote {write(name, fit, folder)}")
    if not (a.out or a.write_bundled):
        print("nothing written (--out DIR writes the files there; --write-bundled rewrites the bundled ones)")
    clear_caches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
