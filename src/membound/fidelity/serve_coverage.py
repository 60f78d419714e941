"""Served coverage: does `serve` predict every configuration a real server runs?

A smoke over the standard InferenceMAX / InferenceX configurations, on any chips: engines vLLM,
SGLang, TensorRT-LLM (NVIDIA) and ATOM (AMD; vLLM's served costs stand in, as in
serve_validate), the benchmark's models and precisions, scenarios 1k/1k, 1k/8k and 8k/1k
(lengths uniform in [0.8 L, L]), tensor parallel and, for MoE models, expert parallel with
data-parallel attention over 1, 2, 4 or 8 chips, concurrency 4 to 1024; with `mtp`, speculative
decoding with the model's MTP module; with `disagg`, prefill and decode pools (wide expert
parallelism up to the chip's scale-up domain).

A configuration is one a real server runs when its weights take at most `WEIGHT_SHARE` of each
chip's memory (the rest holds at least one request's KV cache and the activations: vLLM's default
gpu_memory_utilization is 0.9). Any such configuration `serve` refuses is a coverage failure,
reported with the reason.

    python -m membound.fidelity.serve_coverage [--chips b300,gb300,...] [--mtp] [--disagg]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..serving.disagg import solve_disaggregated
from ..catalog.dtypes import get_dtype
from ..errors import MemboundError
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from ..physics.parallel import Parallel
from ..serving import Uniform, build, solve
from ..physics.speculative import mtp

WEIGHT_SHARE = 0.85
CHIPS = ("h100-sxm", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x")
# (preset, precision as the benchmark labels it)
MODELS = (("llama-3.3-70b", "fp8"), ("llama-3.3-70b", "fp4"), ("gpt-oss-120b", "fp4"), ("deepseek-r1", "fp8"),
          ("deepseek-r1", "fp4"), ("minimax-m2", "fp8"), ("qwen3.5-397b-a17b", "bf16"),
          ("qwen3.5-397b-a17b", "fp8"), ("kimi-k2.5", "int4"), ("kimi-k2.5", "fp4"))
SCENARIOS = {"1k1k": (1024, 1024), "1k8k": (1024, 8192), "8k1k": (8192, 1024)}
CONCURRENCY = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
ENGINES = {"nvidia": (("vllm", "vllm"), ("sglang", "sglang"), ("trtllm", "tensorrt-llm")),
           "amd": (("atom", "vllm"), ("vllm", "vllm"), ("sglang", "sglang"))}
MTP_ENGINES = ("sglang", "tensorrt-llm")
MTP_MODELS = ("deepseek-r1", "minimax-m2", "qwen3.5-397b-a17b")     # presets whose checkpoints carry MTP layers


def weight_dtype(precision: str, model: str, vendor: str) -> str:
    """The benchmark's precision label as a weight format: fp4 is NVFP4 on NVIDIA, MXFP4 on AMD
    and for gpt-oss everywhere (natively MXFP4)."""
    if precision == "fp4":
        return "mxfp4" if model.startswith("gpt-oss") or vendor == "AMD" else "nvfp4"
    return precision


@dataclass
class Coverage:
    """Configurations x concurrencies tried, how many were predicted, and the refusals by reason."""

    tried: int = 0
    predicted: int = 0
    refused: Counter[str] = field(default_factory=Counter)     # reason -> configurations x concurrencies
    examples: dict[str, str] = field(default_factory=dict)     # reason -> one configuration

    @property
    def share(self) -> float:
        return self.predicted / self.tried if self.tried else 1.0

    def add(self, n: int, label: str, error: str | None = None, ok: np.ndarray | None = None) -> None:
        self.tried += n
        if error is None and ok is not None and not ok.all():
            error = f"non-finite or non-positive figures at {int((~ok).sum())} of {n} concurrencies"
            n_bad = int((~ok).sum())
            self.predicted += n - n_bad
        else:
            n_bad = n if error is not None else 0
            self.predicted += n - n_bad
        if error is not None:
            key = error.split(":")[0][:100]
            self.refused[key] += n_bad
            self.examples.setdefault(key, f"{label}: {error[:200]}")

    def __str__(self) -> str:
        lines = [f"served coverage: {self.predicted}/{self.tried} configurations x concurrencies predicted "
                 f"({100 * self.share:.1f}%)"]
        for key, n in self.refused.most_common():
            lines.append(f"  {n} refused, e.g. {self.examples[key]}")
        return "\n".join(lines)


def layouts(model, n: int) -> list[Parallel]:
    """Tensor parallel over n chips, and for a MoE model expert parallel with data-parallel attention."""
    out = [Parallel(tp=n)] if model.n_heads % n == 0 else []
    if model.n_experts and n > 1:
        out.append(Parallel(ep=n))
    return out


def runnable(model, hw, wd: str, layout: Parallel) -> bool:
    """Whether a real server runs this: the weights a chip holds (non-expert weights split over tp,
    replicated over ep; ceil(E/ep) experts per chip) are at most WEIGHT_SHARE of its memory."""
    b = get_dtype(wd).bytes
    experts = model.n_moe_layers * model.n_experts * model.expert_params
    per_chip_experts = -(-model.n_experts // layout.ep) / model.n_experts if model.n_experts else 1.0
    chip = (model.total_params - experts) / layout.tp * b + experts * per_chip_experts / layout.tp * b
    return chip <= WEIGHT_SHARE * hw.capacity_bytes


def smoke(chips=CHIPS, models=MODELS, scenarios=SCENARIOS, concurrency=CONCURRENCY, sizes=(1, 2, 4, 8),
          mtp_drafts: tuple[int, ...] = (), disagg: bool = False) -> Coverage:
    """Serve every runnable configuration of the grid (module docstring) with the steady-state
    solver, all concurrencies at once; count what is predicted and what is refused."""
    cov = Coverage()
    conc = np.asarray(concurrency, float)
    for chip in chips:
        hw = load_hardware(chip)
        engines = ENGINES["amd" if hw.vendor == "AMD" else "nvidia"]
        for name, precision in models:
            m = load_model(name)
            wd = weight_dtype(precision, name, hw.vendor)
            for n in sizes:
                for layout in layouts(m, n):
                    if not runnable(m, hw, wd, layout):
                        continue
                    for label, runtime in engines:
                        drafts = (0, *mtp_drafts) if runtime in MTP_ENGINES and name in MTP_MODELS else (0,)
                        for gamma in drafts:
                            for sc, (S, T) in scenarios.items():
                                what = f"{chip} {name} {wd} {layout} {label} {sc}" + (f" mtp{gamma}" if gamma else "")
                                _one(cov, what, m.name, chip, wd, layout, runtime, S, T, conc,
                                     mtp(name, gamma) if gamma else None)
            if disagg and m.n_experts:
                _pools(cov, m, hw, wd, engines, scenarios, conc)
    return cov


def _one(cov, what, model, chip, wd, layout, runtime, S, T, conc, spec) -> None:
    prompt, output = Uniform(int(0.8 * S), S), Uniform(int(0.8 * T), T)
    try:
        sm, sched, _ = build(model, chip, prompt=prompt, output=output, weight_dtype=wd, kv_dtype="fp8",
                             runtime=runtime, n_chips=layout.chips, parallel=layout, speculative=spec)
        st = solve(sm, sched, prompt.mean, output.mean, concurrency=conc)
    except MemboundError as e:
        cov.add(len(conc), what, str(e))
        return
    ok = np.isfinite(st.tau) & np.isfinite(st.ttft) & (st.tau > 0) & np.isfinite(st.request_rate) & (st.request_rate > 0)
    cov.add(len(conc), what, ok=ok)


def _pools(cov, m, hw, wd, engines, scenarios, conc) -> None:
    """Disaggregated: a prefill pool of tp-8 (or ep) workers and one decode worker of wide EP, each
    decode size from 8 up to the scale-up domain (72 on an NVL72 rack)."""
    domain = hw.interconnect.max_chips if hw.interconnect else 1
    sizes = [d for d in (8, 16, 24, 32, 48, 64, 72) if d <= domain]
    for d in sizes:
        dec = Parallel(ep=d)
        pre = Parallel(tp=8) if m.n_heads % 8 == 0 else Parallel(ep=8)
        if not (runnable(m, hw, wd, dec) and runnable(m, hw, wd, pre)):
            continue
        for label, runtime in engines:
            if runtime == "vllm":
                continue
            for sc, (S, T) in scenarios.items():
                prompt, output = Uniform(int(0.8 * S), S), Uniform(int(0.8 * T), T)
                what = f"{hw.name} {m.name} {wd} disagg 2x{pre} + {dec} {label} {sc}"
                kw = dict(prompt=prompt, output=output, weight_dtype=wd, kv_dtype="fp8", runtime=runtime)
                try:
                    sm_p, sched_p, _ = build(m.name, hw.name, n_chips=pre.chips, parallel=pre, **kw)
                    sm_d, sched_d, _ = build(m.name, hw.name, n_chips=dec.chips, parallel=dec, **kw)
                    st = solve_disaggregated(sm_p, sched_p, sm_d, sched_d, 2, 1, prompt.mean, output.mean, conc)
                except MemboundError as e:
                    cov.add(len(conc), what, str(e))
                    continue
                ok = np.isfinite(st.ttft) & np.isfinite(st.request_rate) & (st.request_rate > 0) & np.isfinite(st.step)
                cov.add(len(conc), what, ok=ok)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.serve_coverage", description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default=",".join(CHIPS), help="comma-separated device names")
    ap.add_argument("--mtp", action="store_true", help="also MTP speculative decoding (1 and 3 draft steps)")
    ap.add_argument("--disagg", action="store_true", help="also disaggregated prefill/decode pools")
    a = ap.parse_args(argv)
    try:
        cov = smoke(tuple(c.strip() for c in a.chips.split(",") if c.strip()),
                    mtp_drafts=(1, 3) if a.mtp else (), disagg=a.disagg)
    except MemboundError as e:
        ap.error(str(e))
    print(cov)
    return 0 if not cov.refused else 1


if __name__ == "__main__":
    sys.exit(main())
