"""estimate(): numbers derived by hand from bytes, bandwidth and FLOPs."""
import math

import numpy as np
import pytest

import membound as mb
from membound.catalog.hardware import Hardware
from membound.physics.estimate import prepare

H100_BW = 3.35e12          # B/s, NVIDIA datasheet
H100_BF16 = 989e12         # dense FLOP/s
L8B = 8_030_261_248        # Llama-3.1-8B parameters (published 8.03B)
L70B_PARAMS = 70.55e9
# Decode streams every weight but the untied input-embedding table, of which it reads only the
# rows of the tokens in the pass (a lookup, no FLOPs): 128,256 x 4,096 = 525M parameters.
LOOKUP_8B = 128256 * 4096
W8B = 2 * (L8B - LOOKUP_8B + 4096)     # bf16 bytes streamed per step at batch 1
MM8B = L8B - LOOKUP_8B                 # parameters in matrix multiplies (2 FLOPs each per token)
KV_8B = 2 * 32 * 8 * 128 * 2   # bytes per token: K and V, 32 layers, 8 KV heads, head_dim 128, bf16


def test_seed_arithmetic_70b_fp16_on_h100():
    # 70B at 16 bits is ~140 GB per token; 3.35 TB/s / 141 GB ≈ 24 tok/s.
    bytes_per_token = L70B_PARAMS * 2
    assert bytes_per_token == pytest.approx(141.1e9, rel=1e-3)
    ceiling = mb.bandwidth_ceiling("llama-3.1-70b", "h100-sxm", "bf16")
    # membound streams the 128,256 x 8,192 input embedding as a lookup: 139.0 GB -> 24.1 tok/s
    streamed = 2 * (70_553_706_496 - 128256 * 8192 + 8192)
    assert ceiling == pytest.approx(3.35e12 / streamed, rel=1e-9)
    assert 23 < ceiling < 25


def test_ideal_decode_one_token_is_the_bandwidth_ceiling():
    # Context 0, one step: only the weights stream. 2 bytes x 7.51e9 / 3.35e12 = 4.48 ms.
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert r.tpot_s == pytest.approx(W8B / H100_BW, rel=1e-9)
    assert r.decode_tok_s_per_user == pytest.approx(H100_BW / W8B, rel=1e-9)
    assert r.decode_tok_s_per_user == pytest.approx(mb.bandwidth_ceiling("llama-3.1-8b", "h100-sxm"), rel=1e-9)
    assert r.bound == "memory"


def test_kv_cache_streams_with_context():
    # At 8192 cached tokens one step also reads 8192 x 131072 B = 1.074 GB of KV.
    assert KV_8B == 131072
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=8192, output_tokens=1, runtime="ideal")
    assert r.tpot_s == pytest.approx((W8B + 8192 * KV_8B) / H100_BW, rel=1e-9)


def test_generation_integrates_kv_growth_token_by_token():
    # N steps at contexts 0..N-1: sum (W + t*kv)/bw = (N*W + kv*N(N-1)/2)/bw.
    n = 1000
    w = W8B
    total = (n * w + KV_8B * n * (n - 1) / 2) / H100_BW
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=0, output_tokens=n, runtime="ideal")
    assert r.decode_tok_s_per_user == pytest.approx(n / total, rel=1e-9)
    # the first token comes from prefill (none here: one plain step), the rest from decode
    assert r.e2e_s == pytest.approx(w / H100_BW + total * (n - 1) / n, rel=1e-9)


def test_large_batch_turns_compute_bound():
    # batch 1024 at context 0: 1024 x 2 x 7.51e9 FLOP / 989e12 = 15.5 ms > 4.5 ms of weights.
    b = 1024
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=b, prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert r.bound == "compute"
    assert r.tpot_s == pytest.approx(b * 2 * MM8B / H100_BF16, rel=1e-9)
    assert r.decode_tok_s_total == pytest.approx(b * H100_BF16 / (b * 2 * MM8B), rel=1e-9)


def test_batching_keeps_per_user_speed_until_the_ridge():
    one = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=0, output_tokens=1, runtime="ideal")
    eight = mb.estimate("llama-3.1-8b", "h100-sxm", batch=8, prompt_tokens=0, output_tokens=1, runtime="ideal")
    # memory-bound: same weights (plus 7 more embedding rows of 8 KB), 8x the aggregate
    assert eight.tpot_s == pytest.approx(one.tpot_s + 7 * 4096 * 2 / H100_BW, rel=1e-9)
    assert eight.decode_tok_s_total == pytest.approx(8 / eight.tpot_s, rel=1e-9)
    assert eight.decode_tok_s_total > 7.99 * one.decode_tok_s_total


