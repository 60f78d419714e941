"""Command line: `membound VERB ...` (and `python -m membound VERB ...`).

Verbs: estimate, compare, serve, sweep, plan, models list/show, hardware list/show, validate, app.
Human tables by default, `--json` for machines. Bad input is one line on stderr and exit
status 2 (MemboundError, bad options); a file that cannot be written is exit status 1.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from ..base import defaults
from ..errors import MemboundError, MissingExtraError, ProfileError, require
from ..errors import InvalidInputError
from ..physics.speculative import SpeculativeDecoding
from ..physics.estimate import estimate
from ..physics.parallel import Parallel
from ..catalog.hardware import load_hardware, api_price_text, list_hardware
from ..planning.compare import compare, device_spec
from ..base.display import grid, NO_PRICE, markdown, model_list_rows, hardware_list_rows
from ..serving import serve
from ..planning.sweep import drop_reasons, iter_sweep, sweep
from ..base.safeio import check_output_path, csv_frame
from ..base.progress import bar as progress_bar
from ..planning.planner import SLO, Workload, plan
from ..fidelity import validate, mlperf_validate
from ..fidelity.serve_validate import served_report
from ..catalog.model import list_models, load_model
from .. import __version__
from .app import DEFAULT_PORT
from .bench.cli import add_parser
from ..fidelity.budget import constant_budget, format_budget
from ..fidelity.vendors import notes_for as fast_chip_notes
import math


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default after its help, unless the help says it in words already
    ("(default: measured)"): never twice."""

    def _get_help_string(self, action):
        text = action.help or ""
        return text if "(default:" in text else super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, with errors as one line (`membound: error: ...`) and exit status 2, and every
    option's default in `--help`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Defaults)
        super().__init__(*args, **kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def _dump(obj) -> str:
    return json.dumps(obj, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))


def _workload(p):
    p.add_argument("--batch", type=int, default=defaults.BATCH, help="sequences decoded together")
    p.add_argument("--prompt", type=int, default=defaults.PROMPT_TOKENS, help="prompt tokens per sequence")
    p.add_argument("--output", type=int, default=defaults.OUTPUT_TOKENS, help="output tokens per sequence")
    p.add_argument("--weights", default=defaults.WEIGHT_DTYPE, help="weight dtype")
    p.add_argument("--kv", default=None, help="KV-cache dtype")
    p.add_argument("--activations", default=None, help="activation (compute) dtype")
    p.add_argument("--runtime", default=None,
                   help="ideal, device (default), llama.cpp, vllm, tensorrt-llm, sglang, or a runtime YAML file")
    p.add_argument("--allow-beyond-context", action="store_true",
                   help="estimate even when prompt + output exceed the model's context window")
    p.add_argument("--json", action="store_true", help="machine-readable output")


_DENSE_HELP = ("format of the tensors that are not routed experts (attention, dense FFNs, LM head, "
               "embeddings) when the checkpoint keeps them apart, e.g. --weights mxfp4 --dense-weights bf16 "
               "for gpt-oss (default: as --weights)")




# ---- estimate ------------------------------------------------------------------------------
def _speculative(args):
    """The SpeculativeDecoding the flags ask for (--draft MODEL or --mtp, --gamma, --acceptance or
    --accepted-tokens), or None where none of them is given."""
    given = (args.draft, args.mtp, args.gamma, args.acceptance, args.accepted_tokens)
    if all(v in (None, False) for v in given):
        return None
    if args.draft is None and not args.mtp:
        raise InvalidInputError("--draft", None, "a draft model preset (--draft llama-3.2-1b) or --mtp (a "
                                "self-drafting head) with --gamma/--acceptance")
    if args.acceptance is None and args.accepted_tokens is None:
        raise InvalidInputError("--acceptance", None, "a per-token acceptance rate in (0, 1) (or --accepted-tokens "
                                "TAU, tokens per round) for speculative decoding")
    return SpeculativeDecoding(draft=args.draft, gamma=4 if args.gamma is None else args.gamma,
                               acceptance_rate=args.acceptance, mean_accepted_tokens=args.accepted_tokens)


_TIERED = " (on a tiered chip such as the SN40L: in the tiers a decode streams at speed)"


