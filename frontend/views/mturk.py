"""Amazon Mechanical Turk pages.

For workers (no account: MTurk's ids say who they are): the HIT page that MTurk shows in
its frame, its submit endpoint and its images. For staff: a batch's MTurk page (settings,
cost, publish, sync, decisions, bonuses, blocks).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from rest_framework.exceptions import ValidationError

from annotation.answers import (
    ANSWERED_OTHERWISE,
    submission_answers,
    submission_summary,
)
from annotation.errors import ServiceError, StateConflict
from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    HITItem,
    QualificationPair,
    Worker,
    WorkerSource,
)
from annotation.mturk.errors import MTurkError, MTurkInputError, TryLater
from annotation.mturk.hit_page import (
    mturk_assignment_find,
    mturk_assignment_open,
    mturk_assignment_submit,
)
from annotation.mturk.hit_settings import mturk_batch_cost, mturk_settings_save
from annotation.mturk.hit_type import parse_money
from annotation.mturk.links import page_image_path, page_image_valid, signature_valid
from annotation.mturk.page_limits import new_assignment_admit
from annotation.mturk.payments import (
    mturk_bonus_send,
    mturk_hits_expire,
    mturk_hits_extend,
    mturk_worker_block,
)
from annotation.mturk.protocol import (
    FRAME_ANCESTORS,
    PREVIEW_ASSIGNMENT_ID,
    PRODUCTION,
    SUBMIT_HOSTS,
    submit_url,
)
from annotation.mturk.publish import mturk_publish_check
from annotation.mturk.qualification import (
    mturk_qualification_grant,
    mturk_qualification_overview,
)
from annotation.mturk.sandbox import mturk_sandbox_reset
from annotation.mturk.selectors import mturk_batch_overview, mturk_external_submit_fields
from annotation.mturk.state import is_production
from annotation.mturk.topups import mturk_topups_pay
from annotation.mturk.wages import batch_wage_overview
from annotation.pages import page_item_id
from annotation.review import assignment_review
from annotation.selectors import hit_page_content
from annotation.tasks import mturk_publish_queue, mturk_sync_queue
from pipeline.tasks import annotation_close_check_queue

from .access import staff_required
from .instructions import mturk_instructions
from .item_images import item_image_response, neutral_image_response

PRODUCTION_CONFIRMATION = "PRODUCTION"
# What `/mturk/submit/` answers: what was stored, never the golden check's result.
MTURK_SUBMIT_FIELDS = ("assignment", "status", "created", "judgements")


def _submit_hosts() -> tuple[str, ...]:
    return (*SUBMIT_HOSTS, *settings.MTURK_ALLOWED_SUBMIT_HOSTS)


def _framed(response: HttpResponse) -> HttpResponse:
    """Let MTurk's sites (and a configured local stand-in) frame this response, nobody else."""
    ancestors = dict.fromkeys((*FRAME_ANCESTORS, *settings.MTURK_ALLOWED_SUBMIT_HOSTS))
    response["Content-Security-Policy"] = "frame-ancestors " + " ".join(ancestors)
    return response


def _page_context(hit: HIT, assignment: Assignment | None = None) -> dict[str, Any]:
    image_url = partial(page_image_path, hit.pk, assignment.pk if assignment else None)
    content = hit_page_content(hit=hit, image_url=image_url, assignment=assignment)
    return {"hit": hit, **content, **mturk_instructions(hit=hit, assignment=assignment)}


def _notice(request: HttpRequest, hit: HIT | None, text: str, status: int, **extra: Any):
    context = {"hit": hit, "notice": text, **extra}
    return _framed(render(request, "frontend/mturk_hit.html", context, status=status))


