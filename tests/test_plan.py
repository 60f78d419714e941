"""Plans (issue 33): a configuration's evaluation traced once into straight-line Python gives the
cold evaluation's figures bit for bit, for every workload, and never answers for another
configuration."""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import membound as mb
from membound.physics import estimate as est
from membound.physics.plan import run, trace
from membound.physics.roofline import floor, maximum, sum_over_context, where


@pytest.fixture
def plans(monkeypatch):
    """`on(True)`: estimate() plans a configuration alone from its first evaluation; `on("shared")`: from
    its structure's shared plan, traced on the structure's first evaluation, and never alone;
    `on(False)`: never."""
    def on(planned: bool | str) -> None:
        monkeypatch.setattr(est, "_PLAN_AFTER", 1 if planned is True else 10**9)
        monkeypatch.setattr(est, "_OWN_AFTER", 1 if planned is True else 10**9)
        monkeypatch.setattr(est, "_SHARE_AFTER", 1 if planned == "shared" else 10**9)
        monkeypatch.setattr(est, "_SHAPE_AFTER", 1)
        est._PLANS.clear()
        est._SHARED.clear()
    yield on
    est._PLANS.clear()
    est._SHARED.clear()


def _f(B):
    # 2 B or 3, whichever is larger; B / 4 above 1, else 1; the whole thirds of B
    return maximum(B * 2.0, 3.0) + where(B > 1.0, B / 4.0, 1.0) + floor(B / 3.0)


def test_a_plan_computes_what_the_float_path_computes():
    plan = trace(_f, ("B",))
    assert plan is not None
    # B = 1: max(2, 3) = 3, not above 1 so 1, floor(1/3) = 0: 3 + 1 + 0 = 4
    assert plan(1.0) == _f(1.0) == 4.0
    # B = 5: max(10, 3) = 10, 5/4 = 1.25, floor(5/3) = 1: 12.25
    assert plan(5.0) == _f(5.0) == 12.25
    for x in (0.0, 0.5, 1.5, 2.999, 1e9, 3.0 * 2**52):
        assert plan(x) == _f(x)
    assert "maximum" not in plan.source and "where" not in plan.source    # straight-line Python


def test_figures_of_the_configuration_alone_are_constants_of_the_plan():
    # the sum of max(memory, compute, floor) over 4 contexts from 2: memory 1 + 0.5 L, compute 2,
    # floor 0: L = 2, 3, 4, 5 give 2, 2.5, 3, 3.5 -> 11; the pieces' arithmetic is the plan's
    def f(S):
        return sum_over_context(((0.0, math.inf, 0.0, 1.0),), 1.0, 0.5, 2.0 * 1.0, 0.0, 0.0, S, 4.0)
    plan = trace(f, ("S",))
    assert plan(2.0) == f(2.0) == 11.0
    assert "2.0 * 1.0" not in plan.source


def test_a_branch_on_a_workload_value_is_not_traced():
    assert trace(lambda B: 1.0 if B > 0.0 else 2.0, ("B",)) is None
    assert trace(lambda B: float(B), ("B",)) is None
    assert trace(lambda B: max(B, 1.0), ("B",)) is None


def test_a_plan_whose_line_raises_answers_none():
    plan = trace(lambda B: 1.0 / B, ("B",))
    assert run(plan, 4.0) == 0.25 and run(plan, 0.0) is None


def _figures(kw, loads):
    out = []
    for B, S, T in loads:
        try:
            r = mb.estimate(**kw, batch=B, prompt_tokens=S, output_tokens=T, check_memory=False,
                            allow_beyond_context=True)
        except mb.MemboundError as e:
            out.append(f"{type(e).__name__}: {e}")
        else:
            out.append(repr(r.to_dict()) + str(r))     # repr: every float to the last bit, -0.0 apart
    return out


SPECULATIVE = (None, mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=3, acceptance_rate=0.7),
               mb.SpeculativeDecoding(gamma=4, acceptance_rate=0.6, draft_cost=0.05),
               mb.SpeculativeDecoding(gamma=2, acceptance_rate=0.8, head_params=1e9))
