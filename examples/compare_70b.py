"""One 70B model on five machines: an 8-GPU H100 node, an 8-GPU H200 node, Cerebras wafers,
Groq LPUs and a SambaNova rack. For each: tok/s per user, the fewest chips that hold the
model with its KV cache, which bound won, and the step's terms that say why.

    python examples/compare_70b.py
"""
import membound as mb
from membound.physics.capacity import layout_for, min_chips

MODEL = "llama-3.1-70b"
PROMPT, OUTPUT = 2048, 256
DTYPE = "int8"   # a dtype every one of these chips can compute in or dequantize from

# chips deployed: a GPU node has 8; a SambaNova rack 16; wafers and LPUs as few as hold it
DEPLOYED = {"h100-sxm": 8, "h200": 8, "cerebras-wse-3": None, "groq-lpu": None, "sambanova-sn40l": 16}

WHY = {
    "memory": "streaming weights + KV from memory is the slowest part",
    "compute": "the FLOPs of the step outweigh the bytes",
    "latency": "the per-layer latency floor: bandwidth is so high that layer-by-layer time dominates",
    "communication": "chip-to-chip all-reduces and pipeline hops cost more than reading memory",
    "overhead": "fixed per-step software overhead dominates",
}


def main():
    model = mb.load_model(MODEL)
    print(f"{MODEL}: {model.total_params / 1e9:.1f}B params, {DTYPE} weights = "
          f"{model.weight_bytes(DTYPE) / 1e9:.0f} GB; prompt {PROMPT}, output {OUTPUT}, batch 1\n")
    print(f"{'device':<16} {'chips':>6} {'min':>6} {'tok/s/user':>11}  {'bound':<14} terms per token (ms)")
    for name, chips in DEPLOYED.items():
        fewest = min_chips(MODEL, name, context_tokens=PROMPT + OUTPUT, weight_dtype=DTYPE)
        n = max(chips or fewest, fewest)
        r = mb.estimate(MODEL, name, n_chips=n, parallel=layout_for(MODEL, name, n), weight_dtype=DTYPE,
                        prompt_tokens=PROMPT, output_tokens=OUTPUT)
        terms = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in r.step_terms_s.items() if v > 0)
        print(f"{name:<16} {n:>6} {fewest:>6} {r.decode_tok_s_per_user:>11,.1f}  {r.bound:<14} {terms}")
        print(f"{'':<16} why: {WHY[r.bound]}")
    ceiling = mb.bandwidth_ceiling(MODEL, "h100-sxm", weight_dtype="bf16")
    print(f"\nThe memory wall for comparison: 70B in bf16 on one H100 cannot beat "
          f"3.35e12 B/s / {model.weight_bytes('bf16') / 1e9:.0f} GB = {ceiling:.1f} tok/s.")


if __name__ == "__main__":
    main()
