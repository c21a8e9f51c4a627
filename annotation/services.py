"""Writes on datasets: imports of images, captions, object instances and positive sets;
simulated workers.

Crowd work has its own modules (`handout`, `submissions`, `review`), import jobs theirs
(`import_jobs`). Every function here is one transaction (files are stored before it and
removed on failure); arguments are keyword-only.
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
from mitl.formats.positives import parse_eccv_positives

from .errors import ServiceError
from .image_sources import FolderImageSource, ImageSource, name_problem
from .models import (
    Caption,
    Dataset,
    Image,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Worker,
    WorkerSource,
)
from .models.dataset import FILE_NAME_MAX

ProgressCallback = Callable[[int, int], None]
ORIGINAL_SET = "original"


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
            f"are not among the captions' images ({_first_ids(unknown_instances)}); import "
            "the dataset without --instances, then run import_instances with "
            "--ignore-unknown to drop them"
        )
    if images is not None:
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
    stored: list[str] = []
    try:
        # Files first, outside the transaction: a long upload must not hold database locks,
        # and progress written meanwhile is visible to others.
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
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, description=description, meta=meta or {})
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
            pk_of = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
            Caption.objects.bulk_create(
                [
                    Caption(
                        dataset=dataset,
                        ext_id=r.caption_id,
                        image_id=pk_of[r.image_id],
                        text=r.text,
                    )
                    for r in plan.rows
                ],
                batch_size=2000,
            )
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
    except BaseException:
        for saved in stored:
            default_storage.delete(saved)
        raise
    return dataset


@dataclass(frozen=True)
class InstancesImported:
    """What `instances_import` stored and dropped."""

    images: int  # images of the dataset whose instances were replaced
    instances: int  # instances stored on them
    unknown_images: int = 0  # images of the file the dataset does not hold (dropped)
    unknown_instances: int = 0  # their instances
    unlisted_images: int = 0  # images of the dataset the file does not list (kept as they are)


def instances_import(
    *, dataset: Dataset, path: Path, ignore_unknown: bool = False
) -> InstancesImported:
    """Store a COCO instances file's objects as `Image.instances` of the dataset's images.

    Each image the file lists gets its instances replaced ([] when it has none); images
    the file does not list keep theirs. Image ids the dataset does not hold are refused,
    naming a few, or with `ignore_unknown` dropped and counted; a file with none of the
    dataset's images is refused either way. All images are written in one transaction, or
    none.
    """
    instances = parse_coco_instances(path)
    images = {
        image.ext_id: image for image in Image.objects.filter(dataset=dataset).only("pk", "ext_id")
    }
    unknown = [image_id for image_id in instances if image_id not in images]
    if len(unknown) == len(instances):  # surely the wrong file or dataset: say so
        raise ServiceError(
            f"{path}: none of its {len(instances)} image ids are in dataset {dataset.name!r} "
            f"({_first_ids(unknown)})"
        )
    if unknown and not ignore_unknown:
        raise ServiceError(
            f"{path}: {len(unknown)} of its {len(instances)} image ids are not in dataset "
            f"{dataset.name!r} ({_first_ids(unknown)}); --ignore-unknown drops them"
        )
    updated = []
    for image_id, rows in instances.items():
        if image_id in images:
            images[image_id].instances = rows
            updated.append(images[image_id])
    with transaction.atomic():
        Image.objects.bulk_update(updated, ["instances"], batch_size=500)
    return InstancesImported(
        images=len(updated),
        instances=sum(len(image.instances) for image in updated),
        unknown_images=len(unknown),
        unknown_instances=sum(len(instances[image_id]) for image_id in unknown),
        unlisted_images=len(images) - len(updated),
    )


def _first_ids(ids: list[int], shown: int = 5) -> str:
    """Name the smallest few ids, e.g. "7, 9, 12" or "1, 2, 3, 4, 5, …"."""
    listed = ", ".join(str(i) for i in sorted(ids)[:shown])
    return listed + (", …" if len(ids) > shown else "")


def positives_import_eccv(
    *,
    dataset: Dataset,
    label: str,
    i2t_path: Path,
    t2i_path: Path,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import an ECCV-format pair of files as an `imported` positive set named `label`.

    Ids the dataset does not hold are refused, or with `ignore_unknown` dropped (their
    pairs and queries). Returns the set and the number of pairs dropped.
    """
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ServiceError(f"dataset {dataset.name!r} already has a positive set named {label!r}")
    positives = parse_eccv_positives(i2t_path, t2i_path)
    image_pk = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    caption_pk = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    unknown_images = sorted({i for i, _ in positives.pairs if i not in image_pk})
    unknown_captions = sorted({c for _, c in positives.pairs if c not in caption_pk})
    if (unknown_images or unknown_captions) and not ignore_unknown:
        parts = []
        if unknown_images:
            parts.append(f"{len(unknown_images)} unknown image ids (first {unknown_images[0]})")
        if unknown_captions:
            parts.append(
                f"{len(unknown_captions)} unknown caption ids (first {unknown_captions[0]})"
            )
        raise ImportFileError(
            f"{i2t_path} / {t2i_path}: {' and '.join(parts)} in dataset {dataset.name!r} "
            "(--ignore-unknown drops them)"
        )
    known = sorted((i, c) for i, c in positives.pairs if i in image_pk and c in caption_pk)
    queries = {
        "i2t": [q for q in positives.image_queries if q in image_pk],
        "t2i": [q for q in positives.caption_queries if q in caption_pk],
    }
    with transaction.atomic():
        positive_set = PositiveSet.objects.create(
            dataset=dataset, name=label, source=PositiveSource.IMPORTED, queries=queries
        )
        PositivePair.objects.bulk_create(
            [
                PositivePair(
                    positive_set=positive_set, image_id=image_pk[i], caption_id=caption_pk[c]
                )
                for i, c in known
            ],
            batch_size=5000,
        )
    return positive_set, len(positives.pairs) - len(known)


