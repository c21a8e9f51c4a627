"""A loaded JSON file whose problems, found at a JSON path, become file:line: field errors.

The line of a JSON path is looked up in the text only when something is wrong, so a good
file pays nothing for it.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from pathlib import Path

from mitl.formats.common import ImportFileError, id_range_problem, json_parse, parse_id, read_text

JsonPath = tuple[str | int, ...]


class JsonFile:
    """A loaded JSON file that turns a problem at a JSON path into file:line: field errors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = read_text(path)
        self.data = json_parse(path, self.text)

    def line(self, where: JsonPath) -> int | None:
        """Return the line of the value at `where` (of its object when it is missing)."""
        for depth in range(len(where), -1, -1):
            offset = _json_offset(self.text, where[:depth])
            if offset is not None:
                return self.text.count("\n", 0, offset) + 1
        return None

    def error(self, where: JsonPath, problem: str) -> ImportFileError:
        # The line is looked up only when something is wrong: the happy path pays nothing.
        line = self.line(where)
        prefix = f"{self.path}:{line}" if line is not None else str(self.path)
        field = f" field {_json_label(where)}:" if where else ""
        return ImportFileError(f"{prefix}:{field} {problem}")

    def need_object(self, value: object, where: JsonPath) -> dict:
        if not isinstance(value, dict):
            raise self.error(where, f"must be a JSON object, got {_json_kind(value)}")
        return value

    def need_list(self, parent: dict, key: str, where: JsonPath) -> list:
        value = parent.get(key)
        if not isinstance(value, list):
            got = "nothing" if key not in parent else _json_kind(value)
            raise self.error((*where, key), f"must be a list, got {got}")
        return value

    def need_id(self, parent: dict, key: str, where: JsonPath) -> int:
        if key not in parent:
            raise self.error((*where, key), "is missing")
        value = parent[key]
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise self.error((*where, key), f"must be an integer id, got {value!r}")
        try:
            parsed = int(str(value).strip())
        except ValueError:
            raise self.error((*where, key), f"must be an integer id, got {value!r}") from None
        if parsed < 0:
            raise self.error((*where, key), f"must not be negative, got {parsed}")
        problem = id_range_problem(parsed)
        if problem:
            raise self.error((*where, key), problem)
        return parsed

    def need_text(self, parent: dict, key: str, where: JsonPath) -> str:
        value = parent.get(key)
        if not isinstance(value, str):
            got = "nothing" if key not in parent else _json_kind(value)
            raise self.error((*where, key), f"must be a string, got {got}")
        if not value.strip():
            raise self.error((*where, key), "is empty")
        if "\x00" in value:
            raise self.error((*where, key), "holds a NUL character")
        return value.strip()


def json_id(doc: JsonFile, where: JsonPath, field: str, value: object) -> int:
    """`parse_id` of a value at `where` whose error names its line (found only on error)."""
    try:
        return parse_id(doc.path, None, field, value)
    except ImportFileError:
        return parse_id(doc.path, doc.line(where), field, value)  # raises again, with the line


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _json_offset(text: str, where: JsonPath) -> int | None:
    """Return where the value at `where` starts in `text`, or None if it is not there."""
    pos = _WHITESPACE.match(text, 0).end()
    try:
        for step in where:
            if isinstance(step, str):
                pos = _json_member(text, pos, step)
            else:
                pos = _json_item(text, pos, step)
            if pos is None:
                return None
    except (ValueError, IndexError):  # the text changed under us, or a malformed file
        return None
    return pos


def _json_member(text: str, pos: int, key: str) -> int | None:
    if text[pos : pos + 1] != "{":
        return None
    pos += 1
    while True:
        pos = _WHITESPACE.match(text, pos).end()
        if text[pos : pos + 1] != '"':
            return None
        name, pos = scanstring(text, pos + 1)
        pos = _WHITESPACE.match(text, pos).end()
        if text[pos : pos + 1] != ":":
            return None
        pos = _WHITESPACE.match(text, pos + 1).end()
        if name == key:
            return pos
        _, pos = _DECODER.raw_decode(text, pos)  # skip the value at C speed
        pos = _WHITESPACE.match(text, pos).end()
        if text[pos : pos + 1] != ",":
            return None
        pos += 1


def _json_item(text: str, pos: int, index: int) -> int | None:
    if text[pos : pos + 1] != "[":
        return None
    pos = _WHITESPACE.match(text, pos + 1).end()
    for _ in range(index):
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _WHITESPACE.match(text, pos).end()
        if text[pos : pos + 1] != ",":
            return None
        pos = _WHITESPACE.match(text, pos + 1).end()
    return pos if text[pos : pos + 1] not in ("]", "") else None


def _json_label(where: JsonPath) -> str:
    label = ""
    for step in where:
        label += f"[{step}]" if isinstance(step, int) else (f".{step}" if label else step)
    return label


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), repr(value)
    )
