"""How many chips a model needs: the smallest chip count whose per-chip memory holds the
weights, the KV cache of a batch at its full context, and the activations, laid out by the one
layout rule (`parallel.layout_for`).

The per-chip bytes come from `estimate(..., check_memory=False)` (one source of truth for the
memory physics); this module only searches over chip counts.
"""
from __future__ import annotations

from .estimate import check_int, estimate
from ..catalog.hardware import load_hardware
from ..catalog.model import load_model
from .parallel import Parallel, fewest_chips, layout_for

__all__ = ["Parallel", "fewest_chips", "layout_for", "min_chips"]


def min_chips(model, hardware, *, batch: int = 1, context_tokens: int = 4096, weight_dtype: str = "bf16",
              kv_dtype: str | None = None, runtime=None, max_chips: int = 100_000, at_speed: bool = False,
              **estimate_kwargs) -> int:
    """The smallest number of `hardware` chips that hold `model` serving `batch` sequences of
    `context_tokens` tokens each (weights + KV cache + activations per chip <= capacity), each
    count laid out by `layout_for`. Raises DoesNotFitError when even `max_chips` do not.
    `estimate_kwargs` (activation_dtype, dense_weight_dtype, quantization, speculative, ...) go to
    `estimate` as they are, so a mixed checkpoint or a draft model is counted as it will run.

    The search visits every count from a lower bound (weights + KV split n ways at best) upward,
    skipping only counts whose layout leaves chips idle (their layout is that of the count they
    use, already visited), and stops at the first that fits: the true minimum under the rule,
    assuming nothing about monotonicity. Past domain x layers chips the rule only widens tensor
    parallelism, so the search ends there or at `max_chips`. This count is also what a
    DoesNotFitError says would hold the model.

    at_speed=True: on a chip with memory tiers (SambaNova's HBM and DDR), the fewest chips
    that hold it all in the tiers a decode streams at speed, nothing in the capacity tier (the
    default count of `estimate` and `compare`: the fewest chips at the least chip-time a token,
    `parallel.fewest_chips` says why); the count that holds it at all where none does. The same
    count as at_speed=False on a chip with one tier.

    Example: llama-3.1-70b in bf16 (141 GB of weights) on 80 GB H100s needs 2 chips.
    """
    m, hw = load_model(model), load_hardware(hardware)
    B = check_int("batch", batch, 1)
    L = check_int("context_tokens", context_tokens, 1)
    cap = check_int("max_chips", max_chips, 1)

    def memory(n):
        return estimate(m, hw, batch=B, prompt_tokens=L - 1, output_tokens=1, weight_dtype=weight_dtype,
                        kv_dtype=kv_dtype, n_chips=n, runtime=runtime, check_memory=False,
                        **estimate_kwargs).memory

    return fewest_chips(m, hw, memory, cap, f"batch {B}, context {L}", at_speed=at_speed)
