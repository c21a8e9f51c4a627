"""Suspending a golden pair that is wrong itself, and re-deciding the work it failed.

A golden TN drawn outside every annotator's top-N can still be a true match: then every
honest worker fails it, the golden policy flags or rejects them all, and the HIT goes
round and round. When `golden_suspend_after` distinct workers fail one golden pair while
passing every other golden of their HIT (`mitl.quality.goldens_to_suspend`), the pair is
suspended: its answers are no longer checked, the work it alone failed is decided again
as if it had passed, and the review page lists it for an admin. The HIT's later workers
see a fresh golden of the same kind in its place (drawn as packing draws them); work
handed out before keeps the page it was given (`models.items_shown_to`).

The caller holds the HIT's row (`handout.hits_lock`); the assignments are locked here,
after it, in pk order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime

import numpy as np
from django.db.models import Max, Q, QuerySet

from mitl.config import BatchConfig, batch_config
from mitl.hits import GoldenPool, NegativeSource, PackingError, Role, golden_replacement
from mitl.judgements import Level
from mitl.quality import (
    AUTOMATIC_REJECTION_PREFIX,
    GoldenDecision,
    golden_answered_right,
    golden_decision,
    goldens_to_suspend,
)

from .handout import hits_recount_slots
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Candidate,
    Caption,
    Direction,
    HITItem,
    Image,
    Instructions,
    Judgement,
    PositivePair,
    QualificationPair,
    Query,
    Ranking,
    golden_checked,
    mturk_unconfirmed,
)
from .prepared import Prepared

# What a worker whose automatic rejection is withdrawn reads.
REJECTION_WITHDRAWN = (
    "Approved: a pair with a known answer on this HIT turned out to be wrong, so the "
    "automatic rejection was withdrawn."
)


def goldens_in_force(hit_id: int):
    """The HIT's golden items whose answers are still checked (not suspended)."""
    return HITItem.objects.filter(golden_checked(), hit_id=hit_id)


def goldens_suspend_failed(
    *, hit_id: int, now: datetime, policy: str | None = None, hit: HIT | None = None
) -> list[HITItem]:
    """Suspend the HIT's golden pairs that honest workers keep failing; re-decide their work.

    Counts submitted work only, never MTurk work that MTurk has not confirmed (its ids may
    be made up, so it must not be able to switch a check off). Only while the batch takes
    answers. `policy` defaults to the batch's `golden_policy`. Returns the suspended items.
    The caller holds the HIT's row; `hit`: that row with its batch, read after the lock
    (a submission has it already), else read here.
    """
    if hit is None:
        hit = HIT.objects.select_related("batch").get(pk=hit_id)
    if hit.batch.state != BatchState.ANNOTATING:
        return []
    config = batch_config(hit.batch)
    if config.golden_suspend_after == 0:  # 0 never suspends: nothing to count
        return []
    sheets: dict[int, list[tuple[int, str, Level]]] = defaultdict(list)
    for worker_id, item_id, role, level in _GOLDEN_ANSWERS.rows(hit_id):
        sheets[worker_id].append((item_id, role, Level(level)))
    suspended = goldens_to_suspend(sheets, threshold=config.golden_suspend_after)
    if not suspended:
        return []
    HITItem.objects.filter(pk__in=suspended).update(golden_suspended_at=now)
    _failed_work_redecide(hit_id=hit_id, policy=policy or config.golden_policy, now=now)
    items = list(HITItem.objects.filter(pk__in=suspended).order_by("position"))
    goldens_replace(hit=hit, items=items, config=config)
    return items


def _golden_answers(hit_id: int) -> QuerySet[Judgement]:
    """Each worker's answers to the HIT's goldens in force, of work submitted and not
    waiting for MTurk's confirmation."""
    return (
        Judgement.objects.filter(
            item__in=goldens_in_force(hit_id), assignment__submitted_at__isnull=False
        )
        .exclude(mturk_unconfirmed("assignment__"))
        .values_list("assignment__worker_id", "item_id", "item__role", "level")
    )


# Read after every submission that misses a golden: built once (annotation.prepared).
_GOLDEN_ANSWERS = Prepared(_golden_answers, 1)


