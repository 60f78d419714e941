"""Dask that scales (issue 33 item 4): the same query on one local process and on a LocalCluster
of two worker processes, in the same run; then a billion configurations reduced to a Pareto front.

Run:  python benchmarks/bench_dask.py [--batches 100] [--runs 3] [--pareto] [--pareto-queries fold,arrays,frame]
      [--chunk N] [--local-chunks A,B] [--queries frame,fold,bag,arrays] [--one-process left,settled]
      [--no-worker-profiler] [--quiet-workers]

The query: 2 models x 1 device x `--batches` batches x 500 prompts x 1,000 outputs (--batches 100:
1e8 configurations), keep the points with TTFT <= 2 s and >= 30 tok/s per user, the ten with the
most tok/s in total, and count the rows. One process streams it (`sweep(reduce=fold)`) in chunks of
each of --local-chunks rows (default: the library's streaming chunk, `sweep.DEFAULT_CHUNK`, and a
million); the cluster computes it in partitions of --chunk rows (default: the library's,
`sweep.DASK_PARTITION`), written each of four ways (--queries): "frame", DataFrame operations on
`sweep(engine="dask")` (a filter, `count`, `nlargest`: dask runs about ten tasks a partition),
"fold", the one process's own fold run on each partition where it is evaluated, one task a
partition, and the partitions' results merged 16 at a time in a tree on the workers
(`sweep(engine="dask", reduce=fold, merge=merge)`), "bag", the same folds as a bag merged by dask's
`Bag.fold(merge)` (`sweep(engine="dask", reduce=fold)`: dask adds a task a partition), and
"arrays", the query as reductions on arrays
(`membound.planning.reductions`: Count and Top, `arrays_query`), each chunk reduced on its
columns without a frame, each partition to one accumulator on its worker, merged 16 at a time
there (`sweep(engine="dask", reduce=(Count(), Top(...)))`); for "arrays" the one process runs the
same reductions (`sweep(reduce=...)`), for the others the pandas fold, and each cluster query's
speed-up is over the one process doing its kind of work. The one process runs in a process of its own, twice over: as
the library leaves it, and settled as a dask worker settles itself (`sweep._settle_worker`: glibc
keeps freed heap, numpy stops advising huge pages), which makes the pandas filter of each chunk
cheaper in one process too; the speed-up is over the faster of the two, so the cluster does not
gain from a setting the one process lacks (the speed-up over the process as left is printed too).
--no-worker-profiler turns off distributed's statistical profiler in the workers (it samples each
worker's stack every 10 ms; `distributed.worker.profile.enabled`); --quiet-workers also checks the
event loop, the system and the memory every second rather than every 20, 500 and 100 ms (`QUIET`):
with nothing to run, the workers then spend about an eighth of the CPU and the scheduler a fifth.

Printed beside each other, from interleaved runs (medians):
- wall seconds of each, and the cluster's speed-up over the one process at its fastest (chunk
  size, settled or not) in this run (the figure);
- CPU seconds: the local run's own at that chunk size (its thread's), and the two workers'
  together (getrusage in each worker before and after). Their difference over the local CPU is
  what a partition costs beyond its work on the cluster (scheduling, sending the plan, moving
  results): the partitions' fixed cost. The scheduler runs in this script's process (LocalCluster),
  in a thread beside the main one: its CPU is this process's less the main thread's.
- where the workers' CPU goes: their task threads' (each thread's CPU clock) and the rest of their
  processes' (event loop, comms, monitors); and, beside them, the fold query's own partitions run
  in two plain processes at once (dask's synchronous scheduler in each, half the partitions each,
  no cluster). The plain pair's CPU over the one process's is what running two processes at once
  costs on this machine (shared caches and memory bandwidth, whoever schedules them); the
  workers' CPU over the plain pair's is the cluster's own fixed cost.
- tasks a partition: the tasks the workers ran for the query on a tenth of the grid (dask's task
  stream), over its partitions.
- the wall from dask's task stream: the seconds the workers' tasks computed, over two (the wall
  with the work shared evenly and nothing else), and the workers' idle seconds: before their first
  task, between tasks (the scheduler's round trip, or a task waiting for its inputs: the last
  merges wait for the last partitions), after their last task while the other computed; and the
  answer's time after the last task (`timeline`).
- the CPU seconds in Python's cyclic garbage collector (a `gc.callbacks` hook in each process:
  the workers, the plain pair, the one process), part of each one's CPU above.
  An idle worker spends CPU too (heartbeats, dask's statistical profiler every 10 ms), in
  proportion to wall time, so on a loaded machine that raw difference grows with the load: the
  workers' idle CPU per wall second is measured in the same run (5 s doing nothing) and the
  fixed cost is also given less that rate x the cluster's wall time.
On a machine shared with other work, wall times move with the load average (printed). Linux
shares the CPUs between sessions before processes (sched_autogroup, on where
/proc/sys/kernel/sched_autogroup_enabled is 1): the workers run in this script's session, so while
other sessions keep the cores busy the two workers get no more CPU than the one process did, and
the wall ratio falls towards 1 (the bare numpy pass in two processes at once vs one, same rows:
0.94-1.02x at load 5 on this project's 2 cores). The CPU figures do not depend on it: with a core
for each worker the wall ratio would be about 2 x the one process's CPU / the workers' (printed).

--pareto: 2 models x 5 devices x 100 batches x 1,000 prompts x 1,000 outputs = 1e9 configurations
on the cluster reduced to the front of (tok/s per user, tok/s in total) among the points that fit:
"fold" (default), each partition folded to its front in chunks by one task on its worker and the
fronts merged 16 at a time on the workers (`sweep(engine="dask", reduce=front_fold, merge=merge_fronts)`);
"arrays", the front as a reduction on arrays (`reductions.Front`, merged 16 at a time);
"frame", each DataFrame partition reduced to its front on its worker and the fronts combined 16 at
a time in a tree on the workers (`DataFrame.reduction`). Time, the workers' CPU, the load before
and after, the front's size. --runs 0 --pareto runs only this.
"""
import argparse
import functools
import logging
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

