"""Refresh the figures quoted in README.md and the guides under docs/ from what the code prints, or check them.

    python scripts/doc_figures.py            # rewrite the pages whose figures drifted
    python scripts/doc_figures.py --check    # exit 1 when a page is stale (tests/test_readme.py)

A figure is one line of a page with `{}` where its numbers stand, and the code that prints them
(`values`, returning the formatted strings in order). The line must occur exactly once on its page:
a page edited so that a figure's line is gone or doubled is an error here, not a silent pass.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Figure:
    page: str                               # path from the repository root
    line: str                               # the page's text with {} where each number stands
    values: Callable[[], tuple[str, ...]]   # the numbers as the page shows them

    def pattern(self) -> re.Pattern[str]:
        parts = [re.escape(p) for p in self.line.split("{}")]
        tail = r"(?=\s|$)" if self.line.endswith("{}") else ""     # a last number runs to the next space
        return re.compile(r"([^\n]+?)".join(parts) + tail)


def _n(v: float, digits: int = 1) -> str:
    """A figure as the pages write it: grouped thousands, `digits` decimals."""
    return f"{v:,.{digits}f}"


def _ms(v: float) -> str:
    return _n(1e3 * v)


# ---- the computations (each once, shared by the figures that quote it) -------------------------
@cache
def _tour():
    import membound as mb
    import membound.planning.product  # noqa: F401 - the tour's product figures (agent_loop_s & co.)
    r = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, weight_dtype="fp8")
    return mb, r


@cache
def _served():
    import membound as mb
    s = mb.serve("llama-3.3-70b", "h200", concurrency=64, n_chips=8, weight_dtype="fp8", kv_dtype="fp8",
                 runtime="vllm")
    curve = mb.serve_curve("llama-3.3-70b", "h200", n_chips=8, weight_dtype="fp8", kv_dtype="fp8",
                           prompt_tokens=2048, output_tokens=512, runtime="vllm")
    return s, curve.fast_mode(2.5)


def _ceiling() -> tuple[str, ...]:
    import membound as mb
    bw = mb.load_hardware("h100-sxm").bandwidth_bytes_s
    tok_s = mb.bandwidth_ceiling("llama-3.1-70b", "h100-sxm")
    return _n(tok_s), f"{bw / 1e12:.2f}", f"{bw / tok_s / 1e9:.0f}"


def _estimate() -> tuple[str, ...]:
    _, r = _tour()
    return _n(r.decode_tok_s_per_user), _ms(r.ttft_s), r.bound


def _min_chips() -> tuple[str, ...]:
    import membound as mb
    return (str(mb.min_chips("llama-3.1-405b", "h100-sxm")),)


def _serve() -> tuple[str, ...]:
    s, _ = _served()
    return _n(s.tok_s_per_user), f"{s.output_tok_s_per_chip:,.0f}"


def _fast_mode() -> tuple[str, ...]:
    _, fm = _served()
    return (f"{fm.price_ratio:.2f}",)


@cache
def _recipe_module():
    """examples/capacity_recipe.py, the recipe docs/capacity-planning.md documents."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import capacity_recipe
    finally:
        sys.path.pop(0)
    return capacity_recipe, capacity_recipe.recipe()


def _recipe() -> tuple[str, ...]:
    """The recipe's one answer: the cheapest fleet."""
    _, res = _recipe_module()
    b = res.best
    return (str(b["replicas"]), str(b["n_chips"]), b["hardware"], b["weight_dtype"], str(b["batch"]),
            _n(b["tok_s_per_user"]), f"{b['cost_per_million_tokens_usd']:.2f}", str(b["total_chips"]))


def _recipe_table() -> str:
    mod, res = _recipe_module()
    return "\n" + mod.table(res) + "\n"


# ---- docs/tour.md ------------------------------------------------------------------------------
def _tour_model() -> tuple[str, ...]:
    import membound as mb
    return (_n(mb.load_model("llama-3.1-70b").total_params / 1e9),)


