"""Speed of membound at scale (issue 17): one estimate(), one serve(), streamed and DataFrame sweeps
of 1e7 configurations, a many-group grid, and a sweep of 1e8 on a Dask LocalCluster.

Run:  python benchmarks/bench_scale.py [--runs 5] [--only estimate,serve,serve_open,simulate,stream,frame,groups,served,dask]
      [--against REV[,REV...]]
Each figure is the median of --runs runs, each in a fresh process (so its peak RSS is its own), the
revisions' processes alternated (A B A B ...), with its range over the runs; a speed-up over a
revision is the median of each round's ratio, with their range (`_median_runs`, `_ratio`). The load
average is printed with each figure: other work on the machine slows all of them, so each figure
stands beside its baseline from the same process (`_timing`): a sweep's rate over
the bare 128-op numpy pass on as many points (issue 33: streamed >= 0.3x, many-group >= 0.15x),
in wall and in CPU seconds; a call's time over a pure-Python loop of as many function calls.
--against REV also runs every case on the code of git revision REV (a temporary `git worktree`),
in the same run: the ratio of the two is the change's speed-up. Several revisions, comma-separated,
each run interleaved with this checkout; each of this checkout's figures is given over each.

estimate() is timed on the README example (a count given), with a new batch every call, with a new
configuration every call (issue 33: at most 1.5x a repeated call; `new_configuration_us`: formats,
runtimes and prices of one model, device and layout, which share a plan, and models x devices, which
do not), and with every argument at its default ('llama-3.1-8b' on 'h100-sxm': the
fewest-chips search, whose evaluation of the count it finds is the answer; at 20fca62 the default
was one chip, the same configuration); the README example also in CPU time per call (steadier on a
loaded machine), with the share of it in core.evaluate, the physics itself.
Targets (issue 33, against 20fca62 in the same run: --against 20fca62): estimate() <= 1/3 of its time,
serve() <= 1/6 of its CPU time per call (serve_open: the open loop with its tails, beside the same revisions);
the simulator's KV-bound case (simulate) <= 1 s per 2,000 requests.
Earlier: estimate() on the README example <= 20 us median; streamed sweep of 1e7 >= 15 M
configurations/s with peak RSS <= 400 MB; DataFrame sweep of 1e7 >= 5 M/s with peak memory
<= 1.5x the table; the 212k-configuration grid of 2 models x 5 devices x 4 dtypes >= 5 M/s;
Dask LocalCluster (2 worker processes) over 1e8: time and configurations/s.
A served sweep (issue 33 item 3: `sweep(concurrency=...)` vectorised) of 3 models x 4 devices x 10
client counts (served): its time beside the loop of one `serve_curve` per group in the same process
(what the sweep did before), and beside the previous revisions with --against.
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

from _timing import bare_numpy, python_calls, python_reference_us, timed

# 1e7 configurations: 100 batches x 250 prompts x 400 outputs (llama-3.1-8b on one H100)
GRID_1E7 = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=list(range(1, 101)),
                prompt_tokens=list(range(0, 25000, 100)), output_tokens=list(range(16, 16016, 40)))
# 212,000 configurations in 40 groups of 5,300 points (53 batches x 10 prompts x 10 outputs)
GRID_GROUPS = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"],
                   hardware=["h100-sxm", "h200", "b200", "mi300x", "a100-80gb"],
                   weight_dtype=["bf16", "fp8", "int8", "int4"], batch=list(range(1, 54)),
                   prompt_tokens=list(range(0, 10000, 1000)), output_tokens=list(range(64, 2624, 256)))
# a served sweep of 120 rows: 3 models x 4 devices (8 chips each, fp8, vLLM) x 10 client counts
GRID_SERVED = dict(model=["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"], hardware=["h100-sxm", "h200", "b200", "mi300x"],
                   n_chips=8, weight_dtype="fp8", runtime="vllm", concurrency=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
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
    out = {}

    def fold(acc, c):
        return (acc or (0, 0.0))[0] + len(c), max((acc or (0, 0.0))[1], float(c["decode_tok_s_total"].max()))

    def run():
        out["rows"], out["best"] = mb.sweep(**GRID_1E7, include_unfit=True, reduce=fold)
    bw0, bc0 = bare_numpy(10**7)
    dt, cpu = timed(run)
    bw1, bc1 = bare_numpy(10**7)
    rows = out["rows"]
    return dict(configurations=rows, seconds=dt, rate=rows / dt, cpu_rate=rows / cpu, peak_rss_mb=_peak_mb(), base_rss_mb=base,
                best_tok_s_total=out["best"], ratio=(bw0 + bw1) / 2 / dt, cpu_ratio=(bc0 + bc1) / 2 / cpu,
                bare_rate=2 * rows / (bw0 + bw1))


def case_frame() -> dict:
    import membound as mb
    mb.sweep(**{**GRID_1E7, "batch": [1, 2]}, include_unfit=True)        # warm caches
    base = _rss_mb()
    bw, bc = bare_numpy(10**7)
    t, c = time.perf_counter(), time.process_time()
    table = mb.sweep(**GRID_1E7, include_unfit=True)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    table_mb = table.memory_usage(deep=True).sum() / 2**20
    peak = _peak_mb()
    return dict(configurations=len(table), seconds=dt, rate=len(table) / dt, cpu_rate=len(table) / cpu, table_mb=table_mb,
                peak_rss_mb=peak, base_rss_mb=base, peak_over_table=(peak - base) / table_mb, ratio=bw / dt,
                cpu_ratio=bc / cpu)


def case_groups() -> dict:
    import membound as mb
    mb.sweep(**{**GRID_GROUPS, "batch": [1]}, on_invalid="skip", include_unfit=True)   # warm caches
    out = {}

    def run():
        out["table"] = mb.sweep(**GRID_GROUPS, on_invalid="skip", include_unfit=True)
    times, cpus, ratios, cpu_ratios = [], [], [], []
    for _ in range(9):              # interleaved with the bare pass on as many points
        bw, bc = bare_numpy(212_000)
        dt, cpu = timed(run)
        times.append(dt)
        cpus.append(cpu)
        ratios.append(bw / dt)
        cpu_ratios.append(bc / cpu)
    table = out["table"]
    dt = statistics.median(times)
    return dict(configurations=len(table), groups=40 - len(table.attrs["skipped"]), seconds=dt,
                rate=len(table) / dt, cpu_rate=len(table) / statistics.median(cpus),
                ratio=statistics.median(ratios), cpu_ratio=statistics.median(cpu_ratios))


def case_served() -> dict:
    """sweep(concurrency=...) of GRID_SERVED, interleaved with the loop of one serve_curve per group
    (model x device) on the same configurations: the medians of 9 runs of each, wall and CPU."""
    import membound as mb
    g = GRID_SERVED
    out = {}

    def table():
        out["rows"] = len(mb.sweep(**g))

    def loop():
        for m in g["model"]:
            for h in g["hardware"]:
                mb.serve_curve(m, h, concurrency=g["concurrency"], n_chips=g["n_chips"], weight_dtype=g["weight_dtype"],
                               runtime=g["runtime"])
    table()
    loop()
    runs = [(timed(table), timed(loop)) for _ in range(9)]
    wall, cpu = statistics.median(t[0] for t, _ in runs), statistics.median(t[1] for t, _ in runs)
    loop_wall, loop_cpu = statistics.median(w[0] for _, w in runs), statistics.median(w[1] for _, w in runs)
    return dict(configurations=out["rows"], seconds=wall, cpu_seconds=cpu, loop_seconds=loop_wall,
                loop_cpu_seconds=loop_cpu, ratio=statistics.median(w[0] / t[0] for t, w in runs),
                cpu_ratio=statistics.median(w[1] / t[1] for t, w in runs))


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
    # every argument left at its default: llama-3.1-8b on the fewest H100s that hold it (one; at 20fca62
    # n_chips defaulted to 1), so every revision answers the same configuration
    default = per_call(lambda _: mb.estimate("llama-3.1-8b", "h100-sxm"), batches)
    n_calls = python_calls(readme)
    reference = python_reference_us(n_calls)
    formats = new_configuration_us(model, FORMATS_EACH_CALL)
    chips = new_configuration_us(None, CHIPS_EACH_CALL)
    out = dict(readme_us=same, varying_batch_us=varying, default_us=default, calls=calls, python_calls=n_calls,
               new_format_us=formats[0], new_format_repeated_us=formats[1], new_format_ratio=formats[0] / formats[1],
               new_chip_us=chips[0], new_chip_repeated_us=chips[1], new_chip_ratio=chips[0] / chips[1],
               default_python_calls=python_calls(lambda: mb.estimate("llama-3.1-8b", "h100-sxm")),
               reference_us=reference, ratio=same / reference, readme_cpu_us=cpu_per_call(readme))
    core = _core_evaluate(model)
    if core is not None:    # the one evaluation of the physics inside the README example
        out["core_cpu_us"] = cpu_per_call(core)
    return out


# a new configuration each call (issue 33: at most 1.5x a repeated call): 70B on 8 x H100 in 4 weight x 2 KV
# formats x 4 runtimes x 3 prices (96 configurations of a few structures: numbers apart), and 5 models x 5
# devices on 1 and 8 chips (50 configurations, each a structure of its own)
FORMATS_EACH_CALL = [dict(model=None, hardware="h100-sxm", n_chips=8, weight_dtype=w, kv_dtype=k, runtime=r,
                          price_usd_per_hour=p)
                     for w in ("bf16", "fp8", "int8", "int4") for k in (None, "fp8")
                     for r in (None, "vllm", "sglang", "tensorrt-llm") for p in (1.0, 2.0, 3.5)]
CHIPS_EACH_CALL = [dict(model=m, hardware=h, n_chips=n, weight_dtype="fp8", check_memory=False)
                   for m in ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "mixtral-8x7b", "gemma-3-27b")
                   for h in ("h100-sxm", "h200", "b200", "mi300x", "a100-80gb") for n in (1, 8)]


def new_configuration_us(model, configs: list, passes: int = 10, repeats: int = 60, timed_last: int = 20
                         ) -> tuple[float, float]:
    """(median us per call of estimate() where each call's configuration is not the previous call's,
    median us per call of the same configurations each called many times in a row). Each
    configuration is first called once untimed (its names resolved, its preparation cached); then
    `passes` passes over all of them, a new batch every call, are timed: each configuration is then
    evaluated 2 to passes + 1 times, under the 32 evaluations after which a revision since a4c34ec
    traces a configuration's own plan. Then each configuration `repeats` times in a row, the last
    `timed_last` timed: its own plan where the revision traces one by then (since a4c34ec; from
    speed22's 286bd10 a configuration whose structure's shared plan answers for it is traced alone on
    its 4,096th evaluation, so its shared plan's)."""
    import membound as mb
    kws = [{**kw, "model": kw["model"] or model} for kw in configs]
    for kw in kws:
        mb.estimate(**kw, batch=1)
    samples = []
    for i in range(passes):
        for j, kw in enumerate(kws):
            t = time.perf_counter_ns()
            mb.estimate(**kw, batch=2 + (i * len(kws) + j) % 97)
            samples.append(time.perf_counter_ns() - t)
    new = statistics.median(samples) / 1e3
    samples = []
    for kw in kws:
        for i in range(repeats):
            t = time.perf_counter_ns()
            mb.estimate(**kw, batch=2 + i % 97)
            if i >= repeats - timed_last:
                samples.append(time.perf_counter_ns() - t)
    return new, statistics.median(samples) / 1e3


def cpu_per_call(fn, blocks: int = 40, per_block: int = 250) -> float:
    """Median over blocks of `per_block` calls of fn()'s CPU microseconds per call: other work on a
    loaded machine moves wall time far more than this process's CPU time."""
    fn()
    samples = []
    for _ in range(blocks):
        t = time.process_time()
        for _ in range(per_block):
            fn()
        samples.append((time.process_time() - t) / per_block)
    return statistics.median(samples) * 1e6


def _core_evaluate(model):
    """core.evaluate at the README example's configuration and workload, as estimate() calls it (the
    configuration prepared once), or None on a revision without `Prepared.evaluate(terms=...)` (20fca62
    had no membound.physics)."""
    import importlib
    import inspect
    try:
        est = importlib.import_module("membound.physics.estimate")
    except ImportError:
        return None
    if not hasattr(est, "prepare") or "terms" not in inspect.signature(est.Prepared.evaluate).parameters:
        return None
    p = est.prepare(model, "h100-sxm", n_chips=8, batch=16, prompt_tokens=2048, output_tokens=512,
                    weight_dtype="fp8")
    return lambda: p.evaluate(terms=False)


def serve_us(blocks: int = 15, per_block: int = 10) -> dict:
    """serve() of issue 33's example, 70B fp8 on 8 x H200 with 64 clients (vllm, 1,024 + 1,024
    tokens: the defaults of 20fca62, given here so that any revision serves the same workload):
    the median over blocks of `per_block` calls of their CPU time per call (a loaded machine's
    other work moves wall time, not this process's CPU time), and of their wall time."""
    import membound as mb
    return _per_call(lambda: mb.serve("llama-3.3-70b", "h200", n_chips=8, concurrency=64, weight_dtype="fp8",
                                      runtime="vllm", prompt_tokens=1024, output_tokens=1024), blocks, per_block)


def serve_open_us(blocks: int = 9, per_block: int = 5) -> dict:
    """serve()'s open loop (issue 33): Poisson arrivals at 5 requests/s, 8B on one H100 (vllm,
    1,024 + 256 tokens), whose p50/p90/p99 tails (serving.tails) come with every call; timed as
    `serve_us`."""
    import membound as mb
    return _per_call(lambda: mb.serve("llama-3.1-8b", "h100-sxm", runtime="vllm", arrival_rate=5.0,
                                      prompt_tokens=1024, output_tokens=256), blocks, per_block)


def simulate_s(repeats: int = 3) -> dict:
    """The simulator's KV-bound case (issue 33: <= 1 s per 2,000 requests): 1,024 clients in a
    closed loop on one H100 (8B, the defaults' lengths), 2,000 requests, prompts waiting for KV room
    and preemptions every few steps; the median of `repeats` runs' CPU and wall seconds."""
    import membound as mb
    one = lambda: mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1024, engine="simulate", n_requests=2000)  # noqa: E731
    one()
    runs = [timed(one) for _ in range(repeats)]
    return dict(sim_wall_s=statistics.median(w for w, _ in runs), sim_cpu_s=statistics.median(c for _, c in runs))


