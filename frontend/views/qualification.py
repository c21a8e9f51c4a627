"""The practice page of a batch's qualification round, and its pairs' images.

One page walks a worker through the round: the round's rules and a start button, then one
pair at a time, the feedback after each answer, and the result. Answers are posted and
then redirected (`?answered=<pair>`), so a reload shows the feedback again and never
answers twice.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.handout import worker_for_user
from annotation.models import (
    Batch,
    BatchState,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
    Worker,
)
from annotation.qualification.attempts import (
    qualification_answer_feedback,
    qualification_answer_record,
    qualification_attempt_open,
    qualification_pair_next,
    qualification_progress,
)
from annotation.qualification.selectors import percent
from mitl.config import batch_config
from mitl.judgements import LEVEL_LABELS, Level
from mitl.qualification import EXPECTED_ANSWER, QualificationStatus

from .item_images import neutral_image_response

_DIGITS = re.compile(r"[0-9]{1,18}")  # below 2**63: a bigint


@login_required
def qualification_page(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show the worker's place in the batch's round; POST starts a try or answers a pair."""
    worker = worker_for_user(user=request.user)
    batch = get_object_or_404(Batch, pk=batch_id)
    here = reverse("frontend:qualification", args=[batch.pk])
    if request.method == "POST":
        return _post(request, worker, batch, here)
    progress = qualification_progress(worker=worker, batch=batch)
    if progress.status == QualificationStatus.NOT_REQUIRED:
        messages.info(request, f"Batch {batch.name} needs no qualification round.")
        return redirect("frontend:work")
    config = batch_config(batch)
    context: dict[str, Any] = {
        "batch": batch,
        "progress": progress,
        "pass_percent": percent(config.qualification_pass),
        # A try's pairs (each try draws its own from the pool).
        "pairs_total": config.qualification_pairs,
        "levels": [(level.value, LEVEL_LABELS[level], i + 1) for i, level in enumerate(Level)],
    }
    latest = _latest_attempt(worker, batch)
    answered = _number(request.GET.get("answered", ""))
    if latest is not None and answered is not None:
        feedback = qualification_answer_feedback(attempt=latest, pair_id=answered)
        if feedback is not None:
            pair = QualificationPair.objects.select_related("image", "caption").get(pk=answered)
            given = QualificationAnswer.objects.get(attempt=latest, pair=pair).level
            context |= {
                "mode": "feedback",
                "attempt": latest,
                "pair": _shown(batch, pair),
                "feedback": feedback,
                "given": LEVEL_LABELS[Level(given)],
                "expected": EXPECTED_ANSWER[feedback.expected_positive],
            }
            return render(request, "frontend/qualification.html", context)
    if progress.in_progress is not None:
        pair = qualification_pair_next(attempt=progress.in_progress)
        if pair is not None:
            context |= {
                "mode": "pair",
                "attempt": progress.in_progress,
                "pair": _shown(batch, pair),
                "number": progress.in_progress.answered + 1,
                "pairs_total": len(progress.in_progress.pair_ids),
            }
            return render(request, "frontend/qualification.html", context)
    context |= {
        "mode": "intro" if latest is None else "result",
        "attempt": latest,
        "closed": batch.state != BatchState.ANNOTATING,
    }
    return render(request, "frontend/qualification.html", context)


def _post(request: HttpRequest, worker: Worker, batch: Batch, here: str) -> HttpResponse:
    """Start (or resume) a try, or record an answer and show its feedback."""
    if request.POST.get("action") == "start":
        try:
            qualification_attempt_open(batch=batch, worker=worker)
        except ServiceError as exc:
            messages.error(request, str(exc))
        return redirect(here)
    latest = _latest_attempt(worker, batch)
    pair_id = _number(request.POST.get("pair", ""))
    if latest is None or pair_id is None:
        messages.error(request, "Start the qualification round first.")
        return redirect(here)
    try:
        qualification_answer_record(
            attempt=latest,
            pair_id=pair_id,
            level=request.POST.get("level", ""),
            elapsed_ms=_number(request.POST.get("elapsed_ms", "")) or 0,
        )
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect(here)
    return redirect(f"{here}?answered={pair_id}")


def _number(text: str) -> int | None:
    """Read an id or a time from the request: ASCII digits that fit a database integer.

    `str.isdigit` alone lets through "²" (int() refuses it) and numbers too large for the
    database or for int() itself: each was a 500.
    """
    return int(text) if _DIGITS.fullmatch(text) else None


def _latest_attempt(worker: Worker, batch: Batch) -> QualificationAttempt | None:
    return (
        QualificationAttempt.objects.filter(batch=batch, worker=worker).order_by("-number").first()
    )


def _shown(batch: Batch, pair: QualificationPair) -> dict[str, Any]:
    """What the page shows of a pair: never its source, answer or the dataset's ids."""
    image_url = (
        reverse("frontend:qualification-image", args=[batch.pk, pair.pk])
        if pair.image.file
        else None
    )
    return {"id": pair.pk, "image_url": image_url, "caption": pair.caption.text}


@login_required
def qualification_image(request: HttpRequest, batch_id: int, pair_id: int) -> FileResponse:
    """Serve a round's pair image to a worker whose try shows the pair (in progress, or
    answered), or to staff; anybody else gets a 404 before the pair is looked up. A try in
    progress opens its own pairs only, not the rest of the pool a later try draws from."""
    if not request.user.is_staff:
        worker = worker_for_user(user=request.user)
        tries = QualificationAttempt.objects.filter(batch_id=batch_id, worker=worker)
        if not any(pair_id in pair_ids for pair_ids in tries.values_list("pair_ids", flat=True)):
            raise Http404("no such image")
    pair = get_object_or_404(
        QualificationPair.objects.select_related("image"), pk=pair_id, batch_id=batch_id
    )
    if not pair.image.file:
        raise Http404("this dataset has no image files")
    return neutral_image_response(pair.image, f"practice-{pair.pk}")
