"""One engine step's seconds from the core (`core.evaluate`): `StepModel`, the served costs of a runtime."""
from __future__ import annotations

import bisect
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..core import ModelConsts, model_consts
from ..estimate import Prepared
from ..roofline import causal_pairs, effective_context, expected_experts
from ..runtime import Served
from .scheduler import Scheduler, _set

if TYPE_CHECKING:
    from collections.abc import Callable


def moe_expert_s(served: Served, p: Prepared, compute_fraction: float) -> float:
    """Seconds an MoE layer adds to every step: `moe_expert_rows` rows of each of its experts'
    GEMMs, 2 x rows x experts x expert params FLOPs, at the MoE's compute rate (the activation
    format's dense peak x the compute fraction). Work, not a latency: a chip with more FLOP/s in
    that format runs it faster. It does not shrink with tensor parallelism (on the H200 rows it
    did not: each chip walks the tiles of every expert it holds); expert parallelism leaves
    ceil(experts / ep) experts on a chip."""
    if not served.moe_expert_rows:
        return 0.0
    mc = model_consts(p.model)
    experts = math.ceil(mc.n_experts / p.layout.ep)
    return 2.0 * served.moe_expert_rows * experts * mc.expert_params / (p.resolved.peak_flops * compute_fraction)


def upcast_efficiency(served: Served, p: Prepared) -> float | None:
    """The served `moe_upcast_efficiency` where this configuration's experts take that path: a
    weight-only format (`quantization.Resolved.dequant` > 0) computing in 16-bit activations
    (MXFP4 gpt-oss on Hopper and CDNA3, whose engines upcast the weights to bf16 inside the MoE
    GEMM); None elsewhere (the expert GEMMs at the dense rate, as core's default): fp8 or fp4
    experts computing in their own format, or MXFP4 weights with MXFP8 activations on Blackwell,
    whose tensor cores take the mixed MX operands natively (no upcast); and None where the served
    block leaves it at 1.0, its neutral value."""
    r = p.resolved
    if served.moe_upcast_efficiency == 1.0 or r.dequant == 0.0 or r.activations.bits < 16:
        return None
    return served.moe_upcast_efficiency


def _served_prepared(p: Prepared, served: Served | None, mc: ModelConsts) -> Prepared:
    """The configuration as an engine serves it: the served block's fractions and costs replace
    the runtime's (the 16-bit residual stream its all-reduces move is `estimate`'s, from
    `quantization.Resolved.residual_bytes`)."""
    if served is not None:
        eff = p.eff
        allreduce = 2.0 * p.model.n_layers * served.per_allreduce_s if p.layout.tp > 1 else 0.0
        # expert parallelism (DP attention): a dispatch and a combine per MoE layer, each a
        # kernel that waits on every rank (beyond the link's hop latency in the core's term)
        alltoall = 2.0 * mc.n_moe_layers * served.per_alltoall_s if p.layout.ep > 1 else 0.0
        ach = p.hardware.achievable     # served fractions are shares of what the chip achieves
        cf = min(served.compute_fraction * ach.compute_fraction, 1.0) if served.compute_fraction \
            else eff.compute_fraction
        eff = replace(eff, bandwidth_fraction=min(served.bandwidth_fraction * ach.bandwidth_fraction, 1.0)
                      if served.bandwidth_fraction else eff.bandwidth_fraction,
                      compute_fraction=cf,
                      per_step_overhead_s=served.per_step_s + allreduce + alltoall,
                      per_layer_overhead_s=served.per_layer_s,
                      per_moe_layer_overhead_s=moe_expert_s(served, p, cf),
                      per_sequence_overhead_s=served.per_sequence_s,
                      moe_gemm_efficiency=upcast_efficiency(served, p) or eff.moe_gemm_efficiency)
        p = replace(p, eff=eff)
    return p


