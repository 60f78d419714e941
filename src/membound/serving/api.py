"""The entry points: `serve()` and `build()` (a configuration as an engine serves it)."""
from __future__ import annotations

import math
import numbers
from dataclasses import replace

import numpy as np

from ..base import defaults
from ..errors import InvalidInputError, is_finite_number
from ..physics.estimate import MAX_COUNT, Prepared, draft_bytes, draft_prepared, prepare
from ..catalog.hardware import load_hardware
from ..catalog.runtime import DEFAULT_SERVED, Served, load_runtime
from ..physics.speculative import SpeculativeDecoding
from .lengths import Length, as_length
from .result import Quantiles, ServeResult
from .scheduler import Scheduler, engine_scheduler, filled
from .simulator import Trace, simulate
from .solver import Steady, solve
from .step import Drafting, StepModel
from ..physics.parallel import as_parallel
from ..physics.capacity import min_chips
from ..physics.result import usd_per_million_tokens
from ..physics.roofline import maximum
from .tails import tails

# the most requests engine="simulate" runs (about 0.5 ms of Python each: 200,000 took 269 s on a
# loaded machine; a run past SIMULATE_BUDGET_S = 60 s of work is refused, simulator.py); the solver,
# whose cost does not grow with the clients, takes any load
MAX_SIMULATED_REQUESTS = 200_000
# the longest stretch of arrivals the simulator runs: its clock, a float of seconds, resolves
# 1e9 s to 0.12 us (2**-23 s), well below a step; at 1e-300 requests/s the arrival times overflowed
SIMULATED_SPAN_S = 1e9


