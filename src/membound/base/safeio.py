"""Files written safely: output paths checked before any work, CSV cells that no spreadsheet runs.

check_output_path: a path is refused (InvalidInputError naming the option) before a run starts
when the run could not write it at the end: a wrong suffix, a folder, a missing folder, no
write permission.

csv_cell, the formula rule (OWASP "CSV Injection"): a spreadsheet evaluates a cell whose text
begins with =, +, -, @, a tab or a carriage return as a formula. A text cell beginning with one
of them gets a leading single quote (the OWASP mitigation; the quote shows the cell is text).
A cell that is a number keeps its sign: Python numbers (int, float, numpy) are written as they
are, and so is text that is a signed decimal numeral in full (`-5`, `+1.5e3`), since a spreadsheet
reads it as that number, not a formula. `-inf`, `-1+2`, `=1+2`, `@SUM(A1)` or `-cmd|' /C calc'!A0`
are not numerals and are quoted. Reading the CSV back with Python (csv, pandas) gives the
quoted text with its quote: the rule trades that for a file that is safe to open.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError, short_repr
from ..errors import ProfileError
import csv
import numpy as np

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-](\d+\.?\d*|\.\d+)(e[+-]?\d+)?", re.IGNORECASE)   # a signed decimal numeral


def csv_cell(value):
    """`value` as it may go into a CSV cell: text that a spreadsheet would run as a formula
    gets a leading "'"; numbers, and text that is a number in full, are kept (module docstring)."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    if _NUMBER.fullmatch(value):
        return value
    return "'" + value


def csv_row(row):
    """csv_cell applied to every value of a dict row or a sequence row."""
    if isinstance(row, dict):
        return {k: csv_cell(v) for k, v in row.items()}
    return [csv_cell(v) for v in row]


def csv_frame(df):
    """A copy of a pandas DataFrame whose text cells (and column names) pass csv_cell."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    out = df.copy()
    for col in out.columns:
        dtype = out[col].dtype
        if pd.api.types.is_object_dtype(dtype) or isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype)):
            out[col] = out[col].astype(object).map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out


def check_output_path(path, option: str, suffixes: Sequence[str]) -> Path:
    """`path` as a Path when a file can be written there at the end of a run: one of `suffixes`
    (lower-case, with the dot), not a folder, in an existing folder this process may write;
    else InvalidInputError naming `option`."""
    wanted = " or ".join(suffixes)
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise InvalidInputError(option, path, f"a path ending in {wanted}")
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise InvalidInputError(option, str(path), f"a path ending in {wanted}")
    if p.is_dir():
        raise InvalidInputError(option, str(path), "a file name, not a folder")
    if not p.parent.is_dir():
        raise InvalidInputError(option, str(path), f"a file in an existing folder ({p.parent} does not exist)")
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InvalidInputError(option, str(path), "a file this process may write")
    return p


# ---- strict CSV reading: every cell parsed, nothing guessed -----------------------------------

class CellError(ValueError):
    """One cell that is not what its column holds: names the file, row, column and value."""

    def __init__(self, where: str, column: str, value, expected: str):
        self.where, self.column, self.value, self.expected = where, column, value, expected
        super().__init__(f"{where}: column {column!r}: value {short_repr(value)} is not {expected}")


_WHOLE = re.compile(r"\+?[0-9]+(\.0*)?")     # 8, +8, 8.0 (as pandas writes an integer column with gaps)
# a decimal number in ASCII digits (float() also takes "1_000", "１.5" and "٣")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def whole(text: str, where: str, column: str, lo: int, hi: int, what: str) -> int:
    """The whole number `text` states, from lo to hi; CellError for "2.5", "1e9", "nan", words."""
    t = text.strip()
    if not _WHOLE.fullmatch(t) or not lo <= int(float(t)) <= hi:
        raise CellError(where, column, text, f"a whole number of {what} from {lo:,} to {hi:,}")
    return int(float(t))


def real(text: str, where: str, column: str, lo: float, hi: float, what: str) -> float:
    """The finite number `text` states, from lo to hi (an absurd magnitude such as 1e-320 is
    refused by the bounds); CellError for "nan", "inf", words."""
    v = float(text) if _DECIMAL.fullmatch(text.strip()) else math.nan
    if not math.isfinite(v) or not lo <= v <= hi:
        raise CellError(where, column, text, f"a number of {what} from {lo:g} to {hi:g}")
    return v


def check_header(header, source: str, required: Sequence[str]) -> list[str]:
    """The header's column names (an Excel BOM stripped from the first), checked: a file with
    no header, a duplicate column name or a required column missing is a ProfileError."""
    if not header:
        raise ProfileError(source, "<file>", "empty: expected a header row naming " + ", ".join(required))
    names = [str(h).strip() for h in header]
    names[0] = names[0].lstrip("\ufeff")
    seen: set = set()
    for n in names:
        if n in seen:
            raise ProfileError(source, n, "column named twice in the header: expected each column once")
        seen.add(n)
    missing = [c for c in required if c not in seen]
    if missing:
        raise ProfileError(source, missing[0], f"column missing: expected a header row naming {', '.join(required)} "
                           f"(missing: {', '.join(missing)})")
    return names


def read_csv_rows(path, required: Sequence[str]) -> tuple[list[str], list[tuple[int, dict]]]:
    """(header, [(line, row dict)]) of a CSV file read with the csv module in strict mode:
    UTF-8 with or without a BOM; a file that is empty, not text, has an unterminated quote or
    a header check failure is a ProfileError of one line. A row with more or fewer cells than
    the header comes back with the key "__cells__" holding its count (the caller skips it)."""

    source = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, strict=True)
            header = check_header(next(reader, None), source, required)
            rows = []
            for cells in reader:
                if not any(c.strip() for c in cells):
                    continue
                row = dict(zip(header, cells))
                if len(cells) != len(header):
                    row["__cells__"] = str(len(cells))
                rows.append((reader.line_num, row))
    except (UnicodeDecodeError, csv.Error) as e:
        raise ProfileError(source, "<file>", f"not a CSV file of UTF-8 text ({short_repr(str(e))})") from None
    return header, rows


@dataclass(frozen=True)
class Column:
    """What one column of a typed CSV holds: "int", "float", "bool" or "text"; bounds of a
    number; whether a cell may be empty (NaN, as pandas reads a gap)."""

    kind: str
    lo: float = 0.0
    hi: float = 1e9
    optional: bool = True
    what: str = "units"


def read_typed_frame(path, required: Sequence[str], schema: dict[str, Column], id_column: str = "id"):
    """(DataFrame, [(id, reason)]) of a CSV read by pandas with every cell as text
    (dtype=str), then each typed column's cells parsed strictly (whole, real, true/false): a
    row with a bad cell is left out with a reason naming the file, line, column and value, and
    the rest are converted as pandas would have typed them (int64, or float64 with NaN gaps;
    bool; text with NaN gaps). An empty, binary or unterminated file, a duplicate or missing
    column is a ProfileError of one line."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it

    source = str(path)
    try:
        head = pd.read_csv(path, header=None, nrows=1, dtype=str, encoding="utf-8-sig", keep_default_na=False)
        header = check_header(list(head.iloc[0]) if len(head) else [], source, required)
        raw = pd.read_csv(path, dtype=str, encoding="utf-8-sig", keep_default_na=False, na_filter=False,
                          index_col=False, skip_blank_lines=True)
    except ProfileError:
        raise
    except pd.errors.EmptyDataError:
        raise ProfileError(source, "<file>", "empty: expected a header row naming " + ", ".join(required)) from None
    except (UnicodeDecodeError, pd.errors.ParserError, ValueError) as e:
        raise ProfileError(source, "<file>", f"not a CSV file of UTF-8 text ({short_repr(str(e).strip())})") from None
    raw.columns = header
    first_bad: dict[int, str] = {}              # row position -> the first bad column (schema order)
    for name, col in schema.items():
        if name in raw.columns:
            for pos in np.flatnonzero(~_valid(raw[name], col)).tolist():
                first_bad.setdefault(pos, name)
    bad: list[tuple[str, str]] = []
    ids = raw[id_column].tolist() if id_column in raw.columns else [""] * len(raw)
    for i in sorted(first_bad):
        name, where = first_bad[i], f"{source} row {i + 2}"
        cell = str(raw[name].iat[i])
        try:                          # the scalar check words the reason
            _check_cell(cell, where, name, schema[name])
        except CellError as e:
            bad.append((str(ids[i]), str(e)))
        else:                         # pandas and float() disagree: still named, never dropped silently
            bad.append((str(ids[i]), str(CellError(where, name, cell, f"a {schema[name].kind}"))))
    keep = np.ones(len(raw), dtype=bool)
    keep[list(first_bad)] = False
    return _typed(raw[keep], schema), bad