CONFIGS = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v3.2",
                              "gemma-3-27b", "mixtral-8x7b"]),
    "hardware": st.sampled_from(["h100-sxm", "mi300x", "b200", "sambanova-sn40l", "cerebras-wse-3", "groq-lpu",
                                 "apple-m2-max", "tpu-v5e"]),
    "runtime": st.sampled_from([None, "ideal", "vllm", "llama.cpp", "tensorrt-llm", "sglang"]),
    "weight_dtype": st.sampled_from(["bf16", "fp8", "int4", "q4_0", "mxfp4"]),
    "n_chips": st.sampled_from([1, 2, 8]),
    "speculative": st.sampled_from(SPECULATIVE),
})
WORKLOADS = st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 70000), st.integers(1, 9000)),
                     min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kw=CONFIGS, loads=WORKLOADS)
def test_a_planned_estimate_is_the_cold_one(plans, kw, loads):
    plans(False)
    cold = _figures(kw, loads)
    plans(True)
    assert _figures(kw, loads) == cold
    plans("shared")
    assert _figures(kw, loads) == cold


README = dict(model="llama-3.1-70b", hardware="h100-sxm", n_chips=8, weight_dtype="fp8")
CHANGES = dict(model="llama-3.1-8b", hardware="h200", runtime="vllm", weight_dtype="bf16", kv_dtype="fp8",
               activation_dtype="bf16", n_chips=4, parallel=mb.Parallel(tp=4, pp=2),
               speculative=mb.SpeculativeDecoding(gamma=3, acceptance_rate=0.7, draft_cost=0.1),
               price_usd_per_hour=9.0, dense_weight_dtype="bf16",
               quantization=mb.Quantization("fp8", "fp8", "fp8"))


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_each_argument_has_its_own_plan(plans, name):
    # the dense tensors' own format matters where they are apart from routed experts (a MoE)
    first = {**README, "model": "qwen3-30b-a3b"} if name == "dense_weight_dtype" else README
    kw = {**first, name: CHANGES[name]}
    if name == "quantization":
        kw["dense_weight_dtype"] = None     # one or the other
    if name == "parallel":
        kw["n_chips"] = 8
    loads = [(16, 2048, 512), (3, 100, 7)]
    plans(False)
    cold, base = _figures(kw, loads), _figures(first, loads)
    plans(True)
    assert _figures(first, loads) == base               # the first's plan, then the change's
    assert _figures(kw, loads) == cold
    assert cold != base                                 # each argument changes the answer
    assert sum(bool(e[2]) for e in est._PLANS.values()) == 2    # two plans: neither answered for the other


def test_the_plans_are_bounded_and_built_after_a_few_evaluations(monkeypatch):
    est._PLANS.clear()
    est._SHARED.clear()
    r = [mb.estimate(**README, batch=b) for b in range(1, est._PLAN_AFTER + 1)]
    (entry,) = est._PLANS.values()
    assert callable(entry[2]) and entry[1] == est._PLAN_AFTER     # planned on its _PLAN_AFTER-th evaluation
    assert mb.estimate(**README, batch=1) == r[0]
    monkeypatch.setattr(est, "_SEEN_MAX", 3)
    for n in (1, 2, 4, 8):
        mb.estimate("llama-3.1-8b", "h100-sxm", n_chips=n)
    assert len(est._PLANS) <= 3
    est._PLANS.clear()
    est._SHARED.clear()


