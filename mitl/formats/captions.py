"""Parse dataset files into plain rows, with errors that name the file, line and field.

Captions (a TSV, COCO captions JSON or Karpathy's dataset_coco.json) and labels JSON.
Parsing is separate from writing so that an import validates everything before it
touches the database or the media storage. Positive-pair files: `positive_parsers`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from mitl.formats.common import ImportFileError, csv_problems, parse_id, read_text
from mitl.formats.json_file import JsonFile, json_id

TSV_COLUMNS = ("caption_id", "image_id", "file_name", "caption")


@dataclass(frozen=True)
class CaptionRow:
    caption_id: int
    image_id: int
    file_name: str
    text: str


def parse_captions_tsv(path: Path) -> list[CaptionRow]:
    """Read a captions TSV (`caption_id image_id file_name caption`, with that header)."""
    with csv_problems(path):
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
            caption_id = parse_id(path, line, "caption_id", fields[0])
            image_id = parse_id(path, line, "image_id", fields[1])
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
    doc = JsonFile(path)
    data = doc.data
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object of image id → list of labels")
    labels: dict[int, list[str]] = {}
    for key, value in data.items():
        image_id = json_id(doc, (key,), f"key {key!r}", key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ImportFileError(f"{path}: labels of image {key} must be a list of strings")
        labels[image_id] = sorted(set(value))
    return labels


# --- COCO captions JSON and Karpathy's dataset_coco.json ----------------------------------
#
# COCO captions (captions_val2014.json): {"images": [{"id", "file_name", ...}],
# "annotations": [{"id", "image_id", "caption"}]}; the annotation id is the caption id.
# Karpathy's splits (dataset_coco.json, also dataset_flickr30k.json): {"images": [{"filepath",
# "filename", "cocoid", "imgid", "split", "sentids", "sentences": [{"raw", "sentid",
# "tokens"}]}]}; COCO sentids are the COCO caption ids, so both files give the ids that the
# TSV, the ECCV Caption and the CxC annotations use.

CAPTION_FORMATS = ("tsv", "coco", "karpathy")


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


def parse_coco_captions(path: Path) -> list[CaptionRow]:
    """Read a COCO captions JSON (`images` + `annotations`); captionless images are left out."""
    doc = JsonFile(path)
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
    doc = JsonFile(path)
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
