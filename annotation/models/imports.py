"""Import jobs: a dataset or positive-set import running in the background, with progress."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .dataset import Dataset


class ImportKind(models.TextChoices):
    DATASET = "dataset", "dataset (captions and images)"
    POSITIVES = "positives", "positive set"


class ImportStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ImportJob(models.Model):
    """One import request: what to read, how far it got, and how it ended."""

    kind = models.CharField(max_length=16, choices=ImportKind.choices)
    status = models.CharField(
        max_length=16, choices=ImportStatus.choices, default=ImportStatus.QUEUED
    )
    params = models.JSONField(
        help_text="What to import: dataset name, format, uploaded file paths or S3 location."
    )
    dataset = models.ForeignKey(
        Dataset,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="import_jobs",
        help_text="The dataset written (dataset imports) or extended (positive sets).",
    )
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why it failed: file, line and field.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ImportStatus.values), name="import_job_status_valid"
            ),
            models.CheckConstraint(
                condition=~Q(status="failed") | ~Q(error=""), name="import_job_failure_has_error"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} import {self.pk} ({self.status})"