def goldens_replace(*, hit: HIT, items: list[HITItem], config: BatchConfig) -> list[HITItem]:
    """Put a fresh golden of the same kind in place of each item, for the HIT's later work.

    Assignments handed out so far keep the old pair; later ones show the new one at the
    end of the HIT (each assignment shuffles its own order anyway). An item no pair can
    replace stays, suspended. The caller holds the HIT's row, as every hand-out does, so
    the HIT's largest assignment id separates who saw which. Returns the new items.
    A HIT answered through an offline MTurk layout (results imported, never published by
    the platform) keeps its pairs: its later rows answer the exported page.
    """
    if hit.external_id is not None and hit.published_at is None:
        return []
    rows = list(
        HITItem.objects.filter(hit=hit).values_list(
            "image_id", "caption_id", "position", "candidate__query_id"
        )
    )
    on_page = {(image_id, caption_id) for image_id, caption_id, *_ in rows}
    queries = sorted({query for *_, query in rows if query is not None})
    pool = golden_pool(batch_id=hit.batch_id, dataset_id=hit.batch.dataset_id, queries=queries)
    seen_by = Assignment.objects.filter(hit=hit).aggregate(last=Max("pk"))["last"] or 0
    position = max(position for _, _, position, _ in rows) + 1
    added = []
    for item in items:
        try:
            spec = golden_replacement(
                Role(item.role),
                pool=pool,
                queries=queries,
                on_page=on_page,  # the draw adds the new pair to it
                seed=[config.seed, hit.pk, position],
            )
        except PackingError:
            continue  # nothing left to draw: the HIT goes on with one check fewer
        HITItem.objects.filter(pk=item.pk).update(retired_after=seen_by)
        added.append(
            HITItem.objects.create(
                hit=hit,
                position=position,
                role=item.role,
                image_id=spec.image_id,
                caption_id=spec.caption_id,
                added_after=seen_by,
            )
        )
        position += 1
    return added


def golden_pool(
    *, batch_id: int, dataset_id: int, queries: Collection[int] | None = None
) -> GoldenPool:
    """What golden pairs of a batch are drawn from (for `queries` only, when given).

    Never a pair whose answer the batch's workers were told: its qualification pairs (so
    the HITs built after the round was drawn, an adaptive batch's later rounds, and the
    goldens that replace suspended ones never show them) and its instructions' examples.
    """
    valid_captions = Caption.objects.filter(dataset_id=dataset_id, is_invalid=False)
    pool = GoldenPool(
        golden_tp_pairs=sorted(valid_captions.values_list("image_id", "pk")),
        negatives=negative_sources(batch_id=batch_id, dataset_id=dataset_id, queries=queries),
        image_ids=np.array(
            sorted(Image.objects.filter(dataset_id=dataset_id).values_list("pk", flat=True)),
            dtype=np.int64,
        ),
        caption_ids=np.array(sorted(valid_captions.values_list("pk", flat=True)), dtype=np.int64),
    )
    return pool.without(_pairs_answered_to_workers(batch_id=batch_id, dataset_id=dataset_id))


def _pairs_answered_to_workers(*, batch_id: int, dataset_id: int) -> set[tuple[int, int]]:
    """The (image pk, caption pk) pairs whose answers the batch shows its workers: its
    qualification pairs and the examples of every version of its instructions."""
    practice = QualificationPair.objects.filter(batch_id=batch_id)
    pairs = set(practice.values_list("image_id", "caption_id"))
    examples = [
        (example["image"], example["caption"])
        for content in Instructions.objects.filter(batch_id=batch_id).values_list(
            "content", flat=True
        )
        for example in content.get("examples", [])
    ]
    if examples:
        images = dict(
            Image.objects.filter(
                dataset_id=dataset_id, ext_id__in={image for image, _ in examples}
            ).values_list("ext_id", "pk")
        )
        captions = dict(
            Caption.objects.filter(
                dataset_id=dataset_id, ext_id__in={caption for _, caption in examples}
            ).values_list("ext_id", "pk")
        )
        pairs |= {
            (images[image], captions[caption])
            for image, caption in examples
            if image in images and caption in captions
        }
    return pairs


