"""Serving under load: clients in a closed loop against one engine with continuous batching.

The InferenceMAX workload (lengths uniform in [0.8 L, L]) on 8 x H200 with vLLM, from the
steady-state solver and from the iteration-level simulator (percentiles), then a fleet sized for
2,000 users under TTFT and per-user speed targets with the same physics.
Run: python examples/served.py
"""
import membound as mb
from membound.planning.planner import plan_served

L = dict(prompt_tokens=mb.serving.Uniform(819, 1024), output_tokens=mb.serving.Uniform(819, 1024),
         weight_dtype="fp8", kv_dtype="fp8", n_chips=8, runtime="vllm")
print("llama-3.3-70b on 8 x h200, vLLM, 1k/1k:")
for n in (4, 16, 64, 256):
    r = mb.serve("llama-3.3-70b", "h200", concurrency=n, **L)
    print(f"  {n:4} clients: TTFT {r.ttft.median * 1e3:6.0f} ms, TPOT {r.tpot.median * 1e3:5.1f} ms, "
          f"{r.tok_s_per_user:5.1f} tok/s per user, {r.output_tok_s_per_chip:6.0f} tok/s per GPU, "
          f"running {r.mean_running:5.1f}")
print()
print(mb.serve("llama-3.3-70b", "h200", concurrency=64, engine="simulate", n_requests=640, **L))
print()
plan = plan_served("llama-3.3-70b", mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30), users=2000, prompt_tokens=2048,
                   output_tokens=500, hardware=["h100-sxm", "h200", "b200", "mi300x"], weight_dtypes=["fp8"])
print(plan.explanation)
print(plan.ranked[["hardware", "n_chips", "clients_per_replica", "replicas", "ttft_s", "tok_s_per_user",
                   "cost_per_million_output_tokens_usd"]].head(5).to_string(index=False))
