"""One evaluation of the physics for a (model, device, runtime) with numeric knobs that may be
floats or arrays: the shared engine of `estimate()` (floats) and `sweep()` (arrays).

Per chip of a layout tp x pp x ep over a batch of B sequences (m = min(B, pp) micro-batches of
b = B/m each), a decode step is (see roofline.py for the closed-form sums):

  weights streamed = (dense/tp + moe_layers * X(b*pos) * expert/(tp*ep)) * bytes/weight
                     with X(t) = E(1-(1-k/E)^t) experts touched per MoE layer
  KV streamed      = (b/ep) * u(L) * kv_elems * bytes/elem / kv_split  (u: layer-token pairs)
  FLOPs            = b*pos * (2*matmul params*(1+dequant) + attn_flops_per_pair * u(L)) / (tp*ep)
                     (matmul params: active less an untied input embedding, a row lookup;
                     attention computes at the KV format's peak, the GEMMs at the activations')
  step             = max(memory, compute, floor) + communication + overhead
                     (overhead: per step, per layer, and per sequence of one rank's b/ep, and
                     the host's dispatch of each layer where the model's code blocks the host
                     every layer (`host_blocked`; elsewhere the kernels run behind it, hidden);
                     a runtime with overlap < 1 adds that share of the smaller of memory and
                     compute: its kernels do not hide one behind the other; a pass of at most
                     matvec_tokens tokens per micro-batch runs mat-vec kernels, with their own
                     matvec_overlap: `serial_share`)

A prefill of S tokens does the layers' GEMMs for all S and the LM head for the last one only
(its logits give the first token; all S where the runtime's prefill_logits is "all").
pos = 1 for plain decoding, the verified positions for speculative decoding. Weights and KV
are placed tier by tier, fastest first (or pinned), and each tier streams its share at its own
achievable bandwidth; the times add (docs/physics.md).

`evaluate` reads as the list of its concepts, each a function below it: what a chip holds and
where (`chip_base` once per configuration, `chip_of` per workload, `held_*_bytes`, `placement`),
a decode step's bytes and FLOPs (`weights_s`, `gemm_s`, `step_coeffs`, `timed`), the latency
floor, communication and overheads (`floor_s`, `comm_s`, `overhead_terms`, `launch_s`), the
decode over the output (`decode`) with a speculative round's drafter (a draft model's passes:
`draft_passes`, `draft_model_s`; a head's: `drafter`, `draft_head_terms`), and the prefill (`prefill`, `prefill_memory_s`,
`prefill_compute_s`). The drafter's physics stays here, not in
speculative.py: the core must not import a multiplier.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from ..base.stacking import stackable
from .dataflow import operand_widening, wafer_pass_s
from .parallel import Collectives, collective_s, collectives, communication_s, head_parts, head_path, head_stages
from .roofline import (Num, causal_pairs, ceiling, context_pieces, effective_context, expected_experts, interp,
                       maximum, minimum, sum_over_context, where)
from .roofline import floor as floor_int

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..catalog.hardware import Hardware, MemoryTier
    from ..catalog.model import Model
    from .efficiency import Efficiency


@dataclass(frozen=True)
class ModelConsts:
    """The numbers of a Model the physics needs, flattened once per model."""

    name: str
    n_layers: float
    hidden: float
    n_heads: float
    n_kv_heads: float
    ffn: float
    total_params: float
    active_params: float
    dense_params: float
    expert_params: float
    n_moe_layers: float
    n_experts: float
    k: float
    kv_elems: float            # KV elements per token per layer
    kv_split_max: float        # the most ways KV can be split by tensor parallelism
    attn_per_pair: float       # FLOPs per (layer, cached token) pair per new token (decode)
    prefill_attn_per_pair: float  # the same per (query, key) pair in prefill (MLA: decompressed form)
    window_groups: tuple[tuple[int | None, int], ...]   # (window or None, layers): the tokens attended
    held_groups: tuple[tuple[int | None, int], ...]     # the same for the tokens held (all, under sparse attention)
    index_bytes: float         # a sparse-attention indexer's key bytes per (layer, token), held and read (0: none)
    index_flops: float         # its FLOPs per (layer, cached token) per query (0: none)
    pieces: tuple[tuple[float, float, float, float], ...]  # roofline.context_pieces
    vocab: float
    gemv_elems: float          # input + output elements of a layer's GEMVs in sequence (qkv, o,
                               # gate/up, down): what streams across a dataflow mesh per token
    lookup_params: float       # the untied input-embedding table: held in memory, but decode
                               # reads only the rows of its tokens, and it does no FLOPs
    model_type: str = ""       # Model.model_type (a runtime's host_blocking_model_types name it)
    q_dim: float = 0.0         # the attention's query width, heads x head_dim (a wafer's GEMV shapes)
    head_params: float = field(init=False)   # the LM head's parameters, vocab x hidden
    layer_params: float = field(init=False)  # the layers' parameters less the routed experts, the LM head
                                             # and an untied input embedding: the matrices a pass streams

    def __post_init__(self):
        head = self.vocab * self.hidden
        object.__setattr__(self, "head_params", head)
        object.__setattr__(self, "layer_params", self.total_params - self.n_moe_layers * self.n_experts
                           * self.expert_params - self.lookup_params - head)


@functools.lru_cache(maxsize=512)
def model_consts(model: Model, every_expert: bool = False) -> ModelConsts:
    """The model's numbers; `every_expert`: as a chip whose compiled schedule has no data-dependent
    control flow runs it (`Hardware.moe_schedule` "every_expert"): each MoE layer dense, all E
    routed experts streamed and multiplied for every token (k = E, the active parameters the
    total's), the gates weighing the unchosen by zero."""
    groups = tuple(model.attended_groups())
    mla = getattr(model, "kv_lora_rank", 0) > 0
    k = model.n_experts if every_expert and model.n_experts else model.experts_per_token
    skipped = model.n_moe_layers * (k - model.experts_per_token) * model.expert_params     # 0 unless every_expert
    return ModelConsts(
        name=model.name, n_layers=float(model.n_layers), hidden=float(model.hidden_size),
        n_heads=float(model.n_heads), n_kv_heads=float(model.n_kv_heads),
        ffn=float(max(model.ffn_size, model.expert_ffn_size * max(k, 1))),
        total_params=float(model.total_params), active_params=float(model.active_params + skipped),
        dense_params=float(model.dense_params), expert_params=float(model.expert_params),
        n_moe_layers=float(model.n_moe_layers), n_experts=float(model.n_experts),
        k=float(k), kv_elems=float(model.kv_elements_per_token_per_layer),
        kv_split_max=1.0 if mla else float(model.n_kv_heads),
        attn_per_pair=float(model.attn_flops_per_ctx_token_per_layer),
        prefill_attn_per_pair=float(model.prefill_attn_flops_per_pair),
        window_groups=groups, held_groups=tuple(model.window_groups()),
        index_bytes=model.index_bytes_per_token_per_layer, index_flops=model.index_flops_per_ctx_token_per_layer,
        pieces=tuple(context_pieces(groups, model.n_layers)),
        vocab=float(model.vocab_size),
        gemv_elems=float(4 * model.hidden_size + 2 * model.n_heads * model.head_dim
                         + model.kv_elements_per_token_per_layer
                         + 3 * max(model.ffn_size, model.expert_ffn_size * max(k, 1))),
        lookup_params=0.0 if model.tied_embeddings else float(model.vocab_size * model.hidden_size),
        model_type=model.model_type, q_dim=float(model.n_heads * model.head_dim))


class SpecArgs(NamedTuple):
    """Speculative decoding as `evaluate` needs it (built by `estimate.prepare`)."""

    gamma: float
    tokens_per_round: float
    draft_cost: float | None        # a draft step as a fraction of a plain step (legacy), or None
    head_bytes: float = 0.0         # a self-drafting head's own weights, bytes read per draft step
    head_params: float = 0.0        # its own parameters (2 FLOPs each per token)
    head_lm_params: float = 0.0     # target LM-head parameters it re-reads (target's format)
    route_correlation: float = 0.0  # rho: verified positions of a sequence route like 1+(v-1)(1-rho) tokens


class Drafter(NamedTuple):
    """A draft model on the target's chips, as the one step sees it (built by `estimate.prepare`):
    its consts, its efficiencies (the target runtime's, less the host's per-step, per-sequence and
    per-request work, which the round pays once, in its verify pass), its Knobs (the target's
    formats, tensor-parallel like it, expert-parallel where it has experts, no pipeline stages) and
    their ChipBase. Its passes are `pass_terms` on that chip (`draft_passes`)."""

    mc: ModelConsts
    eff: Efficiency
    kn: Knobs
    base: ChipBase


# a decode step as affine functions of u(L): (memory_a, memory_b, compute_a, compute_b) seconds
Coeffs: TypeAlias = tuple[Num, Num, Num, Num]


# stacking (base.stacking): the workload, the layout and the tiles and paths a pass branches on are
# shape; the formats' numbers, rates and price are numbers
@stackable(shape="batch prompt output tp pp ep n_chips gemm_tile_tokens mmvq_tokens chunk_tokens gemm_tokens "
                 "gemm_s_per_weight",
           numbers="w_bytes kv_bytes act_bytes peak_flops dequant price_usd_per_hour w_bytes_dense w_bytes_head "
                   "w_bytes_embed dense_peak_flops dense_dequant attn_peak_flops gemv_peak_flops index_peak_flops "
                   "mmvq_flops mmvq_dense_flops matrix_peak_flops read_dense read_expert")
@dataclass(frozen=True)
class Knobs:
    """Numeric inputs of one evaluation; each may be a float or an array (broadcast)."""

    batch: Num
    prompt: Num
    output: Num
    w_bytes: Num          # bytes per weight (block scales included)
    kv_bytes: Num         # bytes per KV element
    act_bytes: Num        # bytes per element of the residual stream: what collectives move and activation
                          # buffers hold (quantization.Resolved.residual_bytes: 16-bit on GPUs)
    peak_flops: Num       # dense peak FLOP/s of the compute dtype
    dequant: Num          # extra GEMM work for weight-only formats (fraction)
    tp: Num
    pp: Num
    ep: Num
    n_chips: Num
    price_usd_per_hour: Num   # per chip-hour (0 when unknown)
    w_bytes_dense: Num | None = None  # bytes per weight of the non-expert tensors when they differ
                                      # (gpt-oss GGUF: experts mxfp4, the rest q8_0); None = w_bytes
    w_bytes_head: Num | None = None   # of the LM head and input embedding; None = w_bytes_dense
    w_bytes_embed: Num | None = None  # of an untied input embedding where it differs from the head's
                                      # (a llama.cpp file: token_embd in the file type, output.weight
                                      # q6_K); None = w_bytes_head
    dense_peak_flops: Num | None = None  # peak FLOP/s of the non-expert GEMMs (their format's path,
                                         # Quantization); None = peak_flops
    dense_dequant: Num | None = None     # their weight-only dequantisation work; None = dequant
    attn_peak_flops: Num | None = None  # dense peak FLOP/s attention runs at (QK^T, AV in the KV's
                                        # 16- or 8-bit format, never fp4); None = peak_flops
    gemm_tile_tokens: Num = 0.0   # tokens per column tile of a GEMM that streams the whole weight
                                  # matrix again for each tile (llama.cpp MMQ: 128); 0 = once per pass
    gemv_peak_flops: Num | None = None  # FLOP/s (2 per weight, dequantisation included) of a decode
                                        # step's mat-vec where it takes another path than the GEMMs (a
                                        # dequantising shader on the vector ALUs); None = the GEMMs' rates
    index_peak_flops: Num | None = None  # dense peak FLOP/s of a sparse-attention indexer's scoring (fp8
                                         # keys and queries: the fp8 rate where the chip has one); None =
                                         # attention's
    mmvq_tokens: Num = 0.0        # a pass of at most this many tokens multiplies in a mat-vec kernel that
                                  # streams each weight once and issues, per token, what the rates below
                                  # say (llama.cpp CUDA's mmvq); 0: never
    mmvq_flops: Num = 0.0         # its FLOP/s per token (2 per weight): routed experts (or all weights),
    mmvq_dense_flops: Num = 0.0   # the other tensors; 0 = that format keeps the GEMMs' rate
    matrix_peak_flops: Num | None = None  # peak FLOP/s of the matrix units a prefill GEMM's multiply-
                                          # accumulates run on while the rest of its work stays on the
                                          # shader ALUs, whose rate peak_flops then is (`on_matrix_units`;
                                          # runtime.MatrixUnits); None: the GEMMs run at peak_flops
    chunk_tokens: Num = 0.0       # most prompt tokens the engine puts in one step (its token budget:
                                  # chunked prefill, `prefill`); 0: a prefill is one pass
    read_dense: Num = 1.0         # the share of the achievable bandwidth the dense GEMMs read their weights at
    read_expert: Num = 1.0        # and routed experts' grouped GEMMs (Efficiency.weight_read, expert_read): the
                                  # seconds per weight byte over it; 1: at the achievable bandwidth
    gemm_tokens: tuple[float, ...] = ()        # a measured kernel table's M tokens and the seconds a weight of a
    gemm_s_per_weight: tuple[float, ...] = ()  # dense layer GEMM takes at each (Efficiency.gemm_time, a model
                                  # without routed experts in a tabled format: `tabled_gemm_s`); (): the rates above


# stacking: the layout's ways and shares, the mat-vec path's threshold and the links' kind are shape
_CHIP_BASE_NUMBERS = ("w_expert w_dense w_head w_embed kv_pair flops dense_flops attn_flops index_flops dequant "
                      "dense_dequant act_bytes link_bw link_lat dense_held expert_held floor gemm prefill_gemm head "
                      "capacity mmvq links over_fixed over_tail context_kernels attn_rate kv_index_pair")


@stackable(shape="tp pp ep group e_group share mmvq_tokens ring", numbers=_CHIP_BASE_NUMBERS)
class ChipBase(NamedTuple):
    """What one chip of the layout is before any workload: its share of the model, the bytes of
    its formats, the rates it computes at, its links, and the per-token terms that follow from
    them alone. Built by `chip_base` once per configuration (`estimate.prepare` caches it), so
    that each evaluation of a batch, prompt and output builds only the rest of its `Chip`.
    Each field is a float or an array (broadcast)."""

    tp: Num
    pp: Num
    ep: Num
    group: Num           # tp * ep: the chips a layer's GEMMs are split over
    e_group: Num         # the chips a layer's routed experts are split over (as the fullest chip)
    share: Num           # the largest pipeline stage's share of the layers
    w_expert: Num        # bytes per weight: routed experts, dense tensors, LM head, untied embedding
    w_dense: Num
    w_head: Num          # (streamed in series: on a pipeline of whole layers, the head's parts run at once,
    w_embed: Num         # so x the share one stage runs, `parallel.head_path`)
    kv_pair: Num         # KV bytes per (layer, token) pair on this chip
    flops: Num           # achievable FLOP/s: expert GEMMs, dense GEMMs (LM head included), attention
    dense_flops: Num
    attn_flops: Num
    index_flops: Num     # a sparse-attention indexer's scoring (`index_terms`)
    dequant: Num         # weight-only dequantisation work (fraction): expert GEMMs, dense GEMMs
    dense_dequant: Num
    act_bytes: Num       # bytes per activation element (communication volume)
    link_bw: Num         # the links a collective crosses: bytes/s, seconds per hop, ring (or switch)
    link_lat: Num
    ring: bool
    dense_held: Num      # bytes of weights held (the fullest chip): dense tensors, routed experts
    expert_held: Num
    floor: Num           # the shortest pass through the chip's layers (`floor_s`)
    gemm: Num            # seconds of GEMM work per token, before dividing by tp*ep (`gemm_s`)
    prefill_gemm: Num    # the same in a prefill (experts at moe_gemm_efficiency), LM head left out
    head: Num            # one token's LM head, seconds before dividing by tp*ep
    capacity: Num        # bytes the chip holds, all its memory tiers
    mmvq_tokens: Num     # a pass of at most this many tokens runs its GEMMs as mat-vecs (0: never)
    mmvq: Num            # their seconds per token, before dividing by tp*ep (`mmvq_s`)
    links: Collectives   # the layout's collectives (`comm_s`)
    over_fixed: Num      # a step's overhead before its sequences' (`overhead_terms`)
    over_tail: tuple[Num, ...]   # and its collectives' and experts' rows after them (those not 0)
    context_kernels: Num  # a pass with prompt tokens: its extra kernels (`context_kernels_s`)
    attn_rate: Num       # group x attn_flops: attention's FLOP/s over the chips a layer is split over
    kv_index_pair: Num   # kv_pair + the indexer's key bytes: what a held (layer, token) pair reads


@stackable(shape="tp pp ep group e_group share mmvq_tokens ring",
           numbers=_CHIP_BASE_NUMBERS + " m b beat dense_inv expert_inv kv_inv w_inv")
class Chip(NamedTuple):
    """One chip of the layout as the terms of a step see it, built once per `evaluate`: its
    `ChipBase` (the fields up to `head`, in its order) and its share of the batch and where its
    bytes sit. Each field is a float or an array (broadcast)."""

    tp: Num
    pp: Num
    ep: Num
    group: Num
    e_group: Num
    share: Num
    w_expert: Num
    w_dense: Num
    w_head: Num
    w_embed: Num
    kv_pair: Num
    flops: Num
    dense_flops: Num
    attn_flops: Num
    index_flops: Num
    dequant: Num
    dense_dequant: Num
    act_bytes: Num
    link_bw: Num
    link_lat: Num
    ring: bool
    dense_held: Num
    expert_held: Num
    floor: Num
    gemm: Num
    prefill_gemm: Num
    head: Num
    capacity: Num
    mmvq_tokens: Num
    mmvq: Num
    links: Collectives
    over_fixed: Num
    over_tail: tuple[Num, ...]
    context_kernels: Num
    attn_rate: Num
    kv_index_pair: Num
    m: Num               # micro-batches in flight
    b: Num               # sequences per micro-batch
    beat: Num            # a step in passes of one micro-batch through all stages (1 without pp)
    dense_inv: Num       # seconds per byte streamed: dense weights, routed experts, KV, all weights
    expert_inv: Num
    kv_inv: Num
    w_inv: Num


assert Chip._fields[:len(ChipBase._fields)] == ChipBase._fields   # chip_of builds a Chip from base + (...)


# ---- one evaluation ---------------------------------------------------------------------

def evaluate(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs, *, positions: Num = 1.0,
             spec: SpecArgs | None = None, draft: Drafter | None = None, pinned: dict[str, str] | None = None,
             extra_weight_bytes_chip: Num = 0.0, extra_kv_bytes_token_chip: Num = 0.0,
             base: ChipBase | None = None, terms: bool = True) -> dict[str, Any]:
    """Everything `estimate()` reports, as a dict of floats or arrays.

    spec: a SpecArgs for speculative decoding, with `positions` verified per round; draft: the
    draft model's Drafter (None for a self-drafting head or a draft_cost fraction).
    A round = gamma draft steps + one verify pass; the draft's share is reported as `draft_s`
    and the drafter's prefill of the prompt is added to TTFT. base: `chip_base` of these
    arguments, when the caller has it already (a configuration evaluated again). terms=False leaves
    out the prefill's terms as one pass (prefill_memory_s, _compute_s, _head_s, _overhead_s: None),
    which `estimate()` does not report: a chunked prefill then skips that pass.
    """
    B, S, T = kn.batch, kn.prompt, kn.output
    if base is None:
        base = chip_base(mc, hw, eff, kn)
    ch, kv_chip, per_tier = chip_of(mc, hw, eff, kn, base, pinned, extra_weight_bytes_chip,
                                    extra_kv_bytes_token_chip)
    w_chip = ch.dense_held + ch.expert_held
    act_chip = activation_bytes(mc, hw, kn, B, S)
    need_chip = w_chip + extra_weight_bytes_chip + kv_chip + act_chip
    cap_chip = ch.capacity
    floor = ch.floor
    step_floor = floor * ch.beat
    plain_pass = pass_terms(mc, eff, kn, ch, ch.b, beat=ch.beat, micro=ch.m)
    plain = decode_coeffs(plain_pass, ch.b)
    plain_extra = plain_pass.comm + plain_pass.over
    L_mid = S + (T - 1.0) / 2.0                        # the mean of contexts S .. S+T-1
    u_mid = effective_context(mc.window_groups, L_mid)
    index = index_terms(mc, ch, 1.0 if spec is None else positions, L_mid) if mc.index_flops else (0.0, 0.0)
    first = timed(plain, plain_pass.serial)
    coeffs, extra, step_over, decode_s, draft_mid, draft_pre = decode(
        mc, hw, eff, kn, ch, plain_pass, plain, first, step_floor, u_mid, positions, spec, draft,
        maximum(index[0], index[1]) if mc.index_flops else 0.0)
    per_token_div = 1.0 if spec is None else spec.tokens_per_round
    prefill_s, whole = prefill(mc, eff, kn, ch, terms)
    first_step = maximum(maximum(first[0], first[2]), floor) + plain_extra
    ttft = where(S > 0, prefill_s + draft_pre, first_step) + host_s(eff, S)
    tokens_out = maximum(T, 1.0)
    per_user = tokens_out / decode_s
    e2e = ttft + decode_s * maximum(T - 1.0, 0.0) / tokens_out
    cost = kn.n_chips * kn.price_usd_per_hour / 3600.0 * e2e / (B * tokens_out) * 1e6
    return {   # a display, not dict(...): one dict built, not two (estimate()'s hot path)
        "decode_tok_s_per_user": per_user, "decode_tok_s_total": B * per_user, "ttft_s": ttft,
        "prefill_s": prefill_s, "e2e_s": e2e, "tpot_s": decode_s / tokens_out, "decode_s": decode_s,
        # the step's terms at the mean context, per token: which bound won
        "memory_s": (coeffs[0] + coeffs[1] * u_mid + index[0]) / per_token_div,
        "compute_s": (coeffs[2] + coeffs[3] * u_mid + index[1]) / per_token_div,
        "latency_s": step_floor / per_token_div, "communication_s": (extra - step_over) / per_token_div,
        "overhead_s": step_over / per_token_div, "draft_s": draft_mid,
        "prefill_memory_s": None if whole is None else whole.mem,
        "prefill_compute_s": None if whole is None else whole.comp,
        "prefill_head_s": None if whole is None else whole.head,
        "prefill_overhead_s": None if whole is None else whole.over,
        "weights_bytes_chip": w_chip, "kv_bytes_chip": kv_chip, "activation_bytes_chip": act_chip,
        "extra_bytes_chip": extra_weight_bytes_chip, "need_bytes_chip": need_chip,
        "capacity_bytes_chip": cap_chip, "fits": need_chip <= cap_chip, "per_tier": per_tier,
        "cost_per_million_tokens_usd": cost, "microbatches": ch.m,
    }


# ---- memory: what a chip holds, and where ---------------------------------------------------

def chip_base(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs) -> ChipBase:
    """The ChipBase of this configuration: kn's fields but batch, prompt and output (the fullest
    chip: the largest pipeline stage, the most experts)."""
    tp, pp, ep = kn.tp, kn.pp, kn.ep
    wd = kn.w_bytes if kn.w_bytes_dense is None else kn.w_bytes_dense
    wh = wd if kn.w_bytes_head is None else kn.w_bytes_head
    we = wh if kn.w_bytes_embed is None else kn.w_bytes_embed
    # ep chips hold the E routed experts of a layer ceil(E / ep) to a chip (ep need not divide E:
    # wide-EP engines run 48 ranks on 256 experts); the fullest chip sets memory and the step, as
    # if the experts were split over tp * E / ceil(E / ep) chips (tp * ep when ep divides E)
    e_group = tp * mc.n_experts / ceiling(mc.n_experts / ep) if mc.n_experts else tp * ep
    levels, wh_path = pp, wh    # the stages a token's pass crosses; the head's bytes it streams in series
    if head_stages(hw):     # the LM head and embedding: pipeline stages of their own (`stage_weight_share`),
        share, held = stage_weight_share(mc, kn.w_bytes, wd, wh, we, pp)    # the head's parts at once
        head_share, levels = head_path(mc.n_layers, *head_parts(mc.total_params, mc.head_params, mc.lookup_params,
                                                                 mc.n_layers), pp)
        wh_path = wh * head_share
    else:   # the largest pipeline stage holds ceil(layers / pp) of the layers (stages may be uneven)
        share = held = ceiling(mc.n_layers / pp) / mc.n_layers
    dense_chip, expert_chip = held_weight_bytes(mc, kn.w_bytes, wd, wh, we, tp, e_group, held)
    kv_pair = mc.kv_elems * kn.kv_bytes / minimum(tp, mc.kv_split_max)       # bytes per (layer, token)
    C = kn.peak_flops * eff.compute_fraction
    Cd = C if kn.dense_peak_flops is None else kn.dense_peak_flops * eff.compute_fraction
    Ca = (kn.peak_flops if kn.attn_peak_flops is None else kn.attn_peak_flops) * eff.compute_fraction
    Ci = Ca if kn.index_peak_flops is None else kn.index_peak_flops * eff.compute_fraction
    dqd = kn.dequant if kn.dense_dequant is None else kn.dense_dequant
    link = hw.interconnect
    link_bw, link_lat = collective_link(hw, eff, tp * ep)
    head_flops = 2.0 * mc.vocab * mc.hidden * (1.0 + dqd)    # one token's LM head (a dense GEMM)
    head = head_flops / Cd
    Cp, Cdp = C, Cd     # a prefill GEMM's rates: its multiply-accumulates on matrix units where it has them
    if kn.matrix_peak_flops is not None:
        Cp = on_matrix_units(C, kn.matrix_peak_flops, eff.compute_fraction, kn.dequant)
        Cdp = on_matrix_units(Cd, kn.matrix_peak_flops, eff.compute_fraction, dqd)
    ring = link is None or link.topology == "ring"
    return ChipBase(tp, pp, ep, tp * ep, e_group, share, kn.w_bytes, wd, wh_path, we, kv_pair, C, Cd, Ca, Ci, kn.dequant,
                    dqd,
                    kn.act_bytes, link_bw, link_lat, ring, dense_chip, expert_chip,
                    floor_s(mc, hw, eff, tp, wd, share * mc.n_layers),
                    gemm_s(mc, C, Cd, kn.dequant, dqd) if kn.gemv_peak_flops is None else
                    gemm_s(mc, kn.gemv_peak_flops * eff.compute_fraction, kn.gemv_peak_flops * eff.compute_fraction,
                           0.0, 0.0),
                    gemm_s(mc, Cp, Cdp, kn.dequant, dqd, 1.0 / eff.moe_gemm_efficiency)
                    - head_flops / Cdp, head,
                    hw.capacity_bytes, kn.mmvq_tokens, mmvq_s(mc, kn, C, Cd, dqd),
                    collectives(tp, levels, ep, mc.hidden, mc.n_layers, mc.n_moe_layers, mc.k, kn.act_bytes, link_bw,
                                link_lat, ring, allreduce_table(eff, tp)),
                    *overhead_terms(mc, eff, tp, ep, C), context_kernels_s(mc, eff), tp * ep * Ca,
                    kv_pair + mc.index_bytes)


def allreduce_table(eff: Efficiency, tp: Num) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(message bytes, seconds) of the measured all-reduce over `tp` ranks where the runtime's all-reduces were
    timed on the chip at that rank count (eff.allreduce_time, Served.allreduce_time); else ((), ()): the link."""
    return next(((size, t) for n, size, t in eff.allreduce_time if n == tp), ((), ()))


def mmvq_s(mc: ModelConsts, kn: Knobs, C: Num, Cd: Num, dense_dequant: Num) -> Num:
    """Seconds per token of a pass's GEMMs in the mat-vec kernel (`Knobs.mmvq_flops`: its
    instructions per weight per token, dequantisation included); a format without that rate at the
    GEMMs' (C, Cd). 0 without the path."""
    if isinstance(kn.mmvq_tokens, float) and kn.mmvq_tokens == 0.0:
        return 0.0
    on, on_dense = kn.mmvq_flops > 0.0, kn.mmvq_dense_flops > 0.0
    return gemm_s(mc, where(on, kn.mmvq_flops, C), where(on_dense, kn.mmvq_dense_flops, Cd),
                  where(on, 0.0, kn.dequant), where(on_dense, 0.0, dense_dequant))


