"""A batch's judgement budget, held at hand-out: no work starts that it cannot pay for.

A judgement is one answer to one pair, golden pairs included. Spent = every answer stored
plus the pairs of work accepted and not yet submitted (it will be answered). Hand-out
checks the budget under a PostgreSQL advisory lock per batch, so concurrent requests for
different HITs of one batch cannot both take its last judgements (other databases
serialise writers anyway). Only batches with `budget_judgements` pay this check.
"""

from __future__ import annotations

from django.db import connection

from mitl.config import BatchConfig

from .errors import ServiceError
from .models import Assignment, AssignmentStatus, Batch, Judgement

BUDGET_LOCK_SPACE = 0x4D49_544C  # "MITL": the first key of pg_advisory_xact_lock(int, int)


class BudgetSpent(ServiceError):
    """The batch cannot pay for one more assignment."""

    def __init__(self, message: str, *, batch_id: int) -> None:
        super().__init__(message)
        self.batch_id = batch_id


def judgements_spent(*, batch_id: int, items_per_hit: int) -> int:
    """Judgements stored for the batch, plus the pairs of its open (accepted) work."""
    stored = Judgement.objects.filter(assignment__hit__batch_id=batch_id).count()
    open_work = Assignment.objects.filter(
        hit__batch_id=batch_id, status=AssignmentStatus.ACCEPTED
    ).count()
    return spent_of(stored=stored, open_assignments=open_work, items_per_hit=items_per_hit)


def spent_of(*, stored: int, open_assignments: int, items_per_hit: int) -> int:
    """The budget's count from its parts: answers stored + the pairs open work will answer."""
    return stored + open_assignments * items_per_hit


def budget_hold(*, batch: Batch, config: BatchConfig) -> None:
    """Refuse one more assignment of `batch` past its budget; call inside the transaction.

    The advisory lock lasts until the caller's transaction ends, so the assignment the
    caller creates is counted by the next caller.
    """
    if not config.budget_judgements:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [BUDGET_LOCK_SPACE, batch.pk % 2**31]
            )
    spent = judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit)
    if spent + config.items_per_hit > config.budget_judgements:
        raise BudgetSpent(
            f"batch {batch.pk} has spent {spent} of its {config.budget_judgements} judgements; "
            "it cannot pay for another HIT",
            batch_id=batch.pk,
        )
