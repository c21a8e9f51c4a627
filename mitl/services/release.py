"""Releasing: extended positive sets (human ∪ original, minus invalid captions) on disk."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    Candidate,
    Direction,
    Judgement,
    PositivePair,
    Query,
    Release,
    Verdict,
)
from annotation.services import ORIGINAL_SET
from mitl.config import BatchConfig
from mitl.judgements import mask_to_shortcomings, mask_to_wrong_concepts
from mitl.releases import positive_counts, positives_by_query, write_release_dir

from .aggregate import human_set_name
from .report import DIVERSITY_FILE


def release_create(*, batch: Batch, config: BatchConfig, name: str | None = None) -> Release:
    """Write a new version of release `name` (default: the dataset's name) for the batch."""
    name = name or batch.dataset.name
    image_queries, caption_queries = _query_ext_ids(batch)
    sources = [ORIGINAL_SET, human_set_name(batch)]
    original = _pairs(batch, [ORIGINAL_SET])
    extended = _pairs(batch, sources)
    i2t_before, t2i_before = positives_by_query(
        original, image_queries=image_queries, caption_queries=caption_queries
    )
    i2t, t2i = positives_by_query(
        extended, image_queries=image_queries, caption_queries=caption_queries
    )
    stats = {
        "i2t": positive_counts(i2t_before, i2t),
        "t2i": positive_counts(t2i_before, t2i),
        **_work_stats(batch),
    }
    version = _next_version(name)
    final_dir = settings.RELEASES_DIR / name / str(version)
    manifest = write_release_dir(
        final_dir,
        i2t=i2t,
        t2i=t2i,
        judgements=_judgement_rows(batch),
        stats=stats,
        reports={DIVERSITY_FILE: batch.reports["diversity"]}
        if "diversity" in batch.reports
        else None,
        manifest={
            "name": name,
            "version": version,
            "dataset": batch.dataset.name,
            "batches": [batch.pk],
            "sources": sources,
            "rule": config.aggregation,
            "format": "ECCV Caption (image_to_caption.json, caption_to_image.json)",
            "invalid_captions_excluded": sorted(
                batch.dataset.captions.filter(is_invalid=True).values_list("ext_id", flat=True)
            ),
        },
    )
    try:
        with transaction.atomic():
            release = Release.objects.create(
                dataset=batch.dataset,
                name=name,
                version=version,
                rule=config.aggregation,
                path=str(final_dir),
                manifest=manifest,
            )
            release.batches.add(batch)
    except BaseException:
        shutil.rmtree(final_dir, ignore_errors=True)  # no directory without its database row
        raise
    return release


def _next_version(name: str) -> int:
    """Return the next version of a release name, past any folder already on disk too.

    A folder can exist without its row (a database reset, or a copy from elsewhere); a
    release never overwrites one.
    """
    in_database = Release.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0
    folder = settings.RELEASES_DIR / name
    on_disk = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return max([in_database, *on_disk]) + 1


def _query_ext_ids(batch: Batch) -> tuple[list[int], list[int]]:
    queries = Query.objects.filter(batch=batch)
    images = list(queries.filter(direction=Direction.I2T).values_list("image__ext_id", flat=True))
    captions = list(
        queries.filter(direction=Direction.T2I, caption__is_invalid=False).values_list(
            "caption__ext_id", flat=True
        )
    )
    return images, captions


def _pairs(batch: Batch, set_names: list[str]) -> set[tuple[int, int]]:
    return set(
        PositivePair.objects.filter(
            positive_set__dataset_id=batch.dataset_id,
            positive_set__name__in=set_names,
            caption__is_invalid=False,
        ).values_list("image__ext_id", "caption__ext_id")
    )


def _work_stats(batch: Batch) -> dict[str, Any]:
    judgements = Judgement.objects.filter(assignment__hit__batch=batch)
    verdicts = Verdict.objects.filter(candidate__batch=batch)
    assignment_status = Counter(
        Assignment.objects.filter(hit__batch=batch).values_list("status", flat=True)
    )
    return {
        "candidates": Candidate.objects.filter(batch=batch).count(),
        "hits": HIT.objects.filter(batch=batch).count(),
        "assignments": dict(sorted(assignment_status.items())),
        "judgements": judgements.count(),
        "verdicts": {
            "positive": verdicts.filter(is_positive=True).count(),
            "negative": verdicts.filter(is_positive=False).count(),
        },
    }


def _judgement_rows(batch: Batch) -> Iterator[dict[str, Any]]:
    rows = (
        Judgement.objects.filter(assignment__hit__batch=batch)
        .exclude(assignment__status=AssignmentStatus.ACCEPTED)
        .order_by("assignment__hit__index", "assignment_id", "item__position")
        .values_list(
            "item__image__ext_id",
            "item__caption__ext_id",
            "item__role",
            "level",
            "shortcomings",
            "wrong_concepts",
            "other_text",
            "elapsed_ms",
            "assignment__worker__source",
            "assignment__worker__external_id",
            "assignment__hit__index",
            "assignment_id",
            "assignment__status",
        )
    )
    for (
        image,
        caption,
        role,
        level,
        shortcomings,
        concepts,
        other,
        elapsed,
        source,
        worker,
        hit,
        assignment,
        status,
    ) in rows.iterator(chunk_size=5000):
        yield {
            "image_id": image,
            "caption_id": caption,
            "role": role,
            "level": level,
            "shortcomings": mask_to_shortcomings(shortcomings),
            "wrong_concepts": mask_to_wrong_concepts(concepts),
            "other_text": other,
            "elapsed_ms": elapsed,
            "worker": f"{source}:{worker}",
            "batch": batch.pk,
            "hit": hit,
            "assignment": assignment,
            "assignment_status": status,
        }
