"""Celery tasks: thin, idempotent, given ids; each runs one service and queues the next."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from annotation.faults import fault_pause
from annotation.models import Batch, BatchState
from annotation.task_leases import lease_held
from pipeline.queueing import chunk_lease, close_lease, stage_lease, stage_queue
from pipeline.stages import (
    AUTOMATIC_STAGES,
    retrieval_chunk_run,
    stage_advance,
    state_of,
)


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
        if held and stage_advance(batch_id=batch_id, stage=stage, fan_out=True):
            # The state this call moved to: the next stage, or an adaptive batch's next round.
            following = state_of(batch_id)
            if following in AUTOMATIC_STAGES:
                stage_queue(batch_id=batch_id, stage=following)
    return Batch.objects.values_list("state", flat=True).get(pk=batch_id)


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
    with lease_held(self, chunk_lease(batch_id, annotator_id, query_ids)) as held:
        if held:
            fault_pause(f"stage:{BatchState.RETRIEVING}")
        completed = held and retrieval_chunk_run(
            batch_id=batch_id, annotator_id=annotator_id, query_ids=query_ids
        )
    if completed:
        stage_queue(batch_id=batch_id, stage=BatchState.POOLING)
    return completed


@shared_task(name="mitl.close_annotation", bind=True, acks_late=True)
def close_annotation(self, batch_id: int, force: bool = False) -> str:
    """End the annotating stage (when complete, or early with `force`) and aggregate."""
    with lease_held(self, close_lease(batch_id)) as held:
        if held and stage_advance(batch_id=batch_id, stage=BatchState.ANNOTATING, force=force):
            stage_queue(batch_id=batch_id, stage=BatchState.AGGREGATING)
    return Batch.objects.values_list("state", flat=True).get(pk=batch_id)


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
    from mitl.config import batch_config
    from pipeline.autopilot import AutopilotStep
    from pipeline.autopilot import crowd_autopilot as autopilot_run

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
