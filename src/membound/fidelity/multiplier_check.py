"""The software multipliers against published measurements (measurements.csv, shipped in the package,
sources in sources.md): speculative-decoding speed-ups given acceptance rates or mean accepted
lengths, quantized-kernel speed-ups, llama.cpp quantized-vs-f16 speed ratios.

Every figure compared is a *ratio* measured on one setup (speed with the lever / without), so
the device's absolute efficiency cancels and what is tested is the multiplier's physics.
Settings that the papers do not state (tree depth, verified tokens, a head's cost) are fixed
once per method family below, never per row. Where one row anchors an unknown (a tau the paper
does not report), it is named and excluded from the error.

    python -m membound.fidelity.multiplier_check            # prints every table and a summary

The main validation report (membound.fidelity.validate) is separate and owned elsewhere.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass

from .reference import reference_dir
from ..physics.estimate import estimate
from ..catalog.model import Model
from ..planning.levers import speculative_speedup
from ..physics.speculative import ANGELSLIM_ROUTE_CORRELATION, SpeculativeDecoding, head_param_count, predicted_speedup
from ..catalog.model import load_model
from .fitter import Param, fit
import argparse


@dataclass(frozen=True)
class Row:
    section: str
    ids: str
    label: str
    measured: float
    predicted: float
    note: str = ""
    anchor: bool = False           # used to set an unknown; not part of the error

    @property
    def error(self) -> float:
        """Signed relative error of the prediction, (predicted - measured) / measured."""
        return self.predicted / self.measured - 1.0


def load_rows(path=None) -> dict:
    """measurements.csv as {id: row dict}."""
    with open(reference_dir(path) / "measurements.csv", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def _num(note: str, key: str):
    m = re.search(rf"{key}=([0-9.]+)", note)
    return float(m.group(1).rstrip(".")) if m else None


# ---- speculative decoding: Leviathan et al. (T5-XXL on TPU-v4) --------------------------------
# The c of the last rows is missing from the transcription; we take the same draft's c from the
# other rows (T5-small 0.02, T5-base 0.04, T5-large 0.11).
_DRAFT_C = {"T5-small": 0.02, "T5-base": 0.04, "T5-large": 0.11}


def leviathan(rows) -> list:
    out = []
    for i in range(1, 13):
        r = rows[f"spec-{i:03d}"]
        note = r["notes"]
        g, a = int(_num(note, "gamma")), _num(note, "alpha")
        draft = re.search(r"draft M_q=(T5-\w+)", note).group(1)  # type: ignore[union-attr]  # every spec row names it
        c = _num(note, "cost ratio c")
        paper = _num(note, r"speedup")
        c_note = "" if c is not None else f"c of {draft} from other rows"
        c = c if c is not None else _DRAFT_C[draft]
        pred = predicted_speedup(a, g, c)
        label = f"{draft} g={g} a={a:g} c={c:g}" + (f" paper={paper:g}" if paper else "")
        out.append(Row("spec: Leviathan T5-XXL, TPU-v4 (formula)", r["id"], label, float(r["value"]), pred, c_note))
    return out


# ---- speculative decoding from mean accepted length (tau), batch 1 ---------------------------
# Method settings (assumed, one per family): gamma = draft depth / heads, verify = tree tokens,
# head = what one drafting step reads, costed by core.evaluate in its own bytes (bf16) and FLOPs.
def _load(model):
    return load_model(model)


def _eagle_head(model):      # EAGLE-1/2: one decoder layer (+ a 2h -> h fusion), the target's LM head
    h = _load(model).hidden_size
    return dict(head_params=head_param_count(model, lm_head=False) + 2 * h * h)


def _eagle3_head(model):     # EAGLE-3: one layer, a 3h -> h fusion of three feature levels, and its
    h = _load(model).hidden_size   # own LM head over a 32,000-token draft vocabulary (arXiv 2503.01840)
    return dict(head_params=head_param_count(model, lm_head=False) + 3 * h * h, head_vocab=32000)


def _medusa_head(model):     # a Medusa/Hydra head: a hidden x hidden block and its own full LM head
    m = _load(model)
    return dict(head_params=m.hidden_size ** 2, head_vocab=m.vocab_size)


METHODS = {   # name -> (gamma, verify tokens, head function | draft-cost constant | draft model)
    "EAGLE": (5, 26, _eagle_head),        # EAGLE-1 tree: depth 5, 26 nodes (assumed)
    "EAGLE-2": (6, 60, _eagle_head),      # dynamic tree: depth 6, 60 tokens verified (assumed)
    "EAGLE-3": (8, 60, _eagle3_head),     # depth 8 (tau reaches 7.5), 60 tokens (assumed)
    "Medusa": (5, 64, _medusa_head),      # 5 heads, 64-token tree (assumed)
    "Hydra": (5, 64, _medusa_head),       # Medusa-like sequential heads (assumed)
    "SpS": (4, None, "vicuna-68m"),       # a 68M draft model, gamma 4 (assumed)
    "PLD": (10, None, 0.0),               # prompt lookup: n-gram copy, no model cost
    "REST": (5, 64, 0.0),                 # retrieval: datastore lookup, tree verify
    "Lookahead": (5, 64, 0.0),            # Jacobi n-gram pool, verify branch
}

# double7/vicuna-68m (the Spec-Bench SpS draft): LLaMA architecture, 2 layers, hidden 768,
# 12 heads, FFN 3072, vocab 32000 (its config.json as Spec-Bench documents it; not fetched here).
VICUNA_68M = Model(name="vicuna-68m", n_layers=2, hidden_size=768, n_heads=12, n_kv_heads=12, head_dim=64,
                   ffn_size=3072, vocab_size=32000, source="double7/vicuna-68m (Spec-Bench SpS draft)")

_HW = {"NVIDIA A100 80GB": "a100-80gb", "NVIDIA RTX 3090 24GB": "rtx-3090",
       "GPU (not stated in transcription)": "a100-80gb", "GPU (not stated in file)": "h100-sxm"}
_MODEL = {"Vicuna-7B-v1.3": "vicuna-7b", "Vicuna-13B": "vicuna-13b", "LLaMA-Instruct-3.1-8B": "llama-3.1-8b",
          "Qwen3-1.7B": "qwen3-1.7b", "Qwen3-4B": "qwen3-4b", "Qwen3-8B": "qwen3-8b", "Qwen3-14B": "qwen3-14b",
          "Qwen3-32B": "qwen3-32b", "Qwen3-30B-A3B (MoE)": "qwen3-30b-a3b"}
_WORKLOAD = dict(prompt_tokens=256, output_tokens=256)   # chat-sized; batch-1 ratios barely depend on it


def _method(framework: str) -> str:
    first = framework.split(" (")[0].split(" + ")[-1].strip()
    for name in sorted(METHODS, key=len, reverse=True):
        if first.startswith(name):
            return name
    if "Eagle3" in framework:
        return "EAGLE-3"
    raise KeyError(framework)


def _task(r) -> str:
    m = re.search(r"task=([\w/-]+)", r["notes"])
    return m.group(1) if m else ""


def _spec(method: str, model: str, tau: float, gamma: int | None = None, verify: int | None = None):
    g, v, cost = METHODS[method]
    g = gamma or max(g, math.ceil(tau - 1))
    v = verify if verify is not None else v
    v = None if v is None else max(v, g + 1)
    if cost == "vicuna-68m":
        return SpeculativeDecoding(draft=VICUNA_68M, gamma=g, mean_accepted_tokens=min(tau, g + 1), verify_tokens=v)
    kw = cost(model) if callable(cost) else dict(draft_cost=cost)
    if _load(model).is_moe:   # the named, fitted option (speculative.ANGELSLIM_ROUTE_CORRELATION)
        kw["route_correlation"] = ANGELSLIM_ROUTE_CORRELATION
    return SpeculativeDecoding(gamma=g, mean_accepted_tokens=min(tau, g + 1), verify_tokens=v, **kw)


def _ratio(model, hw, spec, batch=1, **kw) -> float:
    kw = {**_WORKLOAD, **kw}
    base = estimate(model, hw, batch=batch, check_memory=False, **kw).decode_tok_s_per_user
    return estimate(model, hw, batch=batch, speculative=spec, check_memory=False, **kw).decode_tok_s_per_user / base


def tau_rows(rows) -> list:
    """Rows that give a speed-up (or a pair of speeds) and a mean accepted length for one method."""
    out = []
    by_key = {}
    for r in rows.values():
        if r["id"].startswith("spec-") and r["metric"] == "acceptance_length":
            by_key[(r["hardware"], r["model"], r["framework"], _task(r))] = r
    for r in rows.values():
        if not r["id"].startswith("spec-"):
            continue
        key = (r["hardware"], r["model"], r["framework"], _task(r))
        if key not in by_key or r["model"] not in _MODEL or r["hardware"] not in _HW:
            continue
        if r["metric"] == "speedup_vs_baseline":
            measured, ids = float(r["value"]), f"{r['id']}/{by_key[key]['id']}"
        elif r["metric"] == "decode_tok_s_per_user":
            vanilla = next(v for v in rows.values() if v["model"] == r["model"] and v["hardware"] == r["hardware"]
                           and v["metric"] == "decode_tok_s_per_user" and v["framework"].startswith("vanilla"))
            measured, ids = float(r["value"]) / float(vanilla["value"]), f"{r['id']}/{vanilla['id']}"
        else:
            continue
        tau = float(by_key[key]["value"])
        method = _method(r["framework"])
        model, hw = _MODEL[r["model"]], _HW[r["hardware"]]
        spec = _spec(method, model, tau)
        label = f"{method} {model} {hw} {_task(r)} tau={tau:g}"
        source = ("Spec-Bench" if "Spec-Bench" in r["source_title"] else
                  "AngelSlim" if "AngelSlim" in r["source_title"] else "EAGLE-3 paper")
        out.append(Row(f"spec: tau -> speed-up, batch 1 ({source})", ids, label, measured,
                       _ratio(model, hw, spec), f"gamma={spec.gamma} verify={spec.positions} {_cost_note(spec)}",
                       anchor=ids == MOE_ANCHOR))
    return sorted(out, key=lambda x: (x.section, x.ids))


# The MoE row that sets speculative.ANGELSLIM_ROUTE_CORRELATION (the only MoE speculative row): an anchor.
MOE_ANCHOR = "spec-141/spec-140"


def _cost_note(spec) -> str:
    if spec.draft is not None:
        return f"draft={getattr(spec.draft, 'name', spec.draft)}"
    if spec.draft_cost is not None:
        return f"cost={spec.draft_cost:.3f}"
    vocab = "target LM head" if spec.head_vocab is None else f"vocab {spec.head_vocab}"
    return f"head {spec.head_params / 1e6:.0f}M + {vocab}"


def _solve_tau(f, target, lo=1.0, hi=None):
    """tau in [lo, hi] with f(tau) = target (f increasing): the one fitter (membound.fidelity.fitter) on
    log(f(tau) / target), one anchor row; a bound where no tau in the range reaches it."""
    rep = fit(lambda p: [math.log(f(p["tau"]) / target)], [Param("tau", lo, hi, (lo + hi) / 2)])
    return rep.params["tau"]


def batch_rows(rows) -> list:
    """EAGLE-3's throughput speed-up against batch (SGLang on H100, chain of 3; vLLM, chain of 2).
    The tau of these runs is not reported: it is set so the first point matches (the anchor)."""
    out = []
    model = "llama-3.1-8b"
    for name, hw, gamma, ids, anchor_ids in (
            ("SGLang H100 chain 3", "h100-sxm", 3, range(68, 77), ("spec-067", "spec-065")),
            ("vLLM (A100?) chain 2", "a100-80gb", 2, range(77, 85), None)):
        pts = [rows[f"spec-{i:03d}"] for i in ids]
        batches = [int(p["batch_or_concurrency"]) for p in pts]
        rt = "sglang" if "SGLang" in name else "vllm"

        def at(tau, b, g=gamma):
            spec = SpeculativeDecoding(gamma=g, mean_accepted_tokens=tau, **_eagle3_head(model))
            return speculative_speedup(model, hw, spec, batches=b, runtime=rt, **_WORKLOAD)  # noqa: B023 -- called in this iteration

        if anchor_ids:
            target = float(rows[anchor_ids[0]]["value"]) / float(rows[anchor_ids[1]]["value"])
            tau = _solve_tau(lambda t: float(at(t, [1])[0]), target, 1.0, gamma + 1.0)
            out.append(Row(f"spec: speed-up vs batch, EAGLE-3 {name}", "/".join(anchor_ids),
                           f"batch 1 (anchor: tau={tau:.2f})", target, float(at(tau, [1])[0]), anchor=True))
            first = 0
        else:
            tau = _solve_tau(lambda t: float(at(t, [batches[0]])[0]), float(pts[0]["value"]), 1.0, gamma + 1.0)  # noqa: B023
            out.append(Row(f"spec: speed-up vs batch, EAGLE-3 {name}", pts[0]["id"],
                           f"batch {batches[0]} (anchor: tau={tau:.2f})", float(pts[0]["value"]),
                           float(at(tau, [batches[0]])[0]), anchor=True))
            first = 1
        pred = at(tau, batches)
        for p, b, y in list(zip(pts, batches, pred))[first:]:
            out.append(Row(f"spec: speed-up vs batch, EAGLE-3 {name}", p["id"], f"batch {b}",
                           float(p["value"]), float(y)))
    return out


def eagle_int4_rows(rows) -> list:
    """EAGLE + gpt-fast on an A100, LLaMA2-13B: speed-up at fp16 (anchor for tau) and at int4.
    The head stays bf16 (its own bytes) while the target and its LM head turn int4."""
    model, hw = "llama-2-13b", "a100-80gb"
    spec = lambda t: SpeculativeDecoding(gamma=5, mean_accepted_tokens=t, verify_tokens=26,  # noqa: E731
                                         **_eagle_head(model))
    fp16 = float(rows["eaglefast-003"]["value"])
    tau = _solve_tau(lambda t: _ratio(model, hw, spec(t), weight_dtype="fp16"), fp16, 1.0, 6.0)
    sec = "spec x int4: EAGLE + gpt-fast, A100"
    return [Row(sec, "eaglefast-003", f"fp16 (anchor: tau={tau:.2f})", fp16,
                _ratio(model, hw, spec(tau), weight_dtype="fp16"), anchor=True),
            Row(sec, "eaglefast-006", "int4 target, bf16 head, same tau", float(rows["eaglefast-006"]["value"]),
                _ratio(model, hw, spec(tau), weight_dtype="int4"), _cost_note(spec(tau)))]


# ---- quantization ----------------------------------------------------------------------------
_AWQ_HW = {"NVIDIA RTX A6000 48GB": "rtx-a6000", "NVIDIA RTX 4090 24GB": "rtx-4090"}
_AWQ_MODEL = {"LLaMA-3-8B": "llama-3-8b", "LLaMA-2-7B": "llama-2-7b", "LLaMA-2-13B": "llama-2-13b",
              "Vicuna-7B": "vicuna-7b", "Vicuna-13B": "vicuna-13b"}


def _speed(model, hw, dtype, runtime=None, batch=1, **kw):
    kw = {**_WORKLOAD, **kw}
    return estimate(model, hw, batch=batch, weight_dtype=dtype, runtime=runtime, check_memory=False,
                    **kw).decode_tok_s_per_user


def awq_rows(rows) -> list:
    """TinyChat AWQ W4A16 vs the FP16 HF baseline, per-token latency at batch 1."""
    out = []
    itl = [r for r in rows.values() if r["id"].startswith("awq-") and r["metric"] == "itl_ms"]
    for r in itl:
        if r["weight_dtype"] != "f16" or r["model"] not in _AWQ_MODEL or r["hardware"] not in _AWQ_HW:
            continue
        q = next((x for x in itl if x["model"] == r["model"] and x["hardware"] == r["hardware"]
                  and x["weight_dtype"].startswith("int4")), None)
        if q is None:
            continue
        model, hw = _AWQ_MODEL[r["model"]], _AWQ_HW[r["hardware"]]
        pred = _speed(model, hw, "int4") / _speed(model, hw, "fp16")
        out.append(Row("int4: AWQ TinyChat vs HF fp16, batch 1", f"{q['id']}/{r['id']}", f"{model} {hw}",
                       float(r["value"]) / float(q["value"]), pred))
    return out


def marlin_rows(rows) -> list:
    """Marlin: ~3.87x over fp16 up to batch 16-32 (A10; rtx-a6000 is the same GA102 chip).
    A large linear layer is the 70B model's weights with no KV cache (prompt 0, one token)."""
    measured = float(rows["marlin-001"]["value"])
    out = []
    for b in (1, 16, 32):
        kw = dict(prompt_tokens=0, output_tokens=1)
        pred = _speed("llama-3.1-70b", "rtx-a6000", "int4", batch=b, **kw) / _speed(
            "llama-3.1-70b", "rtx-a6000", "fp16", batch=b, **kw)
        out.append(Row("int4: Marlin kernel, 70B-sized GEMMs on GA102", "marlin-001", f"batch {b}", measured, pred))
    return out