def negative_sources(
    *, batch_id: int, dataset_id: int, queries: Collection[int] | None = None
) -> dict[int, NegativeSource]:
    """For each query: its item and what a golden negative must avoid (see mitl/hits.md)."""
    query_rows = Query.objects.filter(batch_id=batch_id)
    rankings = Ranking.objects.filter(query__batch_id=batch_id)
    positives = PositivePair.objects.filter(positive_set__dataset_id=dataset_id)
    if queries is not None:
        query_rows = query_rows.filter(pk__in=queries)
        rankings = rankings.filter(query_id__in=queries)
        images = query_rows.values("image_id")
        captions = query_rows.values("caption_id")
        positives = positives.filter(Q(image_id__in=images) | Q(caption_id__in=captions))
    # Outside every annotator's top `golden_negative_depth` (rankings may be kept deeper,
    # for adaptive rounds; a golden negative need not avoid their deep ranks).
    depth = batch_config(Batch.objects.get(pk=batch_id)).golden_negative_depth
    excluded: dict[int, set[int]] = defaultdict(set)
    for query_id, targets in rankings.values_list("query_id", "targets"):
        excluded[query_id].update(targets[:depth])
    # Nor be a pair the batch judges as a task (adaptive rounds draw deeper than that depth).
    image_queries: dict[int, list[int]] = defaultdict(list)
    caption_queries: dict[int, list[int]] = defaultdict(list)
    for pk, image_id, caption_id in query_rows.values_list("pk", "image_id", "caption_id"):
        if image_id is not None:
            image_queries[image_id].append(pk)
        else:
            caption_queries[caption_id].append(pk)
    for image_id, caption_id in Candidate.objects.filter(batch_id=batch_id).values_list(
        "image_id", "caption_id"
    ):
        for query_id in image_queries.get(image_id, ()):
            excluded[query_id].add(caption_id)
        for query_id in caption_queries.get(caption_id, ()):
            excluded[query_id].add(image_id)
    # Known positives, and each caption with its own image (even without a positive set).
    own_pairs = Caption.objects.filter(
        Q(image_id__in=query_rows.values("image_id")) | Q(pk__in=query_rows.values("caption_id"))
    )
    positives_of_image: dict[int, set[int]] = defaultdict(set)
    positives_of_caption: dict[int, set[int]] = defaultdict(set)
    for image_id, caption_id in [
        *positives.values_list("image_id", "caption_id"),
        *own_pairs.values_list("image_id", "pk"),
    ]:
        positives_of_image[image_id].add(caption_id)
        positives_of_caption[caption_id].add(image_id)
    sources = {}
    for pk, direction, image_id, caption_id in query_rows.values_list(
        "pk", "direction", "image_id", "caption_id"
    ):
        if direction == Direction.I2T:
            avoid = excluded[pk] | positives_of_image[image_id]
            sources[pk] = NegativeSource(direction, image_id, frozenset(avoid))
        else:
            avoid = excluded[pk] | positives_of_caption[caption_id]
            sources[pk] = NegativeSource(direction, caption_id, frozenset(avoid))
    return sources


def _failed_work_redecide(*, hit_id: int, policy: str, now: datetime) -> None:
    """Decide again the HIT's failed work that passes once the suspended goldens are ignored.

    Work a person decided stays as it is. Held work is unflagged and, where the policy
    approves passing work, approved (MTurk work MTurk has not confirmed stays held: the
    sync approves it). An automatic rejection of platform work is withdrawn and approved;
    an automatic rejection of MTurk work is left alone: it has been or is being sent to
    MTurk, whose rejection the platform does not overturn.
    """
    failed = list(
        Assignment.objects.select_for_update()
        .filter(
            hit_id=hit_id,
            golden_passed=False,
            reviewed_by__isnull=True,
            status__in=(AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED),
        )
        .order_by("pk")
    )
    answers = Judgement.objects.filter(
        assignment__in=failed, item__in=goldens_in_force(hit_id)
    ).values_list("assignment_id", "item__role", "level")
    failing_ids = {
        assignment_id
        for assignment_id, role, level in answers
        if not golden_answered_right(role, Level(level))
    }
    reapproved = False
    for assignment in failed:
        if assignment.pk in failing_ids:
            continue
        fields = ["golden_passed", "flagged"]
        assignment.golden_passed, assignment.flagged = True, False
        if assignment.status == AssignmentStatus.REJECTED:
            automatic = assignment.feedback.startswith(AUTOMATIC_REJECTION_PREFIX)
            if assignment.external_id is not None or not automatic:
                continue  # MTurk's rejection, or one with a person's words: left alone
            assignment.status, assignment.feedback = AssignmentStatus.APPROVED, REJECTION_WITHDRAWN
            assignment.reviewed_at = now
            fields += ["status", "feedback", "reviewed_at"]
            reapproved = True
        elif assignment.reviewed_at is None and not assignment.awaits_mturk:
            if golden_decision(passed=True, policy=policy) is GoldenDecision.APPROVE:
                assignment.status, assignment.reviewed_at = AssignmentStatus.APPROVED, now
                fields += ["status", "reviewed_at"]
        assignment.save(update_fields=fields)
    if reapproved:
        hits_recount_slots(hit_ids=[hit_id])  # approved work holds its slot again
