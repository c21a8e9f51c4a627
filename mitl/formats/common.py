"""What every dataset-file parser shares: its error type and file:line errors for reading.

A file is read as UTF-8 text (a bad byte is named by its line), the csv module's and the
json module's own errors become errors that name the file (and line), and ids are
integers from 0 to ID_MAX, the largest the database stores.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Ids are stored in BigIntegerField columns (Image.ext_id, Caption.ext_id): PostgreSQL's
# bigint, a signed 64-bit integer. A larger id is refused while the file is parsed, with
# its line, not by the database in the middle of an import.
ID_MAX = 2**63 - 1


class ImportFileError(ValueError):
    """A dataset file is malformed; the message names the file, line and field."""


def id_range_problem(value: int) -> str | None:
    """Say why an integer id cannot be stored (it is above ID_MAX), or None when it fits."""
    if value > ID_MAX:
        return f"id {value} is out of range (0 to {ID_MAX})"
    return None


def read_text(path: Path) -> str:
    """Return a file's UTF-8 text, or raise ImportFileError naming the line of a bad byte."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFileError(f"{path}: cannot open ({exc.strerror})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFileError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


@contextmanager
def csv_problems(path: Path) -> Iterator[None]:
    """Turn the csv module's own errors (e.g. a field over its size limit) into file errors."""
    try:
        yield
    except csv.Error as exc:
        raise ImportFileError(f"{path}: not a readable table ({exc})") from None


def json_parse(path: Path, text: str) -> object:
    """Return the JSON value of `text` (read from `path`), or raise a file:line error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    except RecursionError:
        raise ImportFileError(f"{path}: JSON nested too deeply") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        limit = sys.get_int_max_str_digits()
        found = re.search(rf"\d{{{limit + 1},}}", text)  # its line, unless a string is first
        where = str(path)
        if found:
            line = text.count("\n", 0, found.start()) + 1
            where = f"{path}:{line}"
        raise ImportFileError(
            f"{where}: invalid JSON (integer of more than {limit} digits)"
        ) from None


def parse_id(path: Path, line: int | None, field: str, value: object) -> int:
    """Return `value` as an integer id from 0 to ID_MAX, or raise an error naming `field`."""
    where = f"{path}:{line}" if line is not None else str(path)
    if isinstance(value, bool):
        raise ImportFileError(f"{where}: {field} must be an integer id, got {value!r}")
    try:
        parsed = int(str(value).strip())
    except ValueError:
        raise ImportFileError(f"{where}: {field} must be an integer id, got {value!r}") from None
    if parsed < 0:
        raise ImportFileError(f"{where}: {field} must not be negative, got {parsed}")
    problem = id_range_problem(parsed)
    if problem:
        raise ImportFileError(f"{where}: field {field}: {problem}")
    return parsed
