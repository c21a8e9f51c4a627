"""Writes on crowd work: handing out HITs, expiry, submission, review and blocking.

Every function is one transaction (or a short series of them); arguments are keyword-only.
A HIT's assignments are only ever created while its row is locked, so counting them after
taking the lock is exact, even under concurrent "next HIT" requests (see `hit_assign_next`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, F, OuterRef, Subquery
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
from .services import ServiceError

MAX_ELAPSED_MS = 24 * 3600 * 1000  # a day: anything longer is a broken client clock
DEFAULT_ASSIGNMENT_MINUTES = 30
# Work that holds (or used) one of a HIT's slots; rejected and expired work frees its slot.
ACTIVE_STATUSES = (AssignmentStatus.ACCEPTED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)
_NEXT_HIT_TRIES = 25  # candidates to try when concurrent requests fill the first ones


def worker_for_user(*, user: AbstractBaseUser) -> Worker:
    """Return the platform worker of a logged-in account, creating it the first time."""
    worker, _ = Worker.objects.get_or_create(
        user=user,
        defaults={"source": WorkerSource.PLATFORM, "external_id": user.get_username()},
    )
    return worker


def assignments_expire(*, now: datetime | None = None) -> int:
    """Expire accepted work past its deadline, so its HIT goes back to the pool."""
    now = now or timezone.now()
    return Assignment.objects.filter(status=AssignmentStatus.ACCEPTED, deadline__lt=now).update(
        status=AssignmentStatus.EXPIRED
    )


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
        if _active_count(locked) >= locked.max_assignments:
            raise ServiceError(f"{locked} already has all {locked.max_assignments} assignments")
        return Assignment.objects.create(hit=locked, worker=worker, deadline=_deadline(locked, now))


def _active_count(hit: HIT) -> int:
    return Assignment.objects.filter(hit=hit, status__in=ACTIVE_STATUSES).count()


def hit_assign_next(*, worker: Worker, now: datetime | None = None) -> Assignment | None:
    """Return the worker's open assignment, or give it the next HIT with a free slot.

    Candidates are HITs of annotating batches that the worker never had, oldest batch
    first. On PostgreSQL, `SKIP LOCKED` lets concurrent requests take different HITs
    instead of queueing on the same row, and wait for a locked one only when every free
    HIT is locked at that moment; after the lock, the slot count is read again
    (a new statement sees every assignment committed meanwhile), so a HIT never gets
    more than `max_assignments`. Requests of one worker queue on its row, so a repeat
    resumes the open assignment. Returns None when no HIT is free.
    """
    if worker.is_blocked:
        raise ServiceError("your account is blocked from taking new HITs")
    now = now or timezone.now()
    assignments_expire(now=now)
    active = (
        Assignment.objects.filter(hit=OuterRef("pk"), status__in=ACTIVE_STATUSES)
        .order_by()
        .values("hit")
        .annotate(n=Count("pk"))
        .values("n")
    )
    free = (
        HIT.objects.filter(batch__state=BatchState.ANNOTATING)
        .exclude(assignments__worker=worker)
        .alias(active=Coalesce(Subquery(active), 0))
        .filter(active__lt=F("max_assignments"))
        .order_by("batch__created_at", "batch_id", "index")
    )
    skip_locked = connection.features.has_select_for_update_skip_locked
    for _ in range(_NEXT_HIT_TRIES):
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
                return current
            hit = (
                free.select_for_update(skip_locked=skip_locked, of=("self",))
                .select_related("batch")
                .first()
            )
            if hit is None and skip_locked:
                # Every free HIT may be locked by a concurrent request for a moment: wait
                # for the first one instead of saying that nothing is free. We hold only
                # our worker's row, which no holder of a HIT lock waits for: no deadlock.
                hit = free.select_for_update(of=("self",)).select_related("batch").first()
            if hit is None:
                return None
            if _active_count(hit) < hit.max_assignments:
                return Assignment.objects.create(
                    hit=hit, worker=worker, deadline=_deadline(hit, now)
                )
        # Filled by a concurrent request between our snapshot and our lock: try the next.
    return None


@dataclass(frozen=True)
class AnswerInput:
    """One answer as submitted: the HIT item and the worker's choices."""

    item_id: int
    level: str
    shortcomings: Sequence[str] = ()
    wrong_concepts: Sequence[str] = ()
    other_text: str = ""
    elapsed_ms: int = 0


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
    followups_required: bool,
    golden_policy: str = "approve_or_flag",
    worker: Worker | None = None,
    now: datetime | None = None,
) -> SubmissionResult:
    """Store a worker's answers for a whole HIT and apply the batch's golden policy.

    Every item must be answered exactly once. `approve_or_flag` approves work that passes
    the golden check and flags the rest for a person; `approve_or_reject` rejects failed
    work at once; `review_all` leaves every submission to a person. Submitting again
    returns the stored result unchanged (a double click or a retry never duplicates).
    With `worker`, only that worker's own assignment is accepted.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
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
        elif locked.status not in (AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED):
            stored = list(locked.judgements.order_by("item__position"))
            return SubmissionResult(
                assignment=locked,
                judgements=stored,
                golden_failures=_golden_failures(stored),
                created=False,
            )
        elif locked.status == AssignmentStatus.ACCEPTED:
            items = {item.pk: item for item in locked.hit.items.all()}
            judgements = _build_judgements(locked, items, answers, followups_required)
            Judgement.objects.bulk_create(judgements)
            result = golden_check(
                (items[j.item_id].role, items[j.item_id].position, Level(j.level))
                for j in judgements
            )
            _apply_golden_policy(
                locked,
                passed=result.passed,
                failures=result.failures,
                policy=golden_policy,
                now=now,
            )
            return SubmissionResult(
                assignment=locked, judgements=judgements, golden_failures=result.failures
            )
    raise ServiceError("this assignment expired: its time limit has passed; ask for a new HIT")


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


def _build_judgements(
    assignment: Assignment,
    items: dict[int, HITItem],
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


def assignment_review(
    *,
    assignment: Assignment,
    approve: bool,
    feedback: str = "",
    reviewer: AbstractBaseUser | None = None,
) -> Assignment:
    """Approve or reject a submitted assignment; a rejection reopens the slot on its HIT.

    A rejection must say why: the worker reads the feedback.
    """
    feedback = feedback.strip()
    if not approve and not feedback:
        raise ServiceError("say why the work is rejected: the worker sees this feedback")
    with transaction.atomic():
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status != AssignmentStatus.SUBMITTED:
            raise ServiceError(f"only submitted work can be reviewed (this one is {locked.status})")
        locked.status = AssignmentStatus.APPROVED if approve else AssignmentStatus.REJECTED
        locked.flagged = False
        locked.feedback = feedback
        locked.reviewed_at = timezone.now()
        locked.reviewed_by = reviewer
        locked.save(update_fields=["status", "flagged", "feedback", "reviewed_at", "reviewed_by"])
    return locked


def worker_block(*, worker: Worker, blocked: bool) -> Worker:
    """Block a worker (its open HITs go back to the pool) or unblock it."""
    with transaction.atomic():
        Worker.objects.filter(pk=worker.pk).update(is_blocked=blocked)
        if blocked:
            Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED).update(
                status=AssignmentStatus.EXPIRED
            )
    worker.refresh_from_db()
    return worker