def test_moe_batch_one_reads_only_the_routed_experts():
    m = mb.load_model("mixtral-8x7b")
    r1 = mb.estimate(m, "h200", prompt_tokens=0, output_tokens=1, runtime="ideal")
    hw = mb.load_hardware("h200")
    lookup = 32000 * 4096              # untied input embedding: one row read per token
    # batch 1: k=2 of 8 experts -> the active parameters (12.9B) at 2 bytes
    assert r1.tpot_s == pytest.approx(2 * (m.active_params - lookup + 4096) / hw.bandwidth_bytes_s, rel=1e-9)
    # batch 64: expected experts touched 8(1-(6/8)^64) ≈ 8 -> nearly all 46.7B
    r64 = mb.estimate(m, "h200", batch=64, prompt_tokens=0, output_tokens=1, runtime="ideal")
    touched = 8 * (1 - (6 / 8) ** 64)
    weights = m.dense_params - lookup + 64 * 4096 + m.n_moe_layers * touched * m.expert_params
    assert r64.tpot_s == pytest.approx(max(2 * weights / hw.bandwidth_bytes_s,
                                           64 * 2 * (m.active_params - lookup) / hw.compute_flops["bf16"]), rel=1e-9)


def test_sliding_window_caps_kv():
    # mistral-7b v0.1 has a 4096-token window on every layer: 8192 tokens cache like 4096.
    a = mb.estimate("mistral-7b", "h100-sxm", prompt_tokens=4096, output_tokens=1, runtime="ideal")
    b = mb.estimate("mistral-7b", "h100-sxm", prompt_tokens=8192, output_tokens=1, runtime="ideal")
    assert a.tpot_s == pytest.approx(b.tpot_s, rel=1e-12)
    assert a.memory.kv_bytes == pytest.approx(4096 * 2 * 32 * 8 * 128 * 2, rel=1e-3)


def test_prefill_is_compute_bound_and_is_ttft():
    # 2048 tokens. The LM head (128,256 x 4,096 = 525,336,576 params) runs for the last token only
    # (its logits are the first output token); the 32 layers' GEMMs for all 2048:
    #   per layer: q,o 2 x 4096^2 + k,v 2 x 4096 x 1024 + gate,up,down 3 x 4096 x 14336
    #            = 33,554,432 + 8,388,608 + 176,160,768 = 218,103,808 (norms, 8,192, do no GEMM
    #              FLOPs here but are counted in the active params: 32 x 8,192 + 4,096 final)
    #   body = MM8B - head = 8,030,261,248 - 2 x 525,336,576 = 6,979,588,096 params
    #   FLOPs = 2 x 6,979,588,096 x 2048 + 2 x 525,336,576 + attention 4 x 32 heads x 128 x 32 layers
    #           x 2048*2047/2 = 2.8588e13 + 1.0507e9 + 1.1003e12 = 2.9689e13 -> 30.02 ms at 989 TFLOP/s
    #   (an LM head over all 2048 tokens would add 2.15e12 FLOPs, 7.2%)
    s = 2048
    head = 128256 * 4096
    body = MM8B - head
    assert body == 6_979_588_096 == 32 * 218_103_808 + 32 * 8192 + 4096
    flops = 2 * body * s + 2 * head + 4 * 32 * 128 * 32 * s * (s - 1) / 2
    assert flops == pytest.approx(2.9689e13, rel=1e-4)
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=s, output_tokens=1, runtime="ideal")
    assert r.prefill_s == pytest.approx(flops / H100_BF16, rel=1e-9)
    assert r.ttft_s == r.prefill_s
    # B prompts: each its own last token through the head
    r4 = mb.estimate("llama-3.1-8b", "h100-sxm", batch=4, prompt_tokens=s, output_tokens=1, runtime="ideal")
    assert r4.prefill_s == pytest.approx(4 * flops / H100_BF16, rel=1e-9)