def _tour_h100() -> tuple[str, ...]:
    import membound as mb
    h = mb.load_hardware("h100-sxm")
    return f"{h.bandwidth_bytes_s / 1e12:.2f}", f"{h.compute_flops['bf16'] / 1e12:.0f}"


def _tour_ceiling() -> tuple[str, ...]:
    import membound as mb
    bw = mb.load_hardware("h100-sxm").bandwidth_bytes_s
    tok_s = mb.bandwidth_ceiling("llama-3.1-70b", "h100-sxm", "fp16")
    return _n(tok_s), f"{bw / 1e12:.2f}", f"{bw / tok_s / 1e9:.0f}"


def _tour_weights() -> tuple[str, ...]:
    import membound as mb
    return (f"{mb.load_model('llama-3.1-70b').total_params * 2 / 1e9:.0f}",)


def _compare_table() -> str:
    import membound as mb
    c = mb.compare("llama-3.1-70b", ["h100-sxm:8", "h200", "cerebras-wse-3", "groq-lpu"], weight_dtype="fp8")
    return f"\n```text\n{c}\n```\n"


def _product_speed() -> tuple[str, ...]:
    _, r = _tour()
    return f"{r.decode_tok_s_per_user:.0f}", f"{r.ttft_s * 1e3:.0f}"


def _agent_loop_70() -> tuple[str, ...]:
    import membound as mb
    return (_n(mb.planning.product.agent_loop_s(20, 800, 70.0)),)


def _agent_loop_r() -> tuple[str, ...]:
    mb, r = _tour()
    return _n(mb.planning.product.agent_loop_s(20, 800, r)), f"{r.ttft_s:.3f}", f"{r.decode_tok_s_per_user:.0f}"


def _reasoning() -> tuple[str, ...]:
    mb, r = _tour()
    return _n(mb.planning.product.reasoning_time_s(10_000, r)), f"{r.ttft_s:.3f}", f"{r.decode_tok_s_per_user:.0f}"


def _thinking() -> tuple[str, ...]:
    mb, r = _tour()
    return (f"{mb.planning.product.thinking_tokens(r, 30):,.0f}",)


def _voice() -> tuple[str, ...]:
    mb, r = _tour()
    return (str(mb.planning.product.voice_turn(r, other_s=0.3)),)


@cache
def _tour_served():
    import membound as mb
    r = mb.serve("llama-3.3-70b", "h200", concurrency=64, n_chips=8, runtime="vllm",
                 prompt_tokens=mb.serving.Uniform(819, 1024), output_tokens=mb.serving.Uniform(819, 1024),
                 weight_dtype="fp8", kv_dtype="fp8")
    return r


def _tour_serve() -> tuple[str, ...]:
    r = _tour_served()
    return f"{r.ttft.median * 1e3:.0f}", _n(r.tpot.median * 1e3), f"{r.output_tok_s_per_chip:.0f}"


def _tour_fast_mode() -> tuple[str, ...]:
    _, fm = _served()
    return str(fm.slow_concurrency), f"{fm.price_ratio:.2f}"


TOUR = "docs/tour.md"

