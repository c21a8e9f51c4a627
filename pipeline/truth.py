"""A dataset's cumulative truth: one verdict per pair from every batch that judged it.

Each batch stores verdicts on its own candidates (`pipeline.aggregate`). What a curator
takes away is the dataset's truth: the union of what every batch found, where a pair judged
in several batches gets one verdict from all their approved judgements together, under one
rule (the releasing batch's). Selection reads it too, so a later batch never pays again for
a pair an earlier batch decided and counts what the earlier ones found (docs/curation.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from annotation.judgements_counted import work_counted
from annotation.models import (
    AssignmentStatus,
    Batch,
    BatchState,
    Candidate,
    ItemRole,
    Judgement,
    golden_checked,
    mturk_unconfirmed,
)
from mitl.aggregation import VerdictSpec, WorkerAnswer, aggregate
from mitl.curation.rankings import Pair
from mitl.judgements import Level

Stage = tuple[int, int]  # (batch id, round): when a pair was chosen for judgement


@dataclass(frozen=True)
class PairVerdict:
    """One pair's verdict over every covered batch, and where its judgements came from."""

    spec: VerdictSpec
    n_judgements: int
    stages: tuple[Stage, ...]  # every (batch, round) that chose the pair, oldest first

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(batch for batch, _ in self.stages))

    @property
    def first_stage(self) -> Stage:
        return self.stages[0]


def released_batches(batch: Batch) -> list[int]:
    """The batches a default release of `batch` covers: its dataset's released ones and itself."""
    released = Batch.objects.filter(dataset_id=batch.dataset_id, state=BatchState.RELEASED)
    return sorted({batch.pk, *released.values_list("pk", flat=True)})


def judged_batches(batch: Batch) -> list[int]:
    """Every batch of the dataset whose work may already have decided pairs (itself too).

    A cancelled batch's approved work is real evidence too; drafts have none.
    """
    others = Batch.objects.filter(dataset_id=batch.dataset_id).exclude(state=BatchState.DRAFT)
    return sorted({batch.pk, *others.values_list("pk", flat=True)})


def cumulative_verdicts(
    *, batch_ids: Sequence[int], rule: str, pairs: Iterable[Pair] | None = None
) -> dict[Pair, PairVerdict]:
    """Return one verdict per pair judged in the batches, from all their counted judgements.

    Pairs are (image pk, caption pk); `pairs` (default: all) limits which are decided.
    The rule runs over the union: for the voting rules a pair's verdict depends on its own
    answers only; Dawid-Skene learns each worker's reliability from every covered batch's
    goldens and answers at once.
    """
    wanted = None if pairs is None else set(pairs)
    answers: list[WorkerAnswer] = []
    for image_id, caption_id, worker_id, level in Judgement.objects.filter(
        work_counted("assignment__"),
        assignment__hit__batch_id__in=list(batch_ids),
        item__role=ItemRole.TASK,
    ).values_list("item__image_id", "item__caption_id", "assignment__worker_id", "level"):
        if wanted is None or (image_id, caption_id) in wanted:
            answers.append(WorkerAnswer((image_id, caption_id), str(worker_id), Level(level)))
    known: dict[Hashable, bool] = {}
    if rule == "dawid_skene":
        answers += golden_answers(batch_ids, known)
    specs = aggregate(rule, answers, known=known)
    stages = _stages(batch_ids, {task for task in specs if task not in known})
    return {
        pair: PairVerdict(
            spec=spec, n_judgements=sum(spec.distribution.values()), stages=stages[pair]
        )
        for pair, spec in specs.items()
        if pair in stages  # goldens and pairs outside `pairs` have no stage
    }


def _stages(batch_ids: Sequence[int], pairs: set[Hashable]) -> dict[Hashable, tuple[Stage, ...]]:
    """Every (batch, round) that chose each pair as a candidate, oldest first."""
    found: dict[Hashable, set[Stage]] = defaultdict(set)
    for batch_id, round_index, image_id, caption_id in Candidate.objects.filter(
        batch_id__in=list(batch_ids)
    ).values_list("batch_id", "round", "image_id", "caption_id"):
        if (image_id, caption_id) in pairs:
            found[(image_id, caption_id)].add((batch_id, round_index))
    return {pair: tuple(sorted(stages)) for pair, stages in found.items()}


def golden_answers(batch_ids: Sequence[int], known: dict[Hashable, bool]) -> list[WorkerAnswer]:
    """The golden answers of the batches' submitted work, approved or not; their truth goes
    into `known` (Dawid-Skene's evidence of how reliable each worker is).

    A golden pair is one task however many HITs show it, keyed apart from candidates.
    Suspended goldens (`annotation.goldens`: their "truth" is likely wrong) and MTurk work
    MTurk has not confirmed (the public HIT page may have stored it under made-up ids) are
    left out.
    """
    answers = []
    for image_id, caption_id, role, worker_id, level in (
        Judgement.objects.filter(golden_checked("item__"), assignment__hit__batch_id__in=batch_ids)
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
