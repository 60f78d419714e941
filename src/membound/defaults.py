"""The default workload: one place, read by the Python API (`estimate`, `compare`, `sweep`,
`Workload`) and the CLI, so `mb.estimate(m, d)` and `membound estimate m d` answer alike.

A chat-like request: one sequence, a 2,048-token prompt, 256 generated tokens, bf16 weights.
"""
from __future__ import annotations

BATCH = 1
PROMPT_TOKENS = 2048
OUTPUT_TOKENS = 256
WEIGHT_DTYPE = "bf16"
DENSE_WEIGHT_DTYPE: str | None = None
"""The format of the tensors that are not routed experts (attention, dense FFNs, shared experts,
LM head, embeddings): None = the same as the weights (a checkpoint quantized throughout).
mb.Quantization(dense_weights=...) / estimate(dense_weight_dtype=...) give mixed checkpoints theirs."""
