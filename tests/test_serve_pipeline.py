"""Pipeline stages (pp > 1) in serve(): terms of the one step (`core.pipeline_pass`), priced as estimate()
prices them: a full pipeline's step is max(1, m x share) passes of one micro-batch, a step of prompts alone
fills it in (m + pp - 1) x share. Laws: a lone client gets estimate(batch=1)'s TTFT and TPOT through the
stages, and a static batch's decode step is the served step; hand-derived steps."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving import build

# (model, device, layout, weight format): even and uneven stages, with and without tensor parallelism
PIPELINES = [("llama-3.1-70b", "h100-sxm", mb.Parallel(tp=2, pp=2), "fp8"),
             ("llama-3.1-8b", "h200", mb.Parallel(pp=3), "bf16"),
             ("llama-3.1-70b", "h200", mb.Parallel(tp=1, pp=4), "fp8"),
             ("gpt-oss-120b", "h200", mb.Parallel(pp=2), "mxfp4")]
RUNTIMES = ["ideal", "device", "vllm", "sglang", "tensorrt-llm"]
lengths = st.one_of(st.integers(1, 4096), st.integers(4097, 131_072))


def _kw(case, runtime):
    model, device, layout, w = case
    kw = dict(n_chips=layout.chips, parallel=layout, runtime=runtime, weight_dtype=w, allow_beyond_context=True)
    if model.startswith("gpt-oss"):
        kw["dense_weight_dtype"] = "bf16"
    return model, device, kw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(PIPELINES), runtime=st.sampled_from(RUNTIMES), S=lengths, T=st.integers(2, 4096))
def test_a_lone_client_gets_estimates_ttft_and_tpot_through_pipeline_stages(case, runtime, S, T):
    model, device, kw = _kw(case, runtime)
    e = mb.estimate(model, device, batch=1, prompt_tokens=S, output_tokens=T, check_memory=False, **kw)
    try:
        s = mb.serve(model, device, concurrency=1, prompt_tokens=S, output_tokens=T, **kw)
    except mb.MemboundError as err:      # the longest requests outgrow the KV cache in serve
        assert "KV cache for one request fits" in str(err)
        return
    assert s.ttft.mean == pytest.approx(e.ttft_s, rel=1e-9)
    assert s.tpot.mean == pytest.approx(e.tpot_s, rel=1e-9)
    assert s.parallel == f"tp={case[2].tp} pp={case[2].pp} ep=1"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(PIPELINES), runtime=st.sampled_from(RUNTIMES), B=st.integers(1, 256),
       L=st.integers(1, 131_072))
def test_a_static_batchs_decode_step_through_pipeline_stages_is_the_served_step(case, runtime, B, L):
    model, device, kw = _kw(case, runtime)
    e = mb.estimate(model, device, batch=B, prompt_tokens=L, output_tokens=1, check_memory=False, **kw)
    sm, _, _ = build(model, device, prompt=mb.serving.Fixed(L), output=mb.serving.Fixed(2), **kw)
    assert float(sm.step(float(B), float(sm.attended(L)), h=float(sm.held(L)))) == pytest.approx(e.tpot_s, rel=1e-9)


# Llama-3.1-8B bf16 (32 layers, hidden 4,096) on H100s under the pure roofline (no floor, no overhead):
# a stage boundary costs one NVLink hop, 3 us + tokens x 4,096 x 2 bytes / 450 GB/s
def _hop(tokens):
    return 3e-6 + tokens * 4096 * 2 / 450e9


def _sm(pp):
    return build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(200), runtime="ideal",
                 n_chips=pp, parallel=mb.Parallel(pp=pp))[0]


def test_a_full_pipelines_step_is_one_micro_batchs_pass_by_hand():
    # pp = 4 stages of 8 layers (share 8/32): 8 running sequences go in m = min(8, 4) = 4 micro-batches of 2,
    # and a step takes max(1, 4 x 8/32) = 1 pass of a micro-batch through all the layers: one chip's step of
    # 2 sequences (the same bytes at the same bandwidth), plus 3 boundary hops of 2 tokens
    one, four = _sm(1), _sm(4)
    u = float(one.attended(1100))
    assert float(four.step(8.0, u)) == pytest.approx(float(one.step(2.0, u)) + 3 * _hop(2), rel=1e-12)
    # 2 sequences: 2 micro-batches of 1, max(1, 2 x 8/32) = 1 pass
    assert float(four.step(2.0, u)) == pytest.approx(float(one.step(1.0, u)) + 3 * _hop(1), rel=1e-12)


def test_uneven_stages_beat_at_the_largest_by_hand():
    # pp = 3: the largest stage holds ceil(32 / 3) = 11 layers (share 11/32); 6 sequences in 3 micro-batches
    # of 2: a step takes max(1, 3 x 11/32) = 33/32 passes of a micro-batch (the memory and compute terms;
    # the hops, 2 of 2 tokens, once)
    one, three = _sm(1), _sm(3)
    u = float(one.attended(1100))
    assert float(three.step(6.0, u)) == pytest.approx(33 / 32 * float(one.step(2.0, u)) + 2 * _hop(2), rel=1e-12)


def test_a_lone_prompt_fills_the_pipeline_by_hand():
    # one prompt of 1,000 tokens on pp = 3: its micro-batch leaves the last stage (1 + 3 - 1) x 11/32 = 33/32
    # passes after it entered, and crosses 2 boundaries with its 1,000 tokens; one client's TTFT is that
    one, three = _sm(1), _sm(3)
    r1 = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=1000, output_tokens=200, runtime="ideal")
    r3 = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=1000, output_tokens=200, runtime="ideal",
                  n_chips=3, parallel=mb.Parallel(pp=3))
    assert r3.ttft.mean == pytest.approx(33 / 32 * r1.ttft.mean + 2 * _hop(1000), rel=1e-12)
    # the decode steps of one client: one pass through all the stages, so the same TPOT but for the hops
    assert r3.tpot.mean == pytest.approx(r1.tpot.mean + 2 * _hop(1), rel=1e-12)
    assert three.n_chips == 3 and one.n_chips == 1
