"""Served workloads of DeepSeek-V3.2 (DeepSeek Sparse Attention): each query attends the top 2048
tokens an indexer picks (the attention's reads and FLOPs stop growing past 2048), the indexer is
its own kernel reading every cached token's 132-byte index key, and the cache holds every token
with its key. Numbers by hand; 8 x H200 (4.8 TB/s, 1,979 TFLOP/s fp8), fp8 weights and KV."""
import functools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.serving.offline import offline_throughput
from membound.physics.roofline import causal_pairs
from membound.serving import Fixed, Scheduler, build

N_LAYERS, TOPK = 61, 2048
LATENT = 512 + 64          # MLA's fp8 latent per (layer, token): not split by tensor parallelism
INDEX_KEY = 128 + 4        # fp8 index key of 128 and one fp32 scale
INDEX_PAIR = 2 * 64 * 128  # the indexer's FLOPs per (layer, cached token, query): 16,384
BW = 4.8e12
FP8 = 1979e12
IDEAL = dict(prompt=Fixed(8192), output=Fixed(1024), n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="ideal")


@functools.cache
def _ideal_step_model():
    return build("deepseek-v3.2", "h200", **IDEAL)[0]


def _decode_step(sm, b, context):
    """A pure decode step of b sequences at `context` tokens each."""
    return float(sm.step(float(b), sm.attended(context), h=sm.held(context)))


def test_the_step_model_reads_latents_of_topk_and_index_keys_of_all():
    sm, _, _ = build("deepseek-v3.2", "h200", **IDEAL)
    assert sm.kappa * BW == pytest.approx(LATENT, rel=1e-9)          # a latent per attended pair
    assert sm.index_mem * BW == pytest.approx(INDEX_KEY, rel=1e-9)   # an index key per held pair
    assert sm.index_comp * FP8 == pytest.approx(INDEX_PAIR, rel=1e-9)
    assert sm.kv_pair_bytes == pytest.approx(LATENT + INDEX_KEY, rel=1e-12)   # 708 B held per pair
    assert sm.attended(10_000) == N_LAYERS * TOPK and sm.held(10_000) == N_LAYERS * 10_000


def test_beyond_topk_a_served_step_grows_only_by_the_indexer():
    sm, _, _ = build("deepseek-v3.2", "h200", **IDEAL)
    # 4 sequences, 50,000 more tokens each: the attention still reads 2048 latents per layer; the
    # indexer reads 4 x 61 x 50,000 x 132 B more at 4.8 TB/s = 335.5 us (its FLOPs, 4 x 61 x
    # 50,000 x 16,384 at 1,979 TFLOP/s = 101 us, are hidden under its reads)
    assert _decode_step(sm, 4, 100_000) - _decode_step(sm, 4, 50_000) == \
        pytest.approx(4 * N_LAYERS * 50_000 * INDEX_KEY / BW, rel=1e-9)
    # from 2048 to 10,000 tokens: the attention term is the 2048-token one; only the indexer grows
    assert _decode_step(sm, 4, 10_000) - _decode_step(sm, 4, TOPK) == \
        pytest.approx(4 * N_LAYERS * (10_000 - TOPK) * INDEX_KEY / BW, rel=1e-9)
    assert sm.index_s(4.0, sm.held(10_000)) == pytest.approx(4 * N_LAYERS * 10_000 * INDEX_KEY / BW, rel=1e-9)
    # DeepSeek-V3.1 (dense MLA) reads all 50,000 more latents: 4 x 61 x 50,000 x 576 B = 1.464 ms
    dense, _, _ = build("deepseek-v3.1", "h200", **IDEAL)
    assert dense.index_mem == dense.index_comp == 0.0
    assert _decode_step(dense, 4, 100_000) - _decode_step(dense, 4, 50_000) == \
        pytest.approx(4 * N_LAYERS * 50_000 * LATENT / BW, rel=1e-9)


