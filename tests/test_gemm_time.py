"""A served engine whose dense layer GEMMs take measured kernel time at the pass's M tokens (Served.gemm_time over
the profile's achievable.gemm_time_by_tokens; core.tabled_gemm_s), where every other runtime computes them at its
fractions. Numbers derived by hand from the figures the profiles ship (TensorRT-LLM 1.2.0rc5's kernel timings,
ai-dynamo/aiconfigurator@095f58a; `python scripts/kernel_tables.py AICONFIGURATOR --curves`)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.catalog.hardware import Hardware, load_hardware
from membound.fidelity import mlperf_rows
from membound.physics.core import chip_of, pass_terms, tabled_gemm_s
from membound.physics.efficiency import efficiency, gemm_times
from membound.physics.estimate import prepare

# Llama-2-70B: 80 layers of 855,654,400 weights (the four GEMMs' 855,638,016 and two norms of 8,192) and the
# final norm's 8,192: 80 x 855,654,400 + 8,192 = 68,452,360,192 layer weights (ModelConsts.layer_params)
LAYER_WEIGHTS = 68_452_360_192


def _served(on: bool) -> mb.Runtime:
    trt = mb.load_runtime("tensorrt-llm")
    return trt.model_copy(update={"name": f"trt-gemm-time-{on}",
                                  "served": trt.served.model_copy(update={"gemm_time": on})})


def _setup(model: str, hw: str, on: bool, weights: str, **kw):
    p = prepare(model, hw, runtime=_served(on), weight_dtype=weights, **kw)
    return p, chip_of(p.consts, p.hardware, p.eff, p.knobs, p.chip_base, p.pinned, 0.0, 0.0)[0]


def _at(curve, m: int) -> float:
    return curve[2][curve[1].index(m)]


def test_the_profiles_curves():
    (b200,) = gemm_times(load_hardware("b200"))
    # B200 nvfp4 at M = 512: 3.1517e-13 s a weight; Llama-2-70B's four layer GEMMs (855,638,016 weights) x 80
    # layers: 3.1517e-13 x 855,638,016 x 80 = 21.573 ms, the table's 269.7 us a layer (mlperf22's 21.57 ms)
    assert b200[0] == "nvfp4" and len(b200[1]) == 74 and (b200[1][0], b200[1][-1]) == (1.0, 32768.0)
    assert _at(b200, 512) == 3.1517e-13
    assert _at(b200, 512) * 855_638_016 * 80 == pytest.approx(21.573e-3, rel=1e-4)
    (h200,) = gemm_times(load_hardware("h200"))
    assert h200[0] == "fp8" and len(h200[1]) == 21 and h200[1][-1] == 8192.0
    assert gemm_times(load_hardware("h100-sxm"))[0][0] == "fp8"
    # parts no table measured keep the runtime's rates
    for part in ("gh200-96gb", "h200-nvl", "h100-pcie"):
        assert gemm_times(load_hardware(part)) == ()


def test_b200_nvfp4_llama2_70b_at_512_tokens():
    # a prompt chunk of 512 tokens on one B200: 3.1517e-13 s a weight x 68,452,360,192 layer weights
    # = 0.0215741 s (21.57 ms), where the engine's constant rate gives 512 x its prefill GEMM seconds a token
    p, ch = _setup("llama-2-70b", "b200", True, "nvfp4")
    assert p.knobs.gemm_tokens[39] == 512.0 and p.knobs.gemm_s_per_weight[39] == 3.1517e-13
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 512.0) == pytest.approx(3.1517e-13 * LAYER_WEIGHTS, rel=1e-12)
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 512.0) == pytest.approx(21.574e-3, rel=1e-4)
    # 512 decode tokens add their LM head at the chip's dense rate: 2 x 32,000 x 8,192 = 524,288,000 FLOPs a token
    assert (tabled_gemm_s(p.consts, p.knobs, ch, 512.0, 0.0) - tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 512.0)
            == pytest.approx(512 * 524_288_000 / ch.dense_flops, rel=1e-9))
    # the pass's compute: the table's GEMMs in place of the engine's 512 prompt tokens x prefill_gemm
    _, off = _setup("llama-2-70b", "b200", False, "nvfp4")
    kw = dict(chunk=512.0, prompts=1.0, pairs=512 * 513 / 2 * 80)
    on_p = pass_terms(p.consts, p.eff, p.knobs, ch, 0.0, **kw)
    off_p = pass_terms(p.consts, p.eff, prepare("llama-2-70b", "b200", runtime=_served(False),
                                                weight_dtype="nvfp4").knobs, off, 0.0, **kw)
    assert on_p.comp - off_p.comp == pytest.approx(21.574e-3 - 512 * off.prefill_gemm, rel=1e-4)
    assert on_p.mem == off_p.mem and on_p.over == off_p.over


def test_between_and_beyond_the_tables_points():
    p, ch = _setup("llama-2-70b", "h200", True, "fp8")
    # H200 fp8: M = 256 4.7971e-13, M = 384 6.7158e-13 s a weight; at 320, half way: 5.75645e-13
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 320.0) == pytest.approx(5.75645e-13 * LAYER_WEIGHTS, rel=1e-12)
    # past the last point (8,192: 1.4282e-11) the time grows with M at that rate: 16,384 tokens 2.8564e-11 a weight
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 16384.0) == pytest.approx(2.8564e-11 * LAYER_WEIGHTS, rel=1e-12)
    # below the first (M = 1: 3.0942e-13) its figure: a kernel's fixed time; no tokens, no GEMMs
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 0.5) == pytest.approx(3.0942e-13 * LAYER_WEIGHTS, rel=1e-12)
    assert tabled_gemm_s(p.consts, p.knobs, ch, 0.0, 0.0) == 0.0
    # tensor parallel: a rank multiplies a quarter of the weights at the same M: 4.7971e-13 x LAYER_WEIGHTS / 4
    p4, ch4 = _setup("llama-2-70b", "h200", True, "fp8", n_chips=4)
    assert tabled_gemm_s(p4.consts, p4.knobs, ch4, 0.0, 256.0) == pytest.approx(4.7971e-13 * LAYER_WEIGHTS / 4,
                                                                                  rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 40000.0), min_size=1, max_size=20), st.floats(0.0, 4096.0))
def test_an_array_of_passes_is_each_pass_alone(chunks, decode):
    # a sweep's array path gives each element the float path's figure (base.stacking), both sides of the table's
    # last point and at no tokens; and a pass never takes less than its first point's time a weight x its weights
    p, ch = _setup("llama-2-70b", "b200", True, "nvfp4")
    arr = tabled_gemm_s(p.consts, p.knobs, ch, decode, np.array(chunks))
    each = [tabled_gemm_s(p.consts, p.knobs, ch, decode, c) for c in chunks]
    assert arr.tolist() == pytest.approx(each, rel=1e-15, abs=0.0)
    floor = min(p.knobs.gemm_s_per_weight) * LAYER_WEIGHTS
    assert all(t >= floor * (1 - 1e-12) for t, c in zip(each, chunks) if decode + c > 0)


def test_only_tabled_dense_gemms_take_the_curve():
    # a model with routed experts (the curve is dense layers'), a format no table timed (bf16 on H200), a part
    # without a table (GH200): no curve, the runtime's rates
    assert _setup("mixtral-8x7b", "h200", True, "fp8")[0].knobs.gemm_tokens == ()
    assert _setup("llama-2-70b", "h200", True, "bf16")[0].knobs.gemm_tokens == ()
    assert _setup("llama-2-70b", "gh200-96gb", True, "fp8")[0].knobs.gemm_tokens == ()


def test_a_runtime_without_the_switch_is_unchanged():
    eff = efficiency(mb.load_runtime("tensorrt-llm"), load_hardware("b200"))
    assert eff.gemm_time == ()
    assert prepare("llama-2-70b", "b200", weight_dtype="nvfp4").knobs.gemm_tokens == ()
    kw = dict(batch=64, prompt_tokens=1000, output_tokens=200, weight_dtype="nvfp4")
    shipped = mb.estimate("llama-2-70b", "b200", runtime="tensorrt-llm", **kw)
    off = mb.estimate("llama-2-70b", "b200", runtime=_served(False), **kw)
    on = mb.estimate("llama-2-70b", "b200", runtime=_served(True), **kw)
    assert (off.tpot_s, off.ttft_s) == (shipped.tpot_s, shipped.ttft_s)
    assert on.tpot_s != shipped.tpot_s


@pytest.mark.parametrize("switch, shipped", [("gemm_time", True), ("allreduce_time", False)])
def test_a_kernel_table_switch_names_its_rounds(switch, shipped):
    # generations.yaml's gemm_time (form TE, priced) and allreduce_time (form TEA, measured and not adopted):
    # each names the rounds whose C++ engines run the timed kernels, v5.1 on, and nothing before them
    g = mlperf_rows.load_generations()["tensorrt-llm-cpp"]
    assert g[switch]["priced"] is shipped
    assert bool(getattr(mlperf_rows.generation_runtime("tensorrt-llm-cpp", "v5.1").served, switch)) is shipped

    def served(block: dict, rnd: str):
        return mlperf_rows.generation_runtime("tensorrt-llm-cpp", rnd,
                                              generations={"tensorrt-llm-cpp": {**g, switch: block}}).served

    on = {**g[switch], "priced": True}
    assert getattr(served(on, "v5.1"), switch) and getattr(served(on, "v6.1"), switch)
    assert not getattr(served(on, "v4.1"), switch)
    assert not getattr(served({**g[switch], "priced": False}, "v5.1"), switch)
    with pytest.raises(mb.errors.InvalidInputError, match=f"{switch}.rounds"):
        served({**g[switch], "rounds": "v5.1"}, "v5.1")
    with pytest.raises(mb.errors.InvalidInputError, match=f"{switch}.priced"):
        served({**g[switch], "priced": "yes"}, "v5.1")


def test_a_curve_is_checked():
    d = load_hardware("h200").model_dump()
    d["achievable"]["gemm_time_by_tokens"] = {"fp9": d["achievable"]["gemm_time_by_tokens"]["fp8"]}
    with pytest.raises(Exception, match="gemm_time_by_tokens"):
        Hardware.model_validate(d)
    d["achievable"]["gemm_time_by_tokens"] = {"fp8": {"tokens": [2, 1], "seconds_per_weight": [1e-13, 2e-13]}}
    with pytest.raises(Exception, match="strictly increasing"):
        Hardware.model_validate(d)
