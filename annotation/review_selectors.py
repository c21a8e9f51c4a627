"""Reads for reviewing crowd work: the review queue and its rows, worker figures, golden
pairs that most workers fail or that were suspended."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Any

from django.db.models import Sum

from mitl.hits import page_order
from mitl.judgements import (
    LEVEL_LABELS,
    POSITIVE_LEVELS,
    SHORTCOMING_LABELS,
    WRONG_CONCEPT_LABELS,
    Level,
)
from mitl.quality import golden_answered_right

from .models import (
    Assignment,
    AssignmentStatus,
    Caption,
    HITItem,
    Image,
    ItemRole,
    Judgement,
    Worker,
    golden_checked,
    mturk_unconfirmed,
)


def review_queue(*, limit: int = 200) -> list[Assignment]:
    """Return submitted work that waits for a person: flagged first, oldest first.

    MTurk work that MTurk has not confirmed yet is left out: it cannot be approved, and it
    may be made up (see `review_awaiting_mturk`).
    """
    return list(
        Assignment.objects.filter(status=AssignmentStatus.SUBMITTED)
        .exclude(mturk_unconfirmed())
        .select_related("worker", "hit__batch")
        .order_by("-flagged", "submitted_at")[:limit]
    )


def quality_overview() -> dict[str, int]:
    """Count work waiting for a person (flagged among it), workers and blocked workers."""
    waiting = Assignment.objects.filter(status=AssignmentStatus.SUBMITTED)
    return {
        "waiting": waiting.count(),
        "flagged": waiting.filter(flagged=True).count(),
        "workers": Worker.objects.count(),
        "blocked": Worker.objects.filter(is_blocked=True).count(),
    }


def review_awaiting_mturk() -> int:
    """Count submitted MTurk work that waits for the sync to find it on MTurk."""
    return Assignment.objects.filter(mturk_unconfirmed(), status=AssignmentStatus.SUBMITTED).count()


def assignment_review_rows(*, assignment: Assignment) -> list[dict[str, Any]]:
    """Return each answer of a submission beside the golden truth, in the order the worker
    saw the pairs (`position` is the place on the worker's page)."""
    rows = []
    by_position = list(
        Judgement.objects.filter(assignment=assignment)
        .select_related("item__image", "item__caption")
        .order_by("item__position")
    )
    judgements = [by_position[i] for i in page_order(len(by_position), assignment.page_seed)]
    for shown_at, judgement in enumerate(judgements):
        item = judgement.item
        level = Level(judgement.level)
        expected = _GOLDEN_EXPECTED.get(item.role)
        if expected is not None and item.golden_suspended_at is not None:
            expected = None  # a suspended golden is not checked: see goldens_suspended
        rows.append(
            {
                "position": shown_at + 1,
                "item_id": item.pk,
                "role": item.role,
                "image": item.image,
                "caption": item.caption.text,
                "answer": LEVEL_LABELS[level],
                "expected": expected,
                "golden_ok": None if expected is None else golden_answered_right(item.role, level),
                "golden_suspended": item.golden_suspended_at is not None,
                "shortcomings": [SHORTCOMING_LABELS[n] for n in judgement.shortcoming_names],
                "wrong_concepts": [WRONG_CONCEPT_LABELS[n] for n in judgement.wrong_concept_names],
                "other_text": judgement.other_text,
                "elapsed_s": judgement.elapsed_ms / 1000,
            }
        )
    return rows


_GOLDEN_EXPECTED = {
    ItemRole.GOLDEN_TP: "a YES (known match)",
    ItemRole.GOLDEN_TN: "a NO (known mismatch)",
}


@dataclass(frozen=True)
class WorkerStats:
    worker: Worker
    submitted: int  # HITs submitted (any outcome after submission)
    approved: int
    rejected: int
    golden_accuracy: float | None  # share of golden pairs answered right
    approval_rate: float | None  # approved / (approved + rejected)
    median_hit_seconds: float | None
    verdict_agreement: float | None  # share of task answers that match the aggregated verdict


def worker_stats(*, workers: Sequence[Worker] | None = None) -> list[WorkerStats]:
    """Return quality figures per worker, from a handful of grouped queries."""
    workers = list(workers) if workers is not None else list(Worker.objects.order_by("pk"))
    ids = [w.pk for w in workers]
    done = Assignment.objects.filter(worker_id__in=ids, submitted_at__isnull=False)
    statuses: dict[int, Counter] = defaultdict(Counter)
    for worker_id, status in done.values_list("worker_id", "status"):
        statuses[worker_id][status] += 1
    hit_ms: dict[int, list[int]] = defaultdict(list)
    for row in done.values("worker_id", "pk").annotate(total=Sum("judgements__elapsed_ms")):
        hit_ms[row["worker_id"]].append(row["total"] or 0)
    golden: dict[int, list[bool]] = defaultdict(list)
    goldens = Judgement.objects.filter(
        golden_checked("item__"), assignment__worker_id__in=ids
    ).values_list("assignment__worker_id", "item__role", "level")
    for worker_id, role, level in goldens:
        golden[worker_id].append(golden_answered_right(role, Level(level)))
    agreement: dict[int, list[bool]] = defaultdict(list)
    judged = Judgement.objects.filter(
        assignment__worker_id__in=ids,
        item__role=ItemRole.TASK,
        item__candidate__verdict__isnull=False,
    ).values_list("assignment__worker_id", "level", "item__candidate__verdict__is_positive")
    for worker_id, level, positive in judged:
        agreement[worker_id].append((Level(level) in POSITIVE_LEVELS) == positive)
    result = []
    for worker in workers:
        counts = statuses[worker.pk]
        approved, rejected = counts[AssignmentStatus.APPROVED], counts[AssignmentStatus.REJECTED]
        result.append(
            WorkerStats(
                worker=worker,
                submitted=sum(counts.values()),
                approved=approved,
                rejected=rejected,
                golden_accuracy=_share(golden[worker.pk]),
                approval_rate=approved / (approved + rejected) if approved + rejected else None,
                median_hit_seconds=median(hit_ms[worker.pk]) / 1000 if hit_ms[worker.pk] else None,
                verdict_agreement=_share(agreement[worker.pk]),
            )
        )
    return result


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


@dataclass(frozen=True)
class SuspectGolden:
    batch_id: int
    role: str
    image: Image
    caption: Caption
    answers: int
    failures: int


def goldens_suspect(*, min_answers: int = 3, min_failure_share: float = 0.5) -> list[SuspectGolden]:
    """Return golden pairs that most workers get "wrong": the golden itself is likely wrong.

    A golden TN drawn outside every annotator's top-N can still be a true match, and an
    original caption can be noisy; honest workers then fail the check again and again.
    """
    tally: dict[tuple[int, str, int, int], list[bool]] = defaultdict(list)
    rows = Judgement.objects.filter(
        item__role__in=[ItemRole.GOLDEN_TP, ItemRole.GOLDEN_TN],
        assignment__submitted_at__isnull=False,
    ).values_list(
        "item__hit__batch_id", "item__role", "item__image_id", "item__caption_id", "level"
    )
    for batch_id, role, image_id, caption_id, level in rows:
        failed = not golden_answered_right(role, Level(level))
        tally[(batch_id, role, image_id, caption_id)].append(failed)
    suspects = [
        (key, len(fails), sum(fails))
        for key, fails in tally.items()
        if len(fails) >= min_answers and sum(fails) / len(fails) >= min_failure_share
    ]
    images = Image.objects.in_bulk({key[2] for key, _, _ in suspects})
    captions = Caption.objects.in_bulk({key[3] for key, _, _ in suspects})
    return sorted(
        (
            SuspectGolden(
                batch_id=batch_id,
                role=role,
                image=images[image_id],
                caption=captions[caption_id],
                answers=answers,
                failures=failures,
            )
            for (batch_id, role, image_id, caption_id), answers, failures in suspects
        ),
        key=lambda s: (-s.failures / s.answers, -s.answers),
    )


@dataclass(frozen=True)
class SuspendedGolden:
    item: HITItem  # with its HIT, image and caption
    suspended_at: datetime
    answers: int
    failures: int


def goldens_suspended(*, limit: int = 50) -> list[SuspendedGolden]:
    """Return the golden pairs suspended as likely wrong (`annotation.goldens`), newest first,
    with how many submitted answers they got and how many of those failed them: an admin
    checks the pair (and fixes the dataset's positives where it is in fact a match)."""
    items = list(
        HITItem.objects.filter(golden_suspended_at__isnull=False)
        .select_related("hit", "image", "caption")
        .order_by("-golden_suspended_at", "pk")[:limit]
    )
    tally: dict[int, list[bool]] = defaultdict(list)
    rows = Judgement.objects.filter(
        item__in=[item.pk for item in items], assignment__submitted_at__isnull=False
    ).values_list("item_id", "item__role", "level")
    for item_id, role, level in rows:
        tally[item_id].append(not golden_answered_right(role, Level(level)))
    return [
        SuspendedGolden(
            item=item,
            suspended_at=item.golden_suspended_at,
            answers=len(tally[item.pk]),
            failures=sum(tally[item.pk]),
        )
        for item in items
    ]


@dataclass(frozen=True)
class CoworkerAnswers:
    """Other workers' answers on a submission's pairs, one column per worker.

    `workers` names the columns; `by_item` maps each of the submission's items to one cell
    per column: the answer's label, or None where that worker did not judge the pair.
    """

    workers: list[str]
    by_item: dict[int, list[str | None]]


def assignment_coworker_answers(*, assignment: Assignment) -> CoworkerAnswers:
    """Return what other workers answered on the same pairs (same batch, image and caption)
    in their submitted work, any outcome."""
    pairs = {
        (image_id, caption_id): pk
        for pk, image_id, caption_id in HITItem.objects.filter(
            judgements__assignment=assignment
        ).values_list("pk", "image_id", "caption_id")
    }
    rows = (
        Judgement.objects.filter(
            item__hit__batch_id=assignment.hit.batch_id,
            item__image_id__in={image for image, _ in pairs},
            assignment__submitted_at__isnull=False,
        )
        .exclude(assignment__worker_id=assignment.worker_id)
        .values_list("assignment__worker_id", "item__image_id", "item__caption_id", "level")
        .order_by("assignment__worker_id", "pk")
    )
    answers: dict[int, dict[int, str]] = defaultdict(dict)
    for worker_id, image_id, caption_id, level in rows:
        item_id = pairs.get((image_id, caption_id))
        if item_id is not None:
            answers[worker_id][item_id] = LEVEL_LABELS[Level(level)]
    names = Worker.objects.in_bulk(list(answers))
    order = sorted(answers)
    return CoworkerAnswers(
        workers=[str(names[worker_id]) for worker_id in order],
        by_item={
            item_id: [answers[worker_id].get(item_id) for worker_id in order]
            for item_id in pairs.values()
        },
    )


def review_neighbours(*, assignment_id: int) -> tuple[int | None, int | None]:
    """Return the review queue's previous and next assignment ids around `assignment_id`;
    one not (or no longer) in the queue has none before it and the queue's first after it."""
    ids = [a.pk for a in review_queue()]
    if assignment_id not in ids:
        return None, ids[0] if ids else None
    at = ids.index(assignment_id)
    return (ids[at - 1] if at else None), (ids[at + 1] if at + 1 < len(ids) else None)
