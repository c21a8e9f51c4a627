"""Writes on crowd work: handing out HITs, expiry, submission, review and blocking.

Every function is one transaction (or a short series of them); arguments are keyword-only.
A HIT's assignments are only ever created while its row is locked, so counting them after
taking the lock is exact, even under concurrent "next HIT" requests (see `hit_assign_next`).

Lock order, here and in `mturk_services`: a worker's row, then HIT rows (several by pk),
then the rows of their assignments. A writer that locks an assignment and then its HIT
(to recount the slot) waits crosswise with one that holds the HIT and expires an
assignment of it (the MTurk page giving a returned slot away), and PostgreSQL kills one of
them as a deadlock; see `hits_lock`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, NamedTuple

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from mitl.judgements import Level, validate_followups
from mitl.quality import golden_check

from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    BatchState,
    HITItem,
    Judgement,
    Worker,
    WorkerSource,
)
from .errors import ServiceError

MAX_ELAPSED_MS = 24 * 3600 * 1000  # a day: anything longer is a broken client clock
DEFAULT_ASSIGNMENT_MINUTES = 30
# Work that holds (or used) one of a HIT's slots; rejected and expired work frees its slot.
ACTIVE_STATUSES = (AssignmentStatus.ACCEPTED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)
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
    # The config was validated when the batch was created; older batches lack the key.
    minutes = hit.batch.config.get("assignment_minutes", DEFAULT_ASSIGNMENT_MINUTES)
    return now + timedelta(minutes=minutes)


def assignment_create(*, hit: HIT, worker: Worker, now: datetime | None = None) -> Assignment:
    """Give `hit` to `worker`, refusing a blocked worker, a repeat, or a full HIT."""
    if worker.is_blocked:
        raise ServiceError(f"worker {worker} is blocked")
    now = now or timezone.now()
    with transaction.atomic():
        locked = HIT.objects.select_for_update().select_related("batch").get(pk=hit.pk)
        if Assignment.objects.filter(hit=locked, worker=worker).exists():
            raise ServiceError(f"worker {worker} already worked on {locked}")
        active = _active_count(locked)
        if active >= locked.max_assignments:
            raise ServiceError(f"{locked} already has all {locked.max_assignments} assignments")
        return _assign(locked, worker, now, active)


def _active_count(hit: HIT) -> int:
    return Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()


def _assign(hit: HIT, worker: Worker, now: datetime, active: int) -> Assignment:
    """Create the assignment and set the slot hint; the caller holds the HIT's lock."""
    assignment = Assignment.objects.create(hit=hit, worker=worker, deadline=_deadline(hit, now))
    HIT.objects.filter(pk=hit.pk).update(active_assignments=active + 1)
    return assignment


def hit_assign_next(*, worker: Worker, now: datetime | None = None) -> Assignment | None:
    """Return the worker's open assignment, or give it the next HIT with a free slot.

    Candidates are HITs of annotating batches that the worker never had, oldest batch
    first, found through the slot hint's partial index. On PostgreSQL, `SKIP LOCKED` lets
    concurrent requests take different HITs instead of queueing on the same row, and a
    request waits for a locked one only when every free HIT is locked at that moment.
    After the lock, the slot count is read again (a new statement sees every assignment
    committed meanwhile), so a HIT never gets more than `max_assignments`; a stale hint is
    corrected on the spot. Requests of one worker queue on its row, so a repeat resumes
    the open assignment. Overdue work of others is expired when no HIT looks free (and by
    the periodic task), not on every request. Returns None when no HIT is free.
    """
    if worker.is_blocked:
        raise ServiceError("your account is blocked from taking new HITs")
    now = now or timezone.now()
    free = (
        HIT.objects.filter(
            batch__state=BatchState.ANNOTATING,
            active_assignments__lt=F("max_assignments"),
            external_id__isnull=True,  # a HIT published on MTurk is MTurk's to hand out
        )
        .exclude(assignments__worker=worker)
        .order_by("batch_id", "index")
    )
    swept = False  # other workers' overdue work is expired only when nothing looks free
    for _ in range(_NEXT_HIT_TRIES):
        outcome = _try_assign(worker, free, now)
        if isinstance(outcome, Assignment):
            return outcome
        if outcome is _Miss.NOTHING_FREE:
            if swept:
                return None
            assignments_expire(now=now)
            swept = True
        # _Miss.FILLED: a concurrent request filled it between our snapshot and our lock.
    return None


