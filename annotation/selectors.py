"""Reads that are more than a one-line query."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from django.db.models import Sum
from django.urls import reverse

from mitl.judgements import (
    LEVEL_LABELS,
    POSITIVE_LEVELS,
    SHORTCOMING_LABELS,
    WRONG_CONCEPT_LABELS,
    Level,
)

from .models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Caption,
    HITItem,
    Image,
    ItemRole,
    Judgement,
    Worker,
    mturk_unconfirmed,
)

PIPELINE_STAGES: tuple[str, ...] = (
    BatchState.RETRIEVING,
    BatchState.POOLING,
    BatchState.BUILDING,
    BatchState.ANNOTATING,
    BatchState.AGGREGATING,
)


def batch_progress(*, batch: Batch) -> list[dict[str, Any]]:
    """Return done/total per pipeline stage, in pipeline order (missing stages as 0/0)."""
    rows = {row.stage: row for row in batch.progress.all()}
    result = []
    for stage in PIPELINE_STAGES:
        row = rows.get(stage)
        result.append(
            {
                "stage": str(stage),
                "done": row.done if row else 0,
                "total": row.total if row else 0,
                "finished": bool(row and row.finished_at),
            }
        )
    return result


def diversity_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten a diversity report into table rows: direction, annotator pair and figures."""
    rows = []
    for direction, by_pair in sorted(report.items()):
        for pair in by_pair.get("pairs", []):
            rows.append({"direction": direction, **pair})
    return rows


def assignment_page(*, assignment: Assignment) -> dict[str, Any]:
    """Return what the HIT page shows: the pairs in order, without their roles.

    Golden pairs must look exactly like the others, so nothing here tells them apart.
    """
    # Plain rows, not model instances: every "next HIT" builds this page.
    items = (
        HITItem.objects.filter(hit_id=assignment.hit_id)
        .order_by("position")
        .values_list("pk", "position", "image__file", "caption__text")
    )
    return {
        "followups": assignment.hit.batch.config.get("followups", True),
        "items": [
            {
                "id": pk,
                "position": position,
                "image_url": reverse("frontend:item-image", args=[assignment.pk, pk])
                if image_file
                else None,
                "caption": caption,
            }
            for pk, position, image_file, caption in items
        ],
    }


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


def review_awaiting_mturk() -> int:
    """Count submitted MTurk work that waits for the sync to find it on MTurk."""
    return Assignment.objects.filter(mturk_unconfirmed(), status=AssignmentStatus.SUBMITTED).count()


def assignment_review_rows(*, assignment: Assignment) -> list[dict[str, Any]]:
    """Return each answer of a submission beside the golden truth, in page order."""
    rows = []
    judgements = (
        Judgement.objects.filter(assignment=assignment)
        .select_related("item__image", "item__caption")
        .order_by("item__position")
    )
    for judgement in judgements:
        item = judgement.item
        level = Level(judgement.level)
        expected = _GOLDEN_EXPECTED.get(item.role)
        rows.append(
            {
                "position": item.position + 1,
                "item_id": item.pk,
                "role": item.role,
                "image": item.image,
                "caption": item.caption.text,
                "answer": LEVEL_LABELS[level],
                "expected": expected,
                "golden_ok": None
                if expected is None
                else (level in POSITIVE_LEVELS) == (item.role == ItemRole.GOLDEN_TP),
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
        assignment__worker_id__in=ids,
        item__role__in=[ItemRole.GOLDEN_TP, ItemRole.GOLDEN_TN],
    ).values_list("assignment__worker_id", "item__role", "level")
    for worker_id, role, level in goldens:
        golden[worker_id].append((Level(level) in POSITIVE_LEVELS) == (role == ItemRole.GOLDEN_TP))
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
        failed = (Level(level) in POSITIVE_LEVELS) != (role == ItemRole.GOLDEN_TP)
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
