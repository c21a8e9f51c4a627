"""Queue a batch's next Celery task from one place: always once the transaction commits.

A task queued inside a transaction would let a worker read the batch before its new state
is saved, so every task goes out on commit (at once outside a transaction). Without a
broker Celery runs tasks eagerly, so the next stage then runs in this process, on commit.
Stage tasks are leased (annotation/task_leases.py): the lease keys below are the one
definition both the queueing side and the running task use.
The tasks import the services, hence the imports inside the functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from django.db import transaction

from annotation.task_leases import LeaseSpec, task_queue


def stage_lease(batch_id: int, stage: str) -> LeaseSpec:
    """The lease of `mitl.run_stage` for one stage of one batch."""
    return LeaseSpec(key=f"batch:{batch_id}:{stage}", batch_id=batch_id)


def chunk_lease(batch_id: int, annotator_id: int, query_ids: list[int]) -> LeaseSpec:
    """The lease of one `mitl.retrieve_chunk`: the batch, the annotator and its queries."""
    digest = hashlib.sha1(json.dumps(query_ids).encode(), usedforsecurity=False).hexdigest()
    return LeaseSpec(
        key=f"batch:{batch_id}:retrieving:{annotator_id}:{digest[:16]}", batch_id=batch_id
    )


def close_lease(batch_id: int) -> LeaseSpec:
    """The lease of `mitl.close_annotation` for one batch."""
    return LeaseSpec(key=f"batch:{batch_id}:close", batch_id=batch_id)


def stage_queue(*, batch_id: int, stage: str) -> None:
    """Queue `mitl.run_stage` for `stage` of the batch once the transaction commits."""
    from pipeline.tasks import run_stage

    task_queue(run_stage, [batch_id, stage], stage_lease(batch_id, stage))


def retrieval_chunks_queue(*, batch_id: int, chunks: Iterable[tuple[int, list[int]]]) -> None:
    """Queue one `mitl.retrieve_chunk` per (annotator id, query ids) chunk, on commit."""
    from pipeline.tasks import retrieve_chunk

    for annotator_id, query_ids in chunks:
        task_queue(
            retrieve_chunk,
            [batch_id, annotator_id, query_ids],
            chunk_lease(batch_id, annotator_id, query_ids),
        )


def annotation_close_queue(*, batch_id: int, force: bool) -> None:
    """Queue `mitl.close_annotation` (early with `force`) once the transaction commits."""
    from pipeline.tasks import close_annotation

    task_queue(close_annotation, [batch_id, force], close_lease(batch_id))


def crowd_autopilot_queue(*, batch_id: int) -> None:
    """Queue `mitl.crowd_autopilot` for the batch once the transaction commits.

    Not leased: the simulated crowd (a demo and test aid) polls by retrying itself, so a
    lost one is not sent again; `crowd_simulate` judges the batch instead.
    """
    from pipeline.tasks import crowd_autopilot

    transaction.on_commit(lambda: crowd_autopilot.delay(batch_id))


def mturk_round_publish_queue(*, batch_id: int, mturk_state: dict) -> bool:
    """Queue the publication of an adaptive round's new HITs where the batch is on MTurk.

    They join the batch's publication: same HIT type and environment (`mturk_publish` is
    idempotent and skips HITs that have their HITId). Not leased: a lost message leaves
    the HITs unpublished until `mturk_publish BATCH` runs again. Returns whether it queued.
    """
    if not mturk_state.get("hit_type_id"):
        return False
    from annotation.tasks import mturk_publish

    production = mturk_state.get("environment") == "production"
    transaction.on_commit(lambda: mturk_publish.delay(batch_id, production))
    return True
