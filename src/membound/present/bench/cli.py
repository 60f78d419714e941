"""`membound bench URL ...`: benchmark an endpoint, compare with the prediction, calibrate."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from . import compare, fit_runtime, load_prompts, run
from .report import calibration_text, comparison_text
from ...catalog.model import load_model
from ...errors import InvalidInputError, MemboundError
from .localcpu import local_cpu_hardware
from ...base.progress import bar
from ...base.safeio import check_output_path
from ...catalog.names import index
from ...catalog.hardware import load_hardware
from .trust import vet


def _levels(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_parser(sub) -> None:
    """Add the `bench` subcommand to an argparse subparsers object."""
    b = sub.add_parser("bench", help="measure an OpenAI-compatible endpoint: TTFT, decode tok/s, prefill cost",
                       description="Stream the rate-limiter prompt (and its ~30K-token long-context variant, "
                                   "or your prompts) to URL, repeatedly at each concurrency; report medians "
                                   "and p90; with --model and --hardware compare with membound's prediction.")
    b.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000 (or .../v1)")
    b.add_argument("--served-model", default=None, help="model name sent in requests (default: first of /v1/models)")
    b.add_argument("--prompts", action="append", default=None, metavar="FILE",
                   help="your prompts: .json/.jsonl list, or a text file = one prompt (repeatable)")
    b.add_argument("--concurrency", type=_levels, default=[1], help="comma-separated levels, e.g. 1,4,16")
    b.add_argument("--repeats", type=int, default=3, help="rounds per prompt and level")
    b.add_argument("--max-tokens", type=int, default=2048, help="max output tokens per request")
    b.add_argument("--max-tokens-per-chunk", type=int, default=None, metavar="N",
                   help="most tokens a streamed text chunk may carry before a usage report is not believed "
                        "(default 16; raise it for a server that streams tokens in larger groups)")
    b.add_argument("--no-long-context", action="store_true", help="skip the long-context variant")
    b.add_argument("--context-tokens", type=int, default=30_000, help="approximate tokens of pasted context")
    b.add_argument("--temperature", type=float, default=0.0)
    b.add_argument("--timeout", type=float, default=300.0,
                   help="wall-clock deadline of each request, seconds")
    b.add_argument("--idle-timeout", type=float, default=None,
                   help="longest wait for the next bytes of a reply, seconds (default: --timeout)")
    b.add_argument("--warmup", type=int, default=1, help="unmeasured requests first")
    b.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY)")
    b.add_argument("--no-model-check", action="store_true",
                   help="send requests even when /v1/models does not list --served-model")
    b.add_argument("--allow-prefix-cache", action="store_true",
                   help="send repeated prompts unchanged (default: a unique tag first defeats prefix caches)")
    b.add_argument("--save", default=None, metavar="FILE", help="raw samples to .csv or .json (kept up to date)")
    b.add_argument("--model", default=None, help="membound model (name or YAML/config.json) for the comparison "
                   "(default with --hardware: the --served-model id, when it is a preset's name or alias)")
    b.add_argument("--hardware", default=None, help="membound device, or 'local-cpu' to profile this machine")
    b.add_argument("--bandwidth", type=float, default=None, help="local-cpu bandwidth in B/s (default: measured)")
    b.add_argument("--weights", default="bf16", help="weight dtype the server runs")
    b.add_argument("--kv", default=None, help="KV-cache dtype")
    b.add_argument("--runtime", default=None, help="runtime for the prediction (default: device)")
    b.add_argument("--calibrate", default=None, metavar="OUT.yaml", help="fit and write a Runtime YAML")
    b.add_argument("--quiet", action="store_true", help="no per-request progress on stderr")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    b.set_defaults(func=main)


def _progress(bar):
    """A per-request callback: counts the request on the bar, shows the last one, prints failures."""
    def on_sample(s) -> None:
        what = "ok" if s.ok else f"{s.error_kind}: {s.error}"
        ttft = "-" if s.ttft_s is None else f"{s.ttft_s * 1e3:.0f} ms"
        line = f"{s.prompt} conc {s.concurrency} round {s.round}: TTFT {ttft}, {s.output_tokens} tokens, {what}"
        bar.update(1)
        bar.set_postfix_str(line[:60], refresh=False)
        if not s.ok:
            bar.write("  " + line, file=sys.stderr)
    return on_sample


def _compare(args, res, hw, out: dict, text: list) -> None:
    """The measured-vs-predicted table (and the calibration when asked) added to out/text."""
    rows = compare(res, args.model, hw, weight_dtype=args.weights, kv_dtype=args.kv, runtime=args.runtime)
    out["comparison"] = [asdict(r) for r in rows]
    hw_name = getattr(hw, "name", hw)
    if not isinstance(hw, str):
        text.append(f"hardware: {hw.display_name}: {hw.bandwidth_bytes_s / 1e9:.3g} GB/s "
                    f"({hw.memory[0].source}); {hw.compute_source}")
    text.append(comparison_text(rows, load_model(args.model).name, hw_name, args.runtime))
    if args.calibrate:
        cal = fit_runtime(res, args.model, hw, weight_dtype=args.weights, kv_dtype=args.kv, source=args.url)
        cal.save(args.calibrate)
        out["calibration"] = cal.runtime.model_dump(mode="json")
        text += [calibration_text(cal), f"wrote {args.calibrate} (use: bench.load_runtime_file(path) "
                                        "-> estimate(..., runtime=...))"]


def main(args) -> int:
    args.model = _membound_model(args)
    if (args.model is None) != (args.hardware is None):
        raise InvalidInputError("--model/--hardware", args.model or args.hardware, "both, or neither")
    if args.calibrate and args.model is None:
        raise InvalidInputError("--calibrate", args.calibrate, "--model and --hardware as well")
    _check_outputs(args)
    prompts = [p for f in args.prompts for p in load_prompts(f)] if args.prompts else None
    hw = None
    if args.hardware is not None:   # checked before the run, not after it
        load_model(args.model)
        hw = local_cpu_hardware(args.bandwidth) if args.hardware == "local-cpu" else load_hardware(args.hardware).name
    # requests measured: each level's concurrency x prompts (and their long-context twins) x repeats
    n_requests = sum(args.concurrency) * len(prompts or [None]) * (1 if args.no_long_context else 2) * args.repeats
    with bar(n_requests, "bench", unit=" requests", quiet=args.quiet) as progress:
        res = _run(args, prompts, _progress(progress))
    return _report(args, res, hw)


def _check_outputs(args) -> None:
    """Every file the run will write, checked before the first request (a bad path would
    otherwise be found after the run, and its printed results lost)."""
    if args.save is not None:
        check_output_path(args.save, "--save", (".csv", ".json"))
    if args.calibrate:
        check_output_path(args.calibrate, "--calibrate", (".yaml", ".yml"))


def _membound_model(args) -> str | None:
    """--model, or with --hardware the preset the --served-model id names (an HF id such as
    meta-llama/Llama-3.1-8B-Instruct is an alias), resolved before anything is sent."""
    if args.model is not None or args.hardware is None or not args.served_model:
        return args.model
    idx = index("model")
    hit = idx.lookup(args.served_model)
    if hit is None:
        near = ", ".join(idx.suggest(args.served_model)) or "none close"
        raise InvalidInputError("--model", None, f"a membound model: --served-model {args.served_model!r} is not a "
                                f"preset's name or alias (nearest: {near})")
    return hit


def _run(args, prompts, on_sample):
    return run(args.url, args.served_model, prompts, concurrency=args.concurrency, repeats=args.repeats,
               max_tokens=args.max_tokens, long_context=not args.no_long_context,
               context_tokens=args.context_tokens, temperature=args.temperature, timeout_s=args.timeout,
               idle_timeout_s=args.idle_timeout,
               warmup=args.warmup, api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
               check_model=not args.no_model_check, unique=not args.allow_prefix_cache, save=args.save,
               progress=on_sample, **({} if args.max_tokens_per_chunk is None
                                      else {"max_tokens_per_chunk": args.max_tokens_per_chunk}))


def _report(args, res, hw) -> int:
    vet_error = None
    if hw is not None:      # a speed the device's roofline forbids is a protocol fault, before any statistic
        try:
            res = vet(res, args.model, hw, weight_dtype=args.weights, kv_dtype=args.kv)
        except MemboundError as e:
            vet_error = f"the roofline check could not run: {e}"
    out = {"stats": [asdict(s) for s in res.stats()], "prefill": res.prefill_costs(),
           "failures": [asdict(s) for s in res.failures()], "notes": res.notes}
    text = [str(res)] + ([vet_error] if vet_error else [])
    if hw is not None and any(s.ok for s in res.samples):
        try:
            _compare(args, res, hw, out, text)
        except MemboundError as e:   # the measurements above are still printed
            text.append(f"comparison with the prediction failed: {e}")
            out["comparison_error"] = str(e)
    if res.saved_to is not None:
        text.append(f"raw samples in {res.saved_to}")
    print(json.dumps(out, indent=2, default=str) if args.json else "\n\n".join(text))
    return 0 if any(s.ok for s in res.samples) else 1
