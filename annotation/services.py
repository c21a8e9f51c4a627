"""Writes on the human and dataset side: imports, assignments and submissions.

Every function is one transaction; arguments are keyword-only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from .importers import (
    ImportFileError,
    parse_captions_tsv,
    parse_eccv_positives,
    parse_labels_json,
)
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


class ServiceError(ValueError):
    """A request the platform refuses, with a message for the person who made it."""


def dataset_import_tsv(
    *,
    name: str,
    captions_path: Path,
    images_dir: Path | None = None,
    labels_path: Path | None = None,
    description: str = "",
    meta: dict | None = None,
    progress: ProgressCallback | None = None,
) -> Dataset:
    """Import a captions TSV (and optionally its image files and labels) as a new dataset.

    Everything is validated before anything is written; the import either completes or
    leaves no row and no stored file behind. The caption-to-image links become the
    `original` positive set.
    """
    if Dataset.objects.filter(name=name).exists():
        raise ServiceError(f"dataset {name!r} already exists; choose another name")
    rows = parse_captions_tsv(captions_path)
    labels = parse_labels_json(labels_path) if labels_path else {}
    images = {row.image_id: row.file_name for row in rows}
    unknown_labels = sorted(set(labels) - set(images))
    if unknown_labels:
        raise ImportFileError(f"{labels_path}: labels for unknown image id {unknown_labels[0]}")
    sources = _image_sources(images, images_dir, name) if images_dir else {}
    stored: list[str] = []
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, description=description, meta=meta or {})
            image_rows = []
            for done, (image_id, file_name) in enumerate(images.items(), start=1):
                image = Image(
                    dataset=dataset,
                    ext_id=image_id,
                    file_name=file_name,
                    labels=labels.get(image_id, []),
                )
                if image_id in sources:
                    with sources[image_id].open("rb") as handle:
                        saved = default_storage.save(f"images/{name}/{file_name}", File(handle))
                    stored.append(saved)
                    image.file.name = saved
                image_rows.append(image)
                if progress:
                    progress(done, len(images))
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
                    for r in rows
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


def _image_sources(images: dict[int, str], images_dir: Path, dataset: str) -> dict[int, Path]:
    """Find and check every image file before the import writes anything."""
    if not images_dir.is_dir():
        raise ImportFileError(f"{images_dir}: not a directory")
    root = images_dir.resolve()
    sources: dict[int, Path] = {}
    for image_id, file_name in images.items():
        if len(f"images/{dataset}/{file_name}") > FILE_NAME_MAX:
            raise ImportFileError(
                f"{images_dir}: file_name {file_name[:40]!r}… (image_id {image_id}) is too long "
                f"to store (at most {FILE_NAME_MAX} characters with the dataset folder)"
            )
        path = (images_dir / file_name).resolve()
        if root not in path.parents:
            raise ImportFileError(f"{images_dir}: file_name {file_name!r} escapes the image folder")
        if not path.is_file():
            raise ImportFileError(
                f"{images_dir}: image file {file_name!r} (image_id {image_id}) is missing"
            )
        try:
            with PILImage.open(path) as picture:
                picture.verify()
        except (UnidentifiedImageError, OSError) as exc:
            raise ImportFileError(f"{path}: not a readable image ({exc})") from exc
        sources[image_id] = path
    return sources


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
    from .importers import CXC_SCORE_RANGE, parse_cxc_sits

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
