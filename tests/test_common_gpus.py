"""The common GPUs of published benchmarks (issue 14 items 5 and 7): V100, T4, A10, A40, RTX 20/30/40/50
GeForce cards, RTX A4000/A5000/6000 Ada, MI210/MI250X and Radeon RX 6000/7000. Each figure is recomputed
by hand from the datasheet numbers its profile cites, and each vendor spelling reaches its profile."""
import pytest

import membound as mb

MiB = 2**20
GiB = 2**30


@pytest.mark.parametrize("name, gbps, bus_bits", [
    ("rtx-3070", 14.0, 256), ("rtx-3080", 19.0, 320), ("rtx-3080-ti", 19.0, 384), ("rtx-2080-ti", 14.0, 352),
    ("rtx-4060", 17.0, 128), ("rtx-4060-ti", 18.0, 128), ("rtx-4070-super", 21.0, 192), ("rtx-4070-ti", 21.0, 192),
    ("rtx-4070-ti-super", 21.0, 256), ("rtx-5070", 28.0, 192), ("t4", 10.0, 256), ("a10", 12.5, 384),
    ("a40", 14.5, 384), ("rtx-a5000", 16.0, 384), ("rtx-a4000", 14.0, 256), ("rtx-6000-ada", 20.0, 384),
    ("rx-7800-xt", 19.5, 256), ("rx-7600-xt", 18.0, 128), ("rx-6800-xt", 16.0, 256), ("rx-6900-xt", 16.0, 256),
    ("mi210", 3.2, 4096), ("mi250x", 3.2, 4096), ("mi250x-module", 3.2, 8192),
])
def test_bandwidth_is_pin_rate_times_bus_width(name, gbps, bus_bits):
    # bytes/s = Gbit/s per pin x pins / 8: e.g. RTX 3080 19 x 320 / 8 = 760 GB/s; MI210 3.2 x 4096 / 8 = 1638.4 GB/s
    assert mb.load_hardware(name).bandwidth_bytes_s == pytest.approx(gbps * 1e9 * bus_bits / 8)


@pytest.mark.parametrize("name, lanes, ghz", [
    # NVIDIA: CUDA cores x 2 FLOP (FMA) x boost clock
    ("v100-sxm2-32gb", 5120, 1.53), ("v100-pcie-16gb", 5120, 1.38), ("t4", 2560, 1.59), ("rtx-2080-ti", 4352, 1.545),
    ("a10", 9216, 1.695), ("a40", 10752, 1.74), ("rtx-3070", 5888, 1.725), ("rtx-3080", 8704, 1.71),
    ("rtx-3080-ti", 10240, 1.665), ("rtx-a5000", 8192, 1.695), ("rtx-a4000", 6144, 1.56),
    ("rtx-4060", 3072, 2.46), ("rtx-4060-ti", 4352, 2.535), ("rtx-4070-super", 7168, 2.475), ("rtx-4070-ti", 7680, 2.61),
    ("rtx-4070-ti-super", 8448, 2.61), ("rtx-6000-ada", 18176, 2.505), ("rtx-5070", 6144, 2.512),
    # AMD: CUs x 64 lanes x 2 FLOP, x 2 again for RDNA 3 dual issue and CDNA 2 packed/matrix fp32
    ("rx-6800-xt", 72 * 64, 2.25), ("rx-6900-xt", 80 * 64, 2.25), ("rx-7800-xt", 60 * 128, 2.43),
    ("rx-7600-xt", 32 * 128, 2.755), ("mi210", 104 * 128, 1.7), ("mi250x", 110 * 128, 1.7),
])
def test_fp32_is_two_flops_per_lane_per_boost_cycle(name, lanes, ghz):
    hw = mb.load_hardware(name)
    assert hw.clock_hz == pytest.approx(ghz * 1e9)
    assert hw.compute_flops["fp32"] == pytest.approx(2 * lanes * ghz * 1e9, rel=2e-3)


