"""Queue a batch's next Celery task from one place: always once the transaction commits.

A task queued inside a transaction would let a worker read the batch before its new state
is saved, so every task goes out on commit (at once outside a transaction). Without a
broker Celery runs tasks eagerly, so the next stage then runs in this process, on commit.
The tasks import the services, hence the imports inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from celery import Task
from django.db import transaction


def stage_queue(*, batch_id: int, stage: str) -> None:
    """Queue `mitl.run_stage` for `stage` of the batch once the transaction commits."""
    from mitl.tasks import run_stage

    _queue_on_commit(run_stage, batch_id, stage)


def retrieval_chunks_queue(*, batch_id: int, chunks: Iterable[tuple[int, list[int]]]) -> None:
    """Queue one `mitl.retrieve_chunk` per (annotator id, query ids) chunk, on commit."""
    from mitl.tasks import retrieve_chunk

    for annotator_id, query_ids in chunks:
        _queue_on_commit(retrieve_chunk, batch_id, annotator_id, query_ids)


def annotation_close_queue(*, batch_id: int, force: bool) -> None:
    """Queue `mitl.close_annotation` (early with `force`) once the transaction commits."""
    from mitl.tasks import close_annotation

    _queue_on_commit(close_annotation, batch_id, force)


def crowd_autopilot_queue(*, batch_id: int) -> None:
    """Queue `mitl.crowd_autopilot` for the batch once the transaction commits."""
    from mitl.tasks import crowd_autopilot

    _queue_on_commit(crowd_autopilot, batch_id)


def _queue_on_commit(task: Task, *args: Any) -> None:
    transaction.on_commit(lambda: task.delay(*args))