def chip_of(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs, base: ChipBase,
            pinned: Mapping[str, str] | None, extra_weight_bytes_chip: Num, extra_kv_bytes_token_chip: Num
            ) -> tuple[Chip, Num, list[tuple[Num, Num]]]:
    """The Chip of this layout at this workload, with the bytes of KV it holds (the fullest chip)
    and its (weights, KV) bytes per memory tier."""
    pp = base.pp
    m = minimum(kn.batch, pp)
    # m micro-batches in flight: a full pipeline beats at the largest stage, so a sequence's step
    # is max(one pass through all stages, m x the largest stage's share of it)
    beat = 1.0 if isinstance(pp, float) and pp == 1.0 else maximum(1.0, m * base.share)
    kv_chip = held_kv_bytes(mc, kn, base.kv_pair, base.share, extra_kv_bytes_token_chip)
    dense_inv, expert_inv, kv_inv, w_inv, per_tier = placement(
        hw.memory, eff.bandwidth_fraction, base.dense_held + extra_weight_bytes_chip, base.expert_held, kv_chip,
        pinned)
    # measured kernels' weight reads (Knobs.read_dense, read_expert: 1 unless the runtime reads them)
    dense_inv, expert_inv, w_inv = dense_inv / kn.read_dense, expert_inv / kn.read_expert, w_inv / kn.read_dense
    if hw.operand_bytes is not None:    # a stream that widens each weight to its units' width (a TSP's MXM):
        # each tensor by its own stored width (a mixed checkpoint: experts in one format, the rest in another);
        # the blended weight stream (a drafting head) as the dense tensors'
        widen = operand_widening(base.w_dense, hw.operand_bytes)
        dense_inv, expert_inv, w_inv = (dense_inv * widen, expert_inv * operand_widening(base.w_expert, hw.operand_bytes),
                                        w_inv * widen)
    # tuple.__new__: the fields in Chip's order without its generated __new__'s 43 named arguments; base + (...):
    # one tuple concatenation, where (*base, ...) unpacked the base's fields one by one (0.46 -> 0.27 us)
    return tuple.__new__(Chip, base + (m, kn.batch / m, beat, dense_inv, expert_inv, kv_inv, w_inv)), kv_chip, per_tier


