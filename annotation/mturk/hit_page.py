"""The HIT page inside MTurk's frame: a worker's assignment opened, and its answers stored.

MTurk decides who may accept a HIT and tells the platform nothing when a worker returns
it; the page's ids cannot be checked here. So the page only stores work, as submitted,
and `sync` decides it once MTurk lists it. Row locks follow `handout.hits_lock`: the
HIT's row before any of its assignments'.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.handout import ACTIVE_STATUSES, assignment_create, hits_recount_slots
from annotation.models import HIT, Assignment, AssignmentStatus, Batch, Worker, WorkerSource
from annotation.submissions import AnswerInput, SubmissionResult, assignment_submit
from mitl.config import batch_config

from .confirmation import assignment_by_external_id
from .hit_settings import batch_hit_settings
from .protocol import valid_id

logger = logging.getLogger(__name__)


def mturk_assignment_open(
    *, hit: HIT, worker_id: str, assignment_id: str, now: datetime | None = None
) -> Assignment:
    """Return the platform assignment of an accepted MTurk assignment, created on first use.

    MTurk decides who may accept; the platform still refuses a blocked worker, a worker
    who already did this HIT under another assignment, and a HIT full of other work. A
    worker who returned the HIT and accepted it again arrives with a new AssignmentId: the
    open assignment follows it. A HIT that looks full only because of unsubmitted MTurk
    assignments gives up the oldest of them (see `_free_returned_slot`).
    """
    if not (valid_id(worker_id) and valid_id(assignment_id)):
        raise ServiceError("this page needs MTurk's workerId and assignmentId")
    now = now or timezone.now()
    worker, _ = Worker.objects.get_or_create(source=WorkerSource.MTURK, external_id=worker_id)
    if worker.is_blocked:
        raise ServiceError(
            "your worker ID is blocked from these HITs: please return this HIT on MTurk"
        )
    existing = assignment_by_external_id(assignment_id)
    if existing is not None:
        if existing.hit_id != hit.pk or existing.worker_id != worker.pk:
            raise ServiceError("this assignment belongs to another HIT or worker")
        return _reclaim(existing, now)
    previous = Assignment.objects.filter(hit=hit, worker=worker).first()
    if previous is not None:
        return _follow_new_assignment(previous, assignment_id, now)
    deadline = _deadline(hit.batch, now)
    try:
        with transaction.atomic():  # the HIT stays locked until the MTurk id is on it
            # The HIT's row before any assignment's (see handout.hits_lock).
            locked = HIT.objects.select_for_update().get(pk=hit.pk)
            _free_returned_slot(locked)
            created = assignment_create(hit=locked, worker=worker, now=now)
            Assignment.objects.filter(pk=created.pk).update(
                external_id=assignment_id, deadline=deadline
            )
    except (ServiceError, IntegrityError):
        again = assignment_by_external_id(assignment_id)  # the same page opened twice at once
        if again is not None and again.hit_id == hit.pk and again.worker_id == worker.pk:
            return again
        raise
    return _reloaded(created.pk)


def _free_returned_slot(hit: HIT) -> None:
    """Expire the oldest unsubmitted MTurk assignment of a HIT that looks full.

    MTurk frees a slot the moment a worker returns (or abandons) a HIT, tells the
    platform nothing, and never has more than MaxAssignments out at once: a newly accepted
    AssignmentId on a full HIT means an earlier MTurk assignment was given up. If that
    guess picks a worker who is still at it, that worker's next page load or submit takes
    a slot back the same way (`_reclaim`). Platform and submitted work is never touched.
    The caller holds the HIT's row lock, taken before any assignment's: writers that lock
    an assignment of the HIT first (expiry, submission, review) would otherwise wait
    crosswise with this one (see handout.hits_lock).
    """
    active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
    if active < hit.max_assignments:
        return
    stale = (
        Assignment.objects.filter(
            hit=hit,
            status=AssignmentStatus.ACCEPTED,
            worker__source=WorkerSource.MTURK,
            external_id__isnull=False,
        )
        .order_by("accepted_at", "pk")
        .first()
    )
    if stale is None:
        return
    Assignment.objects.filter(pk=stale.pk).update(status=AssignmentStatus.EXPIRED)
    hits_recount_slots(hit_ids=[hit.pk])
    logger.info("%s: MTurk assignment %s given up for a new one", hit, stale.external_id)


def _slot_take_back(hit: HIT) -> None:
    """Make room on a locked HIT for MTurk work coming back, or refuse: the HIT is full."""
    _free_returned_slot(hit)
    active = Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()
    if active >= hit.max_assignments:
        raise ServiceError(f"{hit} already has all {hit.max_assignments} assignments")


def _taken_over(assignment: Assignment, now: datetime) -> bool:
    """Say whether MTurk work was expired for another worker's slot, not for its time."""
    return (
        assignment.status == AssignmentStatus.EXPIRED
        and assignment.submitted_at is None
        and assignment.deadline is not None
        and assignment.deadline >= now
        and not assignment.worker.is_blocked
    )


