"""Vectorised sweeps: `estimate()` over a grid, one row per point, no Python loop per point.

The grid is the cartesian product of the arguments (each a scalar or a list). Python loops
only over the categorical groups (model, device, runtime, speculative setting, chip count and
layout, dtype triple), each prepared once; inside a group the numeric axes batch x prompt x
output go to `core.evaluate` as broadcast numpy arrays in blocks of at most `BLOCK` points
(large enough that the core's few hundred numpy calls per block cost little per point), and each
block is written straight into preallocated output columns: no concatenation, no per-row Python. The numbers
are `estimate()`'s: the same engine on the same inputs.

    table = mb.sweep(model=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm", "h200"],
                     batch=[1, 8, 64], prompt_tokens=[512, 8192], output_tokens=256,
                     weight_dtype=["bf16", "fp8"])

Columns carry `Result.to_dict()`'s names (the per-tier placement text is left out); labels are
categorical with the same categories in every chunk. Missing figures (cost or energy where the
device has no price or power) are NaN in the table where `estimate()` gives None. Rows come
group by group, and within a group in grid order (batch, then prompt, then output) when a
group's prompts x outputs fit one block (or chunk); beyond that block by block, grid order inside each.
`engine="dask"` returns the same table as a lazy dask DataFrame (see `sweep`).
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import math
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, replace

import numpy as np
from pydantic import BaseModel

from ..base import defaults
from ..base.stacking import stack, structure
from ..physics.core import BOUNDS, ChipBase, Knobs, evaluate
from ..errors import InvalidInputError, MemboundError
from ..physics.efficiency import Efficiency
from ..physics.estimate import MAX_COUNT, Prepared, check_context, check_int, prepare
from ..catalog.hardware import load_hardware, one_name_each
from ..catalog.model import load_model
from ..physics.parallel import as_parallel, streamed_room
from ..physics.quantization import Quantization
from ..physics.capacity import layout_for, min_chips
from ..errors import DoesNotFitError, require
from ..serving.curve import serve_curves
from .reductions import Reduction, as_reduction, merge_all
from .reductions import pareto_front as pareto_front   # its home before reductions.py

DEFAULT_CHUNK = 1 << 18      # rows per streamed chunk (iter_sweep, reduce) and per dask partition. A
                             # smaller default gives the same rows in the same order in more chunks; with
                             # one buffer per stream, 100_000 was slower (0.24x against 0.29x the bare
                             # numpy pass in CPU time, 1e7 streamed, same process, load 11), so kept
DASK_PARTITION = 4_000_000   # rows per dask partition (sweep(engine="dask")) by default. A partition
                             # costs a cluster ~35 ms beyond its work (scheduling, its plan pickled
                             # and sent), which at 1e6 rows was 37-42% of it; at 4e6, 1-36% (runs
                             # differ). Its compute stays in blocks of BLOCK points (_dask_frame).
                             # 1e8 on 2 workers vs one process (benchmarks/bench_dask.py): 1.17x at
                             # 1e6, 1.52x at 2e6, 1.66x at 4e6 rows (load 0.9-1.2, same partitions);
                             # 1.27x at 4e6 against the one process's best chunk (load 1.1)
BLOCK = 1 << 16              # points per core evaluation at most. Its fixed cost (~500 numpy calls,
                             # 0.3-0.5 ms) is then ~5% of a block; its ~100 temporaries (512 kB each)
                             # stay in the allocator's heap between blocks (see _settle_allocator). At
                             # 1 << 18 (2 MB each) glibc trimmed them back to the system every block
                             # on a 500-prompt x 1,000-output grid (when nothing the caller kept sat above
                             # them in the heap): 660k page faults, half the CPU.
                             # Same process, interleaved (load 2.7-4): that grid 2.56 -> 1.10 CPU-s per
                             # 2e7, streamed 1e7 0.69 -> 0.57. bench_scale.py --only stream,groups against
                             # 1 << 18 (load 1.6-1.9): streamed 16.8/17.2 vs 16.2/16.4 M/s, many-group
                             # 7.85/8.07 vs 8.26/8.03 M/s; bench_dask.py equal. Values and row order do
                             # not depend on it (the streamed chunks hold whole blocks, so their sizes do)

_AXES = ("batch", "prompt_tokens", "output_tokens")
_FIGURES = ("decode_tok_s_per_user", "decode_tok_s_total", "ttft_s", "prefill_s", "e2e_s", "tpot_s")
_MEMORY = (("memory_weights_bytes", "weights_bytes_chip"), ("memory_kv_bytes", "kv_bytes_chip"),
           ("memory_activation_bytes", "activation_bytes_chip"), ("memory_other_bytes", "extra_bytes_chip"),
           ("memory_capacity_bytes", "capacity_bytes_chip"))
_SOURCE = dict(_MEMORY)        # table column -> core.evaluate key, where they differ
_SPEC_NUMBERS = ("spec_gamma", "spec_tokens_per_round", "spec_verify_positions")
_KINDS = {"int": np.int64, "float": np.float64, "bool": np.bool_}


def _columns(spec: bool) -> tuple[tuple[str, str], ...]:
    """(name, kind) of every column, in table order; kind: cat (labels), int, float or bool."""
    cols = [("model", "cat"), ("hardware", "cat"), ("runtime", "cat"), ("n_chips", "int"), ("parallel", "cat"),
            *((k, "int") for k in _AXES), ("weight_dtype", "cat"), ("kv_dtype", "cat"), ("activation_dtype", "cat"),
            *((k, "float") for k in _FIGURES), ("bound", "cat"), ("cost_per_million_tokens_usd", "float"),
            ("joules_per_token", "float"), *((k, "float") for k, _ in _MEMORY), ("memory_fits", "bool"),
            *((f"{k}_s", "float") for k in BOUNDS), ("calibration", "cat")]
    if spec:
        cols += [*((k, "float") for k in _SPEC_NUMBERS), ("spec_draft", "cat")]
    return tuple(cols)


def _code_dtype(n_categories: int):
    """The integer type pandas keeps categorical codes in (so handing it codes copies nothing)."""
    return np.int8 if n_categories < 127 else np.int16 if n_categories < 32767 else np.int32


@dataclass(frozen=True)
class _Schema:
    """The table's columns, with the categories of its label columns (the same in every chunk and
    partition, so chunks stack and dask knows them up front)."""

    columns: tuple[tuple[str, str], ...]
    categories: dict[str, tuple[str, ...]]
    include_unfit: bool

    def dtype(self, name: str, kind: str):
        return _code_dtype(len(self.categories[name])) if kind == "cat" else _KINDS[kind]

    @functools.cached_property
    def pandas_dtypes(self) -> dict:
        """{label column: its pandas CategoricalDtype}, built once: checking the categories is most
        of what building a chunk's DataFrame cost."""
        return {name: _categorical(self.categories[name]) for name, kind in self.columns if kind == "cat"}

    def select(self, columns) -> _Schema:
        """The schema of these columns only (in table order); None keeps all."""
        if columns is None:
            return self
        names = [c for c, _ in self.columns]
        wanted = [columns] if isinstance(columns, str) else list(columns)
        for c in wanted:
            if c not in names:
                raise InvalidInputError("columns", c, f"names of the sweep's columns: {', '.join(names)}")
        return replace(self, columns=tuple(c for c in self.columns if c[0] in wanted))