def test_the_indexer_kernel_is_compute_bound_on_a_chip_with_few_flops_per_byte():
    # an H200 with a hundredth of its FLOP/s: 19.79 TFLOP/s fp8 over 4.8 TB/s is 4.1 FLOPs per
    # byte, below the indexer's 16,384 / 132 = 124, so its kernel takes its FLOPs' time:
    # 4 x 61 x 50,000 x 16,384 / 19.79e12 = 10.1 ms for 50,000 more tokens
    h = mb.load_hardware("h200")
    slow = h.model_copy(update={"name": "h200-slow", "compute_flops": {k: v / 100 for k, v in h.compute_flops.items()}})
    sm, _, _ = build("deepseek-v3.2", slow, **IDEAL)
    assert _decode_step(sm, 4, 100_000) - _decode_step(sm, 4, 50_000) == \
        pytest.approx(4 * N_LAYERS * 50_000 * INDEX_PAIR / (FP8 / 100), rel=1e-9)


def test_a_prefill_chunk_carries_the_indexers_causal_flops():
    sm, _, _ = build("deepseek-v3.2", "h200", **IDEAL)
    S = 30_000
    held_pairs = causal_pairs(sm.held_groups, S)
    assert held_pairs == N_LAYERS * S * (S - 1) / 2          # every earlier token scored
    assert causal_pairs(sm.groups, S) == N_LAYERS * (TOPK * (TOPK - 1) / 2 + (S - TOPK) * TOPK)

    def prefill(hp):
        return float(sm.step(0.0, 0.0, S, sm.held(S), causal_pairs(sm.groups, S), seqs=1.0, hp=hp))
    # compute-bound: 61 x 30,000 x 29,999 / 2 x 16,384 FLOPs at 1,979 TFLOP/s = 22.7 ms
    assert prefill(held_pairs) - prefill(0.0) == pytest.approx(N_LAYERS * S * (S - 1) / 2 * INDEX_PAIR / FP8, rel=1e-9)


def test_kv_capacity_counts_each_held_token_with_its_index_key():
    # preemption "none": each request reserves 30,000 + 2,000 tokens, 708 B per (layer, token) on
    # every chip (the latent is replicated): 61 x 32,000 x 708 = 1.382 GB a request. The room is
    # V3.1's less the indexer's weights: 61 x 13,959,424 fp8 parameters / 8 chips x 0.9 (vLLM's
    # memory fraction) = 95.8 MB per chip.
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="vllm", scheduler=Scheduler(preemption="none"))
    free = {}
    for m in ("deepseek-v3.1", "deepseek-v3.2"):
        sm, sched, _ = build(m, "h200", prompt=Fixed(30_000), output=Fixed(2_000), **kw)
        free[m] = sm.kv_pairs_capacity(sched) * sm.kv_pair_bytes
    assert free["deepseek-v3.1"] - free["deepseek-v3.2"] == pytest.approx(0.9 * N_LAYERS * 13_959_424 / 8, rel=1e-6)
    r = {m: mb.serve(m, "h200", concurrency=64, prompt_tokens=30_000, output_tokens=2_000, **kw)
         for m in free}
    assert r["deepseek-v3.2"].max_running == math.floor(free["deepseek-v3.2"] / (N_LAYERS * 32_000 * (LATENT + INDEX_KEY)))
    assert r["deepseek-v3.1"].max_running == math.floor(free["deepseek-v3.1"] / (N_LAYERS * 32_000 * LATENT))
    assert r["deepseek-v3.2"].max_running < r["deepseek-v3.1"].max_running        # 43 < 53


def test_solver_agrees_with_simulator_beyond_topk():
    # every context in 6,553 .. 9,216 is beyond top-k: the attention reads the same at all of them
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="sglang", concurrency=32,
              prompt_tokens=mb.serving.Uniform(6553, 8192), output_tokens=mb.serving.Uniform(819, 1024))
    a = mb.serve("deepseek-v3.2", "h200", **kw)
    b = mb.serve("deepseek-v3.2", "h200", engine="simulate", seed=1, **kw)
    assert a.tpot.mean == pytest.approx(b.tpot.mean, rel=0.05)
    assert a.output_tok_s == pytest.approx(b.output_tok_s, rel=0.05)
    assert a.mean_running == pytest.approx(b.mean_running, rel=0.05)


