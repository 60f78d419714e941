"""Configurations of one structure evaluated at once, their numbers as columns.

Many configurations share the shape of their arithmetic and differ only in numbers: one model on
several devices, formats or prices. Evaluated together, each number that differs among them is a
numpy column (one entry per configuration) and every other value is shared, so one evaluation does
the work of many, each configuration's figures bit for bit those it gets alone (the same
elementwise arithmetic on the same numbers). `structure` says which configurations may go
together (equal structures), `stack` builds the one object they are evaluated as.

A class whose instances stack says how each of its fields takes part (`stackable`, its decorator):

- shape: a number the evaluation branches on or sizes something by (a layout's ways, a tile, a
  path's threshold), or a value that must be the same object: the configurations share it;
- numbers: only computed with; it may differ, and then becomes a column (a float), or stacks
  item by item (a tuple) or field by field (an object of a stackable class);
- own: each configuration's own, not read by the evaluation of the stack (the first's is kept).

A field its class does not name is shape: a new field costs stacking, never a wrong figure.
tests/test_stacking.py checks that every stackable class names each of its fields once.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class Roles:
    """How a class's fields take part in a stack (see the module's docstring)."""

    shape: frozenset[str]
    numbers: frozenset[str]
    own: frozenset[str] = frozenset()


_ROLES: dict[type, Roles] = {}
_SHAPE, _NUMBERS, _OWN = 0, 1, 2


def stackable(*, shape: str, numbers: str, own: str = "") -> Callable[[T], T]:
    """A class decorator: the class's instances stack, its fields in these roles (space-separated
    names; see the module's docstring)."""
    roles = Roles(frozenset(shape.split()), frozenset(numbers.split()), frozenset(own.split()))

    def mark(cls: T) -> T:
        _ROLES[cls] = roles
        return cls
    return mark


def stackable_classes() -> dict[type, Roles]:
    """Every class marked `stackable` (in the modules imported so far), with its roles."""
    return dict(_ROLES)


def field_names(v: Any) -> tuple[str, ...]:
    """An object's fields: a dataclass's, a named tuple's, else its instance attributes."""
    if dataclasses.is_dataclass(v):
        return tuple(f.name for f in dataclasses.fields(v))
    if isinstance(v, tuple):
        return v._fields   # type: ignore[attr-defined]
    return tuple(vars(v))


_KINDS: dict[Any, tuple[tuple[str, int], ...]] = {}


def _kinds(v: Any, roles: Roles) -> tuple[tuple[str, int], ...]:
    """(field, role) of each of v's fields, in order: cached per class (a dataclass, a named tuple)
    or per class and attribute names (another class, whose instances may differ in them)."""
    t = type(v)
    key: Any = t if dataclasses.is_dataclass(t) or issubclass(t, tuple) else (t, *vars(v))
    kinds = _KINDS.get(key)
    if kinds is None:
        kinds = _KINDS[key] = tuple((n, _NUMBERS if n in roles.numbers else _OWN if n in roles.own else _SHAPE)
                                    for n in field_names(v))
    return kinds


def _value(v: Any) -> Hashable:
    """A shape field's key: a plain value or a numpy scalar as its repr (0.0 and -0.0 apart), a
    tuple item by item, anything else by identity."""
    if v is None or type(v) in (float, int, bool, str) or isinstance(v, np.generic):
        return repr(v)
    if isinstance(v, tuple):
        return type(v), tuple(_value(x) for x in v)
    return id(v)


def structure(v: Any) -> Hashable:
    """What configurations evaluated at once share: a float as the type `float` (any number
    stacks), a plain tuple item by item, an object of a stackable class field by field (its shape
    fields by value, its own ones left out), a plain value (None, bool, int, str) or a numpy scalar
    as itself, anything else by identity. Values of equal structures stack (`stack`)."""
    t = type(v)
    if t is float:
        return float
    if v is None or t in (int, bool, str) or isinstance(v, np.generic):
        return repr(v)
    if t is tuple:
        return tuple(structure(x) for x in v)
    roles = _ROLES.get(t)
    if roles is not None:
        return t, tuple(structure(getattr(v, n)) if k == _NUMBERS else _value(getattr(v, n))
                        for n, k in _kinds(v, roles) if k != _OWN)
    return id(v)


