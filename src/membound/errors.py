"""The library's exception hierarchy: every error names the field, the value and what was expected."""
from __future__ import annotations

import math
import numbers
import reprlib
import importlib.util

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxlong, _SHORT.maxother = 2, 60, 40, 60
_SHORT.maxtuple = _SHORT.maxlist = _SHORT.maxarray = _SHORT.maxdict = _SHORT.maxset = 4
_SHORT.maxfrozenset = _SHORT.maxdeque = 4


def short_repr(value, limit: int = 80) -> str:
    """repr() of `value` cut short (containers to a few items, long text and integers
    elided), so an error message never carries, or spends time building, a huge value."""
    try:
        shown = _SHORT.repr(value)
    except Exception:  # a hostile __repr__: say what it is instead
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def is_finite_number(value) -> bool:
    """A real number, not a bool, that a float holds finitely: an integer too large for a float
    (10**400, where math.isfinite raises OverflowError) is not one."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class MemboundError(Exception):
    """Base class of every error membound raises on purpose."""


class InvalidInputError(MemboundError, ValueError):
    """A value given by the caller is out of range or of the wrong kind."""

    def __init__(self, field: str, value, expected: str, where: str | None = None):
        self.field, self.value, self.expected, self.where = field, value, expected, where
        place = f"{where}: " if where else ""
        super().__init__(f"{place}{field}={short_repr(value)} is invalid: expected {expected}")

    def __reduce__(self):
        return (type(self), (self.field, self.value, self.expected, self.where))


class UnknownNameError(MemboundError, KeyError):
    """A model, device, dtype or runtime name that is not registered. The message is one line:
    the nearest known names (`suggestions`, which the name resolver, membound.catalog.names, passes),
    never the whole catalogue. errors sits below every layer and imports nothing of membound."""

    def __init__(self, kind: str, name, known, suggestions=()):
        self.kind, self.name, self.known = kind, name, sorted(known)
        self.suggestions = list(suggestions)
        quoted = [repr(s) for s in self.suggestions]
        hint = ""
        if quoted:
            hint = ": did you mean " + (", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1
                                        else quoted[0]) + "?"
        lister = {"hardware": "list_hardware()", "model": "list_models()", "runtime": "list_runtimes()",
                  "dtype": "list_dtypes()"}.get(kind, "the catalogue")
        super().__init__(f"unknown {kind} {short_repr(name)}{hint} ({len(self.known)} known; {lister} lists them)")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]

    def __reduce__(self):
        return (type(self), (self.kind, self.name, self.known, self.suggestions))


class MissingExtraError(MemboundError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it.
    Raised before any work starts (`require`)."""

    def __init__(self, module: str, extra: str, what: str):
        self.module, self.extra, self.what = module, extra, what
        super().__init__(f"{what} needs {module}: pip install 'membound[{extra}]'")

    def __reduce__(self):
        return (type(self), (self.module, self.extra, self.what))


def require(module: str, extra: str, what: str) -> None:
    """MissingExtraError in one line naming `pip install 'membound[extra]'` where `module` cannot be
    imported: called first thing by whatever needs it, so nothing is computed in vain."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(module, extra, what)


class ProfileError(MemboundError, ValueError):
    """A data file (hardware profile, model config, runtime) is malformed."""

    def __init__(self, source: str, field: str, problem: str):
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: field {field!r}: {problem}")

    def __reduce__(self):
        return (type(self), (self.source, self.field, self.problem))


def _gb(n_bytes: float) -> str:
    """Gigabytes to two decimals; past 1e12 GB (a head of 1e300 parameters) in powers of ten,
    not 300 digits."""
    gb = n_bytes / 1e9
    return f"{gb:.2f}" if abs(gb) < 1e12 else f"{gb:.3g}"


class DoesNotFitError(MemboundError):
    """The model (with its KV cache) does not fit in the devices' memory."""

    def __init__(self, needed_bytes: float, capacity_bytes: float, chips_needed: int | None,
                 detail: str = ""):
        self.needed_bytes, self.capacity_bytes = float(needed_bytes), float(capacity_bytes)
        self.missing_bytes = self.needed_bytes - self.capacity_bytes
        self.chips_needed, self.detail = chips_needed, detail
        shown = f"{float(chips_needed):.3g}" if chips_needed and chips_needed >= 10**12 else f"{chips_needed}"
        chips = f"; {shown} chips would hold it" if chips_needed else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"does not fit: needs {_gb(self.needed_bytes)} GB but capacity is "
            f"{_gb(self.capacity_bytes)} GB, {_gb(self.missing_bytes)} GB missing"
            f"{chips}{extra}")

    def __reduce__(self):
        return (type(self), (self.needed_bytes, self.capacity_bytes, self.chips_needed, self.detail))

    def __eq__(self, other):
        return type(self) is type(other) and self.args == other.args

    __hash__ = Exception.__hash__


def _eq(self, other):
    return type(self) is type(other) and self.args == other.args


for _cls in (InvalidInputError, UnknownNameError, ProfileError):
    _cls.__eq__ = _eq                       # type: ignore[method-assign]  # shared, by design
    _cls.__hash__ = Exception.__hash__      # type: ignore[method-assign]