def on_matrix_units(shader: Num, matrix_peak: Num, fraction: Num, dequant: Num) -> Num:
    """Achievable FLOP/s of a GEMM whose multiply-accumulates run on matrix units of `matrix_peak`
    FLOP/s while the rest of its work stays on the shader ALUs, in series (runtime.MatrixUnits).
    On the shader ALUs alone (achievable `shader` = fraction x their peak) a GEMM of F FLOPs takes
    F (1 + dequant) / shader: F / (shader / fraction) of multiply-accumulates, the rest
    F (1 + dequant - fraction) / shader of other work. The matrix units take the first part over:
    F / matrix_peak + F (1 + dequant - fraction) / shader, returned as the rate that gives it to
    F (1 + dequant) FLOPs. Units no faster than the ALUs give `shader` back."""
    return (1.0 + dequant) / (1.0 / matrix_peak + (1.0 + dequant - fraction) / shader)


def collective_link(hw: Hardware, eff: Efficiency, n: Num) -> tuple[Num, Num]:
    """(bytes/s, seconds per hop) of a collective over the n = tp x ep chips of a worker: the
    interconnect inside its scale-up domain of `max_chips`. A worker wider than the domain
    (allowed where the profile has a `scale_out` network) sends the share f = (n - dom)/(n - 1)
    of its peer traffic over each chip's NIC, in parallel with the rest over the interconnect, so
    a byte costs max((1 - f)/link, f/nic) and a hop the NIC's latency."""
    link, nic = hw.interconnect, hw.scale_out
    if link is None:
        return 1.0, 0.0
    bw, lat = link.bandwidth_bytes_s, (link.latency_s if eff.hop_latency_s is None else eff.hop_latency_s)
    dom = link.max_chips
    wide = n > dom
    if nic is None or wide is False:
        return bw, lat
    f = maximum(n - dom, 0.0) / maximum(n - 1.0, 1.0)
    return (where(wide, 1.0 / maximum((1.0 - f) / bw, f / nic.bandwidth_bytes_s), bw),
            where(wide, nic.latency_s, lat))


