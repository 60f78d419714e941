"""Speculative decoding: a cheap drafter proposes gamma tokens, the target checks gamma+1
positions in one pass, and accepts a prefix. Output is identical to the target's own (the
acceptance rule preserves its distribution); only speed changes.

With per-token acceptance rate alpha, a round yields (1 - alpha^(gamma+1)) / (1 - alpha)
tokens on average (gamma + 1 when alpha = 1). A round costs gamma draft steps plus one target
step over gamma+1 positions (more for a tree): the same weight bytes as a plain step but
gamma+1 times the FLOPs, so the gain shrinks as the batch grows and the step turns
compute-bound.

A drafter is costed by its own physics (`core.evaluate`): a draft model by its weights, KV
and FLOPs (sharded over the target's tensor-parallel group, as vLLM and SGLang run it); a
self-drafting head (EAGLE/Medusa) by its own parameters in its own dtype (bf16 by default,
whatever the target's format) plus, for EAGLE-1/2, a re-read of the target's LM head each draft
step. Both also prefill the prompt (TTFT). `draft_cost` (a fixed fraction of a plain target
step) is kept for formula-level use such as Leviathan et al.'s c.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, is_finite_number
from ..catalog.model import load_model, Model
from ..catalog.dtypes import get_dtype
import numpy as np

if TYPE_CHECKING:
    from ..catalog.model import Model

ALPHA_ONE = 1e-9   # |1 - alpha| below this is treated as alpha = 1 (the limit gamma + 1)

# How strongly the verified positions of one sequence route to the same MoE experts: a pass of
# v positions over B sequences reads E(1 - (1 - k/E)^(B * v_eff)) experts per layer with
# v_eff = 1 + (v - 1)(1 - rho) (rho = 0: independent tokens; rho = 1: one token per sequence).
# The default is the physics-neutral rho = 0: every verified position routes like any other
# token (the same uniform-routing law as a batch). Tree tokens share their whole context and
# differ by a few tokens, so they may route together; the one measurement of it is an explicit,
# named option, never a default:
ROUTE_CORRELATION = 0.0
# Fitted once on the only MoE speculative row (AngelSlim EAGLE-3 on Qwen3-30B-A3B, spec-141 /
# spec-140, tau 2.04, assuming a 60-token tree; multiplier_check marks it as the anchor): 60 tree
# tokens then read like ~1.24 independent tokens (rho = 0 would read ~125 of 128 experts and
# predict a 0.2x slow-down against the measured 1.37x). One row, one engine: pass it yourself
# (`route_correlation=ANGELSLIM_ROUTE_CORRELATION`) when you trust it for your MoE model.
ANGELSLIM_ROUTE_CORRELATION = 0.996


def expected_tokens_per_round(alpha, gamma):
    """(1 - alpha^(gamma+1)) / (1 - alpha), with the alpha -> 1 limit gamma + 1: the tokens one
    round of `gamma` drafted tokens yields when each is accepted with probability `alpha`.
    alpha in [0, 1] (a number or an array), gamma an integer >= 0; else InvalidInputError."""
    _check_round(alpha, gamma)
    if isinstance(alpha, (int, float)) and isinstance(gamma, (int, float)):
        if 1.0 - alpha < ALPHA_ONE:
            return gamma + 1.0
        return (1.0 - alpha ** (gamma + 1.0)) / (1.0 - alpha)
    alpha = np.asarray(alpha, dtype=float)
    one = 1.0 - alpha < ALPHA_ONE
    safe = np.where(one, 0.5, alpha)
    return np.where(one, gamma + 1.0, (1.0 - safe ** (gamma + 1.0)) / (1.0 - safe))


def _check_round(alpha, gamma) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Integral) or not 0 <= int(gamma) <= 10**6:
        raise InvalidInputError("gamma", gamma, "an integer from 0 to 1,000,000 (tokens drafted per round)")
    a = np.asarray(alpha)
    if a.dtype.kind not in "iuf" or a.dtype == bool or not np.all((a >= 0) & (a <= 1)):   # NaN fails too
        raise InvalidInputError("alpha", alpha, "an acceptance rate from 0 to 1 (a number or an array)")


@dataclass(frozen=True)
class SpeculativeDecoding:
    """A drafting scheme.

    draft: a `Model` (or preset name) run on the same devices (tensor-parallel like the target),
           batch as the target; or None for a self-drafting head (EAGLE/Medusa), costed by:
    head_params: parameters of the head's own layers, read (bytes) and multiplied (FLOPs) every
           draft step and held in memory; None = one decoder layer of the target
           (`head_param_count(model, lm_head=False)`), an EAGLE head.
    head_dtype: the head's weight format ("bf16": heads are trained and shipped unquantized,
           and stay so when the target is quantized).
    head_vocab: None = the head re-reads the target's LM head (vocab x hidden, in the target's
           weight format) every draft step (EAGLE-1/2); an int = it has its own LM head of that
           vocabulary, counted with its own parameters (EAGLE-3: 32,000); 0 = no LM head.
    draft_cost: instead of a head, one drafting step as a fixed fraction of a plain target step
           (Leviathan et al.'s c). It scales with the target's step, so it is wrong once the
           target is quantized and the head is not; prefer the head's parameters.
    gamma: tokens drafted per round (draft steps; a tree's depth).
    acceptance_rate: per-token probability alpha that a drafted token is accepted; or
    mean_accepted_tokens: tau, tokens produced per target pass (bonus token included), as
           tree/multi-head methods report it. Give exactly one of the two.
    verify_tokens: positions the target checks per round (gamma + 1 by default; a tree checks more).
    route_correlation: rho in [0, 1], how far the verified positions of one sequence route to
           the same MoE experts (0: independently; see ROUTE_CORRELATION); no effect on dense models.
    """

    draft: Model | str | None = None   # a draft model (object or name), or None
    gamma: int = 4
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None
    verify_tokens: int | None = None
    draft_cost: float | None = None
    head_params: float | None = None
    head_dtype: str = "bf16"
    head_vocab: int | None = None
    route_correlation: float = ROUTE_CORRELATION

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
        if self.draft_cost is not None and not (_real(self.draft_cost) and self.draft_cost >= 0):
            raise InvalidInputError("draft_cost", self.draft_cost, "a finite fraction >= 0, or None")
        if self.head_params is not None and not (_real(self.head_params) and self.head_params >= 0):
            raise InvalidInputError("head_params", self.head_params, "a finite parameter count >= 0, or None")
        if self.head_vocab is not None and (isinstance(self.head_vocab, bool) or not isinstance(self.head_vocab, int)
                                            or self.head_vocab < 0):
            raise InvalidInputError("head_vocab", self.head_vocab, "an integer >= 0, or None (the target's LM head)")
        if not (_real(self.route_correlation) and 0 <= self.route_correlation <= 1):
            raise InvalidInputError("route_correlation", self.route_correlation, "a number in [0, 1]")
        get_dtype(self.head_dtype)          # an unknown name raises UnknownNameError
        head_given = self.head_params is not None or self.head_vocab is not None
        if self.draft is not None and (self.draft_cost is not None or head_given):
            raise InvalidInputError("draft", self.draft, "None when draft_cost or a head is given (a draft model is "
                                    "costed by its own weights)")
        if self.draft_cost is not None and head_given:
            raise InvalidInputError("draft_cost", self.draft_cost, "None when head_params/head_vocab are given "
                                    "(a fraction or a head, not both)")

    @property
    def tokens_per_round(self) -> float:
        if self.mean_accepted_tokens is not None:
            return float(self.mean_accepted_tokens)
        assert self.acceptance_rate is not None     # exactly one of the two is set (__post_init__)
        return float(expected_tokens_per_round(float(self.acceptance_rate), self.gamma))

    @property
    def positions(self) -> int:
        return self.verify_tokens or self.gamma + 1

    def head(self, model) -> tuple[float, float]:
        """(own parameters, target LM-head parameters re-read) of one draft step of the head on
        `model` (a Model); (0, 0) for a draft model or a `draft_cost` fraction."""
        if self.draft is not None or self.draft_cost is not None:
            return 0.0, 0.0
        own = float(self.head_params) if self.head_params is not None else head_param_count(model, lm_head=False)
        h = float(model.hidden_size)
        if self.head_vocab is None:
            return own, float(model.vocab_size) * h
        return own + min(float(self.head_vocab), float(model.vocab_size)) * h, 0.0


def _real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and is_finite_number(x)


def predicted_speedup(alpha, gamma, cost_ratio):
    """Leviathan et al. 2023 (arXiv:2211.17192, Theorem 3.8): expected wall-time speed-up of a
    draft whose step costs `cost_ratio` (c) target steps, when the target's verification pass
    costs the same as one plain step: (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).
    membound's `estimate()` refines this with the physics of both steps (the verify pass's
    extra FLOPs, the draft's own bytes and latency floor)."""
    if not is_finite_number(cost_ratio) or cost_ratio < 0:      # NaN or -1 gave a NaN or negative speed-up
        raise InvalidInputError("cost_ratio", cost_ratio, "a finite draft cost >= 0, in target steps")
    return expected_tokens_per_round(alpha, gamma) / (gamma * cost_ratio + 1.0)


def head_param_count(model, layers: int = 1, lm_head: bool = True, vocab: int | None = None) -> float:
    """Parameters one self-drafting step reads: `layers` decoder layers of the target's shape
    ((active - embeddings) / n_layers each) plus, with lm_head, one LM head (vocab x hidden).
    An EAGLE head is ~1 layer + the LM head; a Medusa head is one hidden x hidden block + its
    own LM head (layers=0, add hidden^2 yourself). vocab: the head's own output vocabulary if
    smaller than the target's (EAGLE-3: 32,000)."""
    # 1e300 or NaN layers made an inf or NaN count, '8' or None a TypeError
    if isinstance(layers, bool) or not isinstance(layers, numbers.Integral) or not 0 <= layers <= 10**6:
        raise InvalidInputError("layers", layers, "an integer from 0 to 1,000,000 (decoder layers in the head)")
    if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, numbers.Integral)
                              or not 1 <= vocab <= 10**9):
        raise InvalidInputError("vocab", vocab, "None or an integer from 1 to 1,000,000,000 (the head's vocabulary)")
    m = load_model(model)
    h, v = float(m.hidden_size), float(m.vocab_size)
    embed = v * h * (1 if m.tied_embeddings else 2) + h
    per_layer = (m.active_params - embed) / m.n_layers
    head_vocab = v if vocab is None else min(float(vocab), v)
    return layers * per_layer + (head_vocab * h if lm_head else 0.0)


