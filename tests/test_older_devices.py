"""Older and mid-range GPUs of public llama.cpp scoreboards (issue 14 item 7, coverage): Pascal, Volta,
Turing, GA10x, A30, RTX 4000 Ada. Each figure is recomputed by hand from the datasheet numbers its profile
cites, and each vendor spelling a driver prints reaches its profile (and no other card's)."""
import pytest

import membound as mb

MiB = 2**20
GiB = 2**30


@pytest.mark.parametrize("name, gbps, bus_bits", [
    ("tesla-p40", 7.2, 384), ("gtx-1080-ti", 11.0, 352), ("tesla-p100-pcie-16gb", 1.43, 4096),
    ("titan-v", 1.7, 3072), ("rtx-2080-super", 15.5, 256), ("rtx-2080", 14.0, 256), ("rtx-2070-super", 14.0, 256),
    ("rtx-2070", 14.0, 256), ("rtx-2060-12gb", 14.0, 192), ("rtx-2060", 14.0, 192), ("rtx-3060-ti", 14.0, 256),
    ("rtx-3070-ti", 19.0, 256),
    ("rtx-3050", 14.0, 128), ("a30", 2.43, 3072), ("rtx-4000-ada", 18.0, 160),
])
def test_bandwidth_is_pin_rate_times_bus_width(name, gbps, bus_bits):
    # bytes/s = Gbit/s per pin x pins / 8: P40 7.2 x 384 / 8 = 345.6 GB/s (datasheet 346); P100 1.43 x 4096 / 8
    # = 732.2 (datasheet 732); A30 2.43 x 3072 / 8 = 933.1 (datasheet 933); RTX 4000 Ada 18 x 160 / 8 = 360
    assert mb.load_hardware(name).bandwidth_bytes_s == pytest.approx(gbps * 1e9 * bus_bits / 8, rel=1e-3)


@pytest.mark.parametrize("name, lanes, ghz", [
    # CUDA cores x 2 FLOP (FMA) x boost clock
    ("tesla-p40", 3840, 1.531), ("gtx-1080-ti", 3584, 1.582), ("tesla-p100-pcie-16gb", 3584, 1.303),
    ("titan-v", 5120, 1.455), ("rtx-2080-super", 3072, 1.815), ("rtx-2080", 2944, 1.71), ("rtx-2070-super", 2560, 1.77),
    ("rtx-2070", 2304, 1.62), ("rtx-2060-12gb", 2176, 1.65), ("rtx-2060", 1920, 1.68), ("rtx-3060-ti", 4864, 1.665),
    ("rtx-3070-ti", 6144, 1.77),
    ("rtx-3050", 2560, 1.777), ("a30", 3584, 1.44), ("rtx-4000-ada", 6144, 2.175),
])
def test_fp32_is_two_flops_per_lane_per_boost_cycle(name, lanes, ghz):
    hw = mb.load_hardware(name)
    assert hw.clock_hz == pytest.approx(ghz * 1e9)
    assert hw.compute_flops["fp32"] == pytest.approx(2 * lanes * ghz * 1e9, rel=2e-3)


