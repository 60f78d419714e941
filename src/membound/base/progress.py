"""Progress bars (tqdm) for the long verbs: sweep, bench, validate, calibrate.

Shown on stderr only when it is a terminal (tqdm's `disable=None`), or always with `force`;
never with `quiet`. Counts are the work items themselves (grid points written, requests
finished, reference rows predicted, groups fitted), so the bar reaches 100% with the work.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def bar(total: int | None, desc: str, *, unit: str = "it", force: bool = False, quiet: bool = False) -> tqdm:
    """A tqdm bar of `total` items on stderr (use as a context manager; `.update(n)`)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                disable=True if quiet else (False if force else None))


def track(items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """`items`, counted on a bar as they are consumed (a terminal only)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)   # type: ignore[arg-type]
    with bar(total, desc, unit=unit) as b:
        for item in items:
            yield item
            b.update(1)