def test_a_configuration_of_a_planned_structure_is_planned_from_its_first_evaluation(plans, monkeypatch):
    # bf16 or int8 weights, or another price per chip-hour, on README's model, device and layout:
    # numbers apart (bytes per weight, peak FLOP/s, price), one structure; 4 chips: another layout
    plans(False)
    loads = [(16, 2048, 512), (3, 100, 7), (1, 0, 1)]
    others = [{**README, "weight_dtype": "bf16"}, {**README, "weight_dtype": "int8"},
              {**README, "price_usd_per_hour": 2.5}]
    cold = [_figures(kw, loads) for kw in others]
    four = _figures({**README, "n_chips": 4}, loads)
    plans(False)
    monkeypatch.setattr(est, "_SHARE_AFTER", 2)
    mb.estimate(**README)
    assert next(iter(est._SHARED.values()))[2] is None            # one evaluation of the structure: cold
    mb.estimate(**README)
    assert callable(next(iter(est._SHARED.values()))[2])          # traced on its second
    assert [_figures(kw, loads) for kw in others] == cold
    assert len(est._SHARED) == 1 and len(est._PLANS) == 4 and all(callable(e[2]) for e in est._PLANS.values())
    mb.estimate(**{**README, "n_chips": 4})
    (entry,) = (e for e in est._PLANS.values() if e[0].n_chips == 4)
    assert len(est._SHARED) == 2 and entry[2] is None       # evaluated cold: its structure not yet planned
    assert _figures({**README, "n_chips": 4}, loads) == four and callable(entry[2])    # then planned


def test_a_configuration_evaluated_often_is_traced_alone(plans, monkeypatch):
    # its structure's plan until its own, whose figures are the configuration's constants (folded):
    # on its _OWN_AFTER-th evaluation where the shared plan answers for it (here 5), not _PLAN_AFTER's (3)
    plans(False)
    monkeypatch.setattr(est, "_SHARE_AFTER", 1)
    monkeypatch.setattr(est, "_PLAN_AFTER", 3)
    monkeypatch.setattr(est, "_OWN_AFTER", 5)
    results = [mb.estimate(**README, batch=b) for b in (1, 2, 3, 1)]
    (entry,) = est._PLANS.values()
    shared = next(iter(est._SHARED.values()))[2]
    assert entry[1] == 4 and callable(entry[2]) and not hasattr(entry[2], "source") \
        and entry[4] == 5       # the shared plan's maker's, made for this configuration: not yet its own
    results += [mb.estimate(**README, batch=b) for b in (2, 3)]
    assert entry[1] == 5 and callable(entry[2]) and "def make" not in entry[2].source
    assert "def make" in shared.source and results[0] == results[3] and results[1:3] == results[4:]


def test_a_large_output_dict_is_new_each_call_with_its_keys_in_order():
    # eight or more entries: a copy of the constant ones, the others stored into it
    def f(B):
        return {**{f"k{i}": float(i) for i in range(8)}, "x": B * 2.0, "xs": [B], "t": ("a", 1), "n": None}
    plan = trace(f, ("B",))
    one, two = plan(1.5), plan(1.5)
    assert one == two == f(1.5) and list(one) == list(f(1.5))
    assert one["x"] == 3.0 and one is not two and one["xs"] is not two["xs"]
    assert ".copy()" in plan.source


def test_a_planned_result_holds_objects_of_its_own(plans):
    plans(True)
    spec = mb.SpeculativeDecoding(gamma=3, acceptance_rate=0.7, draft_cost=0.1)
    one, two = (mb.estimate(**README, speculative=spec) for _ in range(2))
    assert callable(next(iter(est._PLANS.values()))[2])        # the second from the plan
    assert one == two and one.speculative is not two.speculative
    one.speculative["gamma"] = 99                               # a caller's change stays its own
    assert mb.estimate(**README, speculative=spec).speculative["gamma"] == 3


def test_what_a_range_decides_is_folded_and_what_it_does_not_is_not():
    # B a count from 1 to 9 as a float: B * 0.0 is +0.0 and x + 0.0 is x for every such B (finite,
    # not negative, never -0.0), B > 0.5 is True, max(B, 0.0) is B; max(B, 2.0) depends on B
    def f(B):
        return (B * 0.0 + 1.0, (B + 0.0) / 2.0, 3.0 if B > 0.5 else 4.0, maximum(B, 0.0), maximum(B, 2.0), abs(B))
    plan = trace(f, ("B",), spans=((1.0, 9.0),))
    assert plan is not None
    assert "0.0" not in plan.source.split("raise")[1] and "> 0.5" not in plan.source and "abs" not in plan.source
    for x in (1.0, 1.5, 2.0, 9.0):
        assert repr(plan(x)) == repr(f(x))         # (1.0, x / 2, 3.0, x, max(x, 2), x)
    assert run(plan, 0.5) is None and run(plan, 10.0) is None      # outside its range: the caller's cold path
    # without a range nothing is folded: B may be -0.0 (-0.0 + 0.0 is +0.0), inf (inf * 0.0 is NaN) or NaN
    free = trace(lambda B: (B * 0.0, B + 0.0), ("B",))
    for x in (-0.0, math.inf, 2.0):
        assert repr(free(x)) == repr((x * 0.0, x + 0.0))
    assert trace(lambda B: 1.0 if B > 0.5 else 2.0, ("B",), spans=((0.0, 9.0),)) is None    # undecided


