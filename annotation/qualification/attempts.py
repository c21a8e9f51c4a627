"""A batch's qualification round: a worker's standing, tries, and answers with feedback.

A batch whose config sets `qualification_pairs` above 0 hands its HITs to a platform or
simulated worker only after the worker passes this short round of pairs with known
answers (the gate below, which the hand-out asks). Unlike a HIT's golden pairs, these are
practice: the worker reads, after every answer, whether it was right, the right answer
and why. So each try draws its own pairs from the round's pool
(`annotation.qualification.pairs`), none that an earlier try of the worker showed, in an
order of its own (`mitl.qualification.qualification_try_draw`): a second try cannot be
passed by replaying the first one's feedback.

MTurk workers are kept out by MTurk itself, through the QualificationRequirement the
batch's HIT type carries (`annotation.mturk.qualification`: they take the same test as an
MTurk QualificationType), so the gate never refuses them (the MTurk page creates their
assignments through `handout.assignment_create` too).

Lock order (see annotation/handout.py): the worker's row first, then the batch's row or
the try's row.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import (
    Batch,
    BatchState,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
    Worker,
    WorkerSource,
)
from mitl.config import batch_config
from mitl.judgements import Level
from mitl.qualification import (
    PLAIN_NOTE,
    QualificationStatus,
    qualification_answer_right,
    qualification_passed,
    qualification_state,
    qualification_try_draw,
)

_ELAPSED_MAX = 2**31 - 1
_DRAWS = random.SystemRandom()  # a worker cannot foresee a try's pairs or their order


@dataclass(frozen=True)
class AnswerFeedback:
    """What a worker reads after answering one pair of the round."""

    correct: bool
    expected_positive: bool
    note: str
    answered: int
    correct_count: int
    total: int
    finished: bool
    passed: bool | None  # None until the try is finished


@dataclass(frozen=True)
class QualificationProgress:
    """Where a worker stands with a batch's round, with its tries counted."""

    status: QualificationStatus
    attempts_used: int  # tries started, the one in progress included
    attempts_allowed: int
    in_progress: QualificationAttempt | None

    @property
    def attempts_left(self) -> int:
        return max(0, self.attempts_allowed - self.attempts_used)


# --- the hand-out's gate ---------------------------------------------------------------------


def qualification_gates(worker: Worker) -> bool:
    """Say whether the platform checks this worker's qualification (all but MTurk workers)."""
    return worker.source != WorkerSource.MTURK


def batches_closed_to(*, worker_id: int) -> QuerySet[Batch]:
    """The ids of batches with a qualification round that the worker has not passed.

    A batch has a round when its config sets `qualification_pairs` above 0 (read in the
    query: a config without the key has none), so the hand-out can leave such batches out
    in the same statement that finds a free HIT.
    """
    passed = QualificationAttempt.objects.filter(worker_id=worker_id, passed=True)
    passed = passed.values("batch_id")
    return (
        Batch.objects.filter(config__qualification_pairs__gt=0).exclude(pk__in=passed).values("pk")
    )


def qualification_missing(*, worker: Worker, batch: Batch) -> bool:
    """Say whether `batch`'s round keeps `worker` from its HITs (not passed yet)."""
    if not qualification_gates(worker) or not batch_config(batch).qualification_required:
        return False
    return not QualificationAttempt.objects.filter(worker=worker, batch=batch, passed=True).exists()


# --- a worker's standing and tries ----------------------------------------------------------


def qualification_progress(*, worker: Worker, batch: Batch) -> QualificationProgress:
    """Return where `worker` stands with `batch`'s round, and its tries."""
    config = batch_config(batch)
    attempts = list(
        QualificationAttempt.objects.filter(batch_id=batch.pk, worker_id=worker.pk).order_by(
            "number"
        )
    )
    in_progress = next((a for a in attempts if a.finished_at is None), None)
    status = qualification_state(
        required=config.qualification_required,
        passed=any(a.passed for a in attempts),
        in_progress=in_progress is not None,
        finished=sum(a.finished_at is not None for a in attempts),
        allowed=config.qualification_attempts,
    )
    return QualificationProgress(
        status=status,
        attempts_used=len(attempts),
        attempts_allowed=config.qualification_attempts,
        in_progress=in_progress,
    )


