"""Disaggregated serving (prefill pool + decode pool): a case by hand, Little's law, bad input."""
import pytest

import membound as mb
from membound.fidelity.serve_validate import load_rows

H100_BW = 3.35e12                 # B/s
L8B = 8_030_261_248               # Llama-3.1-8B parameters
LOOKUP_8B = 128256 * 4096         # untied input embedding: a step reads only its tokens' rows
KV_8B = 2 * 32 * 8 * 128 * 2      # bytes per cached token: K and V, 32 layers, 8 heads x 128, bf16


def w8b(tokens):
    """bf16 weight bytes one step of `tokens` tokens streams (embedding rows looked up)."""
    return 2 * (L8B - LOOKUP_8B + tokens * 4096)


def test_one_client_by_hand():
    # Llama-3.1-8B bf16, pure roofline ("ideal"), one H100 prefilling and one decoding; one
    # client, prompt 1 token, output 3 tokens (D = 2 decode steps at mean context 1 + 2/2 = 2).
    # Every step is memory-bound:
    #   prefill of 1 token: weights for 1 token + its KV written = (w8b(1) + KV) / BW
    #   its KV then crosses NVLink to the decode chip (both in one 8-GPU domain): 3 us + KV / 450 GB/s
    #   TTFT = prefill + transfer
    #   TPOT = a decode step alone at context 2: (w8b(1) + 2 KV) / BW
    #   Little with one client: X = 1 / (TTFT + 2 TPOT); output 3 X tokens/s over 2 chips
    prefill = (w8b(1) + KV_8B) / H100_BW
    ttft = prefill + 3e-6 + KV_8B / 450e9
    tpot = (w8b(1) + 2 * KV_8B) / H100_BW
    x = 1.0 / (ttft + 2 * tpot)
    r = mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", concurrency=1, prefill=mb.serving.Pool(1, 1),
                               decode=mb.serving.Pool(1, 1), prompt_tokens=1, output_tokens=3, runtime="ideal")
    assert r.ttft.mean == pytest.approx(ttft, rel=1e-9)
    assert r.tpot.mean == pytest.approx(tpot, rel=1e-9)
    assert r.requests_per_s == pytest.approx(x, rel=1e-9)
    assert r.output_tok_s_per_chip == pytest.approx(3 * x / 2, rel=1e-9)
    assert r.n_chips == 2
    # the same client on one aggregated instance sees the same steps, on half the chips
    a = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=1, output_tokens=3, runtime="ideal")
    assert a.tpot.mean == pytest.approx(tpot, rel=1e-9) and a.ttft.mean == pytest.approx(prefill, rel=1e-9)


@pytest.mark.parametrize("n", [2, 64, 4096])
def test_littles_law_and_the_decode_cap(n):
    # Closed loop: N = X (TTFT + D TPOT) at every load; the decode workers' batch never passes
    # their cap, and beyond it the extra clients wait in TTFT.
    kw = dict(prompt_tokens=mb.serving.Uniform(819, 1024), output_tokens=mb.serving.Uniform(819, 1024), weight_dtype="fp8",
              kv_dtype="fp8", runtime="vllm")
    r = mb.serve_disaggregated("llama-3.3-70b", "h200", concurrency=n, prefill=mb.serving.Pool(1, 2),
                               decode=mb.serving.Pool(2, 2),
                               **kw)
    D = r.output_tokens - 1
    assert r.requests_per_s * (r.ttft.mean + D * r.tpot.mean) == pytest.approx(n, rel=1e-6)
    assert r.mean_running <= r.max_running * (1 + 1e-9)
    assert r.output_tok_s_per_chip == pytest.approx(r.output_tok_s / 6, rel=1e-12)
    more = mb.serve_disaggregated("llama-3.3-70b", "h200", concurrency=n, prefill=mb.serving.Pool(1, 2),
                                  decode=mb.serving.Pool(4, 2), **kw)
    assert more.tpot.mean <= r.tpot.mean * (1 + 1e-6)        # more decode workers never slow a token


@pytest.mark.parametrize("kwargs,field", [
    (dict(prefill=mb.serving.Pool(1, 1), decode=mb.serving.Pool(1, 1), concurrency=0), "concurrency"),
    (dict(prefill=8, decode=mb.serving.Pool(1, 1), concurrency=4), "prefill"),
])
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(mb.InvalidInputError) as e:
        mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", **kwargs)
    assert e.value.field == field


@pytest.mark.parametrize("args,field", [((0, 8), "Pool.workers"), ((1, 2.5), "Pool.n_chips"), ((True, 1), "Pool.workers")])
def test_bad_pools_name_the_field(args, field):
    with pytest.raises(mb.InvalidInputError) as e:
        mb.serving.Pool(*args)
    assert e.value.field == field


def test_disaggregated_rows_are_their_own_caution_category():
    rows, skipped = load_rows(kinds=("disaggregated",))
    assert rows and {r.kind for r in rows} == {"disaggregated"}
    for r in rows:   # the two pools hold every GPU the row's throughput is divided by
        pre, dec = r.pools
        assert pre.workers * pre.n_chips + dec.workers * dec.n_chips == r.n_gpus
    assert any("topology not recorded" in why for _, why in skipped)
    headline, _ = load_rows()
    assert not any(r.kind == "disaggregated" for r in headline)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_prefill_pool_queues_on_its_workers_token_rate(workers):
    # The prefill pool's capacity is its workers x their token budget per step. With an 8192-token
    # prompt and the ideal runtime's 8192-token budget a full step is one prompt, which alone takes
    # pre = TTFT(1 client) - KV transfer (3 us + 8192 x 131,072 bytes over 450 GB/s NVLink: all
    # 2 + W_p chips in one 8-GPU domain). The other N - 1 clients' prompts arrive at X (N - 1)/N
    # per second over W_p workers: rho = X (N - 1) / N x pre / W_p, and a prompt waits the M/D/1
    # rho / (2 (1 - rho)) x pre beyond its own prefill.
    kw = dict(prefill=mb.serving.Pool(workers, 1), decode=mb.serving.Pool(2, 1), prompt_tokens=8192, output_tokens=64,
              runtime="ideal")
    one = mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", concurrency=1, **kw)
    pre = one.ttft.mean - (3e-6 + 8192 * KV_8B / 450e9)
    n = 16
    r = mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", concurrency=n, **kw)
    rho = r.requests_per_s * (n - 1) / n * pre / workers
    assert 0.5 < rho < 1.0                          # loaded, not saturated
    assert r.ttft.mean - one.ttft.mean == pytest.approx(rho / (2 * (1 - rho)) * pre, rel=1e-9)
