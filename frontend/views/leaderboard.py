"""A release's evaluation leaderboard: every model's metrics, and an upload of rankings."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe

from annotation.models import Evaluation, EvaluationJob, Release
from frontend.views.item_images import neutral_image_response
from mitl.evaluation_inputs import DIRECTIONS
from mitl.explain.html import EXPLAIN_CSS, render_explanation
from pipeline.evaluate import leaderboard_of
from pipeline.evaluation_jobs import evaluation_limits
from pipeline.explain import explanation_image, may_read_explanation, shown_explanation

from .leaderboard_files import best_values, leaderboard_csv_response, leaderboard_values
from .leaderboard_jobs import RankingsUploadForm, rankings_upload_submit

RECENT_JOBS = 5  # the account's latest uploads listed under the form


@login_required
def leaderboard(request: HttpRequest, release_id: int) -> HttpResponse:
    """Show every model's metrics on a release (as CSV with ?format=csv); take rankings by POST.

    Good rankings are queued for scoring and the browser goes to the job's page.
    """
    release = get_object_or_404(Release.objects.select_related("dataset"), pk=release_id)
    if request.method == "GET" and request.GET.get("format") == "csv":
        return leaderboard_csv_response(release)
    status = 200
    limits = evaluation_limits(release=release)
    if request.method == "POST":
        form = RankingsUploadForm(request.POST, request.FILES, limits=limits)
        job = rankings_upload_submit(request, release, form)
        if job is not None:
            return redirect("frontend:leaderboard-job", release_id=release.pk, job_id=job.pk)
        status = 400
    else:
        form = RankingsUploadForm(limits=limits)
    board = leaderboard_of(release=release)
    values = leaderboard_values(board)
    bests = best_values(values)
    rows = [
        {
            "evaluation": evaluation,
            "explain_url": (
                reverse("frontend:explain", args=[release.pk, evaluation.pk])
                if evaluation.has_explanation and may_read_explanation(evaluation, request.user)
                else None
            ),
            "cells": [
                {"value": value, "best": value is not None and value == best}
                for value, best in zip(row, bests, strict=True)
            ],
        }
        for evaluation, row in zip(board.evaluations, values, strict=True)
    ]
    agreement = [
        {
            "direction": direction,
            "rows": [
                {"metric": metric, "cells": taus}
                for metric, taus in zip(board.metrics, board.agreement[direction].tau, strict=True)
            ],
        }
        for direction in DIRECTIONS
    ]
    context = {
        "release": release,
        "form": form,
        "directions": DIRECTIONS,
        "metrics": board.metrics,
        "columns": [
            {"direction": direction, "metric": metric, "index": index}
            for index, (direction, metric) in enumerate(
                ((d, m) for d in DIRECTIONS for m in board.metrics), start=1
            )
        ],
        "submitted_column": 1 + len(DIRECTIONS) * len(board.metrics),
        "rows": rows,
        "agreement": agreement,
        "enough_models": len(board.evaluations) >= 2,
        "jobs": EvaluationJob.objects.filter(release=release, submitted_by=request.user)
        .defer("rankings_json")
        .order_by("-created_at")[:RECENT_JOBS],
    }
    return render(request, "frontend/leaderboard.html", context, status=status)


def _readable_evaluation(request: HttpRequest, release_id: int, evaluation_id: int) -> Evaluation:
    """Return the release's evaluation if the account may read its explanation, else refuse."""
    evaluation = (
        Evaluation.objects.select_related("release__dataset")
        .filter(pk=evaluation_id, release_id=release_id)
        .first()
    )
    if not may_read_explanation(evaluation, request.user):
        raise PermissionDenied("only staff and the account that submitted the model see this")
    if evaluation is None:
        raise Http404(f"release {release_id} has no evaluation {evaluation_id}")
    return evaluation


@login_required
def explain(request: HttpRequest, release_id: int, evaluation_id: int) -> HttpResponse:
    """Show why a model's top-1 results miss on a release, concept by concept."""
    evaluation = _readable_evaluation(request, release_id, evaluation_id)
    stored = None if evaluation.explanation is None else shown_explanation(evaluation)
    context = {"release": evaluation.release, "evaluation": evaluation, "fragment": None}
    if stored is not None:
        context["css"] = mark_safe(EXPLAIN_CSS)
        # The renderer escapes every name, caption and concept it writes: the fragment is safe.
        context["fragment"] = mark_safe(
            render_explanation(
                stored.get("explanation") or {},
                stored.get("images") or {},
                title=f"{evaluation.model_name}: failures explained",
            )
        )
        context["concept_sources"] = stored.get("concept_sources") or {}
    return render(request, "frontend/explain.html", context)


@login_required
def explain_image(
    request: HttpRequest, release_id: int, evaluation_id: int, image_id: int
) -> FileResponse:
    """Serve an image that an evaluation's explanation shows (media is not public)."""
    evaluation = _readable_evaluation(request, release_id, evaluation_id)
    image = explanation_image(evaluation, image_id)
    if image is None or not image.file:
        raise Http404("this explanation shows no such image")
    # A neutral name: the stored one can tell which image a caption was written for.
    return neutral_image_response(image, f"explain-{image_id}")
