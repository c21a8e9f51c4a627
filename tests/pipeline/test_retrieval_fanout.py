"""Retrieval fanned out over Celery chunk tasks gives exactly the in-process rankings."""

from __future__ import annotations

import pytest

from annotation.models import Batch, Ranking
from pipeline import retrieve
from pipeline.stages import batch_create, batch_run_until
from pipeline.tasks import batch_start_queue

pytestmark = pytest.mark.django_db


def rankings_of(batch: Batch) -> dict[tuple[str, int, int | None, int | None], list[int]]:
    return {
        (annotator, direction, image, caption): targets
        for annotator, direction, image, caption, targets in Ranking.objects.filter(
            query__batch=batch
        ).values_list(
            "annotator__name",
            "query__direction",
            "query__image_id",
            "query__caption_id",
            "targets",
        )
    }


def test_chunked_tasks_rank_exactly_like_one_process(
    dataset, annotators, small_config, eager_celery, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(retrieve, "CHUNK_QUERIES", 5)  # 16 queries → 4 chunks per annotator
    chunks: list[tuple[int, int]] = []
    original = retrieve.rankings_compute

    def counting(**kwargs):
        if kwargs.get("query_ids") is not None:
            chunks.append((next(iter(kwargs["annotator_ids"])), len(list(kwargs["query_ids"]))))
        return original(**kwargs)

    monkeypatch.setattr("pipeline.stages.rankings_compute", counting)
    in_process = batch_create(dataset=dataset, name="one process", raw_config=small_config)
    fanned = batch_create(dataset=dataset, name="fanned out", raw_config=small_config)

    batch_run_until(batch_id=in_process.pk, until="annotating")
    with django_capture_on_commit_callbacks(execute=True):
        batch_start_queue(batch=fanned)

    fanned.refresh_from_db()
    assert fanned.state == "annotating"
    assert sorted(chunks) == sorted([(a.pk, n) for a in annotators for n in (5, 5, 5, 1)])
    assert rankings_of(fanned) == rankings_of(in_process)
    assert fanned.progress.get(stage="retrieving").done == 32
