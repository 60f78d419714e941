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
  `run` answers None (the caller evaluates cold);
- where the workload inputs have ranges (`Span`: counts as floats), an operation whose result the
  ranges fix is not written: x + 0.0 is x, x * 0.0 is 0.0, a comparison is its bool, max / min /
  `where` the side the ranges pick, each the float every value in range gives (`Span` says why);
  the plan raises for an input outside its range.
A workload value the physics branches on in Python (`if x:`) or converts (`float(x)`) cannot be
traced: `trace` answers None and the configuration stays on the cold path.

A plan shared by configurations of one structure (`trace_shared`): the configuration's numbers
that may differ among such configurations (`base.stacking.numbers`: those a sweep stacks as
columns, never branched on) are Syms too, without ranges, so that an operation on them is a line,
not a constant; the lines that read them alone are the maker's, run once per configuration, and
the plan reads their values by name. The figures are the evaluation's for the same reasons: the
same operations in the same order on the same floats, wherever they run.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


class Untraceable(Exception):
    """The traced function used a workload value in a way a plan cannot write down."""


_MAX_INLINE = 240   # the longest expression put inline into the one line that reads it (characters)
_TEMPLATE_MIN = 8   # an output dict of at least this many entries is built as a copy of a constant dict
                    # holding its constant entries, its other entries stored into it (a dict display
                    # adds its entries one by one, resizing as it grows: 22 entries 1.08 us, as a copy
                    # and 11 stores 0.45 us)


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

    def emit(self, pattern: str, *operands: Any, real: bool = False, span: Span | None = None) -> Sym:
        """The Sym of `pattern` ('{0} + {1}': its operands by position) on `operands`; real: its
        value is known to be a Python float; span: the range it is known to lie in (`Span`)."""
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
        s = Sym(self, f"v{len(self.nodes)}", real or span is not None, span)
        self.nodes.append((s.name, template, key[1]))
        self.memo[key] = s
        return s


Span = tuple[float, float]
"""[lo, hi]: a value known to be a finite float from lo to hi, both >= 0, and never -0.0 or NaN in
any call (a workload count as a float: `trace`'s spans). Each operation on such values whose result
is one again carries its span: the operation's own float arithmetic on the ends, which bounds every
result because IEEE rounding is monotonic (x <= x' gives fl(x + y) <= fl(x' + y); likewise for
*, and for / and - in each argument's direction). With spans, an operation whose float result is
the same for every value in range is that result, not a line (a fold, exact for each such value):
x + 0.0 is x (x is not -0.0), x * 0.0 and 0.0 / x (lo > 0) are +0.0 (x is finite and not
negative), abs(x) is x, a comparison whose ranges do not overlap is its bool, and max, min and
`where` whose answer the ranges decide are that answer. The physics then folds what follows on
plain floats (a single chip's communication, 0.0 * bytes, is 0.0, and each term it feeds)."""


def _span(x: Any) -> Span | None:
    """The Span of an operand: a Sym's, a constant's (a finite float >= +0.0, or an int a float holds
    exactly), else None."""
    t = x.__class__
    if t is Sym:
        return x.span
    if t is float:
        return (x, x) if 0.0 <= x < math.inf and math.copysign(1.0, x) > 0 else None
    if t is int:
        return (float(x), float(x)) if 0 <= x <= 2**53 else None
    return None


def _zero(x: Any) -> bool:
    """Whether operand `x` is the constant +0.0 (or int 0)."""
    return (x.__class__ is float or x.__class__ is int) and x == 0 and math.copysign(1.0, x) > 0


def _finite(lo: float, hi: float) -> Span | None:
    return (lo, hi) if hi < math.inf else None