def test_tensor_rates_from_the_datasheets_by_hand():
    # datacenter/workstation parts publish sparse tensor figures: dense = half, and keep full-rate FP32 accumulate
    assert mb.load_hardware("a10").peak_flops("bf16") == pytest.approx(250e12 / 2)
    assert mb.load_hardware("a10").peak_flops("int8") == pytest.approx(500e12 / 2)
    assert mb.load_hardware("a40").peak_flops("bf16") == pytest.approx(299.4e12 / 2, rel=1e-3)
    assert mb.load_hardware("rtx-a5000").peak_flops("bf16") == pytest.approx(222.2e12 / 2, rel=1e-3)
    assert mb.load_hardware("rtx-a4000").peak_flops("fp16") == pytest.approx(153.4e12 / 2, rel=1e-3)
    ada6000 = mb.load_hardware("rtx-6000-ada")
    assert ada6000.peak_flops("fp8") == pytest.approx(1457e12 / 2, rel=1e-3)
    assert ada6000.peak_flops("bf16") == pytest.approx(142 * 1024 * 2.505e9, rel=1e-3)   # 142 SMs x 1024 FLOP/clk
    # GeForce Ampere: FP16-accumulate tensor rate = SMs x 1024 FLOP/clk x clock, FP32 accumulate (bf16) half of it
    # RTX 3080: 68 x 1024 x 1.71e9 = 119.07e12 (whitepaper 119), bf16 59.5e12, int8 2 x 119.07 = 238.1e12
    r3080 = mb.load_hardware("rtx-3080")
    assert r3080.peak_flops("bf16") == pytest.approx(68 * 1024 * 1.71e9 / 2, rel=1e-3)
    assert r3080.peak_flops("int8") == pytest.approx(2 * 68 * 1024 * 1.71e9, rel=1e-3)
    assert r3080.peak_flops("tf32") == pytest.approx(r3080.peak_flops("fp32"), rel=1e-3)
    # GeForce Ada: bf16 (FP32 acc) = 2 x fp32, fp8 = 4 x fp32, int8 = 8 x fp32; 4070 Ti SUPER 8448 x 2 x 2.61e9 = 44.1e12
    ti_super = mb.load_hardware("rtx-4070-ti-super")
    fp32 = 8448 * 2 * 2.61e9
    assert (ti_super.peak_flops("bf16"), ti_super.peak_flops("fp8"), ti_super.peak_flops("int8")) == \
        pytest.approx((2 * fp32, 4 * fp32, 8 * fp32), rel=1e-3)
    # GeForce Blackwell: 988 sparse FP4 AI TOPS -> dense fp4 494, fp8 247 (FP16 acc) -> 123.5, bf16 61.75 (FP32 acc)
    r5070 = mb.load_hardware("rtx-5070")
    assert r5070.peak_flops("fp4") == pytest.approx(988e12 / 2)
    assert r5070.peak_flops("fp8") == pytest.approx(988e12 / 2 / 2 / 2)
    assert r5070.peak_flops("bf16") == pytest.approx(988e12 / 2 / 4 / 2)
    # Turing: 544 tensor cores x 64 FMA x 2 x 1.545 GHz = 107.6e12 with FP16 accumulate; GeForce FP32 accumulate half
    assert mb.load_hardware("rtx-2080-ti").peak_flops("fp16") == pytest.approx(544 * 64 * 2 * 1.545e9 / 2, rel=1e-3)
    # T4: 320 tensor cores x 64 x 2 x 1.59 GHz = 65.1e12 (datasheet 65, full rate on the datacenter part)
    assert mb.load_hardware("t4").peak_flops("fp16") == pytest.approx(320 * 64 * 2 * 1.59e9, rel=2e-3)
    # V100 SXM2: 640 tensor cores x 64 x 2 x 1.53 GHz = 125.3e12 (datasheet 125); PCIe 112
    assert mb.load_hardware("v100-sxm2-32gb").peak_flops("fp16") == pytest.approx(640 * 64 * 2 * 1.53e9, rel=3e-3)
    assert mb.load_hardware("v100-pcie-32gb").peak_flops("fp16") == 112e12