def _apple_profile(hardware: str) -> str:
    m = re.match(r"Apple (M\d)(?: (Pro|Max|Ultra))? \((\d+)-core GPU", hardware)
    assert m is not None, hardware      # called on the Apple rows only
    chip, tier, cores = m.group(1).lower(), (m.group(2) or "").lower(), m.group(3)
    name = f"apple-{chip}" + (f"-{tier}" if tier else "")
    if (chip, tier, cores) in (("m3", "max", "30"), ("m4", "max", "32")):
        name += f"-{cores}c"
    return name


def llamacpp_rows(rows) -> list:
    """llama.cpp on Apple silicon, LLaMA-2 7B tg128: q4_0 and q8_0 speed over f16 on the same chip."""
    out = []
    dec = [r for r in rows.values() if r["id"].startswith("apple-") and r["metric"] == "decode_tok_s_per_user"]
    by = {(r["hardware"], r["weight_dtype"]): r for r in dec}
    for (hw_name, dtype), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if dtype == "f16":
            continue
        base = by.get((hw_name, "f16"))
        if base is None:
            continue
        hw = _apple_profile(hw_name)
        kw = dict(prompt_tokens=0, output_tokens=128)
        pred = _speed("llama-2-7b", hw, dtype, "llama.cpp", **kw) / _speed("llama-2-7b", hw, "fp16", "llama.cpp", **kw)
        out.append(Row(f"llama.cpp {dtype} / f16, Apple, LLaMA-2 7B tg128", f"{r['id']}/{base['id']}",
                       hw_name.replace("Apple ", "").split(",")[0] + ")", float(r["value"]) / float(base["value"]), pred))
    return out


