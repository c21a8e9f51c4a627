"""The admin dashboard (staff): datasets, batches, quality control and releases at a glance."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.human_work import batch_human_work
from annotation.models import Batch, Dataset, ImportJob, Release
from annotation.review_selectors import quality_overview
from annotation.rounds import round_stall
from annotation.selectors import batch_curation, batch_progress, dataset_rows

from .access import staff_required

RECENT = 20


@staff_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Show what an admin needs next: data, running batches, work to review, releases."""
    batches = [
        _batch_row(batch)
        for batch in Batch.objects.select_related("dataset")
        .prefetch_related("progress")
        .order_by("-created_at")[:RECENT]
    ]
    context = {
        "datasets": dataset_rows(datasets=Dataset.objects.order_by("name")[:RECENT]),
        "batches": batches,
        "stages": [row["stage"] for row in batches[0]["progress"]] if batches else [],
        "jobs": ImportJob.objects.select_related("dataset").order_by("-created_at")[:5],
        "releases": _releases()[:RECENT],
        "qc": quality_overview(),
    }
    return render(request, "frontend/dashboard.html", context)


def _batch_row(batch: Batch) -> dict:
    work = batch_human_work(batch_id=batch.pk, batch=batch)
    return {
        "batch": batch,
        "progress": batch_progress(batch=batch),
        "curation": batch_curation(batch=batch, spent=work.judgements_spent),
        "work": work,
        # Why an annotating batch waits (how much work is missing shows in its bars).
        "stalls": [s for s in round_stall(batch=batch) if s.code != "missing"],
    }


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
