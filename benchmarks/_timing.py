"""Timing helpers shared by the benchmarks (run as scripts, so this folder is on sys.path).

Baselines measured in the same run as the figure they stand beside (issue 33: report ratios,
the absolute times move with the machine and its load):
- `bare_numpy`: the bare 128-op numpy pass, 64 multiplies and 64 adds in place on float64
  blocks of `block` points (arrays that stay in the caches): what numpy itself does per point
  with no Python between operations. A sweep's rate over this rate is its figure.
- `python_reference_us`: a pure-Python loop of `calls` function calls, each one multiply-add on
  floats: what the interpreter costs for that many calls. A per-call time over this is its figure.
"""
import resource
import statistics
import time

import numpy as np


def median_s(fn, repeats: int) -> float:
    """Median wall seconds of `repeats` calls of fn(), after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def median_call_us(fn, calls: int) -> float:
    """Median microseconds of one call of fn() over `calls` calls, after one warm-up call."""
    return median_s(fn, calls) * 1e6


def cpu_s() -> float:
    """CPU seconds of this process so far (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call of fn()."""
    t, c = time.perf_counter(), cpu_s()
    fn()
    return time.perf_counter() - t, cpu_s() - c


def bare_numpy(points: int, block: int = 1 << 15) -> tuple[float, float]:
    """(wall, CPU) seconds of the bare 128-op numpy pass over `points` points, in blocks."""
    a, b, x = np.linspace(0.5, 1.5, block), np.linspace(0.9, 1.0, block), np.empty(block)
    blocks = max(1, round(points / block))

    def run():
        for _ in range(blocks):
            np.copyto(x, a)
            for _ in range(64):
                np.multiply(x, b, out=x)
                np.add(x, a, out=x)
    wall, cpu = timed(run)
    scale = points / (blocks * block)
    return wall * scale, cpu * scale


def _step(x: float, y: float) -> float:
    return x * 1.0000001 + y


def python_reference_us(calls: int, repeats: int = 2000) -> float:
    """Median microseconds of a pure-Python loop making `calls` calls of a one-line float function."""
    def loop():
        x = 0.5
        for _ in range(calls):
            x = _step(x, 1e-9)
        return x
    return median_call_us(loop, repeats)


def python_calls(fn) -> int:
    """How many Python-level function calls one fn() makes (a profile hook counts them)."""
    import sys
    n = 0

    def hook(frame, event, arg):
        nonlocal n
        if event == "call":
            n += 1
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n - 1            # fn itself
