"""Capacity plan: 2,000 concurrent chat users, 2k-token prompts, 500-token answers, TTFT p90 < 1 s
and >= 30 tok/s each, for Llama-3.1-70B on H100 SXM, H200, B200 or MI300X.

Run: python examples/plan_capacity.py
"""
import membound as mb

# USD per GPU-hour. Indicative on-demand rates chosen for this example (the profiles carry their
# own sourced prices; a caller's map overrides them).
PRICES = {"h100-sxm": 2.50, "h200": 3.50, "b200": 5.50, "mi300x": 2.50}

workload = mb.Workload(concurrent_users=2000, prompt_tokens=2048, output_tokens=500)
slo = mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30)
result = mb.plan("llama-3.1-70b", workload, slo, hardware=list(PRICES), prices=PRICES,
                 weight_dtypes=["bf16", "fp8"], n_chips=[1, 2, 4, 8])

print(result)
print()
print("Cheapest configuration per device:")
best = result.ranked.drop_duplicates("hardware")
cols = ["hardware", "n_chips", "batch", "weight_dtype", "replicas", "total_chips", "ttft_p90_s",
        "tok_s_per_user", "cost_per_million_tokens_usd", "power_kw"]
print(best[cols].to_string(index=False, float_format=lambda x: f"{x:.3g}"))
print()
print("Interactivity frontier (output tokens/s per chip vs tokens/s per user, serve()'s steady state):")
print(result.frontier.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
