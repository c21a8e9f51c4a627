"""Handing out crowd work: the lock order, next-HIT hand-out, slots and expiry.

Every function is one transaction (or a short series of them); arguments are keyword-only.
A HIT's assignments are only ever created while its row is locked, so counting them after
taking the lock is exact, even under concurrent "next HIT" requests (see `hit_assign_next`).

Lock order, here and in every writer of crowd work (submissions, review, MTurk): a worker's
row, then HIT rows (several by pk), then the rows of their assignments. A writer that locks
an assignment and then its HIT (to recount the slot) waits crosswise with one that holds the
HIT and expires an assignment of it (the MTurk page giving a returned slot away), and
PostgreSQL kills one of them as a deadlock; see `hits_lock`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from functools import partial

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from mitl.config import batch_config

from .budget import BudgetSpent, budget_hold
from .errors import ServiceError
from .instructions import instructions_current_id
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    BatchState,
    Worker,
    WorkerSource,
)
from .prepared import Prepared, objects_insert, update_query
from .qualification.attempts import batches_closed_to, qualification_gates, qualification_missing

# Work that holds (or used) one of a HIT's slots; rejected and expired work frees its slot.
ACTIVE_STATUSES = (AssignmentStatus.ACCEPTED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)
PAGE_SEEDS = 2**31  # Assignment.page_seed is drawn below this (fits a PositiveIntegerField)
_NEXT_HIT_TRIES = 25  # candidates to try when concurrent requests fill the first ones


def worker_for_user(*, user: AbstractBaseUser) -> Worker:
    """Return the platform worker of a logged-in account, creating it the first time."""
    try:
        return user.worker  # type: ignore[attr-defined]  # loaded with the user (annotation.auth)
    except Worker.DoesNotExist:
        pass
    worker, _ = Worker.objects.get_or_create(
        user=user,
        defaults={"source": WorkerSource.PLATFORM, "external_id": user.get_username()},
    )
    return worker


def _active_subquery() -> Subquery:
    return Subquery(
        Assignment.objects.filter(hit=OuterRef("pk"), status__in=ACTIVE_STATUSES)
        .order_by()
        .values("hit")
        .annotate(n=Count("pk"))
        .values("n")
    )


def hits_lock(*, hit_ids: Iterable[int], skip_locked: bool = False) -> list[int]:
    """Lock these HITs' rows in pk order, inside the caller's transaction; return their ids.

    Take it before locking or writing any assignment of these HITs, and before any other
    HIT: every writer then waits in the same order, so none waits crosswise (a deadlock).
    With `skip_locked`, HITs that others hold are left out instead of waited for.
    NO KEY UPDATE: new assignments may still point at the HIT meanwhile (the others that
    write to the HIT lock it too, so they still wait for each other).
    """
    ids = sorted(set(hit_ids))
    if not ids:
        return []
    skip_locked = skip_locked and connection.features.has_select_for_update_skip_locked
    return list(
        HIT.objects.filter(pk__in=ids)
        .order_by("pk")
        .select_for_update(no_key=True, skip_locked=skip_locked)
        .values_list("pk", flat=True)
    )


def hits_recount_slots(*, hit_ids: Iterable[int] | None = None) -> int:
    """Recount the slot hint (`HIT.active_assignments`) of these HITs, or of every open batch.

    Every write here that frees a slot recounts its HITs (holding their rows already); the
    periodic expiry task also recounts all HITs of annotating batches, so a hint can never
    stay wrong for long.
    """
    exact = Coalesce(_active_subquery(), 0)
    with transaction.atomic():
        if hit_ids is None:
            # Only rows whose hint is off are locked and written: no churn, no locks on the
            # others. One that another writer holds is skipped: that writer recounts it.
            stale = HIT.objects.filter(batch__state=BatchState.ANNOTATING).exclude(
                active_assignments=exact
            )
            ids = hits_lock(hit_ids=stale.values_list("pk", flat=True), skip_locked=True)
        else:
            # An UPDATE locks rows in the order it scans them; two of them over the same
            # HITs could wait crosswise. Locked here in pk order first (see hits_lock).
            ids = hits_lock(hit_ids=hit_ids)
        hits = HIT.objects.filter(pk__in=ids).exclude(active_assignments=exact)
        return hits.update(active_assignments=exact)


def assignments_expire(*, now: datetime | None = None) -> int:
    """Expire accepted work past its deadline, so its HIT goes back to the pool.

    The HITs are locked before their assignments (see `hits_lock`), and rows that others
    hold are skipped, never waited for: a HIT being handed out, published or submitted to
    keeps its work until the next run (every minute), and a submit in flight its row.
    """
    now = now or timezone.now()
    skip_locked = connection.features.has_select_for_update_skip_locked
    overdue = Assignment.objects.filter(status=AssignmentStatus.ACCEPTED, deadline__lt=now)
    with transaction.atomic():
        hit_ids = hits_lock(
            hit_ids=overdue.values_list("hit_id", flat=True).distinct(), skip_locked=True
        )
        expired = list(
            overdue.filter(hit_id__in=hit_ids)
            .order_by("pk")
            .select_for_update(skip_locked=skip_locked)
            .values_list("pk", "hit_id")
        )
        if not expired:
            return 0
        Assignment.objects.filter(pk__in=[pk for pk, _ in expired]).update(
            status=AssignmentStatus.EXPIRED
        )
        hits_recount_slots(hit_ids={hit_id for _, hit_id in expired})
    return len(expired)


def _deadline(hit: HIT, now: datetime) -> datetime:
    return now + timedelta(minutes=batch_config(hit.batch).assignment_minutes)


def assignment_create(
    *,
    hit: HIT,
    worker: Worker,
    now: datetime | None = None,
    slots_taken: Callable[[HIT], int] | None = None,
    check_budget: bool = True,
) -> Assignment:
    """Give `hit` to `worker`, refusing a blocked worker, a repeat, a full HIT, a batch
    whose judgement budget is spent (`BudgetSpent`), or a batch whose qualification round
    the worker has not passed (MTurk workers excepted: MTurk checks theirs).

    `slots_taken` counts the HIT's taken slots (default: its active work); the MTurk page
    leaves out MTurk work that MTurk has not confirmed (see `mturk.hit_page`). Work done
    elsewhere already (an offline results import) passes `check_budget=False`.
    """
    if worker.is_blocked:
        raise ServiceError(f"worker {worker} is blocked")
    now = now or timezone.now()
    with transaction.atomic():
        locked = HIT.objects.select_for_update().select_related("batch").get(pk=hit.pk)
        if qualification_missing(worker=worker, batch=locked.batch):
            raise ServiceError(
                f"worker {worker} has not passed the qualification round of batch "
                f"{locked.batch_id}: take the qualification round first (My work page)"
            )
        if Assignment.objects.filter(hit=locked, worker=worker).exists():
            raise ServiceError(f"worker {worker} already worked on {locked}")
        active = _active_count(locked)
        taken = active if slots_taken is None else slots_taken(locked)
        if taken >= locked.max_assignments:
            raise ServiceError(f"{locked} already has all {locked.max_assignments} assignments")
        if check_budget:
            budget_hold(batch=locked.batch, config=batch_config(locked.batch))
        return _assign(locked, worker, now, active)


def _active_count(hit: HIT) -> int:
    counted = _ACTIVE_COUNT.rows(hit.pk)  # no row: none
    return counted[0][0] if counted else 0


def _assign(hit: HIT, worker: Worker, now: datetime, active: int) -> Assignment:
    """Create the assignment and set the slot hint; the caller holds the HIT's lock."""
    assignment = Assignment(
        hit=hit,
        worker=worker,
        deadline=_deadline(hit, now),
        page_seed=secrets.randbelow(PAGE_SEEDS),  # this worker's own order of the pairs
        # The version shown with this work, for good: a later version never changes it.
        instructions_id=instructions_current_id(batch_id=hit.batch_id),
    )
    objects_insert([assignment])  # as `create` would, through SQL built once
    _SLOT_HINT_SET.execute(hit.pk, active + 1)
    return assignment