# The page lives in MTurk's frame: exempt from the site-wide X-Frame-Options DENY, and
# framed only by MTurk's sites through the CSP header `_framed` sets.
@xframe_options_exempt
@require_GET
def mturk_hit(request: HttpRequest, hit_id: int, signature: str) -> HttpResponse:
    """Show a HIT inside MTurk: a preview with inputs off, or the worker's assignment.

    MTurk adds `assignmentId` (ASSIGNMENT_ID_NOT_AVAILABLE in a preview), `hitId`,
    `workerId` and `turkSubmitTo` to the URL. The signature in the path keeps HIT pages
    from being enumerated.
    """
    if not signature_valid(kind="hit", pk=hit_id, signature=signature):
        raise Http404("no such HIT")
    hit = get_object_or_404(HIT.objects.select_related("batch"), pk=hit_id)
    params = request.GET
    assignment_id = params.get("assignmentId", "")
    hit_param = params.get("hitId", "")
    if hit.external_id is None or (hit_param and hit_param != hit.external_id):
        return _notice(request, hit, "This HIT is not on MTurk (any more).", 404)
    if hit.batch.state != BatchState.ANNOTATING:
        return _notice(request, hit, "This HIT is closed: please return it on MTurk.", 410)
    if assignment_id in ("", PREVIEW_ASSIGNMENT_ID):
        context = {**_page_context(hit), "preview": True}
        return _framed(render(request, "frontend/mturk_hit.html", context))
    try:
        submit_to = submit_url(params.get("turkSubmitTo", ""), allowed=_submit_hosts())
    except MTurkInputError as exc:
        return _notice(request, hit, f"This page must be opened from MTurk: {exc}.", 400)
    if hit_param != hit.external_id:
        return _notice(request, hit, "This page must be opened from MTurk: hitId is missing.", 400)
    worker_id = params.get("workerId", "")
    try:
        assignment = mturk_assignment_open(
            hit=hit,
            worker_id=worker_id,
            assignment_id=assignment_id,
            admit=partial(new_assignment_admit, request),
        )
    except TryLater as exc:  # unverified traffic: this client's, or on this HIT
        response = _notice(request, hit, f"Sorry: {exc}.", 429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    except ServiceError as exc:
        return _notice(request, hit, f"Sorry: {exc}.", 403)
    if assignment.status != AssignmentStatus.ACCEPTED:
        if assignment.submitted_at is not None:  # stored here; MTurk may not have it yet
            # The same fields as hit.js posts: externalSubmit needs more than assignmentId.
            finish = {
                "action": submit_to,
                "assignment_id": assignment_id,
                **mturk_external_submit_fields(assignment=assignment),
            }
            return _notice(
                request,
                hit,
                "Your answers to this HIT are saved. Press the button to finish it on MTurk.",
                200,
                finish=finish,
            )
        return _notice(
            request, hit, "The time limit of this HIT has passed: please return it.", 410
        )
    query = urlencode({"assignmentId": assignment_id, "workerId": worker_id, "hitId": hit_param})
    context = _page_context(hit, assignment=assignment) | {
        "assignment": assignment,
        "submit_url": f"{reverse('frontend:mturk-submit')}?{query}",
        "mturk_submit_to": submit_to,
        "assignment_id": assignment_id,
    }
    return _framed(render(request, "frontend/mturk_hit.html", context))


# No CSRF token: MTurk workers have no session here, and the page runs in a third-party
# frame where browsers withhold this site's cookies. The request names an assignment, its
# worker and its HIT that match what was stored when the page was opened, and can only
# store answers for that one open assignment, once. That proves nothing about MTurk: the
# page's URL is visible to anyone who previews the HIT, and whoever opens it may make up
# the ids, so this stores the work as submitted, never approved. `mturk_sync` decides it
# once MTurk lists the same AssignmentId, WorkerId and HITId.
@csrf_exempt
@require_POST
def mturk_submit(request: HttpRequest) -> JsonResponse:
    """Store an MTurk worker's answers as submitted work (a repeat is harmless: the same
    answers get the stored result, other ones a 409 that carries it)."""
    assignment = mturk_assignment_find(
        assignment_id=request.GET.get("assignmentId", ""),
        worker_id=request.GET.get("workerId", ""),
        hit_id=request.GET.get("hitId", ""),
    )
    if assignment is None:
        return JsonResponse({"detail": "no such assignment"}, status=404)
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"detail": "the body must be JSON"}, status=400)
    try:
        answers = submission_answers(data)
    except ValidationError as exc:  # the serializer's messages, field by field
        return JsonResponse({"detail": "invalid submission", "errors": exc.detail}, status=400)
    try:
        result = mturk_assignment_submit(
            assignment=assignment,
            answers=answers,
            by_page=True,  # the page's pair numbers, as `_page_context` shows them
        )
    except ServiceError as exc:  # a HIT closed or given up meanwhile: its state, a 409
        code = 409 if isinstance(exc, StateConflict) else 400
        return JsonResponse({"detail": str(exc)}, status=code)
    # Nothing about the golden check (`golden_passed`, `flagged`): whoever makes up ids
    # could otherwise submit again and again to learn which pairs are the check pairs.
    # The result stays here, for the sync and for reviewers.
    summary = submission_summary(result)
    body = {name: summary[name] for name in MTURK_SUBMIT_FIELDS}
    if result.differs:  # submitted before with other answers: those stand, MTurk may finish
        return JsonResponse({"detail": ANSWERED_OTHERWISE, "stored": body}, status=409)
    return JsonResponse(body, status=201 if result.created else 200)


