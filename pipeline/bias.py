"""The model-bias report of a batch: read its rankings, proposals, verdicts and judgements once.

The numbers come from `mitl.bias` and `mitl.crowd_answers` (see their docstrings for the
definitions); this module only reads the batch in a fixed number of queries, whatever the
number of annotator subsets, and mirrors what a release counts: the original set plus the
batch's verdicts, invalid captions left out (neither positives nor caption queries). The
crowd's answers leave them out too: the candidates of an invalid caption count in neither the
answer and rationale shares nor the positives per annotator; `judgements_on_invalid_captions`
and `candidates_on_invalid_captions` say how many were left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from annotation.errors import ServiceError
from annotation.judgements_counted import judgements_counted
from annotation.models import (
    ORIGINAL_SET,
    Batch,
    Direction,
    PositivePair,
    Proposal,
    Query,
    Ranking,
    Verdict,
)
from mitl.bias import MAX_ANNOTATORS, direction_bias, json_safe
from mitl.config import batch_config
from mitl.crowd_answers import (
    LEVELS,
    JudgedAnswer,
    answer_shares,
    positives_by_annotator,
    rationale_shares,
)
from mitl.judgements import LEVEL_LABELS, Level

# (direction, subsets done, subsets in all): the subset loop's progress
BiasProgress = Callable[[str, int, int], None]
HEADLINE = Direction.T2I  # the paper's headline direction (Table E.1a)


def bias_report_build(*, batch: Batch, progress: BiasProgress | None = None) -> dict[str, Any]:
    """Compute the batch's bias report as JSON-safe numbers (NaN written as None).

    Raise ServiceError when the batch has more than MAX_ANNOTATORS annotators or no verdicts
    yet (it has not been aggregated).
    """
    annotators = list(batch.annotators.order_by("name").values_list("pk", "name"))
    if not annotators:
        raise ServiceError(f"batch {batch.pk} has no annotators")
    if len(annotators) > MAX_ANNOTATORS:
        raise ServiceError(
            f"batch {batch.pk} has {len(annotators)} annotators; the bias report scores all "
            f"2^n − 1 subsets of them, so it takes at most {MAX_ANNOTATORS}"
        )
    verdicts = {
        candidate: (positive, image, caption, invalid)
        for candidate, positive, image, caption, invalid in Verdict.objects.filter(
            candidate__batch=batch
        ).values_list(
            "candidate_id",
            "is_positive",
            "candidate__image_id",
            "candidate__caption_id",
            "candidate__caption__is_invalid",
        )
    }
    if not verdicts:
        raise ServiceError(
            f"batch {batch.pk} has no verdicts yet (state {batch.state}); aggregate it first "
            f"(python manage.py batch_run {batch.pk})"
        )
    index = {pk: i for i, (pk, _) in enumerate(annotators)}
    names = [name for _, name in annotators]
    config = batch_config(batch)

    proposals, on_invalid = batch_proposals(batch, index)
    masks = {
        candidate: sum({1 << a for a, _ in proposed}) for candidate, proposed in proposals.items()
    }

    report: dict[str, Any] = {
        "batch": {
            "id": batch.pk,
            "name": batch.name,
            "dataset": batch.dataset.name,
            "state": batch.state,
            "k": config.k,
        },
        "annotators": names,
        "levels": [{"value": level.value, "label": LEVEL_LABELS[level]} for level in LEVELS],
        "headline": HEADLINE.value,
        "metric": "R@1 (%)",
        "max_annotators": MAX_ANNOTATORS,
    }
    answers, answers_on_invalid = judged_answers(batch, proposals)
    report["answers"] = answer_shares(answers, names)
    report["rationales"] = rationale_shares(answers, names)
    report["judgements_on_invalid_captions"] = answers_on_invalid
    report["positives"] = positives_by_annotator(
        (
            (mask, verdicts[c][0] if c in verdicts else None)
            for c, mask in masks.items()
            if c not in on_invalid
        ),
        names,
    )
    report["candidates_on_invalid_captions"] = len(on_invalid)
    report["bias"] = _bias_by_direction(
        batch=batch,
        index=index,
        names=names,
        verdicts=verdicts,
        masks=masks,
        k=config.k,
        progress=progress,
    )
    return json_safe(report)


def batch_proposals(
    batch: Batch, index: dict[int, int]
) -> tuple[dict[int, list[tuple[int, int]]], set[int]]:
    """Return {candidate: [(annotator index, rank)]} and the candidates on invalid captions.

    `index` maps annotator pks to their index in the report's annotator list.
    """
    proposals: dict[int, list[tuple[int, int]]] = defaultdict(list)
    on_invalid: set[int] = set()  # candidates whose caption an admin marked invalid
    for candidate, annotator, rank, invalid in Proposal.objects.filter(
        candidate__batch=batch
    ).values_list("candidate_id", "annotator_id", "rank", "candidate__caption__is_invalid"):
        proposals[candidate].append((index[annotator], rank))
        if invalid:
            on_invalid.add(candidate)
    return proposals, on_invalid


def judged_answers(
    batch: Batch, proposals: dict[int, list[tuple[int, int]]]
) -> tuple[list[JudgedAnswer], int]:
    """Read the judgements of the batch's candidates that verdicts count
    (`annotation.judgements_counted`).

    Return those on valid captions, and how many were on captions marked invalid (left
    out, as a release leaves those captions out).
    """
    counted = judgements_counted(batch_id=batch.pk)
    rows = counted.filter(item__caption__is_invalid=False).values_list(
        "item__candidate_id", "level", "shortcomings", "wrong_concepts"
    )
    answers = [
        JudgedAnswer(
            level=Level(level),
            shortcomings=shortcomings,
            wrong_concepts=concepts,
            proposals=tuple(proposals.get(candidate, ())),
        )
        for candidate, level, shortcomings, concepts in rows.iterator(chunk_size=5000)
    ]
    return answers, counted.filter(item__caption__is_invalid=True).count()


def _bias_by_direction(
    *,
    batch: Batch,
    index: dict[int, int],
    names: list[str],
    verdicts: dict[int, tuple[bool, int, int, bool]],
    masks: dict[int, int],
    k: int,
    progress: BiasProgress | None,
) -> dict[str, Any]:
    """Score every annotator on every subset's release, per direction with queries."""
    queries: dict[str, list[int]] = {Direction.I2T: [], Direction.T2I: []}
    items: dict[str, dict[int, int]] = {Direction.I2T: {}, Direction.T2I: {}}
    for pk, direction, image, caption, invalid in Query.objects.filter(batch=batch).values_list(
        "pk", "direction", "image_id", "caption_id", "caption__is_invalid"
    ):
        if direction == Direction.T2I and invalid:
            continue  # a release drops invalid caption queries
        queries[direction].append(pk)
        items[direction][pk] = image if direction == Direction.I2T else caption

    original: dict[str, dict[int, set[int]]] = {Direction.I2T: {}, Direction.T2I: {}}
    image_queries = set(items[Direction.I2T].values())
    caption_queries = set(items[Direction.T2I].values())
    for image, caption in PositivePair.objects.filter(
        positive_set__dataset_id=batch.dataset_id,
        positive_set__name=ORIGINAL_SET,
        caption__is_invalid=False,
    ).values_list("image_id", "caption_id"):
        if image in image_queries:
            original[Direction.I2T].setdefault(image, set()).add(caption)
        if caption in caption_queries:
            original[Direction.T2I].setdefault(caption, set()).add(image)

    # Positives are pairs: a verified pair counts for its image and its caption query alike.
    verified: dict[str, dict[int, dict[int, int]]] = {Direction.I2T: {}, Direction.T2I: {}}
    for candidate, (positive, image, caption, invalid) in verdicts.items():
        if not positive or invalid:
            continue
        mask = masks.get(candidate, 0)
        verified[Direction.I2T].setdefault(image, {})[caption] = mask
        verified[Direction.T2I].setdefault(caption, {})[image] = mask

    rankings: dict[str, list[dict[int, list[int]]]] = {
        direction: [{} for _ in names] for direction in queries
    }
    direction_of = {pk: d for d, pks in queries.items() for pk in pks}
    for query, annotator, targets in Ranking.objects.filter(query__batch=batch).values_list(
        "query_id", "annotator_id", "targets"
    ):
        direction = direction_of.get(query)
        if direction is not None and annotator in index:
            rankings[direction][index[annotator]][query] = targets

    out = {}
    for direction in (Direction.T2I, Direction.I2T):
        if not queries[direction]:
            continue
        item_of = items[direction]

        def by_query(per_item: dict[int, Any], item_of=item_of) -> dict[int, Any]:
            # The pure module keys positives by query, as rankings are.
            return {q: per_item[item] for q, item in item_of.items() if item in per_item}

        def report(done: int, total: int, direction=direction) -> None:
            if progress is not None:
                progress(direction, done, total)

        out[direction.value] = direction_bias(
            rankings[direction],
            queries[direction],
            annotators=names,
            original=by_query(original[direction]),
            verified=by_query(verified[direction]),
            precision_k=k,
            progress=report,
        )
    return out