def hit_assign_next(*, worker: Worker, now: datetime | None = None) -> Assignment | None:
    """Return the worker's open assignment, or give it the next HIT with a free slot.

    Candidates are HITs of annotating batches that the worker never had, oldest batch
    first, found through the slot hint's partial index; a batch whose qualification round
    the worker has not passed is left out in the same query (annotation.qualification.attempts).
    On PostgreSQL, `SKIP LOCKED` lets concurrent requests take different HITs instead of
    queueing on the same row, and a request waits for a locked one only when every free
    HIT is locked at that moment.
    After the lock, the slot count is read again (a new statement sees every assignment
    committed meanwhile), so a HIT never gets more than `max_assignments`; a stale hint is
    corrected on the spot. Requests of one worker queue on its row, so a repeat resumes
    the open assignment. Overdue work of others is expired when no HIT looks free (and by
    the periodic task), not on every request. Returns None when no HIT is free.
    """
    if worker.is_blocked:
        raise ServiceError("your account is blocked from taking new HITs")
    now = now or timezone.now()
    free = _Candidates(worker_id=worker.pk, gated=qualification_gates(worker))
    swept = False  # other workers' overdue work is expired only when nothing looks free
    wait = False  # the last try found every free HIT locked: this one waits for the first
    for _ in range(_NEXT_HIT_TRIES):
        outcome = _try_assign(worker, free, now, wait=wait)
        wait = outcome is _Miss.ALL_LOCKED
        if isinstance(outcome, Assignment):
            return outcome
        if isinstance(outcome, int):  # that batch's budget is spent: look elsewhere
            free.spent.append(outcome)
            continue
        if outcome is _Miss.NOTHING_FREE:
            if swept:
                return None
            assignments_expire(now=now)
            swept = True
        # _Miss.FILLED: a concurrent request filled it between our snapshot and our lock.
    return None


