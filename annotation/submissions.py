"""Submitting crowd work: a whole HIT's answers, checked, stored, and decided by the
batch's golden policy (`annotation.review`).

The HIT's row is locked before its assignment's (the lock order: `handout.hits_lock`), so a
submission never waits crosswise with expiry, review or the MTurk page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import QuerySet, Subquery
from django.utils import timezone

from mitl.config import batch_config
from mitl.judgements import (
    Level,
    shortcomings_to_mask,
    validate_followups,
    wrong_concepts_to_mask,
)
from mitl.quality import golden_misses

from .errors import ServiceError, StateConflict
from .faults import fault_pause
from .goldens import goldens_suspend_failed
from .handout import hits_lock, hits_recount_slots
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    BatchState,
    Judgement,
    Worker,
)
from .pages import page_items
from .prepared import Prepared, objects_insert
from .review import assignment_golden_misses, golden_policy_apply

MAX_ELAPSED_MS = 24 * 3600 * 1000  # a day: anything longer is a broken client clock


@dataclass(frozen=True)
class AnswerInput:
    """One answer as submitted: the HIT item (or, from a worker's page, the pair's number
    there: `by_page`, `annotation.pages`) and the worker's choices."""

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
    # A repeat whose answers are not the stored ones (elapsed times aside): the stored
    # ones stand, and the caller says so (the API's 409) instead of a plain "stored".
    differs: bool = False


