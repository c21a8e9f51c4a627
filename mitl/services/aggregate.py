"""Aggregating stage: verdicts per candidate and the batch's human-verified positive set."""

from __future__ import annotations

from collections import defaultdict
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
)
from mitl.aggregation import eccv_verdict
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
    """(Re)compute every verdict of the batch from approved work, in one transaction."""
    levels: dict[int, list[Level]] = defaultdict(list)
    for candidate_id, level in Judgement.objects.filter(
        assignment__hit__batch=batch,
        assignment__status=AssignmentStatus.APPROVED,
        item__role=ItemRole.TASK,
    ).values_list("item__candidate_id", "level"):
        levels[candidate_id].append(Level(level))
    pairs = dict(
        (pk, (image_id, caption_id))
        for pk, image_id, caption_id in Candidate.objects.filter(batch=batch).values_list(
            "pk", "image_id", "caption_id"
        )
    )
    tracker.start(len(pairs))
    verdicts = []
    for candidate_id, answers in levels.items():
        spec = eccv_verdict(answers)
        verdicts.append(
            Verdict(
                candidate_id=candidate_id,
                rule=config.aggregation,
                is_positive=spec.is_positive,
                score=spec.score,
                confidence=spec.confidence,
                n_judgements=len(answers),
                distribution=spec.distribution,
            )
        )
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
