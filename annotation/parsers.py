"""Parse dataset files into plain rows, with errors that name the file, line and field.

Parsing is separate from writing so that an import validates everything before it
touches the database or the media storage.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from json.decoder import scanstring
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
    with _csv_problems(path):
        return _parse_captions_tsv(path)


def _parse_captions_tsv(path: Path) -> list[CaptionRow]:
    handle = io.StringIO(read_text(path), newline="")
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
            if "\x00" in text or "\x00" in file_name:
                raise ImportFileError(f"{path}:{line}: a field holds a NUL character")
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
def _csv_problems(path: Path) -> Iterator[None]:
    """Turn the csv module's own errors (e.g. a field over its size limit) into file errors."""
    try:
        yield
    except csv.Error as exc:
        raise ImportFileError(f"{path}: not a readable table ({exc})") from None


def _load_json(path: Path) -> object:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    except RecursionError:
        raise ImportFileError(f"{path}: JSON nested too deeply") from None


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


# Crisscrossed Captions (CxC), google-research-datasets/Crisscrossed-Captions: the SITS
# files (`sits_val.csv`, `sits_test.csv`) rate caption-image pairs from 0 to 5, e.g.
#   caption,image,agg_score,sampling_method
#   COCO_val2014:sentid:732091,COCO_val2014_000000365325.jpg,2.2,c2i_intrasim
# The caption is a COCO caption id (Karpathy "sentid"); the image is a COCO file name
# whose number is the COCO image id.
CXC_SITS_COLUMNS = ("caption", "image", "agg_score", "sampling_method")
CXC_SCORE_RANGE = (0.0, 5.0)
_CXC_OTHER_TASKS = {
    ("caption1", "caption2"): "STS (caption-caption)",
    ("image1", "image2"): "SIS (image-image)",
}


@dataclass(frozen=True)
class CxcRating:
    line: int
    caption_id: int
    image_id: int
    score: float
    sampling_method: str


def parse_cxc_sits(path: Path) -> list[CxcRating]:
    """Read a CxC SITS CSV (`caption,image,agg_score,sampling_method`) into ratings."""
    with _csv_problems(path):
        return _parse_cxc_sits(path)


def _parse_cxc_sits(path: Path) -> list[CxcRating]:
    handle = io.StringIO(read_text(path), newline="")
    ratings: list[CxcRating] = []
    seen: dict[tuple[int, int], int] = {}
    with handle:
        reader = csv.reader(handle)
        header = tuple(h.strip() for h in next(reader, None) or ())
        if header != CXC_SITS_COLUMNS:
            other = _CXC_OTHER_TASKS.get(header[:2])
            hint = f"; this looks like a CxC {other} file, not SITS (caption-image)"
            raise ImportFileError(
                f"{path}:1: header must be {','.join(CXC_SITS_COLUMNS)}, got "
                f"{','.join(header) or 'nothing'}{hint if other else ''}"
            )
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(CXC_SITS_COLUMNS):
                raise ImportFileError(
                    f"{path}:{line}: expected {len(CXC_SITS_COLUMNS)} comma-separated fields, "
                    f"got {len(fields)}"
                )
            caption_id = _cxc_caption_id(path, line, fields[0])
            image_id = _cxc_image_id(path, line, fields[1])
            score = _cxc_score(path, line, fields[2])
            method = fields[3].strip()
            if not method:
                raise ImportFileError(f"{path}:{line}: field sampling_method is empty")
            pair = (image_id, caption_id)
            if pair in seen:
                raise ImportFileError(
                    f"{path}:{line}: caption {caption_id} and image {image_id} repeat line "
                    f"{seen[pair]}"
                )
            seen[pair] = line
            ratings.append(CxcRating(line, caption_id, image_id, score, method))
    if not ratings:
        raise ImportFileError(f"{path}: no rating rows")
    return ratings


def _cxc_caption_id(path: Path, line: int, value: str) -> int:
    # e.g. COCO_val2014:sentid:732091
    prefix, _, number = value.strip().rpartition(":sentid:")
    if not prefix or not number:
        raise ImportFileError(
            f"{path}:{line}: field caption must look like COCO_val2014:sentid:<caption id>, "
            f"got {value!r}"
        )
    return _parse_id(path, line, "caption (sentid)", number)


def _cxc_image_id(path: Path, line: int, value: str) -> int:
    # e.g. COCO_val2014_000000365325.jpg → 365325
    stem = value.strip().rsplit(".", 1)[0]
    number = stem.rsplit("_", 1)[-1]
    if "." not in value or not number.isdigit():
        raise ImportFileError(
            f"{path}:{line}: field image must be a COCO file name like "
            f"COCO_val2014_000000365325.jpg, got {value!r}"
        )
    return int(number)


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


# --- COCO captions JSON and Karpathy's dataset_coco.json ----------------------------------
#
# COCO captions (captions_val2014.json): {"images": [{"id", "file_name", ...}],
# "annotations": [{"id", "image_id", "caption"}]}; the annotation id is the caption id.
# Karpathy's splits (dataset_coco.json, also dataset_flickr30k.json): {"images": [{"filepath",
# "filename", "cocoid", "imgid", "split", "sentids", "sentences": [{"raw", "sentid",
# "tokens"}]}]}; COCO sentids are the COCO caption ids, so both files give the ids that the
# TSV, the ECCV Caption and the CxC annotations use.

CAPTION_FORMATS = ("tsv", "coco", "karpathy")
JsonPath = tuple[str | int, ...]


