"""Reads for the MTurk pages: a batch's overview for the admin (settings, cost, state,
report, HIT counts, MTurk assignments) and what a finished HIT page posts to MTurk."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from annotation.models import Assignment, Batch, BatchState, Judgement, WorkerSource

from .errors import MTurkInputError
from .hit_settings import batch_hit_settings, mturk_batch_cost
from .hit_type import HitTypeSettings
from .protocol import worker_preview_url

ASSIGNMENTS_SHOWN = 300  # the most recent ones: the page stays short for large batches


def mturk_batch_overview(*, batch: Batch) -> dict[str, Any]:
    """Return what the batch's MTurk page shows."""
    state = batch.mturk or {}
    try:
        hit_settings = batch_hit_settings(batch)
    except MTurkInputError:  # stored settings that no longer parse: show the defaults
        hit_settings = HitTypeSettings()
    hits = batch.hits.count()
    published = batch.hits.filter(external_id__isnull=False).count()
    environment = state.get("environment")
    return {
        "batch": batch,
        "state": state,
        "settings": hit_settings,
        "cost": mturk_batch_cost(batch=batch, hit_settings=hit_settings).to_json(),
        "hits": hits,
        "published": published,
        "environment": environment,
        "can_publish": batch.state == BatchState.ANNOTATING and hits > published,
        "preview_url": worker_preview_url(environment, state["hit_group_id"])
        if environment and state.get("hit_group_id")
        else "",
        "report": state.get("report"),
        "last_publish": state.get("last_publish"),
        "assignments": _assignment_rows(batch, state),
        "base_url": settings.MTURK_EXTERNAL_BASE_URL,
    }


def _assignment_rows(batch: Batch, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the batch's latest MTurk assignments, each with its sent decision and bonus."""
    sent = state.get("sent", {})
    bonuses = {  # manual bonuses; top-ups to the minimum wage show under "Fair pay"
        entry["assignment"]: entry
        for entry in state.get("bonuses", {}).values()
        if entry.get("purpose", "bonus") == "bonus"
    }
    return [
        {
            "assignment": assignment,
            "sent": sent.get(assignment.external_id),
            "bonus": bonuses.get(assignment.external_id),
        }
        for assignment in Assignment.objects.filter(
            hit__batch=batch, worker__source=WorkerSource.MTURK, external_id__isnull=False
        )
        .select_related("worker", "hit")
        .order_by("-accepted_at")[:ASSIGNMENTS_SHOWN]
    ]


def mturk_external_submit_fields(*, assignment: Assignment) -> dict[str, Any]:
    """Return what the HIT page posts to MTurk's externalSubmit besides `assignmentId`.

    The same fields as hit.js sends after a submit: MTurk wants at least one more field.
    """
    return {
        "platform_assignment": assignment.pk,
        "judgements": Judgement.objects.filter(assignment=assignment).count(),
        "status": assignment.status,
    }
