"""The scale-out network (a profile's `scale_out`: each chip's NIC): the KV cache a disaggregated
prompt sends to its decode worker, and workers wider than one scale-up domain. Hand-derived."""
import pytest

import membound as mb
from membound.catalog._data import validate
from membound.serving.disagg import kv_transfer_s
from membound.physics.estimate import prepare
from membound.catalog.hardware import Hardware
from membound.serving import as_length, build

NIC = 400e9 / 8            # ConnectX-7: 400 Gb/s = 50 GB/s each way
NIC_LAT = 5e-6             # the profiles' assumed NIC-to-NIC message latency
NVLINK4, NVLINK5, NVL_LAT = 450e9, 900e9, 3e-6
DSR1_KV = 576 * 61         # DeepSeek-R1 MLA latent: 512 + 64 rope elements x 61 layers, 1 byte in fp8


def _prefill_worker(model, hw, parallel, **kw):
    sm, _, _ = build(model, hw, n_chips=parallel.chips, parallel=parallel, prompt=as_length("p", 8192, 1),
                     output=as_length("o", 2, 2), kv_dtype="fp8", **kw)
    return sm


def test_the_nic_profiles():
    for name in ("h100-sxm", "h200", "b200", "gb200", "mi300x"):
        assert mb.load_hardware(name).scale_out.bandwidth_bytes_s == NIC           # 400 Gb/s per GPU
    for name in ("b300", "gb300"):
        assert mb.load_hardware(name).scale_out.bandwidth_bytes_s == 800e9 / 8     # ConnectX-8
    assert mb.load_hardware("gb200").scale_out.source.strip()


def test_deepseek_8k_prompt_kv_crosses_a_nic():
    # DeepSeek-R1 8k prompt, fp8 KV, a DP-attention (ep=8) prefill worker on H200: the prompt's
    # whole latent cache sits on one rank: 8192 x 576 x 61 = 287,834,112 bytes.
    # Pools of 8 + 16 chips span three 8-GPU NVLink domains, so it crosses that rank's NIC:
    #   5 us + 287,834,112 / 50e9 = 5.762 ms
    sm = _prefill_worker("deepseek-r1", "h200", mb.Parallel(ep=8), weight_dtype="fp8", runtime="sglang")
    nbytes = 8192 * DSR1_KV
    assert nbytes == 287_834_112
    assert kv_transfer_s(sm, 24, 8192) == pytest.approx(NIC_LAT + nbytes / NIC, rel=1e-12)
    assert kv_transfer_s(sm, 24, 8192) == pytest.approx(5.7617e-3, rel=1e-4)
    # both pools inside one NVLink domain (4 + 4 chips): NVLink, 3 us + bytes / 450 GB/s = 0.643 ms
    assert kv_transfer_s(sm, 8, 8192) == pytest.approx(NVL_LAT + nbytes / NVLINK4, rel=1e-12)


def test_tensor_parallel_shards_move_in_parallel():
    # Llama-3.3-70B fp8 KV on a tp=4 prefill worker: each chip holds 2 of its 8 KV heads,
    # 2 (K, V) x 2 heads x 128 x 1 byte = 512 bytes per (layer, token), 80 layers x 8192 tokens
    # = 335,544,320 bytes a chip, over its own NIC: 5 us + 335,544,320 / 50e9 = 6.716 ms
    sm = _prefill_worker("llama-3.3-70b", "h200", mb.Parallel(tp=4), weight_dtype="fp8", runtime="vllm")
    assert kv_transfer_s(sm, 12, 8192) == pytest.approx(NIC_LAT + 2 * 2 * 128 * 80 * 8192 / NIC, rel=1e-12)


def test_an_nvl72_rack_keeps_the_transfer_on_nvlink():
    sm = _prefill_worker("deepseek-r1", "gb200", mb.Parallel(ep=8), weight_dtype="fp4", runtime="sglang")
    nbytes = 8192 * DSR1_KV
    assert kv_transfer_s(sm, 72, 8192) == pytest.approx(NVL_LAT + nbytes / NVLINK5, rel=1e-12)   # one rack
    assert kv_transfer_s(sm, 80, 8192) == pytest.approx(NIC_LAT + nbytes / NIC, rel=1e-12)       # two