@require_GET
def mturk_page_image(
    request: HttpRequest, hit_id: int, assignment_id: int, number: int, signature: str
) -> FileResponse:
    """Serve the image of pair `number` of a HIT page inside MTurk (assignment 0: the
    preview) to whoever holds its signed link; the link names no item id."""
    if not page_image_valid(
        hit_id=hit_id, assignment_id=assignment_id, number=number, signature=signature
    ):
        raise Http404("no such image")
    assignment = None
    if assignment_id:
        assignment = get_object_or_404(Assignment, pk=assignment_id, hit_id=hit_id)
    item_id = page_item_id(hit_id=hit_id, assignment=assignment, number=number)
    if item_id is None:
        raise Http404("no such image")
    item = HITItem.objects.select_related("image").get(pk=item_id)
    return item_image_response(item, number=number)


@require_GET
def mturk_image(request: HttpRequest, item_id: int, signature: str) -> FileResponse:
    """Serve a HIT item's image to whoever holds its signed link (the offline layout's CSV,
    whose HITs never change their pairs)."""
    if not signature_valid(kind="image", pk=item_id, signature=signature):
        raise Http404("no such image")
    item = get_object_or_404(HITItem.objects.select_related("image"), pk=item_id)
    return item_image_response(item)


@require_GET
def mturk_qualification_image(request: HttpRequest, pair_id: int, signature: str) -> FileResponse:
    """Serve a qualification pair's image to whoever holds its signed link (MTurk's test)."""
    if not signature_valid(kind="qualification_image", pk=pair_id, signature=signature):
        raise Http404("no such image")
    pair = get_object_or_404(QualificationPair.objects.select_related("image"), pk=pair_id)
    if not pair.image.file:
        raise Http404("this dataset has no image files")
    return neutral_image_response(pair.image, f"qualification-{pair.pk}")


# --- the admin's page -------------------------------------------------------------------