def qualification_status(*, worker: Worker, batch: Batch) -> QualificationStatus:
    """Say where `worker` stands with `batch`'s round: not required, qualified, open, failed."""
    return qualification_progress(worker=worker, batch=batch).status


def qualification_attempt_open(*, batch: Batch, worker: Worker) -> QualificationAttempt:
    """Return the worker's try in progress, or start its next one while it has tries left.

    A new try draws `qualification_pairs` pairs of the pool that no earlier try of the
    worker showed (MTurk's test pairs never), with the round's mix, in a random order.
    Refused for a blocked worker, one who passed already or has no tries left, and for a
    batch without a round, without pairs yet, with no fresh pairs left for the try (a pool
    from before pools: `batch_qualification BATCH --draw` fills it), or not taking answers.
    The worker's row is locked first, so two tabs never start two tries.
    """
    with transaction.atomic():
        locked_worker = Worker.objects.select_for_update(no_key=True).get(pk=worker.pk)
        if locked_worker.is_blocked:
            raise ServiceError("your account is blocked from taking new HITs")
        # After the worker's row (the lock order); an admin replacing the pairs waits.
        locked = Batch.objects.select_for_update(no_key=True).get(pk=batch.pk)
        config = batch_config(locked)
        if not config.qualification_required:
            raise ServiceError(f"batch {batch.pk} has no qualification round: no test needed")
        if locked.state != BatchState.ANNOTATING:
            raise ServiceError(
                f"batch {batch.pk} is {locked.state}, not taking answers: its qualification "
                "round is closed"
            )
        if not QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=False).exists():
            raise ServiceError(
                f"batch {batch.pk} has no qualification pairs yet; an admin draws them "
                f"(python manage.py batch_qualification {batch.pk} --draw)"
            )
        attempts = list(QualificationAttempt.objects.filter(batch_id=batch.pk, worker_id=worker.pk))
        if any(a.passed for a in attempts):
            raise ServiceError(
                f"you passed the qualification round of batch {batch.pk} already: "
                "its HITs are open to you"
            )
        in_progress = next((a for a in attempts if a.finished_at is None), None)
        if in_progress is not None:
            return in_progress
        if len(attempts) >= config.qualification_attempts:
            raise ServiceError(
                f"you did not pass the qualification round of batch {batch.pk} and have no "
                f"tries left (of {config.qualification_attempts}): its HITs stay closed to you"
            )
        number = max((a.number for a in attempts), default=0) + 1
        pair_ids = _try_draw(batch.pk, config.qualification_pairs, attempts)
        if pair_ids is None:
            raise ServiceError(
                f"batch {batch.pk}'s qualification pool has no fresh pairs left for your try "
                f"{number}; an admin fills it (python manage.py batch_qualification "
                f"{batch.pk} --draw)"
            )
        return QualificationAttempt.objects.create(
            batch_id=batch.pk, worker_id=worker.pk, number=number, pair_ids=pair_ids
        )


def _try_draw(batch_id: int, pairs: int, earlier: list[QualificationAttempt]) -> list[int] | None:
    """Draw a try's pair ids from the pool, leaving out what the earlier tries showed."""
    shown = {pair_id for attempt in earlier for pair_id in attempt.pair_ids}
    fresh = (
        QualificationPair.objects.filter(batch_id=batch_id, mturk_test=False)
        .exclude(pk__in=shown)
        .order_by("pk")
        .values_list("pk", "positive")
    )
    matches = [pk for pk, positive in fresh if positive]
    mismatches = [pk for pk, positive in fresh if not positive]
    return qualification_try_draw(matches=matches, mismatches=mismatches, pairs=pairs, rng=_DRAWS)


