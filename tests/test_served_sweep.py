"""Served sweeps solved at once (`serve_curves`, `sweep(concurrency=...)`) equal the per-group
path (`serve_curve` of each configuration) field by field, to the bit, errors included."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import membound as mb
from membound.base import defaults
from membound.errors import MemboundError
from membound.serving import curve as curve_module
from membound.serving.curve import serve_curve, serve_curves

FIELDS = ("concurrency", "tok_s_per_user", "output_tok_s_per_chip", "ttft_s", "tpot_s", "mean_running")
MODELS = ["llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-12b", "gpt-oss-20b", "deepseek-v2-lite", "mixtral-8x7b"]
DEVICES = ["h100-sxm", "h200", "b200", "mi300x", "a100-80gb", "l40s", "rtx-4090", "gaudi-3"]


def bits(a) -> bytes:
    """An array's exact bits (-0.0 and 0.0 apart, NaN as stored)."""
    return np.ascontiguousarray(np.asarray(a)).tobytes()


def assert_same_curve(got, want):
    assert (got.model, got.hardware, got.runtime, got.n_chips) == (want.model, want.hardware, want.runtime,
                                                                    want.n_chips)
    for f in FIELDS:
        a, b = getattr(got, f), getattr(want, f)
        assert a.dtype == b.dtype and bits(a) == bits(b), f
    a, b = got.cost_per_million_output_tokens_usd, want.cost_per_million_output_tokens_usd
    assert (a is None) == (b is None) and (a is None or bits(a) == bits(b))


def per_group(configurations, concurrency):
    """serve_curve of each configuration, or (type, message) of its error."""
    out = []
    for kw in configurations:
        try:
            out.append(serve_curve(**kw, concurrency=concurrency))
        except MemboundError as e:
            out.append((type(e), str(e)))
    return out


# families of configurations that differ in their devices, formats and prices only (solved at once
# where their steps share a structure), of models dense, MoE, windowed and with attention sinks
family = st.tuples(
    st.fixed_dictionaries(dict(
        model=st.sampled_from(MODELS), runtime=st.sampled_from([None, "vllm", "sglang", "tensorrt-llm", "llama.cpp"]),
        n_chips=st.sampled_from([1, 2, 8]), prompt_tokens=st.sampled_from([0, 1, 700, 8000]),
        output_tokens=st.sampled_from([2, 300, 2000]))),
    st.lists(st.fixed_dictionaries(dict(
        hardware=st.sampled_from(DEVICES), weight_dtype=st.sampled_from(["bf16", "fp8", "int4"]),
        price_usd_per_hour=st.sampled_from([None, 2.5]))), min_size=1, max_size=4))
configurations = st.lists(family, min_size=1, max_size=3).map(
    lambda fams: [{**shared, **own} for shared, owns in fams for own in owns])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations, st.lists(st.integers(1, 3000), min_size=1, max_size=6, unique=True))
def test_curves_solved_at_once_are_serve_curve_to_the_bit(configs, clients):
    # the configurations that share a step's structure go through one solve; every curve, and
    # every error, is serve_curve's of that configuration alone
    want = per_group(configs, clients)
    errors = {}
    got = serve_curves(configs, concurrency=clients, skip=lambda i, e: errors.__setitem__(i, (type(e), str(e))))
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, tuple):
            assert g is None and errors[i] == w
        else:
            assert i not in errors
            assert_same_curve(g, w)


def test_one_model_on_four_devices_is_one_solve(monkeypatch):
    # 8B with vLLM on 8 x H100, H200, B200, MI300X: one structure (only the chips' numbers differ),
    # so one stacked solve and no per-configuration one; the curves are serve_curve's
    calls = {"solve": 0, "solve_stack": 0}
    for name in calls:
        real = getattr(curve_module, name)
        monkeypatch.setattr(curve_module, name, lambda *a, _real=real, _name=name, **k: (
            calls.__setitem__(_name, calls[_name] + 1), _real(*a, **k))[1])
    configs = [dict(model="llama-3.1-8b", hardware=h, n_chips=8, weight_dtype="fp8", runtime="vllm")
               for h in ("h100-sxm", "h200", "b200", "mi300x")]
    got = serve_curves(configs, concurrency=[1, 16, 256])
    assert calls == {"solve": 0, "solve_stack": 1}
    monkeypatch.undo()
    for g, kw in zip(got, configs):
        assert_same_curve(g, serve_curve(**kw, concurrency=[1, 16, 256]))


