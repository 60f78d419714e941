"""A sweep's query as a reduction on numpy arrays: a count, the best rows, a Pareto front or a
histogram, computed on each chunk's columns where they are filled, merged chunk after chunk (one
process) or partition by partition in a tree (dask), and made a table only at the end.

    from membound.planning.reductions import Count, Front, Top
    n, best = mb.sweep(..., reduce=(Count(), Top(10, "decode_tok_s_total",
                                                  where=[("ttft_s", "<=", 2.0), ("decode_tok_s_per_user", ">=", 30)])))
    front = mb.sweep(..., include_unfit=True, engine="dask", reduce=Front(where=[("memory_fits", "==", True)])).compute()

Each reduction turns a chunk (a dict of equal-length column arrays; labels as their category
codes) into an accumulator (None: nothing yet), merges two accumulators, the earlier rows first,
and finishes the last one: `Count` an int, `Top` and `Front` a pandas DataFrame (labels
categorical, a fresh index), `Histogram` an array of counts. An accumulator is a number or a few
small arrays, never a frame: dask sizes and sends it in microseconds, where sizing a pandas
result cost about 2 ms a partition, twice. The same methods run on the local engine and on the
workers, so the two give the same result: equal to the pandas query on the whole table
(`frame[mask].nlargest(k, by)`, keep="first"; `pareto_front` of the rows that pass).

`where`: conditions (column, operator, value), all of which a row must meet; operators
<, <=, >, >=, ==, != on numbers and booleans, == and != on label columns (model, hardware, ...).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import InvalidInputError

_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}
_LABEL_OPS = ("==", "!=")

Rows = dict[str, np.ndarray]     # a few rows of the sweep's columns (labels as category codes)


def pareto_front(x, y) -> np.ndarray:
    """Indices of the points not dominated when both x and y are better larger (sorted by x). Of
    equal points the first is kept, so the front of fronts of consecutive parts, merged in order,
    is the front of the whole."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    order = np.lexsort((-y, -x))          # x descending, ties: y descending, then position
    ys = y[order]
    before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    return order[ys > before][::-1]


def best(values: np.ndarray, k: int, smallest: bool = False) -> np.ndarray:
    """Indices of the k largest values (smallest=True: the k smallest), best first, ties in
    position order: pandas' `nlargest(k, keep="first")` / `nsmallest`. NaN must be left out."""
    key = values if smallest else -values
    if key.size > k:
        kth = np.partition(key, k - 1)[k - 1]
        strict = np.flatnonzero(key < kth)
        ties = np.flatnonzero(key == kth)[:k - strict.size]
        idx = np.sort(np.concatenate((strict, ties)))
    else:
        idx = np.arange(key.size)
    return idx[np.argsort(key[idx], kind="stable")]


def _conditions(where) -> tuple[tuple[str, str, Any], ...]:
    """`where` as a tuple of (column, operator, value) triples."""
    if isinstance(where, tuple) and len(where) == 3 and isinstance(where[0], str) and isinstance(where[1], str):
        where = [where]         # one condition given bare
    out = []
    for c in where:
        if not (isinstance(c, (tuple, list)) and len(c) == 3 and isinstance(c[0], str) and c[1] in _OPS):
            raise InvalidInputError("where", c, f"(column, operator, value) with an operator of {', '.join(_OPS)}")
        out.append((c[0], c[1], c[2]))
    return tuple(out)


def _takes(rows: Rows, idx: np.ndarray) -> Rows:
    return {name: col[idx] for name, col in rows.items()}


def _concat(a: Rows, b: Rows) -> Rows:
    return {name: np.concatenate((a[name], b[name])) for name in a}