def test_a_runtime_computing_every_positions_logits_runs_the_head_over_the_whole_prompt():
    # Hugging Face transformers before v4.45 ran the LM head over every prompt position in a
    # prefill (prefill_logits: all). On the pure roofline with that setting, 2048 tokens of
    # Llama-3.1-8B on an H100:
    #   body  = 6,979,588,096 params x 2 FLOPs x 2048 tokens                = 28,588,392,841,216
    #   head  = 128,256 x 4,096 = 525,336,576 params x 2 x 2048 (not x 1)  =  2,151,778,615,296
    #   attention 4 x 32 heads x 128 x 32 layers = 524,288 x 2048 x 2047 / 2 = 1,098,974,756,864
    #   total = 31,839,146,213,376 FLOPs -> 32.193 ms at 989 TFLOP/s (last-token head: 30.02 ms)
    from membound.catalog.runtime import IDEAL
    s, head, body = 2048, 128256 * 4096, 6_979_588_096
    flops = 2 * body * s + 2 * head * s + 4 * 32 * 128 * 32 * s * (s - 1) / 2
    assert flops == 31_839_146_213_376
    every = IDEAL.model_copy(update={"name": "ideal-all-logits", "prefill_logits": "all"})
    r = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=s, output_tokens=1, runtime=every)
    assert r.prefill_s == pytest.approx(flops / H100_BF16, rel=1e-9)
    assert r.prefill_s == pytest.approx(32.193e-3, rel=1e-4)
    last = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=s, output_tokens=1, runtime="ideal")
    assert r.prefill_s - last.prefill_s == pytest.approx(2 * head * (s - 1) / H100_BF16, rel=1e-9)
    # decode steps run the head for their one token either way
    assert r.tpot_s == last.tpot_s


def test_hf_transformers_rows_run_the_head_over_every_position_tinychat_over_the_last():
    from membound.catalog.runtime import load_runtime
    assert load_runtime("hf-transformers").prefill_logits == "all"
    assert "v4.45" in load_runtime("hf-transformers").prefill_logits_evidence
    assert load_runtime("tinychat").prefill_logits == "last"
    assert load_runtime("vllm").prefill_logits == "last"


def test_realistic_default_sits_below_the_ceiling():
    # The check: below 3.35e12 / 16.06e9 ≈ 209 tok/s, within what real systems reach
    # (SGLang on H100, batch 1: 158 tok/s, EAGLE-3 paper; measurements.csv).
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=128, output_tokens=128,
                    weight_dtype="bf16")
    assert r.decode_tok_s_per_user < 3.35e12 / 16.06e9
    assert 130 < r.decode_tok_s_per_user < 209


def test_tensor_parallel_divides_bytes_and_adds_all_reduces():
    hw = mb.load_hardware("h100-sxm")
    m = mb.load_model("llama-3.1-70b")
    r = mb.estimate(m, hw, n_chips=8, parallel=mb.Parallel(tp=8), prompt_tokens=0, output_tokens=1,
                    runtime="ideal")
    mem = 2 * (m.total_params - 128256 * 8192 + 8192) / 8 / H100_BW
    link = hw.interconnect
    assert link.topology == "switch"      # NVSwitch: reduce-scatter + all-gather, 2 hops for any tp
    act = 1 * 8192 * 2   # one token's hidden state in bf16
    ring = 2 * 7 / 8 * act / link.bandwidth_bytes_s + 2 * link.latency_s
    comm = 80 * 2 * ring
    assert r.tpot_s == pytest.approx(mem + comm, rel=1e-9)
    assert r.step_terms_s["communication"] == pytest.approx(comm, rel=1e-9)


def test_fp8_and_fp4_gemms_still_all_reduce_the_16_bit_residual():
    # The GEMMs compute in fp8 (fp4), quantizing their inputs inside the kernel; what the row-parallel
    # layer all-reduces is their 16-bit output (quantization.Resolved.residual_bytes, cited there).
    # Llama-3.1-70B fp8 on 8 x H100 (NVLink 450 GB/s each way, 3 us per hop, switched: 2 hops),
    # batch 256, one token each: 80 layers x 2 all-reduces, each chip moving 2 x 7/8 of
    # 256 x 8192 x 2 B = 4,194,304 B: 160 x (7,340,032 / 4.5e11 + 6e-6) = 160 x 22.311 us = 3.570 ms
    # (at fp8's 1 byte it would be 160 x (3,670,016 / 4.5e11 + 6e-6) = 2.265 ms)
    r = mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, weight_dtype="fp8", batch=256, prompt_tokens=0,
                    output_tokens=1, runtime="ideal")
    assert r.activation_dtype == "fp8" and r.parallel == "tp=8 pp=1 ep=1"
    assert r.step_terms_s["communication"] == pytest.approx(160 * (7_340_032 / 4.5e11 + 6e-6), rel=1e-9)
    assert r.step_terms_s["communication"] == pytest.approx(3.570e-3, rel=1e-3)
    # nvfp4 on 8 x B200 (NVLink 5: 900 GB/s each way, 3 us per hop), batch 64:
    # 160 x (2 x 7/8 x 64 x 8192 x 2 B / 9e11 + 6e-6) = 160 x (1,835,008 / 9e11 + 6e-6) = 160 x 8.039 us = 1.286 ms
    b = mb.estimate("llama-3.1-70b", "b200", n_chips=8, weight_dtype="nvfp4", batch=64, prompt_tokens=0,
                    output_tokens=1, runtime="ideal")
    assert b.activation_dtype == "nvfp4"
    assert b.step_terms_s["communication"] == pytest.approx(160 * (1_835_008 / 9e11 + 6e-6), rel=1e-9)


