"""Server-rendered pages; the UI issues fill in the annotator and dashboard pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.models import Batch, Dataset, Release
from annotation.selectors import batch_progress


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