MODELS = ["llama-3.1-8b", "qwen3-30b-a3b"]


def grid(batches: int) -> dict:
    return dict(model=MODELS, hardware="h100-sxm", batch=list(range(1, batches + 1)),
                prompt_tokens=list(range(0, 32000, 64)), output_tokens=list(range(1, 1001)))


GRID_1E9 = dict(model=MODELS, hardware=["h100-sxm", "h200", "b200", "mi300x", "a100-80gb"],
                batch=list(range(1, 101)), prompt_tokens=list(range(0, 32000, 32)), output_tokens=list(range(1, 1001)))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _thread_cpu() -> float:
    """This thread's CPU seconds: the local run's own, without any other thread of its process."""
    return time.thread_time()


def _task_threads_cpu() -> float:
    """CPU seconds of this process's dask task threads (distributed names them
    "...Dask-Default-Threads..."): the work a worker runs, apart from its event loop and comms."""
    import threading
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threading.enumerate()
               if "Dask-Default-Threads" in t.name and t.ident is not None)


def _gc_clock() -> list:
    """This process's [CPU s in the cyclic garbage collector, collections], counted from the first
    call on (a `gc.callbacks` hook timing each collection on the collecting thread's CPU clock). Kept
    on the gc module: a function of this script reaches a worker by value, its globals afresh."""
    import gc
    clock = getattr(gc, "_bench_dask_clock", None)
    if clock is None:
        clock = gc._bench_dask_clock = [0.0, 0]
        start = [0.0]

        def hook(phase, info):
            if phase == "start":
                start[0] = time.thread_time()
            else:
                clock[0] += time.thread_time() - start[0]
                clock[1] += 1
        gc.callbacks.append(hook)
    return clock


def _worker_cpu(dask_worker) -> tuple[float, float, float, float]:
    """(the whole process's CPU s, its task threads', the bytes it has sent to other workers, its
    CPU s in the garbage collector)."""
    return _cpu(), _task_threads_cpu(), float(dask_worker.transfer_outgoing_bytes_total), _gc_clock()[0]


def _keep(chunk):
    return chunk[(chunk.ttft_s <= 2.0) & (chunk.decode_tok_s_per_user >= 30.0)]


def fold(acc, chunk):
    """The query as a fold over chunks: (rows, the ten best that keep the targets)."""
    import pandas as pd
    n, best = acc or (0, None)
    top = _keep(chunk).nlargest(10, "decode_tok_s_total")
    both = top if best is None else pd.concat([best, top])
    return n + len(chunk), both.nlargest(10, "decode_tok_s_total")