def stage_weight_share(mc: ModelConsts, w_expert: Num, wd: Num, wh: Num, we: Num, pp: Num) -> tuple[Num, Num]:
    """On a pipeline of whole layers whose LM head and untied embedding are stages of their own
    (`parallel.head_parts`: each split into parts of at most a decoder layer's parameters): (the
    fullest stage's share of the decoder layers, its share of the model's weight bytes). Its pp
    stages hold U = layers + head parts + embedding parts units, ceil(U / pp) on the fullest; each
    unit at most the largest unit's bytes (a decoder layer's, or a part of the head or embedding
    where their format is wider), and the stage at most the whole model. Its decoder layers, at most
    ceil(U / pp) and the model's, set its KV and its layers' floor."""
    h, e = head_parts(mc.total_params, mc.head_params, mc.lookup_params, mc.n_layers)
    k = ceiling((mc.n_layers + h + e) / pp)
    experts = mc.n_moe_layers * mc.n_experts * mc.expert_params
    layer = ((mc.total_params - experts - mc.head_params - mc.lookup_params) * wd + experts * w_expert) / mc.n_layers
    unit = maximum(layer, mc.head_params * wh / h)
    if e:
        unit = maximum(unit, mc.lookup_params * we / e)
    whole = layer * mc.n_layers + mc.head_params * wh + mc.lookup_params * we
    return minimum(k, mc.n_layers) / mc.n_layers, minimum(k * unit / whole, 1.0)


def held_weight_bytes(mc: ModelConsts, w_expert: Num, wd: Num, wh: Num, we: Num, tp: Num, e_group: Num,
                      share: Num) -> tuple[Num, Num]:
    """Bytes of (dense, routed-expert) weights one chip holds: the dense tensors at wd bytes each
    split over tp (the LM head at wh, an untied input embedding at we), the experts at w_expert
    over e_group; `share` of the layers (a pipeline stage's)."""
    all_expert = mc.n_moe_layers * mc.n_experts * mc.expert_params
    head = mc.vocab * mc.hidden
    dense_chip = ((mc.total_params - all_expert - head - mc.lookup_params) * wd + head * wh
                  + mc.lookup_params * we) / tp * share
    return dense_chip, all_expert / e_group * w_expert * share


def held_kv_bytes(mc: ModelConsts, kn: Knobs, kv_pair: Num, share: Num, extra_kv_bytes_token_chip: Num) -> Num:
    """Bytes of KV cache one chip holds at the longest context (prompt + output), its B/ep sequences."""
    B, L, ep = kn.batch, kn.prompt + kn.output, kn.ep
    u_max = effective_context(mc.held_groups, L)
    return (B / ep) * u_max * (kv_pair + mc.index_bytes) * share + B / ep * L * extra_kv_bytes_token_chip


def activation_bytes(mc: ModelConsts, hw: Hardware, kn: Knobs, B: Num, prompt: Num) -> Num:
    """Bytes of activations one chip holds for B sequences with prompts of `prompt` tokens (kn's
    layout and formats): a prefill chunk's (the prompts, at most the device's chunk) and the
    batch's logits in fp32 (`evaluate`: its batch and prompt; a server sizes its buffers for its
    token budget)."""
    tp = kn.tp
    act_tokens = minimum(B * maximum(prompt, 1.0), float(hw.activation_chunk_tokens)) + B
    return act_tokens * (4.0 * mc.hidden + 2.0 * mc.ffn / tp) * kn.act_bytes + B * mc.vocab * 4.0 / tp


