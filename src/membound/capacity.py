"""How many chips a model needs: the smallest chip count whose per-chip memory holds the
weights, the KV cache of a batch at its full context, and the activations.

The per-chip bytes come from `estimate(..., check_memory=False)` (one source of truth for the
memory physics); this module only chooses layouts and searches over chip counts.
"""
from __future__ import annotations

import math

from .errors import DoesNotFitError, InvalidInputError
from .estimate import check_int, estimate
from .hardware import load_hardware
from .model import load_model
from .parallel import Parallel


def layout_for(model, hardware, n_chips: int) -> Parallel | None:
    """The layout for `n_chips`, or None when the model cannot be laid out over that many.

    As the vendors deploy (the convention of reference.py's specialised-chip rows): wafers
    pipeline layers across wafers (tp=1, pp=n); Groq LPUs use tensor parallelism inside an
    8-chip node and pipeline across nodes (tp=8, pp=n/8); other devices `Parallel.default`
    within the interconnect's scale-up domain (tensor parallel first, then pipeline stages).
    """
    m, hw = load_model(model), load_hardware(hardware)
    n = check_int("n_chips", n_chips, 1)
    if n == 1:
        return Parallel()
    if hw.interconnect is None:
        return None
    if hw.kind == "wafer":
        return Parallel(pp=n) if n <= m.n_layers else None
    if hw.kind == "lpu" and n % 8 == 0 and m.n_heads % 8 == 0 and n // 8 <= m.n_layers:
        return Parallel(tp=8, pp=n // 8)
    try:
        return Parallel.default(m, n, max_tp=hw.interconnect.max_chips)
    except InvalidInputError:
        return None


def min_chips(model, hardware, *, batch: int = 1, context_tokens: int = 4096, weight_dtype: str = "bf16",
              kv_dtype: str | None = None, runtime=None, max_chips: int = 100_000) -> int:
    """The smallest number of `hardware` chips that hold `model` serving `batch` sequences of
    `context_tokens` tokens each (weights + KV cache + activations per chip <= capacity),
    using `layout_for`'s layouts. Raises DoesNotFitError when even `max_chips` do not.

    Example: llama-3.1-70b in bf16 (141 GB of weights) on 80 GB H100s needs 2 chips.
    """
    m, hw = load_model(model), load_hardware(hardware)
    B = check_int("batch", batch, 1)
    L = check_int("context_tokens", context_tokens, 1)
    cap = check_int("max_chips", max_chips, 1)

    def need(n):
        r = estimate(m, hw, batch=B, prompt_tokens=L - 1, output_tokens=1, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype, n_chips=n, parallel=layout_for(m, hw, n), runtime=runtime,
                     check_memory=False)
        return r.memory

    one = need(1)
    if one.fits:
        return 1
    # weights and KV split at best n ways, so n >= (weights + KV) / capacity per chip
    lo = max(2, math.ceil((one.weights_bytes + one.kv_bytes + one.other_bytes) / one.capacity_bytes))
    counts = (n for n in range(lo, cap + 1) if layout_for(m, hw, n) is not None)
    valid: list[int] = []

    def at(i):   # the i-th valid chip count >= lo, or None past max_chips
        while len(valid) <= i:
            n = next(counts, None)
            if n is None:
                return None
            valid.append(n)
        return valid[i]

    # find a count that fits by doubling, then bisect the valid counts between
    i, prev, hi, step = 0, -1, None, 1
    while True:
        if at(i) is None:             # past max_chips: try the last valid count once
            i = len(valid) - 1
            if i <= prev:
                break
        if need(valid[i]).fits:
            hi = i
            break
        prev, i, step = i, i + step, step * 2
    if hi is None:
        last = need(valid[-1]) if valid else one
        raise DoesNotFitError(last.total_bytes, last.capacity_bytes, None,
                              f"{m.name} on up to {cap} x {hw.name} (batch {B}, context {L}); per chip")
    lo_i = prev + 1
    while lo_i < hi:
        mid = (lo_i + hi) // 2
        if need(valid[mid]).fits:
            hi = mid
        else:
            lo_i = mid + 1
    return valid[hi]
