"""Overview pages: the home page (logged in) and one batch (staff)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from annotation.errors import ServiceError
from annotation.human_work import batch_human_work
from annotation.instructions import instructions_overview
from annotation.models import Batch, Dataset, Release
from annotation.mturk.links import instructions_image_path
from annotation.mturk.wages import batch_wage_overview
from annotation.qualification.selectors import qualification_summary
from annotation.rounds import round_stall
from annotation.selectors import batch_curation, batch_progress, diversity_rows
from mitl.config import batch_config
from pipeline.plan import batch_plan
from pipeline.round_controls import round_controls_for

from .access import staff_required


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Show staff datasets, batches with their stage progress, and releases; others releases.

    As in the API, every account reads releases, only staff see datasets and batches.
    """
    context: dict[str, Any] = {"releases": Release.objects.order_by("-created_at")[:50]}
    if request.user.is_staff:
        context["datasets"] = Dataset.objects.order_by("name")
        context["batches"] = [
            {"batch": batch, "progress": batch_progress(batch=batch)}
            for batch in Batch.objects.select_related("dataset").order_by("-created_at")[:50]
        ]
    return render(request, "frontend/home.html", context)


@staff_required
def batch_page(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show one batch: stage progress, people's work and how diverse its annotators are."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    context = {
        "batch": batch,
        "progress": batch_progress(batch=batch),
        "curation": batch_curation(batch=batch),
        "plan": _plan(batch),
        "diversity": diversity_rows(batch.reports.get("diversity", {})),
        "instructions": instructions_overview(batch=batch, image_url=instructions_image_path),
        "qualification": qualification_summary(batch=batch),
        "fair_pay": batch_wage_overview(batch=batch),
        "work": batch_human_work(batch_id=batch.pk),
        "stalls": round_stall(batch=batch),
        "controls": round_controls_for(batch=batch),
    }
    return render(request, "frontend/batch.html", context)


def _plan(batch: Batch) -> dict[str, Any] | None:
    """The planner's chart and table once the batch is ranked (docs/curation.md)."""
    try:
        plan = batch_plan(batch=batch, config=batch_config(batch))
    except ServiceError:
        return None  # not ranked yet
    return {"svg": mark_safe(plan.chart_svg()), **plan.to_json()}
