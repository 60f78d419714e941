"""The bundled hardware catalogue: every profile loads, and the hand-derived facts hold.

The arithmetic is written out so a reader can check each figure against
src/membound/data/reference/hardware_datasheets.md without running anything.
"""
import math
from pathlib import Path

import pytest

import membound as mb
from membound.catalog.hardware import bundled_profiles_dir, load_hardware_file
from membound.physics.efficiency import efficiency

MiB = 2**20
GiB = 2**30

EXPECTED = {
    # datacenter GPUs
    "h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200", "gb200", "a100-80gb", "a100-40gb",
    "l40s", "l4", "mi300x", "mi325x", "mi355x", "gaudi-3",
    # TPUs
    "tpu-v5e", "tpu-v5p", "tpu-v6e",
    # consumer / workstation
    "rtx-3060", "rtx-3090", "rtx-4090", "rtx-5080", "rtx-5090", "rtx-a6000",
    "rtx-pro-6000-blackwell", "rx-7900-xtx", "rx-9070-xt", "arc-a770", "arc-b580",
    # edge / unified memory
    "jetson-agx-orin", "dgx-spark", "ryzen-ai-max-395",
    # Apple
    "apple-m1", "apple-m1-pro", "apple-m1-max", "apple-m1-ultra",
    "apple-m2", "apple-m2-pro", "apple-m2-max", "apple-m2-ultra",
    "apple-m3", "apple-m3-pro", "apple-m3-max", "apple-m3-max-30c", "apple-m3-ultra",
    "apple-m4", "apple-m4-pro", "apple-m4-max", "apple-m4-max-32c",
    # specialised
    "cerebras-wse-3", "groq-lpu", "sambanova-sn40l",
}

BUNDLED_FILES = sorted(Path(bundled_profiles_dir()).glob("*.yaml"))


def test_catalogue_lists_every_expected_device():
    names = set(mb.list_hardware())
    missing = EXPECTED - names
    assert not missing, f"bundled profiles missing: {sorted(missing)}"


@pytest.mark.parametrize("path", BUNDLED_FILES, ids=lambda p: p.stem)
def test_every_bundled_profile_loads_and_is_sourced(path):
    hw = load_hardware_file(path)
    assert hw.name == path.stem
    assert hw.name == hw.name.lower() and " " not in hw.name and "_" not in hw.name
    assert mb.load_hardware(hw.name) == hw
    for tier in hw.memory:
        assert tier.source.strip(), f"{hw.name}: tier {tier.name} has no source"
        assert tier.capacity_bytes > 0 and tier.bandwidth_bytes_s > 0
    bws = [t.bandwidth_bytes_s for t in hw.memory]
    assert bws == sorted(bws, reverse=True)            # fastest tier first
    assert hw.compute_source.strip()
    assert all(v > 0 for v in hw.compute_flops.values())
    assert hw.supports("bf16")                          # directly or through fp16
    if hw.interconnect is not None:
        assert hw.interconnect.source.strip()
    if hw.price_usd_per_hour is not None:
        assert hw.price_source and hw.price_source.strip()
    assert 0 < hw.achievable.bandwidth_fraction <= 1
    assert hw.achievable.evidence.strip()
    assert hw.latency.evidence.strip()


def test_h100_exemplar_unchanged():
    h100 = mb.load_hardware("h100-sxm")
    assert h100.capacity_bytes == 81_559 * MiB == 85_520_809_984
    assert h100.bandwidth_bytes_s == 3.35e12
    # dense bf16 = 1979 sparse / 2
    assert h100.peak_flops("bf16") == pytest.approx(1979e12 / 2, rel=1e-3)
    # interconnect is one direction: 900 GB/s bidirectional / 2
    assert h100.interconnect.bandwidth_bytes_s == 900e9 / 2


def test_h200_bandwidth_and_capacity():
    h200 = mb.load_hardware("h200")
    assert h200.bandwidth_bytes_s == 4.8e12
    # nvidia-smi: 143,771 MiB = 143771 * 1,048,576 bytes
    assert h200.capacity_bytes == 143_771 * MiB == 150_754_820_096
    # same compute as H100 SXM
    assert h200.peak_flops("fp8") == mb.load_hardware("h100-sxm").peak_flops("fp8")


def test_b200_capacity_and_blackwell_fp4():
    b200 = mb.load_hardware("b200")
    assert b200.capacity_bytes == 180e9                  # 180 GB usable (192 physical)
    assert b200.bandwidth_bytes_s == 8e12
    assert b200.interconnect.bandwidth_bytes_s == 1.8e12 / 2
    for name in ("b200", "gb200", "rtx-5080", "rtx-5090", "rtx-pro-6000-blackwell", "dgx-spark"):
        assert mb.load_hardware(name).supports("fp4"), name
    for name in ("b200", "gb200", "rtx-pro-6000-blackwell"):
        hw = mb.load_hardware(name)
        # datacenter/pro Blackwell: dense fp4 = 2 x fp8 (B200: 9000 = 2 x 4500 TFLOP/s)
        assert hw.peak_flops("fp4") == pytest.approx(2 * hw.peak_flops("fp8"), rel=0.02), name
    assert mb.load_hardware("gb200").interconnect.max_chips == 72


