"""Adaptive curation, the ORM edge: what a round reads, the estimate, and going on.

An adaptive batch loops pooling (here: selecting, `pipeline.curation_select`) →
building → annotating → aggregating until its budget is spent or the positives that
remain look negligible (`rounds_continue`). Each selection records its random sample's
design in `Batch.reports["curation"]`, so that every aggregation re-estimates how many
positives were never found (`curation_report`, `mitl.curation.estimate`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F, Q

from annotation.budget import judgements_spent
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Candidate,
    Caption,
    Direction,
    Image,
    PositivePair,
    PositiveSource,
    Query,
    Ranking,
)
from mitl.config import BatchConfig
from mitl.curation.budget import MAX_ROUNDS, RoundBudget, repost_share, round_budget
from mitl.curation.estimate import (
    STRATA,
    QueryUniverse,
    RoundSample,
    StratumSample,
    pooled_rates,
    strata_sizes,
)
from mitl.curation.policies import PolicySettings
from mitl.curation.rankings import Pair, QueryRankings

from .recall import REPORT_KEY, recall_estimate, sample_designs
from .truth import cumulative_verdicts, judged_batches

# In Batch.reports: the round after which an admin asked the batch to stop looping and
# release (`pipeline.round_controls.rounds_finish_after`); absent: rounds go on as planned.
FINISH_KEY = "finish_after_round"
# Rounds stop once the unfound positives' upper bound falls below this share of those found.
STOP_SHARE = 0.01
TOP_QUERIES = 10  # queries listed with the most positives expected to remain


@dataclass(frozen=True)
class QueryRow:
    pk: int
    direction: str
    item_id: int  # image pk (i2t) or caption pk (t2i)


@dataclass
class CurationInputs:
    """What selection and estimation read: queries, rankings, what is known and judged."""

    queries: list[QueryRow]
    rankings: list[QueryRankings]
    # judged pairs → positive verdict: the batch's, and other batches' on its queries
    outcomes: dict[Pair, bool]
    pending: set[Pair]  # candidates without a verdict yet
    known: set[Pair]  # known positives: every positive set of the dataset, own captions
    image_pks: np.ndarray
    caption_pks: np.ndarray


def curation_inputs(
    *, batch: Batch, config: BatchConfig, with_rankings: bool = True
) -> CurationInputs:
    """Read everything a round's selection and the estimate need, in a few queries.

    Without `with_rankings` the queries have no lists (what is found needs none of them).
    """
    queries = [
        QueryRow(pk, direction, image_id if direction == Direction.I2T else caption_id)
        for pk, direction, image_id, caption_id in Query.objects.filter(batch=batch)
        .order_by("pk")
        .values_list("pk", "direction", "image_id", "caption_id")
    ]
    by_pk = {q.pk: q for q in queries}
    lists: dict[int, dict[int, list[Pair]]] = defaultdict(dict)
    scores: dict[int, dict[int, list[float]]] = defaultdict(dict)
    ranked = Ranking.objects.filter(query__batch=batch) if with_rankings else Ranking.objects.none()
    for query_id, annotator_id, targets, values in ranked.values_list(
        "query_id", "annotator_id", "targets", "scores"
    ):
        query = by_pk[query_id]
        lists[query_id][annotator_id] = [_pair(query, target) for target in targets[: config.depth]]
        scores[query_id][annotator_id] = [float(v) for v in (values or [])[: config.depth]]
    rankings = [
        QueryRankings(q.pk, lists.get(q.pk, {}), group=q.direction, scores=scores.get(q.pk, {}))
        for q in queries
    ]
    outcomes: dict[Pair, bool] = {}
    pending: set[Pair] = set()
    for image_id, caption_id, positive in Candidate.objects.filter(batch=batch).values_list(
        "image_id", "caption_id", "verdict__is_positive"
    ):
        if positive is None:
            pending.add((image_id, caption_id))
        else:
            outcomes[(image_id, caption_id)] = positive
    images = [q.item_id for q in queries if q.direction == Direction.I2T]
    captions = [q.item_id for q in queries if q.direction == Direction.T2I]
    # Human sets are per batch; the crowd's truth comes from the judgements themselves.
    known = set(
        PositivePair.objects.filter(positive_set__dataset_id=batch.dataset_id)
        .filter(Q(image_id__in=images) | Q(caption_id__in=captions))
        .exclude(positive_set__source=PositiveSource.HUMAN)
        .values_list("image_id", "caption_id")
    )
    known.update(
        Caption.objects.filter(Q(image_id__in=images) | Q(pk__in=captions))
        .filter(is_invalid=False)  # an invalid caption is not among the targets
        .values_list("image_id", "pk")
    )
    _earlier_outcomes_add(batch, config, outcomes, pending, (set(images), set(captions)))
    return CurationInputs(
        queries=queries,
        rankings=rankings,
        outcomes=outcomes,
        pending=pending,
        known=known,
        image_pks=np.array(
            sorted(Image.objects.filter(dataset_id=batch.dataset_id).values_list("pk", flat=True)),
            dtype=np.int64,
        ),
        caption_pks=np.array(
            sorted(
                Caption.objects.filter(dataset_id=batch.dataset_id, is_invalid=False).values_list(
                    "pk", flat=True
                )
            ),
            dtype=np.int64,
        ),
    )


def _earlier_outcomes_add(
    batch: Batch,
    config: BatchConfig,
    outcomes: dict[Pair, bool],
    pending: set[Pair],
    query_items: tuple[set[int], set[int]],
) -> None:
    """Add what other batches of the dataset decided on these queries' pairs to `outcomes`.

    One verdict per pair from all their approved work (`pipeline.truth`): a later batch
    never judges such a pair again, counts its positives as found, and its policy learns
    from them. The batch's own verdicts stay as they are.
    """
    others = [pk for pk in judged_batches(batch) if pk != batch.pk]
    if not others:
        return
    images, captions = query_items
    for pair, verdict in cumulative_verdicts(batch_ids=others, rule=config.aggregation).items():
        if pair in outcomes or pair in pending:
            continue
        if pair[0] in images or pair[1] in captions:
            outcomes[pair] = verdict.spec.is_positive


def _pair(query: QueryRow, target: int) -> Pair:
    return (query.item_id, target) if query.direction == Direction.I2T else (target, query.item_id)


def round_records(batch: Batch) -> list[dict[str, Any]]:
    """Every round's recorded design (`round_select`), oldest first."""
    return batch.reports.get(REPORT_KEY, {}).get("rounds", [])


