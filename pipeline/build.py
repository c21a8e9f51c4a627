"""Building stage: pack candidates into HITs with golden pairs."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from annotation.goldens import golden_pool
from annotation.models import HIT, Batch, Candidate, HITItem
from annotation.qualification.pairs import qualification_pairs_draw
from mitl.config import BatchConfig
from mitl.hits import PackingPlan, pack_hits

from .bulk import rows_insert
from .curation_select import round_rejudged
from .progress import StageTracker


def hits_build(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Write the current round's HITs and their items once; return the number of HITs.

    A fixed batch has one round; an adaptive one packs each round's candidates into new
    HITs, numbered after the earlier rounds' (golden pairs drawn afresh per round). A batch
    with a qualification round draws its pairs once, after its first HITs, off their pages.
    """
    existing = HIT.objects.filter(batch=batch, round=batch.round).count()
    if existing:
        qualification_pairs_draw(batch=batch)  # a retry after the HITs were written
        tracker.start(existing)
        tracker.finish()
        return existing
    first_index = HIT.objects.filter(batch=batch).count()
    candidates = list(
        Candidate.objects.filter(
            Q(round=batch.round) | Q(pk__in=round_rejudged(batch)), batch=batch
        )
        .order_by("pk")
        .values_list("pk", "image_id", "caption_id", "query_id")
    )
    pool = golden_pool(batch_id=batch.pk, dataset_id=batch.dataset_id)
    layouts = pack_hits(
        candidate_pairs=[(image, caption) for _, image, caption, _ in candidates],
        candidate_queries=[query for *_, query in candidates],
        plan=PackingPlan(
            config.hit_size, config.golden_tp, config.golden_tn, config.seed + batch.round
        ),
        golden_tp_pairs=pool.golden_tp_pairs,
        negatives=pool.negatives,
        image_ids=pool.image_ids,
        caption_ids=pool.caption_ids,
    )
    tracker.start(len(layouts))
    with transaction.atomic():
        hits = HIT.objects.bulk_create(
            [
                HIT(
                    batch_id=batch.pk,
                    index=first_index + index,
                    round=batch.round,
                    max_assignments=config.assignments_per_hit,
                )
                for index in range(len(layouts))
            ],
            batch_size=2000,
        )
        rows_insert(
            HITItem,
            (
                "hit_id",
                "position",
                "role",
                "candidate_id",
                "image_id",
                "caption_id",
                "golden_suspended_at",
                "retired_after",
                "added_after",
            ),
            [
                (
                    hit.pk,
                    position,
                    item.role.value,
                    None if item.candidate_index is None else candidates[item.candidate_index][0],
                    item.image_id,
                    item.caption_id,
                    None,  # golden_suspended_at: every golden starts in force
                    None,  # retired_after, added_after: shown to every assignment
                    None,
                )
                for hit, layout in zip(hits, layouts, strict=True)
                for position, item in enumerate(layout)
            ],
        )
    qualification_pairs_draw(batch=batch)  # once: later rounds keep the first round's pairs
    tracker.finish()
    return len(layouts)
