"""Speculative decoding: a cheap drafter proposes gamma tokens, the target checks gamma+1
positions in one pass, and accepts a prefix. Output is identical to the target's own (the
acceptance rule preserves its distribution); only speed changes.

With per-token acceptance rate alpha, a round yields (1 - alpha^(gamma+1)) / (1 - alpha)
tokens on average (gamma + 1 when alpha = 1). A round costs gamma draft steps plus one target
step over gamma+1 positions: the same weight bytes as a plain step but gamma+1 times the
FLOPs, so the gain shrinks as the batch grows and the step turns compute-bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidInputError

ALPHA_ONE = 1e-9   # |1 - alpha| below this is treated as alpha = 1 (the limit gamma + 1)


def expected_tokens_per_round(alpha, gamma):
    """(1 - alpha^(gamma+1)) / (1 - alpha), with the alpha -> 1 limit gamma + 1."""
    if isinstance(alpha, (int, float)) and isinstance(gamma, (int, float)):
        if 1.0 - alpha < ALPHA_ONE:
            return gamma + 1.0
        return (1.0 - alpha ** (gamma + 1.0)) / (1.0 - alpha)
    import numpy as np
    alpha = np.asarray(alpha, dtype=float)
    one = 1.0 - alpha < ALPHA_ONE
    safe = np.where(one, 0.5, alpha)
    return np.where(one, gamma + 1.0, (1.0 - safe ** (gamma + 1.0)) / (1.0 - safe))


@dataclass(frozen=True)
class SpeculativeDecoding:
    """A drafting scheme.

    draft: a `Model` (or preset name) run on the same device, one chip, batch as the target;
           or None for a self-drafting head (Medusa/EAGLE) whose cost is `draft_cost`.
    gamma: tokens drafted per round.
    acceptance_rate: per-token probability alpha that a drafted token is accepted; or
    mean_accepted_tokens: tau, tokens produced per target pass (bonus token included), as
           tree/multi-head methods report it. Give exactly one of the two.
    verify_tokens: positions the target checks per round (gamma + 1 by default; a tree checks more).
    draft_cost: for draft=None, one drafting step's cost as a fraction of a plain target step
           (an EAGLE head is about one decoder layer plus the LM head: ~0.05-0.1 on 8B models).
    """

    draft: object = None
    gamma: int = 4
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None
    verify_tokens: int | None = None
    draft_cost: float = 0.1

    def __post_init__(self):
        if not isinstance(self.gamma, int) or isinstance(self.gamma, bool) or self.gamma < 1:
            raise InvalidInputError("gamma", self.gamma, "an integer >= 1")
        a, t = self.acceptance_rate, self.mean_accepted_tokens
        if (a is None) == (t is None):
            raise InvalidInputError("acceptance_rate", a, "exactly one of acceptance_rate or mean_accepted_tokens")
        if a is not None and not (isinstance(a, (int, float)) and 0 <= a <= 1):
            raise InvalidInputError("acceptance_rate", a, "a probability in [0, 1]")
        if t is not None and not (isinstance(t, (int, float)) and 1 <= t <= self.gamma + 1):
            raise InvalidInputError("mean_accepted_tokens", t, f"a number in [1, gamma+1 = {self.gamma + 1}]")
        if self.verify_tokens is not None and (not isinstance(self.verify_tokens, int) or self.verify_tokens < self.gamma + 1):
            raise InvalidInputError("verify_tokens", self.verify_tokens, f"an integer >= gamma+1 = {self.gamma + 1}")
        if not (isinstance(self.draft_cost, (int, float)) and math.isfinite(self.draft_cost) and self.draft_cost >= 0):
            raise InvalidInputError("draft_cost", self.draft_cost, "a finite fraction >= 0")

    @property
    def tokens_per_round(self) -> float:
        if self.mean_accepted_tokens is not None:
            return float(self.mean_accepted_tokens)
        return float(expected_tokens_per_round(float(self.acceptance_rate), self.gamma))

    @property
    def positions(self) -> int:
        return self.verify_tokens or self.gamma + 1


def best_gamma(estimate_fn, gammas=range(1, 11), **kwargs):
    """Try each gamma with `estimate_fn(gamma)` (returning a Result) and return (gamma, result)
    with the highest per-user decode speed."""
    best = None
    for g in gammas:
        r = estimate_fn(g, **kwargs)
        if best is None or r.decode_tok_s_per_user > best[1].decode_tok_s_per_user:
            best = (g, r)
    return best
