"""Devices users deploy now (issue 14 part 7): the figures a profile derives, recomputed by hand from the
datasheet numbers its source names, and the vendor spellings that reach each profile."""
import pytest

import membound as mb


@pytest.mark.parametrize("name, gbps, bus_bits", [
    ("rtx-4080", 22.4, 256), ("rtx-4070", 21.0, 192), ("rtx-5070-ti", 28.0, 256),
    ("rx-7900-xt", 20.0, 320), ("rx-7900-gre", 18.0, 256), ("jetson-orin-nx", 6.4, 128),
    ("rtx-3090-ti", 21.0, 384), ("rtx-5060", 28.0, 128),
])
def test_gddr_and_lpddr_bandwidth_is_pin_rate_times_bus(name, gbps, bus_bits):
    # bytes/s = Gbit/s per pin x pins / 8
    assert mb.load_hardware(name).bandwidth_bytes_s == pytest.approx(gbps * 1e9 * bus_bits / 8)


def test_derived_compute_peaks_by_hand():
    gre = mb.load_hardware("rx-7900-gre")
    assert gre.compute_flops["fp32"] == pytest.approx(80 * 64 * 2 * 2 * 2.245e9, rel=1e-3)   # CUs x lanes x dual x FMA
    assert gre.compute_flops["fp16"] == pytest.approx(2 * gre.compute_flops["fp32"], rel=1e-3)
    ti = mb.load_hardware("rtx-5070-ti")
    assert ti.compute_flops["fp4"] == pytest.approx(1406e12 / 2, rel=1e-3)       # sparse AI TOPS halved
    assert ti.compute_flops["bf16"] == pytest.approx(1406e12 / 2 / 4 / 2, rel=1e-3)  # fp4->fp8->fp16, FP32 acc
    assert ti.compute_flops["fp32"] == pytest.approx(8960 * 2 * 2.452e9, rel=1e-3)
    thor = mb.load_hardware("jetson-thor")
    assert thor.compute_flops["fp4"] == pytest.approx(2070e12 / 2, rel=1e-3)
    assert thor.peak_flops("bf16") == pytest.approx(2070e12 / 8, rel=1e-3)
    nano = mb.load_hardware("jetson-orin-nano")
    assert nano.compute_flops["int8"] == pytest.approx(67e12 / 2, rel=1e-3)
    assert nano.compute_flops["fp32"] == pytest.approx(1024 * 2 * 1.02e9, rel=1e-3)
    m5max = mb.load_hardware("apple-m5-max")
    assert m5max.compute_flops["fp16"] == pytest.approx(4 * 40 * 128 * 2 * 1.678e9, rel=1e-3)
    assert m5max.capacity_bytes == 0.75 * 128 * 2**30


def test_b300_and_gb300_share_the_gpu_but_not_the_domain():
    b, gb = mb.load_hardware("b300"), mb.load_hardware("gb300")
    assert b.bandwidth_bytes_s == gb.bandwidth_bytes_s == 8e12 and b.capacity_bytes == gb.capacity_bytes == 288e9
    # GB300 NVL72 (1400 W) per GPU from NVIDIA's dense rack figures over 72 GPUs: FP4 1,080 PF,
    # FP8 360 PF, BF16 180 PF; the HGX B300 is rated 2.25 / 4.5 PF bf16 / fp8, the same 15 PF fp4
    assert gb.compute_flops["fp4"] == pytest.approx(1080e15 / 72) == b.compute_flops["fp4"]
    assert gb.compute_flops["fp8"] == pytest.approx(360e15 / 72) and b.compute_flops["fp8"] == 4.5e15
    assert gb.compute_flops["bf16"] == pytest.approx(180e15 / 72) and b.compute_flops["bf16"] == 2.25e15
    assert b.interconnect.max_chips == 8 and gb.interconnect.max_chips == 72
    assert "int8" not in b.compute_flops and "int8" not in gb.compute_flops   # Blackwell Ultra cut int8


def test_decode_on_a_new_device_is_bytes_over_bandwidth():
    # llama-3.1-8b bf16 on the RTX 5070 Ti, pure roofline: every weight byte once per token, except the input
    # embedding table (a token reads one row of it)
    m, hw = mb.load_model("llama-3.1-8b"), mb.load_hardware("rtx-5070-ti")
    r = mb.estimate(m, hw, runtime="ideal", prompt_tokens=0, output_tokens=1)
    weights = (8_030_261_248 - 128256 * 4096) * 2
    assert r.tpot_s == pytest.approx(weights / 896e9, rel=0.01)


