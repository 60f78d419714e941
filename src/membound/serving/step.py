"""One engine step's seconds for served continuous batching: `StepModel`, core's one step
(`core.pass_terms`) on a served configuration."""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np

from ..base.stacking import stackable
from ..physics.core import Pass, activation_bytes, chip_of, decode_index, pass_s, pipeline_pass, timed
from ..physics.estimate import Prepared
from ..physics.roofline import Num, context_pieces, effective_context, maximum, sum_linear, sum_over_context
from .scheduler import Scheduler, filled

if TYPE_CHECKING:
    from collections.abc import Sequence


def mean_pairs(pieces: Sequence[tuple[float, float, float, float]], start: float, count: float) -> float:
    """The mean over contexts start .. start+count-1 of the (layer, token) pairs u(L) (`pieces`:
    roofline.context_pieces), exactly: the sum of u over each linear piece."""
    if count <= 0:
        return 0.0
    end = start + count
    total = 0.0
    for lo, hi, u0, u1 in pieces:
        total += float(sum_linear(u0, u1, max(start, lo), min(end, hi)))
    return total / count


# stacking (base.stacking; serving.curve.serve_curves): the model and its windows, the host's time, the
# positions a step verifies, the chip count, the scheduler's lookahead are shape; the efficiencies,
# knobs and chip (their own roles) and the bytes are numbers; the preparation and price stay each
# configuration's own (its checks, cap and cost)
@stackable(shape="consts groups held_groups held_pieces indexed host_s host_token_s positions tokens_per_step routed "
                 "n_chips lookahead draft",
           numbers="eff knobs chip ranks kv_pair_bytes weights_bytes capacity_bytes", own="prepared price")