def merge(a, b):
    """Two folds' accumulators as one (None: a partition that gave the fold no rows)."""
    import pandas as pd
    if a is None or b is None:
        return a if b is None else b
    return a[0] + b[0], pd.concat([a[1], b[1]]).nlargest(10, "decode_tok_s_total")


KEEP = [("ttft_s", "<=", 2.0), ("decode_tok_s_per_user", ">=", 30.0)]


def arrays_query():
    """The query as reductions on arrays (`membound.planning.reductions`): (rows, the ten best that
    keep the targets), with `fold`'s answer, reduced on each chunk's columns without a frame."""
    from membound.planning.reductions import Count, Top
    return (Count(), Top(10, "decode_tok_s_total", where=KEEP))


def _kind(query: str) -> str:
    """What the one process runs for a cluster query: `fold` on frames, or the arrays query."""
    return "arrays" if query == "arrays" else "pandas"


def local_run(g: dict, chunk: int, kind: str = "pandas") -> tuple[float, float, int]:
    """One process: the streamed sweep in chunks of `chunk` rows, reduced to (rows, ten best):
    folded on each chunk's frame (kind "pandas", `fold`) or reduced on its arrays ("arrays")."""
    import membound as mb

    t, c, gc0 = time.perf_counter(), _thread_cpu(), _gc_clock()[0]
    n, _ = mb.sweep(**g, include_unfit=True, chunk_size=chunk, reduce=fold if kind == "pandas" else arrays_query())
    return time.perf_counter() - t, _thread_cpu() - c, n, _gc_clock()[0] - gc0


def _start_one_process(settled: bool) -> None:
    """The one process's start: settled like a dask worker (`sweep._settle_worker`) when asked,
    then warmed (imports and data files) on a small grid."""
    if settled:
        from membound.planning.sweep import _settle_worker
        _settle_worker()
    _gc_clock()
    local_run(grid(2), 1_000_000)


def one_process(settled: bool) -> ProcessPoolExecutor:
    """A process of its own for the one-process runs (spawned, started and warmed), so that the
    one process is measured as the library leaves it and, apart, settled as a worker is."""
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_one_process, initargs=(settled,))
    pool.submit(int).result()
    return pool


def partition_keys(graph) -> list:
    """The keys of a reduction's or a merged fold's partition tasks (`(name, 0, k)`: the tree's first
    level, `sweep._tree`), in order."""
    return sorted(k for k in graph if isinstance(k, tuple) and k[1] == 0)


def plain_run(g: dict, chunk: int | None, which: int, of: int, kind: str = "pandas") -> tuple[float, float, int, int]:
    """Partitions which, which + of, ... of the cluster's fold query (`sweep(engine="dask",
    reduce=fold)`; kind "arrays": of the arrays query's, `arrays_query`), computed in this process
    by dask's synchronous scheduler: the cluster's tasks without a cluster (no scheduler, event loop
    or comms). (wall s, this thread's CPU s, rows, pid)."""
    import dask

    import membound as mb
    kw = {} if chunk is None else {"chunk_size": chunk}
    gc0 = _gc_clock()[0]
    if kind == "pandas":
        parts = mb.sweep(**g, include_unfit=True, engine="dask", reduce=fold, **kw).to_delayed()[which::of]
        t, c = time.perf_counter(), _thread_cpu()
        with dask.config.set(scheduler="synchronous"):
            accs = dask.compute(*parts)
        acc = functools.reduce(merge, (a for part in accs for a in part), None)
        return time.perf_counter() - t, _thread_cpu() - c, acc[0] if acc else 0, os.getpid(), _gc_clock()[0] - gc0
    from membound.planning.reductions import Several, merge_all
    lazy = mb.sweep(**g, include_unfit=True, engine="dask", reduce=arrays_query(), **kw)
    graph = dict(lazy.__dask_graph__())
    keys = partition_keys(graph)[which::of]
    t, c = time.perf_counter(), _thread_cpu()
    acc = merge_all(Several(arrays_query()), dask.get(graph, keys))
    return time.perf_counter() - t, _thread_cpu() - c, acc[0] if acc else 0, os.getpid(), _gc_clock()[0] - gc0


def two_processes() -> ProcessPoolExecutor:
    """Two processes of their own (spawned, settled as a worker is, warmed) for `plain_pair`."""
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_one_process, initargs=(True,))
    for f in [pool.submit(time.sleep, 0.5) for _ in range(2)]:
        f.result()
    return pool


