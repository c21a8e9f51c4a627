"""Write a synthetic dataset as the files the platform imports. Pure Python: no Django import."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mitl.synthetic.images import render
from mitl.synthetic.scenes import SyntheticDataset


def write(
    dataset: SyntheticDataset,
    out_dir: Path,
    *,
    image_size: int = 128,
    with_images: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write captions.tsv, labels.json, synthetic.json and images/; return the TSV's path."""
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
    meta = {
        "generator": "mitl.synthetic",
        "seed": dataset.seed,
        "n_images": len(dataset.scenes),
        "captions_per_image": dataset.captions_per_image,
    }
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
