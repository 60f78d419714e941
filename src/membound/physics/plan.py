"""Plans: the physics of one configuration traced once into straight-line Python (issue 33).

`estimate()` evaluates the same configuration (model, device, runtime, formats, layout) at many
workloads (batch, prompt and output tokens). Everything that does not depend on the workload is
the same in every such evaluation; everything that does is a chain of float operations. `trace`
runs the one implementation of the physics (`core.evaluate`, as it runs for a sweep's arrays)
once with its workload inputs replaced by `Sym`s: each operation on a Sym is written down as one
line of Python, and each operation on plain floats (the configuration's own figures) is done there
and then, its value a constant of the plan. The lines that the outputs read become the body of one
function of the workload, compiled once: a plan.

Why the plan's figures are the evaluation's, bit for bit:
- every line is the operation the physics did, in its order, on the same constants (a float
  constant is written as its repr, which Python reads back to the same float);
- where the physics takes its array path (a Sym is not a float: roofline's `maximum`, `minimum`,
  `where`, `floor`, `ceiling` call numpy), the line is the float path's operation (`b if b > a else
  a`, `a if c else b`, `float(math.floor(x))`): the array path is the float path elementwise
  (base.stacking, tests/test_sweep.py), and the float path is what `estimate()` computes;
- a `where` whose untaken side would have raised or overflowed on floats: the plan raises and
  `run` answers None (the caller evaluates cold).
A workload value the physics branches on in Python (`if x:`) or converts (`float(x)`) cannot be
traced: `trace` answers None and the configuration stays on the cold path.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


class Untraceable(Exception):
    """The traced function used a workload value in a way a plan cannot write down."""


_MAX_INLINE = 240   # the longest expression put inline into the one line that reads it (characters)


class _Tape:
    """The lines a trace writes: for each Sym its expression template ('{0} + 1.5') and the Syms
    it reads, in the order they were made (a topological order)."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, str, tuple[str, ...]]] = []    # (name, template, deps)
        self.memo: dict[tuple[str, tuple[str, ...]], Sym] = {}    # one line per distinct expression
        self.consts: dict[str, Any] = {}                          # names of constants not written as literals
        self.const_ids: dict[int, str] = {}

    def const(self, value: Any) -> str:
        name = self.const_ids.get(id(value))
        if name is None:
            name = f"_k{len(self.consts)}"
            self.consts[name] = value
            self.const_ids[id(value)] = name
        return name

    def ref(self, x: Any) -> tuple[str, Sym | None]:
        """(text, Sym or None) of an operand: a Sym's placeholder, else a constant's literal."""
        if x.__class__ is Sym:
            if x.tape is not self:
                raise Untraceable("a Sym of another trace")
            return "", x
        t = x.__class__
        if t is float:
            if not math.isfinite(x):
                return self.const(x), None
            text = repr(x)
            return (f"({text})" if text.startswith("-") else text), None
        if t is int:
            return (f"({x})" if x < 0 else repr(x)), None
        if t is bool:
            return repr(x), None
        raise Untraceable(f"an operand of type {t.__name__}")

    def emit(self, pattern: str, *operands: Any, real: bool = False) -> Sym:
        """The Sym of `pattern` ('{0} + {1}': its operands by position) on `operands`; real: its
        value is known to be a Python float."""
        texts: list[str] = []
        deps: list[str] = []
        for x in operands:
            text, sym = self.ref(x)
            if sym is not None:
                texts.append(f"{{{len(deps)}}}")
                deps.append(sym.name)
            else:
                texts.append(text)
        template = pattern.format(*texts)
        key = (template, tuple(deps))
        got = self.memo.get(key)
        if got is not None:
            return got
        s = Sym(self, f"v{len(self.nodes)}", real)
        self.nodes.append((s.name, template, key[1]))
        self.memo[key] = s
        return s