def _per_call(one, blocks: int, per_block: int) -> dict:
    """The median over blocks of `per_block` calls of one() of their CPU and wall time per call (us)."""
    for _ in range(5):
        one()
    cpu, wall = [], []
    for _ in range(blocks):
        w, c = timed(lambda: [one() for _ in range(per_block)])
        cpu.append(c / per_block * 1e6)
        wall.append(w / per_block * 1e6)
    return dict(serve_cpu_us=statistics.median(cpu), serve_wall_us=statistics.median(wall),
                calls=blocks * per_block, python_calls=python_calls(one))


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


def _child(case: str, src: str | None) -> dict:
    env = dict(os.environ, PYTHONPATH=src) if src else None
    out = subprocess.run([sys.executable, __file__, "--case", case], capture_output=True, text=True, check=True,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_runs(case: str, runs: int, sources: dict) -> dict:
    """{label: median figures} over `runs` fresh processes per source, the sources alternated (A B A B ...:
    each round runs every source once, so a slow spell of the machine's load falls on all of them).
    Each numeric figure comes with its range over the runs (`k_lo`, `k_hi`) and its runs (`_runs`),
    from which `_vs` takes each round's ratio."""
    results: dict = {label: [] for label in sources}
    for _ in range(runs):
        for label, src in sources.items():
            load = os.getloadavg()[0]
            r = _child(case, src)
            r["load"] = load
            results[label].append(r)
    out = {}
    for label, rs in results.items():
        keys = [k for k, v in rs[0].items() if isinstance(v, (int, float))]
        out[label] = {k: statistics.median(r[k] for r in rs) for k in keys} | {"runs": runs, "_runs": rs}
        for k in keys:          # the spread of the figures over the runs
            out[label] |= {f"{k}_lo": min(r[k] for r in rs), f"{k}_hi": max(r[k] for r in rs)}
    return out


def _spread(r: dict) -> str:
    """' (runs 0.28-0.31x wall, 0.27-0.30x CPU)': the ratios' range over the runs."""
    return f" (runs {r['ratio_lo']:.3f}-{r['ratio_hi']:.3f}x wall, {r['cpu_ratio_lo']:.3f}-{r['cpu_ratio_hi']:.3f}x CPU)"


def _range(r: dict, key: str, fmt: str = ".1f") -> str:
    """'16.4 (15.9-17.2)': figure `key`'s median over the runs and its range, where there were several."""
    if r.get("runs", 1) < 2:
        return format(r[key], fmt)
    return f"{format(r[key], fmt)} ({format(r[key + '_lo'], fmt)}-{format(r[key + '_hi'], fmt)})"


def _worktree(rev: str) -> str:
    """A temporary detached git worktree of rev; its src folder."""
    import tempfile
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    path = tempfile.mkdtemp(prefix="membound-bench-")
    subprocess.run(["git", "worktree", "add", "--detach", path, rev], cwd=root, check=True, capture_output=True)
    return path


def _ratio(b: dict, r: dict, key: str) -> str:
    """'1.23x (rounds 1.10-1.40x)': baseline b's figure `key` (seconds or microseconds) over r's, the
    median over the rounds of each round's ratio (its processes ran one after the other), and their
    range; '' where either lacks the figure."""
    if key not in r or key not in b:
        return ""
    ratios = [x[key] / y[key] for x, y in zip(b["_runs"], r["_runs"])]
    spread = f" (rounds {min(ratios):.2f}-{max(ratios):.2f}x)" if len(ratios) > 1 else ""
    return f"{statistics.median(ratios):.2f}x{spread}"


def _vs(bases: dict, key: str, r: dict, what: str = "") -> str:
    """'; 1.23x the speed of REV (rounds 1.10-1.40x)' for each baseline run (`_ratio`)."""
    out = ""
    for label, b in bases.items():
        ratio = _ratio(b, r, key)
        if ratio:
            x, _, spread = ratio.partition(" ")
            out += f"; {x} the speed of {label}{what}" + (f" {spread}" if spread else "")
    return out


def _print(case: str, label: str, r: dict, bases: dict) -> None:
    vs = _vs(bases, "seconds", r)
    tag = f"[{label}] "
    if case == "estimate":
        vs = "".join(f"{_vs({rev: b}, 'readme_us', r)}; a new batch every call: {_ratio(b, r, 'varying_batch_us')}"
                     + (f"; defaults: {_ratio(b, r, 'default_us')}" if "default_us" in b else "")
                     for rev, b in bases.items())
        print(f"{tag}estimate(), README example (70B fp8, 8 x H100, batch 16, 2048/512): {_range(r, 'readme_us')} us median "
              f"= {r['ratio']:.1f}x a pure-Python loop of its {r['python_calls']:.0f} calls ({r['reference_us']:.1f} us); "
              f"a new batch every call: {_range(r, 'varying_batch_us')} us = {r['varying_batch_us'] / r['readme_us']:.2f}x "
              f"(goal <= 1.5x); estimate('llama-3.1-8b', 'h100-sxm'), all defaults: {_range(r, 'default_us')} us, "
              f"{r['default_python_calls']:.0f} Python calls ({r['calls']:.0f} calls each; median of {r['runs']} "
              f"processes, load {r['load']:.1f}){vs}")
        if "new_format_us" in r:
            print(f"{tag}estimate(), a new configuration each call (goal <= 1.5x a repeated one): 70B on 8 x H100, "
                  f"96 formats x runtimes x prices: {_range(r, 'new_format_us')} us against "
                  f"{_range(r, 'new_format_repeated_us')} us repeated = {_range(r, 'new_format_ratio', '.2f')}x; "
                  f"5 models x 5 devices x 1 or 8 chips (50, a "
                  f"structure each): {_range(r, 'new_chip_us')} us against {_range(r, 'new_chip_repeated_us')} us = "
                  f"{_range(r, 'new_chip_ratio', '.2f')}x{_vs(bases, 'new_format_us', r, ' (formats)')}"
                  f"{_vs(bases, 'new_chip_us', r, ' (models/devices)')}")
        cpu_vs = _vs({rev: b for rev, b in bases.items() if "readme_cpu_us" in b}, "readme_cpu_us", r, " (CPU)")
        core = "" if "core_cpu_us" not in r else (
            f"; core.evaluate cold {r['core_cpu_us']:.1f} us ({r['core_cpu_us'] / r['readme_cpu_us']:.0%} of it: the "
            f"physics interpreted; estimate() runs a configuration's traced plan, physics/plan.py, from its 32nd call "
            f"(its 4,096th where its structure's shared plan answers for it), or its structure's shared plan before)")
        print(f"{tag}estimate(), README example, CPU time: {_range(r, 'readme_cpu_us')} us per call (median of 40 blocks "
              f"of 250 in each process){core}{cpu_vs}")
    elif case == "serve":
        vs = _vs(bases, "serve_cpu_us", r, " (CPU)")
        print(f"{tag}serve(), 70B fp8 on 8 x H200, 64 clients (vllm, 1024/1024): {_range(r, 'serve_cpu_us', '.0f')} us CPU "
              f"per call (median of blocks; wall {r['serve_wall_us']:.0f} us), {r['python_calls']:.0f} Python calls; "
              f"median of {r['runs']} processes, load {r['load']:.1f}{vs}")
    elif case == "serve_open":
        vs = _vs(bases, "serve_cpu_us", r, " (CPU)")
        print(f"{tag}serve(), open loop, 8B on 1 x H100, Poisson 5 requests/s (vllm, 1024/256, with tails): "
              f"{_range(r, 'serve_cpu_us', '.0f')} us CPU per call (median of blocks; wall {r['serve_wall_us']:.0f} us), "
              f"{r['python_calls']:.0f} Python calls; median of {r['runs']} processes, load {r['load']:.1f}{vs}")
    elif case == "simulate":
        vs = _vs(bases, "sim_cpu_s", r, " (CPU)")
        print(f"{tag}simulator, 2,000 requests, 1,024 clients on one H100 (8B, KV-bound, preempting): "
              f"{_range(r, 'sim_cpu_s', '.3f')} s CPU (median of 3 in each of {r['runs']} processes; wall "
              f"{r['sim_wall_s']:.3f} s; target <= 1 s); load {r['load']:.1f}{vs}")
    elif case == "stream":
        print(f"{tag}streamed sweep, 1e7 (reduce): {r['ratio']:.3f}x the bare 128-op numpy pass in wall time, "
              f"{r['cpu_ratio']:.3f}x in CPU time (goal >= 0.3x){_spread(r)}; {r['rate'] / 1e6:.2f} M configurations/s "
              f"({r['seconds']:.2f} s; bare {r['bare_rate'] / 1e6:.1f} M/s), {r['cpu_rate'] / 1e6:.2f} M per CPU-second; "
              f"peak RSS {r['peak_rss_mb']:.0f} MB (after import {r['base_rss_mb']:.0f} MB); median of {r['runs']}, "
              f"load {r['load']:.1f}{vs}")
    elif case == "frame":
        print(f"{tag}DataFrame sweep, 1e7: {r['ratio']:.3f}x bare numpy in wall time, {r['cpu_ratio']:.3f}x in CPU time; "
              f"{r['rate'] / 1e6:.2f} M configurations/s ({r['seconds']:.2f} s; {r['cpu_rate'] / 1e6:.2f} M per "
              f"CPU-second), table {r['table_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB (after import "
              f"{r['base_rss_mb']:.0f} MB): growth = {r['peak_over_table']:.2f} x the table; median of {r['runs']}, "
              f"load {r['load']:.1f}{vs}")
    elif case == "groups":
        print(f"{tag}many-group grid ({r['configurations']:,.0f} configurations in {r['groups']:.0f} groups): "
              f"{r['ratio']:.3f}x bare numpy in wall time, {r['cpu_ratio']:.3f}x in CPU time (goal >= 0.15x)"
              f"{_spread(r)}; "
              f"{r['rate'] / 1e6:.2f} M configurations/s ({r['seconds'] * 1e3:.0f} ms; {r['cpu_rate'] / 1e6:.2f} M per "
              f"CPU-second); median of {r['runs']} processes x 9 runs, load {r['load']:.1f}{vs}")
    elif case == "served":
        vs = "".join(f"; {b['seconds'] / r['seconds']:.2f}x the speed of {rev} (CPU "
                     f"{b['cpu_seconds'] / r['cpu_seconds']:.2f}x)" for rev, b in bases.items())
        print(f"{tag}served sweep, 3 models x 4 devices x 10 client counts ({r['configurations']:.0f} rows): "
              f"{r['seconds'] * 1e3:.1f} ms wall, {r['cpu_seconds'] * 1e3:.1f} ms CPU = {r['ratio']:.2f}x the speed of "
              f"one serve_curve per group in the same process ({r['loop_seconds'] * 1e3:.1f} ms; CPU "
              f"{r['cpu_ratio']:.2f}x){_spread(r)}; median of "
              f"{r['runs']} processes x 9 runs, load {r['load']:.1f}{vs}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="estimate,serve,serve_open,simulate,stream,frame,groups,served,dask")
    ap.add_argument("--against", help="git revisions to run beside this checkout, comma-separated (e.g. HEAD~1,main)")
    ap.add_argument("--case")
    args = ap.parse_args()
    if args.case:
        cases = {"stream": case_stream, "frame": case_frame, "groups": case_groups, "served": case_served,
                 "estimate": lambda: estimate_us(20000), "serve": serve_us,
                 "serve_open": serve_open_us, "simulate": simulate_s}
        print(json.dumps(cases[args.case]()))
        return
    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}; load average at start "
          f"{os.getloadavg()[0]:.1f}")
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    sources = {"this checkout": here}
    revisions = args.against.split(",") if args.against else []
    trees = []
    for rev in revisions:
        trees.append(_worktree(rev))
        sources[rev] = os.path.join(trees[-1], "src")
    try:
        for case in ("estimate", "serve", "serve_open", "simulate", "stream", "frame", "groups", "served"):
            if case in args.only.split(","):
                res = _median_runs(case, args.runs, sources)
                for label, r in res.items():
                    _print(case, label, r, {rev: res[rev] for rev in revisions} if label == "this checkout" else {})
    finally:
        for tree in trees:
            subprocess.run(["git", "worktree", "remove", "--force", tree], check=False, capture_output=True,
                           cwd=here)
    if "dask" in args.only.split(","):
        load = os.getloadavg()[0]
        r = case_dask(args.runs)
        print(f"Dask LocalCluster (2 worker processes x 1 thread), 1e8 configurations, filter + nlargest: "
              f"{r['seconds']:.1f} s = {r['rate'] / 1e6:.2f} M configurations/s (median of {r['runs']}: "
              f"{', '.join(f'{t:.1f}' for t in r['all_seconds'])} s; cluster start {r['cluster_start_s']:.1f} s; "
              f"load {load:.1f}); best: {r['best']}. Against one process in the same run: benchmarks/bench_dask.py")


if __name__ == "__main__":
    main()
