"""A leaderboard's upload: the rankings form, and the page that follows their scoring.

The form reads the file through the limits every way in shares (`evaluation_limits`,
`mitl.ranking_limits`), so it refuses what the API refuses, with the same sentence; good
rankings become an evaluation job, scored by a Celery task while the job's page shows its
progress and then the metrics.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape

from annotation.errors import ServiceError
from annotation.models import EvaluationJob, EvaluationJobStatus, Release
from mitl.evaluation import metric_keys
from mitl.evaluation_inputs import DIRECTIONS, EvaluationError, RankingsByDirection
from mitl.ranking_limits import RankingLimits, rankings_from_bytes, size_text
from pipeline.evaluate import MODEL_NAME_MAX
from pipeline.evaluation_jobs import FINISHED, evaluation_job_visible
from pipeline.tasks import evaluation_job_submit

from .known_fields import KnownFieldsForm


class RankingsUploadForm(KnownFieldsForm):
    model_name = forms.CharField(max_length=MODEL_NAME_MAX, label="Model name")
    rankings = forms.FileField(label="Rankings (JSON)")

    def __init__(self, *args: Any, limits: RankingLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.rankings_file: bytes | None = None
        # Escaped: Django renders help text as HTML, where <image id> would be a tag.
        self.fields["rankings"].help_text = escape(
            '{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": '
            "[image ids, best first]}}, every query of the release ranked; "
            f"{limits_text(limits)}."
        )

    def clean_rankings(self) -> RankingsByDirection:
        """Refuse a file over a limit (its size before reading it), not JSON, or misshapen."""
        upload = self.cleaned_data["rankings"]
        try:
            self.limits.refuse_size(upload.size)
            content = upload.read()
            rankings = rankings_from_bytes(content, self.limits)
        except EvaluationError as exc:
            raise forms.ValidationError(f"{upload.name}: {exc}") from None
        self.rankings_file = content  # stored as it came: the job reads these bytes
        return rankings


def limits_text(limits: RankingLimits) -> str:
    """Say the limits in words, for the form's help text."""
    parts = []
    if limits.max_bytes is not None:
        parts.append(f"at most {size_text(limits.max_bytes)}")
    if limits.max_depth is not None:
        parts.append(f"{limits.max_depth:,} ids per query")
    if limits.max_queries is not None:
        i2t, t2i = limits.max_queries["i2t"], limits.max_queries["t2i"]
        parts.append(f"{i2t:,} image and {t2i:,} caption queries")
    return ", ".join(parts) or "no limits"


def rankings_upload_submit(
    request: HttpRequest, release: Release, form: RankingsUploadForm
) -> EvaluationJob | None:
    """Queue the scoring of a valid upload; None, with the error on the form, otherwise."""
    if not form.is_valid():
        return None
    try:
        return evaluation_job_submit(
            release=release,
            model_name=form.cleaned_data["model_name"],
            rankings=form.cleaned_data["rankings"],
            rankings_file=form.rankings_file,
            submitted_by=request.user,
        )
    except ServiceError as exc:  # the name is empty, too long or another account's
        form.add_error("model_name", str(exc))
        return None


def evaluation_job_state(job: EvaluationJob) -> dict[str, Any]:
    """Describe a job in the shape progress.js reads (the batch API's shape)."""
    done = job.status == EvaluationJobStatus.DONE
    return {
        "state": job.status,
        "error": job.error,
        "progress": [{"stage": "scoring", "done": job.done, "total": job.total, "finished": done}],
        "next_url": reverse("frontend:leaderboard", args=[job.release_id]) if done else "",
    }


def _visible_job(request: HttpRequest, release_id: int, job_id: int) -> EvaluationJob:
    job = (
        EvaluationJob.objects.select_related("release__dataset", "evaluation")
        .defer("rankings_json")
        .filter(pk=job_id, release_id=release_id)
        .first()
    )
    if not evaluation_job_visible(job, request.user):
        raise Http404(f"release {release_id} has no evaluation job {job_id} of yours")
    return job


@login_required
def evaluation_job_page(request: HttpRequest, release_id: int, job_id: int) -> HttpResponse:
    """Show a job's progress until it ends, then its metrics or why it failed."""
    job = _visible_job(request, release_id, job_id)
    metrics = job.evaluation.metrics if job.evaluation is not None else {}
    context = {
        "job": job,
        "release": job.release,
        "state": evaluation_job_state(job),
        "finished": job.status in FINISHED,
        "directions": DIRECTIONS,
        "rows": [
            {"metric": key, "values": [metrics.get(d, {}).get(key) for d in DIRECTIONS]}
            for key in metric_keys(metrics)
        ],
    }
    return render(request, "frontend/leaderboard_job.html", context)


@login_required
def evaluation_job_status(request: HttpRequest, release_id: int, job_id: int) -> JsonResponse:
    """Return a job's status and progress as JSON, for its page to poll."""
    return JsonResponse(evaluation_job_state(_visible_job(request, release_id, job_id)))
