"""Disaggregated serving: prompts are prefilled on one pool of engine instances and decoded on
another (NVIDIA Dynamo, SGLang PD disaggregation, vLLM disagg), each pool a set of identical
workers. Every step of a worker comes from the same served step model as `serve()`
(`serve.build`: the core's physics with the engine's served costs).

Closed loop of N clients over mean lengths S (prompt) and T (output), D = T - 1:
- decode pool: W_d workers, b sequences each on average, decode-only steps at the mean context
  S + D/2. A decoding sequence shares its worker's steps with b (N - 1) / N others (as in
  `serve`'s solver: one client decodes alone), so a step takes step_d(1 + b (N - 1) / N) and
  emits tokens_per_step tokens per sequence (1 without speculative decoding); requests complete
  at X = W_d b tokens_per_step / (D step).
- prefill pool: W_p workers share the prompts. One prompt alone takes pre = ceil(S / c) prefill
  steps of c = min(S, token budget) tokens; a worker prefills at most `budget` tokens per full
  step, and the other clients' prompts load it by rho = X (N - 1) / N / W_p S / (budget /
  step_p(budget)), so a prompt waits rho / (2 (1 - rho)) pre on average (M/D/1, as `serve`).
  The budget is a whole worker's (per rank x ranks where the engine's limits are per rank:
  `serve.instance_limits`) and W_p the row's prefill workers, so the pool's capacity is
  W_p x budget / step_p(budget) tokens per second.
- KV transfer: the prompt's KV cache moves from the prefill worker to the decode worker after
  the prefill, not overlapped with it: SGLang PD sends once the whole forward is done
  (sgl-project/sglang PR 23515: "KV cache transfer happens after full prefill computation
  completes"; layer-wise overlap is an opt-in of unmerged PRs 23515, 28529); assumed the same for
  Dynamo's TensorRT-LLM and vLLM (NIXL) workers. Each chip sends its own share (a tensor-parallel
  shard; the whole sequence from the one DP-attention rank holding it) over the interconnect
  when both pools fit in one scale-up domain (an NVL72 rack), else over its NIC (the profile's
  `scale_out`): xfer = latency + bytes / bandwidth. The links' load (X S KV bytes per second
  over all the NICs, well under 1% of them) is not queued.
- TTFT = host time + pre + wait + xfer.
- Little's law: N = W_d b + X TTFT, solved by bisection on b. Where b reaches a decode worker's
  cap (its KV cache, max_running), the remaining clients wait: TTFT += (N - N(cap)) / X.
Throughput per chip divides by the chips of both pools (InferenceMAX's all-GPU figure).

Open loop (Poisson arrivals at lambda requests per second, spread evenly over each pool's workers,
so each worker sees Poisson arrivals at lambda / W; `disaggregated_tails`, searched by
`planning.rate_search`), with the tail models of the aggregated engine (`serving.tails`):
- prefill pool: a worker's prompts queue for its prefill capacity, budget / step_p(budget) tokens
  a second with full steps: an M/G/1 queue whose service is a prompt's tokens at that rate, over
  the prompt lengths (`tails.mg1_wait_tail`, the aggregated engine's prefill-room queue). A
  prompt's TTFT = host time + the wait + its own prefill alone and its KV transfer (both in
  proportion to its length, as `serve_disaggregated`'s percentiles); its quantiles are those of
  the wait plus the spread of lengths (`tails.wait_plus`).
- decode pool: a worker with n sequences decoding completes n tokens_per_step / (D step_d(n)) of
  them a second, step_d the decode-only step at the mean context S + D/2: the processor-sharing
  birth-death chain of the aggregated engine's occupancy (`tails.occupancy_of`, up to the cap of
  `_decode_cap`), whose mean batch is Little's law's at lambda / W_d. The TPOT's quantiles are
  those of the step a decoding request finds, averaged over its own decode
  (`tails.tpot_quantiles` with no prefill chunks: a decode worker prefills nothing). Requests
  that find the batch full wait for a place (Little's law on the chain's queue: its mean wait is
  added to the TTFT).
The pools' capacity is the lesser of W_p x the prefill rate / S and W_d x cap / (D step_d(cap))
requests a second; the output tokens per chip divide by the chips of both pools.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..physics.estimate import MAX_COUNT, Prepared, check_int
from ..physics.parallel import Parallel
from ..physics.result import usd_per_million_tokens
from ..physics.roofline import causal_pairs
from . import Quantiles, Scheduler, ServeResult, StepModel, as_length, build
from .api import result_fields
from .lengths import Length
from .scheduler import filled
from .solver import sequence_hold
from .tails import (Tails, mg1_wait_tail, occupancy_grid, occupancy_of, points, seen_loads, tpot_quantiles,
                    wait_plus)


@dataclass(frozen=True)
class Pool:
    """`workers` identical engine instances of `n_chips` chips each (layout `parallel`, or the
    layout rule's for that many chips); `scheduler`: this pool's engine knobs (None: the call's)."""

    workers: int
    n_chips: int
    parallel: Parallel | None = None
    scheduler: Scheduler | None = None

    def __post_init__(self):
        for name in ("workers", "n_chips"):
            check_int(f"Pool.{name}", getattr(self, name), 1)
        if self.parallel is not None and not isinstance(self.parallel, Parallel):
            raise InvalidInputError("Pool.parallel", self.parallel, "None or a mb.Parallel")
        if self.scheduler is not None and not isinstance(self.scheduler, Scheduler):
            raise InvalidInputError("Pool.scheduler", self.scheduler, "None or a mb.Scheduler")


@dataclass(frozen=True)
class Pools:
    """Both pools built (`build_pools`): each one's step model and resolved scheduler, and its workers."""

    sm_p: StepModel
    sched_p: Scheduler
    w_p: int
    sm_d: StepModel
    sched_d: Scheduler
    w_d: int

    @property
    def chips(self) -> int:
        return self.w_p * self.sm_p.n_chips + self.w_d * self.sm_d.n_chips


def build_pools(model, hardware, prefill: Pool, decode: Pool, **kw) -> tuple[Pools, Prepared]:
    """(Pools, the decode pool's Prepared) of `serve.build` per pool: each pool's chips, layout and
    scheduler (a pool's own, else kw's `scheduler`); kw: build's other arguments."""
    for name, pool in (("prefill", prefill), ("decode", decode)):
        if not isinstance(pool, Pool):
            raise InvalidInputError(name, pool, "a mb.Pool(workers, n_chips)")
    call = kw.pop("scheduler", None)
    built = [build(model, hardware, n_chips=pool.n_chips, parallel=pool.parallel,
                   scheduler=pool.scheduler if pool.scheduler is not None else call, **kw) for pool in (prefill, decode)]
    (sm_p, sched_p, _), (sm_d, sched_d, p) = built
    return Pools(sm_p, sched_p, prefill.workers, sm_d, sched_d, decode.workers), p


@dataclass(frozen=True)
class _Decode:
    """The pools' figures at b sequences per decode worker (arrays over the client counts)."""

    step: np.ndarray        # seconds per decode step
    x: np.ndarray           # requests per second, whole pool
    ttft: np.ndarray
    pre: float              # one prompt's prefill alone
    ok: np.ndarray          # the prefill pool keeps up


@dataclass(frozen=True)
class DisaggSteady:
    """The steady state over client counts N (arrays): `running` sequences per decode worker."""

    running: np.ndarray     # decoding sequences per decode worker
    step: np.ndarray        # a decode step
    request_rate: np.ndarray  # requests per second
    ttft: np.ndarray        # queueing included
    ok: np.ndarray
    pre: float
    cap: float              # most sequences per decode worker
    u: float                # KV pairs a decoding sequence reads, at the mean context
    xfer: float = 0.0       # one prompt's KV transfer to its decode worker
    h: float = 0.0          # KV pairs it holds there (u but under sparse attention)


def solve_disaggregated(sm_p: StepModel, sched_p: Scheduler, sm_d: StepModel, sched_d: Scheduler, w_p: int, w_d: int,
                        prompt: float, output: float, concurrency: np.ndarray) -> DisaggSteady:
    """The closed loop of `concurrency` clients (an array) over both pools (module docstring):
    a geometric bisection on b, all client counts at once."""
    S, D = float(prompt), float(output) - 1.0
    N = np.asarray(concurrency, float)
    u, h = float(sm_d.attended(S + D / 2.0)), float(sm_d.held(S + D / 2.0))
    cap = _decode_cap(sm_d, sched_d, S, D, h)
    xfer = kv_transfer_s(sm_p, w_p * sm_p.n_chips + w_d * sm_d.n_chips, S)

    def at(b):
        return _figures(sm_p, sched_p, sm_d, w_p, w_d, S, D, u, b, N, xfer, h)
    b_cap = np.minimum(N / w_d, cap)
    top = at(b_cap)
    filled = top.ok & (w_d * b_cap + top.x * top.ttft <= N)
    lo, hi = b_cap * 1e-9, b_cap.copy()
    for _ in range(64):                          # b spans many decades: bisect its logarithm
        mid = np.sqrt(lo * hi)
        f = at(mid)
        below = f.ok & (w_d * mid + f.x * f.ttft < N)
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    b = np.where(filled, b_cap, np.sqrt(lo * hi))
    fig = at(b)
    # past the cap the remaining clients wait for a decode slot (Little: N = W_d b + X TTFT)
    ttft = np.where(filled, fig.ttft + (N - w_d * b - fig.x * fig.ttft) / fig.x, fig.ttft)
    x = N / (ttft + D * fig.step / sm_d.tokens_per_step)       # Little's law, exact at the root
    return DisaggSteady(b, fig.step, x, ttft, fig.ok, fig.pre, cap, u, xfer, h)


def _check_concurrency(concurrency) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral) \
            or not 1 <= int(concurrency) <= MAX_COUNT:
        raise InvalidInputError("concurrency", concurrency, f"an integer from 1 to {MAX_COUNT:,} (clients in a closed loop)")


def serve_disaggregated(model, hardware, *, concurrency, prefill: Pool, decode: Pool, prompt_tokens=1024,
                        output_tokens=1024, weight_dtype: str = "bf16", kv_dtype: str | None = None,
                        activation_dtype: str | None = None, runtime=None, scheduler: Scheduler | None = None,
                        speculative=None, price_usd_per_hour: float | None = None,
                        dense_weight_dtype: str | None = None) -> ServeResult:
    """`concurrency` clients in a closed loop against a prefill pool and a decode pool (see the
    module docstring). The scheduler's knobs apply to the workers of both pools; speculative
    (solver physics of `serve`) applies to the decode pool, and its drafter also prefills.
    dense_weight_dtype: the non-expert tensors' format, as serve()'s."""
    _check_concurrency(concurrency)
    prompt = as_length("prompt_tokens", prompt_tokens, 1)     # a prefill pool needs a prompt
    output = as_length("output_tokens", output_tokens, 2)
    pools, p = build_pools(model, hardware, prefill, decode, prompt=prompt, output=output, weight_dtype=weight_dtype,
                           kv_dtype=kv_dtype, activation_dtype=activation_dtype, runtime=runtime, scheduler=scheduler,
                           price_usd_per_hour=price_usd_per_hour, speculative=speculative,
                           dense_weight_dtype=dense_weight_dtype)
    sm_p, sched_p, sm_d, sched_d = pools.sm_p, pools.sched_p, pools.sm_d, pools.sched_d
    st = solve_disaggregated(sm_p, sched_p, sm_d, sched_d, prefill.workers, decode.workers, prompt.mean,
                             output.mean, np.array([float(concurrency)]))
    S, T = prompt.mean, output.mean
    D = T - 1.0
    b, ttft, step, x = float(st.running[0]), float(st.ttft[0]), float(st.step[0]), float(st.request_rate[0])
    tau = step / sm_d.tokens_per_step
    chips = prefill.workers * prefill.n_chips + decode.workers * decode.n_chips
    tok_s = x * T
    wait = max(ttft - st.pre - st.xfer, 0.0)

    def ttft_q(q: float) -> float:       # the prompt's own prefill and KV transfer scale with its length
        return wait + (st.pre + st.xfer) * prompt.quantile(q) / S

    def e2e_q(q: float) -> float:
        return ttft_q(q) + (output.quantile(q) - 1.0) * tau
    price = p.price
    labels = result_fields(sm_d, p, prompt, output, concurrency, None, "disaggregated")
    labels.update(n_chips=chips, parallel=f"prefill {prefill.workers} x {sm_p.prepared.layout}, "
                                          f"decode {decode.workers} x {p.layout}")
    return ServeResult(
        **labels, ttft=Quantiles(ttft_q(0.5), ttft_q(0.9), ttft_q(0.99), ttft), tpot=Quantiles(tau, tau, tau, tau),
        itl=Quantiles(step, step, step, tau),
        e2e=Quantiles(e2e_q(0.5), e2e_q(0.9), e2e_q(0.99), ttft + D * tau),
        output_tok_s=tok_s, output_tok_s_per_chip=tok_s / chips, tok_s_per_user=1.0 / tau, requests_per_s=x,
        mean_running=b, kv_occupancy=min(b * _hold(sm_d, sched_d, S, D, st.h) / sm_d.kv_pairs_capacity(sched_d), 1.0),
        queueing_s=wait, preemptions=0, bound=sm_d.bound(b, st.u, h=st.h),
        cost_per_million_output_tokens_usd=None if price is None else usd_per_million_tokens(chips * price, tok_s),
        max_running=int(st.cap), scheduler=sched_d)


def kv_transfer_s(sm_p: StepModel, chips: int, prompt: float) -> float:
    """Seconds to move one prompt's KV cache from a prefill worker to a decode worker (module
    docstring): each chip sends its share over the interconnect when all `chips` of both pools
    lie in one scale-up domain, else over its NIC."""
    hw = sm_p.prepared.hardware
    link, nic = hw.interconnect, hw.scale_out
    if link is not None and chips <= link.max_chips:
        bw, lat = link.bandwidth_bytes_s, link.latency_s
    elif nic is not None:
        bw, lat = nic.bandwidth_bytes_s, nic.latency_s
    else:
        raise InvalidInputError("hardware", hw.name, f"a profile with a scale_out network: the pools' {chips} chips "
                                f"exceed one scale-up domain ({link.max_chips if link else 1} chips), so the KV cache "
                                "crosses a NIC")
    # a chip's share of a sequence: its tensor-parallel shard; under DP attention (ep ranks) one
    # rank holds the whole sequence (kv_pair_bytes averages a sequence over the ranks)
    return lat + sm_p.kv_pair_bytes * sm_p.ranks * float(sm_p.held(prompt)) / bw


def _hold(sm: StepModel, sched: Scheduler, S: float, D: float, h: float) -> float:
    """KV pairs a decoding sequence holds on average (`serving.solver.sequence_hold`); h: those
    it holds at the mean context."""
    return sequence_hold(sm, sched, S, D, h, S + D + 1.0)


def _decode_cap(sm: StepModel, sched: Scheduler, S: float, D: float, h: float) -> float:
    """Most sequences one decode worker runs: its scheduler, its KV cache, its token budget."""
    kv = sm.kv_pairs_capacity(sched) / max(_hold(sm, sched, S, D, h), 1e-30)
    cap = min(float(filled(sched.max_running)), kv, filled(sched.token_budget) / sm.positions)
    if cap < 1.0:
        raise InvalidInputError("prompt_tokens", S, f"a workload whose KV cache for one request fits a decode worker "
                                f"({kv:.3g} requests fit)")
    return cap


def _figures(sm_p: StepModel, sched_p: Scheduler, sm_d: StepModel, w_p: int, w_d: int, S: float, D: float,
             u: float, b: np.ndarray, N: np.ndarray, xfer: float = 0.0, h: float = 0.0) -> _Decode:
    """u, h: the (layer, token) pairs a decoding sequence attends to and holds (its indexer's) at
    the mean context."""
    seen = (N - 1.0) / N             # share of the others a client's request meets
    step = sm_d.step(1.0 + b * seen, u, h=h)
    x = w_d * b * sm_d.tokens_per_step / (D * step)
    pre, rate = prefill_rate(sm_p, sched_p, S)
    rho = x * seen / w_p * S / rate
    wait = np.minimum(rho, 0.999) / (2.0 * (1.0 - np.minimum(rho, 0.999))) * pre
    return _Decode(step, x, sm_p.host(S) + pre + wait + xfer, pre, rho < 1.0)


def prefill_rate(sm_p: StepModel, sched_p: Scheduler, S: float) -> tuple[float, float]:
    """(seconds of one prompt of S tokens prefilled alone, prompt tokens a second with full steps) of a
    prefill worker: alone, ceil(S / c) steps of c = min(S, token budget) tokens (S without chunked
    prefill); full, the budget's tokens a step (whole prompts that fit it without chunked prefill)."""
    # a prompt's KV (held: read and written), its attention's and its indexer's causal pairs
    u_S, pairs_S = float(sm_p.held(S)), float(causal_pairs(sm_p.groups, S))
    idx_S = float(causal_pairs(sm_p.held_groups, S))
    budget = float(filled(sched_p.token_budget))
    c0 = min(S, budget) if sched_p.chunked_prefill else S
    own = c0 / S
    pre = math.ceil(S / c0) * float(sm_p.step(0.0, 0.0, c0, own * u_S, own * pairs_S, seqs=1.0, hp=own * idx_S))
    full = budget if sched_p.chunked_prefill else S * max(math.floor(budget / S), 1)
    share = full / S
    rate = full / float(sm_p.step(0.0, 0.0, full, share * u_S, share * pairs_S, seqs=share, hp=share * idx_S))
    return pre, rate


@dataclass(frozen=True)
class OpenPools:
    """The pools' figures under Poisson arrivals that do not depend on the rate (module docstring)."""

    pre: float              # a mean prompt's prefill alone on a prefill worker
    tokens_s: float         # a prefill worker's prompt tokens a second with full steps
    xfer: float             # a mean prompt's KV transfer to its decode worker
    tau: np.ndarray         # a decode worker's seconds per output token with n = 1 .. cap sequences decoding
    capacity: float         # requests a second the pools sustain (the lesser pool's)


def open_pools(pools: Pools, prompt: Length, output: Length) -> OpenPools:
    """`OpenPools` of `pools` serving prompts of `prompt` and outputs of `output` tokens."""
    S, D = prompt.mean, output.mean - 1.0
    sm_d = pools.sm_d
    u, h = float(sm_d.attended(S + D / 2.0)), float(sm_d.held(S + D / 2.0))
    top = max(int(math.floor(_decode_cap(sm_d, pools.sched_d, S, D, h))), 1)
    grid = occupancy_grid(top)
    tau = np.interp(np.arange(1, top + 1, dtype=float), grid, sm_d.step(grid, u, h=h) / sm_d.tokens_per_step)
    pre, tokens_s = prefill_rate(pools.sm_p, pools.sched_p, S)
    capacity = min(pools.w_p * tokens_s / S, pools.w_d * top / (D * float(tau[-1])))
    return OpenPools(pre, tokens_s, kv_transfer_s(pools.sm_p, pools.chips, S), tau, capacity)


def disaggregated_tails(pools: Pools, op: OpenPools, rate: float, prompt: Length, output: Length) -> Tails | None:
    """p50/p90/p99 TTFT and TPOT of the pools under Poisson arrivals at `rate` requests a second (the
    module docstring's open loop); None where a pool cannot keep up."""
    lam_p, lam_d = rate / pools.w_p, rate / pools.w_d
    S = points(prompt)
    room = S / op.tokens_s                      # a prompt's share of its worker's prefill capacity
    if lam_p * float(np.mean(room)) >= 1.0:
        return None
    occ = occupancy_of(lam_d, op.tau, output.mean)
    if not math.isfinite(occ.queued):
        return None
    queue = mg1_wait_tail(lam_p, room)
    own = pools.sm_p.host(S) + (op.pre + op.xfer) * S / prompt.mean
    ttft = wait_plus(own, np.full(S.size, 1.0 / S.size), queue, (0.5, 0.9, 0.99)) + occ.queued / lam_d
    load = seen_loads(occ)
    tau = float(np.mean(load))
    tpot = tpot_quantiles(tau, tau, tau, 0.0, True, points(output), load=load,
                          corr=occ.corr_s if math.isfinite(occ.corr_s) else 0.0)
    e2e = float(ttft[2]) + (output.quantile(0.99) - 1.0) * tpot[2]
    return Tails((float(ttft[0]), float(ttft[1]), float(ttft[2])), (tpot[0], tpot[1], tpot[2]), queue[0], e2e)