@pytest.mark.parametrize("name", ["a100-80gb", "a100-40gb", "rtx-3090", "rtx-3060", "rtx-a6000",
                                  "rx-7900-xtx", "tpu-v5e", "tpu-v6e"])
def test_no_fp8_where_the_hardware_has_none(name):
    hw = mb.load_hardware(name)
    assert "fp8" not in hw.compute_flops
    assert not hw.supports("fp8")


def test_no_fp4_before_blackwell():
    for name in ("h100-sxm", "h200", "a100-80gb", "rtx-4090", "l40s"):
        assert not mb.load_hardware(name).supports("fp4"), name


def test_wse3_bandwidth_is_thousands_of_times_an_h100():
    wse = mb.load_hardware("cerebras-wse-3")
    h100 = mb.load_hardware("h100-sxm")
    assert wse.bandwidth_bytes_s == 21e15
    ratio = wse.bandwidth_bytes_s / h100.bandwidth_bytes_s
    # 21e15 / 3.35e12 = 6268.66...
    assert ratio == pytest.approx(6269, abs=1)
    assert 1000 < ratio < 10000


def test_wse3_sram_holds_a_20b_model_at_2_bytes_and_40b_at_int8():
    wse = mb.load_hardware("cerebras-wse-3")
    assert len(wse.memory) == 1 and wse.memory[0].name == "SRAM"
    assert wse.capacity_bytes == 44e9
    # 44e9 bytes / 2 bytes per param = 22e9 params: a ~20B model in bf16 fits, a 70B one does not
    assert wse.capacity_bytes / 2 == 22e9
    # 44e9 bytes / 1 byte per param = 44e9 params: a ~40B model at int8/fp8
    assert wse.capacity_bytes / 1 == 44e9
    assert wse.interconnect.bandwidth_bytes_s == 150e9    # 12 x 100 GbE = 1.2 Tb/s, one way


def test_groq_llama3_70b_at_fp8_needs_300_plus_chips():
    lpu = mb.load_hardware("groq-lpu")
    # 220 MiB (ISCA 2020: 2 x 44 MEM slices) = 220 x 1,048,576 B = 230,686,720 B, Groq's "230 MB"
    assert lpu.capacity_bytes == 220 * 2**20 == 230_686_720
    assert lpu.bandwidth_bytes_s == 80e12
    assert lpu.peak_flops("fp16") == 188e12 and lpu.peak_flops("int8") == 750e12
    weights_fp8 = 70.55e9                                # Llama-3-70B: 70.55e9 params x 1 byte
    chips = math.ceil(weights_fp8 / lpu.capacity_bytes)  # 70.55e9 / 230.69e6 = 305.8 -> 306
    assert chips == 306
    assert chips >= 300
    assert lpu.interconnect.max_chips >= chips


def test_sambanova_streams_from_two_tiers_fastest_first():
    # HBM then DDR; the 520 MB of on-chip PMU SRAM holds a kernel's stage buffers, not weights
    # between tokens (the profile's memory: comment), so it is no tier
    sn = mb.load_hardware("sambanova-sn40l")
    assert [t.name for t in sn.memory] == ["HBM", "DDR"]
    hbm, ddr = sn.memory
    # the SN40L paper's binary units: 64 GiB of HBM, 1.5 TiB of DDR (Hot Chips 2024's 16-socket
    # 1 TB and 24 TB are 16 x 64 GiB = 1 TiB and 16 x 1.5 TiB = 24 TiB)
    assert hbm.capacity_bytes == 64 * 2**30 == 68_719_476_736 and hbm.bandwidth_bytes_s == 1.6e12
    assert ddr.capacity_bytes == 1.5 * 2**40 == 1_649_267_441_664 and ddr.bandwidth_bytes_s == 0.2e12
    assert 16 * hbm.capacity_bytes == 2**40 and 16 * ddr.capacity_bytes == 24 * 2**40
    # total per socket: 64 GiB + 1.5 TiB
    assert sn.capacity_bytes == pytest.approx(64 * 2**30 + 1.5 * 2**40)
    assert sn.interconnect.max_chips == 16