def current_round_record(batch: Batch) -> dict[str, Any] | None:
    """The current round's record, once its pairs are chosen."""
    return next((e for e in round_records(batch) if e["round"] == batch.round), None)


def repost_share_of(batch_ids: Iterable[int]) -> float:
    """The rejected share of the batches' reviewed work (`mitl.curation.budget`)."""
    reviewed = Assignment.objects.filter(
        hit__batch_id__in=list(batch_ids),
        status__in=[AssignmentStatus.APPROVED, AssignmentStatus.REJECTED],
    )
    return repost_share(reviewed.count(), reviewed.filter(status=AssignmentStatus.REJECTED).count())


def policy_settings(config: BatchConfig) -> PolicySettings:
    return PolicySettings(step=config.k)


def next_round_budget(*, batch: Batch, config: BatchConfig) -> RoundBudget:
    """What the next round may buy: the budget left, with a reserve for re-posted work."""
    return round_budget(
        budget=config.budget_judgements,
        spent=judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit),
        round_size=config.judgements_per_round,
        items_per_hit=config.items_per_hit,
        hit_size=config.hit_size,
        assignments_per_hit=config.assignments_per_hit,
        reposts=repost_share_of([batch.pk]),
    )


def universes_of(inputs: CurationInputs, direction: str, taken: set[Pair]) -> list[QueryUniverse]:
    """Each query's pairs of one direction, with what is ranked and what is taken."""
    by_item: dict[int, set[Pair]] = defaultdict(set)
    image_side = direction == Direction.I2T
    for pair in taken:
        by_item[pair[0] if image_side else pair[1]].add(pair)
    n_targets = len(inputs.caption_pks) if image_side else len(inputs.image_pks)
    universes = []
    for query, ranked in zip(inputs.queries, inputs.rankings, strict=True):
        if query.direction != direction:
            continue
        best_rank: dict[Pair, int] = {}
        for pairs in ranked.lists.values():
            for rank, pair in enumerate(pairs, start=1):
                if rank < best_rank.get(pair, rank + 1):
                    best_rank[pair] = rank
        universes.append(
            QueryUniverse(
                query_id=query.pk,
                is_image_query=image_side,
                item_id=query.item_id,
                n_targets=n_targets,
                ranked=best_rank,
                taken=frozenset(by_item.get(query.item_id, ())),
            )
        )
    return universes