def qualification_pair_next(*, attempt: QualificationAttempt) -> QualificationPair | None:
    """Return the try's next unanswered pair in the try's order; None once all are answered."""
    if attempt.finished_at is not None:
        return None
    answered = set(
        QualificationAnswer.objects.filter(attempt=attempt).values_list("pair_id", flat=True)
    )
    next_id = next((pk for pk in attempt.pair_ids if pk not in answered), None)
    if next_id is None:
        return None
    return QualificationPair.objects.select_related("image", "caption").get(pk=next_id)


def qualification_answer_record(
    *, attempt: QualificationAttempt, pair_id: int, level: str, elapsed_ms: int = 0
) -> AnswerFeedback:
    """Store the worker's answer to one pair of its try and return the feedback it reads.

    Only a pair of this try is taken. Right or wrong as a golden pair is checked (a YES
    level for a matching pair, a NO level for one that does not match). The answer to the
    try's last pair finishes the try:
    passed when right answers / pairs reach `qualification_pass` (exactly). Answering a pair
    again (a reload, a second tab) stores nothing and returns the first answer's feedback.
    `attempt` is updated in place.
    """
    try:
        given = Level(level)
    except ValueError:
        choices = ", ".join(item.value for item in Level)
        raise ServiceError(
            f"unknown answer {level!r} (answers: {choices})", field="level"
        ) from None
    with transaction.atomic():
        Worker.objects.select_for_update(no_key=True).get(pk=attempt.worker_id)
        locked = QualificationAttempt.objects.select_for_update().get(pk=attempt.pk)
        pair = QualificationPair.objects.filter(pk=pair_id, batch_id=locked.batch_id).first()
        if pair is None or pair.pk not in locked.pair_ids:
            raise ServiceError(
                f"pair {pair_id} is not in your try {locked.number} of the qualification round "
                f"of batch {locked.batch_id}"
            )
        total = len(locked.pair_ids)
        stored = QualificationAnswer.objects.filter(attempt=locked, pair=pair).first()
        if stored is None:
            if locked.finished_at is not None:
                raise ServiceError(
                    f"try {locked.number} of the qualification round is over; "
                    "start another one from the My work page if you have tries left"
                )
            right = qualification_answer_right(pair.positive, given)
            QualificationAnswer.objects.create(
                attempt=locked,
                pair=pair,
                level=given.value,
                correct=right,
                elapsed_ms=min(max(int(elapsed_ms), 0), _ELAPSED_MAX),
            )
            locked.answered += 1
            locked.correct += right
            fields = ["answered", "correct"]
            if locked.answered >= total:
                config = batch_config(Batch.objects.get(pk=locked.batch_id))
                locked.finished_at = timezone.now()
                locked.passed = qualification_passed(
                    locked.correct, total, config.qualification_pass
                )
                fields += ["finished_at", "passed"]
            locked.save(update_fields=fields)
            stored_correct = right
        else:
            stored_correct = stored.correct
    for name in ("answered", "correct", "finished_at", "passed"):
        setattr(attempt, name, getattr(locked, name))
    return _feedback(locked, pair, stored_correct, total)


def qualification_answer_feedback(
    *, attempt: QualificationAttempt, pair_id: int
) -> AnswerFeedback | None:
    """Return the feedback of the try's answer to a pair (as first given); None if unanswered."""
    stored = (
        QualificationAnswer.objects.filter(attempt=attempt, pair_id=pair_id)
        .select_related("pair")
        .first()
    )
    if stored is None:
        return None
    return _feedback(attempt, stored.pair, stored.correct, len(attempt.pair_ids))


def _feedback(
    attempt: QualificationAttempt, pair: QualificationPair, correct: bool, total: int
) -> AnswerFeedback:
    return AnswerFeedback(
        correct=correct,
        expected_positive=pair.positive,
        note=pair.note or PLAIN_NOTE[pair.positive],
        answered=attempt.answered,
        correct_count=attempt.correct,
        total=total,
        finished=attempt.finished_at is not None,
        passed=attempt.passed,
    )
