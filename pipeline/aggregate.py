"""Aggregating stage: verdicts per candidate and the batch's human-verified positive set."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from django.db import transaction

from annotation.judgements_counted import judgements_counted
from annotation.models import (
    Batch,
    Candidate,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Verdict,
)
from mitl.aggregation import WorkerAnswer, aggregate
from mitl.config import BatchConfig
from mitl.judgements import Level

from .bulk import POSITIVE_PAIR_FIELDS, rows_insert
from .progress import StageTracker
from .truth import golden_answers

VERDICT_FIELDS = (
    "candidate_id",
    "rule",
    "is_positive",
    "score",
    "confidence",
    "n_judgements",
    "distribution",
)


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
    """(Re)compute every verdict of the batch from the work that counts, in one transaction.

    The judgements that count are `annotation.judgements_counted` (approved, MTurk work only
    once confirmed). The batch's rule decides (`mitl.aggregation.RULES`). Dawid-Skene also
    reads the golden answers of every submitted assignment, approved or not, as known
    labels: they are the evidence of how reliable each worker is. MTurk work that MTurk has
    not confirmed never counts there either: the public HIT page may have stored it under
    made-up ids.
    """
    answers = [
        WorkerAnswer(task=candidate_id, worker=str(worker_id), level=Level(level))
        for candidate_id, worker_id, level in judgements_counted(batch_id=batch.pk).values_list(
            "item__candidate_id", "assignment__worker_id", "level"
        )
    ]
    known: dict[Hashable, bool] = {}
    if config.aggregation == "dawid_skene":
        answers += golden_answers([batch.pk], known)
    pairs = dict(
        (pk, (image_id, caption_id))
        for pk, image_id, caption_id in Candidate.objects.filter(batch=batch).values_list(
            "pk", "image_id", "caption_id"
        )
    )
    tracker.start(len(pairs))
    specs = aggregate(config.aggregation, answers, known=known)
    verdict_rows = [
        (
            candidate_id,
            config.aggregation,
            spec.is_positive,
            spec.score,
            spec.confidence,
            sum(spec.distribution.values()),
            spec.distribution,
        )
        for candidate_id, spec in specs.items()
    ]
    positives = sorted(pairs[pk] for pk, spec in specs.items() if spec.is_positive)
    with transaction.atomic():
        Verdict.objects.filter(candidate__batch=batch).delete()
        rows_insert(Verdict, VERDICT_FIELDS, verdict_rows)
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
        rows_insert(
            PositivePair,
            POSITIVE_PAIR_FIELDS,
            [(human.pk, image, caption) for image, caption in positives],
        )
    tracker.finish()
    return AggregationSummary(
        verdicts=len(verdict_rows),
        positives=len(positives),
        unjudged=len(pairs) - len(verdict_rows),
    )
