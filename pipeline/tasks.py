"""Celery tasks of the machine side, and the one module that queues them.

The tasks are thin, idempotent and given ids: each runs one service (`pipeline.stages`),
which returns what comes next (`StageNext`) instead of queueing it, and the task queues
that here (`next_queue`). Callers above (`pipeline.launch`, the `batch_run` command, the
API, the pages' round controls) queue through the functions here too; the pages ask here
whether the work they just stored completes a round (`annotation_close_check_queue`), and
queue the scoring of a leaderboard upload (`evaluation_job_submit`).

A task queued inside a transaction would let a worker read the batch before its new state
is saved, so every task goes out once the transaction commits (at once outside one).
Without a broker Celery runs tasks eagerly, so the next stage then runs in this process,
on commit. Stage, chunk, close and evaluation tasks are leased (annotation/task_leases.py;
their keys in pipeline/leases.py): a lost worker's task is sent again, a duplicate does
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from celery import shared_task
from django.db import OperationalError, transaction

from annotation.faults import fault_pause
from annotation.models import Batch, BatchState, EvaluationJob, Release
from annotation.rounds import batches_round_complete, round_complete
from annotation.task_leases import lease_held, task_queue
from annotation.tasks import mturk_publish_queue
from mitl.config import batch_config
from mitl.evaluation_inputs import RankingsByDirection
from pipeline.autopilot import AutopilotStep
from pipeline.autopilot import crowd_autopilot as autopilot_run
from pipeline.bias_page import bias_cache_warm
from pipeline.evaluation_jobs import evaluation_job_create, evaluation_job_run
from pipeline.leases import chunk_lease, close_lease, evaluation_lease, stage_lease
from pipeline.stages import (
    StageNext,
    batch_start,
    retrieval_chunk_run,
    stage_advance,
    state_of,
)

logger = logging.getLogger(__name__)


@shared_task(
    name="mitl.run_stage",
    bind=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    acks_late=True,
    soft_time_limit=3 * 3600,
    time_limit=3 * 3600 + 60,
)
def run_stage(self, batch_id: int, stage: str) -> str:
    """Run one stage of a batch; chain the next one when it runs by itself."""
    with lease_held(self, stage_lease(batch_id, stage)) as held:
        if held:
            fault_pause(f"stage:{stage}")
            next_queue(stage_advance(batch_id=batch_id, stage=stage, fan_out=True))
    return state_of(batch_id)


@shared_task(
    name="mitl.retrieve_chunk",
    bind=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    acks_late=True,
    soft_time_limit=3600,
    time_limit=3660,
)
def retrieve_chunk(self, batch_id: int, annotator_id: int, query_ids: list[int]) -> bool:
    """Rank one block of queries with one annotator; the last block starts pooling."""
    step = StageNext(batch_id=batch_id)
    with lease_held(self, chunk_lease(batch_id, annotator_id, query_ids)) as held:
        if held:
            fault_pause(f"stage:{BatchState.RETRIEVING}")
            step = retrieval_chunk_run(
                batch_id=batch_id, annotator_id=annotator_id, query_ids=query_ids
            )
    next_queue(step)
    return step.moved


@shared_task(name="mitl.close_annotation", bind=True, acks_late=True)
def close_annotation(self, batch_id: int, force: bool = False) -> str:
    """End the annotating stage (when complete, or early with `force`) and aggregate."""
    with lease_held(self, close_lease(batch_id)) as held:
        if held:
            next_queue(stage_advance(batch_id=batch_id, stage=BatchState.ANNOTATING, force=force))
    return state_of(batch_id)


@shared_task(name="mitl.close_complete_rounds", ignore_result=True, time_limit=60)
def close_complete_rounds() -> list[int]:
    """Close every annotating round that has all its approved work (Celery beat, every minute).

    For work that arrives without a page to ask (MTurk's sync, a results import on a
    worker); the pages ask themselves (`annotation_close_check_queue`).
    """
    return complete_rounds_close_queue()


@shared_task(
    name="mitl.run_evaluation",
    bind=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    acks_late=True,
    soft_time_limit=3600,
    time_limit=3660,
)
def run_evaluation(self, job_id: int) -> str:
    """Score an evaluation job's rankings on its release (pipeline/evaluation_jobs.py)."""
    with lease_held(self, evaluation_lease(job_id)) as held:
        if held:
            return evaluation_job_run(job_id=job_id).status
    return EvaluationJob.objects.get(pk=job_id).status


@shared_task(name="mitl.bias_warm", ignore_result=True, soft_time_limit=1800, time_limit=1860)
def bias_warm(batch_id: int) -> bool:
    """Build a released batch's bias report and page (pipeline/bias_page.py); idempotent:
    a second run finds them built for the same state of the work."""
    return bias_cache_warm(batch_id=batch_id)


AUTOPILOT_POLL_S = 2
AUTOPILOT_MAX_WAITS = 24 * 3600 // AUTOPILOT_POLL_S  # a day of automatic stages at most


