"""Thin Celery tasks of the human side."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings

from .handout import assignments_expire, hits_recount_slots
from .imports.jobs import import_job_create, import_job_run, import_lease
from .imports.requests import Upload
from .imports.staging import import_staging_clean
from .models import Batch, ImportJob
from .mturk.errors import MTurkError
from .mturk.publish import mturk_publish_recorded
from .mturk.sync import mturk_sync_published, mturk_sync_recorded
from .task_leases import LeaseSpec, lease_held, leases_recover, task_queue


@shared_task(name="annotation.expire_assignments", ignore_result=True, time_limit=60)
def expire_assignments() -> int:
    """Expire overdue work and recount the slot hints of open batches (idempotent)."""
    expired = assignments_expire()
    hits_recount_slots()
    return expired


# A soft limit fails the job cleanly (its stored files are removed); the hard one follows.
@shared_task(
    name="annotation.run_import",
    bind=True,
    ignore_result=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 120,
)
def run_import(self, job_id: int) -> str:
    """Run one import job (idempotent: a job that is done or failed is left as it is)."""
    with lease_held(self, import_lease(job_id)) as held:
        if not held:
            return "running elsewhere"
        return import_job_run(job_id=job_id).status


def import_job_queue(job_id: int) -> None:
    """Lease `annotation.run_import` for a job and send it once the transaction commits."""
    task_queue(run_import, [job_id], import_lease(job_id))


def import_job_submit(
    *,
    kind: str,
    params: Mapping[str, Any],
    uploads: Mapping[str, Upload],
    created_by: Any = None,
) -> ImportJob:
    """Check and stage an import request, create its job and queue it on commit.

    See `imports.jobs.import_job_create` for the request; with eager Celery and no outer
    transaction the job has run when this returns.
    """
    return import_job_create(
        kind=kind,
        params=params,
        uploads=uploads,
        created_by=created_by,
        on_created=import_job_queue,
    )


@shared_task(name="annotation.recover_tasks", ignore_result=True, time_limit=120)
def recover_tasks() -> dict[str, list[str]]:
    """Send again the stages and imports whose worker was lost (Celery beat, every 30 s)."""
    recovery = leases_recover()
    return {"resent": recovery.resent, "abandoned": recovery.abandoned}


@shared_task(name="annotation.clean_import_staging", ignore_result=True, time_limit=600)
def clean_import_staging() -> int:
    """Delete staged uploads that no job needs, untouched for IMPORT_STAGING_MAX_AGE_HOURS."""
    age = timedelta(hours=settings.IMPORT_STAGING_MAX_AGE_HOURS)
    return len(import_staging_clean(older_than=age))


# The soft limit lets a sync give its batch's lease back (see mturk.sync.SYNC_LEASE).
@shared_task(
    name="annotation.mturk_sync",
    bind=True,
    ignore_result=True,
    soft_time_limit=29 * 60,
    time_limit=30 * 60,
)
def mturk_sync(self, batch_id: int | None = None) -> dict[int, list[str]]:
    """Sync one batch with MTurk, or every batch with published HITs (Celery beat).

    A sync of a batch that another sync is still running returns "already running" and
    calls nothing on MTurk.
    """
    if batch_id is None:
        return mturk_sync_published()
    with lease_held(self, mturk_sync_lease(batch_id)) as held:
        if not held:
            return {batch_id: [f"a sync of batch {batch_id} is already running elsewhere"]}
        return {batch_id: mturk_sync_recorded(batch=Batch.objects.get(pk=batch_id))}


@shared_task(name="annotation.mturk_publish", bind=True, ignore_result=True, time_limit=60 * 60)
def mturk_publish(self, batch_id: int, production: bool = False) -> list[str]:
    """Publish a batch's HITs on MTurk; the outcome is kept in Batch.mturk["last_publish"]."""
    with lease_held(self, mturk_publish_lease(batch_id)) as held:
        if not held:
            return [f"a publication of batch {batch_id} is already running elsewhere"]
        try:
            return mturk_publish_recorded(
                batch=Batch.objects.get(pk=batch_id), production=production
            )
        except MTurkError as exc:
            return [f"PROBLEM {exc}"]


# --- queueing the MTurk tasks: leased, so a double click never runs two at once ----------


def mturk_publish_lease(batch_id: int) -> LeaseSpec:
    """The lease of `annotation.mturk_publish` for one batch (either environment).

    No batch named: a publication lost too often must not mark the batch's stages as
    failed; its outcome shows in Batch.mturk["last_publish"], and publishing resumes.
    """
    return LeaseSpec(key=f"batch:{batch_id}:mturk_publish")


def mturk_sync_lease(batch_id: int) -> LeaseSpec:
    """The lease of `annotation.mturk_sync` for one batch (as `mturk_publish_lease`)."""
    return LeaseSpec(key=f"batch:{batch_id}:mturk_sync")


def mturk_publish_queue(*, batch_id: int, production: bool) -> None:
    """Queue the publication of the batch's HITs not yet on MTurk, on commit (idempotent)."""
    task_queue(mturk_publish, [batch_id, production], mturk_publish_lease(batch_id))


def mturk_sync_queue(*, batch_id: int) -> None:
    """Queue a sync of the batch with MTurk once the transaction commits."""
    task_queue(mturk_sync, [batch_id], mturk_sync_lease(batch_id))
