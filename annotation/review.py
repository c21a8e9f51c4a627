"""Reviewing crowd work: the golden policy, a person's approve/reject, and blocking workers.

The golden policy is decided by one pure function (`mitl.quality.golden_decision`); this
module applies it at submission (`golden_policy_apply`), when MTurk confirms work stored
from its frame (`assignment_decide_confirmed`), and reads golden misses for feedback.
Locks follow `handout.hits_lock`'s order: the HIT before its assignments.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from mitl.judgements import Level
from mitl.quality import (
    AUTOMATIC_REJECTION_PREFIX,
    GoldenDecision,
    GoldenMiss,
    golden_decision,
    golden_misses,
    golden_misses_summary,
)

from .errors import NotPermitted, ServiceError, StateConflict
from .goldens import goldens_suspend_failed
from .handout import hits_lock, hits_recount_slots
from .models import Assignment, AssignmentStatus, Judgement, Worker, golden_checked
from .prepared import fields_update


def assignment_golden_misses(*, assignment_id: int) -> list[GoldenMiss]:
    """Return the golden pairs an assignment answered wrongly, in page order (one query).

    Suspended goldens (`annotation.goldens`) are not checked any more.
    """
    rows = (
        Judgement.objects.filter(golden_checked("item__"), assignment_id=assignment_id)
        .order_by("item__position")
        .values_list("item__role", "item__position", "level")
    )
    return golden_misses((role, position, Level(level)) for role, position, level in rows)


def golden_policy_apply(
    assignment: Assignment,
    *,
    misses: list[GoldenMiss],
    policy: str,
    now: datetime,
) -> None:
    """Record a locked assignment's submission and decide it by the batch's golden policy.

    The caller holds the HIT's row and the assignment's (see `handout.hits_lock`).
    """
    passed = not misses
    decision = golden_decision(passed=passed, policy=policy)
    assignment.submitted_at = now
    assignment.golden_passed = passed
    if decision is GoldenDecision.APPROVE:
        assignment.status = AssignmentStatus.APPROVED
        assignment.reviewed_at = now
    elif decision is GoldenDecision.REJECT:
        assignment.status = AssignmentStatus.REJECTED
        assignment.reviewed_at = now
        assignment.feedback = _automatic_feedback(misses)
    else:
        assignment.status = AssignmentStatus.SUBMITTED
        assignment.flagged = not passed
    # Every submission writes it: SQL built once (annotation.prepared).
    fields_update(assignment, _DECISION_FIELDS)
    if assignment.status == AssignmentStatus.REJECTED:
        hits_recount_slots(hit_ids=[assignment.hit_id])  # the slot is free again


_DECISION_FIELDS = ("submitted_at", "golden_passed", "status", "reviewed_at", "flagged", "feedback")


def _automatic_feedback(misses: list[GoldenMiss]) -> str:
    return AUTOMATIC_REJECTION_PREFIX + golden_misses_summary(misses)


def assignment_decide_confirmed(*, assignment: Assignment, policy: str) -> Assignment:
    """Apply the golden policy to submitted work that MTurk has just confirmed.

    Work stored from MTurk's frame waits unapproved until MTurk lists it (its ids could be
    made up); then the policy decides it as it would have at submission. Work a person
    already decided is left as it is. Confirmed work that failed a golden counts towards
    suspending that golden (`annotation.goldens`), which may decide other work of the HIT.
    """
    # Read again: suspending a golden may have decided this work since it was loaded.
    assignment.refresh_from_db(fields=["status", "reviewed_at", "golden_passed", "flagged"])
    if assignment.golden_passed is False and not assignment.awaits_mturk:
        with transaction.atomic():
            hits_lock(hit_ids=[assignment.hit_id])  # before the assignments: see hits_lock
            goldens_suspend_failed(hit_id=assignment.hit_id, now=timezone.now(), policy=policy)
        assignment.refresh_from_db(fields=["status", "reviewed_at", "golden_passed", "flagged"])
    if (
        assignment.status != AssignmentStatus.SUBMITTED
        or assignment.reviewed_at is not None
        or assignment.golden_passed is None
    ):
        return assignment
    decision = golden_decision(passed=assignment.golden_passed, policy=policy)
    if decision is GoldenDecision.HOLD:
        return assignment
    feedback = ""
    if decision is GoldenDecision.REJECT:
        feedback = _automatic_feedback(assignment_golden_misses(assignment_id=assignment.pk))
    with suppress(ServiceError):  # a person decided meanwhile: theirs stands
        assignment_review(
            assignment=assignment, approve=decision is GoldenDecision.APPROVE, feedback=feedback
        )
    return Assignment.objects.select_related("worker").get(pk=assignment.pk)


_UNCONFIRMED = (
    "MTurk has not confirmed assignment {aid} yet: the HIT page is public and anyone can make "
    "up its ids, so it cannot be approved until MTurk lists it. Run `mturk_sync {batch}` "
    "first (or “Sync now” on the batch's MTurk page); work that MTurk never lists is rejected "
    "by the sync."
)


_OWN_WORK = "you cannot review your own work: another staff member must decide it"


def _is_own_work(assignment: Assignment, reviewer: AbstractBaseUser) -> bool:
    """Say whether `reviewer`'s account is the worker who did `assignment` (never changes)."""
    return Worker.objects.filter(pk=assignment.worker_id, user_id=reviewer.pk).exists()