_SPANS: dict[str, Callable[[Span, Span], Span | None]] = {
    "+": lambda a, b: _finite(a[0] + b[0], a[1] + b[1]),
    "*": lambda a, b: _finite(a[0] * b[0], a[1] * b[1]),
    "-": lambda a, b: _finite(a[0] - b[1], a[1] - b[0]) if a[0] >= b[1] else None,      # never below +0.0
    "/": lambda a, b: _finite(a[0] / b[1], a[1] / b[0]) if b[0] > 0.0 else None,
}


def _fold(op: str, a: Any, b: Any) -> Any:
    """`a op b`'s value where spans give it for every value in range (`Span`): a Sym or a float; else
    None."""
    if op == "+":
        if _zero(b) and _span(a) is not None:
            return a
        if _zero(a) and _span(b) is not None:
            return b
    elif op == "*":
        if (_zero(b) and _span(a) is not None) or (_zero(a) and _span(b) is not None):
            return 0.0
    elif op == "/":
        sb = _span(b)
        if _zero(a) and sb is not None and sb[0] > 0.0:
            return 0.0
    return None


def _operation(op: str, a: Any, b: Any, real: bool, tape: _Tape) -> Any:
    """`a op b` (one of them a Sym of `tape`): its fold, else its line, with its span."""
    folded = _fold(op, a, b)
    if folded is not None:
        return folded
    sa, sb = _span(a), _span(b)
    span = _SPANS[op](sa, sb) if sa is not None and sb is not None and op in _SPANS else None
    return tape.emit(f"{{0}} {op} {{1}}", a, b, real=real, span=span)


_DECIDED: dict[str, Callable[[Span, Span], bool | None]] = {
    ">": lambda a, b: True if a[0] > b[1] else False if a[1] <= b[0] else None,
    ">=": lambda a, b: True if a[0] >= b[1] else False if a[1] < b[0] else None,
    "<": lambda a, b: True if a[1] < b[0] else False if a[0] >= b[1] else None,
    "<=": lambda a, b: True if a[1] <= b[0] else False if a[0] > b[1] else None,
}
"""A comparison of two spans: its bool where it is the same for every pair of values in range."""


def _decided(op: str, a: Any, b: Any) -> bool | None:
    sa, sb = _span(a), _span(b)
    return _DECIDED[op](sa, sb) if sa is not None and sb is not None else None


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
        return _operation(op, self, other, result_real(self, other), self.tape)

    def reflected(self, other):
        if left_identity and self.real and other.__class__ is float and other == identity \
                and not math.copysign(1.0, other) < 0:
            return self
        return _operation(op, other, self, result_real(other, self), self.tape)
    return forward, reflected


def _comparison(op: str):
    """The operator `op` on a Sym and another operand, the Sym on the left: its bool where the
    operands' spans decide it (`_DECIDED`)."""
    def forward(self, other):
        decided = _decided(op, self, other) if op in _DECIDED else None
        if decided is not None:
            return decided
        return self.tape.emit(f"{{0}} {op} {{1}}", self, other)
    return forward


def _logical(op: str):
    def forward(self, other):
        return self.tape.emit(f"{{0}} {op} {{1}}", self, other)

    def reflected(self, other):
        return self.tape.emit(f"{{0}} {op} {{1}}", other, self)
    return forward, reflected


