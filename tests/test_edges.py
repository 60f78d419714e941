"""Numerical edges: each has defined behaviour — a finite number or a clear error."""
import math

import pytest

import membound as mb
from membound.physics.speculative import expected_tokens_per_round
from membound.catalog.hardware import Hardware


def finite(r):
    return all(math.isfinite(v) for v in r.to_dict().values() if isinstance(v, float))


def test_alpha_to_one_is_continuous():
    # (1 - a^5)/(1 - a) -> 5 as a -> 1 (gamma = 4)
    assert expected_tokens_per_round(1.0, 4) == 5.0
    assert expected_tokens_per_round(1 - 1e-12, 4) == pytest.approx(5.0, rel=1e-9)
    assert expected_tokens_per_round(1 - 1e-6, 4) == pytest.approx(5.0, rel=1e-5)
    assert expected_tokens_per_round(0.0, 4) == 1.0
    r = mb.estimate("llama-3.1-8b", "h100-sxm", speculative=mb.SpeculativeDecoding(
        draft="llama-3.2-1b", gamma=4, acceptance_rate=1.0))
    assert finite(r) and r.speculative["tokens_per_round"] == 5.0


def test_batch_one_vs_a_million():
    small = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=0, output_tokens=4)
    huge = mb.estimate("llama-3.1-8b", "h100-sxm", batch=10**6, prompt_tokens=0, output_tokens=4, check_memory=False)
    assert finite(small) and finite(huge)
    assert huge.bound == "compute" and huge.memory.fits is False
    with pytest.raises(mb.DoesNotFitError):
        mb.estimate("llama-3.1-8b", "h100-sxm", batch=10**6, output_tokens=4)


def test_context_zero_vs_a_million():
    zero = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=0, output_tokens=1)
    assert zero.ttft_s == pytest.approx(zero.tpot_s)    # no prompt: the first token is one step
    long = mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=10**6, output_tokens=16, check_memory=False,
                       allow_beyond_context=True)
    assert finite(long) and long.decode_tok_s_per_user < zero.decode_tok_s_per_user
    # 1M tokens x 131072 B = 131 GB of KV: does not fit one H100
    with pytest.raises(mb.DoesNotFitError):
        mb.estimate("llama-3.1-8b", "h100-sxm", prompt_tokens=10**6, output_tokens=16, allow_beyond_context=True,
                    n_chips=1)


def test_chips_one_vs_ten_thousand():
    assert finite(mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=1, weight_dtype="fp8", check_memory=False))
    # 10,000 chips: 10,000 // 84 units (80 layers, the LM head's and embedding's 2 parts each) = 119
    # per stage, the largest divisor of 64 heads <= 119 is 64: tp=64 x pp=84 = 5,376 chips work, the
    # other 4,624 cannot form a whole stage and idle
    r = mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=10_000, weight_dtype="fp8")
    assert finite(r) and r.parallel == "tp=64 pp=84 ep=1" and r.n_chips == 10_000
    # 5,120 = 64 tp x 80 pp does
    r = mb.estimate("llama-3.1-70b", "groq-lpu", n_chips=5120, weight_dtype="fp8")
    assert finite(r) and r.memory.fits


def test_one_layer_model():
    m = mb.Model(name="tiny", n_layers=1, hidden_size=64, n_heads=4, n_kv_heads=4, head_dim=16,
                 ffn_size=128, vocab_size=100)
    # 1 layer: 4*64*64 attention + 3*64*128 FFN + 2*64 norms; embeddings 2*100*64; final norm 64
    assert m.total_params == 4 * 64 * 64 + 3 * 64 * 128 + 2 * 64 + 2 * 100 * 64 + 64
    r = mb.estimate(m, "h100-sxm", prompt_tokens=10, output_tokens=10)
    assert finite(r) and r.decode_tok_s_per_user > 0


def test_device_with_one_tier_of_one_megabyte():
    # the smallest capacity a profile may give is 1 MB (below it is a unit slip: 80 meant as GB)
    hw = Hardware(name="one-mb", display_name="1 MB", vendor="test", kind="cpu",
                  memory=[{"name": "RAM", "capacity_bytes": 1e6, "bandwidth_bytes_s": 1e9, "source": "test"}],
                  compute_flops={"bf16": 1e12}, compute_source="test")
    with pytest.raises(mb.DoesNotFitError, match="one-mb's profile has no interconnect, so it runs on one chip") as e:
        mb.estimate("llama-3.2-1b", hw)
    assert e.value.chips_needed is None      # more chips would be refused: no count is suggested
    linked = hw.with_overrides(interconnect={"name": "pcie", "bandwidth_bytes_s": 3.1e10, "latency_s": 1e-5,
                                             "max_chips": 8, "source": "test"})
    with pytest.raises(mb.DoesNotFitError, match="no chip count holds it under the layout rule") as e:
        mb.estimate("llama-3.2-1b", linked)
    # 1.24e9 bf16 weights = 2.47e9 bytes; the layout rule spreads them over at most 8-way tensor
    # parallelism x 16 layers = 128 chips, 2.47e9 / 128 = 19 MB each, still over 1 MB: no count
    # holds it, and none is suggested (the old hint, bytes / capacity, said 2,000+)
    assert e.value.chips_needed is None
    r = mb.estimate("llama-3.2-1b", hw, check_memory=False)
    assert finite(r) and r.memory.fits is False
