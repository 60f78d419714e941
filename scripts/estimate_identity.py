"""Every field of seeded random `estimate()` calls, written exactly: the check that a speed-up of
`estimate()` leaves its outputs unchanged (issue 33 item 1; not a timed test).

Usage, from the repository root with membound's dependencies:
    PYTHONPATH=$PWD/src python scripts/estimate_identity.py OUT.txt [--calls 3000] [--seed 33]
Run it on the commit before a change and on the change, then `cmp` the two files. Each line is
one call: its arguments and either every field of the Result (floats by `repr`, which round-trips
a float exactly, with each value's type where it is not a plain float, int, str, bool or None;
nested dataclasses, tuples and dicts field by field) or the error's type and message. The last
line is the sha256 of the lines before it.

The calls draw models, devices, runtimes, formats, workloads, chip counts (given, or the
fewest-chips search), speculative decoding (heads, a draft_cost fraction, draft models),
placements on a tiered chip, prices, check_memory and allow_beyond_context at random, and every
tenth call repeats the previous configuration at another batch (the cached path).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import random
import sys

import membound as mb

FORMATS = ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4", "q4_0", "q4_k_m", "q8_0")
RUNTIMES = (None, None, "ideal", "vllm", "sglang", "tensorrt-llm", "llama.cpp", "llama.cpp-cuda", "tinychat",
            "hf-transformers")
DRAFTS = ("llama-3.2-1b", "qwen3-0.6b", "deepseek-r1-distill-qwen-1.5b")


def exact(v) -> str:
    """`v` written so that two values give the same text only when they are equal field by field."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return f"{type(v).__name__}(" + ", ".join(f"{f.name}={exact(getattr(v, f.name))}"
                                                  for f in dataclasses.fields(v)) + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {exact(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (tuple, list)):
        return type(v).__name__ + "(" + ", ".join(exact(x) for x in v) + ")"
    if type(v) in (float, int, str, bool, type(None)):
        return repr(v)
    return f"{type(v).__name__}:{v!r}"


def draw(rng: random.Random, models: list[str], devices: list[str]) -> dict:
    """One call's arguments."""
    kw: dict = dict(model=rng.choice(models), hardware=rng.choice(devices),
                    batch=rng.choice((1, 1, 2, 4, 8, 16, 32, 64, 128, 256, rng.randint(1, 4096))),
                    prompt_tokens=rng.choice((0, 1, 128, 512, 2048, 8192, rng.randint(0, 60000))),
                    output_tokens=rng.choice((1, 2, 64, 256, 1024, rng.randint(1, 8000))),
                    weight_dtype=rng.choice(FORMATS), runtime=rng.choice(RUNTIMES))
    if rng.random() < 0.3:
        kw["kv_dtype"] = rng.choice(("bf16", "fp8", "int8", "fp4"))
    if rng.random() < 0.15:
        kw["activation_dtype"] = rng.choice(("bf16", "fp8", "int8"))
    if rng.random() < 0.15:
        kw["dense_weight_dtype"] = rng.choice((None, "bf16", "fp8", "q8_0"))
    window = mb.load_model(kw["model"]).max_context
    if window is not None and rng.random() < 0.9:       # mostly within the context window
        kw["prompt_tokens"] = min(kw["prompt_tokens"], window // 2)
        kw["output_tokens"] = min(kw["output_tokens"], window // 4)
    linked = mb.load_hardware(kw["hardware"]).interconnect is not None
    if rng.random() < 0.7:
        kw["n_chips"] = rng.choice((1, 1, 2, 4, 8, 8, 16, 64, "auto") if linked or rng.random() < 0.1 else (1, "auto"))
    if linked and rng.random() < 0.1:
        kw["parallel"] = mb.Parallel(tp=rng.choice((1, 2, 4, 8)), pp=rng.choice((1, 1, 2, 4)),
                                     ep=rng.choice((1, 1, 1, 2, 8)))
        kw.pop("n_chips", None)
    if rng.random() < 0.2:
        kw["speculative"] = speculative(rng)
    if rng.random() < 0.1:
        kw["price_usd_per_hour"] = rng.choice((0.0, 1.5, 4.0))
    if rng.random() < 0.1:
        kw["check_memory"] = False
    if rng.random() < 0.1:
        kw["allow_beyond_context"] = True
    if kw["hardware"] == "sambanova-sn40l" and rng.random() < 0.5:
        kw["placement"] = rng.choice(({"weights": "HBM"}, {"kv": "DDR"}, {"weights": "DDR", "kv": "HBM"}))
    return kw


def speculative(rng: random.Random) -> mb.SpeculativeDecoding:
    kind = rng.random()
    rate = rng.choice((0.5, 0.7, 0.85))
    if kind < 0.4:
        return mb.SpeculativeDecoding(gamma=rng.randint(1, 6), acceptance_rate=rate)
    if kind < 0.6:
        return mb.SpeculativeDecoding(gamma=rng.randint(1, 6), acceptance_rate=rate, draft_cost=0.1)
    if kind < 0.8:
        return mb.SpeculativeDecoding(gamma=3, mean_accepted_tokens=2.5, verify_tokens=rng.choice((None, 8)),
                                      route_correlation=rng.choice((0.0, 0.5)), head_vocab=rng.choice((None, 0, 32000)))
    return mb.SpeculativeDecoding(draft=rng.choice(DRAFTS), gamma=rng.randint(2, 5), acceptance_rate=rate)


def outcome(kw: dict) -> str:
    try:
        return exact(mb.estimate(**kw))
    except Exception as e:      # noqa: BLE001 -- every outcome is compared, errors included
        return f"{type(e).__name__}: {e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=33)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    models, devices = mb.list_models(), mb.list_hardware()
    digest = hashlib.sha256()
    errors = 0
    with open(args.out, "w") as f:
        kw: dict = {}
        for i in range(args.calls):
            if i % 10 == 9 and kw:
                kw = {**kw, "batch": rng.randint(1, 512)}
            else:
                kw = draw(rng, models, devices)
            line = f"{i} {exact(kw)} -> {outcome(kw)}\n"
            errors += "Error: " in line.split(" -> ", 1)[1][:60]
            digest.update(line.encode())
            f.write(line)
        f.write(f"sha256 {digest.hexdigest()}\n")
    print(f"{args.calls} calls ({errors} raised), sha256 {digest.hexdigest()}", file=sys.stderr)


if __name__ == "__main__":
    main()