def _membership(inputs: CurationInputs) -> dict[str, tuple[set[int], int]]:
    """For each direction: the query items, and which side of a pair holds them."""
    return {
        Direction.I2T: ({q.item_id for q in inputs.queries if q.direction == Direction.I2T}, 0),
        Direction.T2I: ({q.item_id for q in inputs.queries if q.direction == Direction.T2I}, 1),
    }


def round_samples(
    batch: Batch, inputs: CurationInputs, *, direction: str | None
) -> list[RoundSample]:
    """Each recorded round's sample (one direction, or both pooled) with its outcomes."""
    rounds = round_records(batch)
    members = _membership(inputs)
    directions = [direction] if direction else [Direction.I2T, Direction.T2I]
    judged: dict[tuple[int, str, str], list[bool]] = defaultdict(list)
    later: dict[str, list[tuple[int, Pair]]] = defaultdict(list)
    for round_index, d, stratum, image_id, caption_id, positive in Candidate.objects.filter(
        batch=batch
    ).values_list(
        "round", "direction", "sample_stratum", "image_id", "caption_id", "verdict__is_positive"
    ):
        if positive is None:
            continue
        if stratum:
            judged[(round_index, d, stratum)].append(positive)
        if positive:
            for name in directions:
                items, side = members[name]
                if (image_id, caption_id)[side] in items:
                    later[name].append((round_index, (image_id, caption_id)))
    samples = []
    for entry in rounds:
        for name in directions:
            population = entry.get("sample_population", {}).get(name)
            if population is None:
                continue
            strata = {
                h: StratumSample(
                    population=population.get(h, 0),
                    judged=len(judged[(entry["round"], name, h)]),
                    positives=sum(judged[(entry["round"], name, h)]),
                )
                for h in STRATA
            }
            samples.append(
                RoundSample(
                    round=entry["round"],
                    strata=strata,
                    positives_judged_later=sum(r > entry["round"] for r, _ in later[name]),
                )
            )
    return samples


def curation_report(*, batch: Batch, config: BatchConfig) -> dict[str, Any]:
    """Recompute and store the estimate of the positives not found, per direction.

    Found: the known positives of the queries (the dataset's original and imported sets)
    and every positive of the dataset's cumulative truth on them (`pipeline.truth`: this
    batch's verdicts and every earlier batch's). The estimate combines the random samples
    of every batch that sampled these queries (`pipeline.recall`). Also lists the queries
    with the most positives expected to remain (each stratum's pooled yield times the
    query's unjudged pairs in it). A fixed batch drew no sample: it gets what was found and
    no estimate, without reading its rankings.
    """
    inputs = curation_inputs(batch=batch, config=config, with_rankings=config.adaptive)
    batch_ids = judged_batches(batch)
    verdicts = cumulative_verdicts(batch_ids=batch_ids, rule=config.aggregation)
    found_pairs = inputs.known | {pair for pair, v in verdicts.items() if v.spec.is_positive}
    taken = set(inputs.outcomes) | inputs.pending | inputs.known
    members = _membership(inputs)
    designs = sample_designs(batch_ids) if config.adaptive else None
    directions: dict[str, Any] = {}
    for direction in (Direction.I2T, Direction.T2I):
        items, side = members[direction]
        if not items:
            continue
        found = sum(pair[side] in items for pair in found_pairs)
        if designs is None:
            directions[direction] = {"estimate": None, "found": found, "queries_most_remaining": []}
            continue
        estimate = recall_estimate(
            designs=designs,
            direction=direction,
            query_items=frozenset(items),
            verdicts=verdicts,
            found=found,
            known=frozenset(inputs.known),
        )
        samples = round_samples(batch, inputs, direction=direction)
        directions[direction] = {
            "estimate": None if estimate is None else estimate.to_json(),
            "found": found,
            "queries_most_remaining": _queries_most_remaining(
                inputs, direction, taken, pooled_rates(samples), found_pairs
            ),
        }
    report = {
        "target_recall": config.target_recall or None,
        "target_reached": target_reached(config, {"directions": directions}),
        "strategy": config.strategy,
        "adjudication": config.adjudication if config.adaptive else None,
        "round": batch.round,
        "budget_judgements": config.budget_judgements,
        "judgements_spent": judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit),
        "directions": directions,
    }
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        merged = {**locked.reports.get(REPORT_KEY, {}), **report}
        locked.reports = {**locked.reports, REPORT_KEY: merged}
        locked.save(update_fields=["reports"])
    batch.reports = locked.reports
    return merged