@pytest.mark.parametrize("name", ["cerebras-wse-3", "groq-lpu", "sambanova-sn40l"])
def test_fast_chip_profiles_hold_no_fitted_constant(name):
    """Hardware facts only: the profile file names no fit, its latency floor is zero, its hop
    latency is the link's (microseconds, not the 278 us a fit once put there), and `ideal` on it
    uses nothing from a runtime file."""
    text = (bundled_profiles_dir() / f"{name}.yaml").read_text().lower()
    assert "fitted" not in text and "calibrate" not in text
    hw = mb.load_hardware(name)
    assert hw.latency.per_layer_s == 0.0 and hw.latency.per_step_s == 0.0
    assert hw.interconnect.latency_s <= 5e-6
    eff = efficiency(mb.load_runtime("ideal"), hw)
    assert (eff.fabric_efficiency, eff.hop_latency_s, eff.per_layer_overhead_s, eff.per_layer_floor_s) == (1.0, None, 0.0, 0.0)


@pytest.mark.parametrize("name,gib,gbps", [
    ("apple-m1", 16, 68.25), ("apple-m1-ultra", 128, 800), ("apple-m2-ultra", 192, 800),
    ("apple-m3-pro", 36, 150), ("apple-m3-max-30c", 96, 300), ("apple-m3-ultra", 512, 819),
    ("apple-m4-pro", 64, 273), ("apple-m4-max", 128, 546), ("apple-m4-max-32c", 36, 410),
])
def test_apple_usable_memory_is_three_quarters_of_the_largest_configuration(name, gib, gbps):
    hw = mb.load_hardware(name)
    assert hw.kind == "apple" and hw.device_class == "apple"
    # e.g. M2 Ultra: 0.75 x 192 GiB = 144 GiB = 154,618,822,656 bytes
    assert hw.capacity_bytes == pytest.approx(0.75 * gib * GiB, abs=1)
    assert hw.bandwidth_bytes_s == pytest.approx(gbps * 1e9)
    # Apple GPUs run fp16 at the fp32 rate
    assert hw.peak_flops("fp16") == hw.peak_flops("fp32")
    assert "core GPU" in hw.display_name


def test_interconnect_bandwidth_is_one_direction():
    # bidirectional datasheet figure / 2
    assert mb.load_hardware("a100-80gb").interconnect.bandwidth_bytes_s == 600e9 / 2
    assert mb.load_hardware("tpu-v5e").interconnect.bandwidth_bytes_s == 400e9 / 2
    assert mb.load_hardware("gaudi-3").interconnect.bandwidth_bytes_s == 1200e9 / 2
    assert mb.load_hardware("l40s").interconnect.bandwidth_bytes_s == 64e9 / 2


def test_measured_fractions_carry_their_evidence():
    # MAMF bf16: 1745.0 / 2250 = 0.7756 on B200; 271.2 / 312 = 0.869 on A100 SXM
    assert mb.load_hardware("b200").achievable.compute_fraction == pytest.approx(1745.0 / 2250, abs=1e-3)
    assert mb.load_hardware("a100-80gb").achievable.compute_fraction == pytest.approx(271.2 / 312, abs=1e-3)
    # MI300X BabelStream-class: 81% of 5.3 TB/s
    assert mb.load_hardware("mi300x").achievable.bandwidth_fraction == 0.81
    for name in ("b200", "a100-80gb", "mi300x", "h200"):
        assert "MLE-ACC" in mb.load_hardware(name).achievable.evidence or \
               "MEAS-MI300X-PAPER" in mb.load_hardware(name).achievable.evidence


def test_dgx_spark_tensor_rates_are_geforce_blackwell_with_fp32_accumulate():
    # GB10 (sm_121) has the GeForce Blackwell tensor core: NVIDIA's 1 PFLOP FP4 is sparse, so dense
    # fp4 = 1000 / 2 = 500 TFLOP/s; FP16-accumulate steps: fp8 500 / 2 = 250, fp16 250 / 2 = 125.
    # With FP32 accumulate (bf16 always, fp16/fp8 as PyTorch and llama.cpp's attention run them)
    # GeForce parts run at half that: bf16 125 / 2 = 62.5, fp8 250 / 2 = 125; int8 runs at the
    # full 250 TOPS, as on the RTX 5090 (its profile: fp8 FP32-acc 419, FP4 1676 = 4 x 419).
    hw = mb.load_hardware("dgx-spark")
    assert hw.peak_flops("fp4") == pytest.approx(500e12)
    assert hw.peak_flops("bf16") == pytest.approx(62.5e12)
    assert hw.peak_flops("fp16") == pytest.approx(62.5e12)
    assert hw.peak_flops("fp8") == pytest.approx(125e12)
    assert hw.peak_flops("int8") == pytest.approx(250e12)
    # the same ratios as the GeForce Blackwell profiles: fp4 = 8 x bf16 (FP32 accumulate)
    for name in ("rtx-5090", "rtx-5080", "dgx-spark"):
        p = mb.load_hardware(name)
        assert p.peak_flops("fp4") == pytest.approx(8 * p.peak_flops("bf16"), rel=0.01), name


