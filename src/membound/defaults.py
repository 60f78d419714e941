"""The default workload: one place, read by the Python API (`estimate`, `compare`, `sweep`,
`Workload`) and the CLI, so `mb.estimate(m, d)` and `membound estimate m d` answer alike.

A chat-like request: one sequence, a 2,048-token prompt, 256 generated tokens, bf16 weights.
"""
from __future__ import annotations

BATCH = 1
PROMPT_TOKENS = 2048
OUTPUT_TOKENS = 256
WEIGHT_DTYPE = "bf16"
