"""Budgets of work measured in seconds, checked as a run goes, with a progress bar on long runs.

A loop that may run long (the serving simulator's scheduler passes, the planner's solves) makes
one WorkBudget and calls `tick(done)` once a pass. The budget reads time.monotonic() as it goes
(not an assumed cost a pass: a pass of the simulator measured 20 us on one machine and 67 us on
another), and past `seconds` raises the caller's refusal, a MemboundError naming what to change.
After `show_after_s` a tqdm bar (progress.bar: on a terminal's stderr only) counts `done` of
`total`, so a long run says where it is.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInputError, MemboundError
from .progress import bar


CLOCK: Callable[[], float] = time.monotonic     # what a budget reads when not given a clock (tests swap it)


class WorkBudget:
    """At most `seconds` of wall-clock work from its creation; `refuse(elapsed_s)` builds the
    error raised past it. `clock`: CLOCK (time.monotonic) unless given."""

    def __init__(self, seconds: float, refuse: Callable[[float], MemboundError], *, desc: str = "",
                 total: int | None = None, unit: str = "it", show_after_s: float = 2.0,
                 clock: Callable[[], float] | None = None):
        if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0):
            raise InvalidInputError("seconds", seconds, "a positive number of seconds of work")
        self.seconds, self.refuse, self.clock = float(seconds), refuse, clock or CLOCK
        self.desc, self.total, self.unit, self.show_after_s = desc, total, unit, show_after_s
        self.start = self.clock()
        self._bar: Any = None
        self._shown = 0

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.start

    def tick(self, done: int | None = None) -> None:
        """One pass of the loop: raise the refusal past the budget; show or move the bar."""
        elapsed = self.elapsed_s
        if elapsed > self.seconds:
            self.close()
            raise self.refuse(elapsed)
        if done is None or elapsed < self.show_after_s:
            return
        if self._bar is None:
            self._bar = bar(self.total, self.desc, unit=self.unit)
        if done > self._shown:
            self._bar.update(done - self._shown)
            self._shown = done

    def close(self) -> None:
        """Take the bar away (a run that ends, or is refused)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> WorkBudget:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
