"""Served workloads: an engine with continuous batching under load (DESIGN.md "Served workloads").

`serve()` answers what N clients in a closed loop (or Poisson arrivals at a rate) get from one
engine instance: TTFT with queueing, time per output token, throughput per chip.

Scheduling is iteration-level. Every step runs one decode token for each running sequence plus
prefill chunks of waiting prompts, up to the scheduler's token budget (vLLM, TensorRT-LLM). With
`mixed_steps=False` (SGLang's default) a step is either a prefill batch or a decode batch. The KV
cache caps the running sequences; beyond it requests wait (or, in the simulator, are preempted).

A step's time comes from the same core as `estimate()` (`core.evaluate`, through `StepModel`):
weights streamed once per step for all the tokens in it (experts touched by all of them), each
sequence's KV at its own context, FLOPs of the decode and prefill tokens, communication for all
of them, and the engine's overheads per step and per sequence (the runtime's `served` block).

Two engines behind one API:
- `engine="solver"`: the steady state. Let b be the mean number of decoding sequences, S and T
  the mean prompt and output lengths, D = T - 1 decode steps per request. Each decode step also
  carries b S / D prefill tokens on average (Little's law over the prefill work), as chunks of
  c = max(min(S, budget - b), b S / D) tokens in a fraction f = (b S / D) / c of the steps, so
  the mean step is tau = (1 - f) step(b, 0) + f step(b, c). Requests complete at X = b / (D tau)
  per second. TTFT = half a step + the prompt's own chunks + an M/D/1 wait for the prefill
  capacity. A closed loop of N clients holds N = b + X TTFT (Little); a bisection on b solves
  it (vectorised over concurrency). Where b reaches the KV or max_running cap, the rest of the
  clients queue: TTFT = (N - b) / X.
- `engine="simulate"`: a seeded iteration-level simulation of the same engine over
  `n_requests` requests with sampled lengths, giving percentiles (runs of pure decode steps
  are advanced in one vectorised call between events).
"""
from __future__ import annotations

import bisect
import copy
import heapq
import math
import numbers
from collections import deque
from dataclasses import asdict, dataclass, field, fields, replace
from statistics import NormalDist
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from .core import ModelConsts, model_consts
from .errors import DoesNotFitError, InvalidInputError
from .estimate import Prepared, prepare
from .model import load_model
from .parallel import Parallel
from .roofline import causal_pairs, effective_context, expected_experts
from .runtime import Served, load_runtime
from .speculative import SpeculativeDecoding

if TYPE_CHECKING:
    from collections.abc import Callable

# ---- lengths ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixed:
    """Every request has `n` tokens."""

    n: int

    def __post_init__(self):
        _check_count("n", self.n)

    @property
    def mean(self) -> float:
        return float(self.n)

    @property
    def high(self) -> int:
        return self.n

    @property
    def std(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return np.full(k, self.n, dtype=np.int64)

    def quantile(self, q: float) -> float:
        return float(self.n)


@dataclass(frozen=True)
class Uniform:
    """Integers uniform in [lo, hi], both included (InferenceMAX: [0.8 L, L])."""

    lo: int
    hi: int

    def __post_init__(self):
        _check_count("lo", self.lo)
        _check_count("hi", self.hi)
        if self.lo > self.hi:
            raise InvalidInputError("Uniform.lo", self.lo, f"at most hi ({self.hi})")

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2.0

    @property
    def high(self) -> int:
        return self.hi

    @property
    def std(self) -> float:
        """Of the discrete uniform on lo..hi: sqrt(((hi - lo + 1)^2 - 1) / 12)."""
        return math.sqrt(((self.hi - self.lo + 1) ** 2 - 1) / 12.0)

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.integers(self.lo, self.hi + 1, size=k)

    def quantile(self, q: float) -> float:
        return self.lo + q * (self.hi - self.lo)


@dataclass(frozen=True)
class Samples:
    """Lengths drawn (with replacement) from observed values."""

    values: tuple

    def __post_init__(self):
        vals = tuple(self.values) if not isinstance(self.values, (str, bytes)) else ()
        if not vals:
            raise InvalidInputError("Samples.values", self.values, "a non-empty sequence of token counts")
        for v in vals:
            _check_count("Samples.values", v)
        object.__setattr__(self, "values", tuple(int(v) for v in vals))

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def high(self) -> int:
        return max(self.values)

    @property
    def std(self) -> float:
        return float(np.std(self.values))

    def sample(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=k)

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.values, q))


Length = Fixed | Uniform | Samples


def _check_count(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
        raise InvalidInputError(name, v, "an integer token count >= 0")


def as_length(name: str, value, minimum: int) -> Length:
    """A number or a Fixed/Uniform/Samples, with every length >= minimum."""
    if isinstance(value, (Fixed, Uniform, Samples)):
        dist = value
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        _check_count(name, value)
        dist = Fixed(int(value))
    else:
        raise InvalidInputError(name, value, "a token count or mb.Fixed / mb.Uniform / mb.Samples")
    low = {Fixed: lambda d: d.n, Uniform: lambda d: d.lo, Samples: lambda d: min(d.values)}[type(dist)](dist)
    if low < minimum:
        raise InvalidInputError(name, value, f"lengths >= {minimum}")
    return dist


# ---- the scheduler ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scheduler:
    """The engine's batching knobs; None takes the runtime's default (its usual launch flags).

    max_running: most sequences in the running batch (vLLM max_num_seqs); token_budget: tokens
    per step (max_num_batched_tokens, SGLang's chunked_prefill_size); chunked_prefill: split long
    prompts over steps; mixed_steps: decode and prefill share a step; kv_block_tokens: the KV
    page; memory_fraction: of device memory the engine takes; preemption: what happens when the
    KV cache runs out ("recompute", "swap", or "none": reserve every request's full length);
    dp_balance_steps: under data-parallel attention a new prompt is held until every rank has
    one to prefill, or this many steps pass (TensorRT-LLM attention_dp_config enable_balance,
    timeout_iters); 0: prompts go as they come; recv_interval_steps: while a batch decodes,
    the scheduler takes in new requests once every this many decode steps (SGLang
    --scheduler-recv-interval; --num-continuous-decode-steps alike); 1: every step;
    batch_wait_steps, batch_wait_ratio: while sequences decode, new prompts are held until the
    step's tokens (held prompts' and decode tokens) reach batch_wait_ratio x token_budget, or
    batch_wait_steps steps pass, then prefilled together (TensorRT-LLM batch_wait_timeout_iters,
    batch_wait_max_tokens_ratio; it waits only where both are set, and not under attention DP).
    """

    max_running: int | None = None
    token_budget: int | None = None
    chunked_prefill: bool | None = None
    mixed_steps: bool | None = None
    kv_block_tokens: int | None = None
    memory_fraction: float | None = None
    preemption: str | None = None
    dp_balance_steps: int | None = None
    recv_interval_steps: int | None = None
    batch_wait_steps: int | None = None
    batch_wait_ratio: float | None = None

    def __post_init__(self):
        for name in ("max_running", "token_budget", "kv_block_tokens", "recv_interval_steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
                raise InvalidInputError(f"scheduler.{name}", v, "None or an integer >= 1")
        for name in ("chunked_prefill", "mixed_steps"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, bool):
                raise InvalidInputError(f"scheduler.{name}", v, "None, True or False")
        f = self.memory_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, numbers.Real) or not 0 < f <= 1):
            raise InvalidInputError("scheduler.memory_fraction", f, "None or a fraction in (0, 1]")
        for name in ("dp_balance_steps", "batch_wait_steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0):
                raise InvalidInputError(f"scheduler.{name}", v, "None or an integer >= 0")
        r = self.batch_wait_ratio
        if r is not None and (isinstance(r, bool) or not isinstance(r, numbers.Real) or not 0 <= r <= 1):
            raise InvalidInputError("scheduler.batch_wait_ratio", r, "None or a fraction in [0, 1]")
        if self.preemption not in (None, "recompute", "swap", "none"):
            raise InvalidInputError("scheduler.preemption", self.preemption, "'recompute', 'swap' or 'none'")
        if self.max_running is not None and self.token_budget is not None and self.token_budget < self.max_running:
            raise InvalidInputError("scheduler.token_budget", self.token_budget,
                                    f"at least max_running ({self.max_running}): one decode token per running sequence")

    def resolved(self, served: Served) -> Scheduler:
        """Every knob set: the given ones, else the engine's defaults."""
        vals = {f.name: getattr(self, f.name) for f in fields(self)}
        for k, v in vals.items():
            if v is None:
                vals[k] = getattr(served, k)
        return Scheduler(**vals)


_K = TypeVar("_K", int, float, bool, str)


def _set(knob: _K | None) -> _K:
    """A knob of a resolved Scheduler (`Scheduler.resolved` leaves none unset)."""
    assert knob is not None, "a Scheduler knob read before Scheduler.resolved()"
    return knob


DEFAULT_SERVED = Served(generation="generic continuous batching (no engine costs fitted)")

# ---- one step, from the core --------------------------------------------------------------


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
                      per_sequence_overhead_s=served.per_sequence_s)
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
        self.host_s = served.per_request_s if served is not None else 0.0
        # speculative decoding (attach_speculative): positions each decoding sequence verifies per
        # step, the tokens it emits per step on average, and the drafter's seconds per step
        self.positions, self.tokens_per_step = 1.0, 1.0
        self.draft: Callable[..., np.ndarray] | None = None

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