class _Miss(Enum):
    NOTHING_FREE = "nothing free"
    FILLED = "filled meanwhile"


def _try_assign(worker: Worker, free: QuerySet[HIT], now: datetime) -> Assignment | _Miss:
    skip_locked = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        # One worker's own requests (a double click, two tabs) queue on its row, so the
        # second resumes the assignment the first one created instead of taking a HIT.
        # NO KEY UPDATE: inserting an assignment that points at the worker still works.
        locked_worker = Worker.objects.select_for_update(no_key=True).get(pk=worker.pk)
        if locked_worker.is_blocked:  # blocked since the caller loaded it
            raise ServiceError("your account is blocked from taking new HITs")
        current = (
            Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED)
            .order_by("accepted_at")
            .first()
        )
        if current is not None:
            if current.deadline is None or current.deadline >= now:
                return current
            # Its own HIT ran out of time: that slot goes back to the pool. The HIT's row
            # first, then the assignment's (the lock order: see hits_lock).
            hits_lock(hit_ids=[current.hit_id])
            Assignment.objects.filter(pk=current.pk).update(status=AssignmentStatus.EXPIRED)
            hits_recount_slots(hit_ids=[current.hit_id])
        hit = (
            free.select_for_update(skip_locked=skip_locked, of=("self",))
            .select_related("batch")
            .first()
        )
        if hit is None and skip_locked and current is not None:
            # We hold the expired HIT's row now: waiting for another HIT could be crosswise.
            return _Miss.FILLED  # the next try holds no HIT and may wait
        if hit is None and skip_locked:
            # Every free HIT may be locked by a concurrent request for a moment: wait for
            # the first one instead of saying that nothing is free. We hold only our
            # worker's row, which no holder of a HIT lock waits for: no deadlock.
            hit = free.select_for_update(of=("self",)).select_related("batch").first()
        if hit is None:
            return _Miss.NOTHING_FREE
        active = _active_count(hit)
        if active < hit.max_assignments:
            return _assign(hit, worker, now, active)
        HIT.objects.filter(pk=hit.pk).update(active_assignments=active)  # the hint was stale
        return _Miss.FILLED


@dataclass(frozen=True)
class AnswerInput:
    """One answer as submitted: the HIT item and the worker's choices."""

    item_id: int
    level: str
    shortcomings: Sequence[str] = ()
    wrong_concepts: Sequence[str] = ()
    other_text: str = ""
    elapsed_ms: int = 0


