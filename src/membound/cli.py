"""Command line: `membound estimate MODEL HARDWARE [options]` (and `python -m membound`)."""
from __future__ import annotations

import argparse
import json
import sys

from .errors import MemboundError


def _estimate(args) -> int:
    from .estimate import estimate
    from .parallel import Parallel
    par = Parallel(tp=args.tp, pp=args.pp, ep=args.ep) if (args.tp or 1) * (args.pp or 1) * (args.ep or 1) > 1 else None
    r = estimate(args.model, args.hardware, batch=args.batch, prompt_tokens=args.prompt,
                 output_tokens=args.output, weight_dtype=args.weights, kv_dtype=args.kv,
                 activation_dtype=args.activations, n_chips=args.chips, parallel=par, runtime=args.runtime)
    print(json.dumps(r.to_dict(), indent=2, default=float) if args.json else r)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="membound", description="Predict LLM inference speed on given hardware.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("estimate", help="one prediction for a model on a device")
    e.add_argument("model")
    e.add_argument("hardware")
    e.add_argument("--batch", type=int, default=1)
    e.add_argument("--prompt", type=int, default=2048, help="prompt tokens per sequence")
    e.add_argument("--output", type=int, default=256, help="output tokens per sequence")
    e.add_argument("--weights", default="bf16", help="weight dtype")
    e.add_argument("--kv", default=None, help="KV-cache dtype")
    e.add_argument("--activations", default=None, help="activation (compute) dtype")
    e.add_argument("--chips", type=int, default=1)
    e.add_argument("--tp", type=int, default=1)
    e.add_argument("--pp", type=int, default=1)
    e.add_argument("--ep", type=int, default=1)
    e.add_argument("--runtime", default=None, help="ideal, device (default), llama.cpp, vllm, tensorrt-llm, sglang")
    e.add_argument("--json", action="store_true", help="machine-readable output")
    e.set_defaults(func=_estimate)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MemboundError as err:
        print(f"membound: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
