"""The README and the guides under docs/: what a newcomer reads first runs, and every figure it
quotes is what the code prints now (scripts/doc_figures.py), the generated tables are their
generator's (scripts/readme_tables.py), and no project jargon reaches a reader."""
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
README = ROOT / "README.md"
needs_tree = pytest.mark.skipif(not (SCRIPTS / "doc_figures.py").exists(), reason="needs the source tree (or the sdist)")


def _figures():
    return runpy.run_path(str(SCRIPTS / "doc_figures.py"))


def test_readme_opens_with_the_two_commands():
    # the project's rule: install + the main job, then install + the tests, as the first two blocks
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert blocks[:2] == ["pip install . && membound estimate llama-3.1-8b h100-sxm\n",
                          'pip install -e ".[test]" && python -m pytest\n']


def test_readme_is_a_first_ten_minutes_read():
    # it was 904 lines of calibration detail; the detail lives in docs/ now, linked from the README
    text = README.read_text()
    assert len(text.splitlines()) < 150
    for page in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / page).exists(), page


def test_readme_python_runs():
    """The README's Python blocks run, in order, as one session (the tour a newcomer pastes)."""
    code = "\n".join(re.findall(r"```python\n(.*?)```", README.read_text(), re.S))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["r"].bound and namespace["curve"] is not None


@needs_tree
def test_quoted_figures_are_what_the_code_prints():
    fig = _figures()
    for page in fig["pages"]():
        text = (ROOT / page).read_text()
        assert fig["render"](text, page) == text, f"{page}: a figure drifted: run python scripts/doc_figures.py"


@needs_tree
def test_a_drifted_figure_is_caught():
    # the README once said fast_mode(2.5) costs "2.23x" the price while the code returned 1.74x
    fig = _figures()
    text = README.read_text()
    (ratio,) = next(f for f in fig["FIGURES"] if "fast_mode" in f.line).values()
    drifted = text.replace(f"for {ratio}x the price", "for 2.23x the price")
    assert drifted != text and "2.23x" not in ratio
    assert fig["render"](drifted, "README.md") == text
    # a figure's line that is gone from its page is an error, not a silent pass
    with pytest.raises(ValueError, match="occurs 0 times"):
        fig["render"](text.replace("curve.fast_mode(2.5)", "curve.fast_mode(3)"), "README.md")


# numbers in the pages that are inputs of a call, a question's terms or measured data, not figures membound prints
INPUTS = {"README.md": {"2.5x", "40 tok/s"},
          "docs/tour.md": {"800 tokens", "70 tok/s", "30 s", "93 ms", "12.9 ms", "8 x"}}
FIGURE = r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:tok/s|ms|s\b|µs|GB|TB/s|x\b|×|%|chips|GPUs|tokens)"


@needs_tree
@pytest.mark.parametrize("page", ["README.md", "docs/tour.md", "docs/capacity-planning.md", "docs/questions.md"])
def test_every_quoted_figure_is_checked(page):
    """Each number with a unit in the README, and in the guides' code comments, stands inside a
    checked figure or is an input."""
    fig = _figures()
    text = (ROOT / page).read_text()
    spans = fig["spans"](text, page)
    regions = ([(0, len(text))] if page == "README.md" else
               [(b.start(1) + c.start(), b.start(1) + c.end()) for b in re.finditer(r"```python\n(.*?)```", text, re.S)
                for c in re.finditer(r"#[^\n]*", b.group(1))])
    unchecked = [m.group(0) for a, b in regions for m in re.finditer(FIGURE, text[a:b])
                 if not any(x <= a + m.start() and a + m.end() <= y for x, y in spans)
                 and m.group(0) not in INPUTS.get(page, set())]
    assert unchecked == []


@needs_tree
def test_catalogue_tables_are_fresh():
    gen = runpy.run_path(str(SCRIPTS / "readme_tables.py"))
    text = gen["PAGE"].read_text()
    assert gen["render"](text) == text, "docs/catalogue.md is stale: run python scripts/readme_tables.py"


