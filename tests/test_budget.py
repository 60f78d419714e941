"""The constant budget (membound.fidelity.budget): every constant of every runtime, counted by hand."""
import pytest

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
    # (a100-80gb 0.89 / 0.869, h100-sxm 0.9 / 0.8), one line per chip, neither fitted nor free
    b = budget["nemo"]
    fitted = [c for c in b.constants if c.kind == "fitted"]
    assert [c.name for c in fitted] == ["per_layer_overhead_cycles"] and fitted[0].rows == 32
    assert set(b.chips) == {"h100-sxm", "a100-80gb"} and b.allowed == 1 and b.free == 1 and not b.over
    prof = {(c.entry, c.name): c.value for c in b.constants if c.kind == "profile"}
    assert prof == {("a100-80gb", "bandwidth_fraction"): 0.89, ("h100-sxm", "bandwidth_fraction"): 0.9,
                    ("a100-80gb", "compute_fraction"): 0.869, ("h100-sxm", "compute_fraction"): 0.8}
    assert all(c.why.startswith("measured") for c in b.constants if c.kind == "profile")


def test_the_eager_engines_on_two_chips_are_within_budget(budget):
    # Hugging Face transformers and TinyChat: RTX 4090 and RTX A6000 rows, one free constant each (their
    # per-layer floors); the A6000's bandwidth share is assumed in its profile and said so
    for name, fitted in (("hf-transformers", "per_layer_overhead_s"), ("tinychat", "per_layer_overhead_cycles")):
        b = budget[name]
        assert [c.name for c in b.constants if c.kind in FREE] == [fitted] and b.allowed == 1 and not b.over
        a6000_bw = next(c for c in b.constants if (c.entry, c.name) == ("rtx-a6000", "bandwidth_fraction"))
        assert a6000_bw.kind == "profile" and a6000_bw.why.startswith("assumed")


def test_llama_cpp_metal_is_within_its_budget(budget):
    # six figures of one default entry over 15 Apple chips: 15 // 2 = 7 >= 6
    b = budget["llama.cpp-metal"]
    assert b.free == 6 and len(b.chips) == 15 and b.allowed == 7 and not b.over


def test_the_served_engines_set_figures_with_reasons_and_count_what_they_fit(budget):
    # vLLM fits 5 figures (serve_calibrate.FIXED sets 5 of its 10) on its rows of H100 SXM and H200:
    # 2 chips allow 2 // 2 = 1, so it is over by 4; nothing is frozen. SGLang fits 4 on H200 and sets its
    # all-to-all to DeepEP's: 4 free over 1 chip, which allows none; TensorRT-LLM 5
    from membound.fidelity.serve_calibrate import FIXED
    b = budget["vllm"]
    served = {c.name: c for c in b.constants if c.entry == "served"}
    assert {k for k, c in served.items() if c.kind == "set"} == set(FIXED["vllm"]) and len(FIXED["vllm"]) == 5
    assert all(served[k].why for k in FIXED["vllm"]) and not [c for c in b.constants if c.kind == "frozen"]
    assert {k for k, c in served.items() if c.kind == "fitted"} == {"compute_fraction", "per_layer_s", "per_sequence_s",
                                                                     "per_request_s", "moe_expert_rows"}
    assert b.free == 5 and b.chips == ("h100-sxm", "h200") and b.allowed == 1 and b.over
    sg = budget["sglang"]
    assert sg.free == 4 and sg.chips == ("h200",) and sg.allowed == 0 and sg.over
    kinds = {c.name: c.kind for c in sg.constants if c.entry == "served"}
    assert kinds["per_step_s"] == "set" and kinds["bandwidth_fraction"] == "set" and kinds["per_prompt_token_s"] == "set"
    assert kinds["per_alltoall_s"] == "set" and budget["tensorrt-llm"].free == 5
    from membound.fidelity.budget import SHARED_ENTRY
    assert SHARED_ENTRY not in budget      # no served figure is shared now: no line for them


def test_a_shared_served_figure_counts_once_against_the_chips_of_all_its_rows(monkeypatch):
    # Were per_sequence_s shared (serve_calibrate.SHARED; none is now), it would be fitted once on the fit rows
    # of vLLM (H100 SXM, H200), SGLang and TensorRT-LLM (H200): one free figure over 2 chips, allowed
    # 2 // 2 = 1, on its own line, its rows all the engines' fit rows (297 + 30 + 223 = 550); each engine
    # lists it as shared, not free: vLLM 5 - 1 = 4, SGLang 4 - 1 = 3, TensorRT-LLM 5 - 1 = 4
    from membound.fidelity import budget as bmod, serve_calibrate
    monkeypatch.setattr(serve_calibrate, "SHARED", ("per_sequence_s",))
    monkeypatch.setattr(bmod, "SHARED", ("per_sequence_s",))
    got = bmod.constant_budget()
    b = got[bmod.SHARED_ENTRY]
    assert [c.name for c in b.constants] == ["per_sequence_s"] and b.free == 1
    assert b.chips == ("h100-sxm", "h200") and b.allowed == 1 and not b.over
    assert b.constants[0].rows == 297 + 30 + 223
    assert [got[n].free for n in ("vllm", "sglang", "tensorrt-llm")] == [4, 3, 4]
    assert all(c.kind == "shared" for n in ("vllm", "sglang", "tensorrt-llm") for c in got[n].constants
               if c.name == "per_sequence_s")
    assert f"{bmod.SHARED_ENTRY}: 1 free (1 fitted, 0 frozen) over 2 chips (allowed 1);" in bmod.format_budget(got)


def test_every_constant_has_a_kind_and_the_table_flags_what_is_over(budget):
    assert all(c.kind in ("fitted", "frozen", "shared", "set", "held", "profile", "setting", "assumed") for b in budget.values()
               for c in b.constants)
    assert all(c.prior is not None and c.rows > 0 for b in budget.values() for c in b.constants if c.kind in FREE)
    text = format_budget(budget)
    assert "nemo: 1 free (1 fitted, 0 frozen) over 2 chips (allowed 1);" in text
    assert "llama.cpp-metal: 6 free (6 fitted, 0 frozen) over 15 chips (allowed 7);" in text
    # llama.cpp-vulkan's bandwidth share left its 1.0 bound once the RTX 4090's and Arc A770's measured read
    # ceilings held them (0.96): no fitted figure is on a bound; the flag itself, on a figure set there by hand
    assert "BOUND (missing physics)" not in text
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
