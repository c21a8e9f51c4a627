"""Parse COCO object instances (`instances_*.json`) into `Image.instances` rows.

COCO's instances file: {"images": [{"id", "width", "height", ...}], "categories": [{"id",
"name", ...}], "annotations": [{"image_id", "category_id", "bbox": [x, y, w, h], "iscrowd",
...}]}. Each annotation becomes {"category", "area", "bbox", "attributes"}, the row
`mitl.explain.concepts.instances_concepts` reads: `area` is the box's share of the image,
not COCO's mask area, since the concept metrics compare box sizes. Errors name the file,
line and field, as the other parsers' do.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mitl.formats.json_file import JsonFile, JsonPath

Instance = dict[str, Any]  # {"category": str, "area": float, "bbox": [x, y, w, h], "attributes"}


def parse_coco_instances(path: Path) -> dict[int, list[Instance]]:
    """Read a COCO instances JSON into {image id: [instance, ...]}, in the file's order.

    Every image of `images` is a key, with [] when it has no instance. Crowd annotations
    (`iscrowd` 1) are left out: their box covers a crowd of objects, not one, so they
    would miscount the objects of a category and inflate their size. `attributes` is an
    optional list of words per annotation (the synthetic generator writes colour and
    size); `area` is the bbox's w * h over the image's width * height, clipped to [0, 1].
    """
    doc = JsonFile(path)
    root = doc.need_object(doc.data, ())
    if "categories" not in root and "annotations" in root:
        raise doc.error(
            ("categories",),
            "is missing; an instances file (instances_*.json) lists its categories, a "
            "captions file does not",
        )
    sizes = _images(doc, root)
    names = _categories(doc, root)
    annotations = doc.need_list(root, "annotations", ())
    if not annotations:
        raise doc.error(("annotations",), "holds no annotation")
    instances: dict[int, list[Instance]] = {image_id: [] for image_id in sizes}
    for index, value in enumerate(annotations):
        where = ("annotations", index)
        entry = doc.need_object(value, where)
        if _is_crowd(doc, entry, where):
            continue
        image_id = doc.need_id(entry, "image_id", where)
        if image_id not in sizes:
            raise doc.error((*where, "image_id"), f"image id {image_id} is not in images")
        category_id = doc.need_id(entry, "category_id", where)
        if category_id not in names:
            raise doc.error(
                (*where, "category_id"), f"category id {category_id} is not in categories"
            )
        bbox = _bbox(doc, entry, where)
        width, height = sizes[image_id]
        instances[image_id].append(
            {
                "category": names[category_id],
                # Two ratios, not w·h / (W·H): a product of tiny sizes could round to 0.
                "area": min(1.0, (bbox[2] / width) * (bbox[3] / height)),
                "bbox": bbox,
                "attributes": _attributes(doc, entry, where),
            }
        )
    return instances


def _images(doc: JsonFile, root: dict) -> dict[int, tuple[float, float]]:
    """Return {image id: (width, height)} of `images`, refusing repeated ids."""
    sizes: dict[int, tuple[float, float]] = {}
    first: dict[int, int] = {}
    for index, value in enumerate(doc.need_list(root, "images", ())):
        where = ("images", index)
        entry = doc.need_object(value, where)
        image_id = doc.need_id(entry, "id", where)
        if image_id in first:
            raise doc.error(
                (*where, "id"), f"image id {image_id} repeats images[{first[image_id]}]"
            )
        first[image_id] = index
        sizes[image_id] = (
            _side(doc, entry, "width", where),
            _side(doc, entry, "height", where),
        )
    if not sizes:
        raise doc.error(("images",), "holds no image")
    return sizes


def _categories(doc: JsonFile, root: dict) -> dict[int, str]:
    """Return {category id: lower-case name}, refusing repeated ids."""
    names: dict[int, str] = {}
    first: dict[int, int] = {}
    for index, value in enumerate(doc.need_list(root, "categories", ())):
        where = ("categories", index)
        entry = doc.need_object(value, where)
        category_id = doc.need_id(entry, "id", where)
        if category_id in first:
            earlier = first[category_id]
            raise doc.error(
                (*where, "id"), f"category id {category_id} repeats categories[{earlier}]"
            )
        first[category_id] = index
        names[category_id] = doc.need_text(entry, "name", where).lower()
    return names


def _is_crowd(doc: JsonFile, entry: dict, where: JsonPath) -> bool:
    value = entry.get("iscrowd", 0)
    if isinstance(value, bool) or value not in (0, 1):
        raise doc.error((*where, "iscrowd"), f"must be 0 or 1, got {value!r}")
    return value == 1


def _bbox(doc: JsonFile, entry: dict, where: JsonPath) -> list[float]:
    value = entry.get("bbox")
    if not isinstance(value, list) or len(value) != 4:
        got = "nothing" if "bbox" not in entry else repr(value)[:60]
        raise doc.error((*where, "bbox"), f"must be a list [x, y, width, height], got {got}")
    bbox = [_finite(doc, v, (*where, "bbox", k)) for k, v in enumerate(value)]
    if bbox[2] < 0 or bbox[3] < 0:
        raise doc.error((*where, "bbox"), f"width and height must not be negative, got {value!r}")
    return bbox


def _attributes(doc: JsonFile, entry: dict, where: JsonPath) -> list[str]:
    value = entry.get("attributes")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(a, str) and a.strip() for a in value):
        raise doc.error((*where, "attributes"), "must be a list of words")
    return [a.strip().lower() for a in value]


def _side(doc: JsonFile, entry: dict, key: str, where: JsonPath) -> float:
    if key not in entry:
        raise doc.error((*where, key), "is missing")
    number = _finite(doc, entry[key], (*where, key))
    if number <= 0:
        raise doc.error((*where, key), f"must be positive, got {entry[key]!r}")
    return number


def _finite(doc: JsonFile, value: object, where: JsonPath) -> float:
    # Python's json reads NaN and Infinity; neither is a size.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise doc.error(where, f"must be a finite number, got {value!r}")
    return float(value)