def test_pascal_rates_by_hand():
    # GP102 (compute capability 6.1): fp16 at 2 results per SM per clock against 128 fp32 = 1/64; dp4a = 4 int8
    # multiply-adds (8 ops) per lane per clock = 4 x fp32. P40: 3840 x 2 x 1.531e9 = 11.76e12; / 64 = 0.184e12;
    # x 4 = 47.0e12, the datasheet's 47 TOPS
    p40 = mb.load_hardware("Tesla P40")
    fp32 = 3840 * 2 * 1.531e9
    assert p40.compute_flops["fp16"] == pytest.approx(fp32 / 64, rel=1e-3)
    assert p40.compute_flops["int8"] == pytest.approx(47e12) == pytest.approx(4 * fp32, rel=2e-3)
    ti = mb.load_hardware("NVIDIA GeForce GTX 1080 Ti")       # the same die: 3584 x 2 x 1.582e9 = 11.34e12
    assert ti.compute_flops["fp16"] == pytest.approx(3584 * 2 * 1.582e9 / 64, rel=1e-3)
    assert ti.compute_flops["int8"] == pytest.approx(4 * 3584 * 2 * 1.582e9, rel=1e-3)
    # GP100 (6.0): packed half2 at 2 x fp32 (datasheet 18.7 against 9.3); no dp4a, so no int8 rate
    p100 = mb.load_hardware("Tesla P100-PCIE-16GB")
    assert p100.compute_flops["fp16"] == pytest.approx(2 * p100.compute_flops["fp32"]) == pytest.approx(18.7e12, rel=2e-3)
    assert "int8" not in p100.compute_flops
    for hw in (p40, ti, p100):      # no tensor cores: no bf16, tf32 or fp8 of their own
        assert not {"bf16", "tf32", "fp8"} & set(hw.compute_flops)
        assert hw.int32_lanes_per_fp32 == 1.0      # dp4a on every lane (P40: 47 = 4 x 11.76)


def test_a_gp102_multiplies_16_bit_tensors_at_its_fp32_rate_so_bf16_decode_is_bandwidth_bound():
    # llama-3.1-8b bf16 on the P40, pure roofline: a token reads (8,030,261,248 - 128,256 x 4,096) x 2 bytes = 15.01 GB
    # in 15.01e9 / 345.6e9 = 43.4 ms. At the fp16 units' rate (11.76e12 / 64) its 2 FLOP per weight would take
    # 2 x 7.505e9 / 0.1837e12 = 81.7 ms, but a 16-bit format computes at the fp32 rate where that is faster
    # (llama.cpp's fast_fp16_available is false on 6.1): 2 x 7.505e9 / 11.76e12 = 1.28 ms. Bandwidth binds
    p40 = mb.load_hardware("tesla-p40")
    fp32 = 3840 * 2 * 1.531e9
    assert p40.peak_flops("fp16") == p40.peak_flops("bf16") == pytest.approx(fp32, rel=1e-3)
    assert p40.peak_flops("fp32") == pytest.approx(fp32, rel=1e-3)
    r = mb.estimate(mb.load_model("llama-3.1-8b"), p40, runtime="ideal", prompt_tokens=0, output_tokens=1)
    weights = 8_030_261_248 - 128256 * 4096
    assert 2 * weights / fp32 == pytest.approx(1.28e-3, rel=1e-2)
    assert r.bound == "memory"
    assert r.tpot_s == pytest.approx(weights * 2 / 345.6e9, rel=0.01)


def test_volta_and_turing_tensor_rates_by_hand():
    # TITAN V: NVIDIA's 110 deep-learning TFLOPS (640 tensor cores x 64 FMA x 2 x 1.455 GHz = 119.2 at boost);
    # no int8 tensor ops on Volta
    titan = mb.load_hardware("NVIDIA TITAN V")
    assert titan.compute_flops["fp16"] == 110e12 and "int8" not in titan.compute_flops
    assert 640 * 64 * 2 * 1.455e9 == pytest.approx(119.2e12, rel=1e-3)
    # GeForce Turing: tensor cores x 64 FMA x 2 x clock with FP16 accumulate; FP32 accumulate (fp16 here) half; int8 twice
    # RTX 2080 (whitepaper reference column): 368 x 128 x 1.71e9 = 80.5e12, fp16 40.3e12, INT8 161.1e12
    for name, tcs, ghz in [("rtx-2080", 368, 1.71), ("rtx-2070", 288, 1.62), ("rtx-2080-super", 384, 1.815),
                           ("rtx-2070-super", 320, 1.77), ("rtx-2060-12gb", 272, 1.65), ("rtx-2060", 240, 1.68)]:
        hw = mb.load_hardware(name)
        acc16 = tcs * 64 * 2 * ghz * 1e9
        assert hw.compute_flops["fp16"] == pytest.approx(acc16 / 2, rel=1e-3)
        assert hw.compute_flops["int8"] == pytest.approx(2 * acc16, rel=1e-3)
        assert not {"bf16", "tf32", "fp8"} & set(hw.compute_flops)
    assert mb.load_hardware("rtx-2080").compute_flops["int8"] == pytest.approx(161.1e12, rel=1e-3)
    assert mb.load_hardware("rtx-2070").compute_flops["fp16"] == pytest.approx(29.9e12, rel=2e-3)   # whitepaper


