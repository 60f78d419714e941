"""A served engine whose tensor-parallel all-reduces take measured kernel time at their message size (Served.allreduce_time
over the profile's achievable.allreduce_time_by_bytes; parallel.collective_s), where every other runtime prices the link's
hops and bandwidth. Numbers derived by hand from the figures the profiles ship (TensorRT-LLM 1.2.0rc5's all-reduce
timings, ai-dynamo/aiconfigurator@095f58a; `python scripts/kernel_tables.py AICONFIGURATOR --allreduce`)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.catalog.hardware import Hardware, load_hardware
from membound.physics.core import chip_of, comm_s
from membound.physics.efficiency import allreduce_times, efficiency
from membound.physics.estimate import prepare
from membound.physics.parallel import tabled_allreduce_s

# Llama 3.1 405B: 126 decoder layers, hidden 16,384; two all-reduces a layer: 252 a pass. The residual stream is 16-bit
# on a GPU (2 bytes a value), so a pass of M tokens all-reduces M x 16,384 x 2 bytes each time
ALLREDUCES, HIDDEN_BYTES = 252, 16_384 * 2


def _served(on: bool) -> mb.Runtime:
    trt = mb.load_runtime("tensorrt-llm")
    return trt.model_copy(update={"name": f"trt-allreduce-time-{on}",
                                  "served": trt.served.model_copy(update={"allreduce_time": on})})


def _chip(model: str, hw: str, on: bool, n_chips: int, weights: str = "fp8"):
    p = prepare(model, hw, runtime=_served(on), weight_dtype=weights, n_chips=n_chips)
    return p, chip_of(p.consts, p.hardware, p.eff, p.knobs, p.chip_base, p.pinned, 0.0, 0.0)[0]


def test_the_profiles_tables():
    b200 = allreduce_times(load_hardware("b200"))
    # per rank count 2, 4, 8: 23 sizes from 128 to 536,870,912 bf16 values = 256 to 1,073,741,824 bytes
    assert [n for n, _, _ in b200] == [2, 4, 8]
    assert all(len(size) == len(t) == 23 and (size[0], size[-1]) == (256.0, 1_073_741_824.0) for _, size, t in b200)
    # over 4 ranks: 2,097,152 values (4,194,304 bytes) 0.023839 ms, 4,194,304 values (8,388,608 bytes) 0.049548 ms
    _, size, t = b200[1]
    assert (size[14], t[14]) == (4_194_304.0, 2.3839e-05) and (size[15], t[15]) == (8_388_608.0, 4.9548e-05)
    assert [n for n, _, _ in allreduce_times(load_hardware("h200"))] == [2, 4, 8]
    assert [n for n, _, _ in allreduce_times(load_hardware("h100-sxm"))] == [2, 4, 8]
    for part in ("gh200-96gb", "h200-nvl", "h100-pcie"):     # no table measured: the link
        assert allreduce_times(load_hardware(part)) == ()


def test_b200_405b_tp4_between_two_table_points():
    # 192 tokens a pass on 4 B200: each all-reduce moves 192 x 32,768 = 6,291,456 bytes, half way between the table's
    # 4,194,304 (2.3839e-05 s) and 8,388,608 (4.9548e-05 s): 2.3839e-05 + (4.9548e-05 - 2.3839e-05) x 2,097,152 / 4,194,304
    # = 2.3839e-05 + 1.28545e-05 = 3.66935e-05 s; 252 of them: 9.246762e-03 s a pass
    p, ch = _chip("llama-3.1-405b", "b200", True, 4)
    assert p.layout == mb.Parallel(tp=4)
    assert 192 * HIDDEN_BYTES == 6_291_456
    assert tabled_allreduce_s(ch.links.tp_bytes, ch.links.tp_seconds, 6_291_456.0) == pytest.approx(3.66935e-05,
                                                                                                   rel=1e-12)
    assert comm_s(p.consts, ch, 192.0) == pytest.approx(ALLREDUCES * 3.66935e-05, rel=1e-12)
    assert comm_s(p.consts, ch, 192.0) == pytest.approx(9.246762e-03, rel=1e-9)
    # the link's term, switched off: 252 x (2 hops x 3 us + 2 x 3/4 x 6,291,456 B / 900 GB/s)
    # = 252 x (6e-06 + 1.048576e-05) = 4.15441152e-03 s: the kernels take 2.23x the link's figure at this size
    q, off = _chip("llama-3.1-405b", "b200", False, 4)
    assert comm_s(q.consts, off, 192.0) == pytest.approx(252 * (6e-06 + 1.5 * 6_291_456 / 900e9), rel=1e-12)
    assert comm_s(q.consts, off, 192.0) == pytest.approx(4.15441152e-03, rel=1e-9)


def test_below_and_beyond_the_tables_sizes():
    p, ch = _chip("llama-3.1-405b", "b200", True, 4)
    size, t = ch.links.tp_bytes, ch.links.tp_seconds
    # below the first size (256 bytes: 4.5517e-06 s) its time, the kernel's latency; no tokens still launch it, as
    # the link's hops are paid at no tokens
    assert tabled_allreduce_s(size, t, 100.0) == 4.5517e-06
    assert comm_s(p.consts, ch, 0.0) == pytest.approx(ALLREDUCES * 4.5517e-06, rel=1e-12)
    # past the last size (1,073,741,824 bytes: 0.00258 s over 4 B200) the time grows with the bytes at that size's
    # rate: 2,147,483,648 bytes take 2 x 0.00258 = 0.00516 s
    assert (size[-1], t[-1]) == (1_073_741_824.0, 0.00258)
    assert tabled_allreduce_s(size, t, 2_147_483_648.0) == pytest.approx(0.00516, rel=1e-12)


def test_only_a_tabled_rank_count_on_a_tabled_part():
    # one chip: no all-reduce term at all (tp 1: 0 x anything); a part without a table: the link, switched on or off
    for on in (True, False):
        p, ch = _chip("llama-3.1-70b", "b200", on, 1)
        assert ch.links.tp_bytes == () and comm_s(p.consts, ch, 192.0) == 0.0
    on_p, on = _chip("llama-3.1-70b", "gh200-96gb", True, 2)
    off_p, off = _chip("llama-3.1-70b", "gh200-96gb", False, 2)
    assert on.links.tp_bytes == () and comm_s(on_p.consts, on, 64.0) == comm_s(off_p.consts, off, 64.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 60000.0), min_size=1, max_size=20))
def test_an_array_of_passes_is_each_pass_alone(tokens):
    # a sweep's array path gives each element the float path's figure (base.stacking), either side of the table's
    # sizes, and the tabled term never falls below its smallest time a pass
    p, ch = _chip("llama-3.1-405b", "b200", True, 4)
    arr = comm_s(p.consts, ch, np.array(tokens))
    each = [comm_s(p.consts, ch, x) for x in tokens]
    assert arr.tolist() == pytest.approx(each, rel=1e-15, abs=0.0)
    assert all(c >= ALLREDUCES * min(ch.links.tp_seconds) * (1 - 1e-12) for c in each)


def test_a_runtime_without_the_switch_is_unchanged():
    eff = efficiency(mb.load_runtime("tensorrt-llm"), load_hardware("b200"))
    assert eff.allreduce_time == ()
    kw = dict(batch=16, prompt_tokens=1000, output_tokens=200, weight_dtype="fp8", n_chips=4)
    shipped = mb.estimate("llama-3.1-405b", "b200", runtime="tensorrt-llm", **kw)
    off = mb.estimate("llama-3.1-405b", "b200", runtime=_served(False), **kw)
    on = mb.estimate("llama-3.1-405b", "b200", runtime=_served(True), **kw)
    assert (off.tpot_s, off.ttft_s) == (shipped.tpot_s, shipped.ttft_s)
    assert on.tpot_s > shipped.tpot_s


def test_a_table_is_checked():
    d = load_hardware("b200").model_dump()
    d["achievable"]["allreduce_time_by_bytes"] = {1: d["achievable"]["allreduce_time_by_bytes"][4]}
    with pytest.raises(Exception, match="allreduce_time_by_bytes"):
        Hardware.model_validate(d)
    d["achievable"]["allreduce_time_by_bytes"] = {4: {"bytes": [512, 256], "seconds": [5e-6, 4e-6]}}
    with pytest.raises(Exception, match="strictly increasing"):
        Hardware.model_validate(d)
