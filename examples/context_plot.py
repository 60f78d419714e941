"""tok/s per user against context length on H100 vs Cerebras vs Groq (writes a PNG).

    python examples/context_plot.py [out.png]
"""
import sys

import matplotlib

matplotlib.use("Agg")
from membound.present import plots  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "context.png"
ax = plots.context_curve("llama-3.1-70b", ["h100-sxm", "cerebras-wse-3", "groq-lpu"], weight_dtype="int8",
                         n_chips={"h100-sxm": 8})
ax.figure.savefig(out, dpi=100, bbox_inches="tight")
print(f"wrote {out}")
