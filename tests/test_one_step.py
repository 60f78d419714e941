"""One step (issue 26): the seconds of an engine step come from one function (`core.pass_terms`),
for a static batch (`estimate`) and for continuous batching (`serve`) alike. Laws over every
shipped runtime and lengths from 1 to 128k tokens:

- a lone client (`serve(concurrency=1)`) gets `estimate(batch=1)`'s TTFT and TPOT, to 1e-9;
- a static batch's decode step is the served step with the same running sequences and contexts.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving import build

# every shipped runtime on a device it runs on, with a model that fits one pipeline stage there (pipeline
# stages: test_serve_pipeline.py): (runtime, model, device, chips, weight format)
CASES = {
    "cerebras-2024-08": ("llama-3.1-8b", "cerebras-wse-3", 1, "bf16"),
    "device": ("llama-3.1-8b", "h100-sxm", 1, "bf16"),
    "groq-2024": ("qwen3-0.6b", "groq-lpu", 8, "bf16"),
    "hf-transformers": ("llama-3.1-8b", "a100-80gb", 1, "bf16"),
    "ideal": ("llama-3.1-8b", "h200", 1, "bf16"),
    "llama.cpp": ("llama-3.1-8b", "apple-m2-ultra", 1, "q4_0"),
    "llama.cpp-cpu": ("llama-3.1-8b", "ryzen-ai-max-395-cpu", 1, "q4_0"),
    "llama.cpp-cuda": ("llama-3.1-8b", "rtx-4090", 1, "q4_0"),
    "llama.cpp-hip": ("llama-3.1-8b", "mi300x", 1, "q4_0"),
    "llama.cpp-metal": ("llama-3.1-8b", "apple-m4-max", 1, "q8_0"),
    "llama.cpp-vulkan": ("llama-3.1-8b", "arc-a770", 1, "q4_0"),
    "nemo": ("llama-3.1-8b", "h100-sxm", 1, "bf16"),
    "sambanova-2024": ("llama-3.1-8b", "sambanova-sn40l", 16, "bf16"),
    "sglang": ("llama-3.1-8b", "h200", 1, "bf16"),
    "tensorrt-llm": ("llama-3.1-8b", "h200", 1, "fp8"),
    "tinychat": ("llama-3.1-8b", "rtx-4090", 1, "int4"),
    "vllm": ("llama-3.1-8b", "h200", 1, "bf16"),
}
# models whose step differs in shape (an MoE with sliding windows, MLA with sparse attention)
FAMILIES = [("gpt-oss-120b", "h200", 1, dict(weight_dtype="mxfp4", dense_weight_dtype="bf16")),
            ("deepseek-v3.2", "h200", 8, dict(weight_dtype="fp8", kv_dtype="fp8"))]


def test_every_shipped_runtime_has_a_case():
    assert set(CASES) == set(mb.list_runtimes())


def _pair(runtime, model, device, chips, S, T, **kw):
    common = dict(prompt_tokens=S, output_tokens=T, n_chips=chips, runtime=runtime, allow_beyond_context=True, **kw)
    e = mb.estimate(model, device, batch=1, check_memory=False, **common)
    s = mb.serve(model, device, concurrency=1, **common)
    return e, s


lengths = st.one_of(st.integers(1, 4096), st.integers(4097, 131_072))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runtime=st.sampled_from(sorted(CASES)), S=lengths, T=st.integers(2, 4096))
def test_a_lone_client_gets_estimates_ttft_and_tpot(runtime, S, T):
    model, device, chips, w = CASES[runtime]
    try:
        e, s = _pair(runtime, model, device, chips, S, T, weight_dtype=w)
    except mb.MemboundError as err:     # the longest requests outgrow a small device's KV cache in serve
        assert isinstance(err, mb.DoesNotFitError) or "KV cache for one request fits" in str(err)
        return
    assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
    assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(range(len(FAMILIES))), runtime=st.sampled_from(["vllm", "sglang", "tensorrt-llm",
                                                                                 "ideal", "device"]),
       S=lengths, T=st.integers(2, 2048))
def test_a_lone_client_gets_estimates_figures_for_moe_windows_and_sparse_attention(family, runtime, S, T):
    model, device, chips, kw = FAMILIES[family]
    e, s = _pair(runtime, model, device, chips, S, T, **kw)
    assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
    assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)


# a device of one memory tier: on SambaNova's SRAM/HBM/DDR the bytes' tiers follow what is held (a static
# batch places its own KV; the served chip places its configured request's), so the same step can differ
# by where its KV sits
SINGLE_TIER = sorted(r for r in CASES if len(mb.load_hardware(CASES[r][1]).memory) == 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runtime=st.sampled_from(SINGLE_TIER), B=st.integers(1, 256), L=st.integers(1, 131_072))
def test_a_static_batchs_decode_step_is_the_served_step(runtime, B, L):
    # estimate(output_tokens=1) is one decode step of the batch at context L (its TPOT); serve's step
    # of B running sequences at that context (attending to u(L) pairs each) is the same number
    model, device, chips, w = CASES[runtime]
    kw = dict(n_chips=chips, runtime=runtime, weight_dtype=w, allow_beyond_context=True)
    e = mb.estimate(model, device, batch=B, prompt_tokens=L, output_tokens=1, check_memory=False, **kw)
    sm, _, _ = build(model, device, prompt=mb.serving.Fixed(L), output=mb.serving.Fixed(2), **kw)
    assert float(sm.step(float(B), float(sm.attended(L)), h=float(sm.held(L)))) == pytest.approx(e.tpot_s, rel=1e-9)


@pytest.mark.parametrize("family", range(len(FAMILIES)))
@pytest.mark.parametrize("B,L", [(1, 1), (7, 100), (64, 3000), (256, 100_000)])
def test_a_static_batchs_decode_step_is_the_served_step_for_moe_windows_and_sparse_attention(family, B, L):
    model, device, chips, kw = FAMILIES[family]
    e = mb.estimate(model, device, batch=B, prompt_tokens=L, output_tokens=1, n_chips=chips, runtime="vllm",
                    check_memory=False, **kw)
    sm, _, _ = build(model, device, prompt=mb.serving.Fixed(L), output=mb.serving.Fixed(2), n_chips=chips, runtime="vllm", **kw)
    assert float(sm.step(float(B), float(sm.attended(L)), h=float(sm.held(L)))) == pytest.approx(e.tpot_s, rel=1e-9)


def test_the_rtx_4090_case_of_the_issue():
    # Llama-2-7B q4_0 on an RTX 4090 under llama.cpp-cuda: serve(concurrency=1)'s TTFT was 26% below
    # estimate()'s at 512 prompt tokens and 30% at 1,024 (a step re-derived by sampling the core,
    # prefill linearised at 4,096 tokens, matvec_overlap ignored); now the same step
    for S in (512, 1024):
        e, s = _pair("llama.cpp-cuda", "llama-2-7b", "rtx-4090", 1, S, 128, weight_dtype="q4_0")
        assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
        assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)


# ---- one parameter set per runtime, with its provenance ------------------------------------

def test_no_runtime_file_holds_two_parameter_sets():
    # a runtime's constants are its per-device `classes` or its `served` block, never both
    for name in mb.list_runtimes():
        rt = mb.load_runtime(name)
        assert not (rt.classes and rt.served), name


def test_a_runtime_file_with_both_parameter_sets_is_refused(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("name: both\nclasses:\n  default:\n    per_step_overhead_s: 3.0e-4\n"
                    "served:\n  per_step_s: 1.0e-3\n")
    with pytest.raises(mb.ProfileError, match="one parameter set"):
        mb.load_runtime(str(path))


@pytest.mark.parametrize("runtime", sorted(CASES))
def test_every_result_says_where_its_constants_come_from(runtime):
    model, device, chips, w = CASES[runtime]
    e, s = _pair(runtime, model, device, chips, 512, 64, weight_dtype=w)
    backend = mb.load_runtime(runtime).backend_for(mb.load_hardware(device)).name
    assert e.calibration == s.calibration and e.calibration.startswith(backend)
    assert e.to_dict()["calibration"] == e.calibration and ("calibration", e.calibration) in s.rows()


def test_the_engines_with_a_served_block_say_what_is_assumed():
    for name in ("vllm", "sglang", "tensorrt-llm"):
        line = mb.estimate("llama-3.1-8b", "h200", runtime=name).calibration
        assert "fitted on" in line and "H200" in line and "assumed" in line


def test_the_cli_footer_names_the_calibration(capsys):
    from membound.present.cli import main
    assert main(["estimate", "llama-3.1-8b", "h200", "--runtime", "vllm"]) == 0
    assert "calibration" in capsys.readouterr().out
    assert main(["serve", "llama-3.1-8b", "h200", "--concurrency", "1", "--runtime", "sglang"]) == 0
    assert "calibration: sglang" in capsys.readouterr().out


# ---- speculative decoding: the drafter's passes are terms of the one step -----------------------

# (target, device, layout, formats, draft, runtimes): a dense draft of a dense target, on one chip and
# tensor-parallel, under pipeline stages, an MoE target with a dense draft, and DeepSeek's MTP module
# (an MoE draft, expert-parallel like its target)
SPECULATIVE = [("llama-3.1-8b", "h100-sxm", mb.Parallel(), dict(weight_dtype="bf16"), "llama-3.2-1b"),
               ("llama-3.1-70b", "h200", mb.Parallel(tp=2), dict(weight_dtype="fp8"), "llama-3.2-1b"),
               ("llama-3.1-70b", "h200", mb.Parallel(tp=2, pp=2), dict(weight_dtype="fp8"), "llama-3.2-1b"),
               ("qwen3-30b-a3b", "h200", mb.Parallel(), dict(weight_dtype="bf16"), "qwen3-0.6b"),
               ("deepseek-r1", "h200", mb.Parallel(tp=8), dict(weight_dtype="fp8", kv_dtype="fp8"), "mtp"),
               ("deepseek-r1", "h200", mb.Parallel(ep=8), dict(weight_dtype="fp8", kv_dtype="fp8"), "mtp")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(SPECULATIVE), runtime=st.sampled_from(["vllm", "sglang", "tensorrt-llm", "device", "ideal"]),
       S=lengths, T=st.integers(2, 4096), gamma=st.integers(1, 6), alpha=st.floats(0.0, 1.0),
       rho=st.sampled_from([0.0, 0.5]))
def test_a_lone_client_gets_estimates_ttft_and_tpot_with_speculative_decoding(case, runtime, S, T, gamma, alpha,
                                                                              rho):
    # estimate(batch=1)'s round (gamma draft passes, the first over every verified position, and the verify
    # pass, core.draft_passes / pass_terms) is the served step of one client, and the drafter's prefill of the
    # prompt (core.prefill on the draft's chip, in the target's chunks) is in both TTFTs
    model, device, layout, formats, draft = case
    spec = (mb.mtp(model, gamma, alpha) if draft == "mtp" else
            mb.SpeculativeDecoding(draft=draft, gamma=gamma, acceptance_rate=alpha, route_correlation=rho))
    common = dict(prompt_tokens=S, output_tokens=T, n_chips=layout.chips, parallel=layout, runtime=runtime,
                  allow_beyond_context=True, speculative=spec, **formats)
    e = mb.estimate(model, device, batch=1, check_memory=False, **common)
    try:
        s = mb.serve(model, device, concurrency=1, **common)
    except mb.MemboundError as err:     # the longest requests outgrow the KV cache in serve
        assert "KV cache for one request fits" in str(err)
        return
    assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
    assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)


# groq-2024's case (Qwen3-0.6B on 8 LPUs of 230 MB SRAM) has no room for a draft beside its target
DRAFTED = sorted(r for r in CASES if r != "groq-2024")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runtime=st.sampled_from(DRAFTED), S=lengths, T=st.integers(2, 4096), gamma=st.integers(1, 6),
       alpha=st.floats(0.0, 1.0))
def test_every_runtime_prices_a_draft_models_round_alike_in_estimate_and_serve(runtime, S, T, gamma, alpha):
    # a draft model beside every shipped runtime's case, multi-tier devices included (SambaNova: the draft's
    # bytes take their place in the target chip's tiers in both)
    model, device, chips, w = CASES[runtime]
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=gamma, acceptance_rate=alpha)
    common = dict(prompt_tokens=S, output_tokens=T, n_chips=chips, runtime=runtime, weight_dtype=w,
                  allow_beyond_context=True, speculative=spec)
    e = mb.estimate(model, device, batch=1, check_memory=False, **common)
    try:
        s = mb.serve(model, device, concurrency=1, **common)
    except mb.MemboundError as err:     # the longest requests outgrow a small device's KV cache in serve
        assert isinstance(err, mb.DoesNotFitError) or "KV cache for one request fits" in str(err)
        return
    assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
    assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)
