"""Pooling stage: merge every annotator's top-k into de-duplicated candidates."""

from __future__ import annotations

from django.db import transaction

from annotation.models import Batch, Candidate, Direction, Proposal, Query, Ranking
from mitl.config import BatchConfig
from mitl.pooling import RankedList, pool_candidates

from .bulk import CANDIDATE_FIELDS, PROPOSAL_FIELDS, rows_insert
from .curation_select import round_select
from .progress import StageTracker


def ranked_lists_load(*, batch: Batch, k: int) -> list[RankedList]:
    """Read the batch's rankings as pairs (image pk, caption pk), top `k` of each."""
    queries = {
        pk: (direction, image_id, caption_id)
        for pk, direction, image_id, caption_id in Query.objects.filter(batch=batch).values_list(
            "pk", "direction", "image_id", "caption_id"
        )
    }
    lists = []
    for query_id, annotator_id, targets, scores in Ranking.objects.filter(
        query__batch=batch
    ).values_list("query_id", "annotator_id", "targets", "scores"):
        direction, image_id, caption_id = queries[query_id]
        if direction == Direction.I2T:
            pairs = tuple((image_id, target) for target in targets[:k])
        else:
            pairs = tuple((target, caption_id) for target in targets[:k])
        lists.append(RankedList(query_id, annotator_id, pairs, tuple(scores[:k])))
    return lists


def candidates_pool(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Write the batch's candidates and proposals once; return the number of candidates.

    An adaptive batch chooses only the current round's pairs (`curation.round_select`).
    """
    if config.adaptive:
        return round_select(batch=batch, config=config, tracker=tracker)
    existing = Candidate.objects.filter(batch=batch).count()
    if existing:
        tracker.start(existing)
        tracker.finish()
        return existing
    lists = ranked_lists_load(batch=batch, k=config.k)
    pooled = pool_candidates(lists, k=config.k)
    tracker.start(len(pooled))
    directions = dict(Query.objects.filter(batch=batch).values_list("pk", "direction"))
    with transaction.atomic():
        ids = rows_insert(
            Candidate,
            CANDIDATE_FIELDS,
            [
                (batch.pk, p.query_id, directions[p.query_id], p.image_id, p.caption_id, 0, "")
                for p in pooled
            ],
            with_ids=True,
        )
        rows_insert(
            Proposal,
            PROPOSAL_FIELDS,
            [
                (candidate_id, spec.annotator_id, spec.query_id, spec.rank, spec.score)
                for candidate_id, p in zip(ids, pooled, strict=True)
                for spec in p.proposals
            ],
        )
    tracker.finish()
    return len(pooled)
