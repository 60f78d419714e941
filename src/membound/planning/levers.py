"""What the software multipliers buy: each lever's speed-up on its own (quantization formats
by batch, speculative decoding by batch, the best number of drafted tokens) and how they compose
(`explain_levers`: one configuration's speed-up over plain decoding — batch 1, bf16 weights
and KV, no speculation — split into each lever's share).

The levers themselves are plain objects lower down (`Quantization`, `SpeculativeDecoding`,
`batch=`); this module only evaluates them, vectorised over batches where it can.

Levers are added in sequence (batch, weight format, KV format, speculative decoding), each
factor measured against the configuration before it, so the factors multiply to the total;
a lever's share is its log-factor over the log-total (shares sum to 1). Because levers
interact (speculation pays less once batching has made the step compute-bound), each
lever's factor when removed from the full configuration is reported too.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .batching import batch_grid
from ..errors import InvalidInputError
from ..physics.estimate import estimate, prepare
from ..physics.result import Result, equal_values
from ..physics.quantization import Quantization
from ..physics.speculative import SpeculativeDecoding
from ..base.display import pre_html

LEVERS = ("batch", "weights", "kv", "speculative")


@dataclass(frozen=True)
class LeverStep:
    lever: str                   # "baseline" or one of LEVERS
    setting: str                 # e.g. "batch 16", "weights int4"
    per_user_tok_s: float
    total_tok_s: float
    factor_total: float          # aggregate tok/s over the previous step
    factor_per_user: float       # per-user tok/s over the previous step
    share: float                 # log(factor_total) / log(total speed-up); 0 for the baseline
    removal_factor_total: float  # full aggregate tok/s over the full configuration without this lever
    fits: bool


@dataclass(frozen=True)
class LeverReport:
    steps: tuple[LeverStep, ...]  # baseline first
    full: Result                  # the Result with every lever on

    @property
    def speedup_total(self) -> float:
        return self.steps[-1].total_tok_s / self.steps[0].total_tok_s

    @property
    def speedup_per_user(self) -> float:
        return self.steps[-1].per_user_tok_s / self.steps[0].per_user_tok_s

    def __str__(self) -> str:
        lines = [f"{'step':<31}{'tok/s/user':>11}{'tok/s total':>13}{'x total':>9}{'x user':>8}"
                 f"{'share':>8}{'x if removed':>14}"]
        for s in self.steps:
            fit = "" if s.fits else "  (does not fit)"
            if s.lever == "baseline":
                tail = f"{'':>9}{'':>8}{'':>8}{'':>14}"
            else:
                tail = (f"{s.factor_total:>9.2f}{s.factor_per_user:>8.2f}{s.share:>8.0%}"
                        f"{s.removal_factor_total:>14.2f}")
            lines.append(f"{s.setting[:30]:<31}{s.per_user_tok_s:>11.1f}{s.total_tok_s:>13.0f}{tail}{fit}")
        lines.append(f"all levers: {self.speedup_total:.2f}x aggregate, {self.speedup_per_user:.2f}x per user")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return pre_html(str(self))


def explain_levers(model, hardware, *, batch: int = 16, weight_dtype: str = "int4", kv_dtype: str | None = None,
                   speculative=None, **estimate_kwargs) -> LeverReport:
    """Run `estimate()` with the levers added one at a time and removed one at a time.

    The ladder holds the levers asked for: batch and weight format always (their defaults, 16 and
    int4, are what the question is about), a KV format only where `kv_dtype` is given (the KV cache
    stays bf16, the baseline's, otherwise), speculative decoding only where `speculative` is.
    estimate_kwargs: the rest of the configuration (prompt_tokens, output_tokens, n_chips,
    runtime, activation_dtype, ...), shared by every step. Steps that would not fit in memory
    are still computed (fits=False) so the ladder is complete.
    """
    for k in ("quantization", "check_memory"):
        if k in estimate_kwargs:
            raise InvalidInputError(k, estimate_kwargs[k], f"not here: explain_levers sets {k}")
    full = dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype or "bf16", speculative=speculative)
    plain = dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", speculative=None)
    keys = dict(zip(LEVERS, ("batch", "weight_dtype", "kv_dtype", "speculative")))
    asked = [lv for lv in LEVERS if (lv != "kv" or kv_dtype is not None) and (lv != "speculative" or speculative)]

    def run(levers):
        return estimate(model, hardware, check_memory=False, **estimate_kwargs, **levers)

    full_r = run(full)
    rungs = [("baseline", "batch 1, bf16, no spec", run(plain))]
    cur = dict(plain)
    for lever in asked:
        k = keys[lever]
        cur[k] = full[k]
        label = {"batch": f"+ batch {batch}", "weights": f"+ weights {weight_dtype}",
                 "kv": f"+ KV {kv_dtype}",
                 "speculative": "+ speculative" if speculative is None else
                 f"+ spec gamma={speculative.gamma} ({getattr(speculative.draft, 'name', speculative.draft) or 'head'})"}[lever]
        rungs.append((lever, label, run(cur)))
    log_total = math.log(rungs[-1][2].decode_tok_s_total / rungs[0][2].decode_tok_s_total)
    steps, prev = [], None
    for lever, label, r in rungs:
        if prev is None:
            steps.append(LeverStep(lever, label, r.decode_tok_s_per_user, r.decode_tok_s_total, 1.0, 1.0, 0.0,
                                   1.0, r.memory.fits))
        else:
            ft = r.decode_tok_s_total / prev.decode_tok_s_total
            without = run({**full, keys[lever]: plain[keys[lever]]})
            steps.append(LeverStep(lever, label, r.decode_tok_s_per_user, r.decode_tok_s_total, ft,
                                   r.decode_tok_s_per_user / prev.decode_tok_s_per_user,
                                   math.log(ft) / log_total if log_total else 0.0,
                                   full_r.decode_tok_s_total / without.decode_tok_s_total, r.memory.fits))
        prev = r
    return LeverReport(tuple(steps), full_r)


@dataclass(frozen=True)
class QuantSpeedup:
    """Per-user decode speed-up of each format over a baseline, at each batch (arrays)."""

    batch: np.ndarray                   # batch sizes
    baseline: str
    speedup: dict[str, np.ndarray]      # format name -> speed / baseline speed, per batch
    fits: dict[str, np.ndarray]         # format name (baseline included) -> bool per batch

    def __str__(self) -> str:
        names = list(self.speedup)
        lines = [f"{'batch':>6} " + " ".join(f"{n:>10}" for n in names) + f"   (x over {self.baseline})"]
        for i, b in enumerate(self.batch):
            lines.append(f"{int(b):>6} " + " ".join(f"{self.speedup[n][i]:>10.2f}" for n in names))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return pre_html(str(self))

    def __eq__(self, other) -> bool:
        return equal_values(self, other)

    __hash__ = None     # type: ignore[assignment]  # unhashable: holds arrays, compared by value


def quantization_speedup(model, hardware, weight_dtypes=("int4", "fp8"), batches=(1, 4, 16, 64, 256),
                         baseline="bf16", **estimate_kwargs) -> QuantSpeedup:
    """Speed-up over `baseline` of each weight format at each batch, all else equal.

    weight_dtypes / baseline: dtype names (weights only; kv_dtype from estimate_kwargs applies to
    all) or `Quantization` objects (weights, KV, activations and dequant_overhead together).
    Weight-only int4 pays off while the step is memory-bound (~16/4.125 = 3.9x fewer weight
    bytes) and stops paying once it is compute-bound (dequant_overhead makes it slower than
    bf16 there); fp8 weights with fp8 activations halve the bytes and double the compute peak
    where the device has FP8 (not on an A100: there fp8 weights fall back to bf16 compute).
    One vectorised evaluation per format over all batches. Memory fit is reported, not enforced.
    """
    for k in ("weight_dtype", "activation_dtype", "quantization", "batch"):
        if k in estimate_kwargs:
            raise InvalidInputError(k, estimate_kwargs[k], "not here: give formats in weight_dtypes/baseline")
    b = batch_grid(batches)
    kv = estimate_kwargs.pop("kv_dtype", None)

    def run(q):
        q = q if isinstance(q, Quantization) else Quantization(q, kv)
        r = prepare(model, hardware, quantization=q, **estimate_kwargs).evaluate(batch=b)
        return (np.broadcast_to(np.asarray(r["decode_tok_s_per_user"], float), b.shape),
                np.broadcast_to(np.asarray(r["fits"]), b.shape).copy())

    def label(q):
        return q if isinstance(q, str) else f"{q.weights}/{q.kv or 'bf16'}/{q.activations or 'auto'}"

    if isinstance(weight_dtypes, str) or not isinstance(weight_dtypes, Iterable):   # 0: a TypeError mid-run
        raise InvalidInputError("weight_dtypes", weight_dtypes, "a sequence of dtype names or mb.Quantization objects")
    base_speed, base_fits = run(baseline)
    speedup, fits = {}, {label(baseline): base_fits}
    for q in weight_dtypes:
        s, f = run(q)
        speedup[label(q)], fits[label(q)] = s / base_speed, f
    return QuantSpeedup(b, label(baseline), speedup, fits)


def _check_gammas(gammas):
    g = list(gammas)
    if not g or any(isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 1 for x in g):
        raise InvalidInputError("gammas", gammas, "a non-empty sequence of integers >= 1")
    return [int(x) for x in g]


def best_gamma(model, hardware, *, draft=None, acceptance_rate=None, mean_accepted_tokens=None,
               gammas=range(1, 9), draft_cost: float | None = None, verify_tokens=None, head_params=None,
               head_dtype: str = "bf16", head_vocab: int | None = None, **estimate_kwargs):
    """The number of drafted tokens with the highest per-user decode speed.

    Returns (gamma, Result). Tries each gamma with `estimate()` (same model, hardware and
    estimate_kwargs); with `mean_accepted_tokens` fixed, gammas below tau - 1 are skipped.
    Example: `mb.best_gamma("llama-3.1-70b", "h100-sxm", n_chips=8, draft="llama-3.2-1b",
    acceptance_rate=0.8, batch=1)`.
    """
    best = None
    for g in _check_gammas(gammas):
        if mean_accepted_tokens is not None and mean_accepted_tokens > g + 1:
            continue
        if verify_tokens is not None and verify_tokens < g + 1:
            continue
        spec = SpeculativeDecoding(draft=draft, gamma=g, acceptance_rate=acceptance_rate,
                                   mean_accepted_tokens=mean_accepted_tokens, verify_tokens=verify_tokens,
                                   draft_cost=draft_cost, head_params=head_params, head_dtype=head_dtype,
                                   head_vocab=head_vocab)
        r = estimate(model, hardware, speculative=spec, **estimate_kwargs)
        if best is None or r.decode_tok_s_per_user > best[1].decode_tok_s_per_user:
            best = (g, r)
    if best is None:
        raise InvalidInputError("gammas", list(gammas), "at least one gamma with gamma + 1 >= mean_accepted_tokens "
                                "and <= verify_tokens")
    return best


def speculative_speedup(model, hardware, speculative: SpeculativeDecoding, batches=(1, 4, 16, 64, 256),
                        **estimate_kwargs):
    """Per-user decode speed-up of `speculative` over plain decoding at each batch (np.ndarray).

    The verify pass streams the same weights as a plain step but does gamma+1 positions of
    FLOPs, so the speed-up shrinks as the batch grows and the step turns compute-bound (and
    falls below 1 past it). Two vectorised evaluations over all batches."""
    if not isinstance(speculative, SpeculativeDecoding):
        raise InvalidInputError("speculative", speculative, "a mb.SpeculativeDecoding")
    if "batch" in estimate_kwargs or "speculative" in estimate_kwargs:
        raise InvalidInputError("estimate_kwargs", sorted(estimate_kwargs), "no batch or speculative here")
    b = batch_grid(batches)
    fast = prepare(model, hardware, speculative=speculative, **estimate_kwargs).evaluate(batch=b)
    plain = prepare(model, hardware, **estimate_kwargs).evaluate(batch=b)
    ratio = np.asarray(fast["decode_tok_s_per_user"], float) / np.asarray(plain["decode_tok_s_per_user"], float)
    return np.broadcast_to(ratio, b.shape).copy()
