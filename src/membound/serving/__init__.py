"""Served workloads: an engine with continuous batching under load (docs/architecture.md, "The flow of one serve").

`serve()` answers what N clients in a closed loop (or Poisson arrivals at a rate) get from one
engine instance: TTFT with queueing, time per output token, throughput per chip.

Scheduling is iteration-level. Every step runs one decode token for each running sequence plus
prefill chunks of waiting prompts, up to the scheduler's token budget (vLLM, TensorRT-LLM). With
`mixed_steps=False` (SGLang's default) a step is either a prefill batch or a decode batch. The KV
cache caps the running sequences; beyond it requests wait (or, in the simulator, are preempted).

A step's time is core's one step (`core.pass_terms`, the step `estimate()` prices a static batch
with, through `StepModel`): weights streamed once per step for all the tokens in it (experts
touched by all of them), each sequence's KV at its own context, FLOPs of the decode and prefill
tokens, communication for all of them, and the runtime's overheads per step and per sequence (its
one parameter set). A lone request (concurrency 1) gets `estimate(batch=1)`'s TTFT and TPOT.

Two engines behind one API:
- `engine="solver"`: the steady state. Let b be the mean number of decoding sequences, S and T
  the mean prompt and output lengths, D = T - 1 decode steps per request. Each decode step also
  carries b S / D prefill tokens on average (Little's law over the prefill work), as chunks of
  c = max(min(S, budget - b), b S / D) tokens in a fraction f = (b S / D) / c of the steps, so
  the mean step is tau = (1 - f) step(b, 0) + f step(b, c). Requests complete at X = b / (D tau)
  per second. TTFT = half a step + the prompt's own chunks + an M/D/1 wait for the prefill
  capacity. A closed loop of N clients holds N = b + X TTFT (Little); a bisection on b solves
  it (vectorised over concurrency). Where b reaches the KV or max_running cap, the rest of the
  clients queue: TTFT = (N - b) / X.
- `engine="simulate"`: a seeded iteration-level simulation of the same engine over
  `n_requests` requests with sampled lengths, giving percentiles (runs of pure decode steps
  are advanced in one vectorised call between events).

One module per part: `lengths` (request lengths), `scheduler` (the engine's knobs), `step` (a step's
seconds from the core), `solver` (the steady state), `simulator`, `result`, `api` (`serve`,
`build`) and `curve` (`serve_curve`).
"""
from .api import attach_speculative, build, instance_limits, serve
from .curve import DEFAULT_CONCURRENCY, ServeCurve, ServedFastMode, serve_curve
from .lengths import Fixed, Length, Samples, Uniform, as_length
from .result import Quantiles, ServeResult
from ..catalog.runtime import DEFAULT_SERVED
from .scheduler import Scheduler
from .simulator import simulate
from .solver import Steady, batch_wait, finite_run_share, run_share, solve
from .step import StepModel
from .disagg import Pool, serve_disaggregated

__all__ = ["serve", "serve_curve", "build", "solve", "simulate", "batch_wait", "finite_run_share", "run_share",
           "attach_speculative", "instance_limits", "Fixed", "Uniform", "Samples", "Length",
           "as_length", "Scheduler", "DEFAULT_SERVED", "StepModel", "Quantiles", "ServeResult", "Steady",
           "ServeCurve", "ServedFastMode", "DEFAULT_CONCURRENCY", "Pool", "serve_disaggregated"]
