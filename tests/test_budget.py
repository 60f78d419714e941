"""The constant budget (membound.fidelity.budget): every constant of every runtime, counted by hand."""
import pytest

import membound as mb

from membound.fidelity.budget import FREE, constant_budget, format_budget, unit_of


@pytest.fixture(scope="module")
def budget():
    return constant_budget()


def test_units_come_from_the_names():
    assert unit_of("per_layer_overhead_s") == "s" and unit_of("per_layer_overhead_cycles") == "cycles"
    assert unit_of("bandwidth_fraction") == "share" and unit_of("moe_gemm_efficiency") == "share"
    assert unit_of("dp_balance_steps") == "steps" and unit_of("moe_tile_tokens") == "tokens"
    assert unit_of("power_limit_w_per_tflop") == "W per fp32 TFLOP/s"


def test_nemo_fits_one_constant_over_two_chips_and_takes_its_fractions_from_the_chips(budget):
    # calibrate.FIT["nemo"]: the per-layer floor in cycles alone, fitted on the NeMo rows of the H100
    # and the A100: 2 chips allow 2 // 2 = 1. Its fractions are each chip's profile figures
    # (a100-80gb 0.851 / 0.869, h100-sxm 0.9 / 0.830: bf16 MAMF 821.2 / 989 = 0.8303), one line per chip,
    # neither fitted nor free. The A100's bandwidth share is gpu-benches' copy kernel on an A100-SXM4-80GB,
    # 1737 / 2039 = 0.851: measured
    b = budget["nemo"]
    fitted = [c for c in b.constants if c.kind == "fitted"]
    assert [c.name for c in fitted] == ["per_layer_overhead_cycles"] and fitted[0].rows == 32
    assert set(b.chips) == {"h100-sxm", "a100-80gb"} and b.allowed == 1 and b.free == 1 and not b.over
    prof = {(c.entry, c.name): c.value for c in b.constants if c.kind == "profile"}
    assert prof == {("a100-80gb", "bandwidth_fraction"): 0.851, ("h100-sxm", "bandwidth_fraction"): 0.9,
                    ("a100-80gb", "compute_fraction"): 0.869, ("h100-sxm", "compute_fraction"): 0.830}
    why = {(c.entry, c.name): c.why.split(":")[0] for c in b.constants if c.kind == "profile"}
    assert why == {("a100-80gb", "bandwidth_fraction"): "measured", ("h100-sxm", "bandwidth_fraction"): "measured",
                   ("a100-80gb", "compute_fraction"): "measured", ("h100-sxm", "compute_fraction"): "measured"}


def test_the_eager_engines_on_two_chips_are_within_budget(budget):
    # Hugging Face transformers and TinyChat: RTX 4090 and RTX A6000 rows, one free constant each (their
    # per-layer floors); the A6000's bandwidth share is its profile's, measured: FluidX3D's load-and-store
    # LBM step, best 8814 MLUPs/s x 77 B = 678.678 GB/s of 768 = 0.884 (a lower bound, the highest found)
    for name, fitted in (("hf-transformers", "per_layer_overhead_s"), ("tinychat", "per_layer_overhead_cycles")):
        b = budget[name]
        assert [c.name for c in b.constants if c.kind in FREE] == [fitted] and b.allowed == 1 and not b.over
        a6000_bw = next(c for c in b.constants if (c.entry, c.name) == ("rtx-a6000", "bandwidth_fraction"))
        assert a6000_bw.kind == "profile" and a6000_bw.why.startswith("measured")
        assert a6000_bw.value == round(8814 * 77 / 1e3 / 768, 3) == 0.884


def test_llama_cpp_metal_is_within_its_budget(budget):
    # six figures of one default entry over 15 Apple chips: 15 // 2 = 7 >= 6
    b = budget["llama.cpp-metal"]
    assert b.free == 6 and len(b.chips) == 15 and b.allowed == 7 and not b.over