@pytest.mark.parametrize("name", ["v100-sxm2-32gb", "v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb", "t4",
                                  "rtx-2080-ti", "rx-6800-xt", "rx-6900-xt"])
def test_pre_ampere_and_rdna2_parts_have_no_bf16_rate_of_their_own(name):
    hw = mb.load_hardware(name)
    assert "bf16" not in hw.compute_flops and "tf32" not in hw.compute_flops and not hw.supports("fp8")
    assert hw.peak_flops("bf16") == hw.compute_flops["fp16"]   # a bf16 model runs at the fp16 rate


@pytest.mark.parametrize("name", ["a10", "a40", "rtx-3070", "rtx-3080", "rtx-3080-ti", "rtx-a4000", "rtx-a5000",
                                  "mi210", "mi250x", "rx-7800-xt", "rx-7600-xt"])
def test_no_fp8_on_ampere_cdna2_and_rdna3(name):
    assert not mb.load_hardware(name).supports("fp8")


def test_v100_capacities_are_what_nvidia_smi_reports():
    # nvidia-smi: 32,510 MiB on the 32 GB boards, 16,160 MiB on the 16 GB ones
    assert mb.load_hardware("v100-sxm2-32gb").capacity_bytes == 32510 * MiB == 34_089_205_760
    assert mb.load_hardware("v100-pcie-32gb").capacity_bytes == 32510 * MiB
    assert mb.load_hardware("v100-sxm2-16gb").capacity_bytes == 16160 * MiB == 16_944_988_160
    # NVLink 2: 300 GB/s bidirectional = 150 GB/s each way; the PCIe card: Gen3 x16 = 8 GT/s x 16 x 128/130 / 8
    assert mb.load_hardware("v100-sxm2-32gb").interconnect.bandwidth_bytes_s == 300e9 / 2
    assert mb.load_hardware("v100-pcie-32gb").interconnect.bandwidth_bytes_s == pytest.approx(8e9 * 16 * 128 / 130 / 8, rel=1e-3)


def test_mi250x_is_profiled_per_gcd_and_the_module_is_two_of_them():
    gcd, module = mb.load_hardware("mi250x"), mb.load_hardware("mi250x-module")
    assert gcd.capacity_bytes == 64e9 and module.capacity_bytes == 2 * 64e9
    assert module.bandwidth_bytes_s == 2 * gcd.bandwidth_bytes_s == 3276.8e9
    # 110 CUs x 1024 FLOP/clk (CDNA 2 matrix fp16) x 1.7 GHz = 191.5e12 per GCD; AMD's module figure 383
    assert gcd.peak_flops("bf16") == pytest.approx(110 * 1024 * 1.7e9, rel=1e-3)
    assert module.peak_flops("bf16") == pytest.approx(383e12) == pytest.approx(2 * gcd.peak_flops("bf16"), rel=1e-3)
    assert gcd.interconnect.max_chips == 8 and module.interconnect is None   # 4 modules = 8 GCDs per node
    # the MI210 is one CDNA 2 die with 104 of the GCD's 110 CUs enabled: 104 x 1024 x 1.7e9 = 181e12
    assert mb.load_hardware("mi210").peak_flops("int8") == pytest.approx(181e12, rel=1e-3)