def _reclaim(assignment: Assignment, now: datetime) -> Assignment:
    """Reopen MTurk work that `_free_returned_slot` expired while its worker was still on it."""
    if not _taken_over(assignment, now):
        return assignment
    with transaction.atomic():
        # The HIT's row before its assignments' (see handout.hits_lock).
        hit = HIT.objects.select_for_update().get(pk=assignment.hit_id)
        locked = (
            Assignment.objects.select_for_update().select_related("worker").get(pk=assignment.pk)
        )
        if _taken_over(locked, now):
            _slot_take_back(hit)
            locked.status = AssignmentStatus.ACCEPTED
            locked.save(update_fields=["status"])
            hits_recount_slots(hit_ids=[hit.pk])
    return _reloaded(assignment.pk)


def _follow_new_assignment(previous: Assignment, assignment_id: str, now: datetime) -> Assignment:
    """Move a worker's open (or given up) assignment of this HIT to its new AssignmentId."""
    if previous.status not in (AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED):
        raise ServiceError(
            "you already submitted this HIT under another assignment: please return this one"
        )
    deadline = _deadline(previous.hit.batch, now)
    with transaction.atomic():
        # The HIT's row before its assignments' (see handout.hits_lock).
        hit = HIT.objects.select_for_update().get(pk=previous.hit_id)
        locked = Assignment.objects.select_for_update().get(pk=previous.pk)
        if locked.status == AssignmentStatus.EXPIRED:
            _slot_take_back(hit)
        locked.status = AssignmentStatus.ACCEPTED
        locked.external_id = assignment_id
        locked.confirmed_at = None  # MTurk has yet to confirm the new AssignmentId
        locked.deadline = deadline
        locked.save(update_fields=["status", "external_id", "confirmed_at", "deadline"])
        hits_recount_slots(hit_ids=[hit.pk])
    return _reloaded(locked.pk)


def mturk_assignment_submit(
    *, assignment: Assignment, answers: Sequence[AnswerInput], now: datetime | None = None
) -> SubmissionResult:
    """Store the answers that an MTurk worker sent from the HIT page, as submitted work.

    The page is public and MTurk's ids in its URL cannot be checked here, so nothing is
    approved or rejected now: the answers are stored with the golden check's result
    (`golden_passed`, `flagged`) and `mturk_sync` applies the batch's golden policy once
    MTurk lists the assignment (same AssignmentId, WorkerId and HITId). Work that was given
    up for another worker's slot while its worker was still on it is reopened first.
    """
    now = now or timezone.now()
    assignment = _reclaim(_reloaded(assignment.pk), now)
    return assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=batch_config(assignment.hit.batch).followups,
        golden_policy="review_all",  # the sync applies the batch's policy once MTurk confirms
        worker=assignment.worker,
        now=now,
    )


def mturk_assignment_find(*, assignment_id: str, worker_id: str, hit_id: str) -> Assignment | None:
    """Return the assignment that MTurk's id triple names, or None when any part differs."""
    if not all(valid_id(value) for value in (assignment_id, worker_id, hit_id)):
        return None
    return (
        Assignment.objects.select_related("hit__batch", "worker")
        .filter(
            external_id=assignment_id,
            worker__source=WorkerSource.MTURK,
            worker__external_id=worker_id,
            hit__external_id=hit_id,
        )
        .first()
    )


def _deadline(batch: Batch, now: datetime) -> datetime:
    """Return when MTurk abandons an assignment accepted now (its HIT type's duration)."""
    return now + timedelta(minutes=batch_hit_settings(batch).assignment_minutes)


def _reloaded(assignment_pk: int) -> Assignment:
    """Return an assignment as stored now, with its HIT, batch and worker."""
    return Assignment.objects.select_related("hit__batch", "worker").get(pk=assignment_pk)
