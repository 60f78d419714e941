"""The fewest chips that hold a model, checked against hand arithmetic."""
import pytest

import membound as mb
from membound.physics.capacity import layout_for, min_chips


def test_70b_bf16_needs_two_h100s():
    m = mb.load_model("llama-3.1-70b")
    w = m.total_params * 2          # ~141e9 bytes of bf16 weights
    cap = mb.load_hardware("h100-sxm").capacity_bytes   # 81,559 MiB usable = 85.5e9 bytes
    assert 1 < w / cap < 2
    assert min_chips(m, "h100-sxm", context_tokens=4096) == 2


def test_one_chip_when_it_fits_and_more_for_longer_context():
    assert min_chips("llama-3.1-8b", "h100-sxm") == 1     # 16 GB of weights in 85.5 GB
    # 8B at batch 64 x 32k context: KV = 64 * 32768 * 131,072 B = 275 GB > 85.5 GB, so more chips
    assert 64 * 32768 * 131072 / 1e9 > 2 * 85.5
    n = min_chips("llama-3.1-8b", "h100-sxm", batch=64, context_tokens=32768)
    assert n >= 4
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=64, prompt_tokens=32767, output_tokens=1,
                    n_chips=n, parallel=layout_for("llama-3.1-8b", "h100-sxm", n))
    assert r.memory.fits
    smaller = [k for k in range(1, n) if layout_for("llama-3.1-8b", "h100-sxm", k) is not None]
    for k in smaller:
        r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=64, prompt_tokens=32767, output_tokens=1, n_chips=k,
                        parallel=layout_for("llama-3.1-8b", "h100-sxm", k), check_memory=False)
        assert not r.memory.fits


def test_layout_respects_scale_up_domain_and_devices_without_links():
    assert layout_for("llama-3.1-70b", "h100-sxm", 16) == mb.Parallel(tp=8, pp=2)   # NVLink domain: 8
    assert mb.load_hardware("apple-m1-max").interconnect is None
    with pytest.raises(mb.InvalidInputError, match="interconnect"):
        layout_for("llama-3.1-8b", "apple-m1-max", 2)
    assert layout_for("llama-3.1-8b", "apple-m1-max", 1) == mb.Parallel()


def test_impossible_raises_does_not_fit_and_bad_input_names_field():
    with pytest.raises(mb.DoesNotFitError):
        min_chips("llama-3.1-405b", "h100-sxm", max_chips=4)
    with pytest.raises(mb.InvalidInputError, match="batch"):
        min_chips("llama-3.1-8b", "h100-sxm", batch=0)
    with pytest.raises(mb.UnknownNameError):
        min_chips("no-such-model", "h100-sxm")
