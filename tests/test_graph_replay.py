"""Where a runtime's generation replays no decode step as a graph (Runtime.no_graph_replay): llama.cpp
CUDA below compute capability 8.0 (ggml-cuda's disable_due_to_gpu_arch, until PR 25749), llama.cpp HIP
on every AMD GPU (GGML_HIP_GRAPHS off by default, until PR 22254). There a batch-1 decode step pays
the per-layer launches (`ungraphed_layer_s`) that elsewhere only passes of more than one token pay.
Numbers derived by hand."""
import pytest
from hypothesis import given, strategies as st

import membound as mb
from membound.errors import MemboundError
from membound.catalog.runtime import NoGraphReplay, Runtime, RuntimeEntry, load_runtime

# Llama-2-7B q4_0, one decode step at context 0 (no KV read yet): the 32 layers' parameters (norms
# included) at 4.5 bits, the q6_K LM head (131,072,000 parameters at 6.5625 bits: llama.cpp's default
# output tensor for a q4_0 file) and one q4_0 embedding row of 4,096:
#   (6,738,415,616 - 2 x 131,072,000) x 0.5625 + 131,072,000 x 6.5625 / 8 + 4,096 x 0.5625
#   = 3,642,902,784 + 107,520,000 + 2,304 = 3,750,425,088 bytes
STEP_BYTES = 3_750_425_088
LAYERS = 32
PRE_AMPERE = NoGraphReplay(below_compute_capability=8.0, evidence="ggml-cuda: cc < GGML_CUDA_CC_AMPERE")


def _rt(graphs: NoGraphReplay | None = PRE_AMPERE) -> Runtime:
    """A pure-roofline runtime (full bandwidth, no floor) with 2 us a layer and 25 us a layer ungraphed."""
    return Runtime(name="t", use_latency_floor=False, use_device_fractions=False, no_graph_replay=graphs,
                   classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=1.0,
                                                    per_layer_overhead_s=2e-6, ungraphed_layer_s=25e-6)})


def _step_s(hw: str, runtime, **kw) -> float:
    args = dict(batch=1, prompt_tokens=0, output_tokens=1, weight_dtype="q4_0") | kw
    return 1 / mb.estimate("llama-2-7b", hw, runtime=runtime, **args).decode_tok_s_per_user


def test_a_pre_ampere_batch_1_decode_step_pays_the_ungraphed_launches():
    # V100 SXM2 (cc 7.0, 900 GB/s): weights / bandwidth + 32 x 2 us + 32 x 25 us
    #   3,750,425,088 / 9e11 = 4.16714 ms; + 0.064 ms + 0.8 ms = 5.03114 ms
    assert _step_s("v100-sxm2-32gb", _rt()) == pytest.approx(STEP_BYTES / 9e11 + 32 * 2e-6 + 32 * 25e-6, rel=1e-9)
    # RTX 2080 Ti (Turing, cc 7.5, 616 GB/s) and T4 (cc 7.5, 320 GB/s) pay it too
    assert _step_s("rtx-2080-ti", _rt()) == pytest.approx(STEP_BYTES / 616e9 + 32 * 2e-6 + 32 * 25e-6, rel=1e-9)
    assert _step_s("t4", _rt()) == pytest.approx(STEP_BYTES / 320e9 + 32 * 2e-6 + 32 * 25e-6, rel=1e-9)
    # RTX 3090 (cc 8.6, 936 GB/s): replayed as a graph, the per-layer overhead alone
    #   3,750,425,088 / 9.36e11 = 4.00686 ms; + 0.064 ms = 4.07086 ms
    assert _step_s("rtx-3090", _rt()) == pytest.approx(STEP_BYTES / 936e9 + 32 * 2e-6, rel=1e-9)
    # A100 (cc 8.0, exactly the threshold: `cc < 8.0` is false): graphed
    assert _step_s("a100-80gb", _rt()) == pytest.approx(STEP_BYTES / 2.039e12 + 32 * 2e-6, rel=1e-9)


def test_every_device_pays_it_where_the_generation_records_no_graphs():
    # llama.cpp HIP before PR 22254: RX 7900 XTX (960 GB/s, no compute capability): 3.90669 + 0.064 + 0.8 ms
    hip = _rt(NoGraphReplay(all_devices=True, evidence="GGML_HIP_GRAPHS OFF"))
    assert _step_s("rx-7900-xtx", hip) == pytest.approx(STEP_BYTES / 960e9 + 32 * 2e-6 + 32 * 25e-6, rel=1e-9)
    # no declaration: a one-token pass is graphed on every device, the V100 too
    assert _step_s("v100-sxm2-32gb", _rt(None)) == pytest.approx(STEP_BYTES / 9e11 + 32 * 2e-6, rel=1e-9)
    # a capability rule does not cover a device without a capability (an AMD GPU)
    assert _step_s("rx-7900-xtx", _rt()) == pytest.approx(STEP_BYTES / 960e9 + 32 * 2e-6, rel=1e-9)


def test_a_batched_step_pays_the_launches_once_whatever_the_device():
    # batch 2 launches kernel by kernel everywhere: the V100 pays 32 x 25 us once, as the RTX 3090 does
    gate, none = (_rt(), _rt(None))
    for hw in ("v100-sxm2-32gb", "rtx-3090"):
        e = [mb.estimate("llama-2-7b", hw, batch=2, prompt_tokens=0, output_tokens=1, weight_dtype="q4_0",
                         runtime=r).step_terms_s["overhead"] for r in (gate, none)]
        assert e[0] == e[1] == pytest.approx(32 * 2e-6 + 32 * 25e-6, rel=1e-12)