@needs_tree
def test_catalogue_prices_are_the_profiles():
    import membound as mb
    text = (ROOT / "docs" / "catalogue.md").read_text()
    # the H200 row shows the profile's $4.00 per chip-hour (it once showed a stale $10)
    h200 = next(line for line in text.splitlines() if line.startswith("| h200 |"))
    assert h200.rstrip(" |").endswith(f"{mb.load_hardware('h200').price_usd_per_hour:.2f}")


JARGON = ("seed article", "seed claim", "the seeds'")


@needs_tree
def test_no_project_jargon_reaches_a_reader():
    pages = [README, *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "src" / "membound" / "app" / "static").glob("*"))]
    for page in pages:
        text = page.read_text().lower()
        assert not [w for w in JARGON if w in text], page


def test_the_notebooks_capacity_plan_is_the_planners():
    # examples/tour.ipynb section 6: 2,000 users, 2048/500 tokens, >= 30 tok/s, TTFT p90 <= 1 s, 8-GPU nodes,
    # sized with serve()'s physics (plan's default): the answer is serve()'s steady state at its clients
    import membound as mb
    from membound.physics.estimate import prepare
    res = mb.plan("llama-3.1-70b", mb.Workload(concurrent_users=2000, prompt_tokens=2048, output_tokens=500),
                  mb.SLO(ttft_p90_s=1.0, min_tok_s_per_user=30), hardware=["h100-sxm"], weight_dtypes=("fp8",),
                  n_chips=(8,))
    best = res.best
    # 2,000 users / c clients per replica, rounded up, replicas of 8 chips
    assert best.replicas == -(-2000 // best.clients_per_replica) and best.total_chips == 8 * best.replicas
    s = mb.serve("llama-3.1-70b", "h100-sxm", concurrency=int(best.clients_per_replica), n_chips=8,
                 weight_dtype="fp8", prompt_tokens=2048, output_tokens=500)
    assert s.tok_s_per_user >= 30 and s.ttft.p90 <= 1.0
    # the tensor-parallel all-reduces move the 16-bit residual although the GEMMs are fp8. Over a 1-byte
    # residual that adds, on NVLink (450 GB/s each way), 80 layers x 2 all-reduces of 2 x 7/8 of the
    # hidden state: in a step of 256 tokens 160 x 1.75 x 256 x 8192 x 1 B / 4.5e11 = 1.305 ms
    p = prepare("llama-3.1-70b", "h100-sxm", n_chips=8, batch=256, weight_dtype="fp8", prompt_tokens=2048,
                output_tokens=500)
    assert p.resolved.activations.name == "fp8" and p.knobs.act_bytes == 2.0
    two, one = p.evaluate(), p.evaluate(act_bytes=1.0)
    assert two["tpot_s"] - one["tpot_s"] == pytest.approx(160 * 1.75 * 256 * 8192 / 4.5e11, rel=1e-9)
    # the count by hand it replaces: batch 512 prefilled together takes > 10 s to the first token
    r = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, batch=512, weight_dtype="fp8", prompt_tokens=2048,
                    output_tokens=500)
    assert r.ttft_s > 10 and r.decode_tok_s_per_user > 30


def test_readme_command_lines_run():
    """The README's `membound ...` lines (all but `membound app`, a server) print a table and exit 0."""
    import shlex

    from _cli import run_cli
    lines = [ln.split("#")[0].strip() for b in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
             for ln in b.splitlines()]
    verbs = [shlex.split(ln)[1:] for ln in lines if ln.startswith("membound ") and not ln.startswith("membound app")]
    assert [v[0] for v in verbs] == ["compare", "plan", "serve"]
    for args in verbs:
        p = run_cli(*args)
        assert p.returncode == 0 and p.stdout.strip(), (args, p.stderr)