def placement(tiers: Sequence[MemoryTier], eff_bw: float, dense_chip: Num, expert_chip: Num, kv_chip: Num,
              pinned: Mapping[str, str] | None) -> tuple[Num, Num, Num, Num, list[tuple[Num, Num]]]:
    """Place a chip's bytes in its tiers, hot first (docs/physics.md): the weights every token reads
    (dense, attention, shared experts) in the fastest tiers, then the KV cache (read every step),
    then the routed experts (uniform routing: each as likely as the next), the slowest tier taking
    only what does not fit; or pin "weights"/"kv" to named tiers. Returns seconds per byte of
    dense weights, of routed experts and of KV (each tier streams its share at its own achievable
    bandwidth), the blended seconds per weight byte, and per-tier (weights, kv) bytes."""
    w_chip = dense_chip + expert_chip
    if len(tiers) == 1:     # one tier holds everything: the general sums below reduce to 1/bandwidth
        inv = 1.0 / (tiers[0].bandwidth_bytes_s * eff_bw)
        return inv, inv, inv, inv, [(w_chip, kv_chip)]
    parts: list[tuple[Num, Num, Num]]
    if pinned:
        parts = [(dense_chip if pinned.get("weights") == t.name else 0.0,
                  expert_chip if pinned.get("weights") == t.name else 0.0,
                  kv_chip if pinned.get("kv") == t.name else 0.0) for t in tiers]
    else:
        parts, left = [], [dense_chip, kv_chip, expert_chip]
        for i, t in enumerate(tiers):
            room: Num = t.capacity_bytes
            got: list[Num] = []
            for j in range(3):
                x = left[j] if i == len(tiers) - 1 else minimum(left[j], maximum(room, 0.0))
                room, left[j] = room - x, left[j] - x
                got.append(x)
            parts.append((got[0], got[2], got[1]))
    inv_: list[Num] = [0.0, 0.0, 0.0, 0.0]
    totals = [maximum(dense_chip, 1e-30), maximum(expert_chip, 1e-30), maximum(kv_chip, 1e-30),
              maximum(w_chip, 1e-30)]
    for (d_i, e_i, kv_i), t in zip(parts, tiers):
        bw = t.bandwidth_bytes_s * eff_bw
        for j, x in enumerate((d_i, e_i, kv_i, d_i + e_i)):
            inv_[j] = inv_[j] + x / totals[j] / bw
    # with no KV (context 0), or no experts, the next bytes land in the fastest tier with room
    fastest = 1.0 / (tiers[0].bandwidth_bytes_s * eff_bw)
    inv_[2] = where(kv_chip > 0, inv_[2], fastest)
    inv_[1] = where(expert_chip > 0, inv_[1], inv_[0])
    return inv_[0], inv_[1], inv_[2], inv_[3], [(d_i + e_i, kv_i) for d_i, e_i, kv_i in parts]


# ---- a decode step: weights and KV streamed, GEMMs and attention computed ------------------

def weights_s(mc: ModelConsts, ch: Chip, tokens: Num, touched: Num, dense_passes: Num = 1.0,
              expert_passes: Num = 1.0) -> Num:
    """Seconds one chip streams the weights a pass of `tokens` tokens reads: dense bytes from where
    the dense weights sit, the `touched` routed experts per MoE layer from where the experts sit
    (hot-first placement); the layers' matrices `dense_passes` times and each touched expert
    `expert_passes` times (the LM head and the embedding rows of the tokens once)."""
    rows = minimum(tokens, mc.vocab) * mc.hidden if mc.lookup_params else 0.0
    dense = (mc.layer_params * dense_passes * ch.w_dense + mc.head_params * ch.w_head + rows * ch.w_embed) / ch.tp
    if not mc.n_moe_layers:     # no routed experts: their term is 0.0
        return dense * ch.dense_inv
    return dense * ch.dense_inv \
        + mc.n_moe_layers * touched * mc.expert_params / ch.e_group * ch.w_expert * ch.expert_inv * expert_passes


def gemm_s(mc: ModelConsts, flops: Num, dense_flops: Num, dequant: Num, dense_dequant: Num,
           experts_per: Num = 1.0) -> Num:
    """Seconds of GEMM work per token at a chip's rates (before dividing by tp*ep): the routed
    experts in their path (counted `experts_per` times), the rest (LM head included) in the dense
    path. Matmul params: the active ones less an untied input embedding (a row lookup)."""
    matmul_params = mc.active_params - mc.lookup_params      # 2 FLOPs each per token
    routed_params = mc.n_moe_layers * mc.k * mc.expert_params  # of them in the routed experts
    return 2.0 * ((matmul_params - routed_params) * (1.0 + dense_dequant) / dense_flops
                  + routed_params * experts_per * (1.0 + dequant) / flops)


class Pass(NamedTuple):
    """One engine step: a pass of one micro-batch through the layers, carrying `dec` decoding
    sequences (each verifying `pos` positions) and `chunk` prompt tokens (`pass_terms`). Memory and
    compute are affine in U, the (layer, token) pairs the decoding sequences attend to, summed over
    them: memory = mem + kv U, compute = comp + attn U; the step is then
    max(memory + serial compute, compute + serial memory, floor) + comm + over (`timed`)."""

    mem: Num       # seconds streamed: the weights the pass's tokens touch, the chunks' KV read and written
    kv: Num        # seconds per pair a decoding sequence attends to (its KV read once)
    comp: Num      # seconds of FLOPs: the decode tokens' GEMMs, the chunks' GEMMs, LM heads and attention
    attn: Num      # seconds per attended pair of a decoding sequence (pos queries each)
    serial: Num    # the share of the smaller of memory and compute not hidden (`serial_share`)
    floor: Num     # the shortest pass (`floor_s`, x the pipeline's beat)
    comm: Num      # communication of the pass's tokens
    over: Num      # the runtime's overheads (per step, layer, MoE layer, sequence; launches)
    head: Num      # seconds of the chunks' LM heads (in comp)


def pass_terms(mc: ModelConsts, eff: Efficiency, kn: Knobs, ch: Chip, dec: Num, pos: Num = 1.0, routed: Num = 1.0,
               chunk: Num = 0.0, prompts: Num = 0.0, held: Num = 0.0, pairs: Num = 0.0, index_pairs: Num = 0.0,
               beat: Num = 1.0, micro: Num = 1.0) -> Pass:
    """The one engine step of membound, for a static batch (`evaluate`: a decode step of the batch,
    the prefill's chunks) and for continuous batching (serving.step.StepModel) alike.

    dec: decoding sequences in the pass (per micro-batch); pos: positions each verifies (1 plain,
    gamma + 1 speculative); routed: its tokens that route independently (pos, unless the verified
    positions correlate). chunk: prompt tokens in the pass, of `prompts` prompts (each computes its
    last token's logits, or all of them where the runtime's prefill_logits is "all"); held: the
    (layer, token) pairs of KV the chunks read and write (their prompts' cached ones and their own);
    pairs: the chunks' causal attention pairs, at the prefill's FLOPs per pair (MLA: decompressed);
    index_pairs: a sparse-attention indexer's causal pairs over the held tokens. beat: a full
    pipeline's step in passes of one micro-batch (1 without pipeline stages); micro: the micro-batches
    the step's sequences go in (each pipeline rank runs the engine's host loop once for each, in series
    with its forward: eff.pipeline_host_s per sequence, pp > 1 only).

    The pass's tokens touch the experts t tokens route to and stream the weights once per column
    tile of tokens (a tiled GEMM: llama.cpp's MMQ, W4A16); a decode token's GEMMs run at the decode
    path's rate (mat-vecs where the pass's decode tokens are few: `gemm_pass_s`), a prompt token's
    at the prefill path's (`ChipBase.prefill_gemm`: matrix units, MoE GEMM efficiency). A pass with
    prompt tokens launches the prefill's extra kernels (`context_kernels_s`). Every argument may be
    a float or an array (broadcast)."""
    tokens = dec * pos + chunk
    routed_tokens = dec * routed + chunk
    touched = expected_experts(mc.n_experts, mc.k, routed_tokens) if mc.n_experts else 0.0
    # the chip's fields read more than once, as locals (a named tuple's field costs a descriptor call)
    ep, kv_inv, group, attn_rate = ch.ep, ch.kv_inv, ch.group, ch.attn_rate
    tile = kn.gemm_tile_tokens
    if isinstance(tile, float) and tile == 0.0:    # untiled: once a pass
        weights = weights_s(mc, ch, tokens, touched)
    else:
        weights = weights_s(mc, ch, tokens, touched, *column_passes(mc, kn, tokens, routed_tokens, touched))
    mem = beat * (weights + held * ch.kv_index_pair / ep * kv_inv)
    head = ch.head * (chunk if eff.prefill_logits_all else prompts) / group
    if kn.gemm_tokens:      # the layer GEMMs at a measured kernel table's time for the pass's tokens
        gemms = tabled_gemm_s(mc, kn, ch, dec * pos, chunk)
    else:
        gemms = (gemm_pass_s(ch, dec * pos) + chunk * ch.prefill_gemm) / group
    comp = gemms + head + pairs * mc.prefill_attn_per_pair / attn_rate
    if eff.moe_tile_tokens and mc.n_moe_layers:     # else moe_padding_s is 0.0
        comp = comp + moe_padding_s(mc, eff, ch, tokens)
    comp = beat * comp
    if mc.index_flops:      # every tensor-parallel rank runs the indexer whole: split over ep only
        comp = comp + beat * index_pairs * mc.index_flops / (ep * ch.index_flops)
    # `overhead_terms`; per sequence: the engine's per step and its per layer (the model's layers), and
    # under pipeline stages its host loop over each of the `micro` micro-batches (every rank runs it in
    # series with its forward: TensorRT-LLM's _executor_loop_pp), so for all the step's sequences
    per_sequence: Num = eff.per_sequence_overhead_s + mc.n_layers * eff.per_sequence_layer_s
    if not (isinstance(ch.pp, float) and ch.pp == 1.0):
        per_sequence = per_sequence + micro * where(ch.pp > 1.0, eff.pipeline_host_s, 0.0)
    over = ch.over_fixed + (dec + prompts) / ep * per_sequence
    for term in ch.over_tail:
        over = over + term
    if eff.ungraphed_layer_s:       # else launch_s is 0.0
        over = over + launch_s(mc, eff, tokens)
    if chunk.__class__ is not float:
        over = over + where(chunk > 0, ch.context_kernels, 0.0)
    elif chunk > 0.0:       # a float chunk: where()'s choice without the call (0 adds nothing)
        over = over + ch.context_kernels
    # tuple.__new__: Pass's fields in order, without its generated __new__
    return tuple.__new__(Pass, (mem, beat * ch.kv_pair * kv_inv / ep, comp,
                                beat * pos * mc.attn_per_pair / attn_rate, serial_share(eff, tokens),
                                ch.floor * beat, collective_s(ch.links, tokens), over, beat * head))