@shared_task(
    name="mitl.crowd_autopilot",
    bind=True,
    acks_late=True,
    max_retries=AUTOPILOT_MAX_WAITS,
    soft_time_limit=3600,
    time_limit=3660,
)
def crowd_autopilot(self, batch_id: int) -> str:
    """Let the simulated crowd judge a batch once it is annotating, then aggregate it."""
    step = autopilot_run(batch_id=batch_id)
    while step == AutopilotStep.CLOSED:
        stage_queue(batch_id=batch_id, stage=BatchState.AGGREGATING)
        if not batch_config(Batch.objects.get(pk=batch_id)).adaptive:
            return str(step)
        if not self.request.is_eager:  # the next round is built by the workers: look again
            raise self.retry(countdown=AUTOPILOT_POLL_S)
        step = autopilot_run(batch_id=batch_id)  # eager: the next round is built already
    if step == AutopilotStep.WAIT:
        if self.request.is_eager:  # stages run in this process: waiting here changes nothing
            return str(step)
        raise self.retry(countdown=AUTOPILOT_POLL_S)
    return str(step)


# --- queueing: every task goes out once the caller's transaction commits ---------------


def next_queue(step: StageNext) -> None:
    """Queue what a stage call said comes next: its chunks, its next stage, its HITs' MTurk
    publication (a later round's, joining the batch's), each once the transaction commits."""
    if step.mturk_publish:
        # Not a stage: a lost publication leaves the HITs unpublished, never the batch stuck.
        mturk_publish_queue(batch_id=step.batch_id, production=step.mturk_production)
    retrieval_chunks_queue(batch_id=step.batch_id, chunks=step.chunks)
    if step.stage is not None:
        stage_queue(batch_id=step.batch_id, stage=step.stage)
    if step.released and not bias_warm.app.conf.task_always_eager:
        # On workers only: without them the charts would hold up whoever released the batch
        # (the demo builds them itself; otherwise the page's first visitor does).
        transaction.on_commit(lambda: bias_warm.delay(step.batch_id))


def batch_start_queue(*, batch: Batch) -> Batch:
    """Start a draft batch and queue its automatic stages (`batch_start`), in one transaction.

    With no broker the stages run inside this call, once it commits.
    """
    with transaction.atomic():
        next_queue(batch_start(batch=batch))
    batch.refresh_from_db()
    return batch


def stage_queue(*, batch_id: int, stage: str) -> None:
    """Queue `mitl.run_stage` for `stage` of the batch once the transaction commits."""
    task_queue(run_stage, [batch_id, stage], stage_lease(batch_id, stage))


def retrieval_chunks_queue(*, batch_id: int, chunks: Iterable[tuple[int, Sequence[int]]]) -> None:
    """Queue one `mitl.retrieve_chunk` per (annotator id, query ids) chunk, on commit."""
    for annotator_id, query_ids in chunks:
        ids = list(query_ids)
        lease = chunk_lease(batch_id, annotator_id, ids)
        task_queue(retrieve_chunk, [batch_id, annotator_id, ids], lease)


def annotation_close_queue(*, batch_id: int, force: bool) -> None:
    """Queue `mitl.close_annotation` (early with `force`) once the transaction commits."""
    task_queue(close_annotation, [batch_id, force], close_lease(batch_id))


def annotation_close_check_queue(*, batch_id: int) -> bool:
    """Queue the close of the batch's round if it is annotating and has all its approved work.

    Called by the pages after a submission, a review or an MTurk sync: one query, and the
    close itself is idempotent (`mitl.close_annotation` without force does nothing while
    work is missing or once the batch has moved on). True when a close was queued.
    """
    if not round_complete(batch_id=batch_id):
        return False
    failures_to_batch(partial(annotation_close_queue, batch_id=batch_id, force=False))
    return True


def complete_rounds_close_queue() -> list[int]:
    """Queue the close of every annotating batch whose round has all its approved work.

    A batch that carries an error is left to an admin (resume on its page): a close that
    keeps failing is not sent again every minute.
    """
    complete = batches_round_complete()
    failed = set(
        Batch.objects.filter(pk__in=complete).exclude(error="").values_list("pk", flat=True)
    )
    closing = [batch_id for batch_id in complete if batch_id not in failed]
    for batch_id in closing:
        failures_to_batch(partial(annotation_close_queue, batch_id=batch_id, force=False))
    return closing


def failures_to_batch(queue: Callable[[], None]) -> None:
    """Queue; with eager Celery, where the stages run right here, keep their failure to the
    batch (the stage records it as `Batch.error`, and the page offers to resume) instead of
    failing the submission or review that asked: that work is stored already."""
    if not close_annotation.app.conf.task_always_eager:
        queue()  # a broker that is down fails loudly
        return

    def run_logged() -> None:
        try:
            queue()  # after the commit: its own on_commit runs its task at once, in here
        except Exception:
            logger.exception("a stage run after closing a round failed; its batch records why")

    transaction.on_commit(run_logged)


def evaluation_job_submit(
    *,
    release: Release,
    model_name: str,
    rankings: RankingsByDirection,
    rankings_file: bytes | None = None,
    submitted_by: Any = None,
) -> EvaluationJob:
    """Store checked rankings as an evaluation job and queue its scoring once it commits.

    See `evaluation_jobs.evaluation_job_create`; with eager Celery and no outer transaction
    the job has run when this returns.
    """
    return evaluation_job_create(
        release=release,
        model_name=model_name,
        rankings=rankings,
        rankings_file=rankings_file,
        submitted_by=submitted_by,
        on_created=lambda job_id: task_queue(run_evaluation, [job_id], evaluation_lease(job_id)),
    )


def crowd_autopilot_queue(*, batch_id: int) -> None:
    """Queue `mitl.crowd_autopilot` for the batch once the transaction commits.

    Not leased: the simulated crowd (a demo and test aid) polls by retrying itself, so a
    lost one is not sent again; `crowd_simulate` judges the batch instead.
    """
    transaction.on_commit(lambda: crowd_autopilot.delay(batch_id))
