"""Task leases: a Celery worker lost in the middle of a stage costs about a minute, not hours.

With late acks on Redis, the message of a task whose worker was killed comes back only
after the broker's visibility timeout (7 h, so that a long import never runs twice at
once). So every stage and import task holds a lease row (`TaskLease`) from queueing to its
end, whatever the broker:

- `task_queue` writes the lease (queued) in the caller's transaction and sends the task
  once that transaction commits;
- the task runs inside `lease_held`, which claims the lease (running, with its holder's id)
  and refreshes the heartbeat from a thread of its own; the row is deleted when the task
  ends, however it ends. A second delivery of a task whose lease a live worker holds does
  nothing;
- `leases_recover` (Celery beat, every 30 s) sends again every task whose heartbeat is
  TASK_STALE_S old (its worker died) or that waited TASK_QUEUED_STALE_S for a worker (its
  message was lost with the broker's memory). After TASK_MAX_RESENDS it gives up, and
  says why on the task's batch, import job or evaluation job.

The tasks themselves stay idempotent, so the original message, redelivered hours later,
changes nothing. Without a broker tasks run eagerly in the caller's process: there is no
worker to lose, so there is no lease.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from celery import Task, current_app
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from .models import (
    Batch,
    BatchState,
    EvaluationJob,
    EvaluationJobStatus,
    ImportJob,
    ImportStatus,
    LeaseState,
    TaskLease,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSpec:
    """What a task works on: its lease key, and the batch or job to tell if it fails."""

    key: str
    batch_id: int | None = None
    import_job_id: int | None = None
    evaluation_job_id: int | None = None


def task_queue(task: Task, args: Sequence[Any], spec: LeaseSpec) -> None:
    """Lease `task` (queued) and send it with `args` once the current transaction commits.

    A lease a live worker holds is left to it: the message sent here then does nothing,
    as a duplicate delivery would.
    """
    args = list(args)
    if not task.app.conf.task_always_eager:
        now = timezone.now()
        _lease_write(
            spec,
            replaceable=~Q(state=LeaseState.RUNNING, heartbeat_at__gte=_stale_before(now)),
            fields={
                "task": task.name,
                "args": args,
                "state": LeaseState.QUEUED,
                "holder": "",
                "queued_at": now,
                "heartbeat_at": None,
                "resent": 0,
            },
        )  # False: a live worker holds it, or a concurrent caller queued it at this moment
    transaction.on_commit(lambda: task.apply_async(args=args))


@contextmanager
def lease_held(task: Task, spec: LeaseSpec) -> Iterator[bool]:
    """Hold the task's lease while the block runs; yield False when a live worker holds it."""
    if task.request.is_eager:
        yield True
        return
    holder = task.request.id or uuid.uuid4().hex
    if not _claim(spec, holder=holder, task_name=task.name, args=list(task.request.args or [])):
        logger.info("task lease %s is held by a live worker: nothing to do", spec.key)
        yield False
        return
    heartbeat = _Heartbeat(spec.key, holder)
    heartbeat.start()
    try:
        yield True
    finally:
        heartbeat.stop()
        TaskLease.objects.filter(key=spec.key, holder=holder).delete()


def lease_live(*, key_prefix: str) -> bool:
    """Say whether a live worker runs a task whose lease key starts with `key_prefix`."""
    since = _stale_before(timezone.now())
    return TaskLease.objects.filter(
        key__startswith=key_prefix, state=LeaseState.RUNNING, heartbeat_at__gte=since
    ).exists()


@dataclass
class Recovery:
    """What one watchdog pass did: the lease keys sent again and those given up."""

    resent: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)


def leases_recover(*, now: datetime | None = None) -> Recovery:
    """Send again every task whose worker was lost or whose message never reached one."""
    now = now or timezone.now()
    queued_before = now - timedelta(seconds=settings.TASK_QUEUED_STALE_S)
    lost = TaskLease.objects.filter(
        Q(state=LeaseState.RUNNING, heartbeat_at__lt=_stale_before(now))
        | Q(state=LeaseState.QUEUED, queued_at__lt=queued_before)
    ).order_by("pk")
    recovery = Recovery()
    for lease in lost:
        with transaction.atomic():
            # Conditional on the row as read: a worker that claimed it meanwhile keeps it.
            unchanged = TaskLease.objects.filter(
                pk=lease.pk,
                state=lease.state,
                holder=lease.holder,
                heartbeat_at=lease.heartbeat_at,
                queued_at=lease.queued_at,
            )
            if lease.resent >= settings.TASK_MAX_RESENDS:
                if unchanged.update(state=LeaseState.ABANDONED):
                    _abandon_owner(lease)
                    recovery.abandoned.append(lease.key)
                continue
            if unchanged.update(
                state=LeaseState.QUEUED,
                holder="",
                heartbeat_at=None,
                queued_at=now,
                resent=F("resent") + 1,
            ):
                transaction.on_commit(
                    partial(current_app.send_task, lease.task, args=list(lease.args))
                )
                recovery.resent.append(lease.key)
    for key in recovery.resent:
        logger.warning("task lease %s: no live worker has it; sent again", key)
    for key in recovery.abandoned:
        logger.error("task lease %s: lost its worker too often; abandoned", key)
    return recovery