def serve(model, hardware, *, concurrency: int | None = None, arrival_rate: float | None = None,
          prompt_tokens=defaults.PROMPT_TOKENS, output_tokens=defaults.OUTPUT_TOKENS, weight_dtype: str = "bf16",
          kv_dtype: str | None = None,
          activation_dtype: str | None = None, n_chips: int | str | None = None, parallel=None, runtime=None,
          scheduler: Scheduler | None = None, speculative=None, engine: str = "solver", seed: int = 0,
          n_requests: int | None = None, price_usd_per_hour: float | None = None,
          dense_weight_dtype: str | None = None, allow_beyond_context: bool = False) -> ServeResult:
    """A served workload: `concurrency` clients in a closed loop, or Poisson arrivals at
    `arrival_rate` requests/s, against one engine instance of `n_chips` chips (None / "auto", the
    default: the chips of `parallel`, else the fewest that hold the weights and one request of the
    longest prompt + output, `min_chips`). Pipeline stages (parallel with pp > 1) are terms of the
    one step as estimate() prices them (`core.pipeline_pass`): a running batch goes in
    min(sequences, pp) micro-batches, and a lone prompt fills the pipeline.

    prompt_tokens / output_tokens: a count or a distribution (mb.Fixed, mb.Uniform, mb.Samples).
    runtime: as estimate()'s, the one rule of every entry point: None is the device's default
    (`runtime.default_runtime`: a vendor's own software where a runtime file names the chip, else
    `device`, the profile's measured fractions with no engine costs); an engine with a `served`
    block (vllm, sglang, tensorrt-llm) gives its scheduler defaults and its fitted costs, the same
    ones estimate() uses; scheduler overrides knobs. engine: "solver" (steady state,
    percentiles from the length distributions) or "simulate" (seeded, n_requests requests;
    default 10 per client as InferenceMAX runs, at least 200). speculative: a mb.SpeculativeDecoding
    with a draft model (mb.mtp(model, gamma) for an MTP head; solver only): each step verifies
    gamma + 1 tokens per sequence, runs the drafter gamma times, emits tokens_per_round.
    dense_weight_dtype: the format of the tensors that are not routed experts, as estimate()'s
    (gpt-oss: weight_dtype="mxfp4", dense_weight_dtype="bf16"); None = weight_dtype.
    allow_beyond_context: serve requests longer than the model's context window, as estimate()'s.
    The simulator runs at most MAX_SIMULATED_REQUESTS requests (n_requests, or 10 per client) and
    at most 60 s of work (SIMULATE_BUDGET_S; past it the run is refused, naming engine='solver').
    """
    if (concurrency is None) == (arrival_rate is None):
        raise InvalidInputError("concurrency", concurrency, "exactly one of concurrency or arrival_rate")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral)
                                    or not 1 <= concurrency <= MAX_COUNT):
        raise InvalidInputError("concurrency", concurrency,
                                f"an integer from 1 to {MAX_COUNT:,} (clients in a closed loop)")
    if arrival_rate is not None and (not is_finite_number(arrival_rate) or arrival_rate <= 0):
        raise InvalidInputError("arrival_rate", arrival_rate, "a finite rate > 0 requests per second")
    if engine not in ("solver", "simulate"):
        raise InvalidInputError("engine", engine, "'solver' or 'simulate'")
    if speculative is not None and engine == "simulate":
        raise InvalidInputError("engine", engine, "'solver' with speculative=: the simulator does not model "
                                "speculative decoding (the solver does)")
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise InvalidInputError("scheduler", scheduler, "a mb.Scheduler")
    if n_requests is not None and (isinstance(n_requests, bool) or not isinstance(n_requests, numbers.Integral)
                                   or not 1 <= n_requests <= MAX_SIMULATED_REQUESTS):
        raise InvalidInputError("n_requests", n_requests, f"an integer from 1 to {MAX_SIMULATED_REQUESTS:,}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidInputError("seed", seed, "an integer >= 0 (the simulator's random seed)")
    n = n_requests if n_requests is not None else max(200, 10 * (concurrency or 20))
    if engine == "simulate" and n > MAX_SIMULATED_REQUESTS:
        raise InvalidInputError("concurrency", concurrency,
                                f"at most {MAX_SIMULATED_REQUESTS // 10:,} clients with engine='simulate' (10 requests "
                                f"each; at most {MAX_SIMULATED_REQUESTS:,} simulated), a smaller n_requests, or "
                                "engine='solver', whose cost does not grow with the load")
    if engine == "simulate" and arrival_rate is not None and n / arrival_rate > SIMULATED_SPAN_S:
        raise InvalidInputError("arrival_rate", arrival_rate,
                                f"at least {n / SIMULATED_SPAN_S:.3g} requests/s with engine='simulate' (its {n:,} "
                                "requests must arrive within 1e9 s, the span its clock resolves to a microsecond), "
                                "or engine='solver'")
    prompt = as_length("prompt_tokens", prompt_tokens, 0)
    output = as_length("output_tokens", output_tokens, 2)
    n_chips = served_chips(model, hardware, n_chips, parallel, prompt, output, weight_dtype=weight_dtype,
                           kv_dtype=kv_dtype, dense_weight_dtype=dense_weight_dtype,
                           allow_beyond_context=allow_beyond_context)
    sm, sched, p = build(model, hardware, prompt=prompt, output=output, weight_dtype=weight_dtype,
                         kv_dtype=kv_dtype, activation_dtype=activation_dtype, n_chips=n_chips,
                         parallel=parallel, runtime=runtime, scheduler=scheduler,
                         price_usd_per_hour=price_usd_per_hour, speculative=speculative,
                         dense_weight_dtype=dense_weight_dtype, allow_beyond_context=allow_beyond_context)
    if engine == "solver":
        st = solve(sm, sched, prompt.mean, output.mean, concurrency=concurrency, arrival_rate=arrival_rate)
        return result_from_solver(sm, sched, p, st, prompt, output, concurrency, arrival_rate)
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
    return replace(sched, max_running=filled(sched.max_running) * ranks, token_budget=filled(sched.token_budget) * ranks)


def served_chips(model, hardware, n_chips, parallel, prompt: Length, output: Length, **estimate_kwargs) -> int:
    """serve's n_chips: a count as given; None / "auto": the chips of `parallel`, else the fewest
    that hold the weights and one request of the longest prompt + output (`capacity.min_chips`; on a
    chip with memory tiers, in the tiers a decode streams at speed, as `estimate`)."""
    if n_chips is not None and n_chips != "auto":
        return n_chips          # checked where it is used
    given = as_parallel(parallel)
    if given is not None:
        return given.chips
    return min_chips(model, hardware, context_tokens=max(1, prompt.high + output.high), at_speed=True,
                     **estimate_kwargs)


def build(model, hardware, *, prompt: Length, output: Length, weight_dtype="bf16", kv_dtype=None,
          activation_dtype=None, n_chips=1, parallel=None, runtime=None, scheduler=None,
          price_usd_per_hour=None, speculative=None, dense_weight_dtype=None, quantization=None,
          allow_beyond_context=False):
    """(StepModel, resolved Scheduler, Prepared) for a served configuration; with a
    SpeculativeDecoding, the step verifies drafted tokens (attach_speculative).
    quantization: a mb.Quantization instead of the dtype names (a mixed checkpoint's tensor groups)."""
    rt = load_runtime(runtime, load_hardware(hardware))
    # resolved() builds a Scheduler of every knob, whose checks refuse a token budget below max_running
    served = rt.served or DEFAULT_SERVED
    sched = engine_scheduler(served) if scheduler is None else scheduler.resolved(served)
    budget = filled(sched.token_budget)
    if not sched.chunked_prefill and prompt.high > budget:
        raise InvalidInputError("scheduler.token_budget", budget,
                                f"at least the longest prompt ({prompt.high}) without chunked prefill")
    if speculative is not None and not isinstance(speculative, SpeculativeDecoding):
        raise InvalidInputError("speculative", speculative, "None or a mb.SpeculativeDecoding (e.g. mb.mtp(model, 3))")
    # a draft model's bytes sit on the target's chips as estimate() places them (`estimate.draft_bytes`)
    drafted = speculative if speculative is not None and speculative.draft is not None else None
    p = prepare(model, hardware, batch=1, prompt_tokens=int(prompt.high), output_tokens=int(output.high),
                weight_dtype=weight_dtype, kv_dtype=kv_dtype, activation_dtype=activation_dtype, n_chips=n_chips,
                parallel=parallel, runtime=rt, price_usd_per_hour=price_usd_per_hour, speculative=drafted,
                dense_weight_dtype=dense_weight_dtype, quantization=quantization,
                allow_beyond_context=allow_beyond_context)
    sched = instance_limits(sched, served, p.layout.ep)
    sm = StepModel(p)
    sm.lookahead = filled(sched.lookahead_steps)     # the launch flags' (Scheduler), else the engine's
    if speculative is not None:
        attach_speculative(sm, speculative)
    return sm, sched, p


def attach_speculative(sm: StepModel, spec: SpeculativeDecoding) -> None:
    """Make a served step model `sm` (plain decoding) a speculative one. Each step, every decoding
    sequence verifies `spec.positions` tokens (the weights the step touches, its FLOPs, its
    communication grow with them; its KV is read once) and emits `tokens_per_round` tokens on
    average; the drafter runs `gamma` passes over the decoding sequences: estimate()'s draft
    passes (`core.draft_passes` on the draft model's configuration, `estimate.draft_prepared`),
    the first over every verified position and the step's prefill chunk, the other gamma - 1 over
    one token each (`Drafting`). Its weights and its KV (`estimate.draft_bytes`, estimate()'s
    count) come out of the KV cache's room. Only a draft model is costed here (a preset,
    a Model, or `mtp_module(model)`); a head given by head_params/head_vocab or a draft_cost
    fraction raises InvalidInputError."""
    if not isinstance(spec, SpeculativeDecoding):
        raise InvalidInputError("speculative", spec, "a mb.SpeculativeDecoding")
    if spec.draft is None:
        given = "draft_cost" if spec.draft_cost is not None else "draft"
        raise InvalidInputError(f"speculative.{given}", getattr(spec, given),
                                "a draft model in serve(): a preset name, a Model, or mb.mtp_module(model) for an "
                                "MTP head (heads given by head_params or draft_cost are costed by estimate() only)")
    p = sm.prepared
    d = draft_prepared(p, spec)
    sd = StepModel(d)
    r = sd.consts.n_layers / sm.consts.n_layers     # the drafter's (layer, token) pairs per target pair
    sm.positions, sm.tokens_per_step = float(spec.positions), spec.tokens_per_round
    sm.routed = 1.0 + (sm.positions - 1.0) * (1.0 - spec.route_correlation)
    sm.draft = Drafting(sd, spec.gamma, sm.positions, r)
    if p.extra["draft"] is None:        # a plain configuration's step: the drafter's bytes join its own
        weights, kv_token = draft_bytes(d, p.layout)       # (estimate()'s count; `build` places them)
        sm.weights_bytes += weights
        sm.kv_pair_bytes += kv_token / float(sm.chip.ep * sm.consts.n_layers)


def result_fields(sm: StepModel, p: Prepared, prompt: Length, output: Length, concurrency, arrival_rate, engine: str):
    res = p.resolved
    return dict(model=p.model.name, hardware=p.hardware.name, runtime=p.runtime.name, engine=engine,
                n_chips=p.n_chips, parallel=f"tp={p.layout.tp} pp={p.layout.pp} ep={p.layout.ep}",
                concurrency=None if concurrency is None else float(concurrency),
                arrival_rate=None if arrival_rate is None else float(arrival_rate),
                prompt_tokens=prompt.mean, output_tokens=output.mean, weight_dtype=res.weights.name,
                kv_dtype=res.kv.name, activation_dtype=res.activations.name, calibration=p.labels["calibration"])


def _cost(sm: StepModel, tok_s: float) -> float | None:
    """Dollars per million output tokens; None without a price, or where the throughput is so
    small (a subnormal arrival rate) that the figure overflows a float."""
    if sm.price is None or tok_s <= 0:
        return None
    cost = usd_per_million_tokens(sm.n_chips * sm.price, tok_s)
    return cost if math.isfinite(cost) else None


def ttft_quantile(sm: StepModel, st: Steady, prompt: Length, q: float):
    """The q-quantile of the solver's TTFT (floats or arrays, as st's): the wait is shared, the
    prompt's own chunks and the host's work on its tokens scale with its length."""
    own = st.prefill + sm.host_token_s * prompt.mean
    wait = maximum(st.ttft - own, 0.0)
    return wait + own * (prompt.quantile(q) / prompt.mean if prompt.mean else 0.0)


def e2e_quantile(sm: StepModel, st: Steady, prompt: Length, output: Length, q: float):
    """The q-quantile of the solver's end-to-end time: the TTFT's, then its output's steps."""
    return ttft_quantile(sm, st, prompt, q) + (output.quantile(q) - 1.0) * st.tau


def result_from_solver(sm, sched, p, st: Steady, prompt, output, concurrency, arrival_rate) -> ServeResult:
    b, tau, x, ttft = (float(np.asarray(v)) for v in (st.running, st.tau, st.request_rate, st.ttft))
    tau_d, tau_m, f = (float(np.asarray(v)) for v in (st.tau_d, st.tau_m, st.mixed_share))
    D = output.mean - 1.0
    own = float(np.asarray(st.prefill)) + sm.host_token_s * prompt.mean
    wait = max(ttft - own, 0.0)

    def ttft_q(q):
        return float(np.asarray(ttft_quantile(sm, st, prompt, q)))
    ttft_qs = Quantiles(ttft_q(0.5), ttft_q(0.9), ttft_q(0.99), ttft)
    tpot = Quantiles(tau, tau, tau, tau)
    if arrival_rate is not None:     # Poisson arrivals: the tails' model (membound.tails, mlperf's helper)
        t = tails(sm, sched, st, float(arrival_rate), prompt, output)
        if all(math.isfinite(v) for v in t.ttft):      # else the prefill work outgrows the steps: kept as before
            ttft_qs = Quantiles(*t.ttft, mean=ttft)
        tpot = Quantiles(*t.tpot, mean=tau)
    gap = tau_m if sched.mixed_steps else tau_d + tau_m

    def itl_q(q):        # a share f of the gaps carries a prefill chunk
        return gap if f > 1.0 - q else tau_d
    itl = Quantiles(itl_q(0.5), itl_q(0.9), itl_q(0.99), tau)
    e50, e90, e99 = (float(np.asarray(e2e_quantile(sm, st, prompt, output, q))) for q in (0.5, 0.9, 0.99))
    e2e = Quantiles(e50, e90, e99, ttft + D * tau)
    tok_s = x * output.mean
    kv_occ = b * st.h_mean / st.kv_cap_pairs if st.kv_cap_pairs > 0 else 0.0
    return ServeResult(
        **result_fields(sm, p, prompt, output, concurrency, arrival_rate, "solver"),
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


def _from_trace(sm, sched, p, tr: Trace, S, T, prompt, output, concurrency, arrival_rate) -> ServeResult:
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
        **result_fields(sm, p, prompt, output, concurrency, arrival_rate, "simulate"),
        ttft=_quantiles(ttft), tpot=tp, itl=_quantiles(durs, wts), e2e=_quantiles(e2e),
        output_tok_s=tok_s, output_tok_s_per_chip=tok_s / sm.n_chips, tok_s_per_user=1.0 / tp.median,
        requests_per_s=x, mean_running=b_mean, kv_occupancy=tr.kv / total_t,
        queueing_s=max(float(np.nanmean(tr.admit - tr.arrive - sm.host(S.astype(float)))), 0.0),   # float rounding, not a wait
        preemptions=tr.preemptions,
        bound=sm.bound(b_mean, sm.attended(prompt.mean + output.mean / 2.0),
                       h=sm.held(prompt.mean + output.mean / 2.0)),
        cost_per_million_output_tokens_usd=_cost(sm, tok_s), max_running=int(filled(sched.max_running)), scheduler=sched)
