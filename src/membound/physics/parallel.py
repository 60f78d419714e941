"""Spreading one model over several chips: tensor, pipeline and expert parallelism, and the
communication each adds to a step.

- Tensor parallel (tp): every layer's weights, KV heads and FLOPs split over tp chips; two
  all-reduces per layer (after attention, after the MLP). All-reduce of V bytes: 2(tp-1)/tp * V
  over the link bandwidth, plus link latency per hop — what dominates at batch 1: 2(tp-1) hops
  on a ring, 2 on a switched fabric (the interconnect's `topology`).
- Pipeline parallel (pp): layers split into pp stages; a token still passes every stage in
  order, so per-user speed does not rise, but pp micro-batches are in flight at once: a batch
  of B runs as m = min(B, pp) micro-batches of B/m. Each stage boundary costs one hop.
- Expert parallel (ep): MoE experts split over ep chips (attention runs data-parallel over
  them), ceil(experts / ep) to a chip, so ep need not divide the experts (48 ranks on 256);
  two all-to-alls per MoE layer (dispatch and combine).
"""
from __future__ import annotations

import functools
import math
import numbers
import re
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import DoesNotFitError, InvalidInputError
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from ..base.stacking import stackable
from .roofline import Num, ceiling, interp, minimum, where


@dataclass(frozen=True)
class Parallel:
    """A parallel layout; chips used = tp * pp * ep."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self):
        for field in ("tp", "pp", "ep"):     # numpy integers accepted (as estimate's counts are)
            v = getattr(self, field)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not 1 <= v <= 10**9:
                raise InvalidInputError(f"parallel.{field}", v, "an integer from 1 to 1,000,000,000")
            object.__setattr__(self, field, int(v))

    @classmethod
    def parse(cls, text: str) -> Parallel:
        """'tp=2', 'tp=2,pp=4' or 'tp2 pp4 ep8' (the form `str(result.parallel)` shows) -> a Parallel."""
        parts = [p for p in re.split(r"[,\s]+", text.strip().lower()) if p] if isinstance(text, str) else []
        found = [re.fullmatch(r"(tp|pp|ep)\s*=?\s*([0-9]+)", p, flags=re.ASCII) for p in parts]
        keys = [m[1] for m in found if m]
        if not parts or not all(found) or len(set(keys)) != len(keys):
            raise InvalidInputError("parallel", text, "a layout such as 'tp=2', 'tp=2,pp=4' or a mb.Parallel")
        return cls(**{m[1]: int(m[2]) for m in found if m})   # all matched (checked above)

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.ep

    def check(self, model, n_chips: int, exact: bool = True, stages: int | None = None) -> Parallel:
        """Raise unless this layout fits `model` and uses `n_chips` chips (exact) or at most
        `n_chips` (the layout rule leaves the chips that cannot form a whole stage idle); at most
        `stages` pipeline stages (`pipeline_units`: on a pipeline of whole layers the LM head's and
        embedding's parts are stages too), else at most the model's layers."""
        if self.chips > n_chips or (exact and self.chips != n_chips):
            raise InvalidInputError("parallel", self, f"tp*pp*ep == n_chips ({n_chips}); got {self.chips}")
        if model.n_heads % self.tp:
            raise InvalidInputError("parallel.tp", self.tp, f"a divisor of the {model.n_heads} attention heads of {model.name}")
        top = model.n_layers if stages is None else stages
        if self.pp > top:
            raise InvalidInputError("parallel.pp", self.pp, f"at most the {top} "
                                    + ("layers" if stages is None else "pipeline units") + f" of {model.name}")
        if self.ep > 1 and not self.ep <= model.n_experts:
            raise InvalidInputError("parallel.ep", self.ep, f"at most the {model.n_experts} experts of {model.name}"
                                    + ("" if model.n_experts else " (a dense model: ep=1)"))
        return self

    def stage_layers(self, n_layers: int) -> int:
        """Layers of the largest pipeline stage: ceil(n_layers / pp) (stages may be uneven; the
        largest decides memory per chip and the pipeline's beat)."""
        return -(-n_layers // self.pp)


def as_parallel(value) -> Parallel | None:
    """None, a Parallel, a dict such as {"tp": 2} or text such as "tp=2,pp=4" -> Parallel or None.
    Text is parsed because its form is unambiguous (the one `Result.parallel` prints)."""
    if value is None or isinstance(value, Parallel):
        return value
    if isinstance(value, str):
        return Parallel.parse(value)
    if isinstance(value, dict) and set(value) <= {"tp", "pp", "ep"}:
        return Parallel(**value)
    raise InvalidInputError("parallel", value, "a mb.Parallel, a dict like {'tp': 2} or text like 'tp=2,pp=4'")


def layout_for(model, hardware, n_chips: int) -> Parallel:
    """THE layout rule (docs/physics.md): the layout `n_chips` chips get when
    the user names only a count. estimate, compare, min_chips, sweep, the planner and validation
    all use it.

    - tensor parallelism first, within the scale-up domain: the largest divisor of the attention
      heads <= min(n_chips, domain). The domain is the interconnect's `node_chips` where set (a
      GroqNode of 8 LPUs), else its `max_chips` (an NVLink/xGMI domain); a wafer's is 1 (wafers
      pipeline: tensor parallelism over the wafer I/O would be communication-bound);
    - then pipeline stages: pp = min(layers, n_chips // tp); layers split as evenly as they go
      (the largest stage holds ceil(layers / pp));
    - when the chips outnumber domain x layers, tensor parallelism widens across domains (up to
      the interconnect's `max_chips`; never on wafers); chips that cannot form a whole stage idle;
    - where the interconnect's `layout` is "pipeline" (a Groq TSP system: inference as a pipeline of
      whole layers, ISCA 2022), the domain is 1: pipeline stages first, and tensor parallelism only
      once the chips outnumber the pipeline's units (a layer split over the fewest chips that hold it:
      by columns within a node, then by rows across nodes, ISCA 2022 sec. 5.2); its units are the
      decoder layers and the LM head's and untied embedding's parts (`units`, `head_parts`), so pp
      may exceed the layers there.

    Any chip count gets a layout, and memory per chip never rises with one more chip: for a
    fixed tp, pp never falls; tp only steps up to t' at n = t' chips, whose share 1/t' is below
    the ceil(L/pp)/(L*t) of the layout before it (tested as a law)."""
    m, hw = load_model(model), load_hardware(hardware)
    if isinstance(n_chips, bool) or not isinstance(n_chips, numbers.Integral) or n_chips < 1:
        raise InvalidInputError("n_chips", n_chips, "an integer >= 1")
    n = int(n_chips)
    if n == 1:
        return Parallel()
    link = hw.interconnect
    if link is None:
        raise InvalidInputError("n_chips", n, f"1: {hw.name} has no interconnect in its profile")
    if hw.kind == "wafer":
        cap = domain = 1
    elif link.layout == "pipeline":     # whole layers a chip first; a layer over the fewest chips that hold it
        cap, domain = link.max_chips, 1
    else:
        cap = link.max_chips
        domain = min(link.node_chips or cap, cap)
    tp, pp = _rule(m.n_heads, units(m, hw), domain, cap, n)
    return Parallel(tp=tp, pp=pp)


def head_parts(total_params: float, head_params: float, lookup_params: float, n_layers: float) -> tuple[int, int]:
    """(parts of the LM head, parts of an untied input embedding) on a pipeline of whole layers
    (`Interconnect.layout` "pipeline", a Groq TSP system): each table is a layer of the pipeline,
    split into the fewest parts of at most one decoder layer's parameters, (total - head - untied
    embedding) / n_layers (routed experts included), so each part fits wherever a decoder layer
    does at the same tp and format; each part is a pipeline stage. The compiler places whole layers
    on chips and splits a matrix product too large for one chip by its columns over chips (Abts et
    al., ISCA 2022, Fig. 18 and sec. 5.2); the head, [1 x hidden] x [hidden x vocab], is such a
    product (interpretation, one step: the profile's layout_source). Llama 3.1 8B: 128,256 x 4,096
    = 525.3M over a 218.1M layer, 3 parts each (untied)."""
    layer = (total_params - head_params - lookup_params) / n_layers
    return math.ceil(head_params / layer), math.ceil(lookup_params / layer)


def head_path(n_layers: float, h: int, e: int, pp: Num) -> tuple[Num, Num]:
    """(the share of the LM head's bytes a token streams in series, the stage levels its pass
    crosses, the gather of the head's largest logits counted as one) on a pipeline of whole layers
    whose head and untied embedding are `h` and `e` parts (`head_parts`) over `pp` stages.

    The head's parts are the columns of one product split over chips, which compute at once, the
    results concatenated (Abts et al., ISCA 2022, sec. 5.2, column split, no reduction; Fig. 14, a
    distributed product's latency falling as chips are added). With U = layers + h + e units,
    k = ceil(U / pp) a stage, a stage runs its own parts in series: a token streams min(k, h) / h of
    the head. The head's parts span s_h = ceil(h / k) stages at once and the embedding's s_e =
    ceil(e / k) (the token id reaches each part at once; the part holding its row sends it on), so
    the pass crosses pp - s_h - s_e + [s_h > 0] + [s_e > 0] levels; where s_h > 1 the parts' largest
    logits (value and index) are gathered to one chip, one hop more (a chain of parts carried the
    running maximum along it). The hidden state's broadcast to the s_h part stages is one boundary,
    as every boundary is. Llama 3.1 8B on 38 stages (h = e = 3, k = 1): 1/3 of the head, 34 + 1 = 35
    levels, 34 hops where consecutive parts crossed 38 stages, 37 hops."""
    k = ceiling((n_layers + h + e) / pp)
    s_h, s_e = ceiling(h / k), ceiling(e / k)
    levels = pp - s_h - s_e + min(h, 1) + min(e, 1) + where(s_h > 1.0, 1.0, 0.0)
    return minimum(k, float(h)) / h if h else 1.0, levels


def head_stages(hw) -> bool:
    """Whether `hw` lays a model out as a pipeline of whole layers (`Interconnect.layout` "pipeline",
    not a wafer), the LM head's and embedding's parts stages of their own (`units`, `head_parts`)."""
    link = hw.interconnect
    return link is not None and link.layout == "pipeline" and hw.kind != "wafer"


def units(m, hw) -> int:
    """The units a layout's pipeline stages hold: the decoder layers, and on a pipeline of whole
    layers (`Interconnect.layout` "pipeline") the LM head's and an untied embedding's parts as well
    (`head_parts`)."""
    if not head_stages(hw):
        return m.n_layers
    head = m.vocab_size * m.hidden_size
    h, e = head_parts(m.total_params, head, 0 if m.tied_embeddings else head, m.n_layers)
    return m.n_layers + h + e


@functools.lru_cache(maxsize=65536)
def _rule(heads: int, layers: int, domain: int, cap: int, n: int) -> tuple[int, int]:
    want = min(n, cap, max(domain, n // layers))
    tp = max(t for t in range(1, min(want, heads) + 1) if heads % t == 0)
    return tp, min(layers, n // tp)


@stackable(shape="ep tp_bytes tp_seconds",
           numbers="hidden act_bytes link_bw link_lat tp_layers tp_share tp_hops_s pp_hops ep_share k ep_hop_s "
                   "moe_layers")
class Collectives(NamedTuple):
    """A layout's collectives before its tokens are known: `communication_s`'s factors that depend
    on the layout, the model and the links alone (built once per configuration by `collectives`;
    each a float or an array)."""

    hidden: Num
    act_bytes: Num
    link_bw: Num
    link_lat: Num
    tp_layers: Num      # n_layers x 2 all-reduces
    tp_share: Num       # 2(tp-1)/tp of the volume each chip moves
    tp_hops_s: Num      # their hops' latency
    pp_hops: Num | None     # pp - 1 boundary hops; None: a plain 0 (no stages), whose term is 0
    ep: Num
    ep_share: Num           # (ep-1)/ep of a chip's tokens leave it
    k: Num
    ep_hop_s: Num           # an all-to-all's latency
    moe_layers: Num | None  # n_moe_layers x 2 all-to-alls; None where their term is a plain 0 (no
                            # MoE layers, or one expert-parallel rank)
    tp_bytes: tuple[float, ...] = ()    # a measured all-reduce table over the tp ranks (Served.allreduce_time:
    tp_seconds: tuple[float, ...] = ()  # the profile's achievable.allreduce_time_by_bytes): message bytes and
                                        # the seconds at each (`tabled_allreduce_s`); (): the link's terms


def collectives(tp, pp, ep, hidden, n_layers, n_moe_layers, experts_per_token, act_bytes, link_bw, link_latency,
                ring=True, table: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())) -> Collectives:
    """The per-configuration factors of `communication_s` (see there); `table`: (message bytes, seconds) of a
    measured all-reduce over the tp ranks, which then prices the tp all-reduces (`tabled_allreduce_s`)."""
    hops = 2.0 * (tp - 1.0) if ring else 2.0 * minimum(tp - 1.0, 1.0)
    pp_hops, ep_share, ep_hop_s, moe_layers = pp - 1.0, (ep - 1.0) / ep, minimum(ep - 1.0, 1.0) * link_latency, \
        n_moe_layers * 2.0
    # a term with a plain 0.0 factor is 0.0 for any finite tokens: adding it changes nothing
    no_ep = _zero(moe_layers) or (_zero(ep_share) and _zero(ep_hop_s))
    return Collectives(hidden, act_bytes, link_bw, link_latency, n_layers * 2.0, 2.0 * (tp - 1.0) / tp,
                       hops * link_latency, None if _zero(pp_hops) else pp_hops, ep, ep_share, experts_per_token,
                       ep_hop_s, None if no_ep else moe_layers, *table)


def _zero(x) -> bool:
    return type(x) is float and x == 0.0


def collective_s(c: Collectives, tokens):
    """`communication_s` of `tokens` tokens per pass over the collectives `c` (a term `collectives`
    found to be 0 is left out)."""
    act = tokens * c.hidden * c.act_bytes
    if c.tp_bytes:
        total = c.tp_layers * tabled_allreduce_s(c.tp_bytes, c.tp_seconds, act)
    else:
        total = c.tp_layers * (c.tp_share * act / c.link_bw + c.tp_hops_s)   # >= 0: tp >= 1
    if c.pp_hops is not None:
        total = total + c.pp_hops * (c.link_lat + act / c.link_bw)
    if c.moe_layers is not None:
        total = total + c.moe_layers * (c.ep_share * (act / c.ep) * c.k / c.link_bw + c.ep_hop_s)
    return total


def tabled_allreduce_s(size: tuple[float, ...], seconds: tuple[float, ...], message: Num) -> Num:
    """Seconds of one all-reduce of `message` bytes from a measured table over its ranks (Served.allreduce_time:
    the profile's achievable.allreduce_time_by_bytes): linear in bytes between the table's sizes, below its first
    size its first time (the kernel's fixed latency: a pass of no tokens still launches it, as the link's hops
    are paid), above its last the last size's rate (time in proportion to the bytes: bandwidth-bound)."""
    t = interp(message, size, seconds)
    return where(message > size[-1], seconds[-1] * message / size[-1], t)


def communication_s(tp, pp, ep, tokens, hidden, n_layers, n_moe_layers, experts_per_token,
                    act_bytes, link_bw, link_latency, ring=True):
    """Seconds one step spends communicating, for `tokens` tokens per pass (floats or arrays).

    tp: n_layers * 2 all-reduces of tokens*hidden*act_bytes: every chip moves 2(tp-1)/tp of
        the volume; a ring pays 2(tp-1) hops of latency, a switched fabric (NVSwitch, xGMI
        all-to-all links) 2 hops whatever tp (reduce-scatter and all-gather through the switch);
    pp: (pp-1) boundary hops of the same activation;
    ep: n_moe_layers * 2 all-to-alls of each chip's tokens*k*hidden*act_bytes.
    """
    return collective_s(collectives(tp, pp, ep, hidden, n_layers, n_moe_layers, experts_per_token, act_bytes,
                                    link_bw, link_latency, ring), tokens)


def streamed_room(hw) -> float | None:
    """Bytes per chip in the tiers a decode streams at speed: on a chip with several memory tiers
    (SambaNova's HBM and DDR) every tier but the slowest, the capacity tier; None on a chip
    with one tier (all of it streams at its one speed)."""
    if len(hw.memory) < 2:
        return None
    slowest = min(hw.memory, key=lambda t: t.bandwidth_bytes_s)
    return sum(t.capacity_bytes for t in hw.memory if t is not slowest)


def fewest_chips(m, hw, memory, cap: int = 100_000, what: str = "", at_speed: bool = False, one=None) -> int:
    """The search of `min_chips` over a function `memory(n) -> Memory` of the per-chip bytes on n
    chips (laid out by `layout_for`): the first count that fits, else DoesNotFitError.

    at_speed: on a chip with memory tiers, the first count whose bytes all fit in the tiers a decode
    streams at speed (`streamed_room`: nothing in the capacity tier), else the first that fits at all.
    Why (docs/physics.md, "How many chips"): a token streams each chip's bytes once, tier by tier,
    so n chips holding W bytes, F of them per chip in fast tiers at bandwidth f and the rest in the
    capacity tier at s < f, spend n x step = n F / f + (W - n F) / s chip-seconds a token while
    anything spills, falling with every chip added, and W / f once nothing does: the first count
    with no spill is the fewest chips at the least chip-time a token. On one tier it is the first
    count that fits.

    one: memory(1) where the caller has it already: one chip is the first count each search tries,
    and the answer where it holds (estimate()'s default call, which evaluates one chip first)."""
    room = streamed_room(hw) if at_speed else None
    one = memory(1) if one is None else one
    if room is not None:
        try:
            return _search(m, hw, memory, cap, what, room, one)
        except DoesNotFitError:
            pass
    return _search(m, hw, memory, cap, what, None, one)


def _holds(mem, room: float | None) -> bool:
    """Whether per-chip bytes `mem` fit (and, where `room` is given, fit in `room` bytes)."""
    return mem.fits and (room is None or mem.total_bytes <= room)


def _search(m, hw, memory, cap: int, what: str, room: float | None, one) -> int:
    """`fewest_chips`: the first count whose per-chip bytes fit (and, where `room` is given, fit in
    `room` bytes: `_holds`); `one` is memory(1)."""
    if _holds(one, room):
        return 1
    last = one
    where = f"{m.name} on up to {cap:,} x {hw.name}" + (f" ({what})" if what else "") + "; per chip"
    if hw.interconnect is None:
        raise DoesNotFitError(one.total_bytes, one.capacity_bytes, None,
                              f"{m.name} on {hw.name}; {hw.name}'s profile has no interconnect, so it runs on one chip")
    top = min(cap, hw.interconnect.max_chips * m.n_layers) if hw.kind != "wafer" else min(cap, m.n_layers)
    lo = max(2, math.ceil((one.weights_bytes + one.kv_bytes + one.other_bytes) / (room or one.capacity_bytes)))
    for n in range(min(lo, top), top + 1):
        if layout_for(m, hw, n).chips != n:
            continue
        last = memory(n)
        if _holds(last, room):
            return n
    raise DoesNotFitError(last.total_bytes, last.capacity_bytes if room is None else room, None,
                          f"{where}; no chip count holds it under the layout rule")
