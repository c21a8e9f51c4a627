"""Celery tasks: thin, idempotent, given ids; each runs one service and queues the next."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError, transaction

from annotation.models import BatchState
from mitl.services.pipeline import AUTOMATIC_STAGES, stage_run


@shared_task(
    name="mitl.run_stage",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    acks_late=True,
    soft_time_limit=3 * 3600,
    time_limit=3 * 3600 + 60,
)
def run_stage(batch_id: int, stage: str) -> str:
    """Run one stage of a batch; chain the next one when it runs by itself."""
    new_state = stage_run(batch_id=batch_id, stage=stage)
    if new_state != stage and new_state in AUTOMATIC_STAGES:
        transaction.on_commit(lambda: run_stage.delay(batch_id, new_state))
    return new_state


@shared_task(name="mitl.close_annotation", acks_late=True)
def close_annotation(batch_id: int, force: bool = False) -> str:
    """End the annotating stage (when complete, or early with `force`) and aggregate."""
    new_state = stage_run(batch_id=batch_id, stage=BatchState.ANNOTATING, force=force)
    if new_state == BatchState.AGGREGATING:
        transaction.on_commit(lambda: run_stage.delay(batch_id, new_state))
    return new_state