def test_does_not_fit_says_how_much_and_how_many_chips():
    with pytest.raises(mb.DoesNotFitError) as e:
        mb.estimate("llama-3.1-70b", "h100-sxm", prompt_tokens=2048, output_tokens=256, n_chips=1)
    err = e.value
    assert err.missing_bytes > 2 * L70B_PARAMS - 85_520_809_984
    assert err.chips_needed == 2
    assert "missing" in str(err) and "2 chips" in str(err)
    # the default (n_chips=None, "auto") is that count
    assert mb.estimate("llama-3.1-70b", "h100-sxm", prompt_tokens=2048, output_tokens=256).n_chips == 2
    # check_memory=False returns the number (on one chip) and says it does not fit
    r = mb.estimate("llama-3.1-70b", "h100-sxm", check_memory=False)
    assert r.memory.fits is False


def test_cost_per_million_tokens():
    hw = mb.load_hardware("h100-sxm").with_overrides(price_usd_per_hour=3.6)
    r = mb.estimate("llama-3.1-8b", hw, batch=4, prompt_tokens=0, output_tokens=1, runtime="ideal")
    # $3.6/h = $0.001/s; 4 tokens per step of 2*8.03e9/3.35e12 s
    step = (W8B + 3 * 2 * 4096) / H100_BW        # four tokens look up four embedding rows
    assert r.cost_per_million_tokens_usd == pytest.approx(0.001 * step / 4 * 1e6, rel=1e-9)