def _free_hits(
    worker_id: int, *, gated: bool, skip_locked: bool, spent: Sequence[int] = ()
) -> QuerySet[HIT]:
    """The first HIT with a free slot for the worker, locked, with its batch (see
    `hit_assign_next`); `gated`: leave out batches whose qualification round it lacks."""
    free = (
        HIT.objects.filter(
            batch__state=BatchState.ANNOTATING,
            batch__paused_at__isnull=True,  # staff paused the hand-out (annotation.pause)
            active_assignments__lt=F("max_assignments"),
            external_id__isnull=True,  # a HIT published on MTurk is MTurk's to hand out
        )
        .exclude(assignments__worker_id=worker_id)
        .order_by("batch_id", "index")
    )
    if gated:
        free = free.exclude(batch_id__in=batches_closed_to(worker_id=worker_id))
    if spent:  # batches whose budget ran out during this request
        free = free.exclude(batch_id__in=spent)
    return (
        free.select_for_update(skip_locked=skip_locked, of=("self",))
        .select_related("batch")
        .defer("batch__reports", "batch__mturk")  # can be large; not read here
    )[:1]


def _active_count_query(hit_id: int) -> QuerySet[Assignment]:
    active = Assignment.objects.filter(hit_id=hit_id, status__in=ACTIVE_STATUSES).order_by()
    return active.values("hit_id").annotate(n=Count("pk")).values_list("n")


# The hand-out's statements, sent for every HIT: built once (annotation.prepared). The
# free HIT's, by (gated, skip_locked).
_FREE_HIT = {
    (gated, skip): Prepared(partial(_free_hits, gated=gated, skip_locked=skip), 1)
    for gated in (False, True)
    for skip in (False, True)
}
_WORKER_LOCK = Prepared(
    lambda worker_id: (
        Worker.objects.select_for_update(no_key=True).filter(pk=worker_id).values_list("is_blocked")
    ),
    1,
)
_OPEN_WORK = Prepared(
    lambda worker_id: Assignment.objects.filter(
        worker_id=worker_id, status=AssignmentStatus.ACCEPTED
    ).order_by("accepted_at")[:1],
    1,
)
_ACTIVE_COUNT = Prepared(_active_count_query, 1)
_SLOT_HINT_SET = Prepared(
    lambda hit_id, active: update_query(HIT.objects.filter(pk=hit_id), active_assignments=active),
    2,
)


