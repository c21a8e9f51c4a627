"""Write a synthetic dataset as the files the platform imports. Pure Python: no Django import."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mitl.synthetic.images import render, shape_boxes
from mitl.synthetic.meta import synthetic_meta
from mitl.synthetic.scenes import SHAPES, SyntheticDataset

INSTANCES_FILE = "instances.json"


def write(
    dataset: SyntheticDataset,
    out_dir: Path,
    *,
    image_size: int = 128,
    with_images: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write captions.tsv, labels.json, instances.json, synthetic.json and images/.

    Returns the TSV's path. instances.json holds the boxes of `image_size` images, whether
    or not the images themselves are written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tsv = out_dir / "captions.tsv"
    lines = ["caption_id\timage_id\tfile_name\tcaption"]
    lines += [
        f"{c.caption_id}\t{c.image_id}\t{dataset.file_name(c.image_id)}\t{c.text}"
        for c in dataset.captions
    ]
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    labels = {str(scene.image_id): scene.labels for scene in dataset.scenes}
    (out_dir / "labels.json").write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    write_instances(dataset, out_dir, image_size=image_size)
    meta = synthetic_meta(dataset)
    (out_dir / "synthetic.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    if with_images:
        images = out_dir / "images"
        images.mkdir(exist_ok=True)
        total = len(dataset.scenes)
        for done, scene in enumerate(dataset.scenes, start=1):
            render(scene, size=image_size).save(images / dataset.file_name(scene.image_id))
            if progress is not None:
                progress(done, total)
    return tsv


def write_instances(dataset: SyntheticDataset, out_dir: Path, *, image_size: int = 128) -> Path:
    """Write instances.json: every shape as a COCO instance; return the file's path."""
    path = Path(out_dir) / INSTANCES_FILE
    text = json.dumps(coco_instances(dataset, image_size=image_size), separators=(",", ":"))
    path.write_text(text + "\n", encoding="utf-8")
    return path


def coco_instances(dataset: SyntheticDataset, *, image_size: int = 128) -> dict:
    """Return the scenes' shapes in COCO's instances format (`instances_*.json`).

    One category per shape class (ids from 1, as in COCO), one annotation per shape with
    its bbox [x, y, w, h] in pixels of the `image_size` image and `area` the box's area
    (COCO's is the mask's; a box is all there is here). Each annotation also carries
    "attributes": [colour, size word], a key COCO readers ignore.
    """
    category_id = {shape: k for k, shape in enumerate(SHAPES, start=1)}
    images, annotations = [], []
    for scene in dataset.scenes:
        images.append(
            {
                "id": scene.image_id,
                "width": image_size,
                "height": image_size,
                "file_name": dataset.file_name(scene.image_id),
            }
        )
        for box in shape_boxes(scene, image_size):
            bbox = [round(v, 3) for v in box.bbox]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": scene.image_id,
                    "category_id": category_id[box.shape],
                    "bbox": bbox,
                    "area": round(bbox[2] * bbox[3], 3),
                    "iscrowd": 0,
                    "attributes": [box.color, box.size],
                }
            )
    categories = [{"id": k, "name": shape} for shape, k in category_id.items()]
    return {"images": images, "annotations": annotations, "categories": categories}