# ---- the result ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Seconds: median, 90th and 99th percentile, and the mean."""

    median: float
    p90: float
    p99: float
    mean: float


@dataclass(frozen=True, slots=True)
class ServeResult:
    """A served workload's steady state. Times in seconds, speeds in tokens/s, money in USD."""

    model: str
    hardware: str
    runtime: str
    engine: str                    # solver | simulate
    n_chips: int
    parallel: str
    concurrency: float | None      # closed-loop clients
    arrival_rate: float | None     # requests per second (open loop)
    prompt_tokens: float           # means
    output_tokens: float
    weight_dtype: str
    kv_dtype: str
    activation_dtype: str
    ttft: Quantiles                # time to first token, queueing included
    tpot: Quantiles                # per request (e2e - ttft) / (output - 1)
    itl: Quantiles                 # gaps between a request's tokens
    e2e: Quantiles
    output_tok_s: float            # output tokens per second, all users
    output_tok_s_per_chip: float
    tok_s_per_user: float          # 1 / median TPOT (InferenceMAX's interactivity)
    requests_per_s: float
    mean_running: float            # decoding sequences per step, on average
    kv_occupancy: float            # share of the KV cache in use, on average
    queueing_s: float              # mean wait before a request's first prefill chunk
    preemptions: int
    bound: str                     # what sets the mean step: memory | compute | ...
    cost_per_million_output_tokens_usd: float | None
    max_running: int               # the cap on running sequences (scheduler or KV cache)
    scheduler: Scheduler = field(default_factory=Scheduler)

    def to_dict(self) -> dict:
        d = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Quantiles):
                for k, x in asdict(v).items():
                    d[f"{f.name}_{k}_s"] = x
            elif isinstance(v, Scheduler):
                for k, x in asdict(v).items():
                    d[f"scheduler_{k}"] = x
            else:
                d[f.name] = v
        return d

    def to_pandas(self):
        """A one-row pandas DataFrame (needs pandas)."""
        import pandas as pd
        return pd.DataFrame([self.to_dict()])

    def rows(self) -> list[tuple[str, str]]:
        load = f"{self.concurrency:g} clients (closed loop)" if self.concurrency is not None \
            else f"{self.arrival_rate:g} requests/s (Poisson)"

        def q(x: Quantiles) -> str:
            return f"median {_secs(x.median)}, p90 {_secs(x.p90)}, p99 {_secs(x.p99)}"
        cost = self.cost_per_million_output_tokens_usd
        return [
            ("model", self.model), ("hardware", f"{self.n_chips} x {self.hardware} ({self.parallel})"),
            ("runtime", f"{self.runtime} ({self.engine})"),
            ("workload", f"{load}, prompt {self.prompt_tokens:g}, output {self.output_tokens:g} tokens (means)"),
            ("dtypes", f"weights {self.weight_dtype}, KV {self.kv_dtype}, activations {self.activation_dtype}"),
            ("TTFT", q(self.ttft)), ("TPOT", q(self.tpot)), ("ITL", q(self.itl)), ("end to end", q(self.e2e)),
            ("per user", f"{self.tok_s_per_user:,.1f} tok/s"),
            ("output", f"{self.output_tok_s:,.0f} tok/s, {self.output_tok_s_per_chip:,.0f} tok/s per chip"),
            ("running batch", f"{self.mean_running:.1f} (cap {self.max_running}), KV {100 * self.kv_occupancy:.0f}% full"),
            ("queueing", f"{_secs(self.queueing_s)}, {self.preemptions} preemptions"),
            ("bound", self.bound),
            ("cost", f"${cost:.3g} per million output tokens" if cost is not None else "no price known"),
        ]

    def __str__(self) -> str:
        from .display import text_table
        return text_table(self.rows())

    def _repr_html_(self) -> str:
        from .display import html_table
        return html_table(self.rows())


def _secs(x: float) -> str:
    return f"{x:.3g} s" if x >= 1 else f"{x * 1e3:.3g} ms"


# ---- the steady-state solver --------------------------------------------------------------


@dataclass(frozen=True)
class Steady:
    """Solver output, arrays over the concurrency (or rate) values."""

    b: np.ndarray            # decoding sequences
    tau: np.ndarray          # mean time per decode token (TPOT)
    tau_d: np.ndarray        # a decode-only step
    tau_m: np.ndarray        # a step carrying a prefill chunk (prefill step alone when not mixed)
    f: np.ndarray            # share of decode steps with a prefill chunk
    x: np.ndarray            # requests per second
    ttft: np.ndarray
    prefill: np.ndarray      # the prompt's own chunks, no waiting
    cap: float               # running-sequence cap (scheduler, KV cache)
    kv_cap_pairs: float
    u_mean: float            # (layer, token) pairs a decoding sequence attends to, at the mean context
    h_mean: float            # the pairs it holds there (u_mean but under sparse attention)


def _running_cap(state: _State, prompt: float) -> tuple[float, float]:
    """The most sequences that run at once (the scheduler's cap, the KV cache's, the token
    budget's) and the KV pairs a chip holds; errors where not one request fits."""
    sm, sched, S, D, h_mean = state.sm, state.sched, state.S, state.D, state.h_mean
    kv_pairs = sm.kv_pairs_capacity(sched)
    if sched.preemption == "none":
        hold = float(sm.held(S + state.T))
    else:
        hold = h_mean + _set(sched.kv_block_tokens) / 2.0 * (h_mean / max(S + D / 2.0, 1.0))
    cap = min(float(_set(sched.max_running)), kv_pairs / max(hold, 1e-30), (state.P - 1.0) / sm.positions)
    if kv_pairs <= 0.0:
        need = sm.weights_bytes
        raise DoesNotFitError(need, sm.capacity_bytes, math.ceil(need * sm.n_chips / sm.capacity_bytes) + 1,
                              f"{sm.prepared.model.name} weights on {sm.n_chips} x {sm.prepared.hardware.name}, "
                              f"per chip, leave no room for a KV cache")
    if cap < 1.0:
        raise InvalidInputError("prompt_tokens", prompt, f"a workload whose KV cache for one request fits: "
                                f"{kv_pairs:.3g} KV pairs free per chip, one request needs {hold:.3g}")
    return cap, kv_pairs


def _balance_wait(ranks: int, hold_steps: int, b, arrivals, step):
    """Steps' worth of time a prompt waits for DP-attention balancing: prompts are held until
    every one of the ranks has one (a new request goes to a rank that just finished one, at
    random: ranks x H(ranks) arrivals, the coupon collector's count) or `hold_steps` steps pass,
    whichever is first; an arrival waits half that cycle on average. Ranks left without a
    sequence (b < ranks) take prompts at once. arrivals: requests per step of `step` seconds."""
    if ranks == 1 or hold_steps == 0:
        return 0.0
    collect = ranks * sum(1.0 / i for i in range(1, ranks + 1))
    cycle = np.minimum(collect / np.maximum(arrivals, 1e-30), float(hold_steps))
    return np.where(b >= ranks, 0.5 * cycle * step, 0.0)


