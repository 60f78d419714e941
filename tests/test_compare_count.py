"""compare() with no chip count: each device on estimate()'s own default count, through estimate's
one fewest-chips search, whose last evaluation is the answer (issue 33: not evaluated twice)."""
from hypothesis import HealthCheck, given, settings, strategies as st

import membound as mb
from membound.errors import DoesNotFitError
from membound.physics import estimate as estimate_module


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-20b"]),
       device=st.sampled_from(["h100-sxm", "l40s", "mi300x", "sambanova-sn40l", "groq-lpu", "apple-m4-max"]),
       batch=st.sampled_from([1, 8, 256]), prompt=st.sampled_from([1, 2048, 30000]),
       output=st.sampled_from([1, 256, 4000]), weights=st.sampled_from(["bf16", "fp8"]),
       runtime=st.sampled_from([None, "vllm"]))
def test_compare_is_estimate_on_its_default_count(model, device, batch, prompt, output, weights, runtime):
    kw = dict(batch=batch, prompt_tokens=prompt, output_tokens=output, weight_dtype=weights, runtime=runtime)
    c = mb.compare(model, [device], **kw)
    try:
        want = mb.estimate(model, device, **kw)
    except DoesNotFitError as e:
        assert c.results == () and c.dropped == ((mb.load_hardware(device).name, str(e)),)
        return
    assert c.dropped == () and [r.to_dict() for r in c.results] == [want.to_dict()]


def test_a_device_the_first_count_holds_is_evaluated_once(monkeypatch):
    # 8B on one H100 (16 GB of weights in 80 GB): the search's first count holds it, and that
    # evaluation is compare's answer: one core evaluation, not the search's and then estimate's
    calls = []
    real = estimate_module.evaluate
    # counted on the cold path: no configuration planned by an earlier test (its own plan, or its
    # structure's shared one, which another model's or device's evaluations may have traced)
    monkeypatch.setattr(estimate_module, "_PLANS", {})
    monkeypatch.setattr(estimate_module, "_SHARED", {})
    monkeypatch.setattr(estimate_module, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
    (r,) = mb.compare("llama-3.1-8b", ["h100-sxm"], batch=3, prompt_tokens=999, output_tokens=77).results
    assert (r.n_chips, len(calls)) == (1, 1)


def test_past_the_window_with_allow_beyond_context():
    # 200,000 + 100 tokens past llama-3.1-8b's 131,072: compare counts as estimate does with
    # allow_beyond_context=True (the count's search refused it before: it did not pass the flag on)
    kw = dict(prompt_tokens=200_000, output_tokens=100, allow_beyond_context=True)
    (r,) = mb.compare("llama-3.1-8b", ["h100-sxm"], **kw).results
    assert r.to_dict() == mb.estimate("llama-3.1-8b", "h100-sxm", **kw).to_dict()
