"""The one layout rule: every chip count gets a layout, memory per chip never rises with one more
chip, and min_chips is the true minimum (checked against a brute-force scan)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb

DEVICES = ["h100-sxm", "a100-40gb", "rtx-4090", "mi300x", "gb200", "tpu-v5e", "cerebras-wse-3", "groq-lpu",
           "sambanova-sn40l"]
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "gemma-3-27b"]


def per_chip(model, hw, n, **kw):
    return mb.estimate(model, hw, n_chips=n, output_tokens=1, check_memory=False, **kw).memory.total_bytes


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), st.integers(1, 255),
       st.sampled_from([(1, 4096), (32, 32768), (8, 8192)]), st.sampled_from(["bf16", "fp8", "int4"]))
def test_memory_per_chip_never_rises_with_one_more_chip(model, hw, n, load, dtype):
    B, L = load
    kw = dict(batch=B, prompt_tokens=L - 1, weight_dtype=dtype)
    assert per_chip(model, hw, n + 1, **kw) <= per_chip(model, hw, n, **kw) * (1 + 1e-12)


def brute_force(model, hw, B, L, dtype="bf16", top=400):
    for n in range(1, top):
        r = mb.estimate(model, hw, batch=B, prompt_tokens=L - 1, output_tokens=1, n_chips=n,
                        weight_dtype=dtype, check_memory=False)
        if r.memory.fits:
            return n
    return None


def test_min_chips_matches_brute_force_on_a_grid():
    cases = [("deepseek-v3", "a100-40gb", 32, 32768), ("deepseek-v3", "rtx-4090", 32, 32768),
             ("llama-3.1-70b", "rtx-4090", 1, 4096), ("llama-3.1-70b", "cerebras-wse-3", 1, 8192),
             ("mixtral-8x7b", "a100-40gb", 64, 16384), ("llama-3.1-8b", "groq-lpu", 1, 2048),
             ("qwen3-30b-a3b", "l4", 16, 32768), ("llama-3.1-405b", "h100-sxm", 8, 8192)]
    for model, hw, B, L in cases:
        assert mb.min_chips(model, hw, batch=B, context_tokens=L) == brute_force(model, hw, B, L), (model, hw)


def test_min_chips_by_hand_on_wafers():
    """70B bf16 = 141.1e9 B of weights; a wafer holds 44e9 B: 3 wafers hold 27 layers each
    (27/80 x 141 = 47.6 GB > 44), 4 hold 20 each (35.3 GB + KV + activations < 44)."""
    m = mb.load_model("llama-3.1-70b")
    w = m.total_params * 2
    assert w * 27 / 80 > 44e9 > w * 20 / 80
    assert mb.min_chips(m, "cerebras-wse-3", context_tokens=8192) == 4
    r = mb.estimate(m, "cerebras-wse-3", n_chips=4, prompt_tokens=8191, output_tokens=1)
    assert r.parallel == "tp=1 pp=4 ep=1"


def test_user_chip_counts_that_used_to_fail():
    # tensor parallelism is never put across wafer I/O: 4 wafers pipeline 20 layers each
    r = mb.estimate("llama-3.1-70b", "cerebras-wse-3", n_chips=4)
    assert r.parallel == "tp=1 pp=4 ep=1" and r.bound != "communication"
    # 336 LPUs: stages first (a pipeline of whole units: 80 layers, the LM head's and embedding's 2
    # parts each), 336 // 84 = 4 chips a unit: tp 4 x 84 stages, each chip a quarter of a layer in
    # fp8: 855.7e6 / 4 = 0.214e9 B < 0.23e9 (330 // 84 = 3 gives tp 2: half a layer, 0.43e9, no fit)
    r = mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=336, weight_dtype="fp8")
    assert r.parallel == "tp=4 pp=84 ep=1" and r.memory.fits
    with pytest.raises(mb.DoesNotFitError):
        mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=330, weight_dtype="fp8")
