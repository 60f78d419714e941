"""Reading YAML and JSON data files safely: every problem becomes a ProfileError naming file and
field, and no file can make the loader hang or eat memory.

Limits are checked while parsing, before any validation: the file's size (1 MB), its nesting
depth (32) and its node count; YAML anchors and aliases are refused (a 333-byte alias "bomb"
expands to gigabytes). Numbers follow YAML 1.2: `1e12` is a float, `1:30:00` is text (YAML 1.1
read it as the sexagesimal 5400), and only `true`/`false` are booleans. Error messages show a
value cut short, never its full repr.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from pydantic import BaseModel, BeforeValidator, PrivateAttr, ValidationError

from ..errors import InvalidInputError, ProfileError, short_repr

if TYPE_CHECKING:
    from typing_extensions import Self

MAX_FILE_BYTES = 1_000_000  # a profile is a few kB; refuse anything absurd before parsing
MAX_DEPTH = 32              # the deepest bundled file nests 4 levels; HF configs about 4
MAX_NODES = 50_000          # scalars + collections in one file (the largest bundled: a few hundred)


# The safe loader with YAML 1.2 scalars; libyaml's (C) parser where PyYAML has it: the pure-Python
# one takes ~15 s over a 1 MB file of small values, the C one a fraction of a second.
# (typed as the pure-Python SafeLoader: the C one has the same resolver interface)
_Loader = cast("type[yaml.SafeLoader]", type("_Loader", (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader,), {}))
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool")
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"),
                              list("-+0123456789"))
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+.0123456789"))


MAX_INT_DIGITS = 400        # 1e308 is the largest float: an integer of more digits is no quantity


def _mapping_once(loader, node, deep=False):
    """A YAML mapping whose keys are each written once (a repeated key kept only its last value)."""
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            again = key in seen
        except TypeError:          # an unhashable key: the base constructor says so
            break
        if again:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {short_repr(key)} is written twice (lines {seen[key]} and "
                f"{key_node.start_mark.line + 1}): expected each key once", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


def _int_bounded(loader, node):
    """A YAML integer of at most MAX_INT_DIGITS digits (Python refuses to read one of over 4,300
    with a ValueError, and no field holds one of even 400)."""
    text = loader.construct_scalar(node)
    if sum(c.isdigit() for c in text) > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {sum(c.isdigit() for c in text):,} digits: expected a number of at most "
            f"{MAX_INT_DIGITS} digits", node.start_mark)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.construct_mapping = _mapping_once    # type: ignore[method-assign]
_Loader.add_constructor("tag:yaml.org,2002:int", _int_bounded)


def _check_events(text: str) -> str | None:
    """What is wrong with the document's shape (anchors, aliases, depth, size), found from the
    parser's events alone, before anything is built; None when it may be loaded."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_Loader):
        where = f" (line {event.start_mark.line + 1})" if event.start_mark is not None else ""
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            return "anchors (&name) and aliases (*name) are not allowed in data files; write each value out" + where
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            nodes += 1
            if nodes > MAX_NODES:
                return f"more than {MAX_NODES} values" + where
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels" + where
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _sized_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ProfileError(str(path), "<file>", f"is {size} bytes; expected at most {MAX_FILE_BYTES}")
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)   # the file may have grown since stat()
    except OSError as e:
        raise ProfileError(str(path), "<file>", f"cannot be read: {e.strerror or e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ProfileError(str(path), "<file>", f"is over {MAX_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileError(str(path), "<file>", "is not UTF-8 text") from None


def read_yaml(path: str | Path) -> dict:
    """Parse one YAML mapping with the bounded safe loader (no Python object tags, no aliases)."""
    path = Path(path)
    text = _sized_text(path)
    try:
        problem = _check_events(text)
        if problem:
            raise ProfileError(str(path), "<yaml>", problem)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as e:
        if "nesting depth" in str(e):    # libyaml's own limit, met while scanning ahead
            raise ProfileError(str(path), "<yaml>", f"nested deeper than {MAX_DEPTH} levels") from None
        raise ProfileError(str(path), "<yaml>", f"malformed YAML: {e}".replace("\n", " ")[:300]) from None
    if not isinstance(data, dict):
        raise ProfileError(str(path), "<top>", f"expected a mapping of fields, got {type(data).__name__}")
    return data


def _depth_ok(data, limit: int) -> bool:
    """Whether `data` (parsed JSON) nests at most `limit` levels; iterative, so any depth is safe."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return True


def parse_json(text: str, source: str, field: str = "<json>"):
    """Parse JSON text with the same limits as the files: bounded depth, no NaN/Infinity."""
    def no_constant(name):
        raise ValueError(f"{name} is not a JSON number")

    def bounded_int(digits: str) -> int:
        if sum(c.isdigit() for c in digits) > MAX_INT_DIGITS:
            raise ValueError(f"an integer of {len(digits):,} digits: expected at most {MAX_INT_DIGITS}")
        return int(digits)

    def once(pairs):
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"key {short_repr(k)} is written twice: expected each key once")
            out[k] = v
        return out
    try:
        data = json.loads(text, parse_constant=no_constant, parse_int=bounded_int, object_pairs_hook=once)
    except RecursionError:
        raise ProfileError(source, field, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise ProfileError(source, field, f"malformed JSON: {str(e)[:200]}") from None
    if not _depth_ok(data, MAX_DEPTH):
        raise ProfileError(source, field, f"nested deeper than {MAX_DEPTH} levels")
    return data


def read_json(path: str | Path):
    """Parse one JSON file (size, depth and UTF-8 checked first)."""
    path = Path(path)
    return parse_json(_sized_text(path), str(path))


def _no_bool(v):
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r} (true/false is not a number)")
    return v


Number = BeforeValidator(_no_bool)
"""Annotate a float/int field with it so `true` is refused instead of read as 1."""


def validate(schema: type[BaseModel], data, source: str):
    """Build `schema` from `data`, turning pydantic's errors into one ProfileError."""
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        field, value, msg = _first_error(errors[0])
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise ProfileError(source, field, f"value {_shown(value)}: {msg}{more}") from None
    except InvalidInputError as e:     # the same, from a schema whose constructor reports its own field
        raise ProfileError(source, e.field, f"value {_shown(e.value)}: {e.expected}") from None
    except (TypeError, ValueError, ArithmeticError) as e:  # validators that raise outside pydantic
        raise ProfileError(source, "<top>", str(e)[:300]) from None


def invalid_input(e: ValidationError, where: str | None = None) -> InvalidInputError:
    """pydantic's first error as the InvalidInputError a caller who built the object by hand gets
    (a validator's own InvalidInputError as it was raised): the field's dotted path, its value and
    what was expected."""
    err = e.errors()[0]
    orig = (err.get("ctx") or {}).get("error")
    if isinstance(orig, InvalidInputError):
        return orig
    return InvalidInputError(*_first_error(err), where=where)


def _first_error(err) -> tuple[str, Any, str]:
    """(the field's dotted path, its value, what was expected) of one pydantic error."""
    return ".".join(str(p) for p in err["loc"]) or "<top>", err.get("input"), err["msg"].removeprefix("Value error, ")


def _shown(value) -> str:
    """A value as an error message shows it (a mapping as {...})."""
    return "{...}" if isinstance(value, dict) else short_repr(value)


class HashableModel(BaseModel):
    """A frozen pydantic model with dict fields that still hashes (by content), so it can be
    a cache key; the hash is computed once per instance. Built by hand (`Hardware(...)`,
    `Runtime(...)`), a bad field raises InvalidInputError naming it (`invalid_input`); a data
    file's loader (`validate`) reports the file instead."""

    _hash: int | None = PrivateAttr(default=None)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as e:
            name = data.get("name")
            raise invalid_input(e, name if isinstance(name, str) else type(self).__name__) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, validated again (pydantic's own copy would take any value: a
        negative bandwidth, a fraction of 7), so a bad field raises InvalidInputError naming it."""
        if not update:
            return super().model_copy(deep=deep)
        return type(self)(**{**self.model_dump(), **update})

    def __hash__(self) -> int:
        # direct: pydantic's __getattr__ is slow on hot paths (set, as the model has a private attribute)
        private: dict[str, Any] = self.__pydantic_private__  # type: ignore[assignment]
        if private.get("_hash") is None:
            private["_hash"] = hash((type(self).__name__, self.model_dump_json()))
        return private["_hash"]

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.model_dump() == other.model_dump()