def _estimate(args) -> int:
    par = Parallel(tp=args.tp, pp=args.pp, ep=args.ep) if (args.tp, args.pp, args.ep) != (1, 1, 1) else None
    price = _price_map(args.price, [args.hardware]).get(load_hardware(args.hardware).name)
    call = dict(model=args.model, hardware=args.hardware, batch=args.batch, prompt_tokens=args.prompt,
                output_tokens=args.output, weight_dtype=args.weights, kv_dtype=args.kv,
                activation_dtype=args.activations, n_chips=args.chips, parallel=par, runtime=args.runtime,
                allow_beyond_context=args.allow_beyond_context, dense_weight_dtype=args.dense_weights,
                speculative=_speculative(args), price_usd_per_hour=price)
    r = estimate(**call)
    if args.json:
        print(_dump(r.to_dict()))
        return 0
    print(r)
    # a fast chip's figure: what decides it (spill, the vendor's software, published figures)
    for line in fast_chip_notes(r, call):
        print(f"{'note':<23}{line}")
    return 0


# ---- compare -------------------------------------------------------------------------------
def _compare(args) -> int:
    res = compare(args.model, args.devices, batch=args.batch, prompt_tokens=args.prompt, output_tokens=args.output,
                  weight_dtype=args.weights, kv_dtype=args.kv, activation_dtype=args.activations,
                  runtime=args.runtime, n_chips=None if args.chips == "auto" else args.chips,
                  allow_beyond_context=args.allow_beyond_context,
                  price_usd_per_hour=_price_map(args.price, args.devices) or None)
    print(_dump(res.to_dict()) if args.json else res)
    return 0


# ---- serve ---------------------------------------------------------------------------------
def _serve(args) -> int:
    par = Parallel(tp=args.tp or 1, ep=args.ep or 1) if args.tp or args.ep else None
    price = _price_map(args.price, [args.hardware]).get(load_hardware(args.hardware).name)
    chips = None if args.chips == "auto" else args.chips
    rows = [serve(args.model, args.hardware, concurrency=c, prompt_tokens=args.prompt, output_tokens=args.output,
                  weight_dtype=args.weights, kv_dtype=args.kv, activation_dtype=args.activations, n_chips=chips,
                  parallel=par, runtime=args.runtime, engine=args.engine, seed=args.seed,
                  n_requests=args.requests, dense_weight_dtype=args.dense_weights,
                  allow_beyond_context=args.allow_beyond_context, price_usd_per_hour=price)
            for c in args.concurrency]
    if args.json:
        print(_dump([r.to_dict() for r in rows]))
        return 0
    r0 = rows[0]
    print(f"{r0.model} on {r0.n_chips} x {r0.hardware} ({r0.parallel}), {r0.runtime} ({r0.engine}); "
          f"prompt {r0.prompt_tokens:g}, output {r0.output_tokens:g} tokens; weights {r0.weight_dtype}, KV {r0.kv_dtype}")
    print(grid(["clients", "TTFT p50", "TPOT p50", "tok/s/user", "out tok/s/chip", "running", "KV", "bound",
                "$/M out"],
               [[str(c), f"{r.ttft.median * 1e3:,.0f} ms", f"{r.tpot.median * 1e3:.1f} ms", f"{r.tok_s_per_user:,.1f}",
                 f"{r.output_tok_s_per_chip:,.0f}", f"{r.mean_running:.1f}", f"{100 * r.kv_occupancy:.0f}%", r.bound,
                 "-" if r.cost_per_million_output_tokens_usd is None else f"{r.cost_per_million_output_tokens_usd:,.3g}"]
                for c, r in zip(args.concurrency, rows)]))
    print(f"calibration: {r0.calibration}")
    _cost_notes([r0.hardware], {r0.hardware} if r0.cost_per_million_output_tokens_usd is None else set(), r0.model)
    return 0


def _cost_notes(devices, unpriced, model: str) -> None:
    """After a table: which devices have no price (never a silent blank), and the published per-token
    API price of `model` on chips sold as an API, beside the physics' cost."""
    for d in devices:
        if d in unpriced:
            print(f"{d}: {NO_PRICE}")
        api = api_price_text(d, model)
        if api:
            print(f"{d}: API price: {api}")


# ---- sweep ---------------------------------------------------------------------------------
def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


_PRICE_HELP = ("USD per chip-hour: one value for every device, or DEVICE=USD (repeatable, or comma-separated); "
               "devices without a price in their profile show 'no price (pass --price)'")


