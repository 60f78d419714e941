"""Timing helpers shared by the benchmarks (run as scripts, so this folder is on sys.path)."""
import statistics
import time


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
