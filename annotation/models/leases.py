"""Task leases: which background tasks are queued or running, so a lost one is sent again."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .batch import Batch
from .imports import ImportJob
from .results import EvaluationJob


class LeaseState(models.TextChoices):
    QUEUED = "queued", "queued: sent to the broker, no worker has it yet"
    RUNNING = "running", "running: its worker heart-beats"
    ABANDONED = "abandoned", "abandoned: its workers were lost too often"


class TaskLease(models.Model):
    """One background task in flight: the row exists from queueing until the task ends.

    The running task refreshes `heartbeat_at`; a lease whose heartbeat stopped (its worker
    was killed) or that no worker took for too long (its message was lost) is sent again by
    the `annotation.recover_tasks` watchdog (annotation/task_leases.py).
    """

    key = models.CharField(
        max_length=200, unique=True, help_text="What the task works on, e.g. batch:7:pooling."
    )
    task = models.CharField(max_length=100, help_text="Celery task name.")
    args = models.JSONField(default=list, help_text="The task's positional arguments.")
    state = models.CharField(max_length=16, choices=LeaseState.choices)
    holder = models.CharField(max_length=64, blank=True, help_text="The running worker's id.")
    queued_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    resent = models.PositiveIntegerField(
        default=0, help_text="How many times the watchdog sent the task again."
    )
    batch = models.ForeignKey(
        Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    evaluation_job = models.ForeignKey(
        EvaluationJob, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=LeaseState.values), name="task_lease_state_valid"
            ),
            models.CheckConstraint(
                condition=~Q(state="running") | Q(heartbeat_at__isnull=False),
                name="task_lease_running_has_heartbeat",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"
