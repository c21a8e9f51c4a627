"""COCO object instances stored on a dataset's images (`Image.instances`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from mitl.formats.instances import parse_coco_instances

from ..errors import ServiceError
from ..models import Dataset, Image


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
            f"({first_ids(unknown)})"
        )
    if unknown and not ignore_unknown:
        raise ServiceError(
            f"{path}: {len(unknown)} of its {len(instances)} image ids are not in dataset "
            f"{dataset.name!r} ({first_ids(unknown)}); --ignore-unknown drops them"
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


def first_ids(ids: list[int], shown: int = 5) -> str:
    """Name the smallest few ids, e.g. "7, 9, 12" or "1, 2, 3, 4, 5, …"."""
    listed = ", ".join(str(i) for i in sorted(ids)[:shown])
    return listed + (", …" if len(ids) > shown else "")