def plain_pair(pool: ProcessPoolExecutor, g: dict, chunk: int | None, kind: str = "pandas") -> tuple[float, float, int]:
    """The cluster's fold partitions split between the two processes of `pool`, run at once with
    no cluster (`plain_run`): what two processes cost on this machine doing the cluster's tasks.
    (wall s, the two processes' CPU s together, rows, their CPU s in the garbage collector)."""
    t = time.perf_counter()
    rs = [f.result() for f in [pool.submit(plain_run, g, chunk, i, 2, kind) for i in range(2)]]
    assert rs[0][3] != rs[1][3], "each half of the partitions in a process of its own"
    return time.perf_counter() - t, rs[0][1] + rs[1][1], rs[0][2] + rs[1][2], rs[0][4] + rs[1][4]


def _scheduler_cpu() -> float:
    """This process's CPU less its main thread's: LocalCluster's scheduler and the client's
    event loop run in a thread of it (the main thread only builds the query and waits)."""
    return _cpu() - time.thread_time()


def cluster_run(client, g: dict, chunk: int | None, query: str) -> tuple:
    """The cluster (partitions of `chunk` rows; None: the library's default), the same filter,
    count and ten best, written four ways. "frame": on the lazy DataFrame (`_keep`, `count`,
    `nlargest`), as a pandas user writes it. "fold": the one process's fold (`fold`) run on each
    partition where it is evaluated, the partitions' accumulators merged 16 at a time in a tree on
    the workers (`sweep(engine="dask", reduce=fold, merge=merge)`: a lazy dask.delayed). "bag": the
    same folds as a bag of one accumulator per partition (`sweep(engine="dask", reduce=fold)`),
    merged by dask (`Bag.fold(merge)`).
    "arrays": the query as reductions on arrays (`arrays_query`), each partition reduced on its
    worker, the accumulators merged in a tree there (`sweep(engine="dask", reduce=...)`).
    (wall s, the workers' CPU s, rows, partitions, the scheduler's CPU s, the workers' task threads' CPU s,
    bytes moved between the workers, the workers' CPU s in the garbage collector, `timeline`)."""
    import dask
    import distributed

    import membound as mb
    before, sched = np.sum(list(client.run(_worker_cpu).values()), axis=0), _scheduler_cpu()
    stream = distributed.get_task_stream(client)
    stream.__enter__()
    t, t_clock = time.perf_counter(), time.time()
    kw = {} if chunk is None else {"chunk_size": chunk}
    if query == "fold":
        lazy = mb.sweep(**g, include_unfit=True, engine="dask", reduce=fold, merge=merge, **kw)
        n, _ = lazy.compute()
        parts = len(partition_keys(lazy.__dask_graph__()))
    elif query == "bag":
        lazy = mb.sweep(**g, include_unfit=True, engine="dask", reduce=fold, **kw)
        n, _ = lazy.fold(merge).compute()
        parts = lazy.npartitions
    elif query == "arrays":
        lazy = mb.sweep(**g, include_unfit=True, engine="dask", reduce=arrays_query(), **kw)
        n, _ = lazy.compute()
        parts = len(partition_keys(lazy.__dask_graph__()))
    else:
        lazy = mb.sweep(**g, include_unfit=True, engine="dask", **kw)
        n, _ = dask.compute(lazy["batch"].count(), _keep(lazy).nlargest(10, "decode_tok_s_total"))
        parts = lazy.npartitions
    dt, end_clock = time.perf_counter() - t, time.time()
    stream.__exit__(None, None, None)
    work, tasks, moved, gc = np.sum(list(client.run(_worker_cpu).values()), axis=0) - before
    return (dt, float(work), int(n), parts, _scheduler_cpu() - sched, float(tasks), float(moved), float(gc),
            timeline(stream.data, t_clock, end_clock))


