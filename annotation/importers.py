"""Parse dataset files into plain rows, with errors that name the file, line and field.

Parsing is separate from writing so that an import validates everything before it
touches the database or the media storage.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

TSV_COLUMNS = ("caption_id", "image_id", "file_name", "caption")


class ImportFileError(ValueError):
    """A dataset file is malformed; the message names the file, line and field."""


@dataclass(frozen=True)
class CaptionRow:
    caption_id: int
    image_id: int
    file_name: str
    text: str


def parse_captions_tsv(path: Path) -> list[CaptionRow]:
    """Read a captions TSV (`caption_id image_id file_name caption`, with that header)."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise ImportFileError(f"{path}: cannot open ({exc.strerror})") from exc
    rows: list[CaptionRow] = []
    seen_captions: dict[int, int] = {}
    image_files: dict[int, str] = {}
    with handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != TSV_COLUMNS:
            raise ImportFileError(
                f"{path}:1: header must be {' '.join(TSV_COLUMNS)} (tab-separated), got {header!r}"
            )
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(TSV_COLUMNS):
                raise ImportFileError(
                    f"{path}:{line}: expected {len(TSV_COLUMNS)} tab-separated fields, "
                    f"got {len(fields)}"
                )
            caption_id = _parse_id(path, line, "caption_id", fields[0])
            image_id = _parse_id(path, line, "image_id", fields[1])
            file_name, text = fields[2].strip(), fields[3].strip()
            if not text:
                raise ImportFileError(f"{path}:{line}: field caption is empty")
            if caption_id in seen_captions:
                raise ImportFileError(
                    f"{path}:{line}: caption_id {caption_id} repeats line "
                    f"{seen_captions[caption_id]}"
                )
            if image_files.setdefault(image_id, file_name) != file_name:
                raise ImportFileError(
                    f"{path}:{line}: image_id {image_id} has file_name {file_name!r} here but "
                    f"{image_files[image_id]!r} earlier"
                )
            seen_captions[caption_id] = line
            rows.append(CaptionRow(caption_id, image_id, file_name, text))
    if not rows:
        raise ImportFileError(f"{path}: no caption rows")
    return rows


def parse_labels_json(path: Path) -> dict[int, list[str]]:
    """Read `{"<image id>": ["label", ...]}`."""
    data = _load_json(path)
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object of image id → list of labels")
    labels: dict[int, list[str]] = {}
    for key, value in data.items():
        image_id = _parse_id(path, None, f"key {key!r}", key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ImportFileError(f"{path}: labels of image {key} must be a list of strings")
        labels[image_id] = sorted(set(value))
    return labels


@dataclass(frozen=True)
class EccvPositives:
    pairs: set[tuple[int, int]]  # (image id, caption id), the union of both files
    image_queries: list[int]  # keys of image_to_caption.json
    caption_queries: list[int]  # keys of caption_to_image.json


def parse_eccv_positives(i2t_path: Path, t2i_path: Path) -> EccvPositives:
    """Read an ECCV-format pair of files: their pairs and the queries each file covers."""
    image_queries, i2t_pairs = _read_eccv_file(i2t_path, image_first=True)
    caption_queries, t2i_pairs = _read_eccv_file(t2i_path, image_first=False)
    return EccvPositives(i2t_pairs | t2i_pairs, image_queries, caption_queries)


def parse_eccv_pairs(i2t_path: Path, t2i_path: Path) -> set[tuple[int, int]]:
    """Read an ECCV-format pair of files into (image id, caption id) pairs (their union)."""
    return parse_eccv_positives(i2t_path, t2i_path).pairs


def _read_eccv_file(path: Path, *, image_first: bool) -> tuple[list[int], set[tuple[int, int]]]:
    data = _load_json(path)
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object of id → list of ids")
    queries: list[int] = []
    pairs: set[tuple[int, int]] = set()
    for key, values in data.items():
        query = _parse_id(path, None, f"key {key!r}", key)
        if not isinstance(values, list):
            raise ImportFileError(f"{path}: value of {key!r} must be a list of ids")
        queries.append(query)
        for value in values:
            target = _parse_id(path, None, f"value {value!r} of {key!r}", value)
            pairs.add((query, target) if image_first else (target, query))
    return sorted(queries), pairs


def _load_json(path: Path) -> object:
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise ImportFileError(f"{path}: cannot open ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc


def _parse_id(path: Path, line: int | None, field: str, value: object) -> int:
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