def test_a_profiles_clock_and_fp32_rate_agree_on_whole_streaming_multiprocessors():
    # fp32 FLOP/s = 2 x CUDA cores x clock, and NVIDIA's SMs hold 128 fp32 lanes: fp32 / (2 x clock x 128)
    # is a whole number of SMs (RTX 4090: 82.6e12 / (2 x 2.52e9 x 128) = 128.04 -> 128; A100:
    # 19.5e12 / (2 x 1.41e9 x 128) = 54.02 -> 54), within 1% (profiles round their fp32 rates)
    with_clock = [mb.load_hardware(n) for n in mb.list_hardware() if mb.load_hardware(n).clock_hz]
    assert {"rtx-a6000", "rtx-4090", "a100-80gb", "h100-sxm"} <= {h.name for h in with_clock}
    for hw in with_clock:
        sms = hw.compute_flops["fp32"] / (2 * hw.clock_hz * 128)
        assert abs(sms - round(sms)) < 0.01 * sms, (hw.name, sms)


# CUDA compute capability by architecture, from NVIDIA's list (developer.nvidia.com/cuda-gpus): Pascal
# GP100 6.0, GP102 6.1, Volta 7.0, Turing 7.5, GA100 8.0, GA10x 8.6, Orin 8.7, Ada 8.9, Hopper 9.0,
# B200/GB200 10.0, B300/GB300 10.3, Jetson Thor 11.0, GeForce RTX 50 and RTX PRO Blackwell 12.0, GB10 12.1
_CC = {6.0: "tesla-p100-pcie-16gb", 6.1: "tesla-p40 gtx-1080-ti",
       7.0: "v100-pcie-16gb v100-pcie-32gb v100-sxm2-16gb v100-sxm2-32gb titan-v",
       7.5: "t4 rtx-2080-ti rtx-2080-super rtx-2080 rtx-2070-super rtx-2070 rtx-2060-12gb rtx-2060",
       8.0: "a100-40gb a100-80gb a100-pcie-80gb a30",
       8.6: "a10 a40 rtx-3060 rtx-3070 rtx-3080 rtx-3080-ti rtx-3090 rtx-3090-ti rtx-a4000 rtx-a5000 rtx-a6000 "
            "rtx-3060-ti rtx-3070-ti rtx-3050",
       8.7: "jetson-agx-orin jetson-orin-nx jetson-orin-nano",
       8.9: "l4 l40 l40s rtx-6000-ada rtx-4060 rtx-4060-ti rtx-4070 rtx-4070-super rtx-4070-ti rtx-4070-ti-super "
            "rtx-4080 rtx-4080-super rtx-4090 rtx-4000-ada",
       9.0: "h100-sxm h100-pcie h100-nvl h200 h20 h200-nvl gh200-96gb gh200-144gb",
       10.0: "b200 gb200", 10.3: "b300 gb300", 11.0: "jetson-thor",
       12.0: "rtx-5060 rtx-5060-ti rtx-5070 rtx-5070-ti rtx-5080 rtx-5090 rtx-pro-6000-blackwell "
             "rtx-pro-6000-blackwell-max-q rtx-pro-4500-blackwell",
       12.1: "dgx-spark"}
# NVIDIA parts whose capability NVIDIA's list does not give yet (announced, not on developer.nvidia.com/cuda-gpus)
_CC_UNPUBLISHED = {"rubin"}


def test_every_nvidia_profile_gives_its_compute_capability_and_no_other_does():
    expected = {name: cc for cc, names in _CC.items() for name in names.split()}
    assert len(expected) == 53 + 15 + 6    # + the older and mid-range parts of test_older_devices + MLPerf's
    for name in mb.list_hardware():
        hw = mb.load_hardware(name)
        if name in _CC_UNPUBLISHED:
            assert hw.compute_capability is None, name
        elif hw.vendor == "NVIDIA":
            assert hw.compute_capability == expected.pop(name), name
        else:
            assert hw.compute_capability is None, name
    assert not expected     # every listed profile exists


@pytest.mark.parametrize("value", [0.5, 8.65, 100.0, float("nan")])
def test_a_compute_capability_outside_major_minor_is_refused(value):
    with pytest.raises(mb.MemboundError, match="compute_capability"):
        mb.load_hardware("rtx-3090").with_overrides(compute_capability=value)


def test_a_compute_capability_on_another_vendors_device_is_refused():
    with pytest.raises(mb.MemboundError, match="compute_capability.*only on an NVIDIA GPU"):
        mb.load_hardware("rx-7900-xtx").with_overrides(compute_capability=8.0)