def test_long_context_decoding_is_cheaper_than_dense_mla():
    # at 64k-token contexts the attention of V3.1 reads 64k latents per layer per step, V3.2 2048
    # of them and 64k index keys (132 of 576 bytes): a decode step of 16 sequences is shorter.
    # (Not the served TPOT at 64k/1k: there the prompts' prefill chunks dominate the steps, and in
    # core's prefill V3.2's indexer scores every causal pair whole on each tensor-parallel rank,
    # 16,384 FLOP per pair, while V3.1's decompressed attention, 81,920 FLOP per pair, is split
    # over tp: 10,240 per chip at tp 8; serve prices a prefill as core does.)
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="sglang")
    L = 65_536 + 511.5          # the mean context over 1,024 output tokens
    step = {}
    for m in ("deepseek-v3.1", "deepseek-v3.2"):
        sm, _, _ = build(m, "h200", prompt=Fixed(65_536), output=Fixed(1024), **kw)
        step[m] = float(sm.step(16.0, float(sm.attended(L)), h=float(sm.held(L))))
    assert step["deepseek-v3.2"] < step["deepseek-v3.1"]


def test_speculative_disaggregated_curve_and_offline_take_the_preset():
    kw = dict(n_chips=8, weight_dtype="fp8", kv_dtype="fp8", runtime="sglang", prompt_tokens=16_384, output_tokens=512)
    plain = mb.serve("deepseek-ai/DeepSeek-V3.2", "h200", concurrency=8, **kw)
    spec = mb.serve("deepseek-v3.2", "h200", concurrency=8, speculative=mb.mtp("deepseek-v3.2", 2), **kw)
    assert plain.model == "deepseek-v3.2" and spec.tok_s_per_user > plain.tok_s_per_user
    dis = mb.serve_disaggregated("deepseek-v3.2", "h200", concurrency=16, prefill=mb.serving.Pool(1, 8),
                                 decode=mb.serving.Pool(1, 8),
                                 **{k: v for k, v in kw.items() if k != "n_chips"})
    assert dis.output_tok_s > 0 and 0 < dis.kv_occupancy <= 1
    c = mb.serve_curve("deepseek-v3.2", "h200", concurrency=[1, 8, 64], **kw)
    assert np.all(np.diff(c.output_tok_s_per_chip) > 0)
    off = offline_throughput("deepseek-v3.2", "h200", prompt_tokens=8192, output_tokens=1024, n_chips=8,
                                runtime="sglang", quantization=mb.Quantization(weights="fp8", kv="fp8"))
    assert off.output_tok_s > 0


def test_cli_serve_and_served_plan_take_the_preset(capsys):
    from membound.present.cli import main
    assert main(["serve", "deepseek-v3.2", "h200", "--chips", "8", "--weights", "fp8", "--kv", "fp8",
                 "--runtime", "sglang", "--concurrency", "4", "--prompt", "32768", "--output", "256", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["model"] == "deepseek-v3.2" and row["output_tok_s"] > 0
    assert main(["plan", "deepseek-v3.2", "h200", "--users", "64", "--ttft", "10", "--tok-s", "10",
                 "--weights", "fp8", "--served"]) == 0
    assert "meet the SLO" in capsys.readouterr().out


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(1, 150_000), st.integers(0, 150_000))
def test_a_longer_context_never_makes_a_step_faster(b, context, more):
    # the attention's share grows up to top-k and is flat beyond; the indexer's grows: never down
    sm = _ideal_step_model()
    assert _decode_step(sm, b, context + more) >= _decode_step(sm, b, context)
    if context >= TOPK:      # beyond top-k, all the growth is the indexer kernel's
        grown = float(sm.index_s(b, sm.held(context + more)) - sm.index_s(b, sm.held(context)))
        assert _decode_step(sm, b, context + more) - _decode_step(sm, b, context) == \
            pytest.approx(grown, rel=1e-9, abs=1e-15)