def decode_coeffs(p: Pass, dec: Num) -> Coeffs:
    """A pass's (memory, compute) as affine functions of u, the pairs each of its `dec` decoding
    sequences attends to (all at one context: a static batch)."""
    return p.mem, p.kv * dec, p.comp, p.attn * dec


def pass_s(p: Pass, U: Num) -> Num:
    """Seconds of a pass whose decoding sequences attend to U pairs in all."""
    m, c = p.mem + p.kv * U, p.comp + p.attn * U
    return maximum(maximum(m, c) + p.serial * minimum(m, c), p.floor) + p.comm + p.over


def column_passes(mc: ModelConsts, kn: Knobs, tokens: Num, routed_tokens: Num, touched: Num) -> tuple[Num, Num]:
    """How many times a pass of `tokens` tokens streams the layers' matrices and each touched
    expert: once per column tile of tokens where the runtime's GEMMs tile (kn.gemm_tile_tokens:
    llama.cpp MMQ's 128, a weight-only kernel's rows), an expert's over its own tokens (once
    where the tile is below a token; `pass_terms` skips this where there is no tile)."""
    tile = maximum(kn.gemm_tile_tokens, 1e-30)
    per_expert = routed_tokens * mc.k / maximum(touched, 1e-30)
    return (where(tile >= 1.0, maximum(ceiling(tokens / tile), 1.0), 1.0),
            where(tile >= 1.0, maximum(ceiling(per_expert / tile), 1.0), 1.0))


def moe_padding_s(mc: ModelConsts, eff: Efficiency, ch: Chip, tokens: Num) -> Num:
    """Expert GEMMs padded to a tile (eff.moe_tile_tokens): each of the X(t) experts t tokens touch
    computes at least that many rows; the rows beyond the t k routed ones cost what a token's GEMM
    row costs (its share of a token's GEMMs). 0 without the term."""
    tile = eff.moe_tile_tokens
    if not tile or not mc.n_moe_layers:
        return 0.0
    rows = maximum(tile * expected_experts(mc.n_experts, mc.k, tokens) - tokens * mc.k, 0.0)
    share = mc.expert_params / (mc.active_params - mc.lookup_params)
    return mc.n_moe_layers * rows * share * ch.gemm / ch.group


def host_s(eff: Efficiency, prompt: Num) -> Num:
    """Host seconds of a request before its first step (per request and per prompt token: the
    server's HTTP, tokenisation, input preparation), off the accelerator, in its TTFT."""
    return eff.per_request_s + eff.per_prompt_token_s * prompt


def tabled_gemm_s(mc: ModelConsts, kn: Knobs, ch: Chip, decode: Num, chunk: Num) -> Num:
    """Seconds of a pass's GEMMs where the runtime's kernels were timed on the chip (Served.gemm_time: the
    profile's achievable.gemm_time_by_tokens in the weights' format, `Knobs.gemm_tokens`): the layer GEMMs of
    the pass's M = decode + chunk tokens take the table's seconds a weight at M x the layer weights a chip of
    the layout multiplies (mc.layer_params / (tp x ep)), linear in M between the table's points, below its
    first point its first figure (a kernel's fixed time), above its last the last's rate (2 M FLOPs a weight
    at the largest M timed: time in proportion to M); the decode tokens' LM head at the chip's rate
    (`ChipBase.head`; a prompt's is `pass_terms`' head). The tables time each rank's GEMMs at their own
    shape; the curve carries a weight's time from the table's shapes to the layout's (an approximation where
    a rank's matrices are much smaller than the timed ones: tile and wave quantisation left out)."""
    tokens = decode + chunk
    grid, per_weight = kn.gemm_tokens, kn.gemm_s_per_weight
    t = interp(tokens, grid, per_weight)
    top = grid[-1]
    t = where(tokens > top, per_weight[-1] * tokens / top, t)
    layers = where(tokens > 0.0, t * mc.layer_params, 0.0)
    return (layers + decode * ch.head) / ch.group


def gemm_pass_s(ch: Chip, tokens: Num) -> Num:
    """Seconds of GEMM work of a pass of `tokens` tokens (before dividing by tp*ep): the tiled
    GEMMs' per token, except a pass small enough for the mat-vec kernel (llama.cpp CUDA: at most 8
    tokens, MMVQ_MAX_BATCH_SIZE), which adds its per-column instructions (`ChipBase.mmvq`) for each
    token beyond the first: a batch-1 step's own column is in the fitted batch-1 figures already."""
    if isinstance(ch.mmvq_tokens, float) and ch.mmvq_tokens == 0.0:
        return tokens * ch.gemm
    small = (tokens <= ch.mmvq_tokens) & (ch.mmvq_tokens > 0.0) & (tokens > 0.0)
    return where(small, ch.gemm + (tokens - 1.0) * ch.mmvq, tokens * ch.gemm)


def index_terms(mc: ModelConsts, ch: Chip, pos: Num, context: Num) -> tuple[Num, Num]:
    """(memory, compute) seconds of a decode step's sparse-attention indexer at `context` cached
    tokens, `pos` queries per sequence: it reads every cached token's index key and scores it for
    each query, before (and apart from) the attention over the top-k it picks, at the indexer's
    fp8 rate. Every tensor-parallel rank runs it whole (vLLM's Indexer: ReplicatedLinear, "no
    tensor parallelism, just replicated"; each rank needs the same top-k). (0, 0) without one."""
    return decode_index(mc, ch, ch.b, pos, mc.n_layers * context, ch.beat)


def decode_index(mc: ModelConsts, ch: Chip, dec: Num, pos: Num, held: Num, beat: Num = 1.0) -> tuple[Num, Num]:
    """`index_terms` for `dec` decoding sequences holding `held` pairs each on average."""
    if not mc.index_flops:
        return 0.0, 0.0
    pairs = beat * dec / ch.ep * held
    return pairs * mc.index_bytes * ch.kv_inv, pairs * pos * mc.index_flops / ch.index_flops


def serial_share(eff: Efficiency, tokens: Num) -> Num:
    """The share of the smaller of memory and compute a pass of `tokens` tokens per micro-batch does
    not hide (1 - overlap): the mat-vec kernels' (eff.matvec_overlap) for a pass of at most
    eff.matvec_tokens, which stream each weight once with no barrier in their loop, else the tiled
    GEMMs' (eff.overlap), which load a tile, synchronise, multiply, synchronise."""
    if eff.matvec_tokens == 0.0 or eff.matvec_overlap == eff.overlap:
        return 1.0 - eff.overlap
    return where(tokens <= eff.matvec_tokens, 1.0 - eff.matvec_overlap, 1.0 - eff.overlap)


def timed(c: Coeffs, serial: Num) -> Coeffs:
    """(memory, compute) coefficients with the non-overlapped share (serial = 1 - overlap) of the
    other added: w*max(m, c) + (1-w)*(m + c) = max(m + (1-w)c, c + (1-w)m), both affine in u(L)."""
    if isinstance(serial, float) and serial == 0.0:
        return c
    return (c[0] + serial * c[2], c[1] + serial * c[3], c[2] + serial * c[0], c[3] + serial * c[1])


# ---- latency floor, communication, overheads --------------------------------------------

def mesh_s(c: ModelConsts, hw: Hardware, eff: Efficiency, tp: Num, w_bytes: Num, layers_per_chip: Num) -> Num:
    """A dataflow wafer's latency for one pass: each layer's GEMVs and collectives over the square
    of cores it owns (`dataflow.wafer_pass_s`: the fabric's cycles from its architecture papers),
    over a runtime's `fabric_efficiency` (1 unless a runtime sets it). The tokens of a pass (a
    batch, verified positions) follow one another through the same pipeline, so the pass pays
    this latency once; their bytes and FLOPs are the memory and compute terms."""
    if hw.fabric is None:
        return 0.0
    return wafer_pass_s(c, hw, tp, w_bytes, layers_per_chip) / eff.fabric_efficiency


def floor_s(c: ModelConsts, hw: Hardware, eff: Efficiency, tp: Num, w_bytes: Num, layers_per_chip: Num) -> Num:
    """The shortest one pass of model `c` can take on tp-way split layers (weights of `w_bytes`
    each): its layers' kernels and the mesh latency."""
    return c.n_layers * eff.per_layer_floor_s + eff.per_step_floor_s \
        + mesh_s(c, hw, eff, tp, w_bytes, layers_per_chip)


def comm_s(mc: ModelConsts, ch: Chip, tokens: Num) -> Num:
    """Seconds a step of `tokens` tokens per pass spends communicating over the layout."""
    return collective_s(ch.links, tokens)


def draft_comm_s(ch: Chip, tokens: Num, hidden: float, layers: float) -> Num:
    """A drafter's all-reduces: tensor-parallel over the target's tp, no pp or ep."""
    return communication_s(ch.tp, 1.0, 1.0, tokens, hidden, layers, 0.0, 0.0, ch.act_bytes, ch.link_bw,
                           ch.link_lat, ch.ring)