def test_published_streams_and_gemms_are_read_off_as_stated():
    # read streams where no copy-class figure exists, rounded down so the share never exceeds read_bytes_s:
    # Xeon 6980P (Mess, 100% reads) 561.26 / 614.4 = 0.9135 -> 0.913; B300 (OpenCL-Benchmark) 6543.01 / 8000
    # = 0.8179 -> 0.817; MI355X 4903.01 / 8000 = 0.6129 -> 0.612; Arc A750 (clpeak) 410.76 / 512 = 0.8023 -> 0.802
    for name, share, fraction in (("xeon-6980p", 561.26 / 614.4, 0.913), ("b300", 6543.01 / 8000, 0.817),
                                  ("mi355x", 4903.01 / 8000, 0.612), ("arc-a750", 410.76 / 512, 0.802)):
        hw = mb.load_hardware(name)
        assert hw.read_ceiling == pytest.approx(share, abs=1e-4), name
        assert hw.achievable.bandwidth_fraction == fraction <= hw.read_ceiling, name
    # GEMM sweeps: Gaudi 2 bf16 MAMF 418.7 / 432 = 0.9692; P40 fp32 torch.mm 10.07 / 11.76 = 0.8563 (its fp16
    # runs at 1/64); RTX 5080 fp16 102.42 / 112.6 = 0.9096; an RTX 3070's 43.02 / 40.6 = 1.06 is capped at 1
    for name, fraction in (("gaudi-2", 0.969), ("tesla-p40", 0.856), ("rtx-5080", 0.91), ("rtx-3070", 1.0)):
        assert mb.load_hardware(name).achievable.compute_fraction == fraction, name


def test_a_share_carried_from_a_sibling_part_counts_as_assumed():
    from membound.fidelity.budget import fraction_evidence
    # MI350X takes MI355X's measured read share (same CDNA 4 die and HBM3E), Xeon 6972P the 6980P's, the Orin
    # Nano the AGX Orin's copy share: each a transfer, so each stays "assumed" for validate's categories
    for name, sibling in (("mi350x", "mi355x"), ("xeon-6972p", "xeon-6980p"), ("jetson-orin-nano", "jetson-agx-orin")):
        hw, sib = mb.load_hardware(name), mb.load_hardware(sibling)
        assert "transfer" in hw.achievable.evidence
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "assumed", name
        assert fraction_evidence(sib.achievable.evidence, "bandwidth_fraction") == "measured", sibling
        assert hw.achievable.bandwidth_fraction == pytest.approx(sib.achievable.bandwidth_fraction, abs=1e-3), name
    # the parts measured by issue 27 item 4's second pass keep their citations (bandwidth 101 -> 84 assumed,
    # 10 of the 84 transfers; compute 110 -> 86, of 144 profiles)
    measured_bw = ("mi300a", "mi250x", "mi250x-module", "mi50", "gtx-1080-ti", "rtx-2060", "rtx-2080", "rtx-2080-super",
                   "rtx-2080-ti", "titan-v", "tesla-p40", "rtx-5060", "rx-7700-xt", "b300", "mi355x", "dgx-spark",
                   "xeon-platinum-8480p", "xeon-6980p", "arc-a750")
    measured_cp = ("gaudi-2", "gh200-144gb", "rtx-2070", "rtx-2080-ti", "rtx-3060-ti", "rtx-3070", "rtx-3080", "rtx-4060",
                   "rtx-5060", "rtx-5060-ti", "rtx-5070", "rtx-5080", "rtx-a4000", "rx-7900-xt", "rx-7700-xt",
                   "jetson-orin-nano", "jetson-thor", "tesla-p100-pcie-16gb", "v100-sxm2-16gb", "tesla-p40", "gtx-1080-ti")
    for names, fraction in ((measured_bw, "bandwidth_fraction"), (measured_cp, "compute_fraction")):
        for name in names:
            assert fraction_evidence(mb.load_hardware(name).achievable.evidence, fraction) == "measured", (name, fraction)