def test_the_served_engines_set_figures_with_reasons_and_count_what_they_fit(budget):
    # vLLM fits 5 figures (serve_calibrate.FIXED sets 6 of its 11: per_sequence_layer_s to 0, its per-sequence
    # cost being per step) on its rows of H100 SXM and H200:
    # 2 chips allow 2 // 2 = 1, so it is over by 4; nothing is frozen. SGLang fits 4 on H200 and sets its
    # all-to-all to DeepEP's: 4 free over 1 chip, which allows none; TensorRT-LLM 5
    from membound.fidelity.serve_calibrate import FIXED
    b = budget["vllm"]
    served = {c.name: c for c in b.constants if c.entry == "served"}
    assert {k for k, c in served.items() if c.kind == "set"} == set(FIXED["vllm"]) and len(FIXED["vllm"]) == 6
    assert all(served[k].why for k in FIXED["vllm"]) and not [c for c in b.constants if c.kind == "frozen"]
    assert {k for k, c in served.items() if c.kind == "fitted"} == {"compute_fraction", "per_layer_s", "per_sequence_s",
                                                                     "per_request_s", "moe_expert_rows"}
    assert b.free == 5 and b.chips == ("h100-sxm", "h200") and b.allowed == 1 and b.over
    sg = budget["sglang"]
    assert sg.free == 4 and sg.chips == ("h200",) and sg.allowed == 0 and sg.over
    kinds = {c.name: c.kind for c in sg.constants if c.entry == "served"}
    assert kinds["per_step_s"] == "set" and kinds["bandwidth_fraction"] == "set" and kinds["per_prompt_token_s"] == "set"
    assert kinds["per_alltoall_s"] == "set" and budget["tensorrt-llm"].free == 5
    # TensorRT-LLM prices its per-sequence cost per layer (the per-sequence shape protocol): per_sequence_s set to 0
    trt = {c.name: c.kind for c in budget["tensorrt-llm"].constants if c.entry == "served"}
    assert (trt["per_sequence_s"], trt["per_sequence_layer_s"], kinds["per_sequence_layer_s"]) == ("set", "fitted", "set")
    from membound.fidelity.budget import SHARED_ENTRY
    assert SHARED_ENTRY not in budget      # no served figure is shared now: no line for them


def test_a_shared_served_figure_counts_once_against_the_chips_of_all_its_rows(monkeypatch):
    # Were per_sequence_s shared by all three engines (serve_calibrate.SHARED, {figure: engines}; none is now), it
    # would be fitted once on the fit rows of vLLM (H100 SXM, H200), SGLang and TensorRT-LLM (H200): one free figure
    # over 2 chips, allowed 2 // 2 = 1, on its own line, its rows all the engines' fit rows (297 + 30 + 223 = 550);
    # each engine lists it as shared, not free: vLLM 5 - 1 = 4, SGLang 4 - 1 = 3; TensorRT-LLM sets its
    # per_sequence_s to 0 (its per-sequence cost is per layer, per_sequence_layer_s) and keeps its 5
    from membound.fidelity import budget as bmod, serve_calibrate
    shared = {"per_sequence_s": ("vllm", "sglang", "tensorrt-llm")}
    monkeypatch.setattr(serve_calibrate, "SHARED", shared)
    monkeypatch.setattr(bmod, "SHARED", shared)
    got = bmod.constant_budget()
    b = got[bmod.SHARED_ENTRY]
    assert [c.name for c in b.constants] == ["per_sequence_s"] and b.free == 1
    assert b.chips == ("h100-sxm", "h200") and b.allowed == 1 and not b.over
    assert b.constants[0].rows == 297 + 30 + 223
    assert [got[n].free for n in ("vllm", "sglang", "tensorrt-llm")] == [4, 3, 5]
    assert all(c.kind == "shared" for n in ("vllm", "sglang") for c in got[n].constants
               if c.name == "per_sequence_s")
    assert f"{bmod.SHARED_ENTRY}: 1 free (1 fitted, 0 frozen) over 2 chips (allowed 1);" in bmod.format_budget(got)


