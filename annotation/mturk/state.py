"""What the platform keeps of a batch's MTurk work, in `Batch.mturk`.

Changed only under the batch's row lock (`state_update`), so that running publish or sync
again sends nothing twice:

    settings, cost_estimate        HIT type settings (frozen once a HIT is published)
    environment, hit_type_id       sandbox | production, and MTurk's HITTypeId
    hit_group_id, publish_*_at     for the worker preview link; publication times
    max_assignments {hit pk: n}    slots a HIT went to MTurk with, when fewer than its own
    sent    {AssignmentId: {decision, hit, at, by}}   approve/reject sent (or seen) on MTurk
    extra   {hit pk: n}            additional assignments created to replace rejected work
    replaced [AssignmentId]        rejected assignments already replaced
    bonuses {token: {...}}         bonuses paid: mitl-bonus-<id> manual, mitl-topup-<id> top-ups
    bonuses_pending {token: {...}} bonuses being sent: one left here is checked on MTurk first
    expires_at, last_publish       the last expiry change; the last publication's outcome
    report, last_sync_at           the last sync's report
    sync_lease {token, since, until}  held while a sync runs, so two never overlap
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from annotation.models import Batch

from .errors import MTurkError
from .protocol import EXPIRED_AT, PRODUCTION


def state_update(batch_id: int, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Change Batch.mturk under the batch's row lock (sync, the UI and tasks share it)."""
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch_id)
        state = dict(locked.mturk or {})
        mutate(state)
        locked.mturk = state
        locked.save(update_fields=["mturk", "updated_at"])
    return state


def state_read(batch: Batch) -> dict[str, Any]:
    """Return the batch's MTurk state as stored now (not as `batch` was loaded)."""
    return dict(Batch.objects.values_list("mturk", flat=True).get(pk=batch.pk) or {})


def state_published(batch: Batch) -> dict[str, Any]:
    """Return the state of a batch published through the API, or refuse one that is not."""
    state = state_read(batch)
    if not state.get("environment"):
        raise MTurkError(f"batch {batch.pk} is not published on MTurk")
    return state


def is_production(state: dict[str, Any]) -> bool:
    """Say whether the state's publication is on production (else the sandbox, or none)."""
    return state.get("environment") == PRODUCTION


def now_iso(now: datetime) -> str:
    """Return a time as stored in the state: ISO, UTC, whole seconds."""
    return now.astimezone(UTC).isoformat(timespec="seconds")


def parse_iso(value: Any) -> datetime:
    """Return a stored ISO time; an unreadable one counts as long past."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return EXPIRED_AT
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