def test_ga10x_and_ada_rates_by_hand():
    # GeForce GA10x: SMs x 1024 FLOP/clk x clock with FP16 accumulate; bf16 (FP32 accumulate) half; int8 twice;
    # tf32 = bf16 / 2 = fp32; RTX 3060 Ti 38 x 1024 x 1.665e9 = 64.8e12 -> bf16 32.4e12, int8 129.6e12
    for name, sms, ghz in [("rtx-3060-ti", 38, 1.665), ("rtx-3070-ti", 48, 1.77), ("rtx-3050", 20, 1.777)]:
        hw = mb.load_hardware(name)
        acc16 = sms * 1024 * ghz * 1e9
        assert hw.compute_flops["bf16"] == pytest.approx(acc16 / 2, rel=1e-3)
        assert hw.compute_flops["int8"] == pytest.approx(2 * acc16, rel=1e-3)
        assert hw.compute_flops["tf32"] == pytest.approx(hw.compute_flops["fp32"], rel=2e-3)
        assert hw.int32_lanes_per_fp32 == 0.5 and not hw.supports("fp8")
    # A30 datasheet (dense): TF32 82, BF16 165 = 56 SMs x 2048 x 1.44e9 = 165.2e12, INT8 330; GA100 keeps 1 INT32 lane per FP32
    a30 = mb.load_hardware("NVIDIA A30")
    assert (a30.compute_flops["tf32"], a30.compute_flops["bf16"], a30.compute_flops["int8"]) == (82e12, 165e12, 330e12)
    assert a30.compute_flops["bf16"] == pytest.approx(56 * 2048 * 1.44e9, rel=2e-3)
    assert a30.int32_lanes_per_fp32 == 1.0 and not a30.supports("fp8")
    # RTX 4000 Ada: the RTX 6000 Ada's per-SM rates (1457e12 sparse fp8 / 2 = 142 x 2048 x 2.505e9) on 48 SMs at 2.175 GHz
    assert 142 * 2048 * 2.505e9 == pytest.approx(1457e12 / 2, rel=1e-3)
    ada = mb.load_hardware("NVIDIA RTX 4000 Ada Generation")
    assert ada.compute_flops["fp8"] == pytest.approx(48 * 2048 * 2.175e9, rel=1e-3) == ada.compute_flops["int8"]
    assert ada.compute_flops["bf16"] == pytest.approx(48 * 1024 * 2.175e9, rel=1e-3)
    assert ada.int32_lanes_per_fp32 == 0.5


def test_capacities_are_what_the_drivers_report():
    # nvidia-smi: Tesla P40 24,576 MiB; Tesla P100-PCIE-16GB 16,276 MiB; NVIDIA TITAN V 12,066 MiB; NVIDIA A30 24,576 MiB
    assert mb.load_hardware("tesla-p40").capacity_bytes == 24576 * MiB == 24 * GiB
    assert mb.load_hardware("tesla-p100-pcie-16gb").capacity_bytes == 16276 * MiB == 17_066_622_976
    assert mb.load_hardware("titan-v").capacity_bytes == 12066 * MiB
    assert mb.load_hardware("a30").capacity_bytes == 24 * GiB
    # GDDR boards: the binary size their name states
    for name, gib in [("gtx-1080-ti", 11), ("rtx-2060-12gb", 12), ("rtx-2060", 6), ("rtx-3050", 8), ("rtx-4000-ada", 20)]:
        assert mb.load_hardware(name).capacity_bytes == gib * GiB