def overhead_terms(mc: ModelConsts, eff: Efficiency, tp: Num, ep: Num, flops: Num) -> tuple[Num, tuple[Num, ...]]:
    """The runtime's host and launch cost of a step on a chip of tp x ep at `flops` FLOP/s, but its
    sequences' (which `pass_terms` adds between them, the ChipBase's over_fixed and over_tail):
    (per step, layer and MoE layer; the engine's collective kernels (two all-reduces per layer
    under tensor parallelism, a dispatch and a combine per MoE layer under expert parallelism, each
    a kernel that waits on every rank beyond the link's hop latency in `comm_s`) and the rows every
    expert's GEMM computes whatever routes to it (eff.moe_expert_rows, work at the experts'
    compute rate; expert parallelism leaves ceil(E / ep) experts on a chip), those that are not 0).
    The sequences' part, between them: attention runs data-parallel over the ep ranks, each
    scheduling, sampling and reading the KV of its own seqs / ep sequences at once (SGLang/
    TensorRT-LLM DP attention): a step pays the per-sequence host work of one rank's share, as its
    KV reads and FLOPs are."""
    host = eff.per_layer_host_s if host_blocked(mc, eff) else 0.0
    fixed = eff.per_step_overhead_s + mc.n_layers * (eff.per_layer_overhead_s + host) \
        + mc.n_moe_layers * eff.per_moe_layer_overhead_s
    tail: list[Num] = []
    if eff.per_allreduce_s:
        tail.append(where(tp > 1.0, 2.0 * mc.n_layers * eff.per_allreduce_s, 0.0))
    if eff.per_alltoall_s and mc.n_moe_layers:
        tail.append(where(ep > 1.0, 2.0 * mc.n_moe_layers * eff.per_alltoall_s, 0.0))
    if eff.moe_expert_rows and mc.n_moe_layers:
        tail.append(mc.n_moe_layers * 2.0 * eff.moe_expert_rows * ceiling(mc.n_experts / ep)
                    * mc.expert_params / flops)
    # adding an exact 0.0 changes no figure
    return fixed, tuple(t for t in tail if not (type(t) is float and t == 0.0))


def host_blocked(c: ModelConsts, eff: Efficiency) -> bool:
    """Whether model `c`'s code blocks the host on the GPU in every layer under this runtime
    (Runtime.host_blocking_model_types): the host's dispatch of a layer (eff.per_layer_host_s) then
    adds to the step, where otherwise the GPU runs the kernels behind it and it stays hidden."""
    return bool(c.model_type) and c.model_type in eff.host_blocking_types


def launch_s(mc: ModelConsts, eff: Efficiency, tokens: Num) -> Num:
    """The per-layer launch cost of a pass of `tokens` tokens per micro-batch that the runtime
    does not replay as a CUDA graph: one of more than one token (llama.cpp CUDA), or any pass on a
    device where the runtime's generation records no graphs (eff.graphs_one_token False: llama.cpp
    CUDA below compute capability 8.0, HIP before graphs were on by default)."""
    ungraphed = mc.n_layers * eff.ungraphed_layer_s
    if not ungraphed or not eff.graphs_one_token:
        return ungraphed
    return where(tokens > 1.0, ungraphed, 0.0)


def context_kernels_s(mc: ModelConsts, eff: Efficiency) -> float:
    """The per-layer floor a prefill pays beyond a decode step's: its layers launch
    `prefill_layer_kernels` times the decode path's kernels, each lasting the same floor, so the
    pass adds (that multiple - 1) x the runtime's per-layer overhead per layer."""
    return mc.n_layers * eff.per_layer_overhead_s * (eff.prefill_layer_kernels - 1.0)


# ---- decode over the output: plain or speculative ----------------------------------------

def decode(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs, ch: Chip, plain_pass: Pass, plain: Coeffs,
           plain_timed: Coeffs, step_floor: Num, u_mid: Num, positions: Num, spec: SpecArgs | None,
           draft: Drafter | None, index_s: Num = 0.0) -> tuple[Coeffs, Num, Num, Num, Num, Num]:
    """The T decode steps from context S: (a step's (memory, compute) coefficients, its additive
    terms, its overhead share of them, the seconds of all T tokens, the drafter's share per token
    at the mean context, the drafter's prefill). A speculative round is gamma draft steps and one
    verify pass of `positions` positions, and yields tokens_per_round tokens. index_s: a sparse-
    attention indexer's kernel at the mean context (`index_terms`), run before each step's attention.
    plain: the plain step's `decode_coeffs`; plain_timed: their `timed` (the caller has them)."""
    S, T = kn.prompt, kn.output
    plain_extra = plain_pass.comm + plain_pass.over
    if spec is None:
        total = sum_over_context(mc.pieces, *plain_timed, step_floor, S, T) + (plain_extra + index_s) * T
        return plain, plain_extra, plain_pass.over, total, 0.0, 0.0
    verify = pass_terms(mc, eff, kn, ch, ch.b, positions, 1.0 + (positions - 1.0) * (1.0 - spec.route_correlation),
                        beat=ch.beat, micro=ch.m)
    coeffs, extra = decode_coeffs(verify, ch.b), verify.comm + verify.over
    verify_sum = sum_over_context(mc.pieces, *timed(coeffs, verify.serial), step_floor, S, T) + (extra + index_s) * T
    gamma, tpr = spec.gamma, spec.tokens_per_round
    if draft is not None:       # a draft model: its round's passes, summed
        draft_sum, draft_mid, draft_pre = draft_model_s(draft, hw, kn, ch.b, positions, gamma)
        return coeffs, extra, verify.over, (draft_sum + verify_sum) / tpr, draft_mid / tpr, draft_pre
    draft_sum, draft_mid, draft_pre = drafter(mc, hw, eff, kn, ch, spec, plain, plain_extra, step_floor,
                                              u_mid, plain_pass.serial)
    return coeffs, extra, verify.over, (gamma * draft_sum + verify_sum) / tpr, gamma * draft_mid / tpr, draft_pre


# ---- the drafter of a speculative round -----------------------------------------------

def drafter(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs, ch: Chip, spec: SpecArgs,
            plain: Coeffs, plain_extra: Num, step_floor: Num, u_mid: Num, serial: Num) -> tuple[Num, Num, Num]:
    """A self-drafting head's or a draft_cost fraction's drafting (a draft model's is
    `draft_model_s`): (one draft step summed over the T decode steps, one at the mean context, the
    drafter's prefill of the prompt (0 without a prompt)). A head is costed by its own physics; a
    draft_cost is a fraction of a plain step."""
    S, T = kn.prompt, kn.output                  # serial: a draft step's, b tokens (the plain step's)
    if spec.draft_cost is not None:      # legacy: a fixed fraction of a plain step
        plain_sum = sum_over_context(mc.pieces, *timed(plain, serial), step_floor, S, T) + plain_extra * T
        mid = maximum(maximum(plain[0] + plain[1] * u_mid, plain[2] + plain[3] * u_mid), step_floor) + plain_extra
        return spec.draft_cost * plain_sum, spec.draft_cost * mid, 0.0
    c, fl, extra, pieces, u, pre = draft_head_terms(mc, hw, eff, kn, ch, spec, plain, u_mid)
    c = timed(c, serial)
    total = sum_over_context(pieces, *c, fl, S, T) + extra * T
    mid = maximum(maximum(c[0] + c[1] * u, c[2] + c[3] * u), fl) + extra
    return total, mid, where(S > 0, pre, 0.0)


def draft_chip(d: Drafter, hw: Hardware, kn: Knobs) -> tuple[Chip, Knobs]:
    """The draft model's chip and knobs at `kn`'s workload (batch, prompt, output)."""
    dkn = replace(d.kn, batch=kn.batch, prompt=kn.prompt, output=kn.output)
    return chip_of(d.mc, hw, d.eff, dkn, d.base, None, 0.0, 0.0)[0], dkn


def draft_passes(d: Drafter, dkn: Knobs, dch: Chip, dec: Num, positions: Num, chunk: Num = 0.0, prompts: Num = 0.0,
                 held: Num = 0.0, pairs: Num = 0.0, index_pairs: Num = 0.0) -> tuple[Pass, Pass]:
    """A speculative round's draft-model passes beside `dec` decoding sequences, as `pass_terms`
    on the draft's chip: (the first, each of the other gamma - 1). The first takes every verified
    position of each sequence (the accepted tokens and their hidden states, padded to `positions`
    under a CUDA graph: TensorRT-LLM's MTP Eagle feeds all accepted tokens to the first MTP module
    forward, NVIDIA's tech blog 2 "DeepSeek R1 MTP Implementation and Optimization"; SGLang's EAGLE
    worker re-runs the draft over the accepted tokens after verifying), so its experts are those
    dec x positions tokens touch, and carries the step's prompt chunk (the drafter keeps a KV cache
    of the prompt too: `chunk`, `prompts`, `held`, `pairs`, `index_pairs` as `pass_terms`, in the
    draft's pairs). The others take one token each."""
    first = pass_terms(d.mc, d.eff, dkn, dch, dec, positions, positions, chunk, prompts, held, pairs, index_pairs)
    return first, pass_terms(d.mc, d.eff, dkn, dch, dec)


