"""Which crowd work counts: the one rule that aggregation, the bias report, the
qualification study and fair pay read.

Work counts once it is approved, and MTurk work only once MTurk confirmed it: the HIT page
inside MTurk is public, so its ids can be made up (`models.mturk_unconfirmed`). The pairs
being judged count (`ItemRole.TASK`); the goldens are the check on a worker, not data.

Fair pay counts the same assignments but pays for all their time, goldens included: it
reads `assignments_counted` and sums every judgement of each. Not counted work, and so not
read here: the golden answers that Dawid-Skene takes as evidence of a worker's reliability
(`pipeline.aggregate`: every submission, approved or not) and the qualification study's
submission and rejection rates (every submission).
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from .models import Assignment, AssignmentStatus, ItemRole, Judgement, mturk_unconfirmed


def work_counted(prefix: str = "") -> Q:
    """Match the assignments whose work counts (`prefix`: the path to the assignment, e.g.
    "assignment__"): approved, and MTurk work only once MTurk confirmed it."""
    return Q(**{f"{prefix}status": AssignmentStatus.APPROVED}) & ~mturk_unconfirmed(prefix)


def assignments_counted(*, batch_id: int | None = None) -> QuerySet[Assignment]:
    """Return the assignments whose work counts: of one batch, or of every batch (None)."""
    assignments = Assignment.objects.filter(work_counted())
    if batch_id is not None:
        assignments = assignments.filter(hit__batch_id=batch_id)
    return assignments


def judgements_counted(*, batch_id: int) -> QuerySet[Judgement]:
    """Return the batch's judgements that count: those of counted work on the pairs being
    judged (not the goldens)."""
    return Judgement.objects.filter(
        work_counted("assignment__"),
        assignment__hit__batch_id=batch_id,
        item__role=ItemRole.TASK,
    )