@dataclass
class _Candidates:
    """Where a worker's next HIT is looked for, and the batches left out meanwhile."""

    worker_id: int
    gated: bool  # the platform checks the worker's qualification (qualification_gates)
    spent: list[int] = field(default_factory=list)  # batches whose budget ran out

    def first_locked(self, *, skip_locked: bool) -> HIT | None:
        if self.spent:  # rare: the ORM builds this one
            found = list(
                _free_hits(
                    self.worker_id, gated=self.gated, skip_locked=skip_locked, spent=self.spent
                )
            )
        else:
            found = _FREE_HIT[(self.gated, skip_locked)].objects(self.worker_id)
        return found[0] if found else None


class _Miss(Enum):
    NOTHING_FREE = "nothing free"
    FILLED = "filled meanwhile"
    ALL_LOCKED = "every free HIT locked by others"


def _try_assign(
    worker: Worker, free: _Candidates, now: datetime, *, wait: bool
) -> Assignment | _Miss | int:
    """One attempt: the assignment, why none was made, or the id of a batch out of budget."""
    try:
        return _try_assign_once(worker, free, now, wait=wait)
    except BudgetSpent as spent:
        return spent.batch_id


def _try_assign_once(
    worker: Worker, free: _Candidates, now: datetime, *, wait: bool
) -> Assignment | _Miss:
    """One transaction: resume the open work, or lock a free HIT and assign it.

    `wait`: wait for the first free HIT that others hold instead of skipping it. Only a
    fresh transaction waits, never the one whose `SKIP LOCKED` scan found every free HIT
    locked: a scan keeps the locks of rows it locked and then rejected (a concurrent
    request filled them), and two requests each waiting for a row the other kept was
    PostgreSQL's "deadlock detected" in the 50-worker race test. A waiting scan takes its
    locks in the scan's order, the same for every request, so waiters never wait crosswise.
    """
    can_skip = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        # One worker's own requests (a double click, two tabs) queue on its row, so the
        # second resumes the assignment the first one created instead of taking a HIT.
        # NO KEY UPDATE: inserting an assignment that points at the worker still works.
        locked_worker = _WORKER_LOCK.rows(worker.pk)
        if not locked_worker:
            raise Worker.DoesNotExist("Worker matching query does not exist.")  # as .get()
        if locked_worker[0][0]:  # blocked since the caller loaded it
            raise ServiceError("your account is blocked from taking new HITs")
        opened = _OPEN_WORK.objects(worker.pk)
        current = opened[0] if opened else None
        if current is not None:
            if current.deadline is None or current.deadline >= now:
                return current
            # Its own HIT ran out of time: that slot goes back to the pool. The HIT's row
            # first, then the assignment's (the lock order: see hits_lock).
            hits_lock(hit_ids=[current.hit_id])
            Assignment.objects.filter(pk=current.pk).update(status=AssignmentStatus.EXPIRED)
            hits_recount_slots(hit_ids=[current.hit_id])
        # Holding the expired HIT's row, waiting for another HIT could be crosswise.
        skip_locked = can_skip and (not wait or current is not None)
        hit = free.first_locked(skip_locked=skip_locked)
        if hit is None and skip_locked:
            # Every free HIT may be locked by a concurrent request for a moment: the next
            # try, a new transaction holding only our worker's row, waits for the first.
            return _Miss.ALL_LOCKED
        if hit is None:
            return _Miss.NOTHING_FREE
        active = _active_count(hit)
        if active < hit.max_assignments:
            budget_hold(batch=hit.batch, config=batch_config(hit.batch))
            return _assign(hit, worker, now, active)
        _SLOT_HINT_SET.execute(hit.pk, active)  # the hint was stale
        return _Miss.FILLED


def assignments_close_batch(*, batch_id: int) -> int:
    """End the open (accepted) work of a batch that stops taking answers; return how much.

    Called when annotation closes (also early, with --force) and when a batch is cancelled,
    so nobody resumes a HIT whose answers could no longer count.
    """
    return Assignment.objects.filter(
        hit__batch_id=batch_id, status=AssignmentStatus.ACCEPTED
    ).update(status=AssignmentStatus.EXPIRED)