def test_a_difference_has_a_range_only_where_it_cannot_go_below_zero():
    # T - 1.0 for T from 1 to 9: 0 to 8, so (T - 1.0) * 0.0 is +0.0; 5.0 - T may be negative (-4 * 0.0
    # is -0.0), so its product stays a line
    plan = trace(lambda T: ((T - 1.0) * 0.0, (5.0 - T) * 0.0), ("T",), spans=((1.0, 9.0),))
    assert plan.source.count("* 0.0") == 1
    for x in (1.0, 5.0, 9.0):
        assert repr(plan(x)) == repr(((x - 1.0) * 0.0, (5.0 - x) * 0.0))


OTHERS = st.sampled_from([("model", m) for m in ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "mixtral-8x7b",
                                                 "gemma-3-27b", "gpt-oss-20b")]
                         + [("hardware", h) for h in ("h100-sxm", "h200", "b200", "mi300x", "a100-80gb", "l40s",
                                                      "apple-m2-max")])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=CONFIGS, other=OTHERS, loads=WORKLOADS)
def test_a_plan_traced_on_another_model_or_device_gives_the_cold_figures(plans, first, other, loads):
    # the first configuration traces its structure's plan; the second, its model or device another,
    # runs that plan where its structure is the first's (`_shape`: the numbers of model and device
    # apart, their truths alike), else its own structure's
    kw = {**first, other[0]: other[1]}
    plans(False)
    cold = _figures(kw, loads)
    plans("shared")
    _figures(first, loads[:1])
    assert _figures(kw, loads) == cold


def test_models_and_devices_of_one_shape_share_one_plan(plans):
    # 8B and 70B (dense, untied, no windows, 32 and 80 layers) on H100 and H200 (one tier each, no
    # read-width) at 8 chips (tp=8): one structure, traced once; each configuration's figures its own
    plans(False)
    loads = [(16, 2048, 512), (3, 100, 7), (1, 0, 1)]
    kws = [{**README, "model": m, "hardware": h} for m in ("llama-3.1-70b", "llama-3.1-8b") for h in ("h100-sxm", "h200")]
    cold = [_figures(kw, loads) for kw in kws]
    plans("shared")
    assert [_figures(kw, loads) for kw in kws] == cold
    assert len(est._SHARED) == 1 and len(est._PLANS) == 4 and all(callable(e[2]) for e in est._PLANS.values())
    assert len(set(map(id, (e[2] for e in est._PLANS.values())))) == 4      # one maker, a plan each


def test_a_structure_untraceable_across_models_falls_back_to_its_model_and_device(plans):
    # llama.cpp on CUDA launches each layer of a multi-token pass (`launch_s`: `if not n_layers x its
    # per-layer cost`, a product of a model's number that a shared plan does not branch on): its
    # structure across models is untraceable, so each model and device gets a structure of its own
    plans(False)
    kw = {**README, "n_chips": 1, "runtime": "llama.cpp-cuda", "weight_dtype": "q4_k_m", "model": "llama-3.1-8b"}
    loads = [(16, 2048, 512), (3, 100, 7)]
    cold = _figures(kw, loads)
    plans("shared")
    first = _figures(kw, loads[:1])
    assert first == cold[:1] and any(e[2] is False for e in est._SHARED.values())
    assert _figures(kw, loads) == cold and all(callable(e[2]) for e in est._PLANS.values())
