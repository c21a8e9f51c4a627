"""The HIT page inside MTurk's frame: a worker's assignment opened, and its answers stored.

MTurk decides who may accept a HIT and tells the platform nothing when a worker returns
it; the page's ids cannot be checked here. So the page only stores work, as submitted,
and `sync` decides it once MTurk lists it. Row locks follow `handout.hits_lock`: the
HIT's row before any of its assignments'.

Made-up ids. Anyone who previews a HIT can open its page, and submit to it, with an
(assignmentId, workerId) pair of their own. MTurk itself never hands out more than
MaxAssignments of a HIT, so the platform need not reserve slots for MTurk work it cannot
vouch for; it only has to make sure such work neither locks real workers out nor piles
up rows:

- A HIT's slots are taken (`mturk_slots_taken`) by platform work, by MTurk work that MTurk
  confirmed (`Assignment.confirmed_at`, set by the sync or a results CSV) and by *open*
  MTurk work. Unconfirmed *submitted* MTurk work takes none: a HIT is "full" for a
  newcomer only when real (platform or confirmed) work fills it.
- Open MTurk work is bounded by the slots left: a newcomer on a HIT that looks full
  gives up the oldest open one (`_free_returned_slot`), whose worker takes a slot back on
  its next load or submit (`_reclaim`).
- Submitted work is never deleted, whatever others send. Unconfirmed submitted MTurk work
  that MTurk has not been asked about (`verify.unverified_pool`) is bounded per HIT: at
  `max_assignments + UNVERIFIED_SPARE` such submissions, a newcomer is refused for now
  (`TryLater`, a 429), after the page has asked MTurk about the oldest ones
  (`verify.hit_pool_verify`): what MTurk confirms or does not know leaves the pool, kept.
  A genuine HIT never comes near the bound (MTurk hands out `max_assignments`).
- New assignments are counted per client address (`page_limits`, the view's `admit`).
- Unconfirmed MTurk work that was never submitted and is no longer open (given up, or
  expired) holds no answers: beyond the same bound, a newcomer deletes the oldest of it,
  with the Worker rows left without any work (`_unsubmitted_trim`).
- A Worker row is created only together with an assignment, under the HIT's lock: a page
  view that is refused (a blocked worker, a full HIT) stores nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ServiceError, StateConflict
from annotation.handout import ACTIVE_STATUSES, assignment_create, hits_recount_slots
from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    Worker,
    WorkerSource,
    mturk_unconfirmed,
)
from annotation.submissions import AnswerInput, SubmissionResult, assignment_submit
from mitl.config import batch_config

from .confirmation import assignment_by_external_id
from .errors import TryLater
from .hit_settings import batch_hit_settings
from .protocol import valid_id
from .verify import VERIFY_EVERY_S, hit_pool_verify, unverified_pool

logger = logging.getLogger(__name__)

# Unverified submitted MTurk work per HIT beyond the HIT's own MaxAssignments before
# newcomers wait (see the module's docstring); the same bound for never-submitted rows.
UNVERIFIED_SPARE = 10


def mturk_assignment_open(
    *,
    hit: HIT,
    worker_id: str,
    assignment_id: str,
    now: datetime | None = None,
    admit: Callable[[], None] | None = None,
    client: Any = None,
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
    # Looked up, not created: a Worker row comes only with an assignment (below).
    worker = Worker.objects.filter(source=WorkerSource.MTURK, external_id=worker_id).first()
    if worker is not None and worker.is_blocked:
        raise ServiceError(
            "your worker ID is blocked from these HITs: please return this HIT on MTurk"
        )
    existing = assignment_by_external_id(assignment_id)
    if existing is not None:
        if existing.hit_id != hit.pk or worker is None or existing.worker_id != worker.pk:
            raise ServiceError("this assignment belongs to another HIT or worker")
        return _reclaim(existing, now)
    previous = Assignment.objects.filter(hit=hit, worker=worker).first() if worker else None
    if previous is not None:
        return _follow_new_assignment(previous, assignment_id, now)
    if hit.batch.paused_at is not None:
        raise ServiceError("this batch is paused: please return this HIT on MTurk")
    # MTurk is asked before any lock is taken. A newcomer refused because the HIT's pool is
    # full is not counted against its address: a genuine worker told to try again later
    # would otherwise use up its address's allowance by trying.
    _unverified_bound(hit, now, client)
    if admit is not None:
        admit()
    deadline = _deadline(hit.batch, now)
    try:
        with transaction.atomic():  # the HIT stays locked until the MTurk id is on it
            # The HIT's row before any assignment's (see handout.hits_lock).
            locked = HIT.objects.select_for_update().get(pk=hit.pk)
            _pool_full_refuse(locked)  # counted again under the lock: no race past it
            _free_returned_slot(locked)
            orphans = _unsubmitted_trim(locked)
            # Rolled back with the rest when the HIT is full: a refused view stores nothing.
            worker, _ = Worker.objects.get_or_create(
                source=WorkerSource.MTURK, external_id=worker_id
            )
            created = assignment_create(
                hit=locked, worker=worker, now=now, slots_taken=mturk_slots_taken
            )
            Assignment.objects.filter(pk=created.pk).update(
                external_id=assignment_id, deadline=deadline
            )
    except (ServiceError, IntegrityError):
        again = assignment_by_external_id(assignment_id)  # the same page opened twice at once
        if (
            again is not None
            and again.hit_id == hit.pk
            and again.worker.source == WorkerSource.MTURK
            and again.worker.external_id == worker_id
        ):
            return again
        raise
    _workers_forget(orphans)
    return _reloaded(created.pk)


def mturk_slots_taken(hit: HIT) -> int:
    """Count a HIT's taken slots: platform work, MTurk work MTurk confirmed, open MTurk work.

    Unconfirmed submitted MTurk work takes none: its ids may be made up, and MTurk keeps
    its own MaxAssignments anyway (see the module's docstring).
    """
    waiting = mturk_unconfirmed() & ~Q(status=AssignmentStatus.ACCEPTED)
    return Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).exclude(waiting).count()


def _unverified_bound(hit: HIT, now: datetime, client: Any) -> None:
    """Refuse a newcomer for now while the HIT's unverified pool is full, after asking MTurk
    about its oldest members (which leave the pool, kept, whatever MTurk answers)."""
    if unverified_pool(hit).count() < _pool_bound(hit):
        return
    check = hit_pool_verify(hit, now=now, client=client)
    logger.info(
        "%s: unverified pool full; MTurk confirmed %d, did not know %d, denied %d%s",
        hit,
        len(check.confirmed),
        len(check.unknown),
        len(check.denied),
        " (MTurk out of reach)" if check.unreachable else "",
    )
    _pool_full_refuse(hit)


def _pool_full_refuse(hit: HIT) -> None:
    if unverified_pool(hit).count() >= _pool_bound(hit):
        raise TryLater(
            "this HIT has many submissions that MTurk has yet to confirm; try again in a "
            "minute, or return the HIT",
            retry_after=VERIFY_EVERY_S,
        )


def _pool_bound(hit: HIT) -> int:
    return hit.max_assignments + UNVERIFIED_SPARE


def _unsubmitted_trim(hit: HIT) -> list[int]:
    """Delete a locked HIT's oldest never-submitted, no longer open, unconfirmed MTurk work
    beyond its bound, making room for one more; return the workers whose rows went (see
    `_workers_forget`). Such rows hold no answers; submitted work is never touched.
    """
    unsubmitted = (
        Assignment.objects.filter(hit=hit, submitted_at__isnull=True)
        .filter(mturk_unconfirmed())
        .exclude(status=AssignmentStatus.ACCEPTED)
    )
    excess = unsubmitted.count() - _pool_bound(hit) + 1
    if excess <= 0:
        return []
    victims = list(
        unsubmitted.order_by("accepted_at", "pk").values_list("pk", "worker_id")[:excess]
    )
    Assignment.objects.filter(pk__in=[pk for pk, _ in victims]).delete()  # no judgements
    hits_recount_slots(hit_ids=[hit.pk])
    logger.info("%s: %d never-submitted MTurk assignments deleted", hit, len(victims))
    return sorted({worker_id for _, worker_id in victims})


def _workers_forget(worker_ids: list[int]) -> None:
    """Delete MTurk Worker rows left without any work (not blocked ones).

    Runs after the HIT's transaction: a worker's row comes before any HIT's in the lock
    order (handout.hits_lock). Rows another transaction holds are left alone.
    """
    if not worker_ids:
        return
    skip_locked = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        free = list(
            Worker.objects.filter(
                pk__in=worker_ids,
                source=WorkerSource.MTURK,
                user__isnull=True,
                is_blocked=False,
            )
            .order_by("pk")
            .select_for_update(skip_locked=skip_locked)
            .values_list("pk", flat=True)
        )
        Worker.objects.filter(pk__in=free, assignments__isnull=True).delete()


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
    if mturk_slots_taken(hit) < hit.max_assignments:
        return
    stale = (
        Assignment.objects.filter(
            hit=hit,
            status=AssignmentStatus.ACCEPTED,
            worker__source=WorkerSource.MTURK,
        )
        .filter(mturk_unconfirmed())
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
    if mturk_slots_taken(hit) >= hit.max_assignments:
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
    *,
    assignment: Assignment,
    answers: Sequence[AnswerInput],
    now: datetime | None = None,
    by_page: bool = False,
) -> SubmissionResult:
    """Store the answers that an MTurk worker sent from the HIT page, as submitted work
    (`by_page`: the page names its pairs by their numbers there, `annotation.pages`).

    The page is public and MTurk's ids in its URL cannot be checked here, so nothing is
    approved or rejected now: the answers are stored with the golden check's result
    (`golden_passed`, `flagged`) and `mturk_sync` applies the batch's golden policy once
    MTurk lists the assignment (same AssignmentId, WorkerId and HITId). Work that was given
    up for another worker's slot while its worker was still on it is reopened first.
    """
    now = now or timezone.now()
    conflict: StateConflict | None = None
    try:
        # One transaction, the HIT's row locked first (see handout.hits_lock): a slot taken
        # back (`_reclaim`) stays this work's until its answers are stored, and no newcomer
        # can give the work up between the look at its state and the submit.
        with transaction.atomic():
            HIT.objects.select_for_update().filter(pk=assignment.hit_id).first()
            assignment = _reclaim(_reloaded(assignment.pk), now)
            try:
                return assignment_submit(
                    assignment=assignment,
                    answers=answers,
                    followups_required=batch_config(assignment.hit.batch).followups,
                    golden_policy="review_all",  # the sync applies it once MTurk confirms
                    worker=assignment.worker,
                    now=now,
                    by_page=by_page,
                )
            except StateConflict as exc:  # kept: what the submit recorded (work found late)
                conflict = exc
    except Assignment.DoesNotExist:  # given up unsubmitted, then deleted (_unsubmitted_trim)
        raise ServiceError(
            "this assignment is no longer open here: reload the HIT from MTurk"
        ) from None
    raise conflict


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
