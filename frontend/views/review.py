"""The admin's side of crowd work: the review queue (with a bulk approve) and one submission
(with co-workers' answers on the same pairs, next/previous and keyboard shortcuts).

The workers pages are `frontend.views.workers`."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.errors import ServiceError
from annotation.models import Assignment
from annotation.review import assignment_review
from annotation.review_selectors import (
    assignment_coworker_answers,
    assignment_review_rows,
    goldens_suspect,
    goldens_suspended,
    review_awaiting_mturk,
    review_neighbours,
    review_queue,
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
                _, following = review_neighbours(assignment_id=assignment.pk)
                if following is not None:
                    return redirect("frontend:review-detail", following)
                return redirect("frontend:review")
    rows = assignment_review_rows(assignment=assignment)
    coworkers = assignment_coworker_answers(assignment=assignment)
    for row in rows:
        row["coworkers"] = coworkers.by_item.get(row["item_id"], [])
    previous, following = review_neighbours(assignment_id=assignment.pk)
    context = {
        "assignment": assignment,
        "rows": rows,
        "coworkers": coworkers.workers,
        "previous_id": previous,
        "next_id": following,
    }
    return render(request, "frontend/review_detail.html", context)


@staff_required
@require_POST
def review_bulk_approve(request: HttpRequest) -> HttpResponse:
    """Approve the ticked submissions (POST `assignment` ids), one transaction each.

    Each goes through `assignment_review`, so what cannot be approved (already decided,
    one's own work, MTurk work not yet confirmed) is refused with its reason and the rest
    are approved; the affected batches are then asked whether their round is done.
    """
    ids = sorted({int(v) for v in request.POST.getlist("assignment") if v.isdigit()})
    if not ids:
        messages.error(request, "Tick the submissions to approve first.")
        return redirect("frontend:review")
    approved, batches = [], set()
    for assignment in Assignment.objects.filter(pk__in=ids).select_related("hit").order_by("pk"):
        try:
            assignment_review(assignment=assignment, approve=True, reviewer=request.user)
        except ServiceError as exc:
            messages.error(request, f"Assignment {assignment.pk} not approved: {exc}")
        else:
            approved.append(assignment.pk)
            batches.add(assignment.hit.batch_id)
    if approved:
        listed = ", ".join(str(pk) for pk in approved)
        noun = "assignment" if len(approved) == 1 else "assignments"
        messages.success(request, f"Approved {len(approved)} {noun}: {listed}.")
    for batch_id in sorted(batches):  # perhaps a round's last work: it then closes
        annotation_close_check_queue(batch_id=batch_id)
    return redirect("frontend:review")