def timeline(records: list, start: float, end: float) -> tuple[float, float, float, float, float]:
    """Where a cluster query's wall time goes, from dask's task stream (each task's compute start
    and stop on its worker, on this machine's clock): (the workers' compute seconds together, and
    their idle seconds together up to the last compute's stop: before their first compute, between
    their computes (waiting for the scheduler, or for a task's inputs: a merge waits for the other
    worker's last partitions), after their last while the other still computed; then the answer's
    seconds after the last compute's stop). The first four add up to twice the wall less the last."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        spans.setdefault(r["worker"], []).extend((x["start"], x["stop"]) for x in r["startstops"]
                                                  if x["action"] == "compute")
    if not spans:
        return 0.0, 0.0, 0.0, 0.0, end - start
    busy = {w: sum(b - a for a, b in v) for w, v in spans.items()}
    first = {w: min(a for a, _ in v) for w, v in spans.items()}
    last = {w: max(b for _, b in v) for w, v in spans.items()}
    stop = max(last.values())
    return (sum(busy.values()), sum(first[w] - start for w in spans), sum(last[w] - first[w] - busy[w] for w in spans),
            sum(stop - last[w] for w in spans), end - stop)


PARETO_COLUMNS = ["model", "hardware", "batch", "prompt_tokens", "output_tokens", "decode_tok_s_per_user",
                  "decode_tok_s_total", "memory_fits"]


def _front(part):
    """The points of a frame that fit, reduced to their front of (tok/s per user, tok/s in total)."""
    from membound.planning.sweep import pareto_front
    part = part[part.memory_fits]
    return part.iloc[pareto_front(part.decode_tok_s_per_user.to_numpy(), part.decode_tok_s_total.to_numpy())]


def merge_fronts(a, b):
    """Two fronts as one (None: no point that fits yet)."""
    import pandas as pd
    if a is None or b is None:
        return a if b is None else b
    return _front(pd.concat([a, b]))


def front_fold(acc, chunk):
    """The front so far and a chunk's own front, as one (a fold for `sweep(reduce=...)`)."""
    return merge_fronts(acc, _front(chunk))


def pareto_run(client, chunk: int | None, query: str) -> dict:
    """GRID_1E9 on the cluster reduced to its front. "fold": each partition folded to its front in
    chunks on its worker, one task a partition, the fronts merged 16 at a time on the workers
    (`sweep(engine="dask", reduce=front_fold, merge=merge_fronts)`); "frame": each partition of the lazy
    DataFrame reduced to its front on its worker, the fronts combined 16 at a time in a tree on the
    workers (`DataFrame.reduction`). The workers' CPU s is measured around it."""
    import membound as mb
    kw = {} if chunk is None else {"chunk_size": chunk}
    before = sum(client.run(_cpu).values())
    t = time.perf_counter()
    if query == "fold":
        lazy = mb.sweep(**GRID_1E9, include_unfit=True, engine="dask", columns=PARETO_COLUMNS, reduce=front_fold,
                        merge=merge_fronts, **kw)
        front = lazy.compute()
        parts = len(partition_keys(lazy.__dask_graph__()))
    elif query == "arrays":
        from membound.planning.reductions import Front
        lazy = mb.sweep(**GRID_1E9, include_unfit=True, engine="dask", columns=PARETO_COLUMNS,
                        reduce=Front(where=[("memory_fits", "==", True)]), **kw)
        front = lazy.compute()
        parts = len(partition_keys(lazy.__dask_graph__()))
    else:
        lazy = mb.sweep(**GRID_1E9, include_unfit=True, engine="dask", columns=PARETO_COLUMNS, **kw)
        front = lazy.reduction(chunk=_front, combine=_front, aggregate=_front, meta=lazy._meta,
                               split_every=16).compute()
        parts = lazy.npartitions
    dt = time.perf_counter() - t
    n = int(np.prod([len(v) if isinstance(v, list) else 1 for v in GRID_1E9.values()]))
    return dict(configurations=n, seconds=dt, partitions=parts, front=front,
                cpu=sum(client.run(_cpu).values()) - before)


def _median(rs: list, i: int) -> float:
    return statistics.median(r[i] for r in rs)