def head_cost(model, layers: int = 1, lm_head: bool = True, vocab: int | None = None) -> float:
    """`head_param_count` over the target's active parameters: a head step's cost as a fraction
    of a plain target step, by bytes read at the same format (for `draft_cost`; ~0.05 of a 7B)."""
    return head_param_count(model, layers, lm_head, vocab) / load_model(model).active_params


# ---- multi-token prediction (DeepSeek-V3/R1): the draft module and its acceptance ---------

# Per-token acceptance of DeepSeek-V3's MTP draft: "the acceptance rate of the second token
# prediction ranges between 85% and 90%" (DeepSeek-V3 Technical Report, arXiv:2412.19437,
# section 5.4.3); the low end, taken for every drafted position. An assumption beyond the first
# draft: the module is trained for one token ahead and reused for the next ones, where it accepts
# less (nebius/MTP-DeepSeek-V3-0324's model card reports tau = 3.20 with 7 drafts, ~0.71 per
# token on this law). It is not fitted to any served row; the InferenceMAX rows use random prompts.
MTP_ACCEPTANCE = 0.85


def mtp_module(model) -> Model:
    """A model's multi-token-prediction module as a draft `Model`: one decoder layer of the
    target's shape (its MoE FFN when the target's last layers are MoE), with the target's
    embedding and LM head, which the module shares and reads again every draft step. DeepSeek-V3
    publishes the module at 14B parameters; this gives 13.36B for deepseek-r1 (its 2h x h input
    projection, 0.1B, left out)."""
    m = load_model(model)
    fields = m.model_dump()
    fields.update(name=f"{m.name}-mtp", n_layers=1, first_dense_layers=0, moe_layer_interval=1, aliases=(),
                  layer_windows=m.layer_windows[-1:], source=f"one MTP layer of {m.name} (membound.speculative.mtp_module)")
    if m.n_experts and m.n_layers <= m.first_dense_layers:
        fields.update(n_experts=0, experts_per_token=0, n_shared_experts=0, expert_ffn_size=0)
    return Model(**fields)


def mtp(model, gamma: int, acceptance_rate: float = MTP_ACCEPTANCE) -> SpeculativeDecoding:
    """Speculative decoding with a model's MTP module as the drafter (`mtp_module`): `gamma`
    draft steps of the one module per round (TensorRT-LLM's num_nextn_predict_layers, SGLang's
    speculative_num_steps), each token accepted with `acceptance_rate` (default MTP_ACCEPTANCE)."""
    return SpeculativeDecoding(draft=mtp_module(model), gamma=gamma, acceptance_rate=acceptance_rate)