def test_disaggregated_ttft_adds_the_transfer():
    # One client of DeepSeek-R1 fp8 (8k prompt) on H200 pools of 1 x 8 prefill + 2 x 8 decode
    # (beyond one 8-GPU domain: the KV crosses a NIC). TTFT = host + prefill + transfer, no wait
    # (one client meets nobody), so a NIC of 100 GB/s instead of 50 GB/s saves exactly
    #   287,834,112 x (1/50e9 - 1/100e9) = 2.8783 ms, and TPOT is untouched (no collective
    #   of an 8-chip worker crosses a NIC).
    kw = dict(concurrency=1, prefill=mb.serving.Pool(1, 8, mb.Parallel(ep=8)), decode=mb.serving.Pool(2, 8, mb.Parallel(ep=8)),
              prompt_tokens=8192, output_tokens=16, weight_dtype="fp8", kv_dtype="fp8", runtime="sglang")
    nic = mb.load_hardware("h200").scale_out.model_dump()
    slow = mb.serve_disaggregated("deepseek-r1", _profile("h200", scale_out=nic), **kw)
    fast = mb.serve_disaggregated("deepseek-r1", _profile("h200", scale_out=dict(nic, bandwidth_bytes_s=2 * NIC)),
                                  **kw)
    assert slow.ttft.mean - fast.ttft.mean == pytest.approx(287_834_112 * (1 / NIC - 1 / (2 * NIC)), rel=1e-9)
    assert slow.tpot.mean == fast.tpot.mean


def test_a_worker_wider_than_its_domain_pays_the_nic():
    # Llama-3.1-70B bf16 at tp=16 on H100 (two 8-GPU NVLink domains): a rank's peers are 15, 8 of
    # them beyond its domain (f = 8/15); its all-reduce traffic goes 7/15 over NVLink and 8/15
    # over its NIC at once: a byte costs max((7/15)/450e9, (8/15)/50e9) = 1/93.75e9 s; a hop
    # the NIC's 5 us. One token's step (ideal runtime, switched fabric: 2 hops an all-reduce):
    #   80 layers x 2 all-reduces x (2 x 15/16 x 8192 x 2 bytes / 93.75e9 + 2 x 5 us) = 1.6524 ms
    p = prepare("llama-3.1-70b", "h100-sxm", n_chips=16, parallel=mb.Parallel(tp=16), runtime="ideal")
    comm = p.evaluate(batch=1.0, prompt=1.0, output=2.0)["communication_s"]
    assert comm == pytest.approx(160 * (2 * 15 / 16 * 8192 * 2 / 93.75e9 + 2 * NIC_LAT), rel=1e-12)
    # inside one domain (tp=8) the same all-reduces stay on NVLink: 2 x 7/8 x 16384 / 450e9 + 2 x 3 us
    p8 = prepare("llama-3.1-70b", "h100-sxm", n_chips=8, parallel=mb.Parallel(tp=8), runtime="ideal")
    assert p8.evaluate(batch=1.0, prompt=1.0, output=2.0)["communication_s"] == \
        pytest.approx(160 * (2 * 7 / 8 * 16384 / NVLINK4 + 2 * NVL_LAT), rel=1e-12)


def _profile(base, **changes):
    d = mb.load_hardware(base).model_dump()
    d.update(name=f"my-{base}", aliases=(), **changes)
    return validate(Hardware, d, f"my-{base}.yaml")


def test_a_profile_without_a_nic_refuses_a_wide_worker():
    hw = _profile("h100-sxm", scale_out=None)
    with pytest.raises(mb.InvalidInputError) as e:
        mb.estimate("llama-3.1-70b", hw, n_chips=16, parallel=mb.Parallel(tp=16))
    assert e.value.field == "parallel" and "scale_out" in str(e.value)
    with pytest.raises(mb.InvalidInputError) as e:      # pools beyond one domain need a NIC for the KV
        mb.serve_disaggregated("llama-3.1-8b", hw, concurrency=1, prefill=mb.serving.Pool(4, 2), decode=mb.serving.Pool(4, 2))
    assert e.value.field == "hardware"


@pytest.mark.parametrize("value", [-5e10, 0.0, float("nan")])
def test_a_bad_nic_bandwidth_names_the_field(value):
    nic = dict(mb.load_hardware("h100-sxm").scale_out.model_dump(), bandwidth_bytes_s=value)
    with pytest.raises(mb.MemboundError) as e:
        _profile("h100-sxm", scale_out=nic)
    assert "scale_out.bandwidth_bytes_s" in str(e.value)