def _price(text: str) -> list[tuple[str | None, float]]:
    """'2.5' -> [(None, 2.5)]; 'h100-sxm=2.5,h200=3.5' -> [('h100-sxm', 2.5), ('h200', 3.5)]."""
    out: list[tuple[str | None, float]] = []
    for part in text.split(","):
        name, eq, usd = part.strip().rpartition("=")
        try:
            value = float(usd)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (eq and not name):
            raise argparse.ArgumentTypeError(f"expected USD per chip-hour (a number >= 0) or DEVICE=USD, e.g. 2.5 or "
                                             f"h100-sxm=2.5, got {text!r}")
        out.append((name or None, value))
    return out


def _price_map(pairs, devices) -> dict[str, float]:
    """--price as {device name: USD per chip-hour} for `devices` (names, 'NAME:CHIPS' or Hardware):
    a bare value prices every device, DEVICE=USD one (any spelling of its name); a device not asked
    about is refused."""
    if not pairs:
        return {}
    asked = [load_hardware(device_spec(d)[0]).name for d in devices]
    bare = [v for k, v in pairs if k is None]
    if len(bare) > 1:
        raise InvalidInputError("--price", bare, "one bare price (for every device), or DEVICE=USD for each")
    out = dict.fromkeys(asked, bare[0]) if bare else {}
    for k, v in pairs:
        if k is not None:
            name = load_hardware(k).name
            if name not in asked:
                raise InvalidInputError("--price", f"{k}={v:g}", f"a price for a device asked here: {', '.join(asked)}")
            out[name] = v
    return out


def _count_or_auto(text: str):
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a chip count or auto, got {text!r}") from None


def _price_option(p) -> None:
    p.add_argument("--price", type=_price, action="extend", metavar="USD|DEVICE=USD", help=_PRICE_HELP)


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _chips_arg(text: str):
    return "auto" if text == "auto" else _ints(text)


_BLANKED = ("decode_tok_s_per_user", "decode_tok_s_total", "ttft_s", "prefill_s", "e2e_s", "tpot_s",
            "cost_per_million_tokens_usd", "joules_per_token")


def _sweep_tables(args):
    """The sweep's tables in order: every grid point with a `reason` ('' where it fits)."""
    kw = dict(batch=args.batch, prompt_tokens=args.prompt, output_tokens=args.output, weight_dtype=args.weights,
              kv_dtype=args.kv, runtime=args.runtime, include_unfit=True, on_invalid="skip",
              chunk_size=args.chunk_size, allow_beyond_context=args.allow_beyond_context,
              price_usd_per_hour=_price_map(args.price, args.hardware) or None)
    if args.chips == "auto":
        for m in args.models:
            for hw in args.hardware:
                yield sweep(m, hw, n_chips="auto", **kw)
        return
    stats: dict = {}
    for df in iter_sweep(args.models, args.hardware, n_chips=args.chips, as_frame=True, _stats=stats, **kw):
        df["reason"] = drop_reasons(df)
        df.attrs["skipped"] = stats.get("skipped", [])
        yield df


def _sweep(args) -> int:

    if not args.out.endswith((".csv", ".parquet")):
        raise InvalidInputError("--out", args.out, "a file name ending in .csv or .parquet")
    check_output_path(args.out, "--out", (".csv", ".parquet"))     # before the first point, not after the grid
    if args.out.endswith(".parquet"):
        require("pyarrow", "parquet", "writing .parquet")
    grid_points = math.prod(len(v) for v in (args.models, args.hardware, args.batch, args.prompt, args.output,
                                             args.weights, [None] if args.chips == "auto" else args.chips))
    rows, dropped, frames, skipped = 0, 0, [], {}
    with progress_bar(grid_points, "sweep", unit=" points", force=args.progress, quiet=args.quiet) as bar:
        for i, df in enumerate(_sweep_tables(args)):
            unfit = df["reason"] != ""
            if not args.include_unfit:
                df.loc[unfit, [c for c in _BLANKED if c in df]] = math.nan
            rows, dropped = rows + len(df), dropped + int(unfit.sum())
            skipped.update(dict(df.attrs.get("skipped", [])))
            if args.out.endswith(".csv"):
                csv_frame(df).to_csv(args.out, mode="w" if i == 0 else "a", header=i == 0, index=False)   # formula-safe
            else:
                frames.append(df)
            bar.update(len(df))
    if args.out.endswith(".parquet"):
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        (pd.concat(frames) if frames else pd.DataFrame()).to_parquet(args.out, index=False)
    elif rows == 0:
        open(args.out, "w").close()
    summary = {"grid_points": grid_points, "rows": rows, "dropped": dropped, "out": args.out,
               "skipped": [{"what": k, "reason": v} for k, v in skipped.items()]}
    if args.json:
        print(_dump(summary))
    else:
        print(f"wrote {rows:,} rows ({grid_points:,} grid points) to {args.out}"
              + (f"; {dropped:,} do not fit (their figures are blank, see the reason column)" if dropped else ""))
        for what, why in skipped.items():
            print(f"skipped {what}: {why}")
        _sweep_price_notes(args)
    return 0


