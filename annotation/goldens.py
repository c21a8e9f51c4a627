"""Suspending a golden pair that is wrong itself, and re-deciding the work it failed.

A golden TN drawn outside every annotator's top-N can still be a true match: then every
honest worker fails it, the golden policy flags or rejects them all, and the HIT goes
round and round. When `golden_suspend_after` distinct workers fail one golden pair while
passing every other golden of their HIT (`mitl.quality.goldens_to_suspend`), the pair is
suspended: its answers are no longer checked, the work it alone failed is decided again
as if it had passed, and the review page lists it for an admin.

The caller holds the HIT's row (`handout.hits_lock`); the assignments are locked here,
after it, in pk order.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from mitl.config import batch_config
from mitl.judgements import Level
from mitl.quality import (
    AUTOMATIC_REJECTION_PREFIX,
    GoldenDecision,
    golden_answered_right,
    golden_decision,
    goldens_to_suspend,
)

from .handout import hits_recount_slots
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    BatchState,
    HITItem,
    Judgement,
    golden_checked,
    mturk_unconfirmed,
)

# What a worker whose automatic rejection is withdrawn reads.
REJECTION_WITHDRAWN = (
    "Approved: a pair with a known answer on this HIT turned out to be wrong, so the "
    "automatic rejection was withdrawn."
)


def goldens_in_force(hit_id: int):
    """The HIT's golden items whose answers are still checked (not suspended)."""
    return HITItem.objects.filter(golden_checked(), hit_id=hit_id)


def goldens_suspend_failed(
    *, hit_id: int, now: datetime, policy: str | None = None
) -> list[HITItem]:
    """Suspend the HIT's golden pairs that honest workers keep failing; re-decide their work.

    Counts submitted work only, never MTurk work that MTurk has not confirmed (its ids may
    be made up, so it must not be able to switch a check off). Only while the batch takes
    answers. `policy` defaults to the batch's `golden_policy`. Returns the suspended items.
    The caller holds the HIT's row.
    """
    hit = HIT.objects.select_related("batch").get(pk=hit_id)
    if hit.batch.state != BatchState.ANNOTATING:
        return []
    config = batch_config(hit.batch)
    sheets: dict[int, list[tuple[int, str, Level]]] = defaultdict(list)
    rows = (
        Judgement.objects.filter(
            item__in=goldens_in_force(hit_id), assignment__submitted_at__isnull=False
        )
        .exclude(mturk_unconfirmed("assignment__"))
        .values_list("assignment__worker_id", "item_id", "item__role", "level")
    )
    for worker_id, item_id, role, level in rows:
        sheets[worker_id].append((item_id, role, Level(level)))
    suspended = goldens_to_suspend(sheets, threshold=config.golden_suspend_after)
    if not suspended:
        return []
    HITItem.objects.filter(pk__in=suspended).update(golden_suspended_at=now)
    _failed_work_redecide(hit_id=hit_id, policy=policy or config.golden_policy, now=now)
    return list(HITItem.objects.filter(pk__in=suspended).order_by("position"))


def _failed_work_redecide(*, hit_id: int, policy: str, now: datetime) -> None:
    """Decide again the HIT's failed work that passes once the suspended goldens are ignored.

    Work a person decided stays as it is. Held work is unflagged and, where the policy
    approves passing work, approved (MTurk work MTurk has not confirmed stays held: the
    sync approves it). An automatic rejection of platform work is withdrawn and approved;
    an automatic rejection of MTurk work is left alone: it has been or is being sent to
    MTurk, whose rejection the platform does not overturn.
    """
    failed = list(
        Assignment.objects.select_for_update()
        .filter(
            hit_id=hit_id,
            golden_passed=False,
            reviewed_by__isnull=True,
            status__in=(AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED),
        )
        .order_by("pk")
    )
    answers = Judgement.objects.filter(
        assignment__in=failed, item__in=goldens_in_force(hit_id)
    ).values_list("assignment_id", "item__role", "level")
    failing_ids = {
        assignment_id
        for assignment_id, role, level in answers
        if not golden_answered_right(role, Level(level))
    }
    reapproved = False
    for assignment in failed:
        if assignment.pk in failing_ids:
            continue
        fields = ["golden_passed", "flagged"]
        assignment.golden_passed, assignment.flagged = True, False
        if assignment.status == AssignmentStatus.REJECTED:
            automatic = assignment.feedback.startswith(AUTOMATIC_REJECTION_PREFIX)
            if assignment.external_id is not None or not automatic:
                continue  # MTurk's rejection, or one with a person's words: left alone
            assignment.status, assignment.feedback = AssignmentStatus.APPROVED, REJECTION_WITHDRAWN
            assignment.reviewed_at = now
            fields += ["status", "feedback", "reviewed_at"]
            reapproved = True
        elif assignment.reviewed_at is None and not assignment.awaits_mturk:
            if golden_decision(passed=True, policy=policy) is GoldenDecision.APPROVE:
                assignment.status, assignment.reviewed_at = AssignmentStatus.APPROVED, now
                fields += ["status", "reviewed_at"]
        assignment.save(update_fields=fields)
    if reapproved:
        hits_recount_slots(hit_ids=[hit_id])  # approved work holds its slot again
