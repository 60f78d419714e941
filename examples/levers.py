"""Three software levers in one call, and each one's share of the speed-up.

int4 weights, fp8 KV cache, batch 16 and a Llama-3.2-1B draft proposing gamma = 4 tokens
(acceptance rate 0.8) on one H100. Speculative decoding's output is identical to the target's.
Run: python examples/levers.py
"""
import membound as mb

spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
for model in ("llama-3.1-8b", "llama-3.1-70b"):
    report = mb.explain_levers(model, "h100-sxm", batch=16, weight_dtype="int4", kv_dtype="fp8",
                               speculative=spec, prompt_tokens=2048, output_tokens=512, runtime="vllm")
    print(f"{model} on one h100-sxm (vllm), 2048-token prompt, 512 out")
    print(report)
    print()

g, r = mb.best_gamma("llama-3.1-8b", "h100-sxm", draft="llama-3.2-1b", acceptance_rate=0.8, batch=16,
                     weight_dtype="int4", kv_dtype="fp8", prompt_tokens=2048, output_tokens=512, runtime="vllm")
print(f"best gamma for llama-3.1-8b at batch 16: {g} ({r.decode_tok_s_per_user:.0f} tok/s per user)")
print()
print("int4 / fp8 speed-up over bf16 by batch, llama-3.1-8b on h100-sxm, 512-token prompt:")
print(mb.quantization_speedup("llama-3.1-8b", "h100-sxm", weight_dtypes=["int4", mb.Quantization("fp8", activations="fp8")],
                              batches=[1, 16, 64, 256, 1024], prompt_tokens=512, output_tokens=128))