QUIET = {"distributed.worker.profile.enabled": False,          # the statistical profiler: a stack sample every 10 ms
         "distributed.admin.tick.interval": "1s",               # event-loop health check, every 20 ms
         "distributed.admin.system-monitor.interval": "1s",     # CPU/memory/network sample, every 500 ms
         "distributed.worker.memory.monitor-interval": "1s"}    # memory limit check, every 100 ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs of the 1e8 query (0: none)")
    ap.add_argument("--pareto", action="store_true")
    ap.add_argument("--pareto-queries", default="fold",
                    help="the 1e9 front's ways, comma-separated: fold, arrays, frame (see pareto_run)")
    ap.add_argument("--chunk", type=int, default=None,
                    help="rows per cluster partition (default: the library's, sweep.DASK_PARTITION)")
    ap.add_argument("--local-chunks", default=None,
                    help="the one process's chunk sizes, comma-separated (default: sweep.DEFAULT_CHUNK and 1e6)")
    ap.add_argument("--queries", default="frame,fold",
                    help="the cluster's ways of writing the query, comma-separated: frame, fold, bag, arrays "
                         "(see cluster_run)")
    ap.add_argument("--one-process", default="left,settled",
                    help="the one process's starts, comma-separated: left (as the library leaves it), settled")
    ap.add_argument("--no-worker-profiler", action="store_true",
                    help="turn off the workers' statistical profiler (distributed.worker.profile.enabled)")
    ap.add_argument("--quiet-workers", action="store_true",
                    help="the profiler off and dask's periodic checks every second (QUIET; docs/tour.md)")
    args = ap.parse_args()
    import dask
    import distributed

    import membound as mb
    from membound.planning import sweep as sweep_module
    local_chunks = ([int(x) for x in args.local_chunks.split(",")] if args.local_chunks
                    else [sweep_module.DEFAULT_CHUNK, 1_000_000])
    chunk = args.chunk
    g = grid(args.batches)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"numpy {np.__version__}, dask {distributed.__version__}; load average {os.getloadavg()[0]:.1f}")
    src = os.path.dirname(os.path.dirname(mb.__file__))
    t = time.perf_counter()
    settings = dict(QUIET) if args.quiet_workers else {}
    if args.no_worker_profiler:
        settings["distributed.worker.profile.enabled"] = False
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                           silence_logs=logging.ERROR, env={"PYTHONPATH": src})
        client = distributed.Client(cluster)
    print(f"LocalCluster of 2 worker processes x 1 thread started in {time.perf_counter() - t:.1f} s "
          f"(dask settings: {settings or 'defaults'})")
    queries = args.queries.split(",")
    starts = {"left": False, "settled": True}
    ones = {starts[x]: one_process(starts[x]) for x in args.one_process.split(",")} if args.runs else {}
    pair = two_processes() if args.runs and ({"fold", "bag", "arrays"} & set(queries)) else None
    try:
        if args.runs:
            measure(client, ones, pair, g, local_chunks, chunk, args.runs, queries)
        if args.pareto:
            for query in args.pareto_queries.split(","):
                pareto_report(client, chunk, query)
    finally:
        for pool in [*ones.values(), *([pair] if pair else [])]:
            pool.shutdown()
        client.close()
        cluster.close()
    sys.stdout.flush()


def pareto_report(client, chunk: int | None, query: str) -> None:
    """`pareto_run` printed: time, rate, the workers' CPU, the load before and after, the front."""
    load = os.getloadavg()
    r = pareto_run(client, chunk, query)
    after = os.getloadavg()
    how = {"fold": "each partition folded to its front in chunks on its worker, the fronts merged on the workers",
           "arrays": "each partition reduced to its front on its arrays on its worker, merged 16 at a time there",
           "frame": "each partition reduced to its front on its worker, the fronts combined 16 at a time"}[query]
    print(f"1e9 Pareto front, query as {query!r}: {r['configurations']:,} configurations in {r['partitions']} "
          f"partitions on the cluster: {r['seconds']:.0f} s ({r['configurations'] / r['seconds'] / 1e6:.1f} M/s), "
          f"the workers {r['cpu']:.0f} CPU-s ({r['configurations'] / r['cpu'] / 1e6:.1f} M/CPU-s); load average "
          f"(1, 5, 15 min) {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} before, {after[0]:.1f}/{after[1]:.1f}/"
          f"{after[2]:.1f} after; {how}: {len(r['front'])} points on the front")
    print(r["front"].to_string(index=False, max_rows=20))


def idle_rates(client, seconds: float = 5.0) -> tuple[float, float]:
    """CPU seconds per wall second while nothing runs: the two workers together, and the
    scheduler's process (`_scheduler_cpu`)."""
    w, s, t = sum(client.run(_cpu).values()), _scheduler_cpu(), time.perf_counter()
    time.sleep(seconds)
    dt = time.perf_counter() - t
    return (sum(client.run(_cpu).values()) - w) / dt, (_scheduler_cpu() - s) / dt


