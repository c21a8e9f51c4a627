"""MTurk work stored on the platform: found by its AssignmentId, and confirmed once MTurk
vouches for it (the sync found it listed, or MTurk's results CSV holds it).

Until then nobody may approve it: the HIT page is public, so its ids may be made up.
"""

from __future__ import annotations

from datetime import datetime

from annotation.models import Assignment, AssignmentStatus

# The platform's decisions as MTurk names them; work that waits for a person has none.
MTURK_STATUS = {AssignmentStatus.APPROVED: "Approved", AssignmentStatus.REJECTED: "Rejected"}


def assignment_by_external_id(assignment_id: str) -> Assignment | None:
    """Return the platform assignment of an MTurk AssignmentId, with its HIT, batch and worker."""
    return (
        Assignment.objects.select_related("hit__batch", "worker")
        .filter(external_id=assignment_id)
        .first()
    )


def assignment_mark_confirmed(assignment: Assignment, now: datetime) -> Assignment:
    """Record (once) that MTurk confirmed this work: from now on it may be approved."""
    if assignment.confirmed_at is None:
        Assignment.objects.filter(pk=assignment.pk, confirmed_at__isnull=True).update(
            confirmed_at=now
        )
        assignment.confirmed_at = now
    return assignment