def batch_wait(hold_steps: int, threshold: float, budget: float, prompt: float, gen, arrivals):
    """Batch waiting (TensorRT-LLM's PyExecutor._waiting_requests): while sequences decode, new
    prompts are held until the step's tokens, the held prompts' plus the `gen` decode tokens,
    reach `threshold`, or `hold_steps` steps pass; then all go in one step (as many as `budget`
    tokens take). Prompts of `prompt` tokens arrive as a Poisson stream, `arrivals` per step.
    Returns (steps a prompt is held, prompts released with it), each the mean as a prompt sees it.

    A hold starts at a prompt's arrival and ends at min(K, T_m): K = hold_steps, T_m the
    arrival of the m-th prompt after it, m = (threshold - gen) / prompt - 1 (fractional m:
    linear between the whole counts on either side, as prompts' lengths vary about the mean;
    m = infinity where the prompts needed would not fit the budget, so only the steps end it).
    With N(t) the arrivals after t steps (Poisson, mean a t) and q_j = P(N(K) > j):
      E[hold] = sum_{j<m} q_j / a,  E[sum of the others' shorter holds] = sum_{j<m} j q_j / a,
      prompts per release k = 1 + min(N(K), m): E[k] = 1 + sum_{j<m} q_j and
      E[k^2] = 1 + sum_{j<m} (2 j + 3) q_j (E[X^2] = sum_j (2 j + 1) P(X > j)).
    A prompt's mean hold is E[hold + sum of others'] / E[k] = sum_{j<m} (j + 1) q_j / (a E[k])
    (K when prompts are rare), and the release it sees holds E[k^2] / E[k] prompts (a step's
    cost is linear in its prompts, so the size-biased mean prices the step a prompt sees)."""
    gen = np.asarray(gen, float)
    a = np.maximum(np.asarray(arrivals, float), 1e-12)
    mu = a * hold_steps
    shape = np.broadcast(gen, mu).shape
    need = (threshold - gen) / max(prompt, 1e-30)          # prompts whose tokens reach the threshold
    fits = np.floor((budget - gen) / max(prompt, 1e-30))   # prompts one step takes beside the decodes
    top = float(np.max(mu))
    J = int(math.ceil(top + 12.0 * math.sqrt(top) + 30.0))  # N(K) > J has probability < 1e-16
    m = np.where(np.ceil(need) > fits, float(J), np.clip(need - 1.0, 0.0, float(J)))
    m = np.broadcast_to(m, shape)
    j = np.arange(J + 1, dtype=float).reshape((-1,) + (1,) * len(shape))
    logpmf = j * np.log(np.maximum(mu, 1e-300)) - mu - np.cumsum(np.log(np.maximum(j, 1.0)), axis=0)
    pmf = np.exp(logpmf)
    q = np.flip(np.cumsum(np.flip(pmf, 0), 0), 0) - pmf     # P(N > j), summed from the tail
    lo = np.floor(m)
    w = np.where(j < lo, 1.0, np.where(j < lo + 1.0, m - lo, 0.0))   # j < m, linear at the fraction
    s0, s1 = np.sum(w * q, axis=0), np.sum(w * j * q, axis=0)
    steps = (s0 + s1) / (a * (1.0 + s0))
    k = (1.0 + 2.0 * s1 + 3.0 * s0) / (1.0 + s0)
    return steps, k


class _State:
    """The steady figures at a mean of b decoding sequences, for mean lengths S, T."""

    def __init__(self, sm: StepModel, sched: Scheduler, S: float, T: float, closed: bool):
        self.sm, self.sched, self.S, self.T, self.closed = sm, sched, S, T, closed
        self.D = max(T - 1.0, 1e-9)
        self.u_mean = float(sm.attended(S + self.D / 2.0))
        self.h_mean = float(sm.held(S + self.D / 2.0))
        self.u_S = sm.held(S)                                  # a prompt's KV, read and written
        self.pairs_S = causal_pairs(sm.groups, S)              # its attention's causal pairs
        self.index_S = causal_pairs(sm.held_groups, S)         # its indexer's
        self.P = float(_set(sched.token_budget))
        # a scheduler that takes in requests once every k decode steps makes an arrival wait
        # (k - 1) / 2 steps on average, while a batch decodes (others >= 1; an idle one polls at once)
        self.recv_wait = (_set(sched.recv_interval_steps) - 1.0) / 2.0

    def __call__(self, b, N=1.0):
        """An arriving prompt and a decoding sequence see the others: b (N - 1) / N of them in a
        closed loop of N clients, b in an open one. (TPOT, tau_d, tau_m, f, X, TTFT, the
        prompt's own chunks, whether the prefill work fits the budget.)"""
        sm, S, D = self.sm, self.S, self.D
        others = b * (N - 1.0) / N if self.closed else b
        avail = self.P - (others * sm.positions if self.sched.mixed_steps else 0.0)
        c0 = np.minimum(S, avail) if self.sched.chunked_prefill else S + 0.0 * b
        pbar = others * S * sm.tokens_per_step / D      # prefill tokens per decode step
        c = np.minimum(np.maximum(c0, pbar), avail)
        f = np.minimum(pbar / np.maximum(c, 1e-30), 1.0)
        tau, tau_d, tau_m, tau_own = self._steps(b, others, c0, c, f)
        x = b * sm.tokens_per_step / (D * tau)
        pre = self._own_chunks(others, c0, tau_own)
        rho = np.minimum(pbar / np.maximum(avail, 1e-30), 0.999)
        # an arrival waits for the running step to end (half a step on average), except in a
        # closed loop with no host time, where requests arrive as others complete, at a boundary
        residual = 0.0 if self.closed and sm.host_s == 0.0 else 0.5 * tau
        balance = _balance_wait(sm.ranks, _set(self.sched.dp_balance_steps), b, x * tau, tau)
        held, released = self._held(others, x * tau, tau_d, c0, avail, tau_own)
        ttft = sm.host_s + residual + pre + rho / (2.0 * (1.0 - rho)) * pre + balance \
            + self.recv_wait * tau * np.minimum(others, 1.0) + held + released
        pre = pre + released
        return tau / sm.tokens_per_step, tau_d, tau_m, f, x, ttft, pre, pbar <= avail

    def _held(self, others, arrivals, tau_d, c0, avail, tau_own):
        """Batch waiting (Scheduler.batch_wait_*): the seconds a prompt is held while the others
        decode (steps of tau_d), and what its first prefill step costs beyond tau_own for the
        prompts released with it (`batch_wait`: k of them, as a prompt sees it). Both are weighted
        by min(others, 1): with nothing decoding, prompts go at once. arrivals: per step."""
        sm, sched = self.sm, self.sched
        hold, ratio = _set(sched.batch_wait_steps), _set(sched.batch_wait_ratio)
        if not (hold and ratio) or sm.ranks > 1:       # TensorRT-LLM waits only with both, never under DP
            return 0.0, 0.0
        gen = others * sm.positions
        steps, k = batch_wait(hold, ratio * self.P, self.P, self.S, gen, arrivals)
        c = np.minimum(k * c0, np.maximum(avail, c0))     # the released prompts' first chunks
        share = c / max(self.S, 1.0)
        hp = share * self.index_S
        if sched.mixed_steps:       # as `_steps` prices the prompt's own step (tau_own), with k prompts
            tau_rel = sm.step(others, self.u_mean, c, share * self.u_S, share * self.pairs_S, seqs=others + k,
                              h=self.h_mean, hp=hp)
        else:
            tau_rel = sm.step(0.0 * others, self.u_mean, c, share * self.u_S, share * self.pairs_S, seqs=k, hp=hp)
        gate = np.minimum(others, 1.0)
        return gate * steps * tau_d, gate * (tau_rel - tau_own)

    def _own_chunks(self, others, c0, tau_own):
        """Seconds of the prompt's own prefill steps: S // c0 full chunks (tau_own each) and a last
        one of the S mod c0 tokens left (one step of c0 where S = 0). Each chunk carries its share
        of the prompt's KV and attention pairs (by its tokens), so the chunks' pairs sum to the
        prompt's: a prompt within the budget is one step, core's prefill of it."""
        S = self.S
        if S <= 0:
            return tau_own
        c0 = np.maximum(c0, 1.0)
        full = np.floor(S / c0)
        rest = S - full * c0
        last = self._own_step(others, rest)
        return full * tau_own + np.where(rest > 0.0, last, 0.0)

    def _own_step(self, others, c):
        """A step carrying c tokens of the prompt (its share of the KV and the pairs) beside the
        others' decodes where steps mix (alone where they do not)."""
        sm, S = self.sm, max(self.S, 1.0)
        share = c / S
        kw = dict(cu=share * self.u_S, cp=share * self.pairs_S, hp=share * self.index_S)
        if self.sched.mixed_steps:
            return sm.step(others, self.u_mean, c, h=self.h_mean, **kw)
        return sm.step(0.0 * others, self.u_mean, c, seqs=1.0, **kw)

    def _steps(self, b, others, c0, c, f):
        """The mean step, the decode step, the step with a prefill chunk c, the prompt's own (c0)."""
        sm, S, u_mean, u_S, pairs_S = self.sm, self.S, self.u_mean, self.u_S, self.pairs_S
        h, idx_S = self.h_mean, self.index_S
        share = c / max(S, 1.0)
        tau_d = sm.step(1.0 + others, u_mean, h=h)
        if self.sched.mixed_steps:
            tau_m = sm.step(1.0 + others, u_mean, c, share * u_S, share * pairs_S, h=h, hp=share * idx_S)
            tau = (1.0 - f) * tau_d + f * tau_m
        else:
            tau_m = sm.step(0.0 * b, u_mean, c, share * u_S, share * pairs_S, seqs=share, hp=share * idx_S)
            tau = tau_d + f * tau_m
        return tau, tau_d, tau_m, self._own_step(others, c0)