def _sweep_price_notes(args) -> None:
    """The devices whose cost column is blank for want of a price, by name."""
    given = _price_map(args.price, args.hardware)
    for d in args.hardware:
        hw = load_hardware(d)
        if hw.name not in given and hw.price_usd_per_hour is None:
            print(f"{hw.name}: {NO_PRICE}; its cost column is blank")


# ---- plan, validate ------------------------------------------------------------------------
def _plan(args) -> int:
    wl = Workload(concurrent_users=args.users, arrival_rate_rps=args.rate, prompt_tokens=args.prompt,
                  output_tokens=args.output)
    slo = SLO(ttft_p90_s=args.ttft, min_tok_s_per_user=args.tok_s, e2e_p90_s=args.e2e)
    res = plan(args.model, wl, slo, hardware=args.hardware, weight_dtypes=tuple(args.weights),
               prices=_price_map(args.price, args.hardware) or None, runtime=args.runtime,
               batching="static" if args.static else "served")
    if args.json:
        print(_dump({"explanation": res.explanation, "candidates": res.candidates, "notes": res.notes,
                     "ranked": json.loads(res.ranked.head(args.top).to_json(orient="records")),
                     "frontier": json.loads(res.frontier.to_json(orient="records"))}))
    else:
        print(res)
    return 0


def _validate(args) -> int:
    if args.plot:       # before the 15 s of fitting, not after
        require("matplotlib", "plot", "validate --plot")
    if args.budget:          # the constant budget only (membound.fidelity.budget)
        print(format_budget(constant_budget(args.reference)))
        return 0
    if args.mlperf:          # MLPerf Inference results only (membound.mlperf_validate)
        argv = [a for flag, v in (("--csv", args.csv), ("--reference", args.reference)) if v for a in (flag, v)]
        return int(mlperf_validate.main(argv) or 0)
    if not args.json:
        argv = [a for flag, v in (("--csv", args.csv), ("--plot", args.plot), ("--reference", args.reference),
                                  ("--group", args.group)) if v for a in (flag, v)]
        return int(validate.main(argv) or 0)
    rep = validate.validation_report(args.reference, args.group)
    try:
        served: dict = served_report(args.reference)
    except MemboundError as e:          # a broken served file: the measurements report stands
        served = {"error": str(e)}
    print(_dump({"categories": rep["categories"], "skipped": rep["skipped"], "served": served}))
    return 0


# ---- app -------------------------------------------------------------------------------------
def _app(args) -> int:
    try:
        from .app.server import run   # starlette: the app extra (server imports it)
    except ImportError as err:
        print(f'membound: error: the web app needs the app extra: pip install "membound[app]" ({err})',
              file=sys.stderr)
        return 1
    run(host=args.host, port=args.port, allow_remote=args.allow_remote, trusted_hosts=args.trusted_host)
    return 0


# ---- models, hardware ----------------------------------------------------------------------
def _models(args) -> int:
    if args.action == "show":
        m = load_model(args.name)
        counts = {"total_params": m.total_params, "active_params": m.active_params,
                  "kv_bytes_per_token_bf16": m.kv_bytes_per_token("bf16")}
        print(_dump({**m.model_dump(), **counts}) if args.json else m)
        return 0
    models = [load_model(n) for n in list_models()]
    header, rows = model_list_rows(models)
    if args.json:
        print(_dump([dict(zip(header, r)) for r in rows]))
    else:
        print(markdown(header, rows) if args.markdown else grid(header, rows))
    return 0