def test_a_draft_models_one_token_steps_pay_them_too_and_its_prefill_everywhere():
    # llama-3.1-8b drafted by llama-3.2-1b (16 layers), gamma 4, acceptance 0.8, on a V100: a round's first
    # draft pass takes the 5 verified positions (core.draft_passes), the other 3 one token each; those 3
    # launch kernel by kernel, 3 x 16 x 25 us = 1.2 ms a round more, over (1 - 0.8^5) / (1 - 0.8) = 3.3616
    # tokens a round: 0.35697 ms a token. The verify pass and the first draft pass (5 tokens) and the
    # draft's 512-token prefill pay theirs with or without the rule: TTFT does not move
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    gate, none = (mb.estimate("llama-3.1-8b", "v100-sxm2-32gb", prompt_tokens=512, output_tokens=64,
                              speculative=spec, runtime=r) for r in (_rt(), _rt(None)))
    tokens_per_round = (1 - 0.8 ** 5) / (1 - 0.8)
    assert 1 / gate.decode_tok_s_per_user - 1 / none.decode_tok_s_per_user == pytest.approx(
        3 * 16 * 25e-6 / tokens_per_round, rel=1e-9)
    assert gate.ttft_s == none.ttft_s


@given(st.integers(10, 129))
def test_the_launches_follow_the_capability_threshold(tenths):
    # any capability 1.0 .. 12.9: below 8.0 a decode step's overhead is 32 x (2 + 25) us, else 32 x 2 us
    cc = tenths / 10
    hw = mb.load_hardware("rtx-3090").with_overrides(compute_capability=cc)
    over = mb.estimate("llama-2-7b", hw, prompt_tokens=0, output_tokens=1, weight_dtype="q4_0",
                       runtime=_rt()).step_terms_s["overhead"]
    assert over == pytest.approx(32 * 2e-6 + (32 * 25e-6 if tenths < 80 else 0.0), rel=1e-12)


# ---- the bundled runtimes: their declarations and Llama-2-7B q4_0 tg128 ------------------------------

def _tg128(hw: str, runtime) -> mb.Result:
    return mb.estimate("llama-2-7b", hw, batch=1, prompt_tokens=0, output_tokens=128, weight_dtype="q4_0",
                       runtime=runtime)


def _without_rule(name: str) -> Runtime:
    return load_runtime(name).model_copy(update={"no_graph_replay": None})


def test_the_bundled_backends_declare_where_they_replay_no_graph():
    cuda, hip = load_runtime("llama.cpp-cuda").no_graph_replay, load_runtime("llama.cpp-hip").no_graph_replay
    assert cuda is not None and (cuda.below_compute_capability, cuda.all_devices) == (8.0, False)
    assert "GGML_CUDA_CC_AMPERE" in cuda.evidence and "25749" in cuda.evidence
    assert hip is not None and (hip.all_devices, hip.below_compute_capability) == (True, None)
    assert "11362" in hip.evidence and "22254" in hip.generation
    # HIP's per-layer figures are CUDA's (calibrate.ASSUMED_FROM), its graph rule its own
    assert load_runtime("llama.cpp-hip").classes["default"].ungraphed_layer_s == 25e-6


@pytest.mark.parametrize("hw, rt, cls, pays", [
    ("v100-sxm2-32gb", "llama.cpp-cuda", "default", True),        # cc 7.0, nvidia-datacenter: no entry of its own
    ("t4", "llama.cpp-cuda", "default", True),                    # cc 7.5
    ("rtx-2080-ti", "llama.cpp-cuda", "default", True),   # cc 7.5 (no fitted device classes: calibrate.CLASS_ENTRIES)
    ("rtx-3090", "llama.cpp-cuda", "default", False),     # cc 8.6
    ("rx-7900-xtx", "llama.cpp-hip", "default", True),            # no hipGraph in that generation
])
def test_llama_2_7b_q4_0_tg128_pays_32_ungraphed_layers_where_declared(hw, rt, cls, pays):
    # each step's overhead is the class entry's 32 x per_layer_overhead_s, plus 32 x 25 us where no graph
    # is replayed: 32 x 2.5e-5 = 8e-4 s a token more than the same runtime without the rule
    entry = load_runtime(rt).classes[cls]
    with_rule, without = _tg128(hw, rt), _tg128(hw, _without_rule(rt))
    assert with_rule.step_terms_s["overhead"] == pytest.approx(
        32 * entry.per_layer_overhead_s + (32 * 25e-6 if pays else 0.0), rel=1e-9)
    more = 1 / with_rule.decode_tok_s_per_user - 1 / without.decode_tok_s_per_user
    assert more == pytest.approx(32 * 25e-6 if pays else 0.0, rel=1e-9, abs=1e-15)


def test_llama_cpp_picks_the_hip_rule_on_amd_and_the_cuda_rule_on_nvidia():
    # the plain `llama.cpp` runtime names a backend per vendor: the same V100 and 7900 XTX figures
    for hw, rt in (("v100-sxm2-32gb", "llama.cpp-cuda"), ("rx-7900-xtx", "llama.cpp-hip")):
        assert _tg128(hw, "llama.cpp").decode_tok_s_per_user == _tg128(hw, rt).decode_tok_s_per_user


@pytest.mark.parametrize("block, field", [
    ({"evidence": "x"}, "below_compute_capability"),                                     # no rule
    ({"all_devices": True, "below_compute_capability": 8.0, "evidence": "x"}, "all_devices"),   # two rules
    ({"all_devices": True}, "evidence"),                                                 # no source
    ({"below_compute_capability": 8.05, "evidence": "x"}, "below_compute_capability"),   # not major.minor
])
def test_a_bad_declaration_is_refused_naming_the_field(tmp_path, block, field):
    import yaml
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump({"name": "mine", "no_graph_replay": block}))
    with pytest.raises(MemboundError, match=field):
        load_runtime(str(f))
