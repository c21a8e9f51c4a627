"""Building stage: pack candidates into HITs with golden pairs."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from django.db import transaction

from annotation.models import (
    HIT,
    Batch,
    Candidate,
    Caption,
    Direction,
    HITItem,
    Image,
    PositivePair,
    Query,
    Ranking,
)
from mitl.config import BatchConfig
from mitl.hits import NegativeSource, PackingPlan, pack_hits

from .bulk import row_factory
from .progress import StageTracker


def negative_sources_load(*, batch: Batch) -> dict[int, NegativeSource]:
    """For each query: its item and what a golden negative must avoid (see mitl/hits.md)."""
    excluded: dict[int, set[int]] = defaultdict(set)
    for query_id, targets in Ranking.objects.filter(query__batch=batch).values_list(
        "query_id", "targets"
    ):
        excluded[query_id].update(targets)
    positives_of_image: dict[int, set[int]] = defaultdict(set)
    positives_of_caption: dict[int, set[int]] = defaultdict(set)
    for image_id, caption_id in PositivePair.objects.filter(
        positive_set__dataset_id=batch.dataset_id
    ).values_list("image_id", "caption_id"):
        positives_of_image[image_id].add(caption_id)
        positives_of_caption[caption_id].add(image_id)
    sources = {}
    for pk, direction, image_id, caption_id in Query.objects.filter(batch=batch).values_list(
        "pk", "direction", "image_id", "caption_id"
    ):
        if direction == Direction.I2T:
            avoid = excluded[pk] | positives_of_image[image_id]
            sources[pk] = NegativeSource(direction, image_id, frozenset(avoid))
        else:
            avoid = excluded[pk] | positives_of_caption[caption_id]
            sources[pk] = NegativeSource(direction, caption_id, frozenset(avoid))
    return sources


def hits_build(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Write the batch's HITs and their items once; return the number of HITs."""
    existing = HIT.objects.filter(batch=batch).count()
    if existing:
        tracker.start(existing)
        tracker.finish()
        return existing
    candidates = list(
        Candidate.objects.filter(batch=batch)
        .order_by("pk")
        .values_list("pk", "image_id", "caption_id", "query_id")
    )
    valid_captions = Caption.objects.filter(dataset_id=batch.dataset_id, is_invalid=False)
    golden_tp_pairs = sorted(valid_captions.values_list("image_id", "pk"))
    layouts = pack_hits(
        candidate_pairs=[(image, caption) for _, image, caption, _ in candidates],
        candidate_queries=[query for *_, query in candidates],
        plan=PackingPlan(config.hit_size, config.golden_tp, config.golden_tn, config.seed),
        golden_tp_pairs=golden_tp_pairs,
        negatives=negative_sources_load(batch=batch),
        image_ids=np.array(
            sorted(Image.objects.filter(dataset_id=batch.dataset_id).values_list("pk", flat=True)),
            dtype=np.int64,
        ),
        caption_ids=np.array(sorted(valid_captions.values_list("pk", flat=True)), dtype=np.int64),
    )
    tracker.start(len(layouts))
    with transaction.atomic():
        hits = HIT.objects.bulk_create(
            [
                HIT(batch_id=batch.pk, index=index, max_assignments=config.assignments_per_hit)
                for index in range(len(layouts))
            ],
            batch_size=2000,
        )
        item_row = row_factory(
            HITItem,
            (
                "hit_id",
                "position",
                "role",
                "candidate_id",
                "image_id",
                "caption_id",
                "golden_suspended_at",
            ),
        )
        HITItem.objects.bulk_create(
            [
                item_row(
                    hit.pk,
                    position,
                    item.role.value,
                    None if item.candidate_index is None else candidates[item.candidate_index][0],
                    item.image_id,
                    item.caption_id,
                    None,  # golden_suspended_at: every golden starts in force
                )
                for hit, layout in zip(hits, layouts, strict=True)
                for position, item in enumerate(layout)
            ],
            batch_size=5000,
        )
    tracker.finish()
    return len(layouts)
