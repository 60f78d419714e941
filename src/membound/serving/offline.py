"""Offline throughput at maximum load: every request is queued at once (trtllm-bench
`throughput` at an infinite request rate, MLPerf's Offline scenario) and the engine batches
continuously, so it is kept full.

The engine is `serve`'s (docs/architecture.md, "The flow of one serve"): iteration-level scheduling, prefill
riding along with decode steps, the step costs of the runtime's `served` block. With the queue
never empty the steady state is saturated: the running batch b is the most the engine sustains,
whichever limit binds first,
- the KV cache: under TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler every
  admitted request reserves its whole prompt + output (`Scheduler.preemption="none"`), so
  b = KV pairs free / pairs of S + T tokens;
- the engine's max_batch_size (`Scheduler.max_running`);
- the tokens per step (max_num_tokens, `Scheduler.token_budget`): each step carries a decode
  token for each of the b sequences and, on average, b S / D prompt tokens (D = T - 1 decode
  steps per request), so b (1 + S / D) <= budget;
and the throughput is X T output tokens/s with X = b / (D tau) requests/s, tau the mean step
(`serve.solve` with the clients far beyond what the engine runs; the rest wait in the queue).
Uniform lengths all queued at t = 0 start in step; a run of thousands of requests settles into
the steady state (the iteration-level simulator, `serve.simulate`, agrees: see the tests).

trtllm-bench's engine limits, when the command line leaves them unset (the perf-overview
tables' commands do), come from its tuning heuristic (`trtllm_bench_scheduler`, below).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InvalidInputError
from ..physics.estimate import check_int
from ..catalog.hardware import Hardware, load_hardware
from ..catalog.model import Model, load_model
from ..physics.parallel import Parallel
from ..physics.quantization import Quantization
from . import Fixed, Scheduler, build, solve
from ..catalog.runtime import Runtime, load_runtime

# trtllm-bench throughput (NVIDIA/TensorRT-LLM v1.0, tensorrt_llm/bench/benchmark/throughput.py):
# --kv_cache_free_gpu_mem_fraction defaults to 0.90, and the perf-overview tables "in many cases"
# used 0.95 (docs/source/performance/perf-overview.md, "Running the Benchmark"); chunked context
# is off (--enable_chunked_context, default False) and the capacity scheduler is
# guaranteed_no_evict (--scheduler_policy default).
TRTLLM_BENCH_KV_FRACTION = 0.95
# tensorrt_llm/bench/build/tuning.py BYTES_PER_ELEM: bytes per weight (or KV) element it assumes;
# any other format counts 2
_TUNING_BYTES = {"nvfp4": 0.5, "fp8": 1.0}
SATURATED = 1e9     # clients in the closed loop: far beyond any engine's running batch


def trtllm_bench_scheduler(model: str | Model, hardware: str | Hardware, *, prompt_tokens: int,
                           output_tokens: int, weight_dtype: str, kv_dtype: str, tp: int = 1, pp: int = 1,
                           kv_fraction: float = TRTLLM_BENCH_KV_FRACTION) -> Scheduler:
    """The engine limits trtllm-bench's tuning heuristic sets when max_batch_size and
    max_num_tokens are not given (tensorrt_llm/bench/build/tuning.py calc_engine_setting and
    finetune_setting; benchmark/utils/general.py get_settings), as a Scheduler:
    - requests whose S + T tokens of KV fit: R = kv_fraction x (N x memory - params x bytes per
      weight) / (2 x layers x max(tp, kv heads) x head dim x bytes per KV element x (S + T));
    - batch b0 = min(R, 4096) / pp, rounded up to 32 (at least 64) below 256, to 128 below 1024,
      else to 256: max_batch_size;
    - tokens t0 = min(b0 (1 + S / T), 32768), rounded up to 256 (at least 2048) below 4096, to 512
      below 8192, else to 1024; with chunked context off, at least S + max_batch_size:
      max_num_tokens.
    The KV cache then takes kv_fraction of what the weights and activations leave; chunked
    prefill off; no eviction (the whole S + T is reserved at admission)."""
    m = load_model(model)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    for name, v in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens), ("tp", tp), ("pp", pp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "prompt_tokens" else 1):
            raise InvalidInputError(name, v, "an integer >= 1" if name != "prompt_tokens" else "an integer >= 0")
    if not 0.0 < kv_fraction <= 1.0:
        raise InvalidInputError("kv_fraction", kv_fraction, "a fraction in (0, 1]")
    per_token = 2.0 * m.n_layers * max(tp, m.n_kv_heads) * m.head_dim * _TUNING_BYTES.get(kv_dtype, 2.0)
    free = hw.capacity_bytes * tp * pp - m.total_params * _TUNING_BYTES.get(weight_dtype, 2.0)
    requests = kv_fraction * free / (per_token * (prompt_tokens + output_tokens))
    if requests < 1:
        raise InvalidInputError("hardware", hw.name, f"room for the KV cache of one {prompt_tokens} + "
                                f"{output_tokens}-token request beside {m.name}'s weights on {tp * pp} chips")
    b0 = min(requests, 4096.0) / pp
    t0 = min(b0 * (1.0 + prompt_tokens / output_tokens), 32768.0)
    batch = (max(64, 32 * math.ceil(b0 / 32)) if b0 < 256 else
             128 * math.ceil(b0 / 128) if b0 < 1024 else 256 * math.ceil(b0 / 256))
    tokens = (max(2048, 256 * math.ceil(t0 / 256)) if t0 < 4096 else
              512 * math.ceil(t0 / 512) if t0 < 8192 else 1024 * math.ceil(t0 / 1024))
    return Scheduler(max_running=batch, token_budget=max(tokens, prompt_tokens + batch), chunked_prefill=False,
                     mixed_steps=True, memory_fraction=kv_fraction, preemption="none")


@dataclass(frozen=True)
class Offline:
    """The saturated steady state of an offline run."""

    output_tok_s: float      # output tokens per second, all chips
    requests_per_s: float
    running: float           # sequences decoding in a step, on average
    step_s: float            # mean step (time per output token of each sequence)
    limit: str               # what caps the running batch: kv cache | max batch | token budget
    scheduler: Scheduler     # the engine's limits, resolved


def offline_throughput(model, hardware, *, prompt_tokens: int, output_tokens: int, runtime="tensorrt-llm",
                       scheduler: Scheduler | None = None, quantization: Quantization | None = None,
                       n_chips: int = 1, parallel: Parallel | None = None) -> Offline:
    """Throughput of `model` on `n_chips` x `hardware` with every request of uniform lengths
    queued at once: `serve.solve` saturated (see the module docstring). scheduler: the engine's
    limits (default: the runtime's served defaults; `trtllm_bench_scheduler` for trtllm-bench)."""
    prompt = Fixed(check_int("prompt_tokens", prompt_tokens, 0))
    output = Fixed(check_int("output_tokens", output_tokens, 2))   # one decode step after the prefill
    layout = parallel or Parallel(tp=n_chips)
    if layout.pp > 1:       # the pipeline's pace is its largest stage's: see pipeline_stage
        model, scheduler, n_chips, layout, runtime = pipeline_stage(model, scheduler, runtime, layout)
    sm, sched, _ = build(model, hardware, prompt=prompt, output=output, runtime=runtime, scheduler=scheduler,
                         quantization=quantization or Quantization(), n_chips=n_chips, parallel=layout)
    st = solve(sm, sched, prompt.mean, output.mean, concurrency=np.array([SATURATED]))
    b, tau, x = float(st.running[0]), float(st.tau[0]), float(st.request_rate[0])
    budget, most = float(sched.token_budget or 0), float(sched.max_running or 0)
    if b < st.cap * (1.0 - 1e-6) or st.cap >= budget - 1.0:
        limit = "token budget"
    else:
        limit = "max batch" if st.cap >= most else "kv cache"
    return Offline(x * output.mean, x, b, tau, limit, sched)


def pipeline_stage(model, scheduler: Scheduler | None, runtime, layout: Parallel
                   ) -> tuple[Model, Scheduler, int, Parallel, Runtime]:
    """A pipeline of pp stages kept full, as the one stage that sets its pace. pp micro-batches of
    m sequences are in flight; each stage runs ceil(L / pp) layers of one micro-batch at a time
    (the last stage with the LM head, the largest), so a micro-batch gains a token every pp stage
    steps and the pipeline emits m tokens per stage step: the throughput of the stage's model
    (ceil(L / pp) layers, embedding and head) on one stage's tp chips with a batch of m. Each
    chip caches the KV of its layers for all pp micro-batches, so a micro-batch has 1 / pp of
    the cache (memory_fraction / pp); max_running and token_budget are per micro-batch (as
    trtllm-bench's heuristic divides its batch by pp). Each stage's rank runs the engine's host loop
    over its micro-batch's requests in series with its forward (TensorRT-LLM's _executor_loop_pp:
    `Served.pipeline_host_s`), so the stage's step pays it per sequence of its batch: the stage's
    runtime carries it in its per-step per-sequence cost (core.pass_terms prices the same loop for a
    step of m micro-batches through all the stages). The activations handed from stage to stage
    (hidden size x 2 B per token) are not costed; nor is a ramp, the queue never empties."""
    m = load_model(model)
    pp = layout.pp
    if m.n_experts or m.layer_windows or m.full_attention_interval:
        raise InvalidInputError("parallel.pp", pp, "1 for MoE, sliding-window or linear-attention models "
                                "(pipeline stages are modelled for uniform dense stacks only)")
    stage = m.model_copy(update={"name": f"{m.name}-stage-of-{pp}", "n_layers": math.ceil(m.n_layers / pp)})
    rt = load_runtime(runtime)
    served = rt.served
    sched = (scheduler or Scheduler()).resolved(served) if served is not None else (scheduler or Scheduler())
    fraction = sched.memory_fraction if sched.memory_fraction is not None else 0.9
    if served is not None and served.pipeline_host_s:
        runtime = rt.model_copy(update={"served": served.model_copy(
            update={"per_sequence_s": served.per_sequence_s + served.pipeline_host_s})})
    return stage, replace(sched, memory_fraction=fraction / pp), layout.tp, Parallel(tp=layout.tp), runtime