def _valid(cells, col: Column):
    """Which cells of one column (text) hold what `col` says, all at once (a million rows)."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    text = cells.str.strip()
    gaps = text == ""
    if col.kind == "int":
        v = pd.to_numeric(text.where(~gaps), errors="coerce")
        ok = text.str.fullmatch(_WHOLE.pattern) & (v >= col.lo) & (v <= col.hi)
    elif col.kind == "float":
        v = pd.to_numeric(text.where(~gaps), errors="coerce")
        ok = text.str.fullmatch(_DECIMAL.pattern) & np.isfinite(v) & (v >= col.lo) & (v <= col.hi)
    elif col.kind == "bool":
        ok = text.str.lower().isin(["true", "false"])
    else:
        return np.ones(len(cells), dtype=bool)
    return (ok.fillna(False).to_numpy(bool) | (gaps.to_numpy(bool) & col.optional))


def _check_cell(text: str, where: str, name: str, col: Column) -> None:
    if not text.strip():
        if not col.optional:
            raise CellError(where, name, text, f"empty: expected a value ({col.kind})")
        return
    if col.kind == "int":
        whole(text, where, name, int(col.lo), int(col.hi), col.what)
    elif col.kind == "float":
        real(text, where, name, col.lo, col.hi, col.what)
    elif col.kind == "bool" and text.strip().lower() not in ("true", "false"):
        raise CellError(where, name, text, "true or false")


def _typed(raw, schema: dict[str, Column]):
    """The text frame with each column typed as pandas infers it from valid cells."""
    import pandas as pd   # pandas: deferred, about a second to import; only tables need it
    out = raw.reset_index(drop=True).copy()
    for name in out.columns:
        col = schema.get(name, Column("text"))
        gaps = out[name].str.strip() == ""
        if col.kind in ("int", "float"):
            out[name] = pd.to_numeric(out[name].where(~gaps, np.nan))
        elif col.kind == "bool":
            values = out[name].str.strip().str.lower().map({"true": True, "false": False})
            out[name] = values.astype(bool) if not gaps.any() else values.where(~gaps, np.nan)
        else:
            out[name] = out[name].where(~gaps, np.nan)
    return out
