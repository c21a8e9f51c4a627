"""A batch's qualification round: its pairs, a worker's tries, and the answers with feedback.

A batch whose config sets `qualification_pairs` above 0 hands its HITs to a platform or
simulated worker only after the worker passes this short round of pairs with known
answers (`annotation.qualification_gate`; MTurk workers take the same test as an MTurk
QualificationType). The pairs are drawn as golden pairs are drawn (half original pairs,
half pairs outside every annotator's top ranks), never one shown on the batch's HIT pages,
or chosen by an admin. Unlike a HIT's golden pairs, these are practice: the worker reads,
after every answer, whether it was right, the right answer and why.

Lock order (see annotation/handout.py): the worker's row first, then the batch's row or
the try's row.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.utils import timezone

from mitl.config import BatchConfig, batch_config
from mitl.hits import ItemSpec, PackingError, Role, golden_replacement
from mitl.judgements import Level
from mitl.qualification import (
    NEGATIVE_NOTE,
    PLAIN_NOTE,
    POSITIVE_NOTE,
    QualificationStatus,
    qualification_answer_right,
    qualification_mix,
    qualification_passed,
    qualification_state,
)

from .errors import ServiceError
from .goldens import golden_pool
from .models import (
    HIT,
    Batch,
    BatchState,
    Caption,
    HITItem,
    Image,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
    QualificationSource,
    Worker,
)

__all__ = [
    "AnswerFeedback",
    "QualificationPairError",
    "QualificationPairInput",
    "QualificationProgress",
    "QualificationStatus",
    "qualification_answer_feedback",
    "qualification_answer_record",
    "qualification_attempt_open",
    "qualification_pair_next",
    "qualification_pairs_draw",
    "qualification_pairs_parse",
    "qualification_pairs_set",
    "qualification_progress",
    "qualification_status",
]

# Mixed into the batch seed, so the round's draws differ from the HITs' golden draws.
_SEED_TAG = 0x5155_414C  # "QUAL"
MAX_PAIRS = 50  # as `qualification_pairs` allows (mitl.config)
_ELAPSED_MAX = 2**31 - 1


@dataclass(frozen=True)
class QualificationPairInput:
    """A pair an admin chose, by the dataset's own ids, with its known answer."""

    image_ext_id: int
    caption_ext_id: int
    positive: bool
    note: str = ""


class QualificationPairError(ServiceError):
    """An admin's pair that cannot go into the round; `index` is its place in the input."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"pair {index + 1}: {reason}", field="pairs")
        self.index = index
        self.reason = reason


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


# --- the pairs ------------------------------------------------------------------------------


def qualification_pairs_draw(*, batch: Batch) -> int:
    """Draw the round's pairs once, as golden pairs are drawn; return how many (0 if any exist).

    About half are golden true positives (original pairs), half golden true negatives (for
    one of the batch's queries, outside every annotator's top `golden_negative_depth`),
    none shown on a HIT page of the batch, so the round never gives away a real HIT's
    golden or task pair. Seeded from the batch seed; positions shuffled. A batch without a
    round gets none. Called when the HITs are built; an adaptive batch's later rounds keep
    the pairs of its first.
    """
    config = batch_config(batch)
    if not config.qualification_required:
        return 0
    with transaction.atomic():
        Batch.objects.select_for_update().get(pk=batch.pk)  # one draw at a time
        if QualificationPair.objects.filter(batch_id=batch.pk).exists():
            return 0
        if not HIT.objects.filter(batch_id=batch.pk).exists():
            raise ServiceError(
                f"batch {batch.pk} has no HITs yet: its qualification pairs are drawn once "
                f"its HITs are built (batch_run {batch.pk} --until annotating)"
            )
        on_page = set(
            HITItem.objects.filter(hit__batch_id=batch.pk).values_list("image_id", "caption_id")
        )
        drawn = _round_draw(batch, config, on_page)
        positions = np.random.default_rng([config.seed, _SEED_TAG]).permutation(len(drawn))
        QualificationPair.objects.bulk_create(
            [
                QualificationPair(
                    batch_id=batch.pk,
                    position=int(position),
                    image_id=spec.image_id,
                    caption_id=spec.caption_id,
                    positive=spec.role == Role.GOLDEN_TP,
                    source=QualificationSource.GOLDEN,
                    note=POSITIVE_NOTE if spec.role == Role.GOLDEN_TP else NEGATIVE_NOTE,
                )
                for position, spec in zip(positions, drawn, strict=True)
            ]
        )
    return len(drawn)


def _round_draw(batch: Batch, config: BatchConfig, on_page: set[tuple[int, int]]) -> list[ItemSpec]:
    """Draw the round's matches, then its mismatches, as goldens are drawn, off `on_page`."""
    pool = golden_pool(batch_id=batch.pk, dataset_id=batch.dataset_id)
    queries = sorted(pool.negatives)
    matches, _ = qualification_mix(config.qualification_pairs)
    drawn = []
    for index in range(config.qualification_pairs):
        role = Role.GOLDEN_TP if index < matches else Role.GOLDEN_TN
        try:
            drawn.append(
                golden_replacement(
                    role,
                    pool=pool,
                    queries=queries,
                    on_page=on_page,  # the draw adds its pair: no pair twice
                    seed=[config.seed, _SEED_TAG, index],
                )
            )
        except PackingError as exc:
            raise ServiceError(
                f"batch {batch.pk}: cannot draw {config.qualification_pairs} qualification "
                f"pairs ({exc}); choose them instead: "
                f"python manage.py batch_qualification {batch.pk} --pairs FILE.csv"
            ) from exc
    return drawn


