"""Reading YAML data files safely: every problem becomes a ProfileError naming file and field."""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, PrivateAttr, ValidationError

from .errors import ProfileError

MAX_FILE_BYTES = 1_000_000  # a profile is a few kB; refuse anything absurd before parsing


def read_yaml(path: "str | Path") -> dict:
    """Parse one YAML mapping with the safe loader (no Python object tags)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ProfileError(str(path), "<file>", f"cannot be read: {e.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise ProfileError(str(path), "<file>", f"is {size} bytes; expected at most {MAX_FILE_BYTES}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ProfileError(str(path), "<file>", "is not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise ProfileError(str(path), "<yaml>", f"malformed YAML: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise ProfileError(str(path), "<top>", f"expected a mapping of fields, got {type(data).__name__}")
    return data


def validate(schema: type[BaseModel], data, source: str):
    """Build `schema` from `data`, turning pydantic's errors into one ProfileError."""
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<top>"
        value = err.get("input")
        shown = repr(value) if not isinstance(value, dict) else "{...}"
        if len(shown) > 80:
            shown = shown[:77] + "..."
        more = f" (and {len(e.errors()) - 1} more problems)" if len(e.errors()) > 1 else ""
        raise ProfileError(source, field, f"value {shown}: {err['msg']}{more}") from None
    except (TypeError, ValueError, ArithmeticError) as e:  # validators that raise outside pydantic
        raise ProfileError(source, "<top>", str(e)) from None


class HashableModel(BaseModel):
    """A frozen pydantic model with dict fields that still hashes (by content), so it can be
    a cache key; the hash is computed once per instance."""

    _hash: int | None = PrivateAttr(default=None)

    def __hash__(self) -> int:
        private = self.__pydantic_private__   # direct: pydantic's __getattr__ is slow on hot paths
        if private.get("_hash") is None:
            private["_hash"] = hash((type(self).__name__, self.model_dump_json()))
        return private["_hash"]

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.model_dump() == other.model_dump()