def assignment_review(
    *,
    assignment: Assignment,
    approve: bool,
    feedback: str = "",
    reviewer: AbstractBaseUser | None = None,
) -> Assignment:
    """Approve or reject a submitted assignment; a rejection reopens the slot on its HIT.

    A rejection must say why: the worker reads the feedback. MTurk work that MTurk has not
    confirmed yet (`Assignment.awaits_mturk`) can be rejected but never approved. Nobody
    decides their own work: a `reviewer` whose account did it is refused, either way.
    """
    feedback = feedback.strip()
    if not approve and not feedback:
        raise ServiceError("say why the work is rejected: the worker sees this feedback")
    if reviewer is not None and _is_own_work(assignment, reviewer):
        raise NotPermitted(_OWN_WORK)
    with transaction.atomic():
        hits_lock(hit_ids=[assignment.hit_id])  # before the assignment: see hits_lock
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status != AssignmentStatus.SUBMITTED:
            raise StateConflict(
                f"only submitted work can be reviewed (this one is {locked.status})"
            )
        if approve and locked.awaits_mturk:
            raise StateConflict(
                _UNCONFIRMED.format(aid=locked.external_id, batch=locked.hit.batch_id)
            )
        locked.status = AssignmentStatus.APPROVED if approve else AssignmentStatus.REJECTED
        locked.flagged = False
        locked.feedback = feedback
        locked.reviewed_at = timezone.now()
        locked.reviewed_by = reviewer
        locked.save(update_fields=["status", "flagged", "feedback", "reviewed_at", "reviewed_by"])
        if not approve:
            hits_recount_slots(hit_ids=[locked.hit_id])
    return locked


def worker_block(*, worker: Worker, blocked: bool) -> Worker:
    """Block a worker (its open HITs go back to the pool) or unblock it."""
    with transaction.atomic():
        Worker.objects.filter(pk=worker.pk).update(is_blocked=blocked)
        if blocked:
            open_work = Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED)
            # The HITs before their assignments (see hits_lock); work taken on another HIT
            # meanwhile is left to the deadline, as the worker gets no new HIT from now on.
            hit_ids = hits_lock(hit_ids=open_work.values_list("hit_id", flat=True))
            open_work.filter(hit_id__in=hit_ids).update(status=AssignmentStatus.EXPIRED)
            hits_recount_slots(hit_ids=hit_ids)
    worker.refresh_from_db()
    return worker