class StepModel:
    """Seconds of one engine step as a function of the running decodes and the prefill chunks:
    core's one step (`core.pass_terms`, the step `estimate()` prices a static batch with) on the
    served configuration, evaluated where it is asked, with no sampling or interpolation.

    step(b, u, c, cu, cp): b decoding sequences attending to u (layer, token) pairs each on
    average (their KV read once, their attention at decode's FLOPs per pair: MLA absorbed); c
    prompt tokens in the step, whose prompts hold cu pairs of KV (read and written) and cp causal
    attention pairs (at the prefill's FLOPs per pair: MLA decompressed). seqs: the sequences in
    the step (b plus the prompts the c tokens belong to; default one prompt where c > 0). Floats
    or numpy arrays (broadcast). A lone prompt's step is core's prefill of it, a static batch's
    decode step at one context is core's decode step of it, at every length.

    Under sparse attention (DeepSeek-V3.2's DSA) a query attends at most top-k tokens, but the
    cache holds them all: u and cp count the pairs attended, cu and the capacity the pairs held
    (each with its index key). The indexer is its own kernel before the attention (`index_s`, as
    `core.index_terms`): it reads every held pair's index key and scores it for each query, h held
    pairs per decoding sequence on average; a prefill chunk's indexer FLOPs (hp held causal pairs)
    join its attention's. h = hp = 0 without one.
    """

    def __init__(self, p: Prepared):
        mc = p.consts
        self.prepared, self.consts, self.eff, self.knobs = p, mc, p.eff, p.knobs
        self.chip, _, _ = chip_of(mc, p.hardware, p.eff, p.knobs, p.chip_base, p.pinned,
                                  p.extra["extra_weight_bytes_chip"], p.extra["extra_kv_bytes_token_chip"])
        ch = self.chip
        self.groups = mc.window_groups          # the tokens a query attends (core's attended groups)
        self.held_groups = mc.held_groups       # the tokens the cache holds
        self.held_pieces = tuple(context_pieces(mc.held_groups, int(mc.n_layers)))
        self.indexed = bool(mc.index_flops)     # a sparse-attention indexer runs each step
        self.price = p.price
        self.ranks = p.layout.ep          # data-parallel attention ranks (expert parallelism)
        self.n_chips = p.n_chips
        self.host_s, self.host_token_s = p.eff.per_request_s, p.eff.per_prompt_token_s
        self.lookahead = p.runtime.backend_for(p.hardware).scheduler_defaults().lookahead_steps
        # bytes per chip: a held (layer, token) pair of KV (its index key with it), the weights
        self.kv_pair_bytes = float((ch.kv_pair + mc.index_bytes) * ch.share / ch.ep
                                   + p.extra["extra_kv_bytes_token_chip"] / (ch.ep * mc.n_layers))
        self.weights_bytes = float(ch.dense_held + ch.expert_held + p.extra["extra_weight_bytes_chip"])
        self.capacity_bytes = float(ch.capacity)
        # speculative decoding (attach_speculative): positions each decoding sequence verifies per
        # step, the tokens it emits per step on average, and the drafter's seconds per step
        self.positions, self.tokens_per_step, self.routed = 1.0, 1.0, 1.0
        self.draft: Drafting | None = None

    @property
    def float_exact(self) -> bool:
        """Whether the step of plain floats is the step of numpy arrays to the bit: + - * /, min, max
        and floor round alike, but not the power of `roofline.expected_experts` (numpy's vectorised
        pow and libm's differ in the last bit), which a model with routed experts (or its
        drafter's) takes."""
        steps = [self] if self.draft is None else [self, self.draft.first, self.draft.rest]
        return not any(sm.consts.n_experts for sm in steps)

    # the step's per-unit costs, exact (the figures a hand derivation checks)
    @property
    def kappa(self) -> float:
        """Seconds per KV pair a decoding sequence reads."""
        ch = self.chip
        return float(ch.kv_pair * ch.kv_inv / ch.ep)

    @property
    def alpha(self) -> float:
        """Seconds per decode attention pair (per query)."""
        ch = self.chip
        return float(self.consts.attn_per_pair / (ch.group * ch.attn_flops))

    @property
    def alpha_pre(self) -> float:
        """Seconds per prefill attention pair."""
        ch = self.chip
        return float(self.consts.prefill_attn_per_pair / (ch.group * ch.attn_flops))

    @property
    def head(self) -> float:
        """Seconds of one prompt's LM head (its last token's logits); 0 where the runtime computes
        every position's logits (then in `prefill_token_s`)."""
        ch = self.chip
        return 0.0 if self.eff.prefill_logits_all else float(ch.head / ch.group)

    @property
    def prefill_token_s(self) -> float:
        """Seconds of a prompt token's GEMMs."""
        ch = self.chip
        return float((ch.prefill_gemm + (ch.head if self.eff.prefill_logits_all else 0.0)) / ch.group)

    @property
    def index_mem(self) -> float:
        """Seconds the indexer reads per held pair of a decoding sequence (0 without one)."""
        return float(decode_index(self.consts, self.chip, 1.0, 1.0, 1.0)[0])

    @property
    def index_comp(self) -> float:
        """Seconds the indexer scores per held pair per query (0 without one)."""
        return float(decode_index(self.consts, self.chip, 1.0, 1.0, 1.0)[1])

    def host(self, prompt):
        """Host seconds of a request of `prompt` tokens before its first step (the runtime's
        per_request_s and per_prompt_token_s): off the GPU, in its TTFT. Floats or numpy arrays."""
        return self.host_s + self.host_token_s * prompt

    def attended(self, ctx):
        """(layer, token) pairs a sequence of `ctx` tokens attends to (floats or arrays)."""
        return effective_context(self.groups, ctx)

    def held(self, ctx):
        """(layer, token) pairs of KV a sequence of `ctx` tokens holds (all of them under sparse
        attention; as `attended` otherwise)."""
        return effective_context(self.held_groups, ctx)

    def mean_attended(self, start: float, count: float) -> float:
        """The mean pairs a sequence attends to over its contexts start .. start+count-1."""
        return mean_pairs(self.consts.pieces, start, count)

    def mean_held(self, start: float, count: float) -> float:
        """The mean pairs it holds over those contexts."""
        return mean_pairs(self.held_pieces, start, count)

    def index_s(self, b, h, m=1.0, beat=1.0):
        """Seconds of the sparse-attention indexer's kernel in a step of b decoding sequences
        holding h pairs on average (`core.index_terms`), in m micro-batches of `beat` passes each
        (`core.pipeline_pass`); 0 without an indexer."""
        if not self.indexed:
            return 0.0
        return maximum(*decode_index(self.consts, self.chip, b / m, self.positions, h, beat))

    def kv_pairs_capacity(self, sched: Scheduler) -> float:
        """(layer, token) KV pairs one chip's share of the cache holds: memory_fraction of what
        the weights and the activations of a full token budget leave."""
        p = self.prepared
        act = float(activation_bytes(p.consts, p.hardware, p.knobs, 1.0, float(filled(sched.token_budget))))
        free = filled(sched.memory_fraction) * (self.capacity_bytes - self.weights_bytes - act)
        return max(free, 0.0) / self.kv_pair_bytes

    def terms(self, b, c=0.0, cu=0.0, cp=0.0, seqs=None, hp=0.0) -> Pass:
        """core's step of b decoding sequences and c prompt tokens (`staged`'s pass)."""
        return self.staged(b, c, cu, cp, seqs, hp)[0]

    def staged(self, b, c=0.0, cu=0.0, cp=0.0, seqs=None, hp=0.0) -> tuple[Pass, Num, Num]:
        """core's step of b decoding sequences and c prompt tokens through the layout's pipeline
        stages (`core.pipeline_pass`; `core.pass_terms` without stages): (the pass, the micro-batches
        m its decoding sequences' pairs are split over, the passes per step)."""
        prompts = (c > 0) * 1.0 if seqs is None else seqs - b
        return self.pass_of(b, c, prompts, cu, cp, hp)

    def pass_of(self, b, c, prompts, cu, cp, hp) -> tuple[Pass, Num, Num]:
        """`staged` with the prompts the c tokens belong to given (floats or arrays: the solver
        stacks the steps it needs along a first axis and evaluates them in one call)."""
        return pipeline_pass(self.consts, self.eff, self.knobs, self.chip, b, self.positions, self.routed, c, prompts,
                             cu, cp, hp)

    def step(self, b, u, c=0.0, cu=0.0, cp=0.0, seqs=None, h=0.0, hp=0.0):
        """Seconds of a step of b decoding sequences at u attended pairs each and c prompt tokens."""
        t = self.step_of(*self.staged(b, c, cu, cp, seqs, hp), b, u, h)
        return t if self.draft is None else t + self.draft.step(b, u, c, cu, cp, h, hp)

    def step_of(self, p: Pass, m, beat, b, u, h):
        """`step` of the pass p (`staged`: m micro-batches of `beat` passes) of b decoding sequences
        (u, h as there), the drafter left out."""
        return pass_s(p, b * u / m) + self.index_s(b, h, m, beat)

    def scalar_step(self, b: float, u: float, c: float = 0.0, cu: float = 0.0, cp: float = 0.0, seqs: float | None = None,
              h: float = 0.0, hp: float = 0.0) -> float:
        """`step` for plain floats (the simulator's inner loop)."""
        return float(self.step(b, u, c, cu, cp, seqs, h, hp))

    def step_over_context(self, others, u_others, start: float, count: float, c=0.0, cu=0.0, cp=0.0, seqs=None,
                          h=0.0, hp=0.0):
        """The mean step a decoding sequence sees over its own contexts start .. start+count-1 (its
        decode steps, as `estimate()` counts them), beside `others` decoding sequences at u_others
        attended pairs each and c prompt tokens: exact over the sequence's contexts (the step is
        max(memory, compute, floor), each affine in its pairs: `roofline.sum_over_context`).
        With others = 0 and c = 0 it is `estimate(batch=1)`'s time per output token."""
        b = 1.0 + others
        t = self.over_context_of(*self.staged(b, c, cu, cp, None if seqs is None else seqs, hp), others, u_others,
                                 start, count, h)
        if self.draft is None:
            return t
        return t + self.draft.step_over_context(others, u_others, start, count, c, cu, cp, h, hp)

    def over_context_of(self, p: Pass, m, beat, others, u_others, start: float, count: float, h):
        """`step_over_context` of the pass p (`staged`: m micro-batches of `beat` passes) of 1 + others
        decoding sequences, the drafter left out."""
        coeffs = timed((p.mem + p.kv * others * u_others / m, p.kv / m, p.comp + p.attn * others * u_others / m,
                        p.attn / m), p.serial)
        total = sum_over_context(self.consts.pieces, *coeffs, p.floor, start, count)
        return total / count + p.comm + p.over + self.index_s(1.0 + others, h, m, beat)

    def bound(self, b, u, c=0.0, cu=0.0, cp=0.0, h=0.0, hp=0.0) -> str:
        p, m, beat = self.staged(b, c, cu, cp, None, hp)
        U = b * u / m
        idx = decode_index(self.consts, self.chip, b / m, self.positions, h, beat)
        vals = {"memory": _average(p.mem + p.kv * U + idx[0]), "compute": _average(p.comp + p.attn * U + idx[1]),
                "communication": _average(p.comm), "overhead": _average(p.over), "latency": _average(p.floor)}
        return max(vals, key=vals.__getitem__)


