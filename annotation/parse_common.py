"""What every dataset-file parser shares: its error type and file:line errors for reading.

A file is read as UTF-8 text (a bad byte is named by its line), the csv module's and the
json module's own errors become errors that name the file (and line), and ids are
non-negative integers.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ImportFileError(ValueError):
    """A dataset file is malformed; the message names the file, line and field."""


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


def load_json(path: Path) -> object:
    """Read a UTF-8 JSON file; every problem is an ImportFileError."""
    return json_parse(path, read_text(path))


def parse_id(path: Path, line: int | None, field: str, value: object) -> int:
    """Return `value` as a non-negative integer id, or raise an error naming `field`."""
    where = f"{path}:{line}" if line is not None else str(path)
    if isinstance(value, bool):
        raise ImportFileError(f"{where}: {field} must be an integer id, got {value!r}")
    try:
        parsed = int(str(value).strip())
    except ValueError:
        raise ImportFileError(f"{where}: {field} must be an integer id, got {value!r}") from None
    if parsed < 0:
        raise ImportFileError(f"{where}: {field} must not be negative, got {parsed}")
    return parsed