@pytest.mark.parametrize("spelling, name", [
    ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"), ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
    ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"), ("Tesla V100-PCIE-16GB", "v100-pcie-16gb"),
    ("NVIDIA V100", "v100-sxm2-32gb"), ("NVIDIA V100 16GB", "v100-sxm2-16gb"),
    ("Tesla T4", "t4"), ("NVIDIA T4", "t4"), ("NVIDIA A10", "a10"), ("NVIDIA A40", "a40"),
    ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"), ("NVIDIA GeForce RTX 3070", "rtx-3070"),
    ("NVIDIA GeForce RTX 3080", "rtx-3080"), ("NVIDIA GeForce RTX 3080 Ti", "rtx-3080-ti"),
    ("NVIDIA GeForce RTX 4060", "rtx-4060"), ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti"),
    ("NVIDIA GeForce RTX 4060 Ti 16GB", "rtx-4060-ti"), ("NVIDIA GeForce RTX 4070 SUPER", "rtx-4070-super"),
    ("NVIDIA GeForce RTX 4070 Ti", "rtx-4070-ti"), ("NVIDIA GeForce RTX 4070 Ti SUPER", "rtx-4070-ti-super"),
    ("NVIDIA GeForce RTX 5070", "rtx-5070"), ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX A5000", "rtx-a5000"), ("NVIDIA RTX A4000", "rtx-a4000"),
    ("AMD Instinct MI210", "mi210"), ("AMD Instinct MI250X", "mi250x"), ("AMD Instinct MI250X module", "mi250x-module"),
    ("AMD Radeon RX 7800 XT", "rx-7800-xt"), ("AMD Radeon RX 7600 XT", "rx-7600-xt"),
    ("AMD Radeon RX 6800 XT", "rx-6800-xt"), ("AMD Radeon RX 6900 XT", "rx-6900-xt"), ("NVIDIA H20", "h20"),
])
def test_vendor_spellings_resolve(spelling, name):
    assert mb.resolve_name("hardware", spelling) == name


def test_spellings_of_neighbours_stay_apart():
    # the RTX 4070 Ti is not the 4070 or the Ti SUPER; the A10 is not the A100; 'RTX 6000 Ada' is not the Blackwell PRO 6000
    assert mb.resolve_name("hardware", "NVIDIA GeForce RTX 4070") == "rtx-4070"
    assert mb.resolve_name("hardware", "NVIDIA A100 80GB") == "a100-80gb"
    assert mb.resolve_name("hardware", "NVIDIA RTX PRO 6000 Blackwell") == "rtx-pro-6000-blackwell"
    assert mb.resolve_name("hardware", "AMD Radeon RX 7900 XT") == "rx-7900-xt"


def test_h20_is_a_memory_rich_compute_capped_hopper():
    h20, h100 = mb.load_hardware("h20"), mb.load_hardware("h100-sxm")
    assert h20.bandwidth_bytes_s == 4.0e12 > h100.bandwidth_bytes_s              # 4.0 against 3.35 TB/s
    assert h20.peak_flops("bf16") == 148e12 and h20.peak_flops("fp8") == 2 * 148e12
    # the ridge point (FLOP per byte where compute and bandwidth take equal time) is 148e12 / 4e12 = 37,
    # against the H100's 989e12 / 3.35e12 = 295: prefill turns compute-bound ~8x earlier
    assert h20.peak_flops("bf16") / h20.bandwidth_bytes_s == pytest.approx(37.0)
    assert h100.peak_flops("bf16") / h100.bandwidth_bytes_s == pytest.approx(295, rel=0.01)
    assert h20.clock_hz is None                      # 44 TFLOPS fp32 / (2 x 78 x 128) = 2.2 GHz: not a Hopper clock
    assert h20.interconnect.bandwidth_bytes_s == 900e9 / 2 and h20.interconnect.max_chips == 8


def test_the_reference_a10_row_names_a_profile_now():
    from membound.fidelity.reference import _device
    assert _device("NVIDIA A10 (ECC disabled)") == ("a10", 1.0)


def test_decode_on_an_a10_is_bytes_over_bandwidth():
    # llama-3.1-8b bf16 on the A10, pure roofline: every weight byte once per token except the input embedding
    # table (a token reads one row of it): (8,030,261,248 - 128,256 x 4,096) x 2 bytes / 600 GB/s = 25.0 ms
    r = mb.estimate(mb.load_model("llama-3.1-8b"), mb.load_hardware("a10"), runtime="ideal",
                    prompt_tokens=0, output_tokens=1)
    assert r.tpot_s == pytest.approx((8_030_261_248 - 128256 * 4096) * 2 / 600e9, rel=0.01)