def _hardware(args) -> int:
    if args.action == "show":
        h = load_hardware(args.name)
        print(_dump(h.model_dump()) if args.json else h)
        return 0
    devices = [load_hardware(n) for n in list_hardware()]
    header, rows = hardware_list_rows(devices)
    if args.json:
        print(_dump([h.model_dump() for h in devices]))
    else:
        print(markdown(header, rows) if args.markdown else grid(header, rows))
    return 0


def _catalogue(sub, verb: str, what: str, func):
    p = sub.add_parser(verb, help=f"list the bundled {what}s or show one")
    acts = p.add_subparsers(dest="action", required=True)
    ls = acts.add_parser("list", help=f"one line per {what}")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--markdown", action="store_true", help="a Markdown table (used for docs/catalogue.md)")
    show = acts.add_parser("show", help=f"one {what} in full")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    p.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="membound", description="Predict LLM inference speed on given hardware.")
    p.add_argument("--version", action="version", version=f"membound {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _add_estimate(sub)
    _add_compare(sub)
    _add_sweep(sub)
    _add_plan(sub)
    _add_serve(sub)
    _catalogue(sub, "models", "model", _models)
    _catalogue(sub, "hardware", "device", _hardware)
    _add_validate(sub)
    _add_app(sub)
    _add_bench_parser(sub)
    return p


def _add_estimate(sub) -> None:
    e = sub.add_parser("estimate", help="one prediction for a model on a device")
    e.add_argument("model")
    e.add_argument("hardware")
    _workload(e)
    e.add_argument("--chips", type=_count_or_auto, default="auto",
                   help="number of chips, or auto: the fewest chips that hold the model" + _TIERED)
    _price_option(e)
    e.add_argument("--tp", type=int, default=1, help="tensor-parallel ways")
    e.add_argument("--pp", type=int, default=1, help="pipeline stages")
    e.add_argument("--ep", type=int, default=1, help="expert-parallel ways")
    e.add_argument("--dense-weights", default=defaults.DENSE_WEIGHT_DTYPE, metavar="DTYPE",
                   help=_DENSE_HELP)
    sp = e.add_argument_group("speculative decoding", "a drafter proposes --gamma tokens, the target verifies "
                              "them in one pass; the drafter lives on the target's first pipeline stage")
    who = sp.add_mutually_exclusive_group()
    who.add_argument("--draft", metavar="MODEL", default=None, help="a draft model preset, e.g. llama-3.2-1b")
    who.add_argument("--mtp", action="store_true",
                     help="a self-drafting head (MTP/EAGLE): one decoder layer of the target, re-reading its LM head")
    sp.add_argument("--gamma", type=int, default=None, help="tokens drafted per round (default 4)")
    acc = sp.add_mutually_exclusive_group()
    acc.add_argument("--acceptance", type=float, default=None, metavar="ALPHA",
                     help="per-token probability that a drafted token is accepted")
    acc.add_argument("--accepted-tokens", type=float, default=None, metavar="TAU",
                     help="tokens per round (bonus token included), as tree methods report it")
    e.set_defaults(func=_estimate)


def _add_compare(sub) -> None:
    c = sub.add_parser("compare", help="one model on several devices, side by side")
    c.add_argument("model")
    c.add_argument("devices", nargs="+", metavar="DEVICE[:CHIPS]",
                   help="device names; ':N' fixes the chip count (default: the fewest chips that hold it"
                        + _TIERED + ")")
    _workload(c)
    c.add_argument("--chips", type=_count_or_auto, default="auto",
                   help="chips for every device without ':N', or auto: the fewest chips that hold the model" + _TIERED)
    _price_option(c)
    c.set_defaults(func=_compare)


def _add_sweep(sub) -> None:
    s = sub.add_parser("sweep", help="a grid of configurations to CSV or Parquet")
    s.add_argument("--models", type=_names, required=True, help="comma-separated model names")
    s.add_argument("--hardware", type=_names, required=True, help="comma-separated device names")
    s.add_argument("--batch", type=_ints, default=[defaults.BATCH], help="comma-separated batch sizes")
    s.add_argument("--prompt", type=_ints, default=[defaults.PROMPT_TOKENS], help="comma-separated prompt lengths")
    s.add_argument("--output", type=_ints, default=[defaults.OUTPUT_TOKENS], help="comma-separated output lengths")
    s.add_argument("--weights", type=_names, default=[defaults.WEIGHT_DTYPE], help="comma-separated weight dtypes")
    s.add_argument("--kv", default=None, help="KV-cache dtype (default: the weights' or bf16)")
    s.add_argument("--chips", type=_chips_arg, default="auto",
                   help="comma-separated chip counts, or auto: the fewest chips that hold each point")
    s.add_argument("--runtime", default=None,
                   help="ideal, device (default), llama.cpp, vllm, tensorrt-llm, sglang, or a runtime YAML file")
    s.add_argument("--include-unfit", action="store_true",
                   help="keep the figures of points that do not fit in memory (their reason says so)")
    s.add_argument("--allow-beyond-context", action="store_true",
                   help="sweep prompt + output past a model's context window")
    _price_option(s)
    s.add_argument("--chunk-size", type=int, default=1 << 16, help="rows evaluated and written at a time")
    s.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    s.add_argument("--quiet", action="store_true", help="never show progress")
    s.add_argument("-o", "--out", required=True, help="output file: .csv or .parquet (needs pyarrow)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_sweep)


def _add_plan(sub) -> None:
    pl = sub.add_parser("plan", help="the cheapest configurations that meet latency targets")
    pl.add_argument("model")
    pl.add_argument("hardware", nargs="+", help="candidate devices")
    pl.add_argument("--users", type=int, default=None, help="concurrent users (or --rate)")
    pl.add_argument("--rate", type=float, default=None, help="arrival rate, requests per second")
    pl.add_argument("--prompt", type=int, default=defaults.PROMPT_TOKENS, help="prompt tokens per request (mean)")
    pl.add_argument("--output", type=int, default=defaults.OUTPUT_TOKENS, help="output tokens per request (mean)")
    pl.add_argument("--ttft", type=float, default=None, help="TTFT p90 target, seconds")
    pl.add_argument("--tok-s", type=float, default=None, help="minimum decode tok/s per user")
    pl.add_argument("--e2e", type=float, default=None, help="end-to-end p90 target, seconds")
    pl.add_argument("--weights", type=_names, default=["bf16", "fp8"], help="comma-separated weight dtypes")
    _price_option(pl)
    pl.add_argument("--top", type=int, default=10, help="rows of the ranking in --json")
    pl.add_argument("--static", action="store_true",
                    help="the static-batch plan (batches that arrive, prefill and decode together) instead of the "
                         "default served one (continuous batching, membound serve's physics)")
    pl.add_argument("--served", action="store_true", help="the default (kept for old command lines)")
    pl.add_argument("--runtime", default=None, help="the engine whose constants the step pays (default: the device's, "
                                                    "as estimate and serve)")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=_plan)


def _add_serve(sub) -> None:
    sv = sub.add_parser("serve", help="a served workload: clients in a closed loop against one engine")
    sv.add_argument("model")
    sv.add_argument("hardware")
    sv.add_argument("--concurrency", type=_ints, default=[1, 4, 16, 64], help="comma-separated client counts")
    sv.add_argument("--prompt", type=int, default=defaults.PROMPT_TOKENS, help="prompt tokens per request")
    sv.add_argument("--output", type=int, default=defaults.OUTPUT_TOKENS, help="output tokens per request")
    sv.add_argument("--weights", default=defaults.WEIGHT_DTYPE, help="weight dtype")
    sv.add_argument("--kv", default=None, help="KV-cache dtype")
    sv.add_argument("--activations", default=None, help="activation (compute) dtype")
    sv.add_argument("--dense-weights", default=defaults.DENSE_WEIGHT_DTYPE, metavar="DTYPE",
                    help=_DENSE_HELP)
    sv.add_argument("--runtime", default=None, help="vllm, sglang, tensorrt-llm (their served defaults and fitted costs); "
                    "default: the device's default runtime, as estimate's")
    sv.add_argument("--chips", type=_count_or_auto, default="auto",
                    help="chips in the engine instance, or auto: the fewest that hold the weights and one request")
    _price_option(sv)
    sv.add_argument("--tp", type=int, default=None, help="tensor-parallel ways")
    sv.add_argument("--ep", type=int, default=None, help="expert-parallel ways (attention data-parallel)")
    sv.add_argument("--engine", choices=["solver", "simulate"], default="solver")
    sv.add_argument("--seed", type=int, default=0, help="simulator seed")
    sv.add_argument("--requests", type=int, default=None,
                    help="requests the simulator runs (default: 10 per client, at least 200)")
    sv.add_argument("--allow-beyond-context", action="store_true",
                    help="serve requests longer than the model's context window")
    sv.add_argument("--json", action="store_true")
    sv.set_defaults(func=_serve)


def _add_validate(sub) -> None:
    v = sub.add_parser("validate", help="predict every reference measurement and report the error")
    v.add_argument("--plot", default=None, help="write predicted vs measured to this PNG")
    v.add_argument("--csv", default=None, help="write every row's prediction and error to this CSV")
    v.add_argument("--reference", default=None, help="a measurements CSV (or a folder holding measurements.csv) "
                   "of the reference schema; default: the copy shipped with membound")
    v.add_argument("--group", choices=["chip", "source"], default="chip",
                   help="held-out group: leave each whole chip (default) or each whole source out of the fits")
    v.add_argument("--json", action="store_true")
    v.add_argument("--budget", action="store_true", help="print every constant of every runtime instead: fitted or "
                   "assumed, unit, prior, rows, chips, bound hit (membound.fidelity.budget)")
    v.add_argument("--mlperf", action="store_true",
                   help="predict the MLPerf Inference LLM results instead (Offline, Server, Interactive); --reference: "
                        "an MLPerf CSV or a folder holding mlperf/mlperf_llm.csv")
    v.set_defaults(func=_validate)


def _add_app(sub) -> None:
    a = sub.add_parser("app", help="a local web page: compare, serve, plan, explain (needs membound[app])")
    a.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help="TCP port, 1 to 65535; not 8000 (vLLM's), 30000 (SGLang's) or 8080 (llama.cpp's)")
    a.add_argument("--host", default="127.0.0.1", help="127.0.0.1 (default) serves this machine only; "
                   "any other address needs --allow-remote")
    a.add_argument("--allow-remote", action="store_true",
                   help="allow a --host beyond loopback (the page has no login: anyone who reaches the port can use it)")
    a.add_argument("--trusted-host", action="append", default=[], metavar="NAME",
                   help="a Host name the app answers to besides loopback and --host (repeatable)")
    a.set_defaults(func=_app)