@functools.lru_cache(maxsize=256)
def _categorical(categories: tuple[str, ...]):
    """The pandas CategoricalDtype of these categories, built once per process (an immutable value:
    a sweep's schema is new each call, and building its ~10 dtypes was 3 ms, 4% of the many-group
    sweep's 212,000 rows)."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    return pd.CategoricalDtype(list(categories))


@dataclass(frozen=True)
class _Group:
    """One categorical combination, prepared once (`estimate.prepare`), with the values its rows
    share: label codes, chip count, speculative numbers."""

    prepared: Prepared
    consts: dict[str, float]
    joules: float | None      # watts * chips, or None


@dataclass(frozen=True)
class _Bundle:
    """Consecutive groups of one model, device, runtime, layout and speculative set-up that differ
    only in their formats' numbers (a weight dtype list): `core.evaluate` takes them in one call,
    those numbers as arrays along a leading axis of one entry per group (`base.stacking.stack`),
    and each group's grid along the next three. Its rows are the groups' rows in order, each in
    grid order, as separate calls give them, bit for bit: the same elementwise arithmetic on the
    same numbers. Used where a group's grid is one block (many small groups: the calls' fixed
    cost, not their points, is then the sweep's time)."""

    groups: tuple[_Group, ...]
    eff: Efficiency                           # their differing numbers as (G, 1, 1, 1) arrays
    knobs: Knobs
    base: ChipBase
    consts: dict[str, float | np.ndarray]     # per-group values as (G, 1, 1, 1) arrays where they differ
    joules: float | np.ndarray | None

    def evaluate(self, B: np.ndarray, S: np.ndarray, T: np.ndarray) -> dict:
        """`core.evaluate` of every group on the grid B x S x T (1-d float arrays)."""
        p = self.groups[0].prepared
        kn = replace(self.knobs, batch=B[None, :, None, None], prompt=S[None, None, :, None],
                     output=T[None, None, None, :])
        return evaluate(p.consts, p.hardware, self.eff, kn, base=self.base, terms=False, **p.extra)


def _key(g: _Group):
    """What the groups of one bundle share: the model and device (the same objects), the
    speculative set-up, whether priced and powered, and the structure of the efficiencies, knobs
    and chip (`base.stacking.structure`: all but their numbers). Groups with equal keys can share
    an evaluation (`_Bundle`). Walked once per configuration (`_of_configurations`)."""
    p = g.prepared
    return _of_configurations(_KEYS, (p.chip_base,), lambda: (
        id(p.consts), id(p.hardware), p.price is None, g.joules is None,
        tuple((k, repr(v) if type(v) in (float, int, bool) or v is None else id(v)) for k, v in p.extra.items()),
        structure((p.eff, p.knobs, p.chip_base))))


_KEYS: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}      # `_key` by configuration
_STACKS: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}    # `_bundle`'s stacks by configurations
_KEPT = 1024    # entries of each at most (then emptied)


def _of_configurations(cache: dict, chips: tuple[ChipBase, ...], make: Callable[[], Any]) -> Any:
    """make() of the configurations whose chips are `chips`, made once and kept in `cache` (holding
    the chips, so that their ids name them while the entry lives). A configuration's ChipBase is
    its own (`Prepared.__post_init__` builds it from the model, device, efficiencies and knobs;
    `Prepared.at`, which `prepare` answers with, keeps it, changing only the workload, which no
    key or stack here reads: `_Bundle.evaluate` replaces it): each sweep prepares its groups
    afresh, but from the same cached configurations, whose structures (`_key`, 100 us each) and
    stacks (`_bundle`, 400 us a bundle) were 11% of the many-group sweep."""
    ids = tuple(map(id, chips))
    hit = cache.get(ids)
    if hit is not None and all(a is b for a, b in zip(hit[0], chips)):
        return hit[1]
    value = make()
    if len(cache) >= _KEPT:
        cache.clear()
    cache[ids] = (chips, value)
    return value


def _grouped(values: list) -> np.ndarray:
    """A number that differs among a bundle's groups: one entry per group, along the leading axis."""
    return np.array(values)[:, None, None, None]


def _bundle(groups: tuple[_Group, ...]) -> _Bundle:
    """Groups of one `_key` as one `_Bundle`."""
    g0 = groups[0]
    consts = {name: (_grouped([g.consts[name] for g in groups])
                     if any(g.consts[name] != g0.consts[name] for g in groups) else g0.consts[name])
              for name in g0.consts}
    joules = None if g0.joules is None else _grouped([g.joules for g in groups])
    eff, knobs, base = _of_configurations(_STACKS, tuple(g.prepared.chip_base for g in groups), lambda: stack(
        [(g.prepared.eff, g.prepared.knobs, g.prepared.chip_base) for g in groups], _grouped))
    return _Bundle(groups, eff, knobs, base, consts, joules)


def _runs(groups: tuple[_Group, ...]) -> tuple[tuple[_Group, ...], ...]:
    """The groups in runs of neighbours with one `_key` (`_prepared` gives a group's formats
    innermost, so a list of weight dtypes makes runs)."""
    runs: list[list[_Group]] = []
    last = None
    for g in groups:
        key = _key(g)
        if runs and key == last:
            runs[-1].append(g)
        else:
            runs.append([g])
        last = key
    return tuple(map(tuple, runs))


@dataclass(frozen=True)
class _Plan:
    """A validated sweep: the schema, the groups and the numeric axes (float arrays)."""

    schema: _Schema
    groups: tuple[_Group, ...]
    axes: tuple[np.ndarray, np.ndarray, np.ndarray]
    skipped: tuple[tuple[str, str], ...]

    @functools.cached_property
    def runs(self) -> tuple[tuple[_Group, ...], ...]:
        """The groups in runs that may share one evaluation (`_runs`)."""
        return _runs(self.groups)

    @property
    def shape(self) -> tuple[int, int, int]:
        b, s, t = self.axes
        return b.size, s.size, t.size

    @property
    def points(self) -> int:
        return len(self.groups) * math.prod(self.shape)


