"""What a release covers: its batches, their queries, one verdict per pair, and provenance.

By default a release of a batch covers every released batch of its dataset and the batch
itself (`pipeline.truth.released_batches`); `only_batch` narrows it to the batch alone,
for studies. The positives the crowd found are the dataset's cumulative truth over those
batches (`pipeline.truth.cumulative_verdicts`), so a new version never drops what an
earlier batch paid for unless a later verdict overturns it (`release_changes` lists that).
Ids here are the dataset's external ids, as the release files write them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Q

from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    Candidate,
    Caption,
    Direction,
    Image,
    Judgement,
    PositivePair,
    PositiveSource,
    Query,
    Release,
)
from mitl.config import BatchConfig
from mitl.curation.estimate import RemainingEstimate
from mitl.curation.rankings import Pair
from mitl.release_bundle import JudgementRecord, VerdictRecord
from mitl.release_files import I2T_FILE, T2I_FILE

from .recall import recall_estimate, sample_designs
from .truth import PairVerdict, cumulative_verdicts, released_batches

CHANGES_LISTED = 1000  # removed pairs listed one by one in stats.json; the rest are counted


@dataclass(frozen=True)
class ReleaseScope:
    """The batches a release covers, their queries and the cumulative verdicts on them."""

    dataset_id: int
    batch_ids: list[int]
    rule: str
    query_items: Mapping[str, frozenset[int]]  # direction -> image (i2t) or caption (t2i) pks
    verdicts: Mapping[Pair, PairVerdict]  # (image pk, caption pk) -> verdict
    images: Mapping[int, int]  # pk -> external id, every image the scope names
    captions: Mapping[int, int]  # pk -> external id, valid captions only

    def ext_pair(self, pair: Pair) -> tuple[int, int] | None:
        """The pair in external ids; None when its caption is invalid."""
        caption = self.captions.get(pair[1])
        return None if caption is None else (self.images[pair[0]], caption)

    @property
    def image_queries(self) -> list[int]:
        return sorted(self.images[pk] for pk in self.query_items[Direction.I2T])

    @property
    def caption_queries(self) -> list[int]:
        return sorted(
            self.captions[pk] for pk in self.query_items[Direction.T2I] if pk in self.captions
        )


def release_scope(*, batch: Batch, config: BatchConfig, only_batch: bool = False) -> ReleaseScope:
    """Read the batches a release of `batch` covers, their queries and cumulative verdicts."""
    batch_ids = [batch.pk] if only_batch else released_batches(batch)
    items: dict[str, set[int]] = {Direction.I2T: set(), Direction.T2I: set()}
    for direction, image_id, caption_id in Query.objects.filter(batch_id__in=batch_ids).values_list(
        "direction", "image_id", "caption_id"
    ):
        items[direction].add(image_id if direction == Direction.I2T else caption_id)
    verdicts = cumulative_verdicts(batch_ids=batch_ids, rule=config.aggregation)
    image_pks = items[Direction.I2T] | {pair[0] for pair in verdicts}
    caption_pks = items[Direction.T2I] | {pair[1] for pair in verdicts}
    return ReleaseScope(
        dataset_id=batch.dataset_id,
        batch_ids=batch_ids,
        rule=config.aggregation,
        query_items={d: frozenset(pks) for d, pks in items.items()},
        verdicts=verdicts,
        images=dict(Image.objects.filter(pk__in=image_pks).values_list("pk", "ext_id")),
        captions=dict(
            Caption.objects.filter(pk__in=caption_pks, is_invalid=False).values_list("pk", "ext_id")
        ),
    )


def human_positives(scope: ReleaseScope) -> set[tuple[int, int]]:
    """The pairs the cumulative truth holds positive, valid captions only (external ids)."""
    return {
        ext
        for pair, verdict in scope.verdicts.items()
        if verdict.spec.is_positive and (ext := scope.ext_pair(pair)) is not None
    }


def verdict_records(scope: ReleaseScope) -> list[VerdictRecord]:
    """One record per judged pair with a valid caption, with the batches and rounds behind it."""
    records = []
    for pair, verdict in scope.verdicts.items():
        ext = scope.ext_pair(pair)
        if ext is None:
            continue
        spec = verdict.spec
        records.append(
            VerdictRecord(
                *ext,
                rule=scope.rule,
                is_positive=spec.is_positive,
                score=spec.score,
                confidence=spec.confidence,
                n_judgements=verdict.n_judgements,
                distribution=spec.distribution,
                stages=verdict.stages,
            )
        )
    return sorted(records, key=lambda r: (r.image_id, r.caption_id))


def positives_by_batch(scope: ReleaseScope, shipped: set[tuple[int, int]]) -> dict[str, int]:
    """How many shipped crowd positives each batch found first (the batch that first chose it)."""
    counts: Counter[int] = Counter()
    for pair, verdict in scope.verdicts.items():
        if verdict.spec.is_positive and scope.ext_pair(pair) in shipped:
            counts[verdict.first_stage[0]] += 1
    return {str(batch_id): counts[batch_id] for batch_id in scope.batch_ids}


def judgement_records(batch_ids: Sequence[int]) -> Iterator[JudgementRecord]:
    """Stream every raw answer of the batches but those of accepted (not yet submitted) work."""
    rows = (
        Judgement.objects.filter(assignment__hit__batch_id__in=list(batch_ids))
        .exclude(assignment__status=AssignmentStatus.ACCEPTED)
        .order_by(
            "assignment__hit__batch_id", "assignment__hit__index", "assignment_id", "item__position"
        )
        .values_list(
            "item__image__ext_id",
            "item__caption__ext_id",
            "item__role",
            "level",
            "shortcomings",
            "wrong_concepts",
            "other_text",
            "elapsed_ms",
            "assignment__worker__source",
            "assignment__worker__external_id",
            "assignment__hit__batch_id",
            "assignment__hit__round",
            "assignment__hit__index",
            "assignment_id",
            "assignment__status",
        )
    )
    for *answer, source, worker, batch, round_index, hit, assignment, status in rows.iterator(
        chunk_size=5000
    ):
        yield JudgementRecord(
            *answer,
            worker=f"{source}:{worker}",
            batch=batch,
            hit=hit,
            assignment=assignment,
            assignment_status=status,
            round=round_index,
        )


def work_stats(batch_ids: Sequence[int], scope: ReleaseScope) -> dict[str, Any]:
    """Count the batches' work; judgements and verdicts on invalid captions apart.

    They are left out of `judgements` and `verdicts` as the positives and verdicts.csv
    leave those captions out (judgements.jsonl keeps every raw answer). HITs, candidates
    and assignments are counted whole: a HIT with one invalid caption was still worked.
    Verdicts are the cumulative ones, one per pair.
    """
    ids = list(batch_ids)
    judgements = Judgement.objects.filter(assignment__hit__batch_id__in=ids)
    assignment_status = Counter(
        Assignment.objects.filter(hit__batch_id__in=ids).values_list("status", flat=True)
    )
    valid = [v for pair, v in scope.verdicts.items() if scope.ext_pair(pair) is not None]
    positive = sum(v.spec.is_positive for v in valid)
    return {
        "candidates": Candidate.objects.filter(batch_id__in=ids).count(),
        "hits": HIT.objects.filter(batch_id__in=ids).count(),
        "assignments": dict(sorted(assignment_status.items())),
        "judgements": judgements.filter(item__caption__is_invalid=False).count(),
        "judgements_on_invalid_captions": judgements.filter(item__caption__is_invalid=True).count(),
        "verdicts": {"positive": positive, "negative": len(valid) - positive},
        "verdicts_on_invalid_captions": len(scope.verdicts) - len(valid),
    }


def release_estimates(
    scope: ReleaseScope, shipped: set[tuple[int, int]]
) -> dict[str, dict[str, Any]]:
    """Per direction: the positives the release ships on its queries and what it may miss.

    "Found" is exactly the release's count. Known positives (original and imported sets)
    that the release leaves out were never sampled: they count as missing, exactly.
    """
    known = _known_pairs(scope)  # pk pair -> external pair
    designs = sample_designs(scope.batch_ids)
    query_ext = {Direction.I2T: set(scope.image_queries), Direction.T2I: set(scope.caption_queries)}
    result = {}
    for direction, side in ((Direction.I2T, 0), (Direction.T2I, 1)):
        if not scope.query_items[direction]:
            continue
        found = sum(pair[side] in query_ext[direction] for pair in shipped)
        estimate = recall_estimate(
            designs=designs,
            direction=direction,
            query_items=scope.query_items[direction],
            verdicts=scope.verdicts,
            found=found,
            known=frozenset(known),
        )
        left_out = sum(
            ext[side] in query_ext[direction] and ext not in shipped for ext in known.values()
        )
        result[direction] = {
            "found": found,
            "estimate": None if estimate is None else _plus_missing(estimate, left_out).to_json(),
        }
    return result


def _plus_missing(estimate: RemainingEstimate, missing: int) -> RemainingEstimate:
    if not missing:
        return estimate
    return RemainingEstimate(
        found=estimate.found,
        unfound=estimate.unfound + missing,
        low=estimate.low + missing,
        high=estimate.high + missing,
        rounds_used=estimate.rounds_used,
        variance=estimate.variance,
    )


def _known_pairs(scope: ReleaseScope) -> dict[Pair, tuple[int, int]]:
    """Known positives of the scope's queries, valid captions only: pk pair -> external pair.

    Known: the dataset's non-human positive sets and each query's own captions.
    """
    images = scope.query_items[Direction.I2T]
    captions = scope.query_items[Direction.T2I]
    near = Q(image_id__in=images) | Q(caption_id__in=captions)
    fields = ("image_id", "caption_id", "image__ext_id", "caption__ext_id")
    rows = list(
        PositivePair.objects.filter(near, caption__is_invalid=False)
        .exclude(positive_set__source=PositiveSource.HUMAN)
        .values_list(*fields)
    )
    rows += Caption.objects.filter(
        Q(image_id__in=images) | Q(pk__in=captions), is_invalid=False
    ).values_list("image_id", "pk", "image__ext_id", "ext_id")
    return {
        (image, caption): (image_ext, caption_ext)
        for image, caption, image_ext, caption_ext in rows
    }


def release_changes(
    *,
    name: str,
    scope: ReleaseScope,
    i2t: Mapping[str, Sequence[int]],
    t2i: Mapping[str, Sequence[int]],
) -> dict[str, Any] | None:
    """What changed since the latest earlier version of release `name`; None for a first one.

    Each removed positive says why: a later verdict overturned it, its caption was marked
    invalid, or its query is not in this release (e.g. a release of one batch only).
    """
    previous = Release.objects.filter(name=name).order_by("-version").first()
    if previous is None:
        return None
    before = _release_pairs(Path(previous.path))
    after = _pairs_of(i2t, t2i)
    removed = sorted(before - after)
    negative = {
        ext
        for pair, v in scope.verdicts.items()
        if not v.spec.is_positive
        if (ext := scope.ext_pair(pair)) is not None
    }
    queries = {Direction.I2T: set(i2t), Direction.T2I: set(t2i)}
    invalid = set(
        Caption.objects.filter(dataset_id=scope.dataset_id, is_invalid=True).values_list(
            "ext_id", flat=True
        )
    )
    listed = [
        {
            "direction": direction,
            "query": query,
            "target": target,
            "reason": _removal_reason(direction, query, target, queries, negative, invalid),
        }
        for direction, query, target in removed[:CHANGES_LISTED]
    ]
    return {
        "since_version": previous.version,
        "added": len(after - before),
        "removed": len(removed),
        "removed_pairs": listed,
    }


def _release_pairs(folder: Path) -> set[tuple[str, int, int]]:
    try:
        i2t = json.loads((folder / I2T_FILE).read_text(encoding="utf-8"))
        t2i = json.loads((folder / T2I_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # the earlier version's folder is gone: nothing to compare
        return set()
    return _pairs_of(i2t, t2i)


def _pairs_of(
    i2t: Mapping[str, Sequence[int]], t2i: Mapping[str, Sequence[int]]
) -> set[tuple[str, int, int]]:
    pairs = {(Direction.I2T.value, int(q), int(t)) for q, targets in i2t.items() for t in targets}
    pairs |= {(Direction.T2I.value, int(q), int(t)) for q, targets in t2i.items() for t in targets}
    return pairs


def _removal_reason(
    direction: str,
    query: int,
    target: int,
    queries: Mapping[str, set[str]],
    negative: set[tuple[int, int]],
    invalid_captions: set[int],
) -> str:
    if str(query) not in queries[direction]:
        return "query not in this release"
    pair = (query, target) if direction == Direction.I2T else (target, query)
    if pair in negative:
        return "overturned by a later verdict"
    if pair[1] in invalid_captions:
        return "caption marked invalid"
    return "no longer in a source set"