def test_links_by_hand():
    # PCIe 3.0 x16: 8 GT/s x 16 x 128/130 / 8 = 15.75 GB/s each way; the RTX 3050 wires 4.0 x8: 16 GT/s x 8 x 128/130 / 8,
    # the same 15.75; the A30's datasheet 64 GB/s bidirectional = 32 each way
    gen3_x16 = 8e9 * 16 * 128 / 130 / 8
    for name in ("tesla-p40", "tesla-p100-pcie-16gb", "gtx-1080-ti", "titan-v", "rtx-2080", "rtx-2060-12gb"):
        assert mb.load_hardware(name).interconnect.bandwidth_bytes_s == pytest.approx(gen3_x16, rel=1e-3)
    assert mb.load_hardware("rtx-3050").interconnect.bandwidth_bytes_s == pytest.approx(16e9 * 8 * 128 / 130 / 8, rel=1e-3)
    assert mb.load_hardware("a30").interconnect.bandwidth_bytes_s == 64e9 / 2


@pytest.mark.parametrize("device, bandwidth", [("a30", 933e9), ("mi50", 1024e9)])
def test_decode_on_a_new_datacenter_card_is_bytes_over_bandwidth(device, bandwidth):
    # llama-3.1-8b bf16, pure roofline: every weight byte once per token except the input embedding table
    # (a token reads one row of it): (8,030,261,248 - 128,256 x 4,096) x 2 bytes / 933 GB/s = 16.09 ms on
    # the A30, / 1024 GB/s = 14.66 ms on the MI50, whose fp16 26.5e12 multiplies the 2 x 7.505e9 FLOPs in
    # 0.57 ms: memory binds
    r = mb.estimate(mb.load_model("llama-3.1-8b"), mb.load_hardware(device), runtime="ideal",
                    prompt_tokens=0, output_tokens=1)
    assert r.bound == "memory"
    assert r.tpot_s == pytest.approx((8_030_261_248 - 128256 * 4096) * 2 / bandwidth, rel=0.01)


@pytest.mark.parametrize("spelling, name", [
    ("Tesla P40", "tesla-p40"), ("NVIDIA Tesla P40", "tesla-p40"), ("Tesla P100-PCIE-16GB", "tesla-p100-pcie-16gb"),
    ("NVIDIA GeForce GTX 1080 Ti", "gtx-1080-ti"), ("GeForce GTX 1080 Ti", "gtx-1080-ti"), ("NVIDIA TITAN V", "titan-v"),
    ("NVIDIA GeForce RTX 2080 SUPER", "rtx-2080-super"), ("NVIDIA GeForce RTX 2080", "rtx-2080"),
    ("NVIDIA GeForce RTX 2070 SUPER", "rtx-2070-super"), ("NVIDIA GeForce RTX 2070", "rtx-2070"),
    ("NVIDIA GeForce RTX 2060 12GB", "rtx-2060-12gb"), ("NVIDIA GeForce RTX 2060", "rtx-2060"),
    ("NVIDIA GeForce RTX 3060 Ti", "rtx-3060-ti"),
    ("NVIDIA GeForce RTX 3070 Ti", "rtx-3070-ti"), ("NVIDIA GeForce RTX 3050", "rtx-3050"), ("NVIDIA A30", "a30"),
    ("NVIDIA RTX 4000 Ada Generation", "rtx-4000-ada"),
])
def test_driver_spellings_resolve(spelling, name):
    assert mb.resolve_name("hardware", spelling) == name


@pytest.mark.parametrize("spelling, name", [
    ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"), ("NVIDIA GeForce RTX 3060", "rtx-3060"),
    ("NVIDIA GeForce RTX 3070", "rtx-3070"), ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
])
def test_neighbours_keep_their_own_profiles(spelling, name):
    assert mb.resolve_name("hardware", spelling) == name