def all_rows(path=None) -> list:
    rows = load_rows(path)
    return (leviathan(rows) + tau_rows(rows) + batch_rows(rows) + eagle_int4_rows(rows)
            + awq_rows(rows) + marlin_rows(rows) + llamacpp_rows(rows))


def summary(rows: list) -> list:
    """(section, n rows scored, median |error|, mean signed error) per section, anchors excluded."""
    out = []
    for sec in dict.fromkeys(r.section for r in rows):
        errs = sorted(r.error for r in rows if r.section == sec and not r.anchor)
        if errs:
            mags = sorted(abs(e) for e in errs)
            n = len(mags)
            med = mags[n // 2] if n % 2 else (mags[n // 2 - 1] + mags[n // 2]) / 2
            out.append((sec, n, med, sum(errs) / n))
    return out


def report(path=None) -> str:
    rows = all_rows(path)
    lines, sec = [], None
    for r in rows:
        if r.section != sec:
            sec = r.section
            lines += ["", f"## {sec}", f"{'ids':<24}{'setting':<46}{'measured':>9}{'membound':>10}{'error':>8}  note"]
        err = "anchor" if r.anchor else f"{r.error:+.0%}"
        lines.append(f"{r.ids:<24}{r.label[:45]:<46}{r.measured:>9.2f}{r.predicted:>10.2f}{err:>8}  {r.note}")
    lines += ["", "## summary (anchors excluded)", f"{'section':<58}{'n':>4}{'median |err|':>14}{'mean err':>10}"]
    for s, n, med, mean in summary(rows):
        lines.append(f"{s:<58}{n:>4}{med:>14.0%}{mean:>+10.0%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.multiplier_check",
                                 description="Score the multipliers (speculative decoding, quantization, batching) "
                                             "against the papers' measured speed-ups in the reference data.")
    ap.add_argument("--reference", default=None, help="a folder holding measurements.csv "
                    "(default: $MEMBOUND_REFERENCE_DIR or the copy shipped with membound)")
    args = ap.parse_args(argv)
    print(report(args.reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
