"""Load a dataset into the pure `Corpus` that annotators read, with the id maps back."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage

from annotation.models import Caption, Dataset, Image
from mitl.annotators import Corpus


@dataclass(frozen=True)
class LoadedCorpus:
    corpus: Corpus
    image_pks: np.ndarray  # int64, row → Image pk
    caption_pks: np.ndarray  # int64, row → Caption pk

    def image_rows(self, pks: list[int]) -> np.ndarray:
        return rows_of(self.image_pks, pks)

    def caption_rows(self, pks: list[int]) -> np.ndarray:
        return rows_of(self.caption_pks, pks)


def corpus_load(*, dataset: Dataset) -> LoadedCorpus:
    """Read images and valid captions in primary-key order (invalid captions are left out)."""
    images = list(
        Image.objects.filter(dataset=dataset)
        .order_by("pk")
        .values_list("pk", "ext_id", "file", "labels")
    )
    captions = list(
        Caption.objects.filter(dataset=dataset, is_invalid=False)
        .order_by("pk")
        .values_list("pk", "ext_id", "text", "image_id")
    )
    image_pks = np.array([row[0] for row in images], dtype=np.int64)
    row_of_image = {pk: row for row, pk in enumerate(image_pks.tolist())}
    has_files = any(row[2] for row in images)
    corpus = Corpus(
        image_ids=np.array([row[1] for row in images], dtype=np.int64),
        caption_ids=np.array([row[1] for row in captions], dtype=np.int64),
        caption_texts=tuple(row[2] for row in captions),
        caption_image=np.array([row_of_image[row[3]] for row in captions], dtype=np.int64),
        image_paths=tuple(_local_path(row[2]) for row in images) if has_files else None,
        image_labels=tuple(tuple(row[3]) for row in images),
    )
    return LoadedCorpus(
        corpus=corpus,
        image_pks=image_pks,
        caption_pks=np.array([row[0] for row in captions], dtype=np.int64),
    )


def _local_path(name: str) -> str | None:
    """Return a path on this machine: the file itself, or a cached copy of a remote object.

    Annotators that read pixels (open_clip) open files; with S3-compatible storage each
    image is fetched once into VAR_DIR/image_cache/ and read from there afterwards.
    """
    if not name:
        return None
    try:
        return default_storage.path(name)
    except NotImplementedError:
        return str(_cached_copy(name))


def _cached_copy(name: str) -> Path:
    cached = Path(settings.VAR_DIR) / "image_cache" / name
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(cached.name + ".part")
        with default_storage.open(name, "rb") as source, partial.open("wb") as target:
            shutil.copyfileobj(source, target)
        partial.replace(cached)  # a reader never sees half a file
    return cached


class NotInCorpus(KeyError):
    """Some ids are not rows of the corpus (unknown, deleted, or a caption marked invalid)."""

    def __init__(self, missing: list[int]) -> None:
        super().__init__(f"{len(missing)} ids are not in the corpus (first: {missing[0]})")
        self.missing = missing


def rows_of(ids_by_row: np.ndarray, wanted: list[int]) -> np.ndarray:
    """Return the corpus row of each wanted id (pks or external ids, as `ids_by_row` holds)."""
    order = np.argsort(ids_by_row)
    wanted_ids = np.asarray(wanted, dtype=np.int64)
    positions = np.searchsorted(ids_by_row, wanted_ids, sorter=order)
    rows = order[np.clip(positions, 0, len(order) - 1)]
    found = ids_by_row[rows] == wanted_ids
    if not found.all():
        raise NotInCorpus(wanted_ids[~found].tolist())
    return rows