@pytest.mark.parametrize("spelling", [
    "NVIDIA GeForce RTX 2060 SUPER",      # 8 GB, 2176 CUDA cores: neither the 6 GB nor the 12 GB card
    "NVIDIA GeForce RTX 3050 6GB",        # GA107, 96-bit: a size the 8 GB profile does not have
    "NVIDIA RTX 4000 SFF Ada Generation",  # 70 W, 19.2 TFLOPS, 280 GB/s
    "Tesla P100",                         # PCIe 12/16 GB or SXM2: not said which
])
def test_other_cards_of_a_family_do_not_reach_these_profiles(spelling):
    with pytest.raises(mb.UnknownNameError):
        mb.resolve_name("hardware", spelling)


# ---- AMD and Intel ----

@pytest.mark.parametrize("name, gbps, bus_bits", [
    ("mi50", 2.0, 4096), ("radeon-vii", 2.0, 4096), ("mi100", 2.4, 4096), ("rx-6700-xt", 16.0, 192),
    ("rx-6800", 16.0, 256), ("rx-7700-xt", 18.0, 192), ("arc-a750", 16.0, 256),
])
def test_amd_and_intel_bandwidth_is_pin_rate_times_bus_width(name, gbps, bus_bits):
    # MI50 / Radeon VII: 4 HBM2 stacks, 4096-bit x 2.0 Gbps / 8 = 1024 GB/s; MI100 x 2.4 = 1228.8 (AMD: 1.23 TB/s)
    assert mb.load_hardware(name).bandwidth_bytes_s == pytest.approx(gbps * 1e9 * bus_bits / 8)


@pytest.mark.parametrize("name, lanes, ghz", [
    # CUs x 64 lanes x 2 FLOP; x 2 again for RDNA 3 dual issue and CDNA matrix fp32; Arc: 8 fp32 lanes per vector engine
    ("mi50", 60 * 64, 1.725), ("radeon-vii", 60 * 64, 1.8), ("mi100", 120 * 128, 1.502), ("rx-6700-xt", 40 * 64, 2.581),
    ("rx-6800", 60 * 64, 2.105), ("rx-7700-xt", 54 * 128, 2.544), ("arc-a750", 28 * 16 * 8, 2.05),
])
def test_amd_and_intel_fp32_is_two_flops_per_lane_per_cycle(name, lanes, ghz):
    hw = mb.load_hardware(name)
    assert hw.clock_hz == pytest.approx(ghz * 1e9)
    assert hw.compute_flops["fp32"] == pytest.approx(2 * lanes * ghz * 1e9, rel=2e-3)


def test_gcn5_and_cdna1_rates_by_hand():
    # MI50 (AMD): FP32 13.3 = 60 x 64 x 2 x 1.725e9 = 13.25e12, FP16 26.5 (packed, 2 x), INT8 53 TOPS (dot4, 4 x)
    mi50 = mb.load_hardware("AMD Instinct MI50/MI60")
    assert mi50.name == "mi50" and mi50.compute_flops["int8"] == 53e12 == pytest.approx(4 * 13.25e12, rel=1e-3)
    assert mi50.compute_flops["fp16"] == pytest.approx(2 * mi50.compute_flops["fp32"], rel=1e-3)
    # Radeon VII, the same die at 1.8 GHz: AMD's 13.8 and 27.6; its int8 (unpublished) at the MI50's 4 x fp32
    vii = mb.load_hardware("AMD Radeon VII")
    assert vii.compute_flops["fp16"] == pytest.approx(27.6e12, rel=2e-3)
    assert vii.compute_flops["int8"] == pytest.approx(4 * 60 * 64 * 2 * 1.8e9, rel=1e-3)
    for hw in (mi50, vii):        # no matrix cores
        assert not {"bf16", "tf32", "fp8"} & set(hw.compute_flops)
    # MI100: 120 CUs x 1024 FLOP/clk x 1.502e9 = 184.6e12 fp16 and int8; bf16 half (92.3); matrix fp32 = 120 x 256 x 1.502e9
    mi100 = mb.load_hardware("AMD Instinct MI100")
    assert mi100.compute_flops["fp16"] == mi100.compute_flops["int8"] == pytest.approx(120 * 1024 * 1.502e9, rel=1e-3)
    assert mi100.compute_flops["bf16"] == pytest.approx(92.3e12) and not mi100.supports("fp8")
    # a 4-card hive: 3 links of 16 lanes x 23 GT/s / 8 = 46 GB/s each way, one to each peer
    assert mi100.interconnect.bandwidth_bytes_s == pytest.approx(3 * 16 * 23e9 / 8)
    assert (mi100.interconnect.max_chips, mi100.interconnect.topology) == (4, "switch")