@staff_required
def mturk_batch(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show a batch's MTurk state; POST runs one action and comes back here."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    if request.method == "POST":
        action = _ACTIONS.get(request.POST.get("action", ""))
        if action is None:
            messages.error(request, "Unknown action.")
        else:
            try:
                text = action(request, batch)
            except ServiceError as exc:  # MTurkError included
                messages.error(request, str(exc))
            else:
                messages.success(request, text)
        return redirect("frontend:mturk-batch", batch_id=batch.pk)
    return render(request, "frontend/mturk_batch.html", _batch_context(batch))


def _batch_context(batch: Batch) -> dict[str, Any]:
    return {
        **mturk_batch_overview(batch=batch),
        "confirmation": PRODUCTION_CONFIRMATION,
        "fair_pay": batch_wage_overview(batch=batch),
        "qualification": mturk_qualification_overview(batch=batch),
    }


def _save_settings(request: HttpRequest, batch: Batch) -> str:
    fields = (
        "title",
        "description",
        "keywords",
        "reward",
        "assignment_minutes",
        "lifetime_hours",
        "auto_approval_hours",
        "min_approval_rate",
        "min_approved_hits",
        "locales",
        "min_hourly_wage",
        "qualification_mode",
        "qualification_retry_minutes",
    )
    raw = {name: request.POST[name] for name in fields if name in request.POST}
    saved = mturk_settings_save(batch=batch, raw=raw)
    cost = mturk_batch_cost(batch=batch, hit_settings=saved)
    return f"Settings saved. Estimated cost: ${cost.total} (commission included)."


def _publish(request: HttpRequest, batch: Batch) -> str:
    production = request.POST.get("environment") == PRODUCTION
    if production and request.POST.get("confirm", "").strip() != PRODUCTION_CONFIRMATION:
        raise MTurkError(
            f"Publishing on production pays real workers: type {PRODUCTION_CONFIRMATION} in "
            "the confirmation box to go ahead."
        )
    mturk_publish_check(batch=batch, production=production)  # an error here, not a report
    mturk_publish_queue(batch_id=batch.pk, production=production)
    where = "production" if production else "the sandbox"
    return f"Publishing on {where}: the outcome shows under “Last publish”."


def _sync(request: HttpRequest, batch: Batch) -> str:
    if not (batch.mturk or {}).get("environment"):
        raise MTurkError("Publish the batch first: there is nothing on MTurk to sync.")
    mturk_sync_queue(batch_id=batch.pk)
    # With eager Celery the sync has run: its approvals may complete the round. On workers
    # it runs later, and the periodic `mitl.close_complete_rounds` closes the round then.
    annotation_close_check_queue(batch_id=batch.pk)
    return "Sync started: its report shows under “Last sync”."


def _posted(request: HttpRequest, name: str) -> int:
    try:
        return int(request.POST.get(name, ""))
    except ValueError:
        raise Http404(f"no such {name}") from None


def _review(request: HttpRequest, batch: Batch) -> str:
    assignment = get_object_or_404(Assignment, pk=_posted(request, "assignment"), hit__batch=batch)
    approve = request.POST.get("decision") == "approve"
    assignment_review(
        assignment=assignment,
        approve=approve,
        feedback=request.POST.get("feedback", ""),
        reviewer=request.user,
    )
    if approve:
        annotation_close_check_queue(batch_id=batch.pk)
    verb = "approved" if approve else "rejected"
    return f"Assignment {assignment.external_id} {verb}; the next sync tells MTurk."


def _bonus(request: HttpRequest, batch: Batch) -> str:
    assignment = get_object_or_404(Assignment, pk=_posted(request, "assignment"), hit__batch=batch)
    amount = request.POST.get("amount", "")
    sent = mturk_bonus_send(
        assignment=assignment, amount=amount, reason=request.POST.get("reason", "")
    )
    if not sent:
        return f"A bonus for {assignment.external_id} was paid before: nothing sent."
    return f"Bonus of ${parse_money(amount)} sent for {assignment.external_id}."


def _topups(request: HttpRequest, batch: Batch) -> str:
    result = mturk_topups_pay(batch=batch)
    if not result.paid:
        return f"No top-up to pay ({result.already} paid before)."
    return (
        f"{result.paid} top-ups to the minimum wage sent, ${result.total} in all "
        f"({result.already} paid before)."
    )


def _expire(request: HttpRequest, batch: Batch) -> str:
    return f"{mturk_hits_expire(batch=batch)} HITs taken off the market."


def _extend(request: HttpRequest, batch: Batch) -> str:
    try:
        hours = int(request.POST.get("hours", ""))
    except ValueError:
        raise MTurkError("Give the number of hours to extend by.") from None
    return f"{mturk_hits_extend(batch=batch, hours=hours)} HITs extended by {hours} hours."


def _block(request: HttpRequest, batch: Batch) -> str:
    worker = get_object_or_404(Worker, pk=_posted(request, "worker"), source="mturk")
    production = is_production(batch.mturk or {})
    mturk_worker_block(worker=worker, reason=request.POST.get("reason", ""), production=production)
    return f"Worker {worker.external_id} blocked on MTurk and here."


def _reset_sandbox(request: HttpRequest, batch: Batch) -> str:
    deleted = mturk_sandbox_reset(batch=batch)
    return f"Sandbox publication reset: {deleted} test assignments deleted."


def _grant_qualification(request: HttpRequest, batch: Batch) -> str:
    worker_id = request.POST.get("worker_id", "").strip()
    # Grants are kept by WorkerId on the batch: a worker new to the platform needs no row.
    worker = Worker.objects.filter(source=WorkerSource.MTURK, external_id=worker_id).first()
    worker = worker or Worker(source=WorkerSource.MTURK, external_id=worker_id)
    if not mturk_qualification_grant(batch=batch, worker=worker):
        return f"Worker {worker_id} was granted the qualification before: nothing sent."
    return f"Qualification granted to worker {worker_id} on MTurk (MTurk emails the worker)."


_ACTIONS = {
    "settings": _save_settings,
    "publish": _publish,
    "sync": _sync,
    "review": _review,
    "bonus": _bonus,
    "topups": _topups,
    "expire": _expire,
    "extend": _extend,
    "block": _block,
    "reset_sandbox": _reset_sandbox,
    "grant_qualification": _grant_qualification,
}