def test_a_figure_shared_by_two_engines_counts_their_rows_and_leaves_the_third_alone(monkeypatch):
    # the shared per-sequence protocol's form S (serve_calibrate docstring; not adopted): per_sequence_layer_s shared
    # by vLLM and SGLang only. Its line counts their fit rows, 297 + 30 = 327, on H100 SXM and H200 (vLLM's chips;
    # SGLang's H200 among them): 1 free over 2 chips, allowed 1. vLLM and SGLang list it as shared (their free
    # figures unchanged here: per_sequence_layer_s is set, not fitted, in both FIXED tables, so nothing leaves their
    # own lists); TensorRT-LLM, not a sharer, keeps its own fitted per_sequence_layer_s
    from membound.fidelity import budget as bmod, serve_calibrate
    shared = {"per_sequence_layer_s": ("vllm", "sglang")}
    monkeypatch.setattr(serve_calibrate, "SHARED", shared)
    monkeypatch.setattr(bmod, "SHARED", shared)
    got = bmod.constant_budget()
    line = got[bmod.SHARED_ENTRY].constants
    assert [(c.name, c.rows, c.chips) for c in line] == [("per_sequence_layer_s", 297 + 30, ("h100-sxm", "h200"))]
    assert line[0].why == "one figure for vllm, sglang"
    kinds = {n: {c.kind for c in got[n].constants if c.name == "per_sequence_layer_s"} for n in
             ("vllm", "sglang", "tensorrt-llm")}
    assert kinds == {"vllm": {"shared", "set"}, "sglang": {"shared", "set"}, "tensorrt-llm": {"fitted"}}


def test_every_constant_has_a_kind_and_the_table_flags_what_is_over(budget):
    assert all(c.kind in ("fitted", "frozen", "shared", "set", "held", "profile", "setting", "assumed") for b in budget.values()
               for c in b.constants)
    assert all(c.prior is not None and c.rows > 0 for b in budget.values() for c in b.constants if c.kind in FREE)
    text = format_budget(budget)
    assert "nemo: 1 free (1 fitted, 0 frozen) over 2 chips (allowed 1);" in text
    assert "llama.cpp-metal: 6 free (6 fitted, 0 frozen) over 15 chips (allowed 7);" in text
    # llama.cpp-vulkan's bandwidth share left its 1.0 bound once the RTX 4090's and Arc A770's measured read
    # ceilings held them (0.96): no runtime's fitted figure is on a bound (an MLPerf round's fit that
    # generations.yaml keeps under `at_bound` is listed on it: test_an_mlperf_round_fit_on_its_bound...);
    # the flag itself, on a figure set there by hand
    from membound.fidelity.mlperf_rows import load_generations
    rounds_at_bound = {f"{n}-mlperf-{r}" for n, g in load_generations().items() for r in (g.get("at_bound") or {})}
    # groq-2024's hop sits on its lower bound, the network's measured 722 ns (ISCA 2022): since the LM head
    # and embedding are pipeline stages of their own (lpu20) the physics alone is slower than both rows it is
    # fitted on (hw-018 -18%, hw-019 -13%), which its runtime file and the budget table say (missing physics)
    vendor_at_bound = {"groq-2024"}
    assert "ON ITS LOWER BOUND" in mb.load_runtime("groq-2024").classes["groq-lpu"].evidence
    assert not [(n, c.name) for n, b in budget.items() for c in b.constants
                if c.bound and n not in rounds_at_bound | vendor_at_bound]
    assert [c.bound for c in budget["groq-2024"].constants if c.name == "hop_latency_s"] == ["lower"]
    import dataclasses
    vk = budget["llama.cpp-vulkan"]
    at_top = [dataclasses.replace(c, bound="upper") if c.name == "bandwidth_fraction" else c for c in vk.constants]
    flagged = format_budget({"llama.cpp-vulkan": dataclasses.replace(vk, constants=at_top)})
    assert "bandwidth_fraction" in flagged and "ON UPPER BOUND (missing physics)" in flagged


