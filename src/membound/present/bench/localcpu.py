"""A Hardware profile for the CPU this process runs on, built on the spot (not bundled):
memory bandwidth measured with a numpy copy, peak compute from a documented assumption."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...catalog.hardware import Achievable, Hardware, LatencyFloor, MemoryTier

# FP32 FLOP per cycle per core, assumed from the widest vector FMA the flags advertise:
# 2 FMA pipes x FP32 lanes x 2 FLOP (AVX-512: 16 lanes, AVX2: 8); SSE: 2 pipes x 4 lanes, no FMA.
FLOP_PER_CYCLE = {"avx512f": 64.0, "avx2": 32.0, "sse": 8.0}
DEFAULT_CLOCK_HZ = 3.0e9   # assumed when /proc/cpuinfo gives no clock


def measure_copy_bandwidth(n_bytes: int = 128 * 2**20, repeats: int = 5) -> float:
    """Sustained memory bandwidth (B/s) of one thread: best of `repeats` numpy copies of an
    n_bytes array (larger than the caches), counting the bytes read plus the bytes written.
    One thread understates what all cores together can stream; it is a lower bound."""
    a = np.ones(max(n_bytes // 8, 1), dtype=np.float64)
    b = np.empty_like(a)
    np.copyto(b, a)   # touch the pages once
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * a.nbytes / best


def _cpuinfo() -> dict:
    info: dict[str, Any] = {"model": "unknown CPU", "mhz": None, "flags": set()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and info["model"] == "unknown CPU":
            info["model"] = value
        elif key == "cpu MHz" and info["mhz"] is None:
            try:
                info["mhz"] = float(value)
            except ValueError:
                pass
        elif key == "flags" and not info["flags"]:
            info["flags"] = set(value.split())
    return info


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _physical_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8.0e9   # assumed when the OS does not say


def local_cpu_hardware(bandwidth_bytes_s: float | None = None, name: str = "local-cpu") -> Hardware:
    """A membound Hardware for this machine's CPU (kind "cpu").

    bandwidth: `bandwidth_bytes_s` if given, else `measure_copy_bandwidth()` (a measured,
    already achievable figure, so the bandwidth fraction is 1). compute: cores (this
    process may use) x clock x FP32 FLOP/cycle from the ISA flags (FLOP_PER_CYCLE), an
    assumption, with compute fraction 0.6 assumed. Capacity: the machine's physical memory.
    """
    info = _cpuinfo()
    bw = float(bandwidth_bytes_s) if bandwidth_bytes_s is not None else measure_copy_bandwidth()
    bw_source = ("given by the caller" if bandwidth_bytes_s is not None
                 else "measured: best of 5 single-thread numpy copies of 128 MiB (read + write bytes)")
    flags = info["flags"]
    isa = next((k for k in ("avx512f", "avx2") if k in flags), "sse")
    clock = info["mhz"] * 1e6 if info["mhz"] else DEFAULT_CLOCK_HZ
    cores = _cores()
    peak = cores * clock * FLOP_PER_CYCLE[isa]
    return Hardware(
        name=name, display_name=f"{info['model']} ({cores} cores, this machine)", vendor="local",
        kind="cpu", device_class="cpu",
        memory=(MemoryTier(name="DRAM", capacity_bytes=_physical_memory_bytes(), bandwidth_bytes_s=bw,
                           source=bw_source + "; capacity: physical memory from sysconf"),),
        compute_flops={"fp32": peak, "bf16": peak, "fp16": peak},
        compute_source=(f"assumed: {cores} cores x {clock / 1e9:.2f} GHz x {FLOP_PER_CYCLE[isa]:g} FP32 "
                        f"FLOP/cycle ({isa}); 16-bit formats computed at the FP32 rate"),
        achievable=Achievable(bandwidth_fraction=1.0, compute_fraction=0.6,
                              evidence="bandwidth already measured (fraction 1); compute fraction assumed"),
        latency=LatencyFloor(per_layer_s=0.0, per_step_s=0.0, evidence="none assumed for a CPU"),
        notes="built by membound.bench.local_cpu_hardware() on the machine it describes",
    )