def test_rdna_rates_by_hand():
    # RDNA 2: packed fp16 = 2 x fp32, no bf16 or int8 of its own (a bf16 model runs at the fp16 rate)
    for name in ("rx-6700-xt", "rx-6800"):
        hw = mb.load_hardware(name)
        assert hw.compute_flops["fp16"] == pytest.approx(2 * hw.compute_flops["fp32"], rel=1e-3)
        assert hw.peak_flops("bf16") == hw.compute_flops["fp16"] and "int8" not in hw.compute_flops
    # RDNA 3: WMMA fp16 = bf16 = int8 = 2 x the dual-issue fp32; AMD's RX 7700 XT 35.17 and 70.34
    x = mb.load_hardware("rx-7700-xt")
    assert x.compute_flops["fp32"] == pytest.approx(35.17e12, rel=1e-3)
    assert x.compute_flops["bf16"] == x.compute_flops["int8"] == pytest.approx(70.34e12, rel=1e-3)


def test_arc_a750_is_an_a770_with_28_of_its_32_xe_cores():
    # 448 XMX engines x 128 FLOP/clk x 2.05e9 = 117.6e12 fp16; int8 x 2; the A770: 512 x 128 x 2.1e9
    a750, a770 = mb.load_hardware("Intel Arc A750"), mb.load_hardware("arc-a770")
    assert a750.compute_flops["fp16"] == pytest.approx(448 * 128 * 2.05e9, rel=1e-3)
    assert a750.compute_flops["int8"] == pytest.approx(448 * 256 * 2.05e9, rel=1e-3)
    assert a750.compute_flops["fp16"] / a770.compute_flops["fp16"] == pytest.approx(28 / 32 * 2.05 / 2.1, rel=2e-3)
    # ggml-vulkan reaches no XMX engine on Alchemist: its quantized GEMMs run on the vector engines at 2 x fp32,
    # as the A770's: 2 x 14.69e12 = 29.4e12, not 4 x fp32 (58.8e12)
    from membound.catalog.runtime import load_runtime
    from membound.physics.efficiency import _quantized_peak
    qg = load_runtime("llama.cpp-vulkan").quantized_gemm
    assert _quantized_peak(qg, a750) == pytest.approx(2 * 3584 * 2 * 2.05e9, rel=2e-3)


@pytest.mark.parametrize("spelling, name", [
    ("AMD Instinct MI50/MI60", "mi50"), ("AMD Instinct MI50 32GB", "mi50"), ("AMD Instinct MI100", "mi100"),
    ("AMD Radeon VII", "radeon-vii"), ("AMD Radeon RX 6700 XT", "rx-6700-xt"), ("AMD Radeon RX 6800", "rx-6800"),
    ("AMD Radeon RX 7700 XT", "rx-7700-xt"), ("Intel Arc A750 Graphics", "arc-a750"),
    # neighbours keep their own
    ("AMD Radeon RX 6800 XT", "rx-6800-xt"), ("AMD Radeon RX 7800 XT", "rx-7800-xt"), ("Intel Arc A770", "arc-a770"),
])
def test_amd_and_intel_spellings_resolve(spelling, name):
    assert mb.resolve_name("hardware", spelling) == name


def test_the_16gb_mi50_is_not_the_32gb_profile():
    # 16 GB stated against the profile's 34.3e9 bytes: more than 8% apart
    with pytest.raises(mb.UnknownNameError):
        mb.resolve_name("hardware", "AMD Instinct MI50 16GB")
