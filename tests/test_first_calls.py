"""First calls that work (issue 32): the fewest chips by default, `min_chips` as the does-not-fit
hint, one set of default lengths, results that render as tables, extras that name themselves
before any work starts, and small things (pytest -rs, the app's port)."""
import importlib
import importlib.util
import inspect
import re
import tomllib
from pathlib import Path

import pytest

import membound as mb
from membound.base import defaults
from membound.errors import MissingExtraError

from _cli import run_cli

ROOT = Path(__file__).resolve().parents[1]


# ---- the fewest chips, and the hint that names them ----------------------------------------------
def test_405b_on_h100_defaults_to_the_fewest_chips_and_the_hint_does_not_move():
    # 405.9e9 bf16 weights = 811.7 GB: 8 chips hold 101 GB each, over the 85.5 GB of an H100; the
    # layout rule puts 9 to 15 chips on tp=8 pp=1 (the rest idle: 8 chips' share again), so the
    # first count that holds it is 16 = tp 8 x pp 2, 50.7 GB each. Every failing count says 16.
    assert mb.min_chips("llama-3.1-405b", "h100-sxm", context_tokens=2048 + 256) == 16
    r = mb.estimate("llama-3.1-405b", "h100-sxm")
    assert (r.n_chips, r.parallel) == (16, "tp=8 pp=2 ep=1")
    for n in (1, 8, 10, 12, 14, 15):
        with pytest.raises(mb.DoesNotFitError) as e:
            mb.estimate("llama-3.1-405b", "h100-sxm", n_chips=n)
        assert e.value.chips_needed == 16 and "16 chips would hold it" in str(e.value)


def test_groq_hint_is_the_minimum_not_bytes_over_capacity():
    # 70.6e9 bf16 weights = 141 GB over 230 MB of SRAM: 614 chips by bytes alone, but stages hold
    # whole units: 80 layers, and the LM head and embedding in 2 parts each (at most a layer's
    # 855.7M params: parallel.head_parts), 84 units. A layer at 2 B a weight, 1.71 GB, needs 8 chips
    # (0.214 GB each; 4 would hold 0.43 GB); 84 stages x 8 = 672 chips
    for n in (1, 617):
        with pytest.raises(mb.DoesNotFitError) as e:
            mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=n)
        assert e.value.chips_needed == 672
    assert mb.estimate("llama-3.1-70b", "groq-lpu", n_chips="auto").n_chips == 672


def test_auto_takes_the_parallel_given_and_refuses_other_words():
    assert mb.estimate("llama-3.1-70b", "h100-sxm", parallel=mb.Parallel(tp=4)).n_chips == 4
    with pytest.raises(mb.InvalidInputError, match="'auto'"):
        mb.estimate("llama-3.1-8b", "h100-sxm", n_chips="many")


def test_cli_estimate_and_serve_default_to_the_fewest_chips():
    p = run_cli("estimate", "llama-3.1-405b", "h100-sxm")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^hardware\s+16 x h100-sxm \(tp=8 pp=2 ep=1\)$", p.stdout, re.M)
    p = run_cli("estimate", "llama-3.1-405b", "h100-sxm", "--chips", "10")
    assert p.returncode == 2 and "16 chips would hold it" in p.stderr
    # 70.6e9 bf16 = 141 GB: two 85.5 GB H100s
    p = run_cli("serve", "llama-3.1-70b", "h100-sxm", "--concurrency", "1")
    assert p.returncode == 0 and p.stdout.startswith("llama-3.1-70b on 2 x h100-sxm"), p.stderr


def test_python_serve_defaults_to_the_fewest_chips():
    # 70.6e9 bf16 = 141 GB of weights: over one 85.5 GB H100, 70.6 GB each on two (tp=2) with room for KV
    r = mb.serve("llama-3.1-70b", "h100-sxm", concurrency=4)
    assert (r.n_chips, r.parallel) == (2, "tp=2 pp=1 ep=1")
    assert mb.serve("llama-3.1-70b", "h100-sxm", concurrency=4, parallel=mb.Parallel(tp=4)).n_chips == 4
    assert re.search(r"^cost\s+no price \(pass --price\)$", str(mb.serve("llama-3.1-8b", "rtx-3090", concurrency=2)),
                     re.M)


# ---- one set of default lengths ------------------------------------------------------------------
def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_one_set_of_default_lengths():
    from membound.present.cli import build_parser
    want = (defaults.PROMPT_TOKENS, defaults.OUTPUT_TOKENS)
    assert want == (2048, 256)
    from membound.planning.planner import plan_served
    for fn in (mb.estimate, mb.compare, mb.sweep, mb.serve, mb.serve_curve, plan_served, mb.plots.served_curve):
        assert (_default(fn, "prompt_tokens"), _default(fn, "output_tokens")) == want, fn.__name__
    for verb in ("estimate", "compare", "serve", "plan"):
        args = build_parser().parse_args([verb, "llama-3.1-8b", "h100-sxm"])
        assert (args.prompt, args.output) == want, verb
    from membound.present.app.api import Workload
    w = Workload.of({})
    assert (w.prompt_tokens, w.output_tokens) == want


def test_explain_levers_adds_only_the_levers_asked_for():
    rep = mb.explain_levers("llama-3.1-8b", "h100-sxm", batch=16, weight_dtype="int4")
    assert [s.lever for s in rep.steps] == ["baseline", "batch", "weights"]
    assert rep.full.kv_dtype == "bf16"
    rep = mb.explain_levers("llama-3.1-8b", "h100-sxm", batch=16, weight_dtype="int4", kv_dtype="fp8")
    assert [s.lever for s in rep.steps] == ["baseline", "batch", "weights", "kv"]


