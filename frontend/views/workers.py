"""The workers pages: every worker's figures and flags (with filters), one worker's page,
and blocking a worker after a confirmation step."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotation.models import Batch, Worker, WorkerSource
from annotation.review import worker_block
from annotation.worker_selectors import (
    worker_figures,
    worker_figures_one,
    worker_history,
    worker_recent_assignments,
)
from mitl.worker_flags import FLAG_TEXT, WorkerFlag

from .access import staff_required


@staff_required
def worker_list(request: HttpRequest) -> HttpResponse:
    """Show every worker's quality figures and flags, filtered by `?flag=`, `?source=` and
    `?batch=`, with block and unblock buttons."""
    flag = request.GET.get("flag", "")
    source = request.GET.get("source", "")
    batch = request.GET.get("batch", "")
    flag = flag if flag in set(WorkerFlag) else ""
    source = source if source in WorkerSource.values else ""
    batch_id = int(batch) if batch.isdigit() else None
    context = {
        "rows": worker_figures(source=source or None, batch_id=batch_id, flag=flag or None),
        "flag": flag,
        "source": source,
        "batch_id": batch_id,
        "flags": [(str(f), FLAG_TEXT[f]) for f in WorkerFlag],
        "sources": WorkerSource.choices,
        "batches": Batch.objects.order_by("-pk").values_list("pk", "name")[:100],
        "filtered": bool(flag or source or batch_id is not None),
    }
    return render(request, "frontend/workers.html", context)


@staff_required
def worker_detail(request: HttpRequest, worker_id: int) -> HttpResponse:
    """Show one worker's answers over time, golden accuracy, agreement, speed and pay."""
    worker = get_object_or_404(Worker, pk=worker_id)
    context = {
        "worker": worker,
        "row": worker_figures_one(worker=worker),
        "history": worker_history(worker=worker),
        "recent": worker_recent_assignments(worker=worker),
    }
    return render(request, "frontend/worker.html", context)


@staff_required
def worker_block_toggle(request: HttpRequest, worker_id: int) -> HttpResponse:
    """Ask to confirm a block (GET); block or unblock a worker (POST `blocked` = 1 or 0)."""
    worker = get_object_or_404(Worker, pk=worker_id)
    if request.method != "POST":
        return render(request, "frontend/worker_block.html", {"worker": worker})
    blocked = request.POST.get("blocked") == "1"
    worker_block(worker=worker, blocked=blocked)
    messages.success(request, f"Worker {worker} {'blocked' if blocked else 'unblocked'}.")
    return redirect("frontend:workers")
