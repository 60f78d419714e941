"""The default workload: one place, read by the Python API (`estimate`, `compare`, `sweep`,
`serve`, `serve_curve`, `plan_served`, `Workload`), every CLI verb (`estimate`, `compare`,
`sweep`, `serve`, `plan`) and the web page, so `mb.estimate(m, d)`, `mb.serve(m, d, ...)`,
`membound serve m d` and the page's Serve panel answer alike.

A chat-like request: one sequence, a 2,048-token prompt, 256 generated tokens, bf16 weights,
on the fewest chips that hold it (`n_chips` None / `--chips auto`).
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