def _stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.TASK_STALE_S)


def _claim(spec: LeaseSpec, *, holder: str, task_name: str, args: list[Any]) -> bool:
    now = timezone.now()
    return _lease_write(
        spec,
        replaceable=Q(state=LeaseState.QUEUED)
        | Q(state=LeaseState.RUNNING, heartbeat_at__lt=_stale_before(now)),
        fields={"state": LeaseState.RUNNING, "holder": holder, "heartbeat_at": now},
        # Sent without a lease (e.g. by hand, or by a version before leases): lease it now.
        created_with={"task": task_name, "args": args, "queued_at": now},
    )  # False: a live holder, or abandoned until an admin resumes it


def _lease_write(
    spec: LeaseSpec,
    *,
    replaceable: Q,
    fields: dict[str, Any],
    created_with: dict[str, Any] | None = None,
) -> bool:
    """Write `fields` into the lease of `spec` where `replaceable` matches it, or create the
    lease (with `created_with` too) when there is none; False when another lease stands."""
    if TaskLease.objects.filter(replaceable, key=spec.key).update(**fields):
        return True
    if TaskLease.objects.filter(key=spec.key).exists():
        return False
    try:
        with transaction.atomic():
            TaskLease.objects.create(
                key=spec.key,
                batch_id=spec.batch_id,
                import_job_id=spec.import_job_id,
                evaluation_job_id=spec.evaluation_job_id,
                **fields,
                **(created_with or {}),
            )
    except IntegrityError:  # created by a concurrent caller at this moment
        return False
    return True


def _abandon_owner(lease: TaskLease) -> None:
    tries = lease.resent + 1
    if lease.batch_id is not None:
        Batch.objects.filter(pk=lease.batch_id).exclude(
            state__in=[BatchState.RELEASED, BatchState.CANCELLED]
        ).update(
            error=(
                f"{lease.task} lost its worker {tries} times (killed, e.g. out of memory); "
                f"resume with `python manage.py batch_run {lease.batch_id}`"
            )
        )
    if lease.import_job_id is not None:
        ImportJob.objects.filter(
            pk=lease.import_job_id, status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING]
        ).update(
            status=ImportStatus.FAILED,
            error=f"the import lost its worker {tries} times (killed, e.g. out of memory)",
            finished_at=timezone.now(),
        )
    if lease.evaluation_job_id is not None:
        EvaluationJob.objects.filter(
            pk=lease.evaluation_job_id,
            status__in=[EvaluationJobStatus.QUEUED, EvaluationJobStatus.RUNNING],
        ).update(
            status=EvaluationJobStatus.FAILED,
            error=f"the scoring lost its worker {tries} times (killed, e.g. out of memory)",
            rankings_json=None,
            finished_at=timezone.now(),
        )


class _Heartbeat(threading.Thread):
    """Refresh a lease's heartbeat until stopped, on a database connection of its own."""

    def __init__(self, key: str, holder: str) -> None:
        super().__init__(name=f"lease-heartbeat {key}", daemon=True)
        self.key = key
        self.holder = holder
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)

    def run(self) -> None:
        try:
            while not self._stopping.wait(settings.TASK_HEARTBEAT_S):
                try:
                    kept = TaskLease.objects.filter(key=self.key, holder=self.holder).update(
                        heartbeat_at=timezone.now()
                    )
                except DatabaseError:
                    logger.warning("task lease %s: heartbeat failed, retrying", self.key)
                    connection.close()  # reconnect on the next beat (e.g. after a restart)
                    continue
                if not kept:
                    logger.warning("task lease %s was taken over by another worker", self.key)
                    return
        finally:
            connection.close()
