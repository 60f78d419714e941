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

import os
import re
from collections.abc import Sequence
from pathlib import Path

from .errors import InvalidInputError

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
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = out[col].map(csv_cell)
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
