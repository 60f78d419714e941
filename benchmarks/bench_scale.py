"""Speed of membound at scale (issue 17): one estimate(), streamed and DataFrame sweeps of 1e7
configurations, a many-group grid, and a sweep of 1e8 on a Dask LocalCluster.

Run:  python benchmarks/bench_scale.py [--runs 5] [--only estimate,stream,frame,groups,dask]
Each sweep figure is the median of --runs runs, each in a fresh process (so its peak RSS is its
own). The load average is printed with each figure: other work on the machine slows all of them.

Targets: estimate() on the README example <= 20 us median; streamed sweep of 1e7 >= 15 M
configurations/s with peak RSS <= 400 MB; DataFrame sweep of 1e7 >= 5 M/s with peak memory
<= 1.5x the table; the 212k-configuration grid of 2 models x 5 devices x 4 dtypes >= 5 M/s;
Dask LocalCluster (2 worker processes) over 1e8: time and configurations/s.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

# 1e7 configurations: 100 batches x 250 prompts x 400 outputs (llama-3.1-8b on one H100)
GRID_1E7 = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=list(range(1, 101)),
                prompt_tokens=list(range(0, 25000, 100)), output_tokens=list(range(16, 16016, 40)))
# 212,000 configurations in 40 groups of 5,300 points (53 batches x 10 prompts x 10 outputs)
GRID_GROUPS = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"],
                   hardware=["h100-sxm", "h200", "b200", "mi300x", "a100-80gb"],
                   weight_dtype=["bf16", "fp8", "int8", "int4"], batch=list(range(1, 54)),
                   prompt_tokens=list(range(0, 10000, 1000)), output_tokens=list(range(64, 2624, 256)))
# 1e8 configurations: 2 models x 100 batches x 500 prompts x 1,000 outputs
GRID_1E8 = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 101)),
                prompt_tokens=list(range(0, 32000, 64)), output_tokens=list(range(1, 1001)))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def case_stream() -> dict:
    import membound as mb
    mb.sweep(**{**GRID_1E7, "batch": [1, 2]}, include_unfit=True, reduce=lambda a, c: 0)   # warm caches
    base = _rss_mb()
    t, c = time.perf_counter(), time.process_time()
    rows, best = mb.sweep(**GRID_1E7, include_unfit=True,
                          reduce=lambda acc, c: ((acc or (0, 0.0))[0] + len(c),
                                                 max((acc or (0, 0.0))[1], float(c["decode_tok_s_total"].max()))))
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    return dict(configurations=rows, seconds=dt, rate=rows / dt, cpu_rate=rows / cpu, peak_rss_mb=_peak_mb(), base_rss_mb=base,
                best_tok_s_total=best)


def case_frame() -> dict:
    import membound as mb
    mb.sweep(**{**GRID_1E7, "batch": [1, 2]}, include_unfit=True)        # warm caches
    base = _rss_mb()
    t, c = time.perf_counter(), time.process_time()
    table = mb.sweep(**GRID_1E7, include_unfit=True)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    table_mb = table.memory_usage(deep=True).sum() / 2**20
    peak = _peak_mb()
    return dict(configurations=len(table), seconds=dt, rate=len(table) / dt, cpu_rate=len(table) / cpu, table_mb=table_mb,
                peak_rss_mb=peak, base_rss_mb=base, peak_over_table=(peak - base) / table_mb)


def case_groups() -> dict:
    import membound as mb
    mb.sweep(**{**GRID_GROUPS, "batch": [1]}, on_invalid="skip", include_unfit=True)   # warm caches
    times, cpus = [], []
    for _ in range(5):
        t, c = time.perf_counter(), time.process_time()
        table = mb.sweep(**GRID_GROUPS, on_invalid="skip", include_unfit=True)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    dt = statistics.median(times)
    return dict(configurations=len(table), groups=40 - len(table.attrs["skipped"]), seconds=dt,
                rate=len(table) / dt, cpu_rate=len(table) / statistics.median(cpus))


def estimate_us(calls: int) -> dict:
    import membound as mb
    model = mb.load_model("llama-3.1-70b")

    def readme():
        return mb.estimate(model, "h100-sxm", n_chips=8, batch=16, prompt_tokens=2048, output_tokens=512,
                           weight_dtype="fp8")

    batches = [1 + i % 97 for i in range(calls)]      # a new workload every call: no result is reused

    def per_call(fn, args):
        for a in args[:200]:
            fn(a)
        samples = []
        for a in args:
            t = time.perf_counter_ns()
            fn(a)
            samples.append(time.perf_counter_ns() - t)
        return statistics.median(samples) / 1e3

    same = per_call(lambda _: readme(), batches)
    varying = per_call(lambda b: mb.estimate(model, "h100-sxm", n_chips=8, batch=b, prompt_tokens=2048,
                                             output_tokens=512, weight_dtype="fp8"), batches)
    return dict(readme_us=same, varying_batch_us=varying, calls=calls)


def case_dask(runs: int) -> dict:
    import logging
    import dask
    import distributed
    import membound as mb
    src = os.path.dirname(os.path.dirname(mb.__file__))
    t = time.perf_counter()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.ERROR, env={"PYTHONPATH": src})
    client = distributed.Client(cluster)
    start = time.perf_counter() - t
    times, n = [], 0
    try:
        for _ in range(runs):
            t = time.perf_counter()
            df = mb.sweep(**GRID_1E8, include_unfit=True, engine="dask", chunk_size=1_000_000)
            ok = df[(df.ttft_s <= 2.0) & (df.decode_tok_s_per_user >= 30.0)]
            n, top = dask.compute(df["batch"].count(), ok.nlargest(10, "decode_tok_s_total"))
            times.append(time.perf_counter() - t)
    finally:
        client.close()
        cluster.close()
    dt = statistics.median(times)
    return dict(configurations=int(n), seconds=dt, rate=n / dt, runs=runs, cluster_start_s=start,
                all_seconds=times, best=top.iloc[0][["model", "batch", "prompt_tokens", "output_tokens",
                                                     "decode_tok_s_total"]].to_dict())


def _child(case: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", case], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_runs(case: str, runs: int) -> dict:
    results = []
    for _ in range(runs):
        load = os.getloadavg()[0]
        r = _child(case)
        r["load"] = load
        results.append(r)
    keys = [k for k, v in results[0].items() if isinstance(v, (int, float))]
    return {k: statistics.median(r[k] for r in results) for k in keys} | {"runs": runs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="estimate,stream,frame,groups,dask")
    ap.add_argument("--case")
    args = ap.parse_args()
    if args.case:
        print(json.dumps({"stream": case_stream, "frame": case_frame, "groups": case_groups}[args.case]()))
        return
    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}; load average at start "
          f"{os.getloadavg()[0]:.1f}")
    only = args.only.split(",")
    if "estimate" in only:
        load = os.getloadavg()[0]
        e = estimate_us(20000)
        print(f"estimate(), README example (70B fp8, 8 x H100, batch 16, 2048/512): {e['readme_us']:.1f} us median; "
              f"a new batch every call: {e['varying_batch_us']:.1f} us ({e['calls']} calls each; load {load:.1f})")
    if "stream" in only:
        r = _median_runs("stream", args.runs)
        print(f"streamed sweep, 1e7 (reduce): {r['rate'] / 1e6:.2f} M configurations/s ({r['seconds']:.2f} s), "
              f"{r['cpu_rate'] / 1e6:.2f} M per CPU-second; peak RSS {r['peak_rss_mb']:.0f} MB (after import "
              f"{r['base_rss_mb']:.0f} MB); median of {r['runs']}, "
              f"load {r['load']:.1f}")
    if "frame" in only:
        r = _median_runs("frame", args.runs)
        print(f"DataFrame sweep, 1e7: {r['rate'] / 1e6:.2f} M configurations/s ({r['seconds']:.2f} s; "
              f"{r['cpu_rate'] / 1e6:.2f} M per CPU-second), table "
              f"{r['table_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB (after import {r['base_rss_mb']:.0f} MB): "
              f"growth = {r['peak_over_table']:.2f} x the table; median of {r['runs']}, load {r['load']:.1f}")
    if "groups" in only:
        r = _median_runs("groups", args.runs)
        print(f"many-group grid ({r['configurations']:,.0f} configurations in {r['groups']:.0f} groups): "
              f"{r['rate'] / 1e6:.2f} M configurations/s ({r['seconds'] * 1e3:.0f} ms; {r['cpu_rate'] / 1e6:.2f} M per "
              f"CPU-second); median of {r['runs']} "
              f"processes x 5 runs, load {r['load']:.1f}")
    if "dask" in only:
        load = os.getloadavg()[0]
        r = case_dask(args.runs)
        print(f"Dask LocalCluster (2 worker processes x 1 thread), 1e8 configurations, filter + nlargest: "
              f"{r['seconds']:.1f} s = {r['rate'] / 1e6:.2f} M configurations/s (median of {r['runs']}: "
              f"{', '.join(f'{t:.1f}' for t in r['all_seconds'])} s; cluster start {r['cluster_start_s']:.1f} s; "
              f"load {load:.1f}); best: {r['best']}")


if __name__ == "__main__":
    main()