def _real(*xs: Any) -> bool:
    """Whether each of `xs` is a Python float (a float Sym, or a float)."""
    return all(x.real if x.__class__ is Sym else x.__class__ is float for x in xs)


def _arithmetic(op: str, identity: float | None = None, left_identity: bool = False):
    """The operator `op` on a Sym and another operand, each way round: a float (a float Sym, or one
    with a float) where the result is one. A float Sym with `identity` on its right (x * 1.0,
    x / 1.0, x - 0.0), or on its left where `left_identity` (1.0 * x), is the Sym itself: the
    same float for every float x (NaN, infinities and -0.0 included)."""
    def result_real(a: Any, b: Any) -> bool:
        return op != "**" and any(x.real if x.__class__ is Sym else x.__class__ is float for x in (a, b))

    def forward(self, other):
        if self.real and other.__class__ is float and other == identity and not math.copysign(1.0, other) < 0:
            return self
        return self.tape.emit(f"{{0}} {op} {{1}}", self, other, real=result_real(self, other))

    def reflected(self, other):
        if left_identity and self.real and other.__class__ is float and other == identity \
                and not math.copysign(1.0, other) < 0:
            return self
        return self.tape.emit(f"{{0}} {op} {{1}}", other, self, real=result_real(other, self))
    return forward, reflected


def _comparison(op: str):
    """The operator `op` on a Sym and another operand, the Sym on the left."""
    def forward(self, other):
        return self.tape.emit(f"{{0}} {op} {{1}}", self, other)
    return forward


def _logical(op: str):
    forward = _comparison(op)

    def reflected(self, other):
        return self.tape.emit(f"{{0}} {op} {{1}}", other, self)
    return forward, reflected