def task_count(client, g: dict, chunk: int | None, query: str) -> tuple[int, int]:
    """(tasks the workers ran, partitions) for the query on grid g (dask's task stream)."""
    import distributed
    with distributed.get_task_stream(client) as ts:
        r = cluster_run(client, g, chunk, query)
    return len(ts.data), r[3]


def _import_pandas() -> None:
    """pandas imported (in a worker): a reduction's finish makes its table with pandas, and the
    warm-up's finish ran on one worker only, so the other's first finish in the timed runs
    imported it (0.35 s, measured with --queries arrays alone; the fold and bag queries make
    frames in their partitions, so warming them imports it where they ran). The one process and
    the plain pair import it while warming."""
    import pandas  # noqa: F401


def measure(client, ones: dict, pair, g: dict, local_chunks: list[int], chunk: int | None, runs: int,
            queries: list[str]) -> None:
    """The 1e8 query, interleaved: the one process (as the library leaves it, and settled as a
    worker, each at each chunk size; on frames for the "frame", "fold" and "bag" queries, on arrays for
    "arrays"), each folding query's partitions in two plain processes at once (`plain_pair`, where
    `pair` is given) and the cluster (each way of writing the query); medians, the speed-up over
    the one process at its fastest doing the same kind of work, and where the workers' CPU beyond
    the one process's goes."""
    tasks = {}
    for q in queries:       # warm (imports and data files in each worker), and count the tasks
        tasks[q] = task_count(client, grid(10), chunk, q)
    client.run(_import_pandas)
    idle, idle_sched = idle_rates(client)
    kinds = list(dict.fromkeys(_kind(q) for q in queries))
    loc: dict[tuple[str, int, bool], list] = {(k, c, settled): [] for k in kinds for c in local_chunks
                                              for settled in ones}
    clu: dict[str, list] = {q: [] for q in queries}
    plain: dict[str, list] = {_kind(q): [] for q in queries if q != "frame" and pair is not None}
    loads = []
    for _ in range(runs):
        loads.append(os.getloadavg()[0])
        for k, c, settled in loc:
            loc[k, c, settled].append(ones[settled].submit(local_run, g, c, k).result())
        for k in plain:
            plain[k].append(plain_pair(pair, g, chunk, k))
        for q in queries:
            clu[q].append(cluster_run(client, g, chunk, q))
    n = clu[queries[0]][0][2]
    assert all(r[2] == n for rs in [*loc.values(), *clu.values(), *plain.values()] for r in rs), \
        "every way counts every configuration"
    print(f"{n:.0e} configurations, filter + count + 10 best, median of {runs} interleaved runs "
          f"(load average {statistics.median(loads):.1f}; runs {', '.join(f'{x:.1f}' for x in loads)}):")
    for (k, c, settled), rs in loc.items():
        print(f"  one process{' settled' if settled else '        '}, on {k:6}, chunks of {c:>9,} rows: "
              f"{_median(rs, 0):6.1f} s wall, {_median(rs, 1):6.1f} CPU-s  ({', '.join(f'{r[0]:.1f}' for r in rs)} s)")
    print(f"  idle: the workers spend {idle * 1e3:.0f} ms of CPU per wall second (both), the scheduler's process "
          f"{idle_sched * 1e3:.0f} ms, while nothing runs (measured in this run)")
    for k, rs in plain.items():
        lc = min(_median(r, 1) for key, r in loc.items() if key[0] == k)
        print(f"  two plain processes at once, the {'fold' if k == 'pandas' else 'arrays'} query's partitions split "
              f"between them (dask's synchronous scheduler, no cluster): {_median(rs, 0):6.1f} s wall, "
              f"{_median(rs, 1):6.1f} CPU-s together ({', '.join(f'{r[0]:.1f}' for r in rs)} s): "
              f"{_median(rs, 1) / lc - 1:+.0%} CPU over the one process, what running two at once costs on this "
              f"machine (shared caches and memory bandwidth)")
    for q, rs in clu.items():
        report_cluster(q, rs, {key[1:]: r for key, r in loc.items() if key[0] == _kind(q)}, plain.get(_kind(q)),
                       tasks[q], idle, idle_sched, n, chunk)


