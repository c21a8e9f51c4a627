"""Pausing a batch's hand-out: staff stop new work for a while without closing the round.

While a batch is paused no new assignment of it starts, on the platform (`handout`) or on
the HIT page inside MTurk (`mturk.hit_page`); work already open may still be submitted and
reviewed, and the round still closes by itself once its approved work is complete. Resuming
hands out again. HITs published on MTurk stay on MTurk's market meanwhile: a worker who
accepts one reads that the batch is paused and returns it (expire the HITs on the batch's
MTurk page to take them off the market).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from .errors import ServiceError, StateConflict
from .models import Batch, BatchState


def batch_pause_set(*, batch_id: int, paused: bool) -> str:
    """Pause (or resume) handing out a batch's HITs; return a sentence for staff."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(pk=batch_id).first()
        if batch is None:
            raise ServiceError(f"no batch {batch_id}")
        if paused and batch.state != BatchState.ANNOTATING:
            raise StateConflict(
                f"batch {batch_id} is {batch.state}: only a batch whose HITs are being "
                "judged can be paused"
            )
        if (batch.paused_at is not None) == paused:
            return f"Batch {batch_id} is {'paused' if paused else 'not paused'} already."
        batch.paused_at = timezone.now() if paused else None
        batch.save(update_fields=["paused_at", "updated_at"])
    if paused:
        return (
            f"Batch {batch_id} paused: no new HIT of it is handed out; open work may still be "
            "submitted. Resume handing out to go on."
        )
    return f"Batch {batch_id} hands out its HITs again."


PAUSED_WHY = "it is paused by its administrators; it may resume later"