@pytest.mark.parametrize("spelling, name", [
    ("NVIDIA GeForce RTX 5070 Ti", "rtx-5070-ti"), ("AMD Radeon RX 7900 GRE", "rx-7900-gre"),
    ("NVIDIA B300", "b300"), ("GB300 NVL72", "gb300"), ("Apple M5 Max", "apple-m5-max"), ("M5 Pro", "apple-m5-pro"),
    ("NVIDIA Jetson AGX Thor", "jetson-thor"), ("Jetson Orin Nano Super", "jetson-orin-nano"),
    ("NVIDIA GeForce RTX 4070", "rtx-4070"), ("AMD Radeon RX 7900 XT", "rx-7900-xt"),
])
def test_vendor_spellings_reach_the_new_profiles(spelling, name):
    assert mb.load_hardware(spelling).name == name


def test_profiles_the_reference_rows_name_now_exist():
    # every device the reference measurements name (and membound maps) has a profile: the rows are predicted
    from membound.fidelity.reference import load_reference
    missing = [reason for _, _, reason in load_reference().skipped if reason.startswith("no bundled profile")]
    assert missing == []


@pytest.mark.parametrize("name, ai_tops, dense_key, divisor", [
    ("rtx-5060-ti", 759e12, "fp4", 2),      # FP4 sparse -> dense
    ("rtx-4080-super", 836e12, "int8", 2),  # FP8/INT8 sparse -> dense
    ("rx-9070", 1156e12, "int8", 4),        # INT4 sparse -> dense int8
    ("radeon-ai-pro-r9700", 1531e12, "int8", 4),
    ("rtx-pro-6000-blackwell-max-q", 3511e12, "fp4", 2),
    ("rtx-5060", 614e12, "fp4", 2),
])
def test_ai_tops_become_dense_peaks(name, ai_tops, dense_key, divisor):
    assert mb.load_hardware(name).compute_flops[dense_key] == pytest.approx(ai_tops / divisor, rel=1e-3)


def test_rtx_3090_ti_scales_the_ga102_whitepaper_per_sm_rates():
    # the whitepaper's RTX 3090 (82 SMs at 1695 MHz): 71 TFLOPS fp16 tensor with FP32 accumulate and 284 INT8 TOPS,
    # i.e. 512 and 2048 operations per SM per clock; the 3090 Ti runs 84 SMs at 1860 MHz
    assert 82 * 512 * 1.695e9 == pytest.approx(71e12, rel=0.01) and 82 * 2048 * 1.695e9 == pytest.approx(284e12, rel=0.01)
    ti = mb.load_hardware("NVIDIA GeForce RTX 3090 Ti")
    assert ti.compute_flops["bf16"] == pytest.approx(84 * 512 * 1.86e9, rel=1e-3)
    assert ti.compute_flops["int8"] == pytest.approx(84 * 2048 * 1.86e9, rel=1e-3)
    assert ti.compute_flops["fp32"] == pytest.approx(10752 * 2 * 1.86e9, rel=1e-3)       # NVIDIA's "40 TFLOPS"
    assert "fp8" not in ti.compute_flops and ti.capacity_bytes == 24 * 2**30


def test_rtx_5060_peaks_by_hand():
    g = mb.load_hardware("NVIDIA GeForce RTX 5060")
    assert g.compute_flops["bf16"] == pytest.approx(614e12 / 2 / 4 / 2, rel=1e-3)   # fp4 -> fp8 -> fp16, FP32 acc
    assert g.compute_flops["fp32"] == pytest.approx(3840 * 2 * 2.497e9, rel=1e-3)   # NVIDIA's "19 TFLOPS shader"
    assert g.capacity_bytes == 8 * 2**30 and g.interconnect.bandwidth_bytes_s == pytest.approx(126e9 / 2 / 2)


def test_mi300a_is_mi300x_cdna3_cus_at_228():
    # AMD's MI300A figures (228 CUs at 2100 MHz): FP16 980.6 TFLOPS, FP32 122.6; MI300X's datasheet (304 CUs, same clock):
    # 1307.4 bf16, 653.7 tf32, 2614.9 fp8, i.e. 2048 / 1024 / 4096 FLOP per CU per clock
    a, x = mb.load_hardware("AMD Instinct MI300A"), mb.load_hardware("mi300x")
    assert a.compute_flops["bf16"] == pytest.approx(228 * 2048 * 2.1e9, rel=1e-3) == pytest.approx(980.6e12, rel=1e-3)
    for dtype in ("tf32", "fp8", "bf16", "int8"):
        assert a.compute_flops[dtype] == pytest.approx(x.compute_flops[dtype] * 228 / 304, rel=1e-3)
    assert a.compute_flops["fp32"] == pytest.approx(228 * 256 * 2.1e9, rel=1e-3)     # 122.6
    # one unified HBM3 pool as MI300X's bandwidth, 128 of its 192 GB; no interconnect is described
    assert a.kind == "apu" and a.capacity_bytes == 128e9 and a.bandwidth_bytes_s == x.bandwidth_bytes_s == 5.3e12
    assert a.interconnect is None