def _queries_most_remaining(
    inputs: CurationInputs,
    direction: str,
    taken: set[Pair],
    rates: Mapping[str, float],
    found_pairs: set[Pair],
) -> list[dict[str, Any]]:
    ext_ids = dict(
        Image.objects.filter(pk__in=[q.item_id for q in inputs.queries]).values_list("pk", "ext_id")
        if direction == Direction.I2T
        else Caption.objects.filter(pk__in=[q.item_id for q in inputs.queries]).values_list(
            "pk", "ext_id"
        )
    )
    side = 0 if direction == Direction.I2T else 1
    found_by_item: dict[int, int] = defaultdict(int)
    for pair in found_pairs:
        found_by_item[pair[side]] += 1
    rows = []
    for universe in universes_of(inputs, direction, taken):
        sizes = strata_sizes([universe])
        expected = sum(sizes[h] * rates[h] for h in STRATA)
        rows.append(
            {
                "query": ext_ids.get(universe.item_id),
                "found": found_by_item.get(universe.item_id, 0),
                "expected_remaining": round(expected, 2),
            }
        )
    rows.sort(key=lambda row: (-row["expected_remaining"], row["query"]))
    return rows[:TOP_QUERIES]


def rounds_continue(*, batch: Batch, config: BatchConfig, report: Mapping[str, Any]) -> bool:
    """Say whether an adaptive batch runs another round after this aggregation.

    It stops when an admin asked it to finish after this round (`FINISH_KEY`), once every
    direction's lower recall bound reached the config's `target_recall`, when the budget
    cannot buy one more HIT, when the last round got no approved work (closed
    early, or nothing left to choose), after `MAX_ROUNDS`, or once the upper 95% bound of
    every direction's unfound positives is below `STOP_SHARE` of those found (a small
    sample with no positive is no proof that none remain).
    """
    if not config.adaptive or batch.round + 1 >= MAX_ROUNDS:
        return False
    finish_after = batch.reports.get(FINISH_KEY)
    if finish_after is not None and batch.round >= finish_after:
        return False
    if next_round_budget(batch=batch, config=config).hits == 0:
        return False
    last_round_judged = Assignment.objects.filter(
        hit__batch=batch, hit__round=batch.round, status=AssignmentStatus.APPROVED
    ).exists()
    if not last_round_judged:
        return False
    estimates = [d["estimate"] for d in report.get("directions", {}).values()]
    if target_reached(config, report):
        return False
    return not (
        estimates
        and all(
            e is not None and e["unfound_high"] <= STOP_SHARE * max(e["found"], 1)
            for e in estimates
        )
    )


def target_reached(config: BatchConfig, report: Mapping[str, Any]) -> bool:
    """Say whether every direction's lower 95% recall bound reached `target_recall`."""
    estimates = [d["estimate"] for d in report.get("directions", {}).values()]
    return bool(
        config.target_recall
        and estimates
        and all(e is not None and e["recall_low"] >= config.target_recall for e in estimates)
    )


def round_advance(*, batch: Batch) -> bool:
    """Move an aggregated batch to the next round's selection; True for the caller that did."""
    moved = Batch.objects.filter(
        pk=batch.pk, state=BatchState.AGGREGATING, round=batch.round
    ).update(state=BatchState.POOLING, round=F("round") + 1, error="")
    return bool(moved)
