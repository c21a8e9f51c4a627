"""Parse positive-pair files into plain rows, with errors that name the file, line and field.

ECCV Caption's pair of JSON files (image_to_caption.json, caption_to_image.json), and the
Crisscrossed Captions (CxC) CSVs of rated caption-image pairs (SITS) and caption-caption
pairs (STS).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from mitl.formats.common import ImportFileError, csv_problems, parse_id, read_text
from mitl.formats.json_file import JsonFile, json_id


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
    doc = JsonFile(path)
    data = doc.data
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object of id → list of ids")
    queries: list[int] = []
    pairs: set[tuple[int, int]] = set()
    for key, values in data.items():
        query = json_id(doc, (key,), f"key {key!r}", key)
        if not isinstance(values, list):
            raise ImportFileError(f"{path}: value of {key!r} must be a list of ids")
        queries.append(query)
        for index, value in enumerate(values):
            target = json_id(doc, (key, index), f"value of {key!r}", value)
            pairs.add((query, target) if image_first else (target, query))
    return sorted(queries), pairs


# Crisscrossed Captions (CxC), google-research-datasets/Crisscrossed-Captions: the SITS
# files (`sits_val.csv`, `sits_test.csv`) rate caption-image pairs from 0 to 5, e.g.
#   caption,image,agg_score,sampling_method
#   COCO_val2014:sentid:732091,COCO_val2014_000000365325.jpg,2.2,c2i_intrasim
# The caption is a COCO caption id (Karpathy "sentid"); the image is a COCO file name
# whose number is the COCO image id.
CXC_SITS_COLUMNS = ("caption", "image", "agg_score", "sampling_method")
CXC_STS_COLUMNS = ("caption1", "caption2", "agg_score", "sampling_method")
CXC_SCORE_RANGE = (0.0, 5.0)
_CXC_TASKS = {
    CXC_SITS_COLUMNS[:2]: "SITS (caption-image)",
    CXC_STS_COLUMNS[:2]: "STS (caption-caption)",
    ("image1", "image2"): "SIS (image-image)",
}


@dataclass(frozen=True)
class CxcRating:
    line: int
    caption_id: int
    image_id: int
    score: float
    sampling_method: str


@dataclass(frozen=True)
class CxcCaptionRating:
    line: int
    caption1_id: int
    caption2_id: int
    score: float
    sampling_method: str


def parse_cxc_sits(path: Path) -> list[CxcRating]:
    """Read a CxC SITS CSV (`caption,image,agg_score,sampling_method`) into ratings."""
    ratings = []
    for line, fields, score, method in _cxc_rows(path, CXC_SITS_COLUMNS):
        caption_id = _cxc_caption_id(path, line, fields[0], "caption")
        image_id = _cxc_image_id(path, line, fields[1])
        ratings.append(CxcRating(line, caption_id, image_id, score, method))
    _refuse_repeats(path, [(r.line, r.image_id, r.caption_id) for r in ratings], "image")
    return ratings


def parse_cxc_sts(path: Path) -> list[CxcCaptionRating]:
    """Read a CxC STS CSV (`caption1,caption2,agg_score,sampling_method`) into ratings."""
    ratings = []
    for line, fields, score, method in _cxc_rows(path, CXC_STS_COLUMNS):
        first = _cxc_caption_id(path, line, fields[0], "caption1")
        second = _cxc_caption_id(path, line, fields[1], "caption2")
        ratings.append(CxcCaptionRating(line, first, second, score, method))
    _refuse_repeats(path, [(r.line, r.caption2_id, r.caption1_id) for r in ratings], "caption")
    return ratings


def _cxc_rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, list[str], float, str]]:
    """Return (line, fields, score, sampling method) of every row of a CxC ratings CSV whose
    header is `columns`; at least one row."""
    with csv_problems(path):
        handle = io.StringIO(read_text(path), newline="")
        rows = []
        with handle:
            reader = csv.reader(handle)
            _cxc_header(path, tuple(h.strip() for h in next(reader, None) or ()), columns)
            for line, fields in enumerate(reader, start=2):
                if not fields:
                    continue
                if len(fields) != len(columns):
                    raise ImportFileError(
                        f"{path}:{line}: expected {len(columns)} comma-separated fields, "
                        f"got {len(fields)}"
                    )
                score = _cxc_score(path, line, fields[2])
                method = fields[3].strip()
                if not method:
                    raise ImportFileError(f"{path}:{line}: field sampling_method is empty")
                rows.append((line, fields, score, method))
    if not rows:
        raise ImportFileError(f"{path}: no rating rows")
    return rows


def _cxc_header(path: Path, header: tuple[str, ...], columns: tuple[str, ...]) -> None:
    if header == columns:
        return
    other = _CXC_TASKS.get(header[:2])
    hint = f"; this looks like a CxC {other} file, not {_CXC_TASKS[columns[:2]]}"
    raise ImportFileError(
        f"{path}:1: header must be {','.join(columns)}, got "
        f"{','.join(header) or 'nothing'}{hint if other else ''}"
    )


def _refuse_repeats(path: Path, pairs: list[tuple[int, int, int]], kind: str) -> None:
    """Refuse a (kind, caption) pair rated on two lines; `pairs` holds (line, id, caption)."""
    seen: dict[tuple[int, int], int] = {}
    for line, other, caption in pairs:
        if (other, caption) in seen:
            raise ImportFileError(
                f"{path}:{line}: caption {caption} and {kind} {other} repeat line "
                f"{seen[other, caption]}"
            )
        seen[other, caption] = line


def _cxc_caption_id(path: Path, line: int, value: str, field: str) -> int:
    # e.g. COCO_val2014:sentid:732091
    prefix, _, number = value.strip().rpartition(":sentid:")
    if not prefix or not number:
        raise ImportFileError(
            f"{path}:{line}: field {field} must look like COCO_val2014:sentid:<caption id>, "
            f"got {value!r}"
        )
    return parse_id(path, line, f"{field} (sentid)", number)


def _cxc_image_id(path: Path, line: int, value: str) -> int:
    # e.g. COCO_val2014_000000365325.jpg → 365325
    stem = value.strip().rsplit(".", 1)[0]
    number = stem.rsplit("_", 1)[-1]
    if "." not in value or not (number.isascii() and number.isdigit()):
        raise ImportFileError(
            f"{path}:{line}: field image must be a COCO file name like "
            f"COCO_val2014_000000365325.jpg, got {value!r}"
        )
    return parse_id(path, line, "image", number)


def _cxc_score(path: Path, line: int, value: str) -> float:
    low, high = CXC_SCORE_RANGE
    try:
        score = float(value.strip())
    except ValueError:
        raise ImportFileError(
            f"{path}:{line}: field agg_score must be a number, got {value!r}"
        ) from None
    if not low <= score <= high:  # also refuses nan
        raise ImportFileError(
            f"{path}:{line}: field agg_score must be between {low:g} and {high:g}, got {score:g}"
        )
    return score