def report_cluster(q: str, rs: list, loc: dict, plain: list | None, tasks: tuple[int, int], idle: float,
                   idle_sched: float, n: int, chunk: int | None) -> None:
    """One cluster query's medians against the one process doing the same kind of work (`loc`:
    (chunk, settled) -> runs) and, where given, the plain pair doing its partitions."""
    best = min(loc, key=lambda k: _median(loc[k], 0))     # the fastest wall; the work: the least CPU of any
    lw, lc = _median(loc[best], 0), min(_median(r, 1) for r in loc.values())
    unsettled = min((k for k in loc if not k[1]), key=lambda k: _median(loc[k], 0), default=None)
    cw, cc, cs, parts = _median(rs, 0), _median(rs, 1), _median(rs, 4), rs[0][3]
    busy = cc - idle * cw       # the workers' CPU less what they spend idle over that wall time
    ran, small_parts = tasks
    print(f"  2 workers, query as {q!r}, {parts} partitions of <= {-(-n // parts) if chunk is None else chunk:,} "
          f"rows: {cw:6.1f} s wall, {cc:6.1f} CPU-s in the workers, {cs:.2f} CPU-s in the scheduler's process "
          f"({', '.join(f'{r[0]:.1f}' for r in rs)} s); {ran / small_parts:.1f} tasks a partition "
          f"({ran} on {small_parts} partitions of grid(10))")
    print(f"    speed-up: {lw / cw:.2f}x wall over the one process on {_kind(q)} at its fastest here (chunks of "
          f"{best[0]:,}{', settled' if best[1] else ''}; goal >= 1.6x)"
          + (f", {_median(loc[unsettled], 0) / cw:.2f}x over it as left (chunks of {unsettled[0]:,})"
             if unsettled and unsettled != best else "")
          + f"; a core for each worker: 2 x {lc:.1f} / {cc:.1f} CPU-s = {2 * lc / cc:.2f}x")
    print(f"    fixed cost: the workers spend {cc / lc:.2f}x the least CPU of the one process's runs "
          f"({lc:.1f} CPU-s), so a partition costs {(cc - lc) / parts * 1e3:.0f} ms beyond its "
          f"{lc / parts * 1e3:.0f} ms of work = {(cc - lc) / lc:.0%} (goal < 20%); less the workers' idle CPU: "
          f"{(busy - lc) / parts * 1e3:.0f} ms = {(busy - lc) / lc:.0%}; the scheduler's process "
          f"{cs / parts * 1e3:.0f} ms a partition ({(cs - idle_sched * cw) / parts * 1e3:.0f} ms less its idle)")
    ct = _median(rs, 5)
    print(f"    the workers' CPU: {ct:.1f} CPU-s in their task threads, {cc - ct:.1f} in the rest of their "
          f"processes (event loop, comms, monitors; {idle * cw:.1f} of it at the idle rate); "
          f"{_median(rs, 6) / 1e6:,.0f} MB sent from worker to worker"
          + (f"; beyond two plain processes doing the same partitions ({_median(plain, 1):.1f} CPU-s): task "
             f"threads {(ct - _median(plain, 1)) / parts * 1e3:+.0f} ms a partition, all "
             f"{(cc - _median(plain, 1)) / parts * 1e3:+.0f} ms = {(cc - _median(plain, 1)) / lc:+.0%} of the "
             f"work: the cluster's own fixed cost" if plain and q != "frame" else ""))
    tl = [statistics.median(r[8][i] for r in rs) for i in range(5)]
    print(f"    the wall: the workers' tasks computed {tl[0]:.1f} s together ({tl[0] / 2:.1f} s each if shared evenly); "
          f"idle, the two workers together: {tl[1]:.2f} s before their first task, {tl[2]:.2f} s between tasks "
          f"(waiting for the scheduler or for a task's inputs: the last merges wait for the last partitions), "
          f"{tl[3]:.2f} s after their last task while the other computed; the answer {tl[4]:.2f} s after the last "
          f"task (dask's task stream, medians)")
    least = min(loc, key=lambda k: _median(loc[k], 1))
    print(f"    in the garbage collector (CPU clock of the collecting thread): the workers {_median(rs, 7):.2f} CPU-s "
          f"({_median(rs, 7) / parts * 1e3:.0f} ms a partition)"
          + (f", the two plain processes {_median(plain, 3):.2f}" if plain and q != "frame" else "")
          + f", the one process {_median(loc[least], 3):.2f} (its run of least CPU)")


if __name__ == "__main__":
    main()
