"""Overview pages: the home page and one batch."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotation.models import Batch, Dataset, Release
from annotation.selectors import batch_progress, diversity_rows


def home(request: HttpRequest) -> HttpResponse:
    """Show datasets, batches with their stage progress, and releases."""
    batches = [
        {"batch": batch, "progress": batch_progress(batch=batch)}
        for batch in Batch.objects.select_related("dataset").order_by("-created_at")[:50]
    ]
    context = {
        "datasets": Dataset.objects.order_by("name"),
        "batches": batches,
        "releases": Release.objects.order_by("-created_at")[:50],
    }
    return render(request, "frontend/home.html", context)


def batch_page(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show one batch: stage progress and how diverse its annotators are."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    context = {
        "batch": batch,
        "progress": batch_progress(batch=batch),
        "diversity": diversity_rows(batch.reports.get("diversity", {})),
    }
    return render(request, "frontend/batch.html", context)