def as_list(v):
    return v if isinstance(v, list) else [v]


@pytest.mark.parametrize("grid", [
    dict(model=["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"], hardware=["h100-sxm", "h200", "b200", "mi300x"],
         concurrency=[1, 4, 64, 512], n_chips=8, weight_dtype="fp8", runtime="vllm"),
    dict(model="llama-3.1-8b", hardware=["h100-sxm", "h200", "l40s"], concurrency=[3, 50],
         weight_dtype=["bf16", "fp8", "int4"], prompt_tokens=[100, 4000], output_tokens=[2, 700],
         price_usd_per_hour={"h100-sxm": 2.5}),
    dict(model="gpt-oss-20b", hardware=["h100-sxm", "h200"], concurrency=[8, 9],
         runtime=["vllm", "sglang", "tensorrt-llm"], kv_dtype=["fp8", None]),
])
def test_served_sweep_rows_are_serve_curve_of_their_group(grid):
    # the table is the groups' serve_curve rows in the sweep's order (model, device, runtime,
    # weight dtype, KV dtype, then prompt, output), each bit for bit
    t = mb.sweep(**grid)
    price = grid.get("price_usd_per_hour") or {}
    curves = [serve_curve(m, h, concurrency=grid["concurrency"], prompt_tokens=s, output_tokens=o, runtime=rt,
                          n_chips=grid.get("n_chips", 1), weight_dtype=w, kv_dtype=kv, price_usd_per_hour=price.get(h))
              for m in as_list(grid["model"]) for h in as_list(grid["hardware"])
              for rt in as_list(grid.get("runtime")) for w in as_list(grid.get("weight_dtype", "bf16"))
              for kv in as_list(grid.get("kv_dtype")) for s in as_list(grid.get("prompt_tokens", defaults.PROMPT_TOKENS))
              for o in as_list(grid.get("output_tokens", defaults.OUTPUT_TOKENS))]
    k = len(grid["concurrency"])
    assert len(t) == k * len(curves)
    for name in ("model", "hardware", "runtime"):
        assert list(t[name]) == [getattr(c, name) for c in curves for _ in range(k)]
    assert bits(t["n_chips"].to_numpy()) == bits(np.repeat([c.n_chips for c in curves], k))
    for f in FIELDS:
        assert bits(t[f].to_numpy()) == bits(np.concatenate([getattr(c, f) for c in curves])), f
    assert bits(t["cost_per_million_output_tokens_usd"].to_numpy()) == bits(np.concatenate(
        [np.full(k, np.nan) if c.cost_per_million_output_tokens_usd is None else c.cost_per_million_output_tokens_usd
         for c in curves]))


def test_skip_and_raise_keep_the_per_group_errors():
    # a group no client fits (70B bf16 on one L40S): skipped with serve_curve's message, or raised
    grid = dict(model=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm", "l40s"], concurrency=[2, 8])
    with pytest.raises(MemboundError) as raised:
        mb.sweep(**grid)
    with pytest.raises(MemboundError) as alone:
        serve_curve("llama-3.1-70b", "h100-sxm", concurrency=[2, 8])
    assert str(raised.value) == str(alone.value)
    configs = [dict(model=m, hardware=h) for m in grid["model"] for h in grid["hardware"]]
    seen = []
    got = serve_curves(configs, concurrency=[2, 8], skip=lambda i, e: seen.append((i, type(e))))
    assert [i for i, _ in seen] == [2, 3] and [g is None for g in got] == [False, False, True, True]


def test_served_curve_plot_lines_are_serve_curve_of_each_device():
    # plots.served_curve solves the devices at once; each line is its device's serve_curve
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    devices, conc = ["h100-sxm", "h200", "mi300x"], [1, 4, 16, 64, 256]
    ax = mb.plots.served_curve("llama-3.3-70b", devices, concurrency=conc)
    assert len(ax.lines) == 3
    for line, hw in zip(ax.lines, devices):
        c = serve_curve("llama-3.3-70b", hw, concurrency=conc, weight_dtype="fp8", kv_dtype="fp8", n_chips=8)
        assert bits(line.get_xdata()) == bits(c.tok_s_per_user) and bits(line.get_ydata()) == bits(
            c.output_tok_s_per_chip)