def _average(x: Num) -> float:
    """The mean of a figure (a number: itself)."""
    return float(x) if isinstance(x, (int, float)) else float(np.mean(x))


class Drafting:
    """A speculative round's draft-model passes beside a served step (`core.draft_passes`, the
    passes estimate() prices): `sd`, the StepModel of the draft model's configuration, runs the
    first pass over every verified position of each decoding sequence (`positions`) with the
    step's prompt chunk, and gamma - 1 passes of one token each where sequences decode. The
    draft's (layer, token) pairs are `ratio` (its layers over the target's) of the target's, but
    a sequence's own contexts, summed over exactly (`step_over_context`), are the draft's."""

    def __init__(self, sd: StepModel, gamma: int, positions: float, ratio: float):
        self.first = copy.copy(sd)
        self.first.positions = self.first.routed = positions
        self.rest, self.more, self.r = sd, gamma - 1, ratio

    def step(self, b, u, c=0.0, cu=0.0, cp=0.0, h=0.0, hp=0.0):
        """The draft passes' seconds in a step (arguments in the target's pairs, as `StepModel.step`)."""
        r = self.r
        first = self.first.step(b, u * r, c, cu * r, cp * r, h=h * r, hp=hp * r)
        if not self.more:
            return first
        return first + self.more * np.where(np.asarray(b) > 0, self.rest.step(b, u * r, h=h * r), 0.0)

    def step_over_context(self, others, u_others, start: float, count: float, c=0.0, cu=0.0, cp=0.0, h=0.0, hp=0.0):
        """The mean draft passes a decoding sequence sees over its own contexts (`StepModel.step_over_context`)."""
        r = self.r
        first = self.first.step_over_context(others, u_others * r, start, count, c, cu * r, cp * r, h=h * r,
                                             hp=hp * r)
        if not self.more:
            return first
        return first + self.more * self.rest.step_over_context(others, u_others * r, start, count, h=h * r)
