"""The admin dashboard (staff): datasets, batches, quality control and releases at a glance."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Dataset,
    ImportJob,
    Release,
    Worker,
)
from annotation.selectors import batch_progress

from .access import staff_required
from .datasets import dataset_rows

RECENT = 20


@staff_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Show what an admin needs next: data, running batches, work to review, releases."""
    batches = [
        {"batch": batch, "progress": batch_progress(batch=batch)}
        for batch in Batch.objects.select_related("dataset")
        .prefetch_related("progress")
        .order_by("-created_at")[:RECENT]
    ]
    waiting = Assignment.objects.filter(status=AssignmentStatus.SUBMITTED)
    context = {
        "datasets": dataset_rows(Dataset.objects.order_by("name")[:RECENT]),
        "batches": batches,
        "stages": [row["stage"] for row in batches[0]["progress"]] if batches else [],
        "jobs": ImportJob.objects.select_related("dataset").order_by("-created_at")[:5],
        "releases": _releases()[:RECENT],
        "qc": {
            "waiting": waiting.count(),
            "flagged": waiting.filter(flagged=True).count(),
            "workers": Worker.objects.count(),
            "blocked": Worker.objects.filter(is_blocked=True).count(),
        },
    }
    return render(request, "frontend/dashboard.html", context)


@staff_required
def release_list(request: HttpRequest) -> HttpResponse:
    """List every release with its download, leaderboard and the batches it came from."""
    return render(request, "frontend/releases.html", {"releases": _releases()})


def _releases():
    return (
        Release.objects.select_related("dataset")
        .prefetch_related("batches")
        .order_by("-created_at")
    )
