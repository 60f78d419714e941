"""The accelerators and CPUs of MLPerf Inference's LLM results (issue 29, coverage): each profile's derived
figures recomputed by hand from the datasheet numbers it cites, and MLPerf's own spellings reaching it."""
import pytest

import membound as mb


@pytest.mark.parametrize("name, gbps, bus_bits", [
    ("arc-pro-b60", 19.0, 192), ("arc-pro-b50", 14.0, 128), ("arc-pro-b70", 19.0, 256),
    ("rtx-pro-4500-blackwell", 28.0, 256),
])
def test_memory_bandwidth_is_pin_rate_times_bus(name, gbps, bus_bits):
    # bytes/s = Gbit/s per pin x pins / 8
    assert mb.load_hardware(name).bandwidth_bytes_s == pytest.approx(gbps * 1e9 * bus_bits / 8)


@pytest.mark.parametrize("name, cores, ghz, channels, mts", [
    ("xeon-platinum-8480p", 56, 2.0, 8, 4800), ("xeon-platinum-8592p", 64, 1.9, 8, 5600),
    ("xeon-gold-6538y-plus", 32, 2.2, 8, 5200), ("xeon-6980p", 128, 2.0, 12, 6400),
    ("xeon-6972p", 96, 2.4, 12, 6400), ("xeon-6787p", 86, 2.0, 8, 6400), ("xeon-6788p", 86, 2.0, 8, 6400),
    ("xeon-6987p-c", 120, 2.0, 12, 6400),    # the custom part's clock is assumed (its profile says so)
])
def test_a_xeon_socket_streams_its_channels_and_multiplies_on_amx(name, cores, ghz, channels, mts):
    cpu = mb.load_hardware(name)
    assert cpu.kind == "cpu"
    assert cpu.bandwidth_bytes_s == pytest.approx(channels * mts * 1e6 * 8)      # 8 bytes a transfer per channel
    assert cpu.peak_flops("bf16") == pytest.approx(cores * 1024 * ghz * 1e9)     # AMX: 1024 bf16 FLOP/clock/core
    assert cpu.peak_flops("int8") == pytest.approx(cores * 2048 * ghz * 1e9)     # AMX: 2048 int8 ops/clock/core
    assert cpu.peak_flops("fp32") == pytest.approx(cores * 2 * 16 * 2 * ghz * 1e9)   # 2 FMA ports x 16 lanes x 2


def test_the_xeon_max_streams_hbm_first_then_ddr5():
    cpu = mb.load_hardware("xeon-max-9480")
    hbm, ddr = cpu.memory
    assert (hbm.name, ddr.name) == ("HBM2e", "DDR5")
    assert hbm.capacity_bytes == 4 * 16e9                               # four 16 GB stacks
    assert hbm.bandwidth_bytes_s == pytest.approx(4 * 1024 / 8 * 3200e6)  # 4 stacks x 1024 bits x 3200 MT/s = 1638.4 GB/s
    assert ddr.bandwidth_bytes_s == pytest.approx(8 * 4800e6 * 8)        # 8 DDR5-4800 channels x 8 bytes = 307.2 GB/s
    assert cpu.read_ceiling == pytest.approx(606.27 / 1638.4, abs=1e-4)  # Mess: 606.27 GB/s at 100% reads
    assert cpu.achievable.bandwidth_fraction == 0.37 <= cpu.read_ceiling
    assert cpu.peak_flops("bf16") == pytest.approx(56 * 1024 * 1.9e9)  # 56 cores x AMX 1024 FLOP/clock x 1.9 GHz


def test_the_a100_pcie_is_the_sxm_die_at_a_lower_memory_clock():
    pcie, sxm = mb.load_hardware("a100-pcie-80gb"), mb.load_hardware("a100-80gb")
    assert pcie.bandwidth_bytes_s == 1.935e12 < sxm.bandwidth_bytes_s == 2.039e12   # NVIDIA's A100 datasheet
    assert pcie.peak_flops("bf16") == sxm.peak_flops("bf16") == 312e12
    assert not pcie.supports("fp8")
    assert pcie.achievable.bandwidth_fraction == 0.892    # A800 80GB PCIe copy: 1727 / 1935 = 0.8925, rounded down


def test_the_mi350p_is_half_an_mi350x():
    # one I/O die with four XCDs of the MI350X's two and eight: half the CUs, HBM stacks and rates
    x, p = mb.load_hardware("mi350x"), mb.load_hardware("mi350p")
    assert p.memory[0].capacity_bytes == x.memory[0].capacity_bytes / 2 == 144e9
    for dtype in ("bf16", "fp8", "fp4"):
        assert p.peak_flops(dtype) == pytest.approx(x.peak_flops(dtype) / 2)
    assert x.peak_flops("fp8") == 4.6e15     # ServeTheHome's MI350 table: MXFP8 4.6 PF (MI350P: 2.3)
    # AMD's 8 and 4 TB/s (the table's "8Gbps x 8192-bits" would be 8.19 TB/s: AMD rounds the pin rate)
    assert x.bandwidth_bytes_s == 2 * p.bandwidth_bytes_s == 8e12