def test_third_pass_readings_are_read_off_as_stated():
    from membound.fidelity.budget import fraction_evidence
    # Ironwood: an XLA copy, read plus written, 3210.48 GB/s per die = 6420.96 per chip of 7370 -> 0.8712 -> 0.871;
    # a trace-timed bf16 16384^3 GEMM, 1103.47 TFLOP/s per die of 2307 / 2 = 1153.5 -> 0.9566 -> 0.957.
    # v6e bf16 8192^3: 727.70 / 918 = 0.7927 -> 0.793; v5e XLA bf16 8192^3: 181.82 / 197 = 0.9230 -> 0.923.
    # Apple fp16 torch matmuls: M3 Max 12.84 / 14.32 = 0.8966 -> 0.897;
    # M4 median(3.12, 1.57) = 2.345 / 3.76 = 0.6237 -> 0.624; M4 Max 14.82 / 17.18 = 0.8626 -> 0.863, above the
    # 13.29 / 17.18 = 0.774 of a second source (the highest share is the fraction)
    assert 6420.96 / 7370 == pytest.approx(0.871, abs=5e-4)
    assert mb.load_hardware("tpu-7x").achievable.bandwidth_fraction == 0.871
    for name, share, fraction in (("tpu-7x", 1103.47 / 1153.5, 0.957), ("tpu-v6e", 727.70 / 918, 0.793),
                                  ("tpu-v5e", 181.82 / 197, 0.923), ("apple-m3-max", 12.84 / 14.32, 0.897),
                                  ("apple-m4", (3.12 + 1.57) / 2 / 3.76, 0.624),
                                  ("apple-m4-max", 14.82 / 17.18, 0.863)):
        assert share == pytest.approx(fraction, abs=5e-4), name
        hw = mb.load_hardware(name)
        assert hw.achievable.compute_fraction == fraction, name
        assert fraction_evidence(hw.achievable.evidence, "compute_fraction") == "measured", name
    # a BabelStream figure whose kernel the page does not name (COSMA testbeds, SHAREing-DRI/hpc-testbeds): copy-class
    # or a read stream, it gives the part its share and read ceiling either way: H100 NVL 3387 / 3900 = 0.8685 -> 0.868
    # (above mt4g's read stream, 2853.07 GiB/s x 1.073741824 = 3063.46 GB/s / 3900 = 0.7855, which stood for it before);
    # A30 822 / 933 = 0.8810 -> 0.881 (assumed 0.8 before). GH200 96 GB's OpenCL read, 3614.60 / 4000 = 0.9036, stood for
    # its copy until gpu-benches' was attributed to it: see the test below.
    # RX 9070 XT's vector add (two loads, one store): 599.93 / 640 = 0.9374 -> 0.937
    assert 2853.07 * 1.073741824 / 3900 == pytest.approx(0.7855, abs=1e-4)
    assert 2853.07 * 1.073741824 < 3387
    for name, share, fraction in (("h100-nvl", 3387 / 3900, 0.868), ("a30", 822 / 933, 0.881)):
        hw = mb.load_hardware(name)
        assert hw.read_ceiling == pytest.approx(share, abs=1e-4), name
        assert hw.achievable.bandwidth_fraction == fraction <= hw.read_ceiling, name
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "measured", name
    assert mb.load_hardware("rx-9070-xt").achievable.bandwidth_fraction == 0.937 == pytest.approx(599.93 / 640, abs=5e-4)
    # torch.mm sweeps of zzc0721/torch-performance-test-data (database.md and boards posted as its issues):
    # A40 bf16 122.29 / 149.7 = 0.8169 -> 0.817; RX 6800 fp16
    # 25.39 / 32.33 = 0.7853 -> 0.785; RX 9070 XT fp16 median(129.35, 124.64) = 126.995 / 194.7 = 0.6523 -> 0.652;
    # RX 7700 XT median(55.87, 51.93) = 53.90 / 70.34 = 0.7663 -> 0.766;
    # M1 Pro fp16 4.75 / 5.2 = 0.9135 -> 0.913, above chsasank's 4.3 / 5.2 = 0.827
    for name, share, fraction in (("a40", 122.29 / 149.7, 0.817),
                                  ("rx-6800", 25.39 / 32.33, 0.785), ("rx-9070-xt", (129.35 + 124.64) / 2 / 194.7, 0.652),
                                  ("rx-7700-xt", (55.87 + 51.93) / 2 / 70.34, 0.766),
                                  ("apple-m1-pro", 4.75 / 5.2, 0.913)):
        assert share == pytest.approx(fraction, abs=5e-4), name
        assert mb.load_hardware(name).achievable.compute_fraction == fraction, name
    # bf16 MAMF (mag-/gpu_benchmark @93322b7, README 'Stats'), above the torch.mm sweeps, so the highest share:
    # MI210 142.8 / 181 = 0.7890 -> 0.789 (torch.mm 130.83 / 181 = 0.723); L4 91.4 / 121 = 0.7554 -> 0.755 (torch.mm
    # 70.89 / 121 = 0.586, chsasank 66 / 121); H100 PCIe 499.5 / 756 = 0.6607 -> 0.661 (torch.mm 495.93 / 756 = 0.656);
    # MI300X 788.2 / 1307.4 = 0.6029 -> 0.603 (MLE-ACC's MAMF 668.4 / 1300 = 0.514); H100 SXM ('NVIDIA H100 SXM
    # 80GB') 821.2 / 989 = 0.8303 -> 0.830 (MLE-ACC's MAMF 794.5 / 989 = 0.803, torch.mm 797.51 / 989 = 0.806)
    for name, share, below, fraction in (("mi210", 142.8 / 181, 130.83 / 181, 0.789), ("l4", 91.4 / 121, 70.89 / 121, 0.755),
                                         ("h100-pcie", 499.5 / 756, 495.93 / 756, 0.661),
                                         ("mi300x", 788.2 / 1307.4, 668.4 / 1300, 0.603),
                                         ("h100-sxm", 821.2 / 989, 797.51 / 989, 0.830)):
        assert share == pytest.approx(fraction, abs=5e-4) and below < share, name
        assert mb.load_hardware(name).achievable.compute_fraction == fraction, name
    # set aside, with the reason in the profile: an fp32-only GEMM on a part whose fp16 is not slower (Apple M1,
    # M2, M2 Ultra): those fractions stay assumed; copy or read figures above the memory's peak (RTX 2070 SUPER
    # 831 > 448 GB/s; Arc B580 586.30 > 456 GB/s) stay set aside, the bandwidth now FluidX3D's lower bound (below)
    for name, fraction in (("apple-m1", "compute_fraction"), ("apple-m2", "compute_fraction"),
                           ("apple-m2-ultra", "compute_fraction")):
        hw = mb.load_hardware(name)
        assert "set aside" in hw.achievable.evidence, name
        assert fraction_evidence(hw.achievable.evidence, fraction) == "assumed", (name, fraction)
    for name in ("rtx-2070-super", "arc-b580"):
        hw = mb.load_hardware(name)
        assert "set aside" in hw.achievable.evidence and "FluidX3D" in hw.achievable.evidence, name
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "measured", name