class Sym:
    """A float of the workload in a trace: each operation on it writes a line of the plan."""

    __slots__ = ("tape", "name", "real")
    __hash__ = None     # type: ignore[assignment]   # == writes a line; it is not a key

    def __init__(self, tape: _Tape, name: str, real: bool = False):
        self.tape, self.name, self.real = tape, name, real

    __add__, __radd__ = _arithmetic("+")
    __sub__, __rsub__ = _arithmetic("-", 0.0)
    __mul__, __rmul__ = _arithmetic("*", 1.0, left_identity=True)
    __truediv__, __rtruediv__ = _arithmetic("/", 1.0)
    __pow__, __rpow__ = _arithmetic("**")
    __and__, __rand__ = _logical("&")
    __or__, __ror__ = _logical("|")

    __lt__, __le__, __gt__, __ge__ = (_comparison(op) for op in ("<", "<=", ">", ">="))
    __eq__, __ne__ = _comparison("=="), _comparison("!=")

    def __neg__(self):
        return self.tape.emit("-{0}", self, real=self.real)

    def __abs__(self):
        return self.tape.emit("abs({0})", self, real=self.real)

    def __bool__(self):
        raise Untraceable("a branch on a workload value")

    def __float__(self):
        raise Untraceable("float() of a workload value")

    def __index__(self):
        raise Untraceable("an integer of a workload value")

    # numpy's entry points, which the physics's broadcasting helpers call on anything not a float:
    # each written as the float path's operation (roofline.maximum, minimum, where, floor, ceiling)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise Untraceable(f"numpy {ufunc.__name__}.{method}")
        if ufunc is np.maximum:
            return self.tape.emit("{1} if {1} > {0} else {0}", *inputs, real=_real(*inputs))
        if ufunc is np.minimum:
            return self.tape.emit("{1} if {1} < {0} else {0}", *inputs, real=_real(*inputs))
        if ufunc is np.floor:
            return self.tape.emit("float(_floor({0}))", *inputs, real=True)
        if ufunc is np.ceil:
            return self.tape.emit("float(_ceil({0}))", *inputs, real=True)
        raise Untraceable(f"numpy {ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and len(args) == 3 and not kwargs:
            cond, a, b = args
            if cond.__class__ is bool or cond.__class__ is np.bool_:
                return a if cond else b
            return self.tape.emit("{1} if {0} else {2}", cond, a, b, real=_real(a, b))
        raise Untraceable(f"numpy {getattr(func, '__name__', func)}")


def trace(fn: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any] | None:
    """The plan of `fn` (called with one float Sym per name in `names`): a compiled function of those
    arguments (floats) that returns what `fn` returns (dicts, lists and plain tuples rebuilt; floats,
    bools and other objects as `fn` gave them), or None where `fn` cannot be traced."""
    tape = _Tape()
    inputs = [Sym(tape, name, True) for name in names]
    try:
        out = fn(*inputs)
    except (Untraceable, TypeError, ValueError, ArithmeticError, AttributeError):
        return None
    return _compile(tape, names, out)


def _compile(tape: _Tape, names: tuple[str, ...], out: Any) -> Callable[..., Any] | None:
    templates = {name: (template, deps) for name, template, deps in tape.nodes}
    uses: dict[str, int] = {}
    pending: list[str] = []

    def use(name: str) -> None:
        if name in templates and name not in uses:
            pending.append(name)
        uses[name] = uses.get(name, 0) + 1
    try:
        _walk(out, tape, use)
    except Untraceable:
        return None
    while pending:      # the lines the outputs read, with how often each is read (a template may
        template, deps = templates[pending.pop()]      # read an operand twice: max's `b if b > a else a`)
        for i, d in enumerate(deps):
            for _ in range(template.count(f"{{{i}}}")):
                use(d)
    rendered: dict[str, str] = {name: name for name in names}
    lines = []
    for name, template, deps in tape.nodes:
        if name not in uses:
            continue        # read by no output
        text = template.format(*(f"({rendered[d]})" if rendered[d] != d else d for d in deps))
        if uses[name] == 1 and len(text) <= _MAX_INLINE:
            rendered[name] = text       # inline in the one expression that reads it
        else:
            lines.append(f"    {name} = {text}")
            rendered[name] = name
    body = _walk(out, tape, lambda name: None, rendered)
    source = f"def plan({', '.join(names)}):\n" + "\n".join(lines) + f"\n    return {body}\n"
    namespace: dict[str, Any] = {"_floor": math.floor, "_ceil": math.ceil, **tape.consts}
    try:
        exec(compile(source, "<membound plan>", "exec"), namespace)    # noqa: S102 -- our own lines
    except (SyntaxError, RecursionError, MemoryError):
        return None
    plan = namespace["plan"]
    plan.source = source
    return plan


def _walk(x: Any, tape: _Tape, use: Callable[[str], None], rendered: dict[str, str] | None = None) -> str:
    """The expression that rebuilds output `x` (calling `use` on each Sym it reads)."""
    if x.__class__ is Sym:
        use(x.name)
        if rendered is None:
            return ""
        text = rendered[x.name]
        return text if text == x.name else f"({text})"
    t = x.__class__
    if t is dict:
        if not all(k.__class__ is str for k in x):
            raise Untraceable("a dict with keys that are not strings")
        return "{" + ", ".join(f"{k!r}: {_walk(v, tape, use, rendered)}" for k, v in x.items()) + "}"
    if t is list:
        return "[" + ", ".join(_walk(v, tape, use, rendered) for v in x) + "]"
    if t is tuple:
        return "(" + "".join(f"{_walk(v, tape, use, rendered)}, " for v in x) + ")"
    if x is None or t is bool or t is str:
        return repr(x)
    if t is float or t is int:
        return tape.ref(x)[0]
    return tape.const(x)


def run(plan: Callable[..., Any], *args: float) -> Any:
    """plan(*args), or None where one of its lines raised (an untaken `where` side that floats do not
    take: the caller evaluates cold, which gives its own answer or error)."""
    try:
        return plan(*args)
    except (ArithmeticError, ValueError):
        return None