def _closed_loop(state: _State, concurrency, cap: float):
    """N clients hold N = b + X TTFT (Little): b where that holds, or the cap with the rest queued."""
    N = np.asarray(concurrency, float)
    hi = np.minimum(N, cap)
    tau, _, _, _, x, ttft, _, ok = state(hi, N)
    capped = ok & (hi + x * ttft <= N)

    def below(b, n):
        tau, _, _, _, x, ttft, _, ok = state(b, n)
        return ok & (b + x * ttft < n)
    b = np.where(capped, hi, _root(below, N * 1e-9, hi, N))
    tau, tau_d, tau_m, f, x, ttft, pre, _ = state(b, N)
    # the prefill budget binds before the clients are all served (b + X TTFT < N where the
    # root stopped at the budget's edge): b is the most the budget sustains and the rest queue,
    # as at the cap (Little's law over all N clients would count the queue as decoding)
    full = capped | (b + x * ttft < N * (1.0 - 1e-6))
    ttft = np.where(full, np.maximum((N - b) / x, ttft), ttft)
    x = np.where(full, x, N / (ttft + state.D * tau))      # Little's law, exact at the root
    return b, tau, tau_d, tau_m, f, x, ttft, pre


def _open_loop(state: _State, arrival_rate, cap: float):
    """Poisson arrivals at a rate: b where the engine completes that rate (below its capacity)."""
    lam = np.asarray(arrival_rate, float)
    grid = cap * np.geomspace(1e-6, 1.0, 200)
    _, _, _, _, x, _, _, ok = state(grid)
    capacity = float(np.max(np.where(ok, x, 0.0)))
    if not np.all(lam < capacity):
        raise InvalidInputError("arrival_rate", float(np.max(lam)), f"below the engine's capacity, "
                                f"{capacity:.4g} requests/s here (the queue would grow without end)")

    def below(b, rate):
        tau, _, _, _, x, ttft, _, ok = state(b)
        return ok & (x < rate)
    b = _root(below, np.full(lam.shape, 1e-9), np.full(lam.shape, cap), lam)
    tau, tau_d, tau_m, f, x, ttft, pre, _ = state(b)
    return b, tau, tau_d, tau_m, f, lam + 0.0 * b, ttft, pre


def solve(sm: StepModel, sched: Scheduler, prompt: float, output: float, *, concurrency=None,
          arrival_rate=None) -> Steady:
    """The steady state for mean lengths `prompt`, `output` (see the module docstring).
    concurrency or arrival_rate may be numpy arrays (vectorised)."""
    closed = concurrency is not None
    state = _State(sm, sched, float(prompt), float(output), closed)
    cap, kv_pairs = _running_cap(state, prompt)
    b, tau, tau_d, tau_m, f, x, ttft, pre = (_closed_loop(state, concurrency, cap) if closed
                                             else _open_loop(state, arrival_rate, cap))
    return Steady(b, tau, tau_d, tau_m, f, x, ttft, pre, cap, kv_pairs, state.u_mean, state.h_mean)


def finite_run_share(e2e, tau0: float, output: Length, concurrency, runs=10.0) -> np.ndarray:
    """Share of the steady throughput that a finite closed-loop run measures over its whole
    duration: N clients send `runs` x N requests, the first N at once, and the throughput is
    the output tokens over the time until the last request completes (InferenceMAX's protocol).
    `runs` (requests per client) may be an array over the concurrency values.
    e2e: the steady end-to-end time of a request; tau0: one sequence's decode step (seconds).

    The clients start together, so their requests stay nearly in phase: after k = `runs`
    requests a client's last completion is off the mean by the sum of k output lengths'
    deviations, sigma = sqrt(k) std(T) tokens. The last of N clients finishes m_N sigma steps
    after the median one (m_N: the expected largest of N standard normals, Blom's
    approximation), at most half an output length (clients fully out of phase finish spread
    over one request). While the run drains, a step of the shrinking batch costs tau0 per slot
    left idle, and the idle slot-steps come to m_N sigma per client (the area above a normal
    CDF from -m_N sigma to m_N sigma). So the run lasts k e2e + tau0 m_N sigma per client
    instead of k e2e."""
    n = np.asarray(concurrency, float)
    k = np.asarray(runs, float)
    m = np.vectorize(lambda v: NormalDist().inv_cdf((v - 0.375) / (v + 0.25)))(n)
    spread = np.minimum(m * np.sqrt(k) * output.std, output.mean / 2.0)
    e2e = np.asarray(e2e, float)
    return k * e2e / (k * e2e + tau0 * spread)


def run_share(sm: StepModel, st: Steady, output: Length, concurrency, runs=10.0) -> np.ndarray:
    """`finite_run_share` for a solved steady state (its e2e; tau0 = one sequence's decode step
    per token it emits)."""
    e2e = st.ttft + (output.mean - 1.0) * st.tau
    tau0 = float(sm.step(1.0, st.u_mean, h=st.h_mean)) / sm.tokens_per_step
    return finite_run_share(e2e, tau0, output, concurrency, runs)


def _root(below, lo, hi, arg, points: int = 24, rounds: int = 7):
    """The b in [lo, hi] where `below(b, arg)` turns False (monotone), by refining a geometric
    grid of `points` values per round, all elements at once (lo, hi, arg: arrays of one shape).
    Each round narrows log(hi / lo) by points - 1: the solver's bracket of 1e9 ends at
    ln(1e9) / 23^7 = 6e-9 relative after 7 rounds (5 left 3e-6, enough for a figure to break
    the law "more bandwidth never slows" by 2e-4 at a KV or batch cap)."""
    shape = np.shape(arg)
    lo, hi, arg = (np.atleast_1d(np.asarray(v, float)) for v in (lo, hi, arg))
    lo, hi = np.broadcast_to(lo, arg.shape), np.broadcast_to(hi, arg.shape)
    j = np.linspace(0.0, 1.0, points)
    for _ in range(rounds):
        grid = lo[:, None] * (hi / lo)[:, None] ** j
        n_below = np.sum(below(grid, arg[:, None]), axis=1)
        k = np.clip(n_below, 1, points - 1)
        lo, hi = np.take_along_axis(grid, (k - 1)[:, None], 1)[:, 0], np.take_along_axis(grid, k[:, None], 1)[:, 0]
    b = np.sqrt(lo * hi)
    return b.reshape(shape) if shape else float(b[0])


# ---- the simulator ------------------------------------------------------------------------


@dataclass
class _Trace:
    arrive: np.ndarray
    admit: np.ndarray
    first: np.ndarray
    done: np.ndarray
    itl: list[tuple[np.ndarray, np.ndarray]]   # (durations, weights) of runs of steps
    busy: float = 0.0  # integral of running batch over time
    kv: float = 0.0    # integral of KV occupancy over time
    preemptions: int = 0


def _check_simulable(sm: StepModel, sched: Scheduler) -> None:
    """What the simulator does not model raises InvalidInputError naming the solver."""
    if sm.draft is not None:
        raise InvalidInputError("engine", "simulate", "'solver' for a speculative step model (the simulator "
                                "does not model speculative decoding)")
    if sm.ranks > 1 and _set(sched.dp_balance_steps):
        raise InvalidInputError("engine", "simulate", "'solver' for data-parallel attention with prompt balancing "
                                "(the simulator does not hold prompts), or Scheduler(dp_balance_steps=0)")
    if _set(sched.recv_interval_steps) > 1:
        raise InvalidInputError("engine", "simulate", "'solver' for a scheduler that takes in requests every "
                                "few steps (the simulator takes them every step), or Scheduler(recv_interval_steps=1)")
    if _set(sched.batch_wait_steps) and _set(sched.batch_wait_ratio):
        raise InvalidInputError("engine", "simulate", "'solver' for a scheduler that holds new prompts to batch "
                                "them (the simulator does not hold prompts), or Scheduler(batch_wait_steps=0)")