class Sym:
    """A float of the workload in a trace: each operation on it writes a line of the plan."""

    __slots__ = ("tape", "name", "real", "span", "truth")
    __hash__ = None     # type: ignore[assignment]   # == writes a line; it is not a key

    def __init__(self, tape: _Tape, name: str, real: bool = False, span: Span | None = None,
                 truth: bool | None = None):
        self.tape, self.name, self.real, self.span, self.truth = tape, name, real, span, truth

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
        if self.span is not None:
            return self         # a float >= +0.0
        return self.tape.emit("abs({0})", self, real=self.real)

    def __bool__(self):
        if self.truth is None:
            raise Untraceable("a branch on a workload value")
        return self.truth       # a parameter whose truth is the same for every configuration of the plan

    def __float__(self):
        raise Untraceable("float() of a workload value")

    def __index__(self):
        raise Untraceable("an integer of a workload value")

    # numpy's entry points, which the physics's broadcasting helpers call on anything not a float:
    # each written as the float path's operation (roofline.maximum, minimum, where, floor, ceiling)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise Untraceable(f"numpy {ufunc.__name__}.{method}")
        if ufunc is np.maximum or ufunc is np.minimum:
            a, b = inputs
            op, pick = (">", max) if ufunc is np.maximum else ("<", min)
            decided = _decided(op, b, a)
            if decided is not None:
                return b if decided else a
            sa, sb = _span(a), _span(b)
            span = (pick(sa[0], sb[0]), pick(sa[1], sb[1])) if sa is not None and sb is not None else None
            return self.tape.emit(f"{{1}} if {{1}} {op} {{0}} else {{0}}", a, b, real=_real(a, b), span=span)
        if ufunc is np.floor or ufunc is np.ceil:
            whole = math.floor if ufunc is np.floor else math.ceil
            sx = _span(inputs[0])
            span = None if sx is None else (float(whole(sx[0])), float(whole(sx[1])))
            return self.tape.emit(f"float(_{whole.__name__}({{0}}))", *inputs, real=True, span=span)
        raise Untraceable(f"numpy {ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and len(args) == 3 and not kwargs:
            cond, a, b = args
            if cond.__class__ is bool or cond.__class__ is np.bool_:
                return a if cond else b
            if a is b or (a.__class__ is float is b.__class__ and a == b
                          and math.copysign(1.0, a) == math.copysign(1.0, b)):
                return a        # the same float either way
            sa, sb = _span(a), _span(b)
            span = (min(sa[0], sb[0]), max(sa[1], sb[1])) if sa is not None and sb is not None else None
            return self.tape.emit("{1} if {0} else {2}", cond, a, b, real=_real(a, b), span=span)
        raise Untraceable(f"numpy {getattr(func, '__name__', func)}")


def trace(fn: Callable[..., Any], names: tuple[str, ...], real: tuple[bool, ...] | None = None,
          spans: tuple[Span | None, ...] | None = None) -> Callable[..., Any] | None:
    """The plan of `fn` (called with one Sym per name in `names`): a compiled function of those
    arguments that returns what `fn` returns (dicts, lists and plain tuples rebuilt; floats, bools
    and other objects as `fn` gave them), or None where `fn` cannot be traced. real: whether each
    argument is a Python float (default: each is); one that is not (an int) has no float identities
    (`x * 1.0` is a float, not the int x). spans: each argument's range (`Span`: a float from lo to
    hi, never -0.0, such as a count as a float) or None; the plan raises ValueError for an argument
    outside its range (`run` answers None)."""
    return _traced(fn, names, real, spans, ())


def trace_shared(fn: Callable[..., Any], names: tuple[str, ...], params: tuple[bool, ...],
                 real: tuple[bool, ...] | None = None, spans: tuple[Span | None, ...] | None = None,
                 truths: tuple[bool | None, ...] | None = None) -> Callable[..., Callable[..., Any]] | None:
    """`trace` of `fn(*workload, *params)` whose configuration's own numbers are arguments too: the
    plan shared by every configuration of one structure (`base.stacking.structure`: they differ
    only in numbers), or None where `fn` cannot be traced so. params: one entry per parameter,
    whether it is a Python float (a number: arithmetic on it writes lines) or any object (a label:
    it may only be returned). truths: one entry per parameter, None, or its truth (bool(value)),
    the same for every configuration the plan serves (the caller's key holds it): a branch on that
    parameter itself (`if x:`) takes that side. The answer is a maker: maker(*param_values) runs once per
    configuration what depends on its parameters alone (the lines a plan of that configuration
    alone would have done while tracing, the same operations in the same order) and answers its
    plan, a function of the workload `names` as `trace`'s. A line that raises for a configuration's
    values raises from the maker (ArithmeticError, ValueError): the caller evaluates that
    configuration cold."""
    return _traced(fn, names, real, spans, params, truths)


def _traced(fn: Callable[..., Any], names: tuple[str, ...], real: tuple[bool, ...] | None,
            spans: tuple[Span | None, ...] | None, params: tuple[bool, ...],
            truths: tuple[bool | None, ...] | None = None) -> Callable[..., Any] | None:
    tape = _Tape()
    given = spans or (None,) * len(names)
    inputs = [Sym(tape, name, True if real is None else real[i], given[i]) for i, name in enumerate(names)]
    symbols = [Sym(tape, f"P{i}", is_float, truth=None if truths is None else truths[i])
               for i, is_float in enumerate(params)]
    try:
        out = fn(*inputs, *symbols)
    except (Untraceable, TypeError, ValueError, ArithmeticError, AttributeError):
        return None
    return _compile(tape, names, out, given, tuple(s.name for s in symbols))


def _compile(tape: _Tape, names: tuple[str, ...], out: Any, spans: tuple[Span | None, ...],
             params: tuple[str, ...] = ()) -> Callable[..., Any] | None:
    """The plan of a trace (`trace`), or with `params` its maker (`trace_shared`): the lines that
    read a workload input are the plan's; those that read parameters alone are the maker's, each
    computed once per configuration (a name the plan reads), never inlined into a plan's line."""
    templates = {name: (template, deps) for name, template, deps in tape.nodes}
    level: dict[str, int] = {**{name: 1 for name in names}, **{name: 0 for name in params}}
    for name, _, deps in tape.nodes:     # 1: reads the workload; 0: the parameters alone
        level[name] = max((level[d] for d in deps), default=0)
    uses: dict[str, int] = {}
    read_by_plan: set[str] = set()
    pending: list[str] = []

    def use(name: str, reader: int = 1) -> None:
        if name in templates and name not in uses:
            pending.append(name)
        uses[name] = uses.get(name, 0) + 1
        if reader:
            read_by_plan.add(name)
    try:
        _walk(out, tape, use)
    except Untraceable:
        return None
    while pending:      # the lines the outputs read, with how often each is read (a template may
        reader = pending.pop()         # read an operand twice: max's `b if b > a else a`)
        template, deps = templates[reader]
        for i, d in enumerate(deps):
            for _ in range(template.count(f"{{{i}}}")):
                use(d, level[reader])
    rendered: dict[str, str] = {name: name for name in (*names, *params)}
    ranges = [f"{span[0]!r} <= {name} <= {span[1]!r}" for name, span in zip(names, spans) if span is not None]
    lines = [f"    if not ({' and '.join(ranges)}):\n        raise ValueError('a workload outside the plan')"] \
        if ranges else []
    made: list[str] = []      # the maker's lines
    for name, template, deps in tape.nodes:
        if name not in uses:
            continue        # read by no output
        text = template.format(*(f"({rendered[d]})" if rendered[d] != d else d for d in deps))
        if uses[name] == 1 and len(text) <= _MAX_INLINE and (level[name] or name not in read_by_plan):
            rendered[name] = text       # inline in the one expression that reads it
        elif level[name]:
            lines.append(f"    {name} = {text}")
            rendered[name] = name
        else:
            made.append(f"    {name} = {text}")
            rendered[name] = name
    body = _walk(out, tape, lambda name: None, rendered, lines, made if params else None, level)
    source = f"def plan({', '.join(names)}):\n" + "\n".join(lines) + f"\n    return {body}\n"
    if params:
        source = f"def make({', '.join(params)}):\n" + "".join(f"{line}\n" for line in made) \
            + "".join(f"    {line}\n" for line in source.splitlines()) + "    return plan\n"
    namespace: dict[str, Any] = {"_floor": math.floor, "_ceil": math.ceil, **tape.consts}
    try:
        exec(compile(source, "<membound plan>", "exec"), namespace)    # noqa: S102 -- our own lines
    except (SyntaxError, RecursionError, MemoryError):
        return None
    plan = namespace["make" if params else "plan"]
    plan.source = source
    return plan


def _walk(x: Any, tape: _Tape, use: Callable[[str], None], rendered: dict[str, str] | None = None,
          lines: list[str] | None = None, made: list[str] | None = None, level: dict[str, int] | None = None
          ) -> str:
    """The expression that rebuilds output `x` (calling `use` on each Sym it reads); with `lines`, a
    large dict is built by lines appended there (`_TEMPLATE_MIN`), the expression its name; with
    `made` (a maker's lines) and each Sym's `level`, its template is built there, once per
    configuration, holding what reads the parameters alone."""
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
        if lines is not None and len(x) >= _TEMPLATE_MIN:
            return _dict_lines(x, tape, use, rendered, lines, made, level)
        return "{" + ", ".join(f"{k!r}: {_walk(v, tape, use, rendered, lines, made, level)}" for k, v in x.items()) \
            + "}"
    if t is list:
        return "[" + ", ".join(_walk(v, tape, use, rendered, lines, made, level) for v in x) + "]"
    if t is tuple:
        return "(" + "".join(f"{_walk(v, tape, use, rendered, lines, made, level)}, " for v in x) + ")"
    if x is None or t is bool or t is str:
        return repr(x)
    if t is float or t is int:
        return tape.ref(x)[0]
    return tape.const(x)


def _dict_lines(x: dict[str, Any], tape: _Tape, use: Callable[[str], None], rendered: dict[str, str] | None,
                lines: list[str], made: list[str] | None, level: dict[str, int] | None) -> str:
    """`_walk` of dict `x` as lines: a copy of a constant dict of x's keys in x's order, holding each
    entry that may be one object in every call (`_shared`: a str, number, bool, None, other
    constant, or a tuple of them) and None for the others, which lines then store (a new list, tuple
    or dict each call, or a Sym's value). With `made` (a maker's lines), the dict copied is built
    there, once per configuration, and holds the entries that read parameters alone too (a tuple
    of them, or a Sym of `level` 0)."""
    template: dict[str, Any] = {}
    stores: list[tuple[str, str]] = []
    held: list[tuple[str, str]] = []
    for k, v in x.items():
        if _shared(v):
            template[k] = v
        elif made is not None and level is not None and _made(v, level):
            template[k] = None
            held.append((k, _walk(v, tape, use, rendered)))
        else:
            template[k] = None
            stores.append((k, _walk(v, tape, use, rendered, lines, made, level)))
    name = f"_d{len(lines)}"
    if made is None:
        lines.append(f"    {name} = {tape.const(template)}.copy()")
    else:
        made.append(f"    _t{name} = {tape.const(template)}.copy()")
        made.extend(f"    _t{name}[{k!r}] = {text}" for k, text in held)
        lines.append(f"    {name} = _t{name}.copy()")
    lines.extend(f"    {name}[{k!r}] = {text}" for k, text in stores)
    return name


def _shared(x: Any) -> bool:
    """Whether output `x` may be one object in every call: no Sym, list or dict in it."""
    t = x.__class__
    if t is tuple:
        return all(map(_shared, x))
    return t is not Sym and t is not dict and t is not list


def _made(x: Any, level: dict[str, int]) -> bool:
    """Whether output `x` may be one object for a configuration, built by its maker: a Sym that reads
    parameters alone, or a tuple of such and of `_shared` values."""
    if x.__class__ is Sym:
        return level[x.name] == 0
    if x.__class__ is tuple:
        return all(_shared(v) or _made(v, level) for v in x)
    return False


def run(plan: Callable[..., Any], *args: float) -> Any:
    """plan(*args), or None where one of its lines raised (an untaken `where` side that floats do not
    take: the caller evaluates cold, which gives its own answer or error)."""
    try:
        return plan(*args)
    except (ArithmeticError, ValueError):
        return None
