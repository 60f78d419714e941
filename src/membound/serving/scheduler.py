"""The engine's scheduler knobs (token budget, running batch, chunked prefill, ...) and their defaults."""
from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass, fields
from typing import TypeVar

from ..errors import InvalidInputError
from ..catalog.runtime import Served


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
    batch_wait_max_tokens_ratio; it waits only where both are set, and not under attention DP);
    lookahead_steps: steps the scheduler runs ahead of the GPU (runtime.Served.lookahead_steps: a
    request reaching it mid-step joins the step after those already launched; vLLM
    --async-scheduling, TensorRT-LLM's and SGLang's overlap loops: 1).
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
    lookahead_steps: int | None = None

    def __post_init__(self):
        # the bounds of the runtimes' `served` blocks (runtime.Served), which these knobs override
        for name in ("max_running", "token_budget", "kv_block_tokens", "recv_interval_steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v <= 10**9):
                raise InvalidInputError(f"scheduler.{name}", v, "None or an integer from 1 to 1,000,000,000")
        for name in ("chunked_prefill", "mixed_steps"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, bool):
                raise InvalidInputError(f"scheduler.{name}", v, "None, True or False")
        f = self.memory_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, numbers.Real) or not 0 < f <= 1):
            raise InvalidInputError("scheduler.memory_fraction", f, "None or a fraction in (0, 1]")
        v = self.lookahead_steps
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v <= 16):
            raise InvalidInputError("scheduler.lookahead_steps", v, "None or an integer from 0 to 16")
        for name in ("dp_balance_steps", "batch_wait_steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v <= 10**6):
                raise InvalidInputError(f"scheduler.{name}", v, "None or an integer from 0 to 1,000,000")
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


@functools.lru_cache(maxsize=256)
def engine_scheduler(served: Served) -> Scheduler:
    """`Scheduler().resolved(served)`, the engine's own knobs: once per served block (frozen;
    serve() without a scheduler built and checked this Scheduler twice a call otherwise)."""
    return Scheduler().resolved(served)


_K = TypeVar("_K", int, float, bool, str)


def filled(knob: _K | None) -> _K:
    """A knob of a resolved Scheduler (`Scheduler.resolved` leaves none unset)."""
    assert knob is not None, "a Scheduler knob read before Scheduler.resolved()"
    return knob