FIGURES = [
    Figure("README.md", 'mb.bandwidth_ceiling("llama-3.1-70b", "h100-sxm")   # {} tok/s: {} TB/s over {} GB a token',
           _ceiling),
    Figure("README.md", "r.decode_tok_s_per_user, r.ttft_s, r.bound # {} tok/s, {} ms to the first token, {}-bound",
           _estimate),
    Figure("README.md", 'mb.min_chips("llama-3.1-405b", "h100-sxm") # {} chips hold', _min_chips),
    Figure("README.md", "s.tok_s_per_user, s.output_tok_s_per_chip  # {} tok/s per user, {} tok/s per GPU", _serve),
    Figure("README.md", "curve.fast_mode(2.5)                       # 2.5x the speed of the knee for {}x the price",
           _fast_mode),
    Figure(TOUR, 'model = mb.load_model("llama-3.1-70b")          # {} B parameters', _tour_model),
    Figure(TOUR, 'h100 = mb.load_hardware("h100-sxm")              # {} TB/s, {} TFLOP/s bf16', _tour_h100),
    Figure(TOUR, 'mb.bandwidth_ceiling(model, h100, "fp16")        # {} tok/s: {} TB/s over {} GB a token', _tour_ceiling),
    Figure(TOUR, "# ({} GB of weights less the input-embedding", _tour_weights),
    Figure(TOUR, 'weight_dtype="fp8")   # {} tok/s, TTFT {} ms', _product_speed),
    Figure(TOUR, "agent_loop_s(20, 800, 70.0)     # {} s: 20 calls", _agent_loop_70),
    Figure(TOUR, "agent_loop_s(20, 800, r)        # {} s: with r's speed and its TTFT per call (20 x ({} + 800/{}))",
           _agent_loop_r),
    Figure(TOUR, "reasoning_time_s(10_000, r)     # {} s before the answer starts: {} + 10,000 / {}", _reasoning),
    Figure(TOUR, "thinking_tokens(r, 30)          # {} tokens of thinking", _thinking),
    Figure(TOUR, "print(voice_turn(r, other_s=0.3))\n# {}\n", _voice),
    Figure(TOUR, "r.ttft.median, r.tpot.median, r.output_tok_s_per_chip   # {} ms, {} ms, {} tok/s per GPU", _tour_serve),
    Figure(TOUR, "c.fast_mode(2.5)   # read off the curve: 2.5x the speed of the knee ({} clients) for {}x the price",
           _tour_fast_mode),
    Figure("docs/capacity-planning.md", "**The answer:** {} replicas of {} x {} with {} weights, {} users on each at "
           "{} tok/s, for ${} per million output tokens: {} GPUs in all.", _recipe),
]

# Whole blocks, between a page's markers
SECTIONS = [("docs/capacity-planning.md", "<!-- recipe:start -->", "<!-- recipe:end -->", _recipe_table),
            (TOUR, "<!-- compare:start -->", "<!-- compare:end -->", _compare_table)]


def render(text: str, page: str) -> str:
    """`text` (the page `page`) with each of its figures set to what the code prints now."""
    for fig in (f for f in FIGURES if f.page == page):
        found = list(fig.pattern().finditer(text))
        if len(found) != 1:
            raise ValueError(f"{page}: the figure line {fig.line!r} occurs {len(found)} times; expected once")
        m, values = found[0], fig.values()
        if len(values) != fig.line.count("{}") or any(not isinstance(v, str) for v in values):
            raise ValueError(f"{page}: {fig.line!r} takes {fig.line.count('{}')} strings, got {values!r}")
        text = text[:m.start()] + fig.line.format(*values) + text[m.end():]
    for _, start, end, block in (s for s in SECTIONS if s[0] == page):
        head, sep, rest = text.partition(start)
        body, sep2, tail = rest.partition(end)
        if not sep or not sep2:
            raise ValueError(f"{page}: the markers {start} ... {end} are missing")
        text = head + start + block() + end + tail
    return text


def spans(text: str, page: str) -> list[tuple[int, int]]:
    """Where each figure of `page` stands in `text` (start, end)."""
    return [m.span() for f in FIGURES if f.page == page for m in f.pattern().finditer(text)]


def pages() -> list[str]:
    return sorted({f.page for f in FIGURES} | {s[0] for s in SECTIONS})


def main(argv: list[str]) -> int:
    stale = []
    for page in pages():
        path = ROOT / page
        text = path.read_text()
        new = render(text, page)
        if new != text:
            stale.append(page)
            if "--check" not in argv:
                path.write_text(new)
                print(f"updated {path}")
    if stale and "--check" in argv:
        print(f"stale figures in {', '.join(stale)}: run python scripts/doc_figures.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