def test_validate_prints_the_budget(capsys):
    from membound.fidelity.validate import main
    assert main(["--budget"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Constant budget") and "Over budget (" in out


def test_the_cli_prints_the_budget(capsys):
    from membound.present.cli import main
    assert main(["validate", "--budget"]) == 0
    assert "llama.cpp-metal: 6 free" in capsys.readouterr().out


def test_every_runtime_calibrate_fits_is_within_its_budget(budget):
    # issue 27 item 2: a runtime membound.calibrate fits frees at most one constant per two chips its
    # rows span (chips // 2), and none of its fitted figures was frozen on the side
    from membound.fidelity.calibrate import FIT
    for name in FIT:
        b = budget[name]
        assert b.free <= len(b.chips) // 2, (name, b.free, b.chips)
        assert not [c for c in b.constants if c.kind == "frozen"], name


# A made-up generation in generations.yaml's form (mlperf_validate.with_fits writes it): a fit per round on
# its Offline rows of the fit families, one kept under `at_bound`
GEN = {"gen-x": {
    "engine": "tensorrt-llm", "executor": "cpp",
    "served": {"per_request_s": {"value": 0.0, "unit": "s", "status": "code", "source": "token ids enqueued"}},
    "fit": {"per_sequence_s": {"unit": "s per running sequence per step", "prior": [1e-7, 1e-3]}},
    "rounds": {
        "v4.0": {"per_sequence_s": {"value": 4e-5, "prior": [1e-7, 1e-3], "status": "fitted",
                                    "fitted_on": "36 Offline rows of the fit families (GH200, H100, H200) in v4.0",
                                    "chips": ["h200", "h100-sxm", "gh200-96gb", "h100-nvl", "h100-pcie"]}},
        "v3.1": {"per_sequence_s": {"value": 2e-4, "prior": [1e-7, 1e-3], "status": "fitted",
                                    "fitted_on": "14 Offline rows of the fit families (GH200, H100, H200) in v3.1",
                                    "chips": ["h100-sxm", "gh200-96gb"]}}},
    "at_bound": {"v5.1": {"value": 1e-7, "prior": [1e-7, 1e-3], "status": "at a bound of the prior",
                          "fitted_on": "34 Offline rows of the fit families (GH200, H100, H200) in v5.1",
                          "chips": ["h100-sxm", "h200", "h200-nvl"]}}}}


def _gen_budget(gens):
    from membound.fidelity.budget import _generations
    out: dict = {}
    _generations(out, gens)
    return out


def test_each_mlperf_round_is_its_own_budget_with_its_rows_and_chips():
    # v3.1: one constant fitted on 14 rows of 2 chips: allowed 2 // 2 = 1, within; v4.0: 36 rows of 5 chips:
    # allowed 5 // 2 = 2. The code-set per_request_s (0 s) is listed in each round, not free
    got = _gen_budget(GEN)
    assert list(got) == ["gen-x-mlperf-v3.1", "gen-x-mlperf-v4.0", "gen-x-mlperf-v5.1"]   # ordered by round
    v31, v40 = got["gen-x-mlperf-v3.1"], got["gen-x-mlperf-v4.0"]
    (f31,) = [c for c in v31.constants if c.kind in FREE]
    assert (f31.name, f31.value, f31.rows, f31.chips, f31.bound) == ("per_sequence_s", 2e-4, 14,
                                                                      ("gh200-96gb", "h100-sxm"), "")
    assert f31.unit == "s" and f31.prior == (1e-7, 1e-3)
    assert v31.free == 1 and v31.allowed == 1 and not v31.over
    assert v40.free == 1 and len(v40.chips) == 5 and v40.allowed == 2 and [c.rows for c in v40.constants
                                                                            if c.kind == "fitted"] == [36]
    req = [c for c in v31.constants if c.name == "per_request_s"]
    assert [(c.kind, c.value, c.entry) for c in req] == [("set", 0.0, "served")] and req[0].why.startswith("code")


def test_an_mlperf_round_fit_on_its_bound_is_listed_there_and_the_carried_fit_it_runs():
    # v5.1's fit sat on the prior's lower end, 1e-7 (34 rows, 3 chips: allowed 3 // 2 = 1): listed as fitted
    # ON ITS LOWER BOUND; the round runs the latest earlier round's fit, v4.0's 4e-5 (not v3.1's 2e-4), set
    b = _gen_budget(GEN)["gen-x-mlperf-v5.1"]
    fit, runs = [c for c in b.constants if c.name == "per_sequence_s"]
    assert (fit.kind, fit.value, fit.rows, fit.bound) == ("fitted", 1e-7, 34, "lower")
    assert (runs.kind, runs.value) == ("set", 4e-5) and "v4.0" in runs.why
    assert b.free == 1 and b.allowed == 1 and not b.over
    assert "ON LOWER BOUND (missing physics)" in format_budget({"gen-x-mlperf-v5.1": b})
    # before any fitted round the engine's own figure runs: tensorrt-llm's served per_sequence_s
    from membound.catalog.runtime import load_runtime
    alone = {"gen-x": {**GEN["gen-x"], "rounds": {}}}
    fit, runs = [c for c in _gen_budget(alone)["gen-x-mlperf-v5.1"].constants if c.name == "per_sequence_s"]
    assert runs.value == load_runtime("tensorrt-llm").served.per_sequence_s and "tensorrt-llm" in runs.why


def test_a_round_fit_without_its_row_count_is_refused():
    from membound.errors import MemboundError
    bad = {"gen-x": {**GEN["gen-x"], "at_bound": {}, "rounds": {"v3.1": {"per_sequence_s": {
        **GEN["gen-x"]["rounds"]["v3.1"]["per_sequence_s"], "fitted_on": "Offline rows"}}}}}
    with pytest.raises(MemboundError, match="fitted_on"):
        _gen_budget(bad)


def test_the_shipped_generations_are_listed_as_the_file_records_them(budget):
    # read from generations.yaml, not copied: every fitted round's value, rows (the count its fitted_on
    # starts with) and chips appear under <generation>-mlperf-<round>
    from membound.fidelity.mlperf_rows import fitted_param, load_generations
    for name, g in load_generations().items():
        for rnd, fit in (g.get("rounds") or {}).items():
            p = fitted_param(g, rnd)
            c = next(c for c in budget[f"{name}-mlperf-{rnd}"].constants if c.kind == "fitted")
            e = fit[p]
            assert (c.name, c.value, c.rows, set(c.chips)) == (p, e["value"], int(e["fitted_on"].split()[0]),
                                                                set(e["chips"]))



def test_a_served_engine_names_its_extra_figures(budget):
    # serve_calibrate.FREE_EVIDENCE orders each engine's fitted figures; the budget's allowance (chips // 2) goes
    # to the first: vLLM (2 chips, 1 allowed) keeps per_layer_s within and its 4 others are extra (5 - 1 = 4);
    # SGLang (1 chip, 0 allowed): all 4 extra; TensorRT-LLM: all 5
    from membound.fidelity.budget import free_reason
    def extra(name):
        return {c.name for c in budget[name].constants if c.kind == "fitted" and c.why.startswith("EXTRA")}
    assert extra("vllm") == {"compute_fraction", "per_request_s", "moe_expert_rows", "per_sequence_s"}
    inside = [c for c in budget["vllm"].constants if c.kind == "fitted" and c.why.startswith("within budget")]
    assert [c.name for c in inside] == ["per_layer_s"] and inside[0].why.startswith("within budget (1 of 5): at 0")
    assert len(extra("sglang")) == budget["sglang"].free - budget["sglang"].allowed == 4
    assert len(extra("tensorrt-llm")) == budget["tensorrt-llm"].free - budget["tensorrt-llm"].allowed == 5
    # with 2 allowed vLLM's second, compute_fraction, comes within; a figure without evidence has no reason
    assert free_reason("vllm", "compute_fraction", 2).startswith("within budget (2 of 5)")
    assert free_reason("vllm", "compute_fraction", 1).startswith("EXTRA (2 of 5)")
    assert free_reason("vllm", "per_step_s", 1) == ""
    # every extra figure went through the budget protocol (serve_calibrate's docstring, 'The budget protocol') and
    # its reason says how that ended: 4 + 4 + 5 = 13 extra figures, each naming the protocol
    ended = [c for name in ("vllm", "sglang", "tensorrt-llm") for c in budget[name].constants
             if c.kind == "fitted" and c.why.startswith("EXTRA")]
    assert len(ended) == 13 and all("protocol" in c.why and "fails" in c.why for c in ended)