def worker_simulated_get_or_create(*, name: str, profile: dict) -> Worker:
    """Return the simulated worker `name`, creating it with `profile` the first time."""
    worker, _ = Worker.objects.get_or_create(
        source=WorkerSource.SIMULATED, external_id=name, defaults={"profile": profile}
    )
    return worker


CXC_MIN_SCORE = 3.0  # CxC's own threshold for a positive caption-image pair (0-5 scale)


def positives_import_cxc(
    *,
    dataset: Dataset,
    label: str,
    path: Path,
    min_score: float = CXC_MIN_SCORE,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import the pairs of a CxC SITS CSV rated `min_score` or more as an `imported` set.

    The set's queries are the images and captions the file rates, at any score. Rows
    naming ids the dataset does not hold are refused (the first is named by its line), or
    with `ignore_unknown` dropped. Returns the set and the number of positive pairs dropped.
    """
    # Imported here: this function was appended after the module's shared import block.
    from mitl.formats.positives import CXC_SCORE_RANGE, parse_cxc_sits

    low, high = CXC_SCORE_RANGE
    if not low <= min_score <= high:
        raise ServiceError(
            f"the minimum score must be between {low:g} and {high:g}, got {min_score}"
        )
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ServiceError(f"dataset {dataset.name!r} already has a positive set named {label!r}")
    ratings = parse_cxc_sits(path)
    image_pk = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    caption_pk = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    unknown = [r for r in ratings if r.image_id not in image_pk or r.caption_id not in caption_pk]
    if unknown and not ignore_unknown:
        first = unknown[0]
        field, kind, ext_id = (
            ("caption", "caption", first.caption_id)
            if first.caption_id not in caption_pk
            else ("image", "image", first.image_id)
        )
        raise ImportFileError(
            f"{path}:{first.line}: field {field}: {kind} id {ext_id} is not in dataset "
            f"{dataset.name!r} ({len(unknown)} of {len(ratings)} rows name unknown ids; "
            "--ignore-unknown drops them)"
        )
    positives = sorted(
        {
            (r.image_id, r.caption_id)
            for r in ratings
            if r.score >= min_score and r.image_id in image_pk and r.caption_id in caption_pk
        }
    )
    dropped = sum(1 for r in unknown if r.score >= min_score)
    queries = {
        "i2t": sorted({r.image_id for r in ratings} & image_pk.keys()),
        "t2i": sorted({r.caption_id for r in ratings} & caption_pk.keys()),
    }
    with transaction.atomic():
        positive_set = PositiveSet.objects.create(
            dataset=dataset,
            name=label,
            source=PositiveSource.IMPORTED,
            queries=queries,
            description=f"CxC SITS pairs rated {min_score:g} or more in {path.name}.",
        )
        PositivePair.objects.bulk_create(
            [
                PositivePair(
                    positive_set=positive_set, image_id=image_pk[i], caption_id=caption_pk[c]
                )
                for i, c in positives
            ],
            batch_size=5000,
        )
    return positive_set, dropped
