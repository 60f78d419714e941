""""Fast mode": pay about 6x the price per token for about 2.5x the per-user speed.

Price per token is chip-time over tokens, step / B, so the two ratios fix the batch ratio:
6 = (B_slow / B_fast) / 2.5, i.e. the standard lane carries ~15x the fast lane's riders.
Run: python examples/fast_mode.py
"""
import membound as mb
from membound.planning import batching
from membound.planning.batching import bus_fare

WORKLOAD = dict(prompt_tokens=2048, output_tokens=512)

for hw in ("h100-sxm", "h200"):
    for runtime in ("vllm", "tensorrt-llm"):
        f = batching.fast_mode("llama-3.1-70b", hw, speedup=2.5, price_ratio=6.0, n_chips=8, runtime=runtime, **WORKLOAD)
        print(f"8 x {hw:9} {runtime:13} {f}")

print()
curve = mb.batch_curve("llama-3.1-70b", "h100-sxm", batches=[1, 4, 13, 32, 64, 128, 256, 498],
                       n_chips=8, runtime="vllm", **WORKLOAD)
print("llama-3.1-70b on 8 x h100-sxm (vllm), 2048-token prompt, 512 out:")
print(curve)
fare = bus_fare("llama-3.1-70b", "h100-sxm", batch=1, n_chips=8, runtime="vllm", **WORKLOAD)
print(f"\nthe empty bus: a lone request (batch 1) pays {fare.price_ratio:.0f}x the price per token of a full "
      f"bus of {fare.full_batch}, for {fare.speedup:.1f}x the speed")

# The same question on the served curve (continuous batching, InferenceMAX's chart): clients in a
# closed loop against one engine, throughput per chip against speed per user. The standard lane
# sits at the curve's knee (80% of its best throughput); the fast lane is read off the curve.
print("\nserved (continuous batching, vllm, fp8 weights and KV):")
for hw in ("h100-sxm", "h200"):
    c = mb.serve_curve("llama-3.1-70b", hw, n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="vllm",
                       concurrency=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512], **WORKLOAD)
    print(f"8 x {hw:9} {c.fast_mode(2.5)}; a lone client pays {c.bus_fare(1):.0f}x the best price per token")