def qualification_pairs_set(*, batch: Batch, pairs: Sequence[QualificationPairInput]) -> int:
    """Make `pairs` the batch's round, in their order, in place of the pairs it had.

    Refused once a worker has started the round (its answers point at the pairs) or HITs on
    MTurk require MTurk's test of them (it shows their images), for a
    batch without a round or without HITs yet (the pairs are checked against their pages),
    and for a pair that names an image or caption the dataset lacks,
    an invalid caption, a pair twice, or a pair on a HIT page of the batch (the round must
    not give a real HIT's pair away). Returns how many pairs the round now has.
    """
    if not batch_config(batch).qualification_required:
        raise ServiceError(
            f"batch {batch.pk} has no qualification round: its config sets qualification_pairs "
            "to 0 (create a batch whose config asks for one)"
        )
    if not HIT.objects.filter(batch_id=batch.pk).exists():
        raise ServiceError(
            f"batch {batch.pk} has no HITs yet: choose its qualification pairs once they are "
            f"built (batch_run {batch.pk} --until annotating), so that no pair is on a HIT page"
        )
    if not pairs:
        raise ServiceError("give at least one qualification pair", field="pairs")
    if len(pairs) > MAX_PAIRS:
        raise ServiceError(
            f"a qualification round has at most {MAX_PAIRS} pairs (got {len(pairs)})",
            field="pairs",
        )
    rows = _admin_pairs_check(batch, pairs)
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)  # no try starts meanwhile
        started = QualificationAttempt.objects.filter(batch_id=batch.pk).count()
        if started:
            raise ServiceError(
                f"batch {batch.pk}: its qualification round has started ({started} tries so "
                "far); its pairs can no longer change (the answers point at them)"
            )
        if _mturk_test_live(locked):
            raise ServiceError(
                f"batch {batch.pk}: its HITs on MTurk require the qualification test made of "
                "these pairs (the test shows their images); its pairs can no longer change"
            )
        QualificationPair.objects.filter(batch_id=batch.pk).delete()
        QualificationPair.objects.bulk_create(rows)
    return len(rows)


def _mturk_test_live(batch: Batch) -> bool:
    """Say whether HITs of the batch on MTurk require MTurk's test of the round's pairs.

    That test links to the pairs' images (annotation.mturk.qualification keeps its type in
    `Batch.mturk["qualification"][environment]`): replacing the pairs would break it.
    """
    state = batch.mturk or {}
    environment = state.get("environment")
    stored = state.get("qualification", {}).get(environment) if environment else None
    return bool(
        stored
        and stored.get("mode") == "test"
        and HIT.objects.filter(batch_id=batch.pk, external_id__isnull=False).exists()
    )