def test_gh200_decode_ceilings_by_hand():
    # Llama-3.1-8B bf16 streams its weights less the input table (one row read): 8,030,261,248 parameters,
    # 128,256 x 4096 of them the input embedding, 2 bytes each, plus the one 4096-element row
    streamed = (8_030_261_248 - 128_256 * 4096) * 2 + 4096 * 2
    assert mb.bandwidth_ceiling("llama-3.1-8b", "gh200-144gb") == pytest.approx(4.9e12 / streamed)
    assert mb.bandwidth_ceiling("llama-3.1-8b", "gh200-96gb") == pytest.approx(4.0e12 / streamed)
    assert mb.bandwidth_ceiling("llama-3.1-8b", "gaudi-2") == pytest.approx(2.46e12 / streamed)


def test_dense_rates_are_the_sparse_datasheet_figures_halved():
    nvl = mb.load_hardware("h200-nvl")
    assert nvl.peak_flops("bf16") == pytest.approx(1671e12 / 2)   # H200 NVL: 1,671 TFLOPS bf16 with sparsity
    assert nvl.peak_flops("fp8") == pytest.approx(3341e12 / 2)
    l40 = mb.load_hardware("l40")
    assert l40.peak_flops("bf16") == pytest.approx(362e12 / 2) and l40.peak_flops("fp8") == pytest.approx(724e12 / 2)
    rubin = mb.load_hardware("rubin")
    assert rubin.peak_flops("fp4") == 35e15 and rubin.peak_flops("bf16") == 35e15 / 4   # NVFP4 training rate, 4:2:1


@pytest.mark.parametrize("spelling, profile", [
    ("NVIDIA GH200 Grace Hopper Superchip 144GB", "gh200-144gb"),
    ("NVIDIA GH200 Grace Hopper Superchip 96GB", "gh200-96gb"),
    ("NVIDIA GH200-GraceHopper-Superchip", "gh200-96gb"),    # v3.1/v4.0 (2023-24): the 96 GB HBM3 part
    ("Habana Gaudi2", "gaudi-2"), ("Intel® Gaudi® 2 AI Accelerator", "gaudi-2"),
    ("Intel(R) Arc Pro(R) B60", "arc-pro-b60"), ("NVIDIA H200-NVL-141GB", "h200-nvl"), ("NVIDIA L40", "l40"),
    ("Intel(R) Xeon(R) Platinum 8480+", "xeon-platinum-8480p"), ("INTEL(R) XEON(R) 6980P", "xeon-6980p"),
    ("Intel(R) Xeon(R) 6787P", "xeon-6787p"), ("INTEL(R) XEON(R) PLATINUM 8592+", "xeon-platinum-8592p"),
    ("Intel(R) Xeon(R) 6788P", "xeon-6788p"), ("Intel(R) Xeon(R) 6987P-C", "xeon-6987p-c"),
    ("Intel (R) Xeon (R) CPU Max 9480", "xeon-max-9480"), ("NVIDIA A100-PCIe-80GB", "a100-pcie-80gb"),
    ("NVIDIA A100-SXM-80GB", "a100-80gb"), ("NVIDIA A100-SXM-80GB CTS", "a100-80gb"),
    ("NVIDIA Jetson AGX Orin 64G", "jetson-agx-orin"),
    ("gptj", "gpt-j-6b"),
])
def test_mlperf_spellings_reach_the_profiles(spelling, profile):
    kind = "model" if profile.startswith("gpt-j") else "hardware"
    assert mb.resolve_name(kind, spelling) == profile


def test_a_row_without_a_memory_size_takes_the_one_its_system_name_gives():
    # v4.0's NVIDIA GH200 row: accelerator "NVIDIA GH200-GraceHopper-Superchip" (the 96 GB part's alias),
    # no accelerator_memory, system "..._GH200-144GB_aarch64x1_TRT" (its system JSON: 144 GB HBM3e)
    from types import SimpleNamespace

    from membound.fidelity import mlperf_rows as mrows
    row = dict(accelerator="NVIDIA GH200-GraceHopper-Superchip", accel_variant="GH200", accel_family="GH200",
               accelerator_memory=float("nan"), system_name="GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1_TRT")
    assert mrows._device(SimpleNamespace(**row)) == "gh200-144gb"
    # the 96 GB system of the same spelling, and a row whose memory column speaks, keep the accelerator's own
    assert mrows._device(SimpleNamespace(**{**row, "system_name": "GH200-GraceHopper-Superchip_GH200-96GB_aarch64x1_TRT"})) \
        == "gh200-96gb"
    assert mrows._device(SimpleNamespace(**{**row, "accelerator_memory": "96 GB HBM3"})) == "gh200-96gb"
    h100 = dict(accelerator="NVIDIA H100-SXM-80GB", accel_variant="H100-SXM", accel_family="H100",
                accelerator_memory=float("nan"), system_name="DGX-H100_H100-SXM-80GBx8_TRT")
    assert mrows._device(SimpleNamespace(**h100)) == "h100-sxm"