def draft_model_s(d: Drafter, hw: Hardware, kn: Knobs, dec: Num, positions: Num, gamma: Num) -> tuple[Num, Num, Num]:
    """A draft model's share of the T decode rounds of `dec` sequences from context S (`draft_passes`:
    the first pass and gamma - 1 others a round, each summed over the contexts exactly, with a
    sparse-attention indexer's kernel at the mean context), the same at the mean context, and its
    prefill of the B prompts (core's `prefill` on the draft's chip: chunked as the target's)."""
    S, T = kn.prompt, kn.output
    dch, dkn = draft_chip(d, hw, kn)
    first, rest = draft_passes(d, dkn, dch, dec, positions)
    L_mid = S + (T - 1.0) / 2.0
    u_mid = effective_context(d.mc.window_groups, L_mid)
    total: Num = 0.0
    mid: Num = 0.0
    for p, pos, n in ((first, positions, 1.0), (rest, 1.0, gamma - 1.0)):
        index = maximum(*decode_index(d.mc, dch, dec, pos, d.mc.n_layers * L_mid))
        total = total + n * (sum_over_context(d.mc.pieces, *timed(decode_coeffs(p, dec), p.serial), p.floor, S, T)
                             + (p.comm + p.over + index) * T)
        mid = mid + n * (pass_s(p, dec * u_mid) + index)
    pre = prefill(d.mc, d.eff, dkn, dch, terms=False)[0]
    return total, mid, pre


# a head's step and prefill: (step coefficients, floor, additive terms per step, its context
# pieces, u at the mean context, prefill seconds with its additive terms)
DraftTerms: TypeAlias = tuple[Coeffs, Num, Num, tuple[tuple[float, float, float, float], ...], Num, Num]


def draft_head_terms(mc: ModelConsts, hw: Hardware, eff: Efficiency, kn: Knobs, ch: Chip, spec: SpecArgs,
                     plain: Coeffs, u_mid: Num) -> DraftTerms:
    """A self-drafting head (EAGLE/Medusa/MTP): its own bytes and FLOPs (and the target's LM head
    it re-reads), one layer of the target's attention and KV; one layer's kernels (floor) and
    launches; the host's per-step work is the round's, paid once by the verify pass (engines run
    the draft loop in one CUDA graph). Its prefill: its layer over every prompt token, its LM
    head for the last one."""
    B, S, tp, C = kn.batch, kn.prompt, ch.tp, ch.flops
    h_bytes = (spec.head_bytes + spec.head_lm_params * ch.w_head) / tp
    h_flops = 2.0 * (spec.head_params + spec.head_lm_params)
    coeffs = (h_bytes * ch.w_inv, plain[1] / mc.n_layers, ch.b * h_flops / (tp * C), plain[3] / mc.n_layers)
    fl = eff.per_layer_floor_s + eff.per_step_floor_s \
        + mesh_s(mc, hw, eff, ch.tp, ch.w_dense, ch.share * mc.n_layers) / mc.n_layers
    extra = eff.per_layer_overhead_s + draft_comm_s(ch, ch.b, mc.hidden, 1.0)
    pre_fl = B * (2.0 * spec.head_params * S + 2.0 * spec.head_lm_params
                  + mc.prefill_attn_per_pair * causal_pairs(mc.window_groups, S) / mc.n_layers) / (tp * C)
    pre_mem = h_bytes * ch.w_inv + B / ch.ep * effective_context(mc.window_groups, S) / mc.n_layers \
        * ch.kv_pair * ch.kv_inv
    pre = maximum(maximum(pre_mem, pre_fl), fl)
    pre_extra = eff.per_layer_overhead_s + draft_comm_s(ch, B * S, mc.hidden, 1.0)
    return coeffs, fl, extra, mc.pieces, u_mid, pre + pre_extra


# ---- prefill ----------------------------------------------------------------------------

def prefill(mc: ModelConsts, eff: Efficiency, kn: Knobs, ch: Chip, terms: bool = True) -> tuple[Num, Pass | None]:
    """A prefill of B prompts of S tokens, the static schedule's first steps: (seconds (0 without a
    prompt), its terms as one pass of all B S tokens: a Pass, or None with terms=False where the
    engine takes the prompts in chunks, which do not need it).
    The engine takes the B S tokens in steps of at most kn.chunk_tokens (its token budget; 0: one
    pass): N // budget full steps and one of the rest, each a `pass_terms` step carrying its share
    of the prompts' KV and attention pairs (by its tokens: the steps' pairs sum to the prompts')
    and an LM head for each prompt it holds part of (at least one; all B where they fit one step).
    Over pipeline stages each step is a `pipeline_pass`: the prompts fill the stages in
    m = min(prompts, pp) micro-batches. B = 1 is served continuous batching's lone prompt
    (serving.solver's own chunks), step for step."""
    B, S = kn.batch, kn.prompt
    N = B * S
    counts = prompt_counts(mc, S)
    P = kn.chunk_tokens
    one_pass = type(P) is float and (P == 0.0 or (type(N) is float and N <= P))
    whole = prompt_pass(mc, eff, kn, ch, B, S, N, counts) if terms or one_pass else None
    if one_pass:
        assert whole is not None
        prefill_s = where(S > 0, pass_s(whole, 0.0), 0.0)
    else:
        if not (type(P) is float and P > 0.0):     # a float budget where() would keep: kept without the calls
            P = where(P > 0.0, P, maximum(N, 1.0))
        full = floor_int(N / P)
        rest = N - full * P
        chunks = full * pass_s(prompt_pass(mc, eff, kn, ch, B, S, minimum(P, N), counts), 0.0)
        if type(rest) is not float or rest > 0.0:   # a float rest of 0 adds where()'s 0.0: nothing
            chunks = chunks + where(rest > 0.0, pass_s(prompt_pass(mc, eff, kn, ch, B, S, rest, counts), 0.0), 0.0)
        prefill_s = where(S > 0, chunks, 0.0)
    return prefill_s, whole


def prompt_counts(mc: ModelConsts, S: Num) -> tuple[Num, Num, Num]:
    """A prompt of S tokens' (layer, token) pairs of KV held, its causal attention pairs and its
    indexer's causal pairs over the held tokens (0 without an indexer): what `prompt_pass` shares out."""
    return (effective_context(mc.held_groups, S), causal_pairs(mc.window_groups, S),
            causal_pairs(mc.held_groups, S) if mc.index_flops else 0.0)


def prompt_pass(mc: ModelConsts, eff: Efficiency, kn: Knobs, ch: Chip, B: Num, S: Num, chunk: Num,
                counts: tuple[Num, Num, Num] | None = None) -> Pass:
    """A step of `chunk` tokens of B prompts of S tokens, nothing decoding: its share chunk / S of
    their KV (held, read and written) and causal pairs, an LM head for each prompt it holds part of.
    counts: `prompt_counts(mc, S)`, where the caller has them already."""
    held, pairs, index = prompt_counts(mc, S) if counts is None else counts
    share = chunk / maximum(S, 1.0)
    # positional: chunk, prompts, held, pairs, index_pairs (keywords cost their binding on the hot path)
    return pipeline_pass(mc, eff, kn, ch, 0.0, 1.0, 1.0, chunk, minimum(B, maximum(share, 1.0)), share * held,
                         share * pairs, share * index if mc.index_flops else 0.0)[0]


def pipeline_pass(mc: ModelConsts, eff: Efficiency, kn: Knobs, ch: Chip, dec: Num, pos: Num = 1.0, routed: Num = 1.0,
                  chunk: Num = 0.0, prompts: Num = 0.0, held: Num = 0.0, pairs: Num = 0.0, index_pairs: Num = 0.0
                  ) -> tuple[Pass, Num, Num]:
    """A step of `pass_terms`' work through the layout's ch.pp pipeline stages: (the step as one
    Pass, m, beat). The step's dec + prompts sequences go in m = min(dec + prompts, pp) micro-batches,
    each a pass of 1/m of the work (its decoding sequences attend to U / m pairs: `pass_s(p, U / m)`).
    While sequences decode the pipeline runs full: a step takes beat = max(1, m x share) passes of
    a micro-batch (one pass through all stages, or m of the largest stage's share of it: `chip_of`).
    A step of prompts alone fills it: their last micro-batch leaves the last stage (m + pp - 1)
    stage-times after the first entered, beat = (m + pp - 1) x share, over one pass's floor, its
    communication that of all the step's tokens (`prefill`: a static batch's prompts, a served
    prompt's chunk). Without stages (pp = 1) it is `pass_terms`, m = beat = 1. Floats or arrays."""
    if isinstance(ch.pp, float) and ch.pp == 1.0:
        return pass_terms(mc, eff, kn, ch, dec, pos, routed, chunk, prompts, held, pairs, index_pairs), 1.0, 1.0
    m = minimum(maximum(dec + prompts, 1.0), ch.pp)
    decoding = dec > 0.0
    beat = where(decoding, maximum(1.0, m * ch.share), (m + ch.pp - 1.0) * ch.share)
    p = pass_terms(mc, eff, kn, ch, dec / m, pos, routed, chunk / m, prompts / m, held / m, pairs / m,
                   index_pairs / m, beat=beat, micro=m)
    return p._replace(floor=where(decoding, p.floor, ch.floor),
                      comm=where(decoding, p.comm, comm_s(mc, ch, dec * pos + chunk))), m, beat


BOUNDS = ("memory", "compute", "latency", "communication", "overhead", "draft")


step_terms = operator.itemgetter(*(f"{k}_s" for k in BOUNDS))
"""`evaluate`'s BOUNDS terms (memory_s, compute_s, ...), a tuple in BOUNDS' order."""


def bound_name(terms: tuple[float, ...]) -> str:
    """Which term sets the step, from its BOUNDS terms in their order (`step_terms` of a scalar
    `evaluate`): the largest of the max-terms, unless an additive term (communication, overhead)
    is larger still; the first on ties. (`max` of the tuple is the first largest, and `index`
    finds that one: a term equal to it before it would have been the largest.)"""
    return BOUNDS[terms.index(max(terms))]