def answers_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[AnswerInput]:
    """Build answers from checked rows (keys: item, level, shortcomings, wrong_concepts,
    other_text, elapsed_ms), as the API and MTurk's results both deliver them."""
    return [
        AnswerInput(
            item_id=row["item"],
            level=row["level"],
            shortcomings=row["shortcomings"],
            wrong_concepts=row["wrong_concepts"],
            other_text=row["other_text"],
            elapsed_ms=row["elapsed_ms"],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class SubmissionResult:
    assignment: Assignment
    judgements: list[Judgement]
    golden_failures: tuple[str, ...] = field(default=())
    created: bool = True  # False when the submission had already been stored


def assignment_submit(
    *,
    assignment: Assignment,
    answers: Sequence[AnswerInput],
    followups_required: bool | None = None,
    golden_policy: str | None = None,
    worker: Worker | None = None,
    now: datetime | None = None,
) -> SubmissionResult:
    """Store a worker's answers for a whole HIT and apply the batch's golden policy.

    Every item must be answered exactly once. `approve_or_flag` approves work that passes
    the golden check and flags the rest for a person; `approve_or_reject` rejects failed
    work at once; `review_all` leaves every submission to a person. Submitting again
    returns the stored result unchanged (a double click or a retry never duplicates).
    With `worker`, only that worker's own assignment is accepted. `followups_required` and
    `golden_policy` default to the batch's settings.
    """
    now = now or timezone.now()
    with transaction.atomic():
        hits_lock(hit_ids=[assignment.hit_id])  # the HIT before its assignment: see hits_lock
        result = _submit_locked(
            assignment_id=assignment.pk,
            answers=answers,
            followups_required=followups_required,
            golden_policy=golden_policy,
            worker=worker,
            now=now,
        )
    if result is None:  # recorded as expired, committed above
        raise ServiceError(_EXPIRED)
    return result


_EXPIRED = "this assignment expired: its time limit has passed; ask for a new HIT"


def assignment_submit_own(
    *, assignment_id: int, worker: Worker, answers: Sequence[AnswerInput]
) -> SubmissionResult | None:
    """Submit `worker`'s answers for its own assignment, under the batch's settings.

    Returns None when no such assignment is the worker's: callers answer "not found", so
    nobody learns that another worker's assignment exists. The ownership check is the lock
    itself (the HIT of the worker's own assignment), so no query comes before it.
    """
    now = timezone.now()
    own_hit = Assignment.objects.filter(pk=assignment_id, worker=worker).values("hit_id")[:1]
    with transaction.atomic():
        # One statement finds the worker's own HIT and locks it (the HIT first: hits_lock).
        own = HIT.objects.filter(pk=Subquery(own_hit)).select_for_update(no_key=True)
        if not own.values_list("pk", flat=True):
            return None
        result = _submit_locked(
            assignment_id=assignment_id,
            answers=answers,
            followups_required=None,
            golden_policy=None,
            worker=worker,
            now=now,
        )
    if result is None:
        raise ServiceError(_EXPIRED)
    return result


def _submit_locked(
    *,
    assignment_id: int,
    answers: Sequence[AnswerInput],
    followups_required: bool | None,
    golden_policy: str | None,
    worker: Worker | None,
    now: datetime,
) -> SubmissionResult | None:
    """`assignment_submit` once the HIT's row is locked; None when the work just expired."""
    # The batch comes with the locked row: its state and settings, in one query.
    locked = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("hit__batch")
        .get(pk=assignment_id)
    )
    if worker is not None and locked.worker_id != worker.pk:
        raise ServiceError("this assignment belongs to another worker")
    late = (
        locked.status == AssignmentStatus.ACCEPTED
        and locked.deadline is not None
        and locked.deadline < now
    )
    if late:  # recorded, then refused below, outside the transaction
        locked.status = AssignmentStatus.EXPIRED
        locked.save(update_fields=["status"])
        hits_recount_slots(hit_ids=[locked.hit_id])
    elif locked.status not in (AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED):
        stored = list(locked.judgements.order_by("item__position"))
        return SubmissionResult(
            assignment=locked,
            judgements=stored,
            golden_failures=_golden_failures(stored),
            created=False,
        )
    elif locked.status == AssignmentStatus.ACCEPTED:
        batch = locked.hit.batch
        if batch.state != BatchState.ANNOTATING:  # closed early, or cancelled: verdicts set
            raise ServiceError(f"this HIT's batch is {batch.state} and takes no more answers")
        if followups_required is None:
            followups_required = batch.config.get("followups", True)
        items = {
            pk: _ItemRow(role=role, position=position)
            for pk, role, position in HITItem.objects.filter(hit_id=locked.hit_id).values_list(
                "pk", "role", "position"
            )
        }
        judgements = _build_judgements(locked, items, answers, followups_required)
        Judgement.objects.bulk_create(judgements)
        result = golden_check(
            (items[j.item_id].role, items[j.item_id].position, Level(j.level)) for j in judgements
        )
        _apply_golden_policy(
            locked,
            passed=result.passed,
            failures=result.failures,
            policy=golden_policy or batch.config.get("golden_policy", "approve_or_flag"),
            now=now,
        )
        return SubmissionResult(
            assignment=locked, judgements=judgements, golden_failures=result.failures
        )
    return None


def _golden_failures(judgements: Sequence[Judgement]) -> tuple[str, ...]:
    items = HITItem.objects.in_bulk([j.item_id for j in judgements])
    return golden_check(
        (items[j.item_id].role, items[j.item_id].position, Level(j.level)) for j in judgements
    ).failures


def _apply_golden_policy(
    assignment: Assignment, *, passed: bool, failures: Sequence[str], policy: str, now: datetime
) -> None:
    assignment.submitted_at = now
    assignment.golden_passed = passed
    if passed and policy != "review_all":
        assignment.status = AssignmentStatus.APPROVED
        assignment.reviewed_at = now
    elif not passed and policy == "approve_or_reject":
        assignment.status = AssignmentStatus.REJECTED
        assignment.reviewed_at = now
        assignment.feedback = "Rejected automatically: " + "; ".join(failures)
    else:
        assignment.status = AssignmentStatus.SUBMITTED
        assignment.flagged = not passed
    assignment.save(
        update_fields=[
            "submitted_at",
            "golden_passed",
            "status",
            "reviewed_at",
            "flagged",
            "feedback",
        ]
    )
    if assignment.status == AssignmentStatus.REJECTED:
        hits_recount_slots(hit_ids=[assignment.hit_id])  # the slot is free again


class _ItemRow(NamedTuple):
    """What a submission needs of a HIT item: golden role and page position."""

    role: str
    position: int


def _build_judgements(
    assignment: Assignment,
    items: Mapping[int, _ItemRow],
    answers: Sequence[AnswerInput],
    followups_required: bool,
) -> list[Judgement]:
    answered = [answer.item_id for answer in answers]
    if len(set(answered)) != len(answered):
        raise ServiceError("an item was answered twice")
    foreign = sorted(set(answered) - set(items))
    if foreign:
        raise ServiceError(f"item {foreign[0]} does not belong to this HIT")
    missing = sorted(set(items) - set(answered))
    if missing:
        raise ServiceError(f"{len(missing)} of {len(items)} pairs are not answered")
    judgements = []
    for answer in answers:
        position = items[answer.item_id].position + 1
        try:
            level = Level(answer.level)
            shortcomings, concepts = validate_followups(
                level=level,
                shortcomings=answer.shortcomings,
                wrong_concepts=answer.wrong_concepts,
                other_text=answer.other_text,
                required=followups_required,
            )
        except ValueError as exc:
            raise ServiceError(f"pair {position}: {exc}") from exc
        if not 0 <= answer.elapsed_ms <= MAX_ELAPSED_MS:
            raise ServiceError(
                f"pair {position}: elapsed time must be between 0 and {MAX_ELAPSED_MS} ms "
                f"(got {answer.elapsed_ms})"
            )
        judgements.append(
            Judgement(
                assignment=assignment,
                item_id=answer.item_id,
                level=level.value,
                shortcomings=shortcomings,
                wrong_concepts=concepts,
                other_text=answer.other_text.strip(),
                elapsed_ms=answer.elapsed_ms,
            )
        )
    return judgements


_UNCONFIRMED = (
    "MTurk has not confirmed assignment {aid} yet: the HIT page is public and anyone can make "
    "up its ids, so it cannot be approved until MTurk lists it. Run `mturk_sync {batch}` "
    "first (or “Sync now” on the batch's MTurk page); work that MTurk never lists is rejected "
    "by the sync."
)


def assignment_review(
    *,
    assignment: Assignment,
    approve: bool,
    feedback: str = "",
    reviewer: AbstractBaseUser | None = None,
) -> Assignment:
    """Approve or reject a submitted assignment; a rejection reopens the slot on its HIT.

    A rejection must say why: the worker reads the feedback. MTurk work that MTurk has not
    confirmed yet (`Assignment.awaits_mturk`) can be rejected but never approved.
    """
    feedback = feedback.strip()
    if not approve and not feedback:
        raise ServiceError("say why the work is rejected: the worker sees this feedback")
    with transaction.atomic():
        hits_lock(hit_ids=[assignment.hit_id])  # before the assignment: see hits_lock
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status != AssignmentStatus.SUBMITTED:
            raise ServiceError(f"only submitted work can be reviewed (this one is {locked.status})")
        if approve and locked.awaits_mturk:
            raise ServiceError(
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


def assignments_close_batch(*, batch_id: int) -> int:
    """End the open (accepted) work of a batch that stops taking answers; return how much.

    Called when annotation closes (also early, with --force) and when a batch is cancelled,
    so nobody resumes a HIT whose answers could no longer count.
    """
    return Assignment.objects.filter(
        hit__batch_id=batch_id, status=AssignmentStatus.ACCEPTED
    ).update(status=AssignmentStatus.EXPIRED)


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