def _admin_pairs_check(
    batch: Batch, pairs: Sequence[QualificationPairInput]
) -> list[QualificationPair]:
    """Check each admin pair against the batch's dataset; return the rows to store."""
    dataset = batch.dataset_id
    images = dict(
        Image.objects.filter(
            dataset_id=dataset, ext_id__in={p.image_ext_id for p in pairs}
        ).values_list("ext_id", "pk")
    )
    captions = {
        ext_id: (pk, invalid)
        for ext_id, pk, invalid in Caption.objects.filter(
            dataset_id=dataset, ext_id__in={p.caption_ext_id for p in pairs}
        ).values_list("ext_id", "pk", "is_invalid")
    }
    on_page = set(
        HITItem.objects.filter(hit__batch_id=batch.pk).values_list("image_id", "caption_id")
    )
    seen: dict[tuple[int, int], int] = {}
    rows = []
    for index, pair in enumerate(pairs):
        named = f"image {pair.image_ext_id} with caption {pair.caption_ext_id}"
        if pair.image_ext_id not in images:
            raise QualificationPairError(
                index, f"the batch's dataset has no image {pair.image_ext_id}"
            )
        if pair.caption_ext_id not in captions:
            raise QualificationPairError(
                index, f"the batch's dataset has no caption {pair.caption_ext_id}"
            )
        caption_pk, invalid = captions[pair.caption_ext_id]
        if invalid:
            raise QualificationPairError(
                index, f"caption {pair.caption_ext_id} is marked invalid; choose a valid caption"
            )
        key = (images[pair.image_ext_id], caption_pk)
        if key in seen:
            raise QualificationPairError(index, f"{named} is pair {seen[key] + 1} already")
        if key in on_page:
            raise QualificationPairError(
                index,
                f"{named} is on a HIT page of batch {batch.pk}; the round must not show a "
                "real HIT's pair (choose another)",
            )
        seen[key] = index
        rows.append(
            QualificationPair(
                batch_id=batch.pk,
                position=index,
                image_id=key[0],
                caption_id=key[1],
                positive=pair.positive,
                source=QualificationSource.ADMIN,
                note=pair.note.strip(),
            )
        )
    return rows


def qualification_pairs_parse(
    lines: Iterable[str],
) -> tuple[list[QualificationPairInput], list[int]]:
    """Read admin pairs from CSV text: `image_id,caption_id,answer[,note]`, answer yes or no.

    Returns the pairs and, for each, its line in the file (for error messages). Blank lines
    are skipped. Raises ServiceError naming the line of the first bad row.
    """
    reader = csv.DictReader(lines)
    header = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in ("image_id", "caption_id", "answer") if name not in header]
    if missing:
        raise ServiceError(
            f"line 1: the header must name image_id,caption_id,answer[,note] "
            f"(missing: {', '.join(missing)})"
        )
    reader.fieldnames = header
    pairs, line_numbers = [], []
    for row in reader:
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        line = reader.line_num
        try:
            image_id = int(row["image_id"].strip())
            caption_id = int(row["caption_id"].strip())
        except (AttributeError, ValueError):
            raise ServiceError(
                f"line {line}: image_id and caption_id must be whole numbers "
                f"(got {row['image_id']!r}, {row['caption_id']!r})"
            ) from None
        answer = (row["answer"] or "").strip().lower()
        if answer not in ("yes", "no"):
            raise ServiceError(f"line {line}: answer must be yes or no (got {row['answer']!r})")
        note = (row.get("note") or "").strip()
        pairs.append(QualificationPairInput(image_id, caption_id, answer == "yes", note))
        line_numbers.append(line)
    return pairs, line_numbers


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

    Refused for a blocked worker, one who passed already or has no tries left, and for a
    batch without a round, without pairs yet, or not taking answers. The worker's row is
    locked first, so two tabs never start two tries.
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
        if not QualificationPair.objects.filter(batch_id=batch.pk).exists():
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
        return QualificationAttempt.objects.create(
            batch_id=batch.pk, worker_id=worker.pk, number=number
        )


def qualification_pair_next(*, attempt: QualificationAttempt) -> QualificationPair | None:
    """Return the try's next unanswered pair in the round's order; None once all are answered."""
    if attempt.finished_at is not None:
        return None
    return (
        QualificationPair.objects.filter(batch_id=attempt.batch_id)
        .exclude(pk__in=QualificationAnswer.objects.filter(attempt=attempt).values("pair_id"))
        .select_related("image", "caption")
        .order_by("position")
        .first()
    )


def qualification_answer_record(
    *, attempt: QualificationAttempt, pair_id: int, level: str, elapsed_ms: int = 0
) -> AnswerFeedback:
    """Store the worker's answer to one pair of its try and return the feedback it reads.

    Right or wrong as a golden pair is checked (a YES level for a matching pair, a NO level
    for one that does not match). The answer to the try's last pair finishes the try:
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
        if pair is None:
            raise ServiceError(
                f"pair {pair_id} is not in the qualification round of batch {locked.batch_id}"
            )
        total = QualificationPair.objects.filter(batch_id=locked.batch_id).count()
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
    total = QualificationPair.objects.filter(batch_id=attempt.batch_id).count()
    return _feedback(attempt, stored.pair, stored.correct, total)


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
