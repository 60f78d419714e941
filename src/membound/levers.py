"""How the software multipliers compose: one configuration's speed-up over plain decoding
(batch 1, bf16 weights and KV, no speculation), split into each lever's share.

Levers are added in sequence (batch, weight format, KV format, speculative decoding), each
factor measured against the configuration before it, so the factors multiply to the total;
a lever's share is its log-factor over the log-total (shares sum to 1). Because levers
interact (speculation pays less once batching has made the step compute-bound), each
lever's factor when removed from the full configuration is reported too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidInputError
from .estimate import estimate

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
    steps: tuple                 # LeverStep, baseline first
    full: object                 # the Result with every lever on

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


def explain_levers(model, hardware, *, batch: int = 16, weight_dtype: str = "int4", kv_dtype: str = "fp8",
                   speculative=None, **estimate_kwargs) -> LeverReport:
    """Run `estimate()` with the levers added one at a time and removed one at a time.

    estimate_kwargs: the rest of the configuration (prompt_tokens, output_tokens, n_chips,
    runtime, activation_dtype, ...), shared by every step. Steps that would not fit in memory
    are still computed (fits=False) so the ladder is complete.
    """
    for k in ("quantization", "check_memory"):
        if k in estimate_kwargs:
            raise InvalidInputError(k, estimate_kwargs[k], f"not here: explain_levers sets {k}")
    full = dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, speculative=speculative)
    plain = dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", speculative=None)
    keys = dict(zip(LEVERS, ("batch", "weight_dtype", "kv_dtype", "speculative")))

    def run(levers):
        return estimate(model, hardware, check_memory=False, **estimate_kwargs, **levers)

    full_r = run(full)
    rungs = [("baseline", "batch 1, bf16, no spec", run(plain))]
    cur = dict(plain)
    for lever in LEVERS:
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