class Reduction:
    """A query reduced on arrays (see the module). Subclasses set `where` and the methods below."""

    where: tuple = ()
    numeric: ClassVar[tuple[str, ...]] = ()   # the fields naming a column that must hold numbers

    def columns(self) -> tuple[str, ...]:
        """The columns it reads."""
        return tuple(c for c, _, _ in self.where)

    def check(self, kinds: dict[str, str]) -> None:
        """Raise on a column the sweep lacks, or an operator its kind does not take
        (`kinds`: column -> cat, int, float or bool)."""
        for name in self.columns():
            if name not in kinds:
                raise InvalidInputError("reduce", name, f"names of the sweep's columns: {', '.join(kinds)}")
        for name, op, value in self.where:
            if kinds[name] == "cat" and (op not in _LABEL_OPS or not isinstance(value, str)):
                raise InvalidInputError("where", (name, op, value), f"{name} == or != a label (text)")
            if kinds[name] != "cat" and (isinstance(value, str) or not isinstance(value, (int, float, np.number))):
                raise InvalidInputError("where", (name, op, value), f"{name} compared with a number")
        for field in self.numeric:
            if kinds[getattr(self, field)] not in ("int", "float"):
                raise InvalidInputError(field, getattr(self, field), "a numeric column")

    def mask(self, data: Rows, categories: dict[str, tuple[str, ...]]) -> np.ndarray | None:
        """The rows that meet every condition (None: no condition, every row)."""
        mask = None
        for name, op, value in self.where:
            col = data[name]
            if name in categories:
                if value in categories[name]:
                    m = _OPS[op](col, categories[name].index(value))
                else:       # a label no row carries
                    m = np.full(col.shape, op == "!=")
            else:
                m = _OPS[op](col, value)
            mask = m if mask is None else np.logical_and(mask, m, out=mask)
        return mask

    def chunk(self, data: Rows, rows: int, categories: dict[str, tuple[str, ...]]):
        """A chunk's accumulator (its columns `data`, `rows` rows each); None: nothing kept."""
        raise NotImplementedError

    def merge(self, a, b):
        """Two accumulators as one, a's rows before b's (None: nothing kept yet)."""
        raise NotImplementedError

    def finish(self, acc, schema):
        """The result from the last accumulator (`schema`: the sweep's, for labels and column order)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Reduction):
    """The number of rows (that meet `where`)."""

    where: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "where", _conditions(self.where))

    def chunk(self, data, rows, categories):
        mask = self.mask(data, categories)
        return rows if mask is None else int(np.count_nonzero(mask))

    def merge(self, a, b):
        return (a or 0) + (b or 0)

    def finish(self, acc, schema):
        return int(acc or 0)


class _Rows(Reduction):
    """A reduction whose accumulator is some of the rows (every column the sweep evaluates)."""

    def kept(self, data: Rows, categories) -> np.ndarray | None:
        """Indices of the rows that meet `where` (None: every row)."""
        mask = self.mask(data, categories)
        return None if mask is None else np.flatnonzero(mask)

    def figures(self) -> tuple[str, ...]:
        """The columns `select` reads."""
        raise NotImplementedError

    def select(self, rows: Rows) -> np.ndarray:
        """Indices of the rows to keep among `rows` (all of which meet `where`; `figures` at least)."""
        raise NotImplementedError

    def chunk(self, data, rows, categories):
        idx = self.kept(data, categories)
        if idx is None:
            return _takes(data, self.select(data))
        if not idx.size:
            return None
        # the rows chosen on the figures of those kept; only then every column of the chosen few
        return _takes(data, idx[self.select({name: data[name][idx] for name in self.figures()})])

    def merge(self, a, b):
        if a is None or b is None:
            return a if b is None else b
        both = _concat(a, b)
        return _takes(both, self.select(both))

    def finish(self, acc, schema):
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        kinds = dict(schema.columns)
        names = [name for name, _ in schema.columns]
        if acc is None:
            acc = {name: np.empty(0, schema.dtype(name, kinds[name])) for name in names}
        dtypes = schema.pandas_dtypes
        return pd.DataFrame({name: pd.Categorical.from_codes(acc[name], dtype=dtypes[name], validate=False)
                             if kinds[name] == "cat" else acc[name] for name in names})


@dataclass(frozen=True)
class Top(_Rows):
    """The k rows with the largest `by` (smallest=True: the smallest) among those that meet
    `where`, best first, ties in row order: `table[mask].nlargest(k, by)` (keep="first")."""

    k: int
    by: str
    where: tuple = ()
    smallest: bool = False
    numeric: ClassVar[tuple[str, ...]] = ("by",)

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InvalidInputError("k", self.k, "an integer >= 1")
        object.__setattr__(self, "where", _conditions(self.where))

    def columns(self):
        return (*super().columns(), self.by)

    def figures(self):
        return (self.by,)

    def kept(self, data, categories):
        """Rows that meet `where` and whose `by` is a number (nlargest leaves NaN out)."""
        idx = super().kept(data, categories)
        values = data[self.by] if idx is None else data[self.by][idx]
        if values.dtype.kind != "f":
            return idx
        nan = np.isnan(values)
        if not nan.any():
            return idx
        return np.flatnonzero(~nan) if idx is None else idx[~nan]

    def select(self, rows):
        return best(rows[self.by], self.k, self.smallest)


@dataclass(frozen=True)
class Front(_Rows):
    """The Pareto front of (x, y), both better larger, among the rows that meet `where`, sorted
    by x: `table[mask].iloc[pareto_front(x, y)]`."""

    x: str = "decode_tok_s_per_user"
    y: str = "decode_tok_s_total"
    where: tuple = ()
    numeric: ClassVar[tuple[str, ...]] = ("x", "y")

    def __post_init__(self):
        object.__setattr__(self, "where", _conditions(self.where))

    def columns(self):
        return (*super().columns(), self.x, self.y)

    def figures(self):
        return (self.x, self.y)

    def select(self, rows):                      # NaN not dropped: as pareto_front takes them
        return pareto_front(rows[self.x], rows[self.y])


@dataclass(frozen=True)
class Histogram(Reduction):
    """Counts of `column`'s values (of the rows that meet `where`) in the bins between `edges`
    (ascending; the last bin includes its right edge): `np.histogram(values, edges)[0]`."""

    column: str
    edges: tuple[float, ...]
    where: tuple = ()
    numeric: ClassVar[tuple[str, ...]] = ("column",)

    def __post_init__(self):
        edges = tuple(float(e) for e in self.edges)
        if len(edges) < 2 or any(not math.isfinite(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
            raise InvalidInputError("edges", self.edges, "two or more finite numbers, increasing")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "where", _conditions(self.where))

    def columns(self):
        return (*super().columns(), self.column)

    def chunk(self, data, rows, categories):
        mask = self.mask(data, categories)
        values = data[self.column] if mask is None else data[self.column][mask]
        return np.histogram(values, np.asarray(self.edges))[0]

    def merge(self, a, b):
        if a is None or b is None:
            return a if b is None else b
        return a + b

    def finish(self, acc, schema):
        return np.zeros(len(self.edges) - 1, np.int64) if acc is None else acc


@dataclass(frozen=True)
class Several(Reduction):
    """Several reductions over the same rows at once (`sweep(reduce=(a, b, ...))`): a tuple of
    their accumulators, finished as a tuple of their results."""

    parts: tuple[Reduction, ...]

    def columns(self):
        return tuple(dict.fromkeys(c for p in self.parts for c in p.columns()))

    def check(self, kinds):
        for p in self.parts:
            p.check(kinds)

    def chunk(self, data, rows, categories):
        return tuple(p.chunk(data, rows, categories) for p in self.parts)

    def merge(self, a, b):
        if a is None or b is None:
            return a if b is None else b
        return tuple(p.merge(x, y) for p, x, y in zip(self.parts, a, b))

    def finish(self, acc, schema):
        accs = (None,) * len(self.parts) if acc is None else acc
        return tuple(p.finish(x, schema) for p, x in zip(self.parts, accs))


def as_reduction(reduce) -> Reduction | None:
    """`sweep(reduce=...)` as a Reduction: one, or a tuple/list of them (`Several`); None for
    anything else (a fold function)."""
    if isinstance(reduce, Reduction):
        return reduce
    if isinstance(reduce, (tuple, list)) and reduce and all(isinstance(r, Reduction) for r in reduce):
        return Several(tuple(reduce))
    return None


def merge_all(reduction: Reduction, accs) -> Any:
    """Accumulators merged in order (a node of the dask tree, or the chunks of one process)."""
    return functools.reduce(reduction.merge, accs, None)