class Table(dict):
    """A dict of equal-length numpy arrays (the fallback when pandas is missing), with `attrs`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attrs: dict = {}


def _as_list(field: str, value) -> list:
    if isinstance(value, (str, bytes, dict, BaseModel)) or not hasattr(value, "__iter__") \
            or getattr(value, "ndim", 1) == 0:
        return [value]
    values = list(value)
    if not values:
        raise InvalidInputError(field, value, "a value or a non-empty list of values")
    return values


def _int_axis(field: str, value, minimum: int) -> np.ndarray:
    """A sorted-as-given float array of validated integers (each >= minimum)."""
    values = _as_list(field, value)
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and arr.ndim == 1:   # the ceiling too: 2**63 became a negative label
        bad = np.flatnonzero((arr < minimum) | (arr > MAX_COUNT))
        if bad.size:
            check_int(field, values[bad[0]], minimum)
    else:
        for v in values:
            check_int(field, v, minimum)
    return np.asarray(arr, dtype=float)


def _prepared(models, hardware, runtimes, speculative, chips, parallels, dtypes, price, first, on_invalid,
              skipped):
    """(Prepared, labels, speculative) for every categorical combination that can run."""
    for m, hw, rt, sp, n, par, (wd, kd, ad) in itertools.product(
            models, hardware, runtimes, speculative, chips, parallels, dtypes):
        n_chips = par.chips if (n is None and par is not None) else (1 if n is None else n)
        p_hw = price.get(hw.name) if isinstance(price, dict) else price
        try:
            p = prepare(m, hw, batch=first[0], prompt_tokens=first[1], output_tokens=first[2],
                        weight_dtype=wd, kv_dtype=kd, activation_dtype=ad, n_chips=n_chips,
                        parallel=par, speculative=sp, runtime=rt, price_usd_per_hour=p_hw,
                        allow_beyond_context=True)     # _plan checked the grid's longest context
        except MemboundError as e:
            if on_invalid == "raise" or not isinstance(e, InvalidInputError):
                raise
            skipped.append((f"{m.name} on {n_chips} x {hw.name}, {wd}/{kd}/{ad}, runtime={rt}", str(e)))
            continue
        labels = {k: v for k, v in p.labels.items() if k != "n_chips"}     # estimate()'s labels
        if sp is not None and sp.draft is not None:     # a self-drafting head has no draft to name:
            labels["spec_draft"] = getattr(sp.draft, "name", sp.draft)     # missing, as estimate's None
        yield p, labels, sp


def _within_context(m, S, T, on_invalid: str, skipped: list) -> bool:
    """The grid's longest prompt + output within the model's window (else raise, or skip it)."""
    try:
        check_context(m, S.max(), T.max())
    except InvalidInputError as e:
        if on_invalid == "raise":
            raise
        skipped.append((m.name, str(e)))
        return False
    return True


def _plan(model, hardware, *, batch, prompt_tokens, output_tokens, weight_dtype, kv_dtype, activation_dtype,
          n_chips, parallel, runtime, speculative, price_usd_per_hour, include_unfit, on_invalid,
          allow_beyond_context=False, columns=None) -> _Plan:
    """Check every argument and prepare every group (errors surface here, before any evaluation)."""
    selected = columns
    if on_invalid not in ("raise", "skip"):
        raise InvalidInputError("on_invalid", on_invalid, "'raise' or 'skip'")
    B = _int_axis("batch", batch, 1)
    S = _int_axis("prompt_tokens", prompt_tokens, 0)
    T = _int_axis("output_tokens", output_tokens, 1)
    models = [load_model(m) for m in _as_list("model", model)]
    skipped: list = []
    if not allow_beyond_context:
        models = [m for m in models if _within_context(m, S, T, on_invalid, skipped)]
    devices = [load_hardware(h) for h in _as_list("hardware", hardware)]
    one_name_each(devices)
    chips = [None if n is None else check_int("n_chips", n, 1) for n in _as_list("n_chips", n_chips)]
    parallels = [as_parallel(par) for par in _as_list("parallel", parallel)]   # "tp=2" as estimate takes
    dtypes = list(itertools.product(_as_list("weight_dtype", weight_dtype), _as_list("kv_dtype", kv_dtype),
                                    _as_list("activation_dtype", activation_dtype)))
    if isinstance(price_usd_per_hour, dict):
        price = {load_hardware(k).name: v for k, v in price_usd_per_hour.items()}
    else:
        price = price_usd_per_hour
    first = (int(B[0]), int(S[0]), int(T[0]))
    found = list(_prepared(models, devices, _as_list("runtime", runtime), _as_list("speculative", speculative),
                           chips, parallels, dtypes, price, first, on_invalid, skipped))
    columns = _columns(any(sp is not None for _, _, sp in found))
    categories = {name: tuple(dict.fromkeys(labels[name] for _, labels, _ in found if name in labels))
                  for name, kind in columns if kind == "cat"}
    categories["bound"] = BOUNDS
    groups = []
    for p, labels, sp in found:
        consts: dict[str, float] = {name: categories[name].index(labels[name]) if name in labels else -1
                                    for name, kind in columns if kind == "cat" and name != "bound"}
        consts["n_chips"] = p.n_chips
        if "spec_draft" in categories:
            spec = (sp.gamma, p.spec_args[1], int(p.positions)) if sp is not None else (math.nan,) * 3
            consts.update(zip(_SPEC_NUMBERS, map(float, spec)))
        watts = p.hardware.power_w
        groups.append(_Group(p, consts, watts * p.n_chips if watts else None))
    schema = _Schema(columns, categories, include_unfit).select(selected)
    return _Plan(schema, tuple(groups), (B, S, T), tuple(skipped))


@functools.cache
def _settle_allocator() -> None:
    """Let the allocator keep the core's temporaries between blocks. With its default thresholds
    glibc serves each of the ~100 block-sized temporaries `core.evaluate` makes per block from
    fresh pages (mmap above 128 KiB, heap memory trimmed back to the OS once 128 KiB are free;
    dask workers lower that to 64 KiB), so 70% of a sweep's time went to page faults. Raising the
    two thresholds (mallopt(3)) once per process keeps up to 32 MiB of freed heap for reuse.
    Elsewhere than glibc there is no mallopt and nothing to do."""
    _mallopt(mmap_below=16 << 20, keep_free=32 << 20)


def _mallopt(mmap_below: int, keep_free: int) -> None:
    """glibc's thresholds (mallopt(3)): blocks below `mmap_below` bytes come from the heap
    (M_MMAP_THRESHOLD), and up to `keep_free` bytes of freed heap stay in the process
    (M_TRIM_THRESHOLD). Nothing without glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(-3, mmap_below)
    mallopt(-1, keep_free)


@functools.cache
def _settle_worker() -> None:
    """Let a process that computes dask partitions reuse the memory of the frames made from them.
    A partition's columns are millions of rows (32 MB per float column at DASK_PARTITION), and
    what dask then does with it (a filter, nlargest, a projection) makes fresh arrays as large,
    each of which numpy advises the kernel to back with huge pages (from 4 MiB) and glibc maps
    anew (above the mmap threshold) or trims back once freed: page faults, huge-page compaction
    and zeroing took 40% of the workers' CPU (system time 3.0 of 7.5 CPU-seconds on a 4e7 query
    in 4e6-row partitions). Here, once per process: arrays up to 32 MiB (glibc's largest mmap
    threshold on 64-bit) come from the heap, up to 1 GiB freed heap is kept for reuse rather than
    returned, and numpy stops advising huge pages (numpy's documented global state,
    https://numpy.org/doc/stable/reference/global_state.html; its env NUMPY_MADVISE_HUGEPAGE=0);
    the workers' system time fell to 0.3 s. Elsewhere than glibc only the numpy setting applies."""
    _settle_allocator()
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    set_hugepage = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if set_hugepage is not None:
        set_hugepage(False)
    _mallopt(mmap_below=32 << 20, keep_free=1 << 30)