class StepModel:
    """Seconds of one engine step as a function of the running decodes and the prefill chunk,
    from `core.evaluate` on the configuration (weights touched by the tokens of the step, KV at
    each context, FLOPs, communication, overheads), with the served engine's fractions and costs.

    step(b, u, c, cu, cp): b decoding sequences whose contexts give u (layer, token) pairs on
    average; c prefill tokens in the step, whose prompts hold cu pairs of KV (read and written)
    and cp causal attention pairs. Floats or numpy arrays (broadcast). A decode's pair costs
    `alpha`, a prefill's `alpha_pre`, each at core's own FLOPs per pair (MLA: absorbed in decode,
    decompressed in prefill), so a lone prompt's step is core's prefill at every length.

    Under sparse attention (DeepSeek-V3.2's DSA) a query attends at most top-k tokens, but the
    cache holds them all: u and cp count the pairs attended (`attended`, as a top-k window would),
    cu and the capacity the pairs held (`held`, each with its index key). The indexer is its own
    kernel before the attention (`index_s`, as `core.index_terms`): it reads every held pair's
    index key and scores it for each query, h held pairs per decoding sequence on average; a
    prefill chunk's indexer FLOPs (hp held causal pairs) join its attention's. h = hp = 0 and the
    indexer's coefficients are 0 without one (then held = attended).
    """

    def __init__(self, p: Prepared, served: Served | None, max_tokens: float):
        mc = model_consts(p.model)
        p = _served_prepared(p, served, mc)
        self.prepared = p
        self.groups = mc.window_groups          # the tokens a query attends (core's attended groups)
        self.held_groups = mc.held_groups       # the tokens the cache holds
        self.indexed = bool(mc.index_flops)     # a sparse-attention indexer runs each step
        self.overlap = p.eff.overlap
        self._fit_decode(p, max_tokens)
        self._fit_tile_padding(mc, served.moe_tile_tokens if served is not None else 0.0)
        self._fit_context(p)
        self.price = p.price
        self.ranks = p.layout.ep          # data-parallel attention ranks (expert parallelism)
        self.n_chips = p.n_chips
        self.host_s = served.per_request_s if served is not None else 0.0     # per request, and
        self.host_token_s = served.per_prompt_token_s if served is not None else 0.0   # per prompt token
        self.lookahead = served.lookahead_steps if served is not None else 0
        # speculative decoding (attach_speculative): positions each decoding sequence verifies per
        # step, the tokens it emits per step on average, and the drafter's seconds per step
        self.positions, self.tokens_per_step = 1.0, 1.0
        self.draft: Callable[..., np.ndarray] | None = None

    def host(self, prompt):
        """Host seconds of a request of `prompt` tokens before its first step (Served.per_request_s
        and per_prompt_token_s): off the GPU, in its TTFT. Floats or numpy arrays."""
        return self.host_s + self.host_token_s * prompt

    def _fit_decode(self, p: Prepared, max_tokens: float) -> None:
        """Weights' stream time and communication on a grid of tokens per step (interpolated by
        `terms`), the overheads per step and per sequence, the latency floor, a token's GEMMs."""
        grid = np.unique(np.round(np.geomspace(1.0, max(float(max_tokens), 2.0), 40)))
        r0 = p.evaluate(batch=grid, prompt=0.0, output=1.0)         # weights, per-token FLOPs
        self._grid = grid
        self._w = np.asarray(r0["memory_s"], float)
        self._comm = np.broadcast_to(np.asarray(r0["communication_s"], float), grid.shape).copy()
        over = np.broadcast_to(np.asarray(r0["overhead_s"], float), grid.shape)
        self.per_seq = float((over[-1] - over[0]) / (grid[-1] - grid[0])) if grid.size > 1 else 0.0
        self.per_step = float(over[0] - self.per_seq)
        self.floor = float(np.asarray(r0["latency_s"], float).ravel()[0])
        if grid.size < 2:
            grid, self._w, self._comm = np.array([1.0, 2.0]), np.repeat(self._w, 2), np.repeat(self._comm, 2)
            self._grid = grid
        self._grid_list, self._w_list, self._comm_list = grid.tolist(), self._w.tolist(), self._comm.tolist()
        self.phi = float(np.asarray(r0["compute_s"], float)[0])      # decode GEMMs, s per token

    def _fit_tile_padding(self, mc: ModelConsts, tile: float) -> None:
        """Expert GEMMs padded to a tile: X(t) experts touched by t tokens each compute at least
        `tile` rows; the rows beyond the t k routed ones cost what a token's GEMM row costs."""
        grid = self._grid
        self._pad = np.zeros_like(grid)
        if tile and mc.n_moe_layers:
            touched = expected_experts(mc.n_experts, mc.k, grid)
            rows = np.maximum(tile * touched - grid * mc.k, 0.0)       # padded rows per MoE layer
            share = mc.expert_params / (mc.active_params - mc.lookup_params)   # of a token's GEMM
            self._pad = mc.n_moe_layers * rows * share * self.phi
        self._pad_list = self._pad.tolist()

    def _fit_context(self, p: Prepared) -> None:
        """What a context costs, from one sequence at 4,096 tokens: seconds per KV pair read, per
        attention pair, per prefill token's GEMMs, the LM head per prompt; the bytes per chip
        (per pair held). With a sparse-attention indexer, also per held pair its kernel reads
        (index_mem) and scores per query (index_comp), from a second sequence beyond top-k."""
        ref = 4096.0
        r1 = p.evaluate(batch=1.0, prompt=ref, output=1.0)
        mem, comp = float(r1["memory_s"]) - self._w[0], float(r1["compute_s"]) - self.phi
        u_ref = effective_context(self.groups, ref)
        self.kappa = mem / u_ref                                        # s per KV pair read
        self.alpha = comp / u_ref                                       # s per attention pair
        self.index_mem = self.index_comp = 0.0
        if self.indexed:
            self._fit_indexer(p, ref, mem, comp)
        # a prefill token's GEMMs; the LM head runs once per prompt in a step (its last token's
        # logits: vLLM and SGLang take one row per request, partial chunks included), or for
        # every token where the runtime computes all positions' logits (then it is in gamma)
        self.head = 0.0 if p.eff.prefill_logits_all else float(r1["prefill_head_s"])
        # a prefill's attention pair at core's prefill rate (`core.prefill_compute_s`): its own
        # FLOPs per pair (MLA: the decompressed form, not decode's absorbed one) at the attention
        # peak, split over the chips a layer's GEMMs are; its indexer's per held pair as decode's
        base = p.chip_base
        self.alpha_pre = float(p.consts.prefill_attn_per_pair / (base.group * base.attn_flops))
        self.gamma = (float(r1["prefill_compute_s"]) - self.head - self.alpha_pre * causal_pairs(self.groups, ref)
                      - self.index_comp * causal_pairs(self.held_groups, ref)) / ref
        self.kv_pair_bytes = float(r1["kv_bytes_chip"]) / float(self.held(ref + 1.0))
        self.weights_bytes = float(r1["weights_bytes_chip"]) + float(r1["extra_bytes_chip"])
        self.capacity_bytes = float(r1["capacity_bytes_chip"])

    def _fit_indexer(self, p: Prepared, ref: float, mem: float, comp: float) -> None:
        """Split a decode step's context terms at `ref` (mem, comp: seconds beyond the weights and
        GEMMs) into the attention's (per attended pair) and the indexer's (per held pair), with a
        second step at twice the widest attended span, where the two counts differ in ratio:
        mem_i = kappa A_i + index_mem H_i (A attended, H held pairs), the same for compute."""
        ref2 = 2.0 * max(ref, max(float(w) for w, _ in self.groups if w is not None))
        r2 = p.evaluate(batch=1.0, prompt=ref2, output=1.0)
        mem2, comp2 = float(r2["memory_s"]) - self._w[0], float(r2["compute_s"]) - self.phi
        a1, a2 = float(self.attended(ref)), float(self.attended(ref2))
        h1, h2 = float(self.held(ref)), float(self.held(ref2))
        det = a1 * h2 - a2 * h1
        self.kappa, self.index_mem = (mem * h2 - mem2 * h1) / det, (a1 * mem2 - a2 * mem) / det
        self.alpha, self.index_comp = (comp * h2 - comp2 * h1) / det, (a1 * comp2 - a2 * comp) / det

    def attended(self, ctx):
        """(layer, token) pairs a sequence of `ctx` tokens attends to (floats or arrays)."""
        return effective_context(self.groups, ctx)

    def held(self, ctx):
        """(layer, token) pairs of KV a sequence of `ctx` tokens holds (all of them under sparse
        attention; as `attended` otherwise)."""
        return effective_context(self.held_groups, ctx)

    def index_s(self, b, h):
        """Seconds of the sparse-attention indexer's kernel in a step of b decoding sequences
        holding h pairs on average (`core.index_terms`): it reads each held pair's index key and
        scores it for each of the positions a sequence verifies; 0 without an indexer."""
        return np.maximum(self.index_mem * b * h, self.index_comp * b * h * self.positions)

    def kv_pairs_capacity(self, sched: Scheduler) -> float:
        """(layer, token) KV pairs one chip's share of the cache holds: memory_fraction of what
        the weights and the activations of a full token budget leave."""
        act = float(self.prepared.evaluate(batch=1.0, prompt=float(_set(sched.token_budget)), output=1.0)
                    ["activation_bytes_chip"])
        free = _set(sched.memory_fraction) * (self.capacity_bytes - self.weights_bytes - act)
        return max(free, 0.0) / self.kv_pair_bytes

    def terms(self, b, u, c=0.0, cu=0.0, cp=0.0, prompts=None, hp=0.0):
        """(memory, compute) seconds of a step, before floor, communication, overheads and the
        decoding sequences' indexer kernel. prompts: the prompts the c prefill tokens belong to
        (default one if c > 0)."""
        v = self.positions
        tokens = np.maximum(b * v + c, 1.0)
        w = np.interp(tokens, self._grid, self._w)
        mem = w + self.kappa * (b * u + cu) + self.index_mem * cu
        comp = self.phi * b * v + self.gamma * c + self.head * ((c > 0) if prompts is None else prompts) \
            + self.alpha * b * u * v + self.alpha_pre * cp + self.index_comp * hp + np.interp(tokens, self._grid, self._pad)
        return mem, comp

    def step(self, b, u, c=0.0, cu=0.0, cp=0.0, seqs=None, h=0.0, hp=0.0):
        n = b + (c > 0) if seqs is None else seqs
        mem, comp = self.terms(b, u, c, cu, cp, n - b, hp)
        core = np.maximum(np.maximum(mem, comp) + (1.0 - self.overlap) * np.minimum(mem, comp), self.floor)
        tokens = np.maximum(b * self.positions + c, 1.0)
        comm = np.interp(tokens, self._grid, self._comm)
        drafted = 0.0 if self.draft is None else self.draft(b, u, c, cu, cp, h, hp)
        return core + comm + self.per_step + self.per_seq * n + drafted + self.index_s(b, h)

    def step1(self, b: float, u: float, c: float = 0.0, cu: float = 0.0, cp: float = 0.0, seqs: float | None = None,
              h: float = 0.0, hp: float = 0.0) -> float:
        """`step` for plain floats, without numpy's per-call cost (the simulator's inner loop)."""
        tokens = max(b + c, 1.0)
        g = self._grid_list
        j = min(max(bisect.bisect_right(g, tokens) - 1, 0), len(g) - 2)
        frac = (tokens - g[j]) / (g[j + 1] - g[j])
        w = self._w_list[j] + frac * (self._w_list[j + 1] - self._w_list[j])
        comm = self._comm_list[j] + frac * (self._comm_list[j + 1] - self._comm_list[j])
        mem = w + self.kappa * (b * u + cu) + self.index_mem * cu
        n = b + (c > 0) if seqs is None else seqs
        comp = self.phi * b + self.gamma * c + self.head * (n - b) + self.alpha * b * u + self.alpha_pre * cp \
            + self.index_comp * hp \
            + self._pad_list[j] + frac * (self._pad_list[j + 1] - self._pad_list[j])
        core = max(max(mem, comp) + (1.0 - self.overlap) * min(mem, comp), self.floor)
        return core + comm + self.per_step + self.per_seq * n + max(self.index_mem * b * h, self.index_comp * b * h)

    def bound(self, b, u, c=0.0, cu=0.0, cp=0.0, h=0.0, hp=0.0) -> str:
        mem, comp = (float(np.asarray(x).mean()) for x in self.terms(b, u, c, cu, cp, None, hp))
        mem += float(np.mean(self.index_mem * b * h))          # the indexer kernel's reads and FLOPs
        comp += float(np.mean(self.index_comp * b * h * self.positions))
        tokens = max(float(b * self.positions + c), 1.0)
        other = {"communication": float(np.interp(tokens, self._grid, self._comm)),
                 "overhead": self.per_step + self.per_seq * float(b), "latency": self.floor}
        vals = {"memory": mem, "compute": comp, **other}
        return max(vals, key=vals.__getitem__)
