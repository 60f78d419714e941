"""Pipeline and expert parallelism, by hand."""
import pytest

import membound as mb


def test_pipeline_adds_capacity_not_per_user_speed():
    hw = mb.load_hardware("h100-sxm")
    m = mb.load_model("llama-3.1-8b")
    bw, link = hw.bandwidth_bytes_s, hw.interconnect
    one = mb.estimate(m, hw, prompt_tokens=0, output_tokens=1, runtime="ideal")
    r = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(pp=2), prompt_tokens=0, output_tokens=1, runtime="ideal")
    hop = link.latency_s + 4096 * 2 / link.bandwidth_bytes_s      # one boundary: a bf16 hidden state
    streamed = 2 * (m.total_params - 128256 * 4096 + 4096)     # the input embedding is a lookup
    assert r.tpot_s == pytest.approx(streamed / bw + hop, rel=1e-9)
    assert r.tpot_s > one.tpot_s
    assert r.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2)
    # batch 2 over 2 stages runs as 2 micro-batches of 1: same step, twice the aggregate
    r2 = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(pp=2), batch=2, prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert r2.tpot_s == pytest.approx(r.tpot_s, rel=1e-9)
    assert r2.decode_tok_s_total == pytest.approx(2 / r.tpot_s, rel=1e-9)


def test_expert_parallel_splits_experts_and_adds_all_to_all():
    hw = mb.load_hardware("h100-sxm")
    m = mb.load_model("mixtral-8x7b")
    link = hw.interconnect
    r = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(ep=2), prompt_tokens=0, output_tokens=1, runtime="ideal")
    # batch 1 touches k=2 experts per layer, spread over 2 chips: 1 expert's bytes per chip per layer
    w_chip = (m.dense_params - 32000 * 4096 + 4096 + m.n_moe_layers * 2 * m.expert_params / 2) * 2
    # 2 all-to-alls per MoE layer: (ep-1)/ep x (tokens/ep) x k x hidden x 2 bytes, plus one hop
    a2a = 0.5 * 0.5 * 2 * 4096 * 2 / link.bandwidth_bytes_s + link.latency_s
    comm = m.n_moe_layers * 2 * a2a
    assert r.tpot_s == pytest.approx(w_chip / hw.bandwidth_bytes_s + comm, rel=1e-9)


def test_default_layout():
    m = mb.load_model("llama-3.1-70b")          # 64 heads, 80 layers
    assert mb.Parallel.default(m, 8) == mb.Parallel(tp=8)
    assert mb.Parallel.default(m, 3) == mb.Parallel(tp=1, pp=3)
    assert mb.Parallel.default(m, 576) == mb.Parallel(tp=64, pp=9)
    assert mb.Parallel.default(m, 16, max_tp=8) == mb.Parallel(tp=8, pp=2)   # one NVLink domain of 8
    with pytest.raises(mb.InvalidInputError, match="n_chips"):
        mb.Parallel.default(m, 83 * 7)            # no divisor of 64 heads leaves <= 80 stages


def test_bad_layouts():
    m = mb.load_model("mixtral-8x7b")
    for bad in (dict(tp=0), dict(pp=-1), dict(ep=1.5)):
        with pytest.raises(mb.InvalidInputError):
            mb.Parallel(**bad)
    with pytest.raises(mb.InvalidInputError, match="parallel.ep"):
        mb.Parallel(ep=3).check(m, 3)
    with pytest.raises(mb.InvalidInputError, match="parallel.pp"):
        mb.Parallel(pp=64).check(m, 64)
    with pytest.raises(mb.InvalidInputError, match="interconnect|tp"):
        mb.estimate("llama-3.1-8b", "apple-m2-ultra", n_chips=2)
