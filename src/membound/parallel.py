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
  them); two all-to-alls per MoE layer (dispatch and combine).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidInputError
from .roofline import maximum, minimum


@dataclass(frozen=True)
class Parallel:
    """A parallel layout; chips used = tp * pp * ep."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self):
        for field in ("tp", "pp", "ep"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InvalidInputError(f"parallel.{field}", v, "an integer >= 1")

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.ep

    def check(self, model, n_chips: int) -> "Parallel":
        """Raise unless this layout fits `model` and uses exactly `n_chips` chips."""
        if self.chips != n_chips:
            raise InvalidInputError("parallel", self, f"tp*pp*ep == n_chips ({n_chips}); got {self.chips}")
        if model.n_heads % self.tp:
            raise InvalidInputError("parallel.tp", self.tp, f"a divisor of the {model.n_heads} attention heads of {model.name}")
        if self.pp > model.n_layers:
            raise InvalidInputError("parallel.pp", self.pp, f"at most the {model.n_layers} layers of {model.name}")
        if self.ep > 1 and (model.n_experts == 0 or model.n_experts % self.ep):
            raise InvalidInputError("parallel.ep", self.ep, f"a divisor of the {model.n_experts} experts of {model.name}")
        return self

    @staticmethod
    def default(model, n_chips: int, max_tp: int | None = None) -> "Parallel":
        """The layout used when none is given: all tensor parallel where the heads (and the
        scale-up domain of `max_tp` chips) allow it, else the largest tensor-parallel degree
        that divides the heads with the rest as pipeline stages (layers pipelined across
        nodes, wafers or LPUs)."""
        limit = min(n_chips, model.n_heads, max_tp or n_chips)
        if n_chips <= limit and model.n_heads % n_chips == 0:
            return Parallel(tp=n_chips)
        for tp in range(limit, 0, -1):
            if n_chips % tp == 0 and model.n_heads % tp == 0 and n_chips // tp <= model.n_layers:
                return Parallel(tp=tp, pp=n_chips // tp)
        raise InvalidInputError("n_chips", n_chips,
                                f"a chip count {model.name} can be split over (give parallel=mb.Parallel(...))")


def communication_s(tp, pp, ep, tokens, hidden, n_layers, n_moe_layers, experts_per_token,
                    act_bytes, link_bw, link_latency, ring=True):
    """Seconds one step spends communicating, for `tokens` tokens per pass (floats or arrays).

    tp: n_layers * 2 all-reduces of tokens*hidden*act_bytes: every chip moves 2(tp-1)/tp of
        the volume; a ring pays 2(tp-1) hops of latency, a switched fabric (NVSwitch, xGMI
        all-to-all links) 2 hops whatever tp (reduce-scatter and all-gather through the switch);
    pp: (pp-1) boundary hops of the same activation;
    ep: n_moe_layers * 2 all-to-alls of each chip's tokens*k*hidden*act_bytes.
    """
    act = tokens * hidden * act_bytes
    hops = 2.0 * (tp - 1.0) if ring else 2.0 * minimum(tp - 1.0, 1.0)
    ring = 2.0 * (tp - 1.0) / tp * act / link_bw + hops * link_latency
    t_tp = n_layers * 2.0 * ring
    t_pp = (pp - 1.0) * (link_latency + act / link_bw)
    a2a = (ep - 1.0) / ep * (act / ep) * experts_per_token / link_bw + minimum(ep - 1.0, 1.0) * link_latency
    t_ep = n_moe_layers * 2.0 * a2a
    return maximum(t_tp, 0.0) + t_pp + t_ep
