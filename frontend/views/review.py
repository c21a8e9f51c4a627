"""The admin's side of crowd work: the review queue, one submission, and the workers."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.errors import ServiceError
from annotation.models import Assignment, Worker
from annotation.review import assignment_review, worker_block
from annotation.review_selectors import (
    assignment_review_rows,
    goldens_suspect,
    goldens_suspended,
    review_awaiting_mturk,
    review_queue,
    worker_stats,
)
from pipeline.tasks import annotation_close_check_queue

from .access import staff_required


@staff_required
def review_list(request: HttpRequest) -> HttpResponse:
    """List submissions waiting for a person, golden pairs that most workers fail, and those
    suspended as likely wrong."""
    context = {
        "queue": review_queue(),
        "awaiting_mturk": review_awaiting_mturk(),
        "suspects": goldens_suspect()[:20],
        "suspended": goldens_suspended(limit=20),
    }
    return render(request, "frontend/review_queue.html", context)


@staff_required
def review_detail(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Show a submission's answers beside the golden truth; approve or reject it (POST)."""
    assignment = get_object_or_404(
        Assignment.objects.select_related("worker", "hit__batch"), pk=assignment_id
    )
    if request.method == "POST":
        decision = request.POST.get("decision")
        if decision not in ("approve", "reject"):
            messages.error(request, "Choose approve or reject.")
        else:
            try:
                assignment_review(
                    assignment=assignment,
                    approve=decision == "approve",
                    feedback=request.POST.get("feedback", ""),
                    reviewer=request.user,
                )
            except ServiceError as exc:
                messages.error(request, str(exc))
            else:
                done = "approved" if decision == "approve" else "rejected"
                messages.success(request, f"Assignment {assignment.pk} {done}.")
                if decision == "approve":  # perhaps the round's last work: it then closes
                    annotation_close_check_queue(batch_id=assignment.hit.batch_id)
                return redirect("frontend:review")
    context = {"assignment": assignment, "rows": assignment_review_rows(assignment=assignment)}
    return render(request, "frontend/review_detail.html", context)


@staff_required
def worker_list(request: HttpRequest) -> HttpResponse:
    """Show every worker's quality figures, with block and unblock buttons."""
    return render(request, "frontend/workers.html", {"stats": worker_stats()})


@staff_required
@require_POST
def worker_block_toggle(request: HttpRequest, worker_id: int) -> HttpResponse:
    """Block or unblock a worker (POST `blocked` = 1 or 0)."""
    worker = get_object_or_404(Worker, pk=worker_id)
    blocked = request.POST.get("blocked") == "1"
    worker_block(worker=worker, blocked=blocked)
    messages.success(request, f"Worker {worker} {'blocked' if blocked else 'unblocked'}.")
    return redirect("frontend:workers")