def numbers(v: Any, out: list[float]) -> Hashable:
    """A key of `structure(v)` (two values' keys are equal exactly where their structures are),
    appending to `out` each float that structure stands for by the type `float` (a number that may
    differ among configurations of this structure), in the order of the walk: the numbers of v that
    `with_numbers` puts back, in that order. Faster than `structure` on the fields of a stackable
    class: a float is appended without a call, and a nonzero float of its shape is keyed as a
    1-tuple of itself rather than its repr (0.0 and -0.0 by repr, as there)."""
    t = type(v)
    if t is float:
        out.append(v)
        return float
    if v is None or t in (int, bool, str) or isinstance(v, np.generic):
        return repr(v)
    if t is tuple:
        return tuple([numbers(x, out) for x in v])
    roles = _ROLES.get(t)
    if roles is None:
        return id(v)
    key: list[Hashable] = []
    for n, k in _kinds(v, roles):
        if k == _NUMBERS:
            x = getattr(v, n)
            if x.__class__ is float:        # the common cases, without the call
                out.append(x)
                key.append(float)
            elif x is None:
                key.append("None")
            else:
                key.append(numbers(x, out))
        elif k == _SHAPE:
            x = getattr(v, n)
            key.append((x,) if x.__class__ is float and x else _value(x))
    return t, tuple(key)


def with_numbers(v: Any, values: Iterator[Any]) -> Any:
    """`v` with each float `numbers` walks replaced by the next of `values` (any objects: a trace's
    symbols), the rest v's own; objects of stackable classes copied without running their __init__
    (a dataclass's dict copied, a named tuple rebuilt), so that no check of theirs sees the values."""
    t = type(v)
    if t is float:
        return next(values)
    if v is None or t in (int, bool, str) or isinstance(v, np.generic):
        return v
    if t is tuple:
        return tuple([with_numbers(x, values) for x in v])
    roles = _ROLES.get(t)
    if roles is None:
        return v
    changed = {n: with_numbers(getattr(v, n), values) for n, k in _kinds(v, roles) if k == _NUMBERS}
    return _with_fields(v, changed, checked=False)


def _with_fields(v: Any, changed: dict[str, Any], checked: bool) -> Any:
    """`v` (of a stackable class) with the fields `changed`: a dataclass through its __init__ where
    `checked`, else its dict copied (no check of its sees the values); a named tuple rebuilt; any
    other object copied, then set."""
    if dataclasses.is_dataclass(v):
        if checked:
            return dataclasses.replace(v, **changed)   # type: ignore[type-var]
        out = object.__new__(type(v))
        object.__setattr__(out, "__dict__", {**v.__dict__, **changed})
        return out
    if isinstance(v, tuple):
        return v._replace(**changed)   # type: ignore[attr-defined]
    out = copy.copy(v)
    for n, s in changed.items():
        setattr(out, n, s)
    return out


def _differ(values: Sequence[float]) -> bool:
    """Whether floats differ (0.0 and -0.0 apart)."""
    v0 = values[0]
    return values.count(v0) < len(values) or (
        v0 == 0.0 and any(math.copysign(1.0, v) != math.copysign(1.0, v0) for v in values))


def stack(values: Sequence[Any], column: Callable[[list], np.ndarray]) -> Any:
    """Values of one `structure` as one: a float that differs among them as column(their list),
    one they share as itself; tuples item by item and objects of stackable classes field by field
    (their numbers stacked, the rest the first's); anything else the first's (equal in all)."""
    v0 = values[0]
    t = type(v0)
    if t is float:
        return column(list(values)) if _differ(values) else v0
    if all(v is v0 for v in values):     # one object (the efficiencies of one device and runtime)
        return v0
    if t is tuple:
        items = tuple(stack(list(col), column) for col in zip(*values))
        return v0 if all(x is y for x, y in zip(items, v0)) else items
    roles = _ROLES.get(t)
    if roles is None:
        return v0
    changed = {}
    for n, k in _kinds(v0, roles):
        if k == _NUMBERS:
            s = stack([getattr(v, n) for v in values], column)
            if s is not getattr(v0, n):
                changed[n] = s
    return _with_fields(v0, changed, checked=True) if changed else v0
