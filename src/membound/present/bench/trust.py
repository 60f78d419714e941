"""What a benchmarked server may not claim: a decode speed beyond the device's roofline.

The client already refuses usage reports a request cannot have produced (client.Limits: more
completion tokens than max_tokens, or than MAX_TOKENS_PER_CHUNK per text chunk). With a model
and a device named, `vet` also refuses a complete request whose decode speed (output tokens
over the time after the first one) is above ROOFLINE_MARGIN times the fastest decode the pure
roofline allows on one such device: batch 1, a one-token context, runtime "ideal" (peak
bandwidth and compute, no floor, no overhead). Such a request is marked a "protocol" fault
with the reason, its tokens are counted as the text chunks that arrived, and the statistics,
comparison and calibration leave it out.

ROOFLINE_MARGIN = 10 is room for what makes a real server beat that ceiling: speculative decoding
(EAGLE-3 reports up to 6.5x over plain decoding at batch 1, Li et al. 2025, arXiv:2503.01840,
Table 1, and plain decoding runs below the roofline), weights in a smaller format than the one
stated (bf16 stated, fp8 or 4-bit served: 2x-4x), or a server spread over several devices. A
usage count that implies 1e9 tok/s is none of these.
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import InvalidInputError
from ...physics.estimate import estimate
from ...catalog.hardware import load_hardware
from ...catalog.model import load_model

ROOFLINE_MARGIN = 10.0


def ceiling_tok_s(model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None) -> float:
    """The fastest per-user decode (tokens/s) the pure roofline allows on one `hardware`:
    batch 1, a one-token prompt, runtime "ideal"."""
    r = estimate(load_model(model), load_hardware(hardware), batch=1, prompt_tokens=1, output_tokens=2,
                 weight_dtype=weight_dtype, kv_dtype=kv_dtype, runtime="ideal", check_memory=False)
    return float(r.decode_tok_s_per_user)


def speed_limit_tok_s(model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None) -> float:
    """ROOFLINE_MARGIN x ceiling_tok_s: a decode speed above it is not believed."""
    return ROOFLINE_MARGIN * ceiling_tok_s(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype)


def vet(result, model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None):
    """A copy of the BenchResult `result` in which every complete request faster than
    speed_limit_tok_s is a "protocol" fault naming its speed and the limit (see mark)."""
    limit = speed_limit_tok_s(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    hw_name = getattr(load_hardware(hardware), "name", str(hardware))
    faults = {}
    for i, s in enumerate(result.samples):
        rate = s.decode_tok_s if s.ok else None
        if rate is not None and rate > limit:
            faults[i] = (f"decode speed {rate:.3g} tok/s from {s.output_tokens} reported tokens is beyond "
                         f"{ROOFLINE_MARGIN:g}x the roofline ceiling of one {hw_name} ({limit / ROOFLINE_MARGIN:.3g} "
                         "tok/s at batch 1, runtime 'ideal'): the usage report is not believed")
    return mark(result, faults, f"claimed a decode speed beyond {ROOFLINE_MARGIN:g}x the roofline of one "
                                f"{hw_name} ({limit:.3g} tok/s)")


def running_totals(result):
    """A copy of `result` with every usage-counted request a "protocol" fault when the counts
    are a server's running total rather than each request's own: at least 3 complete requests
    report usage and, in the order they finished, every count is at least the one before plus
    the request's own text chunks (a server counting each request alone repeats about the same
    count for the same prompt)."""
    order = sorted((i for i, s in enumerate(result.samples) if s.ok and s.tokens_source == "usage"),
                   key=lambda i: (_round_index(result, result.samples[i]),
                                  result.samples[i].start_s + (result.samples[i].total_s or 0.0)))
    counts = [(result.samples[i].output_tokens, result.samples[i].chunks) for i in order]
    if len(order) < 3 or not all(c >= prev + chunks for (prev, _), (c, chunks) in zip(counts, counts[1:])):
        return result
    faults = {i: f"usage completion_tokens={result.samples[i].output_tokens} grows with every request by at least "
                 "its own chunks of text: the server's running total, not this request's count" for i in order}
    return mark(result, faults, "reported running totals as completion_tokens")


def _round_index(result, s) -> int:
    for k, r in enumerate(result.rounds):
        if (r.prompt, r.concurrency, r.round) == (s.prompt, s.concurrency, s.round):
            return k
    return len(result.rounds)


def mark(result, faults: dict, why: str):
    """A copy of `result` where each sample index in `faults` is a "protocol" fault with that
    reason, its tokens counted as the text chunks that arrived and its round's tokens recounted;
    a note says how many requests `why`. `result` itself when `faults` is empty."""
    if not faults:
        return result
    samples = [replace(s, gaps_s=list(s.gaps_s), output_tokens=s.chunks, tokens_source="chunks",
                       error_kind="protocol", error=faults[i]) if i in faults else s
               for i, s in enumerate(result.samples)]
    tokens: dict = {}
    for s in samples:
        key = (s.prompt, s.concurrency, s.round)
        tokens[key] = tokens.get(key, 0) + s.output_tokens
    rounds = [replace(r, tokens=tokens.get((r.prompt, r.concurrency, r.round), r.tokens)) for r in result.rounds]
    return replace(result, samples=samples, rounds=rounds,
                   notes=[*result.notes, f"{len(faults)} request(s) {why}: counted as protocol faults"])


def check_points(points, model, hardware, *, weight_dtype: str = "bf16", kv_dtype: str | None = None) -> None:
    """InvalidInputError naming the first fit Point faster than speed_limit_tok_s."""
    limit = speed_limit_tok_s(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    for i, p in enumerate(points):
        if p.decode_tok_s > limit:
            raise InvalidInputError(f"measured[{i}].decode_tok_s", p.decode_tok_s,
                                    f"at most {limit:.4g} tok/s ({ROOFLINE_MARGIN:g}x the roofline ceiling of one "
                                    f"{getattr(load_hardware(hardware), 'name', hardware)}): a faster speed is "
                                    "not a measurement")
