"""Reads that are more than a one-line query."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Candidate,
    Caption,
    Dataset,
    Image,
    PositivePair,
)

PIPELINE_STAGES: tuple[str, ...] = (
    BatchState.RETRIEVING,
    BatchState.POOLING,
    BatchState.BUILDING,
    BatchState.ANNOTATING,
    BatchState.AGGREGATING,
)


def batch_progress(*, batch: Batch) -> list[dict[str, Any]]:
    """Return done/total per pipeline stage, in pipeline order (missing stages as 0/0)."""
    rows = {row.stage: row for row in batch.progress.all()}
    result = []
    for stage in PIPELINE_STAGES:
        row = rows.get(stage)
        result.append(
            {
                "stage": str(stage),
                "done": row.done if row else 0,
                "total": row.total if row else 0,
                "finished": bool(row and row.finished_at),
            }
        )
    return result


def positive_pairs(*, dataset: Dataset, set_names: list[str]) -> set[tuple[int, int]]:
    """Return the (image pk, caption pk) pairs in the union of the named positive sets."""
    return set(
        PositivePair.objects.filter(
            positive_set__dataset=dataset, positive_set__name__in=set_names
        ).values_list("image_id", "caption_id")
    )


def original_pairs(*, dataset: Dataset) -> set[tuple[int, int]]:
    """Return the (image pk, caption pk) pairs of the caption-to-own-image links."""
    return set(Caption.objects.filter(dataset=dataset).values_list("image_id", "id"))


def valid_captions(*, dataset: Dataset) -> QuerySet[Caption]:
    return Caption.objects.filter(dataset=dataset, is_invalid=False)


def dataset_images(*, dataset: Dataset) -> QuerySet[Image]:
    return Image.objects.filter(dataset=dataset)


def batch_candidate_count(*, batch: Batch) -> int:
    return Candidate.objects.filter(batch=batch).count()


def assignments_approved(*, batch: Batch) -> QuerySet[Assignment]:
    return Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.APPROVED)
