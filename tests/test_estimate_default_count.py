"""estimate()'s default chip count (n_chips=None / "auto", issue 33 item 1): the fewest-chips search
evaluates the configuration on each count it tries, and the count it stops at is the one the call
reports, so a default call is answered by the search's last evaluation, not by a second one. These
tests pin that the answer is the one an explicit count gives, field by field, errors included."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import membound as mb
from membound.physics import estimate as est
from membound.physics.parallel import layout_for

# one-tier GPUs, a chip with memory tiers (SN40L: HBM, DDR), one without an interconnect
CHIPS = ["h100-sxm", "a100-40gb", "rtx-4090", "sambanova-sn40l", "apple-m2"]
MODELS = ["llama-3.2-1b", "llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b", "mixtral-8x7b"]


def _outcome(**kw):
    """A Result, or the error raised as (type, message, chips_needed)."""
    try:
        return mb.estimate(**kw)
    except mb.MemboundError as e:
        return type(e), str(e), getattr(e, "chips_needed", None)


@st.composite
def configurations(draw):
    hw = draw(st.sampled_from(CHIPS))
    kw = dict(model=draw(st.sampled_from(MODELS)), hardware=hw,
              batch=draw(st.sampled_from([1, 3, 16, 64, 512])),
              prompt_tokens=draw(st.sampled_from([0, 1, 100, 2048, 30000])),
              output_tokens=draw(st.sampled_from([1, 7, 256, 2000])),
              weight_dtype=draw(st.sampled_from(["bf16", "fp8", "int4"])),
              runtime=draw(st.sampled_from([None, "ideal", "vllm"])))
    if draw(st.booleans()):
        tiers = [t.name for t in mb.load_hardware(hw).memory]
        kw["placement"] = {draw(st.sampled_from(["weights", "kv"])): draw(st.sampled_from(tiers))}
    if draw(st.integers(0, 4)) == 0:
        kw["speculative"] = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=3, acceptance_rate=0.7)
    return kw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.sampled_from([None, "auto"]))
def test_the_default_count_answers_as_that_count_given(kw, auto):
    default = _outcome(**kw, n_chips=auto)
    if isinstance(default, tuple):      # the default raised: no count holds it, or a pinned tier overflows
        assert default[0] in (mb.DoesNotFitError, mb.InvalidInputError), default
        if default[0] is mb.DoesNotFitError and "pinned" in default[1]:
            # the search sizes the bytes per chip, which a placement only places: its count is the
            # unpinned call's, and that count given overflows the pinned tier alike
            n = mb.estimate(**{k: v for k, v in kw.items() if k != "placement"}).n_chips
            assert _outcome(**kw, n_chips=n) == default
        return
    given_count = _outcome(**kw, n_chips=default.n_chips)
    assert isinstance(given_count, mb.Result)
    for f in mb.Result.__dataclass_fields__:        # field by field (floats to the bit)
        assert getattr(default, f) == getattr(given_count, f), f
    assert default.memory.fits
    hw = mb.load_hardware(kw["hardware"])
    if len(hw.memory) == 1:             # one tier: every smaller count the rule uses whole does not fit
        m = mb.load_model(kw["model"])
        for n in range(1, default.n_chips):
            if layout_for(m, hw, n).chips == n:
                assert not _outcome(**kw, n_chips=n, check_memory=False).memory.fits, n


def _count_evaluations(monkeypatch) -> list:
    calls = []
    real = est.evaluate
    # counted on the cold path: no configuration planned by an earlier test (its own plan, or its
    # structure's shared one, answers without calling evaluate)
    monkeypatch.setattr(est, "_PLANS", {})
    monkeypatch.setattr(est, "_SHARED", {})

    def counting(*args, **kwargs):
        calls.append(kwargs.get("base"))
        return real(*args, **kwargs)
    monkeypatch.setattr(est, "evaluate", counting)
    return calls


def test_a_default_call_evaluates_each_count_it_tries_once(monkeypatch):
    calls = _count_evaluations(monkeypatch)
    # Llama 3.1 8B: 8.03e9 bf16 weights = 16.1 GB on an 80 GB H100: one chip holds it, the first
    # count tried, and that evaluation is the answer (it was two: the search's, then the call's)
    r = mb.estimate("llama-3.1-8b", "h100-sxm")
    assert r.n_chips == 1 and len(calls) == 1
    # Llama 3.1 70B: 70.6e9 bf16 weights = 141 GB: one 80 GB chip does not hold it; the search goes
    # on from ceil(141 / 80) = 2 chips, which hold 70.6 GB each: two evaluations (counts 1 and 2)
    calls.clear()
    r = mb.estimate("llama-3.1-70b", "h100-sxm")
    assert (r.n_chips, len(calls)) == (2, 2)
    # a count given: one evaluation; check_memory=False (one chip) and a parallel given: one
    for kw in (dict(n_chips=2), dict(check_memory=False), dict(parallel=mb.Parallel(tp=2))):
        calls.clear()
        mb.estimate("llama-3.1-70b", "h100-sxm", **kw)
        assert len(calls) == 1, kw


def test_a_pinned_tier_that_overflows_on_the_default_count_raises_as_that_count_given():
    # Llama 3.1 70B's KV: 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 327,680 B a token; a
    # batch of 4,096 at 131,000 tokens holds 4,096 x 131,000 x 327,680 B = 175.8 TB. Split at most 8
    # ways by tensor parallelism (8 KV heads) and 80 by stages (80 layers), a socket holds at least
    # 175.8 TB / 640 = 274.7 GB, over the 64 GiB of an SN40L's HBM: no count streams it at speed, so
    # the default is the fewest sockets that hold it at all, KV spilling to DDR. Pinned to HBM, the
    # KV overflows that tier there, as with that count given.
    m = mb.load_model("llama-3.1-70b")
    assert m.kv_bytes_per_token("bf16") == 80 * 8 * 128 * 2 * 2
    assert 4096 * 131_000 * 327_680 / 640 > 64 * 2**30 == mb.load_hardware("sambanova-sn40l").memory[0].capacity_bytes
    kw = dict(model=m, hardware="sambanova-sn40l", batch=4096, prompt_tokens=130_000, output_tokens=1_000)
    n = mb.estimate(**kw).n_chips
    kw["placement"] = {"kv": "HBM"}
    default, given_count = _outcome(**kw), _outcome(**kw, n_chips=n)
    assert default[0] is mb.DoesNotFitError and "pinned" in default[1]
    assert default == given_count
    # 70B bf16 at batch 1: 141.1 GB of weights; 2 sockets hold 70.6 GB each, over 64 GB of HBM, 4
    # hold 35.3 GB: the default is 4, and with the weights pinned to HBM it answers as 4 given
    kw = dict(model=m, hardware="sambanova-sn40l", placement={"weights": "HBM"})
    r = mb.estimate(**kw)
    assert r.n_chips == 4 and r == mb.estimate(**kw, n_chips=4)


@pytest.mark.parametrize("bad", [dict(batch=0), dict(prompt_tokens=-1), dict(weight_dtype="fp7"),
                                 dict(n_chips="most")])
def test_bad_input_on_the_default_count_names_its_field_and_value(bad):
    # the search's first evaluation checks the arguments, as the call with a count given does
    (field, value), = bad.items()
    with pytest.raises(mb.InvalidInputError, match=f"^{field}={value!r} is invalid"):
        mb.estimate("llama-3.1-8b", "h100-sxm", **bad)