class _Simulation:
    """The state of one `simulate` run: requests by id (pending at the engine, waiting, being
    prefilled), the decoding batch as arrays (ids, contexts, tokens left), the clock."""

    def __init__(self, sm: StepModel, sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray,
                 concurrency: int | None, arrivals: np.ndarray | None):
        n = len(prompts)
        self.sm, self.sched, self.n = sm, sched, n
        self.S, self.T = prompts.astype(np.int64), outputs.astype(np.int64)
        self.groups, self.held_groups = sm.groups, sm.held_groups     # attended, held
        self.P, self.M, self.blk = _set(sched.token_budget), _set(sched.max_running), _set(sched.kv_block_tokens)
        self.cap = sm.kv_pairs_capacity(sched)
        self.closed = arrivals is None
        arrive = np.full(n, np.inf)
        self.h = sm.host_s            # a request reaches the engine h after it is sent
        if arrivals is not None:
            arrive[:] = np.asarray(arrivals, float)
            self.issued = n
        else:
            self.issued = min(_set(concurrency), n)
            arrive[:self.issued] = 0.0
        self.pending = [(arrive[i] + self.h, i) for i in range(self.issued)]      # (time at the engine, id)
        heapq.heapify(self.pending)
        self.tr = _Trace(arrive, np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), [])
        self.waiting: deque[int] = deque()
        self.pre_done = np.zeros(n, np.int64)          # prompt tokens prefilled
        self.need = self.S.copy()                      # tokens to prefill (a preempted request's context)
        self.saved_left = self.T - 1                   # tokens still to decode after the prefill
        self.run_id = np.zeros(0, np.int64)            # decoding sequences
        self.run_ctx = np.zeros(0, np.int64)
        self.run_left = np.zeros(0, np.int64)
        self.prefilling: list[int] = []                # admitted, prefill not finished (ids)
        self.t = 0.0
        self.completed = 0
        self.reserved = 0.0
        self.per_token = float(effective_context(self.held_groups, 1.0))     # most pairs one more token adds

    def kv_of(self, ctx):
        """Pairs a sequence of ctx tokens holds, block-rounded."""
        return effective_context(self.held_groups, np.ceil(np.asarray(ctx, float) / self.blk) * self.blk)

    def reserve(self, i: int) -> float:
        """Pairs held at admission under preemption="none"."""
        return float(effective_context(self.held_groups, float(self.S[i] + self.T[i])))

    def held(self) -> float:
        if self.sched.preemption == "none":
            return self.reserved
        r = float(np.sum(self.kv_of(self.run_ctx))) if self.run_ctx.size else 0.0
        return r + float(sum(self.kv_of(self.pre_done[i]) for i in self.prefilling))

    def run(self) -> _Trace:
        while self.completed < self.n:
            while self.pending and self.pending[0][0] <= self.t:
                self.waiting.append(heapq.heappop(self.pending)[1])
            if not self.waiting and not self.prefilling and self.run_id.size == 0:
                if not self.pending:
                    break
                self.t = float(self.pending[0][0])
                continue
            b = int(self.run_id.size)
            used = self._admit(b)
            chunks = self._chunks(b)
            if not chunks and b:
                k_done, c_done = float(self._decode_run(b, used)), 0.0
            else:
                k_done, c_done = 1.0, self._prefill_step(b, chunks, used)
            self._preempt(used, k_done, c_done)
            self._complete()
        return self.tr

    def _admit(self, b: int) -> float:
        """Waiting prompts join the prefilling ones while the batch and the KV cache have room;
        the KV pairs held after admission."""
        used = self.held()
        while self.waiting and len(self.prefilling) + b < self.M:
            i = self.waiting[0]
            if self.sched.preemption == "none":
                if used + self.reserve(i) > self.cap:
                    break
                used += self.reserve(i)
                self.reserved += self.reserve(i)
            elif used + float(self.kv_of(self.need[i])) > self.cap and (b or self.prefilling):
                break
            self.waiting.popleft()
            self.prefilling.append(i)
            admit = self.tr.admit
            admit[i] = self.t if np.isnan(admit[i]) else admit[i]
        return used

    def _chunks(self, b: int) -> list[tuple[int, int]]:
        """(id, tokens) of the prompts this step prefills, within the token budget."""
        chunks: list[tuple[int, int]] = []
        left = self.P - b if self.sched.mixed_steps else self.P
        if self.sched.mixed_steps or not self.run_id.size or self.prefilling:
            for i in self.prefilling:
                if left <= 0:
                    break
                rest = int(self.need[i] - self.pre_done[i])
                take = rest if not self.sched.chunked_prefill else min(rest, left)
                if take > left and chunks:
                    break
                chunks.append((i, take))
                left -= take
        return chunks

    def _u_run(self) -> float:
        return float(np.mean(effective_context(self.groups, self.run_ctx.astype(float))))

    def _h_run(self) -> float:
        """Held pairs per decoding sequence, for a sparse-attention indexer (0 without one)."""
        return float(np.mean(effective_context(self.held_groups, self.run_ctx.astype(float)))) if self.sm.indexed \
            else 0.0

    def _advance(self, b: int, span: float, used: float) -> None:
        self.tr.busy += b * span
        self.tr.kv += min(used / self.cap, 1.0) * span if self.cap > 0 else 0.0
        self.t += span

    def _decode_run(self, b: int, used: float) -> int:
        """A run of pure decode steps until the next event (a completion, the KV cache full, an
        arrival, a prompt that could be admitted); the steps taken."""
        k = int(self.run_left.min())
        if self.sched.preemption != "none":
            room = self.cap - used
            k = max(1, min(k, int(room // max(b * self.per_token, 1e-30)) + 1))
        if self.waiting and len(self.prefilling) + b < self.M:
            k = 1
        if k > 1:
            js = np.arange(k, dtype=float)
            ctx = self.run_ctx[None, :].astype(float) + js[:, None]
            u_j = np.mean(effective_context(self.groups, ctx), axis=1)
            h_j = np.mean(effective_context(self.held_groups, ctx), axis=1) if self.sm.indexed else 0.0
            dur = np.asarray(self.sm.step(float(b), u_j, h=h_j), float)
        else:
            dur = np.array([self.sm.step1(float(b), self._u_run(), h=self._h_run())])
        if self.pending:
            k2 = int(np.searchsorted(np.cumsum(dur), self.pending[0][0] - self.t)) + 1
            if k2 < k:
                k, dur = k2, dur[:k2]
        self.tr.itl.append((dur, np.full(k, float(b))))
        self._advance(b, float(dur.sum()), used)
        self.run_ctx = self.run_ctx + k
        self.run_left = self.run_left - k
        return k

    def _prefill_step(self, b: int, chunks: list[tuple[int, int]], used: float) -> float:
        """One step of the prefill chunks, with the b decoding sequences where steps mix; the
        prompt tokens run. A prompt whose prefill ends joins the decoding batch."""
        g, held, done = self.groups, self.held_groups, self.pre_done
        bd = b if self.sched.mixed_steps else 0
        cu = sum(float(effective_context(held, float(done[i] + c))) for i, c in chunks)
        cp = sum(float(causal_pairs(g, float(done[i] + c)) - causal_pairs(g, float(done[i]))) for i, c in chunks)
        hp = sum(float(causal_pairs(held, float(done[i] + c)) - causal_pairs(held, float(done[i])))
                 for i, c in chunks) if self.sm.indexed else 0.0
        c_tok = float(sum(c for _, c in chunks))
        u_run, h_run = (self._u_run(), self._h_run()) if bd else (0.0, 0.0)
        dt = self.sm.step1(float(bd), u_run, c_tok, cu, cp, seqs=float(bd + len(chunks)), h=h_run, hp=hp)
        if bd:
            self.tr.itl.append((np.array([dt]), np.array([float(bd)])))
            self.run_ctx = self.run_ctx + 1
            self.run_left = self.run_left - 1
        self._advance(b, dt, used)
        for i, c in chunks:
            done[i] += c
            if done[i] >= self.need[i]:
                self.prefilling.remove(i)
                if np.isnan(self.tr.first[i]):
                    self.tr.first[i] = self.t
                self.run_id = np.append(self.run_id, i)
                self.run_ctx = np.append(self.run_ctx, self.need[i])
                self.run_left = np.append(self.run_left, self.saved_left[i])
        return c_tok

    def _preempt(self, used: float, k_done: float, c_done: float) -> None:
        """KV overflow: preempt the newest sequences (the tokens already streamed stay streamed)."""
        n_run = self.run_ctx.size
        grown = used + self.per_token * (float(n_run) * k_done + c_done + self.blk * (n_run + 1))
        if self.sched.preemption == "none" or not n_run or grown <= self.cap:
            return
        while self.run_ctx.size > 1 and self.held() > self.cap:
            i = int(self.run_id[-1])
            self.tr.preemptions += 1
            self.need[i], self.saved_left[i] = self.run_ctx[-1], self.run_left[-1]
            self.pre_done[i] = 0 if self.sched.preemption == "recompute" else self.need[i]
            self.run_id, self.run_ctx, self.run_left = self.run_id[:-1], self.run_ctx[:-1], self.run_left[:-1]
            self.waiting.appendleft(i)

    def _complete(self) -> None:
        """Finished sequences leave the batch; in a closed loop each client sends its next request."""
        fin = self.run_left <= 0
        if not fin.any():
            return
        for i in self.run_id[fin]:
            self.tr.done[i] = self.t
            self.completed += 1
            if self.sched.preemption == "none":
                self.reserved -= self.reserve(int(i))
            if self.closed and self.issued < self.n:
                self.tr.arrive[self.issued] = self.t
                heapq.heappush(self.pending, (self.t + self.h, self.issued))
                self.issued += 1
        self.run_id, self.run_ctx, self.run_left = self.run_id[~fin], self.run_ctx[~fin], self.run_left[~fin]


def simulate(sm: StepModel, sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray, *,
             concurrency: int | None = None, arrivals: np.ndarray | None = None) -> _Trace:
    """Iteration-level simulation. Closed loop (`concurrency` clients, each sends its next request
    when the last completes) or given arrival times. Lengths per request are given."""
    _check_simulable(sm, sched)
    return _Simulation(sm, sched, prompts, outputs, concurrency, arrivals).run()


# ---- the public entry point ---------------------------------------------------------------


def serve(model, hardware, *, concurrency: int | None = None, arrival_rate: float | None = None,
          prompt_tokens=1024, output_tokens=1024, weight_dtype: str = "bf16", kv_dtype: str | None = None,
          activation_dtype: str | None = None, n_chips: int = 1, parallel=None, runtime="vllm",
          scheduler: Scheduler | None = None, speculative=None, engine: str = "solver", seed: int = 0,
          n_requests: int | None = None, price_usd_per_hour: float | None = None,
          dense_weight_dtype: str | None = None) -> ServeResult:
    """A served workload: `concurrency` clients in a closed loop, or Poisson arrivals at
    `arrival_rate` requests/s, against one engine instance of `n_chips` chips.

    prompt_tokens / output_tokens: a count or a distribution (mb.Fixed, mb.Uniform, mb.Samples).
    runtime: an engine with a `served` block (vllm, sglang, tensorrt-llm) gives the scheduler
    defaults and the engine costs; scheduler overrides knobs. engine: "solver" (steady state,
    percentiles from the length distributions) or "simulate" (seeded, n_requests requests;
    default 10 per client as InferenceMAX runs, at least 200). speculative: a mb.SpeculativeDecoding
    with a draft model (mb.mtp(model, gamma) for an MTP head; solver only): each step verifies
    gamma + 1 tokens per sequence, runs the drafter gamma times, emits tokens_per_round.
    dense_weight_dtype: the format of the tensors that are not routed experts, as estimate()'s
    (gpt-oss: weight_dtype="mxfp4", dense_weight_dtype="bf16"); None = weight_dtype.
    """
    if (concurrency is None) == (arrival_rate is None):
        raise InvalidInputError("concurrency", concurrency, "exactly one of concurrency or arrival_rate")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral)
                                    or concurrency < 1):
        raise InvalidInputError("concurrency", concurrency, "an integer >= 1 (clients in a closed loop)")
    if arrival_rate is not None and (isinstance(arrival_rate, bool) or not isinstance(arrival_rate, numbers.Real)
                                     or not math.isfinite(arrival_rate) or arrival_rate <= 0):
        raise InvalidInputError("arrival_rate", arrival_rate, "a finite rate > 0 requests per second")
    if engine not in ("solver", "simulate"):
        raise InvalidInputError("engine", engine, "'solver' or 'simulate'")
    if speculative is not None and engine == "simulate":
        raise InvalidInputError("engine", engine, "'solver' with speculative=: the simulator does not model "
                                "speculative decoding (the solver does)")
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise InvalidInputError("scheduler", scheduler, "a mb.Scheduler")
    if n_requests is not None and (isinstance(n_requests, bool) or not isinstance(n_requests, numbers.Integral)
                                   or n_requests < 1):
        raise InvalidInputError("n_requests", n_requests, "an integer >= 1")
    prompt = as_length("prompt_tokens", prompt_tokens, 0)
    output = as_length("output_tokens", output_tokens, 2)
    sm, sched, p = build(model, hardware, prompt=prompt, output=output, weight_dtype=weight_dtype,
                         kv_dtype=kv_dtype, activation_dtype=activation_dtype, n_chips=n_chips,
                         parallel=parallel, runtime=runtime, scheduler=scheduler,
                         price_usd_per_hour=price_usd_per_hour, speculative=speculative,
                         dense_weight_dtype=dense_weight_dtype)
    if engine == "solver":
        st = solve(sm, sched, prompt.mean, output.mean, concurrency=concurrency, arrival_rate=arrival_rate)
        return _from_solver(sm, sched, p, st, prompt, output, concurrency, arrival_rate)
    n = n_requests if n_requests is not None else max(200, 10 * (concurrency or 20))
    rng = np.random.default_rng(seed)
    S, T = prompt.sample(rng, n), output.sample(rng, n)
    arrivals = None if arrival_rate is None else np.cumsum(rng.exponential(1.0 / arrival_rate, n))
    tr = simulate(sm, sched, S, T, concurrency=concurrency, arrivals=arrivals)
    return _from_trace(sm, sched, p, tr, S, T, prompt, output, concurrency, arrival_rate)


def instance_limits(sched: Scheduler, served: Served, ranks: int) -> Scheduler:
    """The engine instance's limits under data-parallel attention over `ranks` (the layout's ep)
    ranks, each scheduling its own sequences: an engine whose served block has `rank_limits`
    takes max_running and token_budget per rank (TensorRT-LLM's max_batch_size and
    max_num_tokens; vLLM's per data-parallel engine core), so the instance runs `ranks` times
    them; otherwise they are the instance's already (SGLang divides --max-running-requests and
    --chunked-prefill-size by dp_size under --enable-dp-attention: server_args.py
    _handle_data_parallelism, model_executor/model_runner.py)."""
    if not served.rank_limits or ranks == 1:
        return sched
    return replace(sched, max_running=_set(sched.max_running) * ranks, token_budget=_set(sched.token_budget) * ranks)


def build(model, hardware, *, prompt: Length, output: Length, weight_dtype="bf16", kv_dtype=None,
          activation_dtype=None, n_chips=1, parallel=None, runtime="vllm", scheduler=None,
          price_usd_per_hour=None, speculative=None, dense_weight_dtype=None, quantization=None):
    """(StepModel, resolved Scheduler, Prepared) for a served configuration; with a
    SpeculativeDecoding, the step verifies drafted tokens (attach_speculative).
    quantization: a mb.Quantization instead of the dtype names (a mixed checkpoint's tensor groups)."""
    rt = load_runtime(runtime)
    sched = (scheduler or Scheduler()).resolved(rt.served or DEFAULT_SERVED)
    budget, running = _set(sched.token_budget), _set(sched.max_running)
    if budget < running:
        raise InvalidInputError("scheduler.token_budget", budget,
                                f"at least max_running ({running}): one decode token per running sequence")
    if not sched.chunked_prefill and prompt.high > budget:
        raise InvalidInputError("scheduler.token_budget", budget,
                                f"at least the longest prompt ({prompt.high}) without chunked prefill")
    p = prepare(model, hardware, batch=1, prompt_tokens=int(prompt.high), output_tokens=int(output.high),
                weight_dtype=weight_dtype, kv_dtype=kv_dtype, activation_dtype=activation_dtype, n_chips=n_chips,
                parallel=parallel, runtime=rt, price_usd_per_hour=price_usd_per_hour,
                dense_weight_dtype=dense_weight_dtype, quantization=quantization)
    if p.layout.pp > 1:
        raise InvalidInputError("parallel.pp", p.layout.pp, "1 for served workloads (pipeline stages are not modelled in serve)")
    sched = instance_limits(sched, rt.served or DEFAULT_SERVED, p.layout.ep)
    budget, running = _set(sched.token_budget), _set(sched.max_running)
    if speculative is None:
        return StepModel(p, rt.served, budget + running), sched, p
    if not isinstance(speculative, SpeculativeDecoding):
        raise InvalidInputError("speculative", speculative, "None or a mb.SpeculativeDecoding (e.g. mb.mtp(model, 3))")
    most = budget + running * speculative.positions
    sm = StepModel(p, rt.served, most)
    attach_speculative(sm, speculative, rt.served, most)
    return sm, sched, p


def attach_speculative(sm: StepModel, spec: SpeculativeDecoding, served: Served | None, max_tokens: float) -> None:
    """Make a served step model `sm` (plain decoding) a speculative one. Each step, every decoding
    sequence verifies `spec.positions` tokens (the weights the step touches, its FLOPs, its
    communication grow with them; its KV is read once) and emits `tokens_per_round` tokens on
    average; the drafter runs `gamma` passes over the decoding sequences. The first takes every
    verified position of each sequence (the accepted tokens and their hidden states, padded to
    `positions` under a CUDA graph: TensorRT-LLM's MTP Eagle feeds all accepted tokens with their
    hidden states to the first MTP module forward, NVIDIA's tech blog 2 "DeepSeek R1 MTP
    Implementation and Optimization"; SGLang's EAGLE worker re-runs the draft over the accepted
    tokens after verifying), so its MoE layer touches the experts of b x positions tokens; it also
    carries the step's prefill chunk (the drafter keeps a KV cache of the prompt too). The other
    gamma - 1 passes take one token each. The drafter is a StepModel of the draft model on the
    target's devices (tensor-parallel like it, in the target's formats) with the engine's per-layer
    and per-MoE-layer costs; the per-step, per-sequence and per-request host costs are the round's
    and paid once, by the verify pass. Its weights and its KV (per token, L_draft/L_target of the
    target's pairs) come out of the KV cache's room. Only a draft model is costed here (a preset, a
    Model, or `mtp_module(model)`); a head given by head_params/head_vocab or a draft_cost fraction
    raises InvalidInputError."""
    if not isinstance(spec, SpeculativeDecoding):
        raise InvalidInputError("speculative", spec, "a mb.SpeculativeDecoding")
    if spec.draft is None:
        given = "draft_cost" if spec.draft_cost is not None else "draft"
        raise InvalidInputError(f"speculative.{given}", getattr(spec, given),
                                "a draft model in serve(): a preset name, a Model, or mb.mtp_module(model) for an "
                                "MTP head (heads given by head_params or draft_cost are costed by estimate() only)")
    p = sm.prepared
    dm = load_model(spec.draft)
    layout = Parallel(tp=p.layout.tp, ep=p.layout.ep if dm.n_experts else 1)
    res = p.resolved
    pd = prepare(dm, p.hardware, batch=1, prompt_tokens=p.prompt, output_tokens=p.output,
                 weight_dtype=res.weights.name, kv_dtype=res.kv.name, activation_dtype=res.activations.name,
                 n_chips=layout.chips, parallel=layout, runtime=p.runtime, allow_beyond_context=True)
    if served is not None:
        served = served.model_copy(update=dict(per_step_s=0.0, per_sequence_s=0.0, per_request_s=0.0))
    sd = StepModel(pd, served, max_tokens)
    extend = copy.copy(sd)                      # the first pass: every verified position of a sequence
    extend.positions = float(spec.positions)
    r = dm.n_layers / p.model.n_layers          # the drafter's (layer, token) pairs per target pair
    rest = spec.gamma - 1

    def draft(b, u, c=0.0, cu=0.0, cp=0.0, h=0.0, hp=0.0):
        first = extend.step(b, u * r, c, cu * r, cp * r, h=h * r, hp=hp * r)
        return first + rest * np.where(np.asarray(b) > 0, sd.step(b, u * r, h=h * r), 0.0) if rest else first

    sm.positions, sm.tokens_per_step, sm.draft = float(spec.positions), spec.tokens_per_round, draft
    sm.weights_bytes += sd.weights_bytes
    sm.kv_pair_bytes += sd.kv_pair_bytes * r


def _common(sm: StepModel, p: Prepared, prompt: Length, output: Length, concurrency, arrival_rate, engine: str):
    res = p.resolved
    return dict(model=p.model.name, hardware=p.hardware.name, runtime=p.runtime.name, engine=engine,
                n_chips=p.n_chips, parallel=f"tp={p.layout.tp} pp={p.layout.pp} ep={p.layout.ep}",
                concurrency=None if concurrency is None else float(concurrency),
                arrival_rate=None if arrival_rate is None else float(arrival_rate),
                prompt_tokens=prompt.mean, output_tokens=output.mean, weight_dtype=res.weights.name,
                kv_dtype=res.kv.name, activation_dtype=res.activations.name)


def _cost(sm: StepModel, tok_s: float) -> float | None:
    if sm.price is None or tok_s <= 0:
        return None
    return sm.n_chips * sm.price / 3600.0 / tok_s * 1e6


def _from_solver(sm, sched, p, st: Steady, prompt, output, concurrency, arrival_rate) -> ServeResult:
    b, tau, x, ttft = (float(np.asarray(v)) for v in (st.b, st.tau, st.x, st.ttft))
    tau_d, tau_m, f, pre = (float(np.asarray(v)) for v in (st.tau_d, st.tau_m, st.f, st.prefill))
    D = output.mean - 1.0
    wait = max(ttft - pre, 0.0)

    def ttft_q(q):       # the prompt's own chunks scale with its length; the wait is shared
        return wait + pre * (prompt.quantile(q) / prompt.mean if prompt.mean else 0.0)
    ttft_qs = Quantiles(ttft_q(0.5), ttft_q(0.9), ttft_q(0.99), ttft)
    tpot = Quantiles(tau, tau, tau, tau)
    gap = tau_m if sched.mixed_steps else tau_d + tau_m

    def itl_q(q):        # a share f of the gaps carries a prefill chunk
        return gap if f > 1.0 - q else tau_d
    itl = Quantiles(itl_q(0.5), itl_q(0.9), itl_q(0.99), tau)
    e50, e90, e99 = (ttft_q(q) + (output.quantile(q) - 1.0) * tau for q in (0.5, 0.9, 0.99))
    e2e = Quantiles(e50, e90, e99, ttft + D * tau)
    tok_s = x * output.mean
    kv_occ = b * st.h_mean / st.kv_cap_pairs if st.kv_cap_pairs > 0 else 0.0
    return ServeResult(
        **_common(sm, p, prompt, output, concurrency, arrival_rate, "solver"),
        ttft=ttft_qs, tpot=tpot, itl=itl, e2e=e2e, output_tok_s=tok_s, output_tok_s_per_chip=tok_s / sm.n_chips,
        tok_s_per_user=1.0 / tau, requests_per_s=x, mean_running=b, kv_occupancy=min(kv_occ, 1.0),
        queueing_s=wait, preemptions=0, bound=sm.bound(b, st.u_mean, h=st.h_mean),
        cost_per_million_output_tokens_usd=_cost(sm, tok_s),
        max_running=int(st.cap), scheduler=sched)


def _quantiles(v: np.ndarray, w: np.ndarray | None = None) -> Quantiles:
    v = np.asarray(v, float)
    if w is None:
        q50, q90, q99 = (float(np.quantile(v, q)) for q in (0.5, 0.9, 0.99))
        return Quantiles(q50, q90, q99, float(v.mean()))
    order = np.argsort(v)
    v, w = v[order], np.asarray(w, float)[order]
    cdf = np.cumsum(w) / w.sum()
    q50, q90, q99 = (float(v[min(int(np.searchsorted(cdf, q)), len(v) - 1)]) for q in (0.5, 0.9, 0.99))
    return Quantiles(q50, q90, q99, float(np.sum(v * w) / w.sum()))


def _from_trace(sm, sched, p, tr: _Trace, S, T, prompt, output, concurrency, arrival_rate) -> ServeResult:
    ttft = tr.first - tr.arrive
    tpot = (tr.done - tr.first) / np.maximum(T - 1, 1)
    e2e = tr.done - tr.arrive
    n = len(S)
    # throughput over the steady window: after the ramp-up and before the drain
    k = min(int(concurrency), n // 4) if concurrency is not None else n // 10
    ends = np.sort(tr.done)
    lo, hi = (ends[k], ends[n - 1 - k]) if n - 1 - k > k else (0.0, ends[-1])
    inside = (tr.done > lo) & (tr.done <= hi)
    span = hi - lo
    tok_s = float(T[inside].sum() / span) if span > 0 and inside.any() else float(T.sum() / ends[-1])
    x = float(inside.sum() / span) if span > 0 and inside.any() else n / float(ends[-1])
    durs = np.concatenate([d for d, _ in tr.itl]) if tr.itl else np.zeros(1)
    wts = np.concatenate([w for _, w in tr.itl]) if tr.itl else np.ones(1)
    total_t = float(ends[-1])
    tp = _quantiles(tpot)
    # running batch over the same window (Little: the integral of the batch is the sum of the
    # requests' decode residences, here clipped to the window)
    inside_s = np.clip(np.minimum(tr.done, hi) - np.maximum(tr.first, lo), 0.0, None).sum()
    b_mean = float(inside_s / span) if span > 0 else tr.busy / total_t
    return ServeResult(
        **_common(sm, p, prompt, output, concurrency, arrival_rate, "simulate"),
        ttft=_quantiles(ttft), tpot=tp, itl=_quantiles(durs, wts), e2e=_quantiles(e2e),
        output_tok_s=tok_s, output_tok_s_per_chip=tok_s / sm.n_chips, tok_s_per_user=1.0 / tp.median,
        requests_per_s=x, mean_running=b_mean, kv_occupancy=tr.kv / total_t,
        queueing_s=float(np.nanmean(tr.admit - tr.arrive)) - sm.host_s, preemptions=tr.preemptions,
        bound=sm.bound(b_mean, sm.attended(prompt.mean + output.mean / 2.0),
                       h=sm.held(prompt.mean + output.mean / 2.0)),
        cost_per_million_output_tokens_usd=_cost(sm, tok_s), max_running=int(_set(sched.max_running)), scheduler=sched)


# ---- the served curve ---------------------------------------------------------------------


@dataclass(frozen=True)
class ServeCurve:
    """Throughput per chip against speed per user over client counts (InferenceMAX's chart),
    from one vectorised solve. Arrays indexed like `concurrency`."""

    model: str
    hardware: str
    runtime: str
    n_chips: int
    concurrency: np.ndarray
    tok_s_per_user: np.ndarray
    output_tok_s_per_chip: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    mean_running: np.ndarray
    cost_per_million_output_tokens_usd: np.ndarray | None

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame({k: getattr(self, k) for k in ("concurrency", "tok_s_per_user", "output_tok_s_per_chip",
                                                           "ttft_s", "tpot_s", "mean_running")}
                            | ({"cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd}
                               if self.cost_per_million_output_tokens_usd is not None else {}))


    def _at_speed(self, tok_s_user: float) -> tuple[float, float, float]:
        """(clients, tok/s per chip, $/Mtok) where the curve reaches `tok_s_user`, log-interpolated."""
        u, t, c = (np.log(np.asarray(v, float)) for v in (self.tok_s_per_user, self.output_tok_s_per_chip,
                                                             self.concurrency))
        order = np.argsort(u)
        x = math.log(tok_s_user)
        if not u.min() <= x <= u.max():
            raise InvalidInputError("speedup", tok_s_user, f"a speed on the curve: {math.exp(u.min()):.3g} to "
                                    f"{math.exp(u.max()):.3g} tok/s per user (give more client counts)")
        ti = float(np.exp(np.interp(x, u[order], t[order])))
        ci = float(np.exp(np.interp(x, u[order], c[order])))
        return ci, ti, (self._price / 3600.0 / ti * 1e6 if self._price else math.nan)

    @property
    def _price(self) -> float | None:
        cost = self.cost_per_million_output_tokens_usd
        return None if cost is None else float(cost[0] * self.output_tok_s_per_chip[0] * 3600.0 / 1e6)

    def knee(self, share: float = 0.8) -> int:
        """The fewest clients whose throughput per chip reaches `share` of the curve's best (past
        it, more clients buy little throughput and cost every user speed)."""
        t = np.asarray(self.output_tok_s_per_chip, float)
        return int(self.concurrency[int(np.flatnonzero(t >= share * t.max())[0])])

    def fast_mode(self, speedup: float = 2.5, standard_concurrency: int | None = None) -> ServedFastMode:
        """Read a fast lane off the curve: where the speed per user is `speedup` times the standard
        lane's (default: the knee). The price ratio is the ratio of throughputs per chip (a
        chip-hour costs the same whoever rides)."""
        if not (isinstance(speedup, (int, float)) and math.isfinite(speedup) and speedup > 1):
            raise InvalidInputError("speedup", speedup, "a finite ratio > 1")
        std = self.knee() if standard_concurrency is None else standard_concurrency
        hits = np.flatnonzero(np.asarray(self.concurrency) == std)
        if not hits.size:
            raise InvalidInputError("standard_concurrency", standard_concurrency,
                                    f"one of the curve's client counts {list(self.concurrency)}")
        i = int(hits[0])
        base = float(self.tok_s_per_user[i])
        c, t, _ = self._at_speed(base * speedup)
        return ServedFastMode(float(c), int(std), float(speedup), float(self.output_tok_s_per_chip[i] / t),
                              base * speedup, base)

    def bus_fare(self, concurrency: int) -> float:
        """How many times the full bus's price per token a rider pays at `concurrency` clients
        (the full bus: the curve's highest throughput per chip)."""
        c = np.asarray(self.concurrency, float)
        t = float(np.exp(np.interp(math.log(concurrency), np.log(c), np.log(self.output_tok_s_per_chip))))
        return float(np.max(self.output_tok_s_per_chip) / t)


@dataclass(frozen=True)
class ServedFastMode:
    """A fast lane read off the served curve against the standard lane (its best throughput)."""

    fast_concurrency: float     # clients per instance in the fast lane (interpolated)
    slow_concurrency: int
    speedup: float              # tok/s per user, fast / slow
    price_ratio: float          # USD per output token, fast / slow
    fast_tok_s_per_user: float
    slow_tok_s_per_user: float

    def __str__(self) -> str:
        return (f"fast lane ~{self.fast_concurrency:.1f} clients ({self.fast_tok_s_per_user:,.0f} tok/s per user) vs "
                f"standard {self.slow_concurrency} clients ({self.slow_tok_s_per_user:,.0f}): "
                f"{self.speedup:.2f}x the speed for {self.price_ratio:.2f}x the price per token")


DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def serve_curve(model, hardware, *, concurrency=DEFAULT_CONCURRENCY, prompt_tokens=1024, output_tokens=1024,
                **kwargs) -> ServeCurve:
    """The served curve: `serve()`'s steady state at each client count, in one solve.
    kwargs as serve() (dtypes, n_chips, parallel, runtime, scheduler, price_usd_per_hour)."""
    conc = np.asarray(list(concurrency), float)
    if conc.ndim != 1 or conc.size == 0 or np.any(conc < 1) or np.any(conc != np.floor(conc)):
        raise InvalidInputError("concurrency", concurrency, "a non-empty sequence of integers >= 1")
    prompt = as_length("prompt_tokens", prompt_tokens, 0)
    output = as_length("output_tokens", output_tokens, 2)
    sm, sched, p = build(model, hardware, prompt=prompt, output=output, **kwargs)
    st = solve(sm, sched, prompt.mean, output.mean, concurrency=conc)
    per_chip = st.x * output.mean / sm.n_chips
    cost = None if sm.price is None else sm.price / 3600.0 / per_chip * 1e6
    return ServeCurve(p.model.name, p.hardware.name, p.runtime.name, sm.n_chips, conc.astype(int), 1.0 / st.tau,
                      per_chip, st.ttft, st.tau, st.b, cost)