def parse_captions(
    path: Path, *, format: str = "tsv", split: str | None = None
) -> list[CaptionRow]:
    """Read a captions file in one of CAPTION_FORMATS; `split` keeps one Karpathy split."""
    if format not in CAPTION_FORMATS:
        raise ImportFileError(
            f"{path}: unknown captions format {format!r} (formats: {', '.join(CAPTION_FORMATS)})"
        )
    if split is not None and format != "karpathy":
        raise ImportFileError(f"{path}: a split applies to the karpathy format only")
    if format == "tsv":
        return parse_captions_tsv(path)
    if format == "coco":
        return parse_coco_captions(path)
    return parse_karpathy(path, split=split)


class _JsonFile:
    """A loaded JSON file that turns a problem at a JSON path into file:line: field errors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = read_text(path)
        try:
            self.data = json.loads(self.text)
        except json.JSONDecodeError as exc:
            raise ImportFileError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
        except RecursionError:
            raise ImportFileError(f"{path}: JSON nested too deeply") from None

    def error(self, where: JsonPath, problem: str) -> ImportFileError:
        # The line is looked up only when something is wrong: the happy path pays nothing.
        line = None
        for depth in range(len(where), -1, -1):  # a missing field: the line of its object
            offset = _json_offset(self.text, where[:depth])
            if offset is not None:
                line = self.text.count("\n", 0, offset) + 1
                break
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


def parse_coco_captions(path: Path) -> list[CaptionRow]:
    """Read a COCO captions JSON (`images` + `annotations`); captionless images are left out."""
    doc = _JsonFile(path)
    root = doc.need_object(doc.data, ())
    files: dict[int, str] = {}
    first_image: dict[int, int] = {}
    for index, value in enumerate(doc.need_list(root, "images", ())):
        where = ("images", index)
        entry = doc.need_object(value, where)
        image_id = doc.need_id(entry, "id", where)
        if image_id in first_image:
            raise doc.error(
                (*where, "id"), f"image id {image_id} repeats images[{first_image[image_id]}]"
            )
        first_image[image_id] = index
        files[image_id] = doc.need_text(entry, "file_name", where)
    rows: list[CaptionRow] = []
    first_caption: dict[int, int] = {}
    for index, value in enumerate(doc.need_list(root, "annotations", ())):
        where = ("annotations", index)
        entry = doc.need_object(value, where)
        caption_id = doc.need_id(entry, "id", where)
        if caption_id in first_caption:
            raise doc.error(
                (*where, "id"),
                f"caption id {caption_id} repeats annotations[{first_caption[caption_id]}]",
            )
        first_caption[caption_id] = index
        image_id = doc.need_id(entry, "image_id", where)
        if image_id not in files:
            raise doc.error((*where, "image_id"), f"image id {image_id} is not in images")
        text = doc.need_text(entry, "caption", where)
        rows.append(CaptionRow(caption_id, image_id, files[image_id], text))
    if not rows:
        raise doc.error(("annotations",), "holds no caption")
    return rows


def parse_karpathy(path: Path, *, split: str | None = None) -> list[CaptionRow]:
    """Read a Karpathy split file (dataset_coco.json); `split` keeps e.g. only "test".

    The image id is `cocoid` (or `imgid` where there is none, as in Flickr30K); the file
    name is `filepath/filename`, relative to the image folder that holds train2014/ and
    val2014/. The whole file is checked, whichever split is kept.
    """
    doc = _JsonFile(path)
    root = doc.need_object(doc.data, ())
    rows: list[CaptionRow] = []
    splits: set[str] = set()
    first_image: dict[int, int] = {}
    first_sentence: dict[int, tuple[int, int]] = {}
    for index, value in enumerate(doc.need_list(root, "images", ())):
        where = ("images", index)
        entry = doc.need_object(value, where)
        id_key = "cocoid" if "cocoid" in entry or "imgid" not in entry else "imgid"
        image_id = doc.need_id(entry, id_key, where)
        if image_id in first_image:
            raise doc.error(
                (*where, id_key), f"image id {image_id} repeats images[{first_image[image_id]}]"
            )
        first_image[image_id] = index
        file_name = doc.need_text(entry, "filename", where)
        if entry.get("filepath") is not None:
            file_name = f"{doc.need_text(entry, 'filepath', where).strip('/')}/{file_name}"
        image_split = doc.need_text(entry, "split", where)
        splits.add(image_split)
        sentids: list[int] = []
        texts: list[str] = []
        for position, sentence in enumerate(doc.need_list(entry, "sentences", where)):
            at = (*where, "sentences", position)
            sentence = doc.need_object(sentence, at)
            sentid = doc.need_id(sentence, "sentid", at)
            if sentid in first_sentence:
                image, earlier = first_sentence[sentid]
                raise doc.error(
                    (*at, "sentid"),
                    f"caption id {sentid} repeats images[{image}].sentences[{earlier}]",
                )
            first_sentence[sentid] = (index, position)
            sentids.append(sentid)
            texts.append(doc.need_text(sentence, "raw", at))
        if "sentids" in entry:
            listed = entry["sentids"]
            if not isinstance(listed, list) or sorted(map(str, listed)) != sorted(
                map(str, sentids)
            ):
                raise doc.error(
                    (*where, "sentids"),
                    f"lists {listed!r} but the sentences have sentid {sentids!r}",
                )
        if split is None or image_split == split:
            rows.extend(
                CaptionRow(sentid, image_id, file_name, text)
                for sentid, text in zip(sentids, texts, strict=True)
            )
    if not rows and split is not None:
        raise ImportFileError(
            f"{path}: no image has split {split!r} (splits here: {', '.join(sorted(splits))})"
        )
    if not rows:
        raise doc.error(("images",), "holds no sentence")
    return rows


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
