"""The annotator's side: the work page, "start next HIT", the HIT page and its images."""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.errors import ServiceError
from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, AssignmentStatus, HITItem, Worker
from annotation.pages import page_item_id
from annotation.qualification.selectors import qualification_rounds_for
from annotation.rounds import round_waits_for_worker
from annotation.selectors import hit_page_content, item_image_url
from mitl.qualification import QualificationStatus
from pipeline.tasks import complete_rounds_close_queue

from .instructions import platform_instructions
from .item_images import item_image_response


@login_required
def work_home(request: HttpRequest) -> HttpResponse:
    """Show the worker's open HIT (or a button to take one) and its recent results."""
    worker = worker_for_user(user=request.user)
    recent = (
        Assignment.objects.filter(worker=worker)
        .exclude(status=AssignmentStatus.ACCEPTED)
        .select_related("hit__batch")
        .order_by("-accepted_at")[:20]
    )
    context = {
        "worker": worker,
        "open": Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED).first(),
        "recent": recent,
        "rounds": qualification_rounds_for(worker=worker),  # batches with a practice round
    }
    return render(request, "frontend/work.html", context)


@login_required
@require_POST
def work_next(request: HttpRequest) -> HttpResponse:
    """Hand the worker a HIT and open it; say so plainly when there is no work."""
    worker = worker_for_user(user=request.user)
    try:
        assignment = hit_assign_next(worker=worker)
        if assignment is None and complete_rounds_close_queue():
            # A round was complete: it closes now, and its next round may bring HITs.
            assignment = hit_assign_next(worker=worker)
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("frontend:work")
    if assignment is None:
        messages.info(request, _nothing_to_do(worker))
        return redirect("frontend:work")
    return redirect("frontend:hit", assignment_id=assignment.pk)


def _nothing_to_do(worker: Worker) -> str:
    """Say why no HIT came: none is free, or the free ones wait behind a qualification round."""
    waiting = [
        r.batch_name
        for r in qualification_rounds_for(worker=worker)
        if r.keeps_hits and r.status == QualificationStatus.OPEN
    ]
    if waiting:
        return (
            f"The free HITs are in batches that need their qualification round first "
            f"({', '.join(waiting)}): take the qualification round below."
        )
    waits = round_waits_for_worker(worker=worker)
    if waits:
        why = "; ".join(f"{wait.batch_name}: {wait.why}" for wait in waits)
        return f"There is no HIT to do right now ({why}). Please come back later."
    return "There is no HIT to do right now. Please come back later."


@login_required
def hit_page(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Show one of the worker's own HITs; anybody else's is a 404, not a 403 (no probing)."""
    worker = worker_for_user(user=request.user)
    assignment = get_object_or_404(
        Assignment.objects.select_related("hit__batch", "instructions"),
        pk=assignment_id,
        worker=worker,
    )
    if assignment.status != AssignmentStatus.ACCEPTED:
        messages.info(request, f"HIT {assignment.hit_id} is {assignment.status}.")
        return redirect("frontend:work")
    page = hit_page_content(
        hit=assignment.hit,
        image_url=partial(item_image_url, assignment.pk),
        assignment=assignment,
    )
    context = {
        **page,
        **platform_instructions(assignment=assignment),
        "assignment": assignment,
        "hit_label": str(assignment.hit_id),
    }
    return render(request, "frontend/hit.html", context)


@login_required
def pair_image(request: HttpRequest, assignment_id: int, number: int) -> FileResponse:
    """Serve the image of pair `number` of an assignment's page to the worker who holds the
    HIT, or to staff: by its number on the page (`annotation.pages`), never an item id."""
    assignment = get_object_or_404(Assignment, pk=assignment_id)
    if not request.user.is_staff and assignment.worker.user_id != request.user.pk:
        raise Http404("no such image")
    item_id = page_item_id(hit_id=assignment.hit_id, assignment=assignment, number=number)
    if item_id is None:
        raise Http404("no such image")
    item = HITItem.objects.select_related("image").get(pk=item_id)
    return item_image_response(item, number=number)


@login_required
def item_image(request: HttpRequest, assignment_id: int, item_id: int) -> FileResponse:
    """Serve a HIT item's image by its id to staff (the review page). Not to workers: probing
    ids would find an item added to the HIT later, a golden that replaced another."""
    if not request.user.is_staff:
        raise Http404("no such image")
    assignment = get_object_or_404(Assignment, pk=assignment_id)
    item = get_object_or_404(
        HITItem.objects.select_related("image"), pk=item_id, hit_id=assignment.hit_id
    )
    return item_image_response(item)
