"""Datasets imported from a captions file, with optional image files, labels and instances.

`dataset_import_check` reads and checks everything that can be checked before a write;
`dataset_import` then stores the image files one by one (outside any transaction) and
writes the rows in one transaction, or leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from mitl.formats.captions import CaptionRow, parse_captions, parse_labels_json
from mitl.formats.common import ImportFileError
from mitl.formats.instances import Instance, parse_coco_instances

from ..errors import ServiceError
from ..models import (
    ORIGINAL_SET,
    Caption,
    Dataset,
    Image,
    PositivePair,
    PositiveSet,
    PositiveSource,
)
from ..models.dataset import FILE_NAME_MAX
from .image_sources import FolderImageSource, ImageSource, name_problem
from .instances import first_ids

ProgressCallback = Callable[[int, int], None]


def dataset_import_tsv(
    *,
    name: str,
    captions_path: Path,
    images_dir: Path | None = None,
    labels_path: Path | None = None,
    instances_path: Path | None = None,
    description: str = "",
    meta: dict | None = None,
    progress: ProgressCallback | None = None,
) -> Dataset:
    """Import a captions TSV, optionally with a folder of images, labels and object instances
    (`dataset_import`)."""
    return dataset_import(
        name=name,
        captions_path=captions_path,
        images=FolderImageSource(images_dir) if images_dir else None,
        labels_path=labels_path,
        instances_path=instances_path,
        description=description,
        meta=meta,
        progress=progress,
    )


_DATASET_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")  # Dataset.name is a SlugField


@dataclass(frozen=True)
class DatasetPlan:
    """What a dataset import will write, read and checked before anything is written."""

    rows: list[CaptionRow]
    files: dict[int, str]  # image id → file name, in the file's order
    labels: dict[int, list[str]]
    instances: dict[int, list[Instance]] = field(default_factory=dict)  # image id → instances


def dataset_import_check(
    *,
    name: str,
    captions_path: Path,
    format: str = "tsv",
    images: ImageSource | None = None,
    labels_path: Path | None = None,
    instances_path: Path | None = None,
    split: str | None = None,
) -> DatasetPlan:
    """Read and check a dataset import without writing anything.

    Refuses a taken or malformed name, a bad captions, labels or instances file (naming
    file, line and field), labels or instances of unknown images, and image files that
    are missing from `images` or whose names would leave the dataset's folder. Image
    contents are checked later, as each file is read.
    """
    if not _DATASET_NAME.match(name):
        raise ServiceError(
            f"dataset name must be 1-100 letters, digits, hyphens or underscores, got {name!r}"
        )
    if Dataset.objects.filter(name=name).exists():
        raise ServiceError(f"dataset {name!r} already exists; choose another name")
    rows = parse_captions(captions_path, format=format, split=split)
    labels = parse_labels_json(labels_path) if labels_path else {}
    files = {row.image_id: row.file_name for row in rows}
    unknown_labels = sorted(set(labels) - set(files))
    if unknown_labels:
        raise ImportFileError(f"{labels_path}: labels for unknown image id {unknown_labels[0]}")
    instances = parse_coco_instances(instances_path) if instances_path else {}
    unknown_instances = [image_id for image_id in instances if image_id not in files]
    if unknown_instances:
        # e.g. instances_val2014.json beside one Karpathy split: import_instances drops them.
        raise ImportFileError(
            f"{instances_path}: {len(unknown_instances)} of its {len(instances)} image ids "
            f"are not among the captions' images ({first_ids(unknown_instances)}); import "
            "the dataset without --instances, then run import_instances with "
            "--ignore-unknown to drop them"
        )
    if images is not None:
        _image_files_check(name=name, files=files, images=images)
    return DatasetPlan(rows=rows, files=files, labels=labels, instances=instances)


def dataset_import(
    *,
    name: str,
    captions_path: Path,
    format: str = "tsv",
    images: ImageSource | None = None,
    labels_path: Path | None = None,
    instances_path: Path | None = None,
    split: str | None = None,
    description: str = "",
    meta: dict | None = None,
    progress: ProgressCallback | None = None,
) -> Dataset:
    """Import captions (tsv, coco or karpathy; `split` keeps one Karpathy split) as a dataset.

    Labels (`{"<image id>": [...]}`) and COCO object instances (`instances_*.json`) are
    optional and stored on the images.

    Images are optional: without them the dataset is text-only. Everything that can be
    checked up front is (`dataset_import_check`); image files are then checked and stored
    one by one (progress counts images), and the rows written in one transaction. The
    import either completes or leaves no row and no stored file behind, on local disk as
    on S3. The caption-to-image links become the `original` positive set.
    """
    plan = dataset_import_check(
        name=name,
        captions_path=captions_path,
        format=format,
        images=images,
        labels_path=labels_path,
        instances_path=instances_path,
        split=split,
    )
    stored: list[str] = []  # storage names, deleted again if the import fails
    try:
        # Files first, outside the transaction: a long upload must not hold database locks,
        # and progress written meanwhile is visible to others.
        files = _image_files_store(
            name=name, plan=plan, images=images, stored=stored, progress=progress
        )
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, description=description, meta=meta or {})
            _images_create(dataset=dataset, plan=plan, files=files)
            _captions_create(dataset=dataset, plan=plan)
            _original_set_create(dataset=dataset)
    except BaseException:
        for saved in stored:
            default_storage.delete(saved)
        raise
    return dataset


def _image_files_check(*, name: str, files: dict[int, str], images: ImageSource) -> None:
    """Refuse file names that are unsafe, too long to store, or missing from `images`."""
    for image_id, file_name in files.items():
        problem = name_problem(file_name)
        if problem:
            what = "escapes the image folder" if "escapes" in problem else problem
            raise ImportFileError(f"{images.label}: file_name {file_name!r} {what}")
        if len(f"images/{name}/{file_name}") > FILE_NAME_MAX:
            raise ImportFileError(
                f"{images.label}: file_name {file_name[:40]!r}… (image_id {image_id}) is "
                f"too long to store (at most {FILE_NAME_MAX} characters with the dataset "
                "folder)"
            )
        if not images.contains(file_name):
            raise ImportFileError(
                f"{images.label}: image file {file_name!r} (image_id {image_id}) is missing"
            )


def _image_files_store(
    *,
    name: str,
    plan: DatasetPlan,
    images: ImageSource | None,
    stored: list[str],
    progress: ProgressCallback | None,
) -> dict[int, str]:
    """Store each image file under `images/<name>/`, appending its storage name to `stored`
    as it goes; return image id → storage name (empty without `images`)."""
    files: dict[int, str] = {}
    for done, (image_id, file_name) in enumerate(plan.files.items(), start=1):
        if images is not None:
            data = images.read(file_name)
            saved = default_storage.save(
                f"images/{name}/{file_name}", ContentFile(data), max_length=FILE_NAME_MAX
            )
            stored.append(saved)
            files[image_id] = saved
        if progress:
            progress(done, len(plan.files))
    return files


def _images_create(*, dataset: Dataset, plan: DatasetPlan, files: dict[int, str]) -> None:
    image_rows = []
    for image_id, file_name in plan.files.items():
        image = Image(
            dataset=dataset,
            ext_id=image_id,
            file_name=file_name,
            labels=plan.labels.get(image_id, []),
            instances=plan.instances.get(image_id, []),
        )
        image.file.name = files.get(image_id, "")
        image_rows.append(image)
    Image.objects.bulk_create(image_rows, batch_size=1000)


def _captions_create(*, dataset: Dataset, plan: DatasetPlan) -> None:
    pk_of = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    Caption.objects.bulk_create(
        [
            Caption(dataset=dataset, ext_id=r.caption_id, image_id=pk_of[r.image_id], text=r.text)
            for r in plan.rows
        ],
        batch_size=2000,
    )


def _original_set_create(*, dataset: Dataset) -> None:
    """Link each caption to the image it was written for: the `original` positive set."""
    original = PositiveSet.objects.create(
        dataset=dataset,
        name=ORIGINAL_SET,
        source=PositiveSource.ORIGINAL,
        description="Each caption linked to the image it was written for.",
    )
    PositivePair.objects.bulk_create(
        [
            PositivePair(positive_set=original, image_id=image_pk, caption_id=caption_pk)
            for caption_pk, image_pk in Caption.objects.filter(dataset=dataset).values_list(
                "pk", "image_id"
            )
        ],
        batch_size=5000,
    )
