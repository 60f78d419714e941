"""Speed of membound: one estimate() call, the vectorised core, and sweep() end to end.

Run: python benchmarks/bench_sweep.py [--quick]
Targets (issue 6): >= 5 million configuration-evaluations per second in a sweep on a 2-core
machine; one estimate() call < 50 microseconds median (profiles and models parsed once, cached).
Each figure is printed beside its baseline from the same run (`_timing`): per-call times over a
pure-Python loop of as many calls, rates over the bare 128-op numpy pass on as many points.
"""
import os
import platform
import sys

import numpy as np

import membound as mb

from _timing import bare_numpy, median_call_us, median_s, python_calls, python_reference_us

QUICK = "--quick" in sys.argv


def rate(fn, points, repeats):
    return points / median_s(fn, repeats)


def main():
    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
          f"load average {os.getloadavg()[0]:.1f} (other work on the machine slows every figure)")
    calls = 2000 if QUICK else 20000
    m, hw = mb.load_model("llama-3.1-8b"), mb.load_hardware("h100-sxm")
    kw = dict(batch=1, prompt_tokens=2048, output_tokens=256)
    def by_name():
        return mb.estimate('llama-3.1-8b', 'h100-sxm', **kw)
    t_names = median_call_us(by_name, calls)
    n_calls = python_calls(by_name)
    ref = python_reference_us(n_calls)
    print(f"estimate(), names   : {t_names:7.1f} us median ({calls} calls) = {t_names / ref:.1f}x a pure-Python loop "
          f"of its {n_calls} calls ({ref:.1f} us)")
    print(f"estimate(), objects : {median_call_us(lambda: mb.estimate(m, hw, **kw), calls):7.1f} us median")
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    t_big = median_call_us(lambda: mb.estimate('llama-3.1-70b', 'h100-sxm', n_chips=8, batch=16, prompt_tokens=2048,
                                            output_tokens=512, weight_dtype='int4', kv_dtype='fp8', speculative=spec,
                                            runtime='vllm'), calls)
    print(f"estimate(), 70B tp=8 int4/fp8 + draft: {t_big:7.1f} us median")

    # the core on one block of the grid: batch x prompt x output broadcast, every figure computed
    prepare = sys.modules["membound.physics.estimate"].prepare
    p = prepare(m, hw)
    B = np.arange(1, 65, dtype=float)[:, None, None]
    S = np.linspace(0, 8192, 64).round()[None, :, None]
    T = np.linspace(1, 2048, 64).round()[None, None, :]
    n = B.size * S.size * T.size
    r_core = rate(lambda: p.evaluate(batch=B, prompt=S, output=T), n, 5 if QUICK else 20)
    r_bare = n / bare_numpy(n)[0]
    print(f"core.evaluate, {n:,}-point block : {r_core / 1e6:6.2f} M evaluations/s (median) = {r_core / r_bare:.3f}x "
          f"the bare 128-op numpy pass ({r_bare / 1e6:.1f} M/s)")

    grid = dict(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], batch=list(range(1, 129)),
                prompt_tokens=list(range(0, 8192, 128)), output_tokens=list(range(16, 2064, 32)))
    npts = 2 * 128 * 64 * 64
    reps = 1 if QUICK else 5
    r_df = rate(lambda: mb.sweep(**grid, include_unfit=True), npts, reps)
    r_bare = npts / bare_numpy(npts)[0]
    print(f"sweep() -> DataFrame, {npts:,} points: {r_df / 1e6:6.2f} M points/s (median) = {r_df / r_bare:.3f}x bare numpy "
          f"({r_bare / 1e6:.1f} M/s)")
    r_stream = rate(lambda: mb.sweep(**grid, include_unfit=True, reduce=lambda a, c: max(a or 0, c['decode_tok_s_total'].max())),
                    npts, reps)
    print(f"iter_sweep() streamed reduce     : {r_stream / 1e6:6.2f} M points/s (median) = {r_stream / r_bare:.3f}x bare "
          f"numpy")


if __name__ == "__main__":
    main()