def _port(text: str) -> int:
    """argparse type of --port: an integer from 1 to 65535."""
    if not re.fullmatch(r"[0-9]{1,5}", text.strip()) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (an integer from 1 to 65535)")
    return int(text)


def _add_bench_parser(sub) -> None:
    """`membound bench URL ...` (membound.present.bench): measure an OpenAI-compatible endpoint."""
    add_parser(sub)


# Python parameter names as the CLI spells them, for error messages raised by the library
_FLAGS = {"allow_beyond_context=True": "--allow-beyond-context", "prompt_tokens": "--prompt",
          "output_tokens": "--output", "weight_dtypes": "--weights", "weight_dtype": "--weights",
          "kv_dtypes": "--kv", "kv_dtype": "--kv", "activation_dtype": "--activations", "n_chips": "--chips",
          "concurrent_users": "--users", "arrival_rate_rps": "--rate", "ttft_p90_s": "--ttft",
          "min_tok_s_per_user": "--tok-s", "e2e_p90_s": "--e2e", "prices": "--price",
          "price_usd_per_hour": "--price", "chunk_size": "--chunk-size", "include_unfit": "--include-unfit",
          "n_requests": "--requests"}
_FLAG_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(_FLAGS, key=len, reverse=True)) + r")(?!\w)")


def in_flags(message: str) -> str:
    """A library message worded in CLI flags: 'concurrent_users=None' -> '--users=None'."""
    return _FLAG_RE.sub(lambda m: _FLAGS[m.group(0)], message)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MissingExtraError as err:   # an extra to install, not bad input: exit status 1 as any ImportError
        print(f"membound: error: {err}", file=sys.stderr)
        return 1
    except MemboundError as err:      # a data file's fields keep their names (a CSV's n_chips column)
        shown = str(err) if isinstance(err, ProfileError) else in_flags(str(err))
        print(f"membound: error: {shown}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"membound: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:            # `membound models list | head`
        sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as err:
        print(f"membound: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