# ---- results that render -------------------------------------------------------------------------
def test_serve_curve_and_fast_mode_render_as_tables():
    c = mb.serve_curve("llama-3.1-8b", "h100-sxm", concurrency=[1, 4, 16, 64], price_usd_per_hour=3.6, runtime="vllm")
    text = str(c).splitlines()
    assert text[0] == "llama-3.1-8b on 1 x h100-sxm, vllm: served curve"
    assert text[1].split() == ["clients", "tok/s/user", "out", "tok/s/chip", "TTFT", "TPOT", "running", "$/M", "out"]
    assert [row.split()[0] for row in text[3:]] == ["1", "4", "16", "64"]
    # the cost column: $3.6/h = $0.001/s over the output tok/s per chip, x 1e6
    assert float(text[3].split()[-1]) == pytest.approx(0.001 / c.output_tok_s_per_chip[0] * 1e6, rel=2e-3)
    html = c._repr_html_()
    assert html.count("<tr>") == 1 + 4 and "array(" not in html
    fm = c.fast_mode(2.0)
    assert str(fm).splitlines()[0].startswith("standard lane") and "price ratio" in str(fm)
    assert fm._repr_html_().startswith("<table>") and fm.reading.startswith("fast lane ~")
    unpriced = mb.serve_curve("llama-3.1-8b", "rtx-3090", concurrency=[1, 2])
    assert str(unpriced).endswith("cost: no price (pass --price)")


def test_memory_breakdown_and_served_curve_save_whole(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rs = [mb.estimate("llama-3.1-70b", "h100-sxm"),
          mb.estimate("llama-3.1-70b", "h200", batch=16, prompt_tokens=8192, n_chips=1, check_memory=False)]
    ax = mb.plots.memory_breakdown(rs)
    ax.figure.savefig(tmp_path / "m.png")          # as the README shows it
    fig = ax.figure
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    for label in ax.get_yticklabels() + [t for t in ax.texts] + [ax.get_legend()]:
        b = label.get_window_extent(renderer)
        assert b.x0 >= box.x0 - 0.5 and b.x1 <= box.x1 + 0.5 and b.y0 >= box.y0 - 0.5, label
    plt.close(fig)
    ax = mb.plots.served_curve("llama-3.3-70b", ["h100-sxm", "h200", "mi300x"], concurrency=(1, 4, 16, 64, 256))
    assert not ax.texts                              # knees are in the legend, not labels that collide
    assert all("knee:" in t.get_text() for t in ax.get_legend().get_texts())
    plt.close(ax.figure)


# ---- extras that name themselves before any work ------------------------------------------------
@pytest.fixture
def without(monkeypatch):
    def hide(*modules):
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))
    return hide


@pytest.mark.parametrize("fn, args", [("roofline", ("h100-sxm",)), ("context_curve", ("llama-3.1-8b", ["l4"])),
                                      ("interactivity", ("llama-3.1-8b", ["l4"])), ("memory_breakdown", (None,)),
                                      ("validation", (None,)), ("served_curve", ("llama-3.1-8b", ["l4"]))])
def test_plots_without_matplotlib_name_the_extra(without, monkeypatch, fn, args):
    without("matplotlib")
    monkeypatch.setattr(mb.plots, "prepare", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(MissingExtraError) as e:
        getattr(mb.plots, fn)(*args)
    assert str(e.value) == f"membound.plots.{fn} needs matplotlib: pip install 'membound[plot]'"
    assert isinstance(e.value, ImportError) and isinstance(e.value, mb.MemboundError)


def test_dask_engine_without_dask_names_the_extra(without, monkeypatch):
    without("dask")
    sw = importlib.import_module("membound.planning.sweep")    # the module (mb.sweep is the function)
    monkeypatch.setattr(sw, "_plan", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(MissingExtraError, match=r"^sweep\(engine=\"dask\"\) needs dask: pip install 'membound\[dask\]'$"):
        mb.sweep("llama-3.1-8b", "h100-sxm", engine="dask")


def test_validate_plot_without_matplotlib_fails_before_the_fits(without, monkeypatch, tmp_path):
    without("matplotlib")
    import membound.fidelity.validate as v
    monkeypatch.setattr(v, "validation_report", lambda *a, **k: pytest.fail("work started"))
    p = run_cli("validate", "--plot", str(tmp_path / "v.png"))
    assert p.returncode == 1 and p.stderr == "membound: error: validate --plot needs matplotlib: pip install 'membound[plot]'\n"
    with pytest.raises(MissingExtraError):
        v.main(["--plot", str(tmp_path / "v.png")])


# ---- small things --------------------------------------------------------------------------------
def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_pytest_says_why_tests_skip():
    opts = _pyproject()["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert any(o.startswith("-r") and "s" in o and "f" in o and "E" in o for o in opts)


def test_notebook_extra_installs_a_front_end():
    assert any(re.match(r"(notebook|jupyterlab)\b", d) for d in _pyproject()["project"]["optional-dependencies"]["notebook"])


def test_app_port_is_no_inference_servers():
    from membound.present.app import DEFAULT_PORT
    from membound.present.cli import build_parser
    assert DEFAULT_PORT not in (8000, 30000, 8080, 11434, 1234, 8888, 5000, 3000)
    assert build_parser().parse_args(["app"]).port == DEFAULT_PORT
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:      # no page sends the app to 8000
        assert not re.search(r"membound app\b.*(127\.0\.0\.1|localhost):8000", page.read_text()), page