def _blocks(shape, size):
    """Slices of a 3-d grid into blocks of at most `size` points, cut along the batch first, then
    the prompt, then the output (each into equal pieces): blocks of whole prompt x output planes
    keep the grid's order, and the physics' many batch x prompt terms (the prefill) stay small."""
    dims, pieces = list(shape), [1, 1, 1]
    for i in range(3):
        while math.prod(dims) > size and dims[i] > 1:
            pieces[i] += 1
            dims[i] = -(-shape[i] // pieces[i])
    bb, bs, bt = dims
    nb, ns, nt = shape
    for i in range(0, nb, bb):
        for j in range(0, ns, bs):
            for k in range(0, nt, bt):
                yield slice(i, i + bb), slice(j, j + bs), slice(k, k + bt)


def _column_views(schema: _Schema, capacity: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One buffer holding every column of `capacity` rows side by side (each 64-byte aligned), and
    the columns as views of it. One allocation this large is mapped with huge pages where the
    kernel allows (numpy advises it from 4 MiB), so first writes fault once per 2 MiB rather than
    once per 4 KiB page: separate column arrays spent about a third of a many-group sweep there."""
    dtypes = [np.dtype(schema.dtype(name, kind)) for name, kind in schema.columns]
    offsets = np.cumsum([0] + [-(-capacity * d.itemsize // 64) * 64 for d in dtypes])
    buffer = np.empty(int(offsets[-1]), np.uint8)
    return buffer, {name: buffer[start:start + capacity * d.itemsize].view(d)
                    for (name, _), d, start in zip(schema.columns, dtypes, offsets.tolist())}


class _Columns:
    """Preallocated output columns of `capacity` rows, filled from the front one block at a time.
    Pages never written cost no memory, so a capacity above the rows kept is free."""

    def __init__(self, schema: _Schema, capacity: int):
        self.schema = schema
        self.capacity = capacity
        self._buffer, self.data = _column_views(schema, capacity)
        self.rows = 0
        self.dropped = 0
        self._scratch(min(capacity, BLOCK))
        self._free = self._references() if hasattr(sys, "getrefcount") else None

    def _scratch(self, size: int) -> None:
        """Scratch of the bound selection for `size` points, reused from block to block."""
        self._best = np.empty(size)
        self._code = np.empty(size, _code_dtype(len(BOUNDS)))
        self._above = np.empty(size, bool)

    def _references(self) -> int:
        return sys.getrefcount(self._buffer)     # every view of a column refers to the buffer

    def released(self) -> bool:
        """True when nothing outside holds a view of these columns (so they may be rewritten)."""
        return self._free is not None and self._references() == self._free

    def add(self, g: _Group, B: np.ndarray, S: np.ndarray, T: np.ndarray) -> None:
        """Evaluate group g on the block batch B x prompt S x output T (1-d float arrays) and append
        its rows (those that fit, unless the schema keeps every row). A block of one batch (a large
        prompt x output grid: the streamed sweep's blocks are 1 x 125 x 400) evaluates it as a float:
        the physics's terms of the batch alone are then float arithmetic, not ~300 numpy calls on
        one-element arrays (15% of such a block's evaluation), and the same floats (roofline's
        helpers: the array path is the float path elementwise; the estimate of that point is
        the float path throughout)."""
        batch = float(B[0]) if B.size == 1 else B[:, None, None]
        B, S, T = B[:, None, None], S[None, :, None], T[None, None, :]
        r = g.prepared.evaluate(batch=batch, prompt=S, output=T, terms=False)     # no prefill_*_s columns
        self._put(r, g.prepared.price is not None, g.consts, g.joules, B, S, T, (B.size, S.size, T.size))

    def add_groups(self, bundle: _Bundle, r: dict, lo: int, hi: int, B: np.ndarray, S: np.ndarray,
                   T: np.ndarray) -> None:
        """Append the rows of groups lo .. hi-1 of `bundle`, evaluated as r (`_Bundle.evaluate`)
        over the grid B x S x T (1-d float arrays)."""
        n = len(bundle.groups)
        if hi <= lo:
            return

        def pick(v):        # the groups' rows of a figure with one entry per group
            return v[lo:hi] if getattr(v, "ndim", 0) == 4 and v.shape[0] == n > 1 else v
        self._put({k: pick(v) for k, v in r.items()}, bundle.groups[0].prepared.price is not None,
                  {k: pick(v) for k, v in bundle.consts.items()}, pick(bundle.joules),
                  B[None, :, None, None], S[None, None, :, None], T[None, None, None, :],
                  (hi - lo, B.size, S.size, T.size))

    def _put(self, r: dict, priced: bool, consts: dict, joules, B, S, T, shape: tuple[int, ...]) -> None:
        """Append the rows of `core.evaluate`'s figures r over the grid B x S x T (broadcast to
        `shape`): the schema's columns, those that fit unless the schema keeps every row."""
        size = math.prod(shape)
        fits = np.broadcast_to(r["fits"], shape)
        keep = None
        if not self.schema.include_unfit:
            n = int(np.count_nonzero(fits))
            keep = fits if n < size else None
            self.dropped += size - n
            if n == 0:
                return
        else:
            n = size
        if size > self._best.size:
            self._scratch(size)
        rows = slice(self.rows, self.rows + n)
        self.rows += n
        data = self.data

        def put(name, value):
            dst = data[name][rows]
            if getattr(value, "ndim", 0) == 0:
                dst.fill(value)
            elif keep is None:
                np.copyto(dst.reshape(shape), value, casting="unsafe")
            else:
                dst[...] = np.broadcast_to(value, shape)[keep]

        axes = {"batch": B, "prompt_tokens": S, "output_tokens": T, "memory_fits": fits}
        value: float | np.ndarray
        for name in data:          # the selected columns only
            if name in consts:
                value = consts[name]
            elif name in axes:
                value = axes[name]
            elif name == "bound":
                if keep is None:            # the codes straight into the column
                    self._bound(r, shape, size, data[name][rows].reshape(shape))
                    continue
                value = self._bound(r, shape, size, self._code[:size].reshape(shape))
            elif name == "cost_per_million_tokens_usd":
                value = r[name] if priced else math.nan
            elif name == "joules_per_token":
                if joules is None or (type(joules) is float and not joules):
                    value = math.nan
                elif keep is None:          # joules * e2e / (B * T), in the column
                    dst = data[name][rows].reshape(shape)
                    np.multiply(joules, r["e2e_s"], out=dst)
                    np.divide(dst, B * T, out=dst)
                    continue
                else:
                    value = joules * r["e2e_s"] / (B * T)
            else:
                value = r[_SOURCE.get(name, name)]
            put(name, value)

    def _bound(self, r: dict, shape, size, code: np.ndarray) -> np.ndarray:
        """The code of the largest step term (the first on ties, like `core.bound_name`) into `code`:
        the first largest of memory and compute (terms of the block's shape), then of the others in
        their own shape (a layer floor, communication, overhead, draft: per batch and prompt, or one
        number), and the others' where theirs is larger still. The first largest of all terms is the
        first largest of the first two unless a later one is strictly larger: 5 operations of the
        block's size, not 16 (a comparison, a code and a maximum per term), in reused scratch."""
        best = self._best[:size].reshape(shape)
        above = self._above[:size].reshape(shape)
        memory, compute = r[f"{BOUNDS[0]}_s"], r[f"{BOUNDS[1]}_s"]
        np.greater(compute, memory, out=above)
        np.copyto(code, above, casting="unsafe")                 # 1 where compute, else 0
        np.maximum(memory, compute, out=best)
        rest, rest_code = r[f"{BOUNDS[2]}_s"], np.int8(2)
        for i, k in enumerate(BOUNDS[3:], 3):
            term = r[f"{k}_s"]
            rest_code = np.where(term > rest, i, rest_code)
            rest = np.maximum(rest, term)
        np.greater(rest, best, out=above)
        np.copyto(code, rest_code, where=above, casting="unsafe")    # twice putmask's speed here
        return code

    def table(self, as_frame):
        """The rows so far as a pandas DataFrame (as_frame None or True; no copy) or a Table."""
        n = self.rows
        cats = self.schema.categories
        if as_frame is not False:
            try:
                import pandas as pd   # pandas: deferred, about a second to import; only tables need it
            except ImportError:
                if as_frame:
                    raise
            else:
                dtypes = self.schema.pandas_dtypes
                return pd.DataFrame({name: pd.Categorical.from_codes(self.data[name][:n], dtype=dtypes[name],
                                                                     validate=False)
                                     if kind == "cat" else self.data[name][:n]
                                     for name, kind in self.schema.columns}, copy=False)
        out = Table()
        for name, kind in self.schema.columns:
            v = self.data[name][:n]
            out[name] = np.array([*cats[name], None], dtype=object)[v] if kind == "cat" else v
        return out


def _pieces(plan: _Plan, limit: int):
    """The plan's groups as the units evaluated: (group, None) for a group taken block by block
    (blocks of at most `limit` points), or (None, bundle) for neighbours of one `_key` whose grids
    are one block each, as many to a `_Bundle` as `limit` points hold."""
    points = math.prod(plan.shape)
    per = limit // points
    for run in plan.runs:
        if len(run) == 1 or per < 2:
            yield from ((g, None) for g in run)
            continue
        for i in range(0, len(run), per):
            piece = run[i:i + per]
            yield (piece[0], None) if len(piece) == 1 else (None, _bundle(piece))


def _fill(cols: _Columns, plan: _Plan) -> None:
    """Every point of the plan, group by group, block by block (many small groups in bundles)."""
    B, S, T = plan.axes
    limit = min(BLOCK, cols.capacity)
    for g, bundle in _pieces(plan, limit):
        if bundle is None:
            for bi, si, ti in _blocks(plan.shape, limit):
                cols.add(g, B[bi], S[si], T[ti])
        else:
            cols.add_groups(bundle, bundle.evaluate(B, S, T), 0, len(bundle.groups), B, S, T)


def _chunks(plan: _Plan, chunk_size: int):
    """The plan's rows in `_Columns` of at most chunk_size rows each. Buffers come from a small
    pool: one whose rows the consumer has let go of (no reference left to its arrays) is written
    again, so a stream touches the same memory chunk after chunk instead of page-faulting fresh
    memory each time; a chunk still referenced is never overwritten. A chunk ends before the
    block (or a bundle's group) that would take it past chunk_size rows."""
    B, S, T = plan.axes
    pool: list[_Columns] = []

    def empty() -> _Columns:
        for c in pool:
            if c.released():
                c.rows = c.dropped = 0
                return c
        c = _Columns(plan.schema, chunk_size)
        if len(pool) < 3:
            pool.append(c)
        return c

    cols = empty()
    limit = min(BLOCK, chunk_size)
    for g, bundle in _pieces(plan, limit):
        if bundle is None:
            for bi, si, ti in _blocks(plan.shape, limit):
                size = (bi.stop - bi.start) * (si.stop - si.start) * (ti.stop - ti.start)
                if cols.rows + size > chunk_size:
                    if cols.rows:
                        yield cols
                    cols = empty()
                cols.add(g, B[bi], S[si], T[ti])
            continue
        r = bundle.evaluate(B, S, T)
        size = math.prod(plan.shape)
        if plan.schema.include_unfit:
            kept = [size] * len(bundle.groups)
        else:
            kept = np.count_nonzero(np.broadcast_to(r["fits"], (len(bundle.groups), *plan.shape)),
                                    axis=(1, 2, 3)).tolist()
        lo, rows = 0, cols.rows
        for i, n in enumerate(kept):        # the chunks one group at a time would make
            if rows + size > chunk_size:
                cols.add_groups(bundle, r, lo, i, B, S, T)
                if cols.rows:
                    yield cols
                cols = empty()
                lo, rows = i, 0
            rows += n
        cols.add_groups(bundle, r, lo, len(kept), B, S, T)
    yield cols


_SPARE: list[_Columns] = []     # a process's column buffers kept between dask partitions (`_partition`)
_SPARE_LOCK = threading.Lock()
_SPARES = 2                     # at most this many, the most recent: a worker thread's last partition each


def _spare_columns(schema: _Schema, capacity: int) -> _Columns:
    """Columns for a partition of `capacity` rows: a kept buffer whose last table nobody holds any
    more (`_Columns.released`), else a new one. A new buffer of a million rows (about 200 MB)
    page-faults its memory in as it is first written, and the allocator returns it to the system
    when freed, so each partition paid that again: about a third of a partition's time."""
    with _SPARE_LOCK:
        for c in _SPARE:
            if c.capacity >= capacity and c.schema == schema and c.released():
                _SPARE.remove(c)        # this partition's alone until it is kept again
                c.rows = c.dropped = 0
                return c
    return _Columns(schema, capacity)


def _keep_spare(cols: _Columns) -> None:
    with _SPARE_LOCK:
        _SPARE.append(cols)
        del _SPARE[:-_SPARES]


def _partition(part: tuple[int, int, int], plan: _Plan, block: int, columns=None):
    """One dask partition from its descriptor (group index, first block, end block): that group
    over those blocks of the plan's grid (`_blocks(plan.shape, block)`), as a pandas DataFrame of
    the columns dask asks for (it pushes a column selection down to here). Its columns are views
    of a buffer the process keeps for a later partition once this table is let go."""
    i, first, stop = part
    g, (B, S, T) = plan.groups[i], plan.axes
    blocks = list(itertools.islice(_blocks(plan.shape, block), first, stop))
    _settle_worker()
    cols = _spare_columns(plan.schema.select(columns), sum(_points(plan.shape, b) for b in blocks))
    for bi, si, ti in blocks:
        cols.add(g, B[bi], S[si], T[ti])
    table = cols.table(True)
    _keep_spare(cols)
    return table


def _partition_chunks(part: tuple[int, int, int], plan: _Plan, block: int, chunk_size: int):
    """One dask partition (`_partition`'s descriptor) evaluated where it runs, as `_Columns` of at
    most chunk_size rows each, in order (empty ones too). A chunk's buffer goes back to the
    process's spares once the consumer has let go of it (`_spare_columns`)."""
    i, first, stop = part
    g, (B, S, T) = plan.groups[i], plan.axes
    _settle_worker()
    cols = None
    for bi, si, ti in itertools.islice(_blocks(plan.shape, block), first, stop):
        size = (bi.stop - bi.start) * (si.stop - si.start) * (ti.stop - ti.start)
        if cols is not None and cols.rows + size > chunk_size:
            yield cols
            _keep_spare(cols)
            cols = None
        if cols is None:
            cols = _spare_columns(plan.schema, chunk_size)
        cols.add(g, B[bi], S[si], T[ti])
    if cols is not None:
        yield cols
        _keep_spare(cols)


def _fold_partition(part: tuple[int, int, int], plan: _Plan, block: int, chunk_size: int, fold, as_frame) -> list:
    """One dask partition (`_partition`'s descriptor) folded where it runs: its rows in chunks of at
    most chunk_size rows, in order, each handed to `fold(accumulator, chunk)` as the numpy engine's
    `sweep(reduce=...)` hands its chunks (the accumulator starts as None; empty chunks are not
    handed on), so no table of the whole partition is made. Evaluation, the fold and its result
    are one task. Returns [accumulator]: one bag partition of one item."""
    acc = None
    for cols in _partition_chunks(part, plan, block, chunk_size):
        if cols.rows:
            acc = fold(acc, cols.table(as_frame))
    return [acc]


def _reduce_chunk(reduction: Reduction, cols: _Columns, categories: dict):
    """A chunk's accumulator (`reductions`): the reduction run on its filled columns' arrays."""
    n = cols.rows
    return reduction.chunk({name: col[:n] for name, col in cols.data.items()}, n, categories)


def _reduce_partition(part: tuple[int, int, int], plan: _Plan, block: int, chunk_size: int, reduction: Reduction):
    """One dask partition reduced where it runs, chunk by chunk (`_partition_chunks`), to one
    accumulator of `reduction` (numbers or a few small arrays: cheap for dask to size and send)."""
    acc = None
    cats = plan.schema.categories
    for cols in _partition_chunks(part, plan, block, chunk_size):
        if cols.rows:
            acc = reduction.merge(acc, _reduce_chunk(reduction, cols, cats))
    return acc


def _points(shape: tuple[int, int, int], blk: tuple[slice, slice, slice]) -> int:
    """The points of one block of a grid of `shape` (`_blocks`: the last along an axis may end past it)."""
    return math.prod(len(range(*s.indices(n))) for s, n in zip(blk, shape))


def _runs_of_blocks(shape: tuple[int, int, int], block: int, partition_size: int) -> list[tuple[int, int]]:
    """The (first, end) block indices of each partition of one group's grid: runs of consecutive
    blocks (`_blocks(shape, block)`) of at most partition_size points each (at least one block)."""
    runs, first, points = [], 0, 0
    for j, blk in enumerate(_blocks(shape, block)):
        size = _points(shape, blk)
        if j > first and points + size > partition_size:
            runs.append((first, j))
            first, points = j, 0
        points += size
    runs.append((first, j + 1))     # a grid has at least one block
    return runs


def _descriptors(plan: _Plan, block: int, partition_size: int) -> list[tuple[int, int, int]]:
    """Every partition of the plan as (group index, first block, end block) (`_runs_of_blocks`)."""
    runs = _runs_of_blocks(plan.shape, block, partition_size)
    return [(i, first, stop) for i in range(len(plan.groups)) for first, stop in runs]


def _dask_folds(plan: _Plan, partition_size: int, fold, as_frame):
    """sweep(engine="dask", reduce=fold): a dask bag of one item per partition (the partitions of
    `_dask_frame`, in its order), that partition's accumulator, folded on the worker that evaluates
    it (`_fold_partition`): one task a partition, however the bag is then reduced, and a chunk's
    memory (DEFAULT_CHUNK rows at most) rather than a partition's table. The graph holds the plan
    and the fold once and each partition as three integers."""
    import dask.bag as db   # dask: the dask extra
    from dask.highlevelgraph import HighLevelGraph   # dask: the dask extra
    block = min(BLOCK, partition_size)
    chunk = max(block, min(DEFAULT_CHUNK, partition_size))
    parts = _descriptors(plan, block, partition_size)
    if not parts:
        return db.from_sequence([], npartitions=1)
    name = f"membound-sweep-fold-{uuid.uuid4().hex}"
    graph: dict[Any, Any] = {(name, k): (_fold_partition, part, plan, block, chunk, fold, as_frame)
                             for k, part in enumerate(parts)}
    return db.Bag(HighLevelGraph.from_collections(name, graph), name, len(parts))


SPLIT_EVERY = 16    # accumulators merged per task of the dask reductions' trees (`_dask_reduce`, `_dask_merged`)


def _merged(merge, states: list):
    """`states` merged in order, two at a time (`functools.reduce`, as `Bag.fold(merge)` merges a
    bag's items); None where there are none (a sweep with no partition: the fold's start)."""
    return functools.reduce(merge, states) if states else None


def _fold_state(part: tuple[int, int, int], plan: _Plan, block: int, chunk_size: int, fold, as_frame):
    """One partition's accumulator (`_fold_partition`'s one item, without the list a bag partition is)."""
    return _fold_partition(part, plan, block, chunk_size, fold, as_frame)[0]


def _tree_names(kind: str) -> tuple[str, str]:
    """The key names of a tree's merges and final task, and of its partition tasks (`_tree`), one
    token for both. Apart, because a distributed scheduler groups tasks by name: partitions named
    like the merges that depend on them made one task group that depends on itself, so not root
    tasks, and the scheduler handed every partition out at once (13 to each of two workers on
    benchmarks/bench_dask.py's 26); at the end one worker idled while the other finished those it
    had been given. Named apart, the partitions are root tasks: the scheduler queues them and gives
    a worker the next as it frees up (distributed's root-task queuing), as it already did for the
    bag's and the frame's partitions."""
    token = uuid.uuid4().hex
    return f"membound-sweep-{kind}-{token}", f"membound-sweep-{kind}-partition-{token}"


def _tree(name: str, leaves: dict, combine: tuple) -> tuple[dict, list]:
    """A graph: the `leaves` tasks ((their name, 0, k), in order), their results combined
    SPLIT_EVERY at a time, level after level, by (*combine, [keys]) tasks keyed (name, level, k),
    in order. Returns the graph and the last level's keys (one, or none without leaves)."""
    graph, keys, depth = dict(leaves), list(leaves), 0
    while len(keys) > 1:
        depth += 1
        level = [keys[i:i + SPLIT_EVERY] for i in range(0, len(keys), SPLIT_EVERY)]
        graph.update({(name, depth, k): (*combine, list(ks)) for k, ks in enumerate(level)})
        keys = [(name, depth, k) for k in range(len(level))]
    return graph, keys


def _dask_merged(plan: _Plan, partition_size: int, fold, merge, as_frame):
    """sweep(engine="dask", reduce=fold, merge=merge): each partition folded where it is evaluated
    (`_fold_partition`, one task a partition), the accumulators merged SPLIT_EVERY at a time in a
    tree on the workers, in partition order (`_merged`): what `_dask_folds(...).fold(merge)` gives,
    in one task a partition and 1/SPLIT_EVERY as many merge tasks, and none of the per-partition
    tasks dask adds to a bag's fold (a reduce of one item, which its optimizer then fuses and
    leaves behind as an alias: two more results a partition to size, and to send where the
    scheduler puts them on the other worker). A lazy `dask.delayed.Delayed`."""
    from dask.delayed import Delayed   # dask: the dask extra
    from dask.highlevelgraph import HighLevelGraph   # dask: the dask extra
    block = min(BLOCK, partition_size)
    chunk = max(block, min(DEFAULT_CHUNK, partition_size))
    name, part_name = _tree_names("merge")
    leaves = {(part_name, 0, k): (_fold_state, part, plan, block, chunk, fold, as_frame)
              for k, part in enumerate(_descriptors(plan, block, partition_size))}
    graph, keys = _tree(name, leaves, (_merged, merge))
    graph[name] = (_merged, merge, keys)
    return Delayed(name, HighLevelGraph.from_collections(name, graph))


def _dask_reduce(plan: _Plan, partition_size: int, reduction: Reduction):
    """sweep(engine="dask", reduce=Reduction): each partition (those of `_dask_frame`) reduced to
    its accumulator on the worker that evaluates it (`_reduce_partition`, one task a partition),
    the accumulators merged SPLIT_EVERY at a time in a tree on the workers, in partition order, and
    the last one finished (a table only there). A lazy `dask.delayed.Delayed`: `.compute()` gives
    what the one process's `sweep(reduce=...)` returns."""
    from dask.delayed import Delayed   # dask: the dask extra
    from dask.highlevelgraph import HighLevelGraph   # dask: the dask extra
    block = min(BLOCK, partition_size)
    chunk = max(block, min(DEFAULT_CHUNK, partition_size))
    parts = _descriptors(plan, block, partition_size)
    name, part_name = _tree_names("reduce")
    leaves = {(part_name, 0, k): (_reduce_partition, part, plan, block, chunk, reduction)
              for k, part in enumerate(parts)}
    graph, keys = _tree(name, leaves, (merge_all, reduction))
    graph[name] = (reduction.finish, keys[0] if keys else None, plan.schema)
    return Delayed(name, HighLevelGraph.from_collections(name, graph))


def _reduction_plan(model, hardware, kw: dict, reduction: Reduction) -> _Plan:
    """The plan of a reduced sweep: every argument checked, the reduction's columns too; the
    columns evaluated are those asked for (all by default) and those the reduction reads."""
    plan = _plan(model, hardware, **{**kw, "columns": None})
    reduction.check(dict(plan.schema.columns))
    if kw["columns"] is None:
        return plan
    wanted = [kw["columns"]] if isinstance(kw["columns"], str) else list(kw["columns"])
    return replace(plan, schema=plan.schema.select([*wanted, *reduction.columns()]))


def _reduce_local(plan: _Plan, chunk_size: int, reduction: Reduction):
    """sweep(reduce=Reduction) in this process: the plan's chunks (`_chunks`), each reduced on its
    arrays and merged in order, the last accumulator finished."""
    _settle_allocator()
    acc = None
    cats = plan.schema.categories
    for cols in _chunks(plan, chunk_size):
        if cols.rows:
            acc = reduction.merge(acc, _reduce_chunk(reduction, cols, cats))
    return reduction.finish(acc, plan.schema)


def _dask_frame(plan: _Plan, partition_size: int):
    """The plan as a lazy dask DataFrame. A partition is a run of the blocks `sweep()` evaluates
    (at most partition_size points, one group), so its rows come in the same order; nothing is
    evaluated until the frame is computed, on whatever scheduler is active. However large the
    partition, its task evaluates it block by block (at most BLOCK points, as the streamed sweep
    does) into one table: a large partition spreads its fixed cost on the cluster over more rows
    and keeps the cache-sized evaluation. The graph holds the plan once and each partition as
    three integers (`_partition` cuts its blocks where it runs), so it stays a few tens of kB
    however large the grid."""
    import dask   # dask: the dask extra
    import dask.dataframe as dd   # dask: the dask extra
    block = min(BLOCK, partition_size)
    parts = _descriptors(plan, block, partition_size)
    meta = _Columns(plan.schema, 0).table(True)
    if not parts:
        return dd.from_pandas(meta, npartitions=1)
    # No string conversion: the labels are categoricals already. With it on (dask's default),
    # from_map adds a to-pyarrow-string task after every partition, which the scheduler may run
    # on the other worker, moving the whole partition there.
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_map(_partition, parts, plan=plan, block=block, meta=meta, label="membound-sweep",
                           enforce_metadata=False)


def iter_sweep(model, hardware, *, batch=defaults.BATCH, prompt_tokens=defaults.PROMPT_TOKENS,
               output_tokens=defaults.OUTPUT_TOKENS, weight_dtype=defaults.WEIGHT_DTYPE,
               kv_dtype=None, activation_dtype=None, n_chips=None, parallel=None, runtime=None,
               speculative=None, price_usd_per_hour=None, chunk_size: int = DEFAULT_CHUNK,
               include_unfit: bool = False, on_invalid: str = "raise", as_frame=None, columns=None,
               allow_beyond_context: bool = False, _stats=None):
    """Yield the sweep's table in chunks of at most `chunk_size` rows (see `sweep`); stream them to
    disk or reduce them as they come: memory stays at a few chunks. A chunk you keep is never
    written again; the memory of chunks you let go is reused. `_stats` (a dict) receives
    dropped/skipped counts."""
    chunk_size = check_int("chunk_size", chunk_size, 1)
    _settle_allocator()
    plan = _plan(model, hardware, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                 weight_dtype=weight_dtype, kv_dtype=kv_dtype, activation_dtype=activation_dtype,
                 n_chips=n_chips, parallel=parallel, runtime=runtime, speculative=speculative,
                 price_usd_per_hour=price_usd_per_hour, include_unfit=include_unfit, on_invalid=on_invalid,
                 allow_beyond_context=allow_beyond_context, columns=columns)
    stats = _stats if _stats is not None else {}
    stats["dropped_unfit"] = 0
    stats["skipped"] = list(plan.skipped)
    for cols in _chunks(plan, chunk_size):
        stats["dropped_unfit"] += cols.dropped
        if cols.rows:
            yield cols.table(as_frame)


def sweep(model, hardware, *, batch=defaults.BATCH, prompt_tokens=defaults.PROMPT_TOKENS,
          output_tokens=defaults.OUTPUT_TOKENS, weight_dtype=defaults.WEIGHT_DTYPE,
          kv_dtype=None, activation_dtype=None, n_chips=None, parallel=None, runtime=None,
          speculative=None, price_usd_per_hour=None, chunk_size: int | None = None,
          include_unfit: bool = False, on_invalid: str = "raise", reduce=None, as_frame=None,
          columns=None, engine: str = "numpy", allow_beyond_context: bool = False, concurrency=None,
          scheduler=None, merge=None):
    """Evaluate every point of a grid; one row per point with `estimate()`'s figures.

    Each argument takes a scalar or a list; the grid is their cartesian product. n_chips=None
    means each `parallel` layout's chip count (1 chip when parallel is None too); n_chips="auto"
    puts each point on the fewest chips that hold it (as `estimate` and `compare` count: `min_chips`,
    `layout_for`; on a chip with memory tiers, the fewest with nothing in the slowest tier), with a
    `reason` column for points no count holds.
    A model whose window (`max_context`) is shorter than the grid's longest prompt + output
    raises (on_invalid="skip": is skipped) unless allow_beyond_context=True.
    price_usd_per_hour: None (the profiles' prices), a number, or {device name: price}.
    include_unfit: keep points whose memory does not fit (memory_fits False) instead of dropping
    them; the number dropped is in `table.attrs["dropped_unfit"]`.
    on_invalid: "raise" (like `estimate()`) or "skip" combinations a device or model cannot
    run (an activation dtype it lacks, a chip count the heads do not split over); skipped
    groups and their reasons are in `table.attrs["skipped"]`.
    reduce: None to return the table, or a function (accumulator, chunk) -> accumulator folded
    over chunks of at most chunk_size rows (the accumulator starts as None); its final value is
    returned, and memory stays at one chunk. With engine="dask" each partition is folded so on the
    worker that evaluates it (in chunks of at most DEFAULT_CHUNK rows, one task a partition) and
    the call returns a lazy `dask.bag.Bag` of the partitions' accumulators, one item each in
    partition order: `.compute()` gives their list, `.fold(merge)` merges them on the cluster.
    merge: with a function `reduce`, a function (accumulator, accumulator) -> accumulator, the
    earlier partition's first: with engine="dask" the partitions' accumulators are then merged
    SPLIT_EVERY at a time in a tree on the workers, in partition order, and the call returns a
    lazy `dask.delayed` whose `.compute()` gives the bag's `.fold(merge)`, in half the tasks (no
    per-partition task after the fold); the numpy engine folds its one stream and leaves it unused.
    reduce may instead be a `reductions.Reduction` (Count, Top, Front, Histogram) or a tuple of
    them: the query is then reduced on each chunk's arrays (no table per chunk) and finished once
    (a count, a table of the rows kept, counts); with engine="dask" each partition is reduced on
    its worker and the accumulators merged in a tree there, and the call returns a lazy
    `dask.delayed` whose `.compute()` gives the same result as the one process.
    columns: the names of the columns to return (default: all); fewer columns, less to write.
    concurrency: client counts (closed loop) to serve instead of static batches: one row per
    (group, clients, prompt, output) with `serve()`'s steady state (ttft_s, tpot_s, tok_s_per_user,
    output_tok_s_per_chip, mean_running, cost per million output tokens), one vectorised solve
    (`serve_curve`) per group and lengths; `batch` is then left out, `scheduler` applies.
    chunk_size: rows per streamed chunk (reduce=; default DEFAULT_CHUNK) or per dask partition
    (default DASK_PARTITION).
    engine: "numpy" (here, now) or "dask": a lazy dask DataFrame of partitions of at most
    chunk_size rows, evaluated where it is computed (threads, processes, or a distributed
    cluster: `distributed.Client("tcp://scheduler:8786")` then `.compute()`); invalid inputs
    still raise here; a worker keeps its last two partitions' column buffers for the next ones
    (docs/tour.md). Needs the `dask` extra.
    Returns a pandas DataFrame where pandas is installed (as_frame=False: a dict of arrays).
    """
    kw = dict(batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens, weight_dtype=weight_dtype,
              kv_dtype=kv_dtype, activation_dtype=activation_dtype, n_chips=n_chips, parallel=parallel,
              runtime=runtime, speculative=speculative, price_usd_per_hour=price_usd_per_hour,
              include_unfit=include_unfit, on_invalid=on_invalid, columns=columns,
              allow_beyond_context=allow_beyond_context)
    if concurrency is not None:
        if batch != defaults.BATCH:
            raise InvalidInputError("batch", batch, f"left at {defaults.BATCH} with concurrency= (the engine "
                                                    "decides the running batch)")
        return _served(model, hardware, concurrency, scheduler, kw)
    if chunk_size is None:
        chunk_size = DASK_PARTITION if engine == "dask" else DEFAULT_CHUNK
    if isinstance(n_chips, str) and n_chips == "auto":
        return _fewest_chips(model, hardware, kw, check_int("chunk_size", chunk_size, 1))
    if engine not in ("numpy", "dask"):
        raise InvalidInputError("engine", engine, "'numpy' or 'dask'")
    chunk_size = check_int("chunk_size", chunk_size, 1)
    reduction = as_reduction(reduce)
    if engine == "dask":
        require("dask", "dask", 'sweep(engine="dask")')
        if reduction is not None:
            return _dask_reduce(_reduction_plan(model, hardware, kw, reduction), chunk_size, reduction)
        if reduce is not None:
            _check_fold(reduce, merge)
            if merge is not None:
                return _dask_merged(_plan(model, hardware, **kw), chunk_size, reduce, merge, as_frame)
            return _dask_folds(_plan(model, hardware, **kw), chunk_size, reduce, as_frame)
        _check_merge(merge)
        return _dask_frame(_plan(model, hardware, **kw), chunk_size)
    if reduce is None or reduction is not None:
        _check_merge(merge)
    if reduction is not None:
        return _reduce_local(_reduction_plan(model, hardware, kw, reduction), chunk_size, reduction)
    if reduce is not None:
        _check_fold(reduce, merge)
        acc = None
        for chunk in iter_sweep(model, hardware, **kw, chunk_size=chunk_size, as_frame=as_frame):
            acc = reduce(acc, chunk)
            del chunk       # its buffer is then free (unless acc kept it) for the next chunk (`_chunks`)
        return acc
    _settle_allocator()
    plan = _plan(model, hardware, **kw)
    cols = _Columns(plan.schema, plan.points)
    _fill(cols, plan)
    table = cols.table(as_frame)
    table.attrs["dropped_unfit"] = cols.dropped
    table.attrs["skipped"] = list(plan.skipped)
    return table


def _check_fold(reduce, merge) -> None:
    if not callable(reduce):
        raise InvalidInputError("reduce", reduce, "None or a function (accumulator, chunk) -> accumulator")
    if merge is not None and not callable(merge):
        raise InvalidInputError("merge", merge, "None or a function (accumulator, accumulator) -> accumulator")


def _check_merge(merge) -> None:
    """merge= without a fold to merge (no reduce, or a Reduction, which merges its own)."""
    if merge is not None:
        raise InvalidInputError("merge", merge, "None unless reduce is a function (accumulator, chunk) -> accumulator")


# ---- the fewest chips per point, and why a point was dropped ------------------------------------
def drop_reasons(table) -> np.ndarray:
    """Per row: "" where the point fits in memory, else why not (GB per chip needed and held)."""
    cap = np.asarray(table["memory_capacity_bytes"], dtype=float)
    need = _needed_bytes(table)
    fits = np.asarray(table["memory_fits"], dtype=bool)
    chips = np.asarray(table["n_chips"])
    return np.array(["" if ok else f"does not fit: {n / 1e9:.3g} GB per chip > {c / 1e9:.3g} GB on {k} chips"
                     for ok, n, c, k in zip(fits, need, cap, chips)], dtype=object)


def _needed_bytes(table) -> np.ndarray:
    """Per row: the bytes a chip holds (weights, KV, activations and the rest)."""
    return sum((np.asarray(table[c], dtype=float) for c, _ in _MEMORY if c != "memory_capacity_bytes"),
               np.zeros(len(table)))


def chip_counts(m, hw, B, S, T, weight_dtype, kv_dtype, runtime) -> list[int]:
    """Every chip count `layout_for` accepts from the fewest that hold the grid's smallest point
    to the fewest that hold its largest at speed (`min_chips(..., at_speed=True)`: on a chip with
    memory tiers, nothing in the slowest; on one tier, the fewest that hold it); one count, 1, when
    even the smallest never fits."""
    kw = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, runtime=runtime)
    try:
        lo = min_chips(m, hw, batch=int(B.min()), context_tokens=max(1, int(S.min() + T.min())), **kw)
    except DoesNotFitError:
        return [1]
    try:
        hi = min_chips(m, hw, batch=int(B.max()), context_tokens=int(S.max() + T.max()), at_speed=True, **kw)
    except DoesNotFitError:
        hi = min(100_000, max(lo, 64 * lo))
    return [n for n in range(lo, hi + 1) if layout_for(m, hw, n) is not None]


def _fewest_chips(model, hardware, kw: dict, chunk_size: int):
    """sweep(n_chips="auto"): for each (model, device, weight dtype) the grid on every candidate chip
    count, then per point the fewest that holds it at speed, as `estimate` and `compare` count
    (`_first_count`; else the largest tried), with `reason`."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    B = _int_axis("batch", kw["batch"], 1)
    S = _int_axis("prompt_tokens", kw["prompt_tokens"], 0)
    T = _int_axis("output_tokens", kw["output_tokens"], 1)
    if kw["parallel"] is not None:
        raise InvalidInputError("parallel", kw["parallel"], "None with n_chips='auto' (layouts are chosen per count)")
    frames, skipped = [], []
    kv0 = _as_list("kv_dtype", kw["kv_dtype"])[0]
    runtime0 = _as_list("runtime", kw["runtime"])[0]
    for m, hw, wd in itertools.product([load_model(x) for x in _as_list("model", model)],
                                       [load_hardware(x) for x in _as_list("hardware", hardware)],
                                       _as_list("weight_dtype", kw["weight_dtype"])):
        parts = []
        for n in chip_counts(m, hw, B, S, T, wd, kv0, runtime0):
            part = sweep(m, hw, **{**kw, "weight_dtype": wd, "n_chips": n, "parallel": layout_for(m, hw, n),
                                   "include_unfit": True, "columns": None}, chunk_size=chunk_size)
            skipped += part.attrs["skipped"]
            if len(part):
                parts.append(part.reset_index(drop=True))
        if not parts or any(len(p) != len(parts[0]) for p in parts):
            continue
        pick = _first_count(parts, streamed_room(hw))
        stacked = pd.concat(parts, ignore_index=True)
        frames.append(stacked.iloc[pick * len(parts[0]) + np.arange(len(parts[0]))])
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(table):
        table["reason"] = drop_reasons(table)
        if not kw["include_unfit"]:
            table = table[table["memory_fits"]].reset_index(drop=True)
    if kw["columns"] is not None and len(table):
        wanted = [kw["columns"]] if isinstance(kw["columns"], str) else list(kw["columns"])
        table = table[[c for c in table.columns if c in wanted or c == "reason"]]
    table.attrs["skipped"] = skipped
    table.attrs["dropped_unfit"] = 0 if kw["include_unfit"] else int(sum(len(f) for f in frames) - len(table))
    return table


def _first_count(parts: list, room: float | None) -> np.ndarray:
    """Per point, the index of the first of `parts` (one table per chip count, ascending) that holds
    it at speed: on a chip with memory tiers (`room`: bytes per chip in the tiers a decode streams at
    speed) the first whose bytes per chip fit in that room, where any does; else the first that fits
    at all; else the last."""
    fits = np.stack([p["memory_fits"].to_numpy(bool) for p in parts])
    if room is not None:
        fast = fits & np.stack([_needed_bytes(p) <= room for p in parts])
        fits = np.where(fast.any(axis=0), fast, fits)
    return np.where(fits.any(axis=0), fits.argmax(axis=0), len(parts) - 1)


# ---- served workloads: client counts instead of static batches -----------------------------------
_SERVED = ("tok_s_per_user", "output_tok_s_per_chip", "ttft_s", "tpot_s", "mean_running")


def _served(model, hardware, concurrency, scheduler, kw: dict):
    """sweep(concurrency=[...]): `serve_curve` for every group and (prompt, output) pair, as one
    table; the groups whose steps differ only in numbers (one model and scheduler on several
    devices, formats or prices) solved at once (`serve_curves`), each row serve_curve's."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    clients = _int_axis("concurrency", concurrency, 1).astype(np.int64)
    S = _int_axis("prompt_tokens", kw["prompt_tokens"], 0).astype(np.int64)
    T = _int_axis("output_tokens", kw["output_tokens"], 2).astype(np.int64)
    price = kw["price_usd_per_hour"]
    configurations, groups = [], []
    for m, hw, rt, n, par, wd, kd, ad in itertools.product(
            [load_model(x) for x in _as_list("model", model)], [load_hardware(x) for x in _as_list("hardware", hardware)],
            _as_list("runtime", kw["runtime"]), _as_list("n_chips", kw["n_chips"]), _as_list("parallel", kw["parallel"]),
            _as_list("weight_dtype", kw["weight_dtype"]), _as_list("kv_dtype", kw["kv_dtype"]),
            _as_list("activation_dtype", kw["activation_dtype"])):
        n_chips = par.chips if (n is None and par is not None) else (1 if n is None else n)
        for s, t in itertools.product(S, T):
            configurations.append(dict(model=m, hardware=hw, prompt_tokens=int(s), output_tokens=int(t),
                                       weight_dtype=wd, kv_dtype=kd, activation_dtype=ad, n_chips=n_chips,
                                       parallel=par, runtime=rt, scheduler=scheduler,
                                       price_usd_per_hour=price.get(hw.name) if isinstance(price, dict) else price))
            groups.append((m, hw, n_chips, wd, kd, ad, s, t))
    skipped = []

    def skip(i: int, e: MemboundError) -> None:
        if kw["on_invalid"] == "raise" or not isinstance(e, InvalidInputError):
            raise e
        m, hw, n_chips, wd, kd, ad, s, t = groups[i]
        skipped.append((f"{m.name} on {n_chips} x {hw.name}, {wd}/{kd}/{ad}, {s}/{t} tokens", str(e)))
    curves = serve_curves(configurations, concurrency=clients, skip=skip)
    kept = [(g, c) for g, c in zip(groups, curves) if c is not None]
    table = _served_table(kept, clients.size) if kept else pd.DataFrame()
    table.attrs["skipped"] = skipped
    table.attrs["dropped_unfit"] = 0
    return table


def _served_table(kept: list, k: int):
    """The served sweep's table: `k` rows per (group, curve), labels categorical."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    dtypes = [Quantization(wd, kd, ad).resolve(hw) for (m, hw, n, wd, kd, ad, s, t), _ in kept]
    each = np.repeat(np.arange(len(kept)), k)

    def category(values: list[str]):      # one label per curve, repeated over its k rows
        cat = pd.Categorical(values)
        return pd.Categorical.from_codes(cat.codes[each], dtype=cat.dtype)
    cols: dict[str, Any] = {
        "model": category([c.model for _, c in kept]), "hardware": category([c.hardware for _, c in kept]),
        "runtime": category([c.runtime for _, c in kept]), "n_chips": np.array([c.n_chips for _, c in kept])[each],
        "weight_dtype": category([r.weights.name for r in dtypes]), "kv_dtype": category([r.kv.name for r in dtypes]),
        "activation_dtype": category([r.activations.name for r in dtypes])}
    cols["concurrency"] = np.concatenate([c.concurrency for _, c in kept])
    cols["prompt_tokens"] = np.array([g[6] for g, _ in kept])[each]
    cols["output_tokens"] = np.array([g[7] for g, _ in kept])[each]
    for f in _SERVED:
        cols[f] = np.concatenate([getattr(c, f) for _, c in kept])
    cols["cost_per_million_output_tokens_usd"] = np.concatenate(
        [np.full(k, np.nan) if c.cost_per_million_output_tokens_usd is None else c.cost_per_million_output_tokens_usd
         for _, c in kept])
    return pd.DataFrame(cols)