def test_fluidx3d_is_a_lower_bound_that_sets_the_fraction_only_where_it_is_the_highest_share():
    # ProjectPhysX/FluidX3D @8986874, README single-GPU table: a D3Q19 LBM step moves 153 B a cell in FP32/FP32 and
    # 77 B in FP32/FP16S or FP16C, every byte a load or store. Best column x bytes over the profile's peak:
    # RTX A6000 8814 x 77 = 678.678 of 768 GB/s = 0.8837 -> 0.884 (was 0.8 assumed);
    # RTX PRO 6000 Blackwell 20841 x 77 = 1604.757 of 1792 = 0.8955 -> 0.896 (was 0.8 assumed);
    # Apple M1 384 x 153 = 58.752 of 68.25 = 0.8608 -> 0.861, above chsasank's torch copy 56 / 68.25 = 0.821;
    # RTX 2070 SUPER 4893 x 77 = 376.761 of 448 = 0.8410 -> 0.841; Arc B580 5153 x 77 = 396.781 of 456 = 0.8701 -> 0.87
    from membound.fidelity.budget import fraction_evidence
    for name, gbs, peak, fraction in (("rtx-a6000", 8814 * 77 / 1e3, 768, 0.884),
                                      ("rtx-pro-6000-blackwell", 20841 * 77 / 1e3, 1792, 0.896),
                                      ("apple-m1", 384 * 153 / 1e3, 68.25, 0.861),
                                      ("rtx-2070-super", 4893 * 77 / 1e3, 448, 0.841),
                                      ("arc-b580", 5153 * 77 / 1e3, 456, 0.87)):
        assert round(gbs / peak, 3) == fraction, name
        hw = mb.load_hardware(name)
        assert hw.achievable.bandwidth_fraction == fraction, name
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "measured", name
    assert 56 / 68.25 < 0.861
    # below an assumed figure a lower bound does not set the fraction: L40S 7637 x 77 = 588.049 of 864 = 0.681 < 0.8;
    # RX 7800 XT 1704 x 153 = 260.712 of 624 = 0.418 < 0.8: both stay 0.8, assumed, the bound listed
    for name, gbs, peak in (("l40s", 7637 * 77 / 1e3, 864), ("rx-7800-xt", 1704 * 153 / 1e3, 624)):
        hw = mb.load_hardware(name)
        assert gbs / peak < hw.achievable.bandwidth_fraction == 0.8, name
        assert "FluidX3D" in hw.achievable.evidence, name
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "assumed", name



def test_the_a100_80gb_stream_share_is_its_own_copy_kernel_not_a_transfer():
    # gpu-benches on an 'NVIDIA A100-SXM4-80GB' (device_order.py): scale (one load, one store stream) 1737 of
    # 2039 GB/s = 0.8519 -> 0.851, above BabelStream's Copy on Azure's A100-SXM4-80GB, 1.61 TB/s = 0.790 (the highest
    # copy-class share is the fraction); the best loading stream, a read kernel at 1.80 TB/s (Nsight 88%), is the
    # ceiling: 1.80e12 / 2.039e12 = 0.8828, above the fraction, so it does not bind the profile's own share
    from membound.fidelity.budget import fraction_evidence
    hw = mb.load_hardware("a100-80gb")
    assert 1737 / 2039 == pytest.approx(0.851, abs=1e-3) and 1.61e12 / 2.039e12 < 0.851
    assert hw.achievable.bandwidth_fraction == 0.851
    assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "measured"
    assert hw.read_ceiling == pytest.approx(1.80e12 / 2.039e12) == pytest.approx(0.8828, abs=1e-4)
    assert hw.read_ceiling > hw.achievable.bandwidth_fraction