def test_tiers_fill_fastest_first_and_times_add():
    hw = Hardware(name="two-tier", display_name="test", vendor="test", kind="rdu",
                  memory=[{"name": "HBM", "capacity_bytes": 10e9, "bandwidth_bytes_s": 1e12, "source": "t"},
                          {"name": "SRAM", "capacity_bytes": 1e9, "bandwidth_bytes_s": 100e12, "source": "t"}],
                  compute_flops={"bf16": 1e15}, compute_source="t")
    assert [t.name for t in hw.memory] == ["SRAM", "HBM"]
    m = mb.load_model("llama-3.2-1b")
    w = 2 * m.total_params           # ~2.47 GB: 1 GB in SRAM, the rest in HBM
    r = mb.estimate(m, hw, prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert r.tpot_s == pytest.approx(1e9 / 100e12 + (w - 1e9) / 1e12, rel=1e-9)
    sram, hbm = r.memory.placement
    assert (sram.tier, sram.weights_bytes) == ("SRAM", 1e9)
    assert hbm.weights_bytes == pytest.approx(w - 1e9)
    # pinning everything to HBM
    p = mb.estimate(m, hw, prompt_tokens=0, output_tokens=1, runtime="ideal", placement={"weights": "HBM"})
    assert p.tpot_s == pytest.approx(w / 1e12, rel=1e-9)
    with pytest.raises(mb.DoesNotFitError):
        mb.estimate(m, hw, output_tokens=1, placement={"weights": "SRAM"})


@pytest.mark.parametrize("kwargs, field", [
    (dict(batch=0), "batch"), (dict(batch=-3), "batch"), (dict(batch=1.5), "batch"),
    (dict(prompt_tokens=-1), "prompt_tokens"), (dict(output_tokens=0), "output_tokens"),
    (dict(n_chips=0), "n_chips"), (dict(weight_dtype="int3"), "dtype"),
    (dict(n_chips=2.5), "n_chips"),
])
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(mb.MemboundError) as e:
        mb.estimate("llama-3.1-8b", "h100-sxm", **kwargs)
    assert field.split(".")[0] in str(e.value) or field in str(e.value)


def test_unknown_names_are_clear():
    with pytest.raises(mb.UnknownNameError, match="unknown model"):
        mb.estimate("llama-9", "h100-sxm")
    with pytest.raises(mb.UnknownNameError, match="unknown hardware 'h900'"):
        mb.estimate("llama-3.1-8b", "h900")
    with pytest.raises(mb.UnknownNameError, match="unknown runtime"):
        mb.estimate("llama-3.1-8b", "h100-sxm", runtime="turbo")


def test_tp_must_divide_heads():
    with pytest.raises(mb.InvalidInputError, match="parallel.tp"):
        mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=3, parallel=mb.Parallel(tp=3))
    with pytest.raises(mb.InvalidInputError, match="parallel"):
        mb.estimate("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=4))


def test_no_fp8_on_a100():
    with pytest.raises(mb.InvalidInputError, match="activation_dtype"):
        mb.estimate("llama-3.1-8b", "a100-80gb", weight_dtype="fp8", activation_dtype="fp8")
    # defaulted: fp8 weights on an A100 compute in bf16 (weight-only)
    r = mb.estimate("llama-3.1-8b", "a100-80gb", weight_dtype="fp8")
    assert r.activation_dtype == "bf16"


def test_results_have_no_nan():
    r = mb.estimate("deepseek-v3", "h200", n_chips=8, weight_dtype="fp8", batch=32,
                    prompt_tokens=4096, output_tokens=512, runtime="vllm")
    for k, v in r.to_dict().items():
        if isinstance(v, float):
            assert math.isfinite(v), k


def test_cached_setup_gives_the_numbers_of_a_fresh_one():
    # prepare() resolves layout, formats and runtime once per distinct set of arguments; the
    # cached set-up at a new workload must equal one resolved afresh, field for field
    import sys
    est = sys.modules["membound.physics.estimate"]
    kw = dict(n_chips=8, weight_dtype="fp8", runtime="vllm")
    for batch, prompt, output in ((1, 0, 1), (16, 2048, 512), (300, 100, 7)):
        cached = est.prepare("llama-3.1-70b", "h100-sxm", batch=batch, prompt_tokens=prompt, output_tokens=output, **kw)
        fresh = est._resolve(mb.load_model("llama-3.1-70b"), mb.load_hardware("h100-sxm"),
                             sys.modules["membound.catalog.runtime"].load_runtime("vllm"), 8, None, "fp8", None, None,
                             None, None, None, None).at(batch, prompt, output)
        assert (cached.batch, cached.prompt, cached.output) == (batch, prompt, output)
        assert cached.evaluate() == fresh.evaluate()
    # an unhashable argument (a placement dict) is resolved afresh, with the same numbers
    pinned = mb.estimate("llama-3.1-8b", "h100-sxm", placement={"weights": "HBM3"})
    assert pinned.decode_tok_s_per_user == mb.estimate("llama-3.1-8b", "h100-sxm").decode_tok_s_per_user


def test_a_plain_configuration_carries_evaluates_defaults():
    # estimate() calls core.evaluate without Prepared.extra where a configuration has neither
    # speculative decoding nor pinned tiers; that is the same call only while such a configuration's
    # extras are evaluate's keyword defaults: 1 position verified, no SpecArgs, drafter or pinning,
    # 0 extra weight or KV bytes
    import inspect
    from membound.physics import core
    from membound.physics.estimate import prepare
    defaults = {k: v.default for k, v in inspect.signature(core.evaluate).parameters.items() if k in
                ("positions", "spec", "draft", "pinned", "extra_weight_bytes_chip", "extra_kv_bytes_token_chip")}
    assert defaults == dict(positions=1.0, spec=None, draft=None, pinned=None, extra_weight_bytes_chip=0.0,
                            extra_kv_bytes_token_chip=0.0)
    for kw in ({}, dict(runtime="vllm", n_chips=8, weight_dtype="fp8"), dict(runtime="llama.cpp", weight_dtype="q4_0")):
        p = prepare("llama-3.1-8b", "h100-sxm", **kw)
        assert p.spec_args is None and p.pinned is None
        assert p.extra == defaults and [type(v) for v in p.extra.values()] == [type(v) for v in defaults.values()]
    tiered = prepare("llama-3.1-8b", "sambanova-sn40l", placement={"weights": "HBM"})
    assert tiered.pinned is not None and tiered.extra["pinned"] == tiered.pinned     # passed on: not the default


def test_prepared_rebuilds_its_chip_base_when_replaced():
    # Prepared caches core.chip_base (rates, shares, GEMM seconds per token) per configuration;
    # dataclasses.replace with other efficiencies or knobs must not reuse the stale one. Every
    # prefill FLOP runs at peak x compute_fraction, so halving the fraction doubles the prefill's
    # compute term exactly (x / (c/2) = 2x / c); tp=2 halves it ((2 N + attn) / 2 per chip).
    import dataclasses
    from membound.physics.estimate import prepare
    p = prepare("llama-3.1-8b", "h100-sxm", prompt_tokens=2048)
    base = p.evaluate()["prefill_compute_s"]
    slow = dataclasses.replace(p, eff=dataclasses.replace(p.eff, compute_fraction=p.eff.compute_fraction / 2))
    assert slow.evaluate()["prefill_compute_s"] == pytest.approx(2 * base, rel=1e-12)
    assert p.evaluate(tp=2.0)["prefill_compute_s"] == pytest.approx(base / 2, rel=1e-12)
    wide = dataclasses.replace(p, knobs=dataclasses.replace(p.knobs, tp=2.0))
    assert wide.evaluate()["prefill_compute_s"] == pytest.approx(base / 2, rel=1e-12)


@pytest.mark.parametrize("pp, batch, fill", [
    (2, 2, (2 + 2 - 1) * 16 / 32),    # 2 micro-batches of 1 prompt; a stage holds 16 of 32 layers
    (3, 3, (3 + 3 - 1) * 11 / 32),    # uneven stages: the largest holds ceil(32 / 3) = 11 layers
    (2, 1, (1 + 2 - 1) * 16 / 32),    # one prompt passes the two stages one after the other: 1
    (4, 8, (4 + 4 - 1) * 8 / 32),     # m = min(8, 4) = 4 micro-batches of 2 prompts
])
def test_a_pipelined_prefill_overlaps_its_micro_batches(pp, batch, fill):
    # B prompts on pp stages go through in m = min(B, pp) micro-batches of B/m prompts; the last
    # leaves the last stage m + pp - 1 stage-times after the first entered, a stage-time being the
    # largest stage's share of one micro-batch's pass. So the prefill's compute and memory terms are
    # those of one micro-batch's pass through the whole model times (m + pp - 1) x share.
    from membound.physics.estimate import prepare
    m = min(batch, pp)
    one = prepare("llama-2-7b", "h100-sxm", batch=batch // m, prompt_tokens=1024, runtime="ideal").evaluate()
    piped = prepare("llama-2-7b", "h100-sxm", batch=batch, prompt_tokens=1024, runtime="ideal", n_chips=pp,
                    parallel=mb.Parallel(tp=1, pp=pp)).evaluate()
    assert piped["prefill_compute_s"] == pytest.approx(fill * one["prefill_compute_s"], rel=1e-12)
    assert piped["prefill_memory_s"] == pytest.approx(fill * one["prefill_memory_s"], rel=1e-12)


@pytest.mark.parametrize("batch", [1.0, 64.0, np.array([1.0, 4.0, 64.0])])
def test_leaving_out_the_prefill_terms_changes_no_figure(batch):
    # vllm takes 8,192 prompt tokens a step: 1 x 2,048 is one pass, whose terms come anyway;
    # 64 x 2,048 is 16 chunks (and an array of batches is taken in chunks): terms=False leaves the
    # one-pass terms out (None) and gives every other figure to the bit
    p = prepare("llama-3.1-8b", "h100-sxm", runtime="vllm", prompt_tokens=2048, output_tokens=128)
    full, lean = p.evaluate(batch=batch), p.evaluate(batch=batch, terms=False)
    prefill_terms = {"prefill_memory_s", "prefill_compute_s", "prefill_head_s", "prefill_overhead_s"}
    assert full.keys() == lean.keys()
    chunked = not (isinstance(batch, float) and batch * 2048 <= 8192)
    assert all((lean[k] is None) == chunked for k in prefill_terms)
    for k in full.keys() - (prefill_terms if chunked else set()) - {"per_tier"}:
        assert np.array_equal(full[k], lean[k]), k