def assignment_submit(
    *,
    assignment: Assignment,
    answers: Sequence[AnswerInput],
    followups_required: bool | None = None,
    golden_policy: str | None = None,
    worker: Worker | None = None,
    now: datetime | None = None,
    by_page: bool = False,
) -> SubmissionResult:
    """Store a worker's answers for a whole HIT and apply the batch's golden policy.

    Every item must be answered exactly once; `by_page`: the answers name the pairs by their
    numbers on the worker's page, as the page and the API show them, not by item ids.
    `approve_or_flag` approves work that passes the golden check and flags the rest for a
    person; `approve_or_reject` rejects failed work at once; `review_all` leaves every
    submission to a person. Submitting again returns the stored result unchanged (a double
    click or a retry never duplicates), with `differs` set when the repeat's answers are not
    the stored ones.
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
            by_page=by_page,
        )
    if result is None:  # recorded as expired, committed above
        raise StateConflict(_EXPIRED)
    return result


_EXPIRED = "this assignment expired: its time limit has passed; ask for a new HIT"


def assignment_submit_own(
    *, assignment_id: int, worker: Worker, answers: Sequence[AnswerInput]
) -> SubmissionResult | None:
    """Submit `worker`'s answers for its own assignment, under the batch's settings; the
    answers name the pairs by their numbers on the worker's page (the API's `item`).

    Returns None when no such assignment is the worker's: callers answer "not found", so
    nobody learns that another worker's assignment exists. The ownership check is the lock
    itself (the HIT of the worker's own assignment), so no query comes before it.
    """
    now = timezone.now()
    with transaction.atomic():
        # One statement finds the worker's own HIT and locks it (the HIT first: hits_lock).
        if not _OWN_HIT_LOCK.rows(assignment_id, worker.pk):
            return None
        result = _submit_locked(
            assignment_id=assignment_id,
            answers=answers,
            followups_required=None,
            golden_policy=None,
            worker=worker,
            now=now,
            by_page=True,
        )
    if result is None:
        raise StateConflict(_EXPIRED)
    return result


def _own_hit_lock(assignment_id: int, worker_id: int) -> QuerySet[HIT]:
    own_hit = Assignment.objects.filter(pk=assignment_id, worker_id=worker_id).values("hit_id")
    return (
        HIT.objects.filter(pk=Subquery(own_hit[:1]))
        .select_for_update(no_key=True)
        .values_list("pk", flat=True)
    )


def _assignment_lock(assignment_id: int) -> QuerySet[Assignment]:
    # The batch comes with the locked row: its state and settings, in one query.
    return (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("hit__batch")
        .defer("hit__batch__reports", "hit__batch__mturk")  # can be large; not read here
        .filter(pk=assignment_id)
    )


# Every submission sends these two: built once (annotation.prepared).
_OWN_HIT_LOCK = Prepared(_own_hit_lock, 2)
_ASSIGNMENT_LOCK = Prepared(_assignment_lock, 1)


def _submit_locked(
    *,
    assignment_id: int,
    answers: Sequence[AnswerInput],
    followups_required: bool | None,
    golden_policy: str | None,
    worker: Worker | None,
    now: datetime,
    by_page: bool = False,
) -> SubmissionResult | None:
    """`assignment_submit` once the HIT's row is locked; None when the work just expired."""
    found = _ASSIGNMENT_LOCK.objects(assignment_id)
    if not found:
        raise Assignment.DoesNotExist("Assignment matching query does not exist.")  # as .get()
    locked = found[0]
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
        return _already_submitted(locked, answers, by_page)
    elif locked.status == AssignmentStatus.ACCEPTED:
        batch = locked.hit.batch
        if batch.state != BatchState.ANNOTATING:  # closed early, or cancelled: verdicts set
            raise StateConflict(f"this HIT's batch is {batch.state} and takes no more answers")
        config = batch_config(batch)
        if followups_required is None:
            followups_required = config.followups
        shown = page_items(
            hit_id=locked.hit_id,
            assignment=locked,
            fields=("role", "position", "golden_suspended_at"),
        )
        # Messages name a pair as its page did: by its number there (the worker's page),
        # else by the HIT's order (the offline layout's, MTurk's web UI).
        items = {
            pk: _ItemRow(
                role, position, suspended_at is not None, number if by_page else position + 1
            )
            for number, (pk, role, position, suspended_at) in enumerate(shown, start=1)
        }
        if by_page:
            answers = _answers_by_item(answers, [row[0] for row in shown])
        judgements = _build_judgements(locked, items, answers, followups_required)
        objects_insert(judgements)
        # In page order, as `review.assignment_golden_misses` reads them for MTurk's sync.
        # Suspended goldens (annotation.goldens) are answered but no longer checked.
        answered = [
            (items[j.item_id].role, items[j.item_id].position, Level(j.level))
            for j in judgements
            if not items[j.item_id].suspended
        ]
        misses = golden_misses(sorted(answered, key=lambda answer: answer[1]))
        policy = golden_policy or config.golden_policy
        golden_policy_apply(locked, misses=misses, policy=policy, now=now)
        if misses and goldens_suspend_failed(
            hit_id=locked.hit_id, now=now, policy=policy, hit=locked.hit
        ):
            # This work may have been the failure that suspended a golden: decided again.
            locked.refresh_from_db()
            misses = assignment_golden_misses(assignment_id=locked.pk)
        fault_pause("submit")  # stored, not yet committed: where the soak's kills land
        return SubmissionResult(
            assignment=locked,
            judgements=judgements,
            golden_failures=tuple(miss.describe() for miss in misses),
        )
    return None


def _already_submitted(
    locked: Assignment, answers: Sequence[AnswerInput], by_page: bool
) -> SubmissionResult:
    """What was stored the first time, and whether this repeat's answers differ from it."""
    stored = list(locked.judgements.order_by("item__position"))
    return SubmissionResult(
        assignment=locked,
        judgements=stored,
        golden_failures=tuple(
            miss.describe() for miss in assignment_golden_misses(assignment_id=locked.pk)
        ),
        created=False,
        differs=not _same_answers(stored, _repeat_by_item(locked, answers, by_page)),
    )


def _repeat_by_item(
    assignment: Assignment, answers: Sequence[AnswerInput], by_page: bool
) -> Sequence[AnswerInput]:
    """A repeat's answers by item id, as the stored ones are (none when a number is off)."""
    if not by_page:
        return answers
    shown = page_items(hit_id=assignment.hit_id, assignment=assignment)
    try:
        return _answers_by_item(answers, [row[0] for row in shown])
    except ServiceError:  # a pair not on the page: not what was stored
        return []


def _same_answers(stored: Sequence[Judgement], answers: Sequence[AnswerInput]) -> bool:
    """Whether a repeat carries the stored answers: the same level, reasons and text for
    every item. Elapsed times are left out: a client that retries may measure them again."""
    kept = {j.item_id: (j.level, j.shortcomings, j.wrong_concepts, j.other_text) for j in stored}
    try:
        sent = {
            answer.item_id: (
                answer.level,
                shortcomings_to_mask(answer.shortcomings),
                wrong_concepts_to_mask(answer.wrong_concepts),
                answer.other_text.strip(),
            )
            for answer in answers
        }
    except ValueError:  # a reason that does not exist: not what was stored
        return False
    return len(sent) == len(answers) and sent == kept


class _ItemRow(NamedTuple):
    """What a submission needs of a HIT item: golden role, HIT position, suspended golden,
    and the number messages name it by (on a worker's page: its number there, never the
    HIT position, which a replacement golden's would give away)."""

    role: str
    position: int
    suspended: bool = False
    number: int = 0


def _answers_by_item(answers: Sequence[AnswerInput], page: Sequence[int]) -> list[AnswerInput]:
    """Turn answers that name pairs by page number into answers by item id (`page`: the
    item ids in page order)."""
    unknown = sorted({a.item_id for a in answers if not 1 <= a.item_id <= len(page)})
    if unknown:
        raise ServiceError(
            f"pair {unknown[0]} is not on this HIT's page (its pairs are 1 to {len(page)})"
        )
    return [replace(answer, item_id=page[answer.item_id - 1]) for answer in answers]


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
        position = items[answer.item_id].number
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