def test_read_streams_stand_for_a_missing_copy_kernel_on_gb200_and_mi350p():
    # no copy-class figure of either part was found, so its best read stream, rounded down, is the fraction and the
    # read ceiling: GB200, gpu-benches' roofline kernel at zero iterations (two arrays read), 6389 / 8000 = 0.7986 ->
    # 0.798 (B200's 0.9 carried over before); MI350P, mt4g's main-memory read, 1073741824 B in 0.000408341 s =
    # 2.6295e12 B/s (2448.93 GiB/s) / 4.0e12 = 0.6574 -> 0.657 (MI355X's 0.612 carried over before)
    from membound.fidelity.budget import fraction_evidence
    assert 1073741824 / 0.000408341 / 2**30 == pytest.approx(2448.93, abs=0.01)
    for name, share, fraction in (("gb200", 6389 / 8000, 0.798), ("mi350p", 1073741824 / 0.000408341 / 4.0e12, 0.657)):
        hw = mb.load_hardware(name)
        assert share == pytest.approx(fraction, abs=1e-3) and fraction <= share, name
        assert hw.read_ceiling == pytest.approx(share, abs=1e-4), name
        assert hw.achievable.bandwidth_fraction == fraction, name
        assert fraction_evidence(hw.achievable.evidence, "bandwidth_fraction") == "measured", name

def test_the_gh200_96gb_reads_its_own_copy_kernel_and_gemm():
    # gpu-benches' gh200.txt ran on an 'NVIDIA GH200 480GB' (device_order.py), the 96 GB HBM3 part (mag-/gpu_benchmark
    # renamed its 'NVIDIA GH200 480GB' row 'NVIDIA GH200 96GB', commit dc7240d): scale 3174 / 4000 = 0.7935 -> 0.793,
    # a copy-class figure, so it replaces the read stream that stood for one (3614.60 / 4000 = 0.9036, still the read
    # ceiling); bf16 MAMF 852.5 of 989 = 0.8620 -> 0.862 (no longer h100-sxm's 0.8 carried over)
    from membound.fidelity.budget import fraction_evidence
    hw = mb.load_hardware("gh200-96gb")
    assert 3174 / 4000 == pytest.approx(0.793, abs=5e-4) and 852.5 / 989 == pytest.approx(0.862, abs=5e-4)
    assert (hw.achievable.bandwidth_fraction, hw.achievable.compute_fraction) == (0.793, 0.862)
    assert hw.read_ceiling == pytest.approx(3614.60 / 4000, abs=1e-4)
    assert hw.read_ceiling > hw.achievable.bandwidth_fraction
    assert {fraction_evidence(hw.achievable.evidence, f) for f in ("bandwidth_fraction", "compute_fraction")} == {"measured"}

def test_a_share_of_a_cpu_socket_scales_its_peaks_from_their_definition():
    # One instance pinned to 7 of a Xeon 6980P's 128 cores, beside 17 others on the socket (Intel's MLPerf
    # v5.1 launch). AMX peak from its definition: 7 cores x 2.0e9 Hz (base clock) x 2048 int8 ops a clock
    # = 2.8672e13 ops/s (bf16: 1024 a clock, 1.4336e13); its even share of 12 channels x 6400 MT/s x 8 B =
    # 614.4e9 B/s among 18 instances is 3.41333e10 B/s, and of the measured 561.259e9 B/s read stream 3.11811e10
    hw = mb.load_hardware("xeon-6980p")
    part = hw.share(7 / 128, 1 / 18)
    assert part.peak_flops("int8") == pytest.approx(7 * 2.0e9 * 2048)
    assert part.peak_flops("bf16") == pytest.approx(7 * 2.0e9 * 1024)
    assert part.bandwidth_bytes_s == pytest.approx(12 * 6400e6 * 8 / 18)
    assert part.memory[0].read_bytes_s == pytest.approx(561.259e9 / 18)
    assert part.capacity_bytes == pytest.approx(hw.capacity_bytes / 18)
    assert part.achievable == hw.achievable and part.read_ceiling == pytest.approx(hw.read_ceiling)
    assert part.name != hw.name and part.price_usd_per_hour is None
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(mb.InvalidInputError, match="compute"):
            hw.share(bad, 0.5)
        with pytest.raises(mb.InvalidInputError, match="memory"):
            hw.share(0.5, bad)
