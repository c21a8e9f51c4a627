"""Aggregating stage: verdicts per candidate and the batch's human-verified positive set."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from django.db import transaction

from annotation.models import (
    AssignmentStatus,
    Batch,
    Candidate,
    ItemRole,
    Judgement,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Verdict,
    golden_checked,
    mturk_unconfirmed,
)
from mitl.aggregation import WorkerAnswer, aggregate
from mitl.config import BatchConfig
from mitl.judgements import Level

from .progress import StageTracker


@dataclass(frozen=True)
class AggregationSummary:
    verdicts: int
    positives: int
    unjudged: int  # candidates without any approved judgement


def human_set_name(batch: Batch) -> str:
    return f"human-batch-{batch.pk}"


def verdicts_aggregate(
    *, batch: Batch, config: BatchConfig, tracker: StageTracker
) -> AggregationSummary:
    """(Re)compute every verdict of the batch from approved work, in one transaction.

    The batch's rule decides (`mitl.aggregation.RULES`). Dawid-Skene also reads the golden
    answers of every submitted assignment, approved or not, as known labels: they are the
    evidence of how reliable each worker is. MTurk work that MTurk has not confirmed never
    counts, approved or not: the public HIT page may have stored it under made-up ids.
    """
    answers = [
        WorkerAnswer(task=candidate_id, worker=str(worker_id), level=Level(level))
        for candidate_id, worker_id, level in Judgement.objects.filter(
            assignment__hit__batch=batch,
            assignment__status=AssignmentStatus.APPROVED,
            item__role=ItemRole.TASK,
        )
        .exclude(mturk_unconfirmed("assignment__"))
        .values_list("item__candidate_id", "assignment__worker_id", "level")
    ]
    known: dict[Hashable, bool] = {}
    if config.aggregation == "dawid_skene":
        answers += _golden_answers(batch, known)
    pairs = dict(
        (pk, (image_id, caption_id))
        for pk, image_id, caption_id in Candidate.objects.filter(batch=batch).values_list(
            "pk", "image_id", "caption_id"
        )
    )
    tracker.start(len(pairs))
    verdicts = [
        Verdict(
            candidate_id=candidate_id,
            rule=config.aggregation,
            is_positive=spec.is_positive,
            score=spec.score,
            confidence=spec.confidence,
            n_judgements=sum(spec.distribution.values()),
            distribution=spec.distribution,
        )
        for candidate_id, spec in aggregate(config.aggregation, answers, known=known).items()
    ]
    positives = sorted(pairs[v.candidate_id] for v in verdicts if v.is_positive)
    with transaction.atomic():
        Verdict.objects.filter(candidate__batch=batch).delete()
        Verdict.objects.bulk_create(verdicts, batch_size=5000)
        human, _ = PositiveSet.objects.get_or_create(
            dataset_id=batch.dataset_id,
            name=human_set_name(batch),
            defaults={
                "source": PositiveSource.HUMAN,
                "description": (
                    f"Pairs judged positive in batch {batch.pk} ({config.aggregation} rule)."
                ),
            },
        )
        human.pairs.all().delete()
        PositivePair.objects.bulk_create(
            [PositivePair(positive_set=human, image_id=i, caption_id=c) for i, c in positives],
            batch_size=5000,
        )
    tracker.finish()
    return AggregationSummary(
        verdicts=len(verdicts), positives=len(positives), unjudged=len(pairs) - len(verdicts)
    )


def _golden_answers(batch: Batch, known: dict[Hashable, bool]) -> list[WorkerAnswer]:
    """Return the golden answers of the batch's submitted work; record their truth in `known`.

    A golden pair is one task however many HITs show it, keyed apart from candidates.
    Suspended goldens (`annotation.goldens`) are left out: their "truth" is likely wrong.
    """
    answers = []
    for image_id, caption_id, role, worker_id, level in (
        Judgement.objects.filter(
            golden_checked("item__"),  # a suspended golden is likely wrong: no known truth
            assignment__hit__batch=batch,
        )
        .exclude(assignment__status__in=[AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED])
        .exclude(mturk_unconfirmed("assignment__"))
        .values_list(
            "item__image_id", "item__caption_id", "item__role", "assignment__worker_id", "level"
        )
    ):
        task = ("golden", image_id, caption_id)
        known[task] = role == ItemRole.GOLDEN_TP
        answers.append(WorkerAnswer(task=task, worker=str(worker_id), level=Level(level)))
    return answers
