"""Adaptive curation, the ORM edge: choose a round's pairs, estimate what remains, go on?

An adaptive batch loops pooling (here: selecting) → building → annotating → aggregating
until its budget is spent or the positives that remain look negligible
(`rounds_continue`). Each selection (`round_select`) asks the batch's adjudication policy
(`mitl.curation.policies`) for most of the round's pairs and draws the rest at random from
the unjudged pairs (`mitl.curation.estimate`), recording the sample's design in
`Batch.reports["curation"]` so that every later aggregation can re-estimate how many
positives were never found (`curation_report`).
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
    Proposal,
    Query,
    Ranking,
    Verdict,
)
from mitl.config import BatchConfig
from mitl.curation.budget import RoundBudget, repost_share, round_budget
from mitl.curation.estimate import (
    STRATA,
    QueryUniverse,
    RoundSample,
    StratumSample,
    pooled_rates,
    remaining_estimate,
    sample_allocation,
    sample_draw,
    strata_sizes,
)
from mitl.curation.policies import Pair, PolicySettings, QueryRankings, policy_select

from .bulk import CANDIDATE_FIELDS, PROPOSAL_FIELDS, rows_insert
from .progress import StageTracker

REPORT_KEY = "curation"  # in Batch.reports
# Rounds stop once the unfound positives' upper bound falls below this share of those found.
STOP_SHARE = 0.01
MAX_ROUNDS = 100  # a guard: a round always spends at least one HIT of the budget
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
    outcomes: dict[Pair, bool]  # judged pairs of the batch → positive verdict
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
    ranked = Ranking.objects.filter(query__batch=batch) if with_rankings else Ranking.objects.none()
    for query_id, annotator_id, targets in ranked.values_list(
        "query_id", "annotator_id", "targets"
    ):
        query = by_pk[query_id]
        lists[query_id][annotator_id] = [_pair(query, target) for target in targets[: config.depth]]
    rankings = [QueryRankings(q.pk, lists.get(q.pk, {}), group=q.direction) for q in queries]
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
    known = set(
        PositivePair.objects.filter(positive_set__dataset_id=batch.dataset_id)
        .filter(Q(image_id__in=images) | Q(caption_id__in=captions))
        .exclude(positive_set__name=f"human-batch-{batch.pk}")
        .values_list("image_id", "caption_id")
    )
    known.update(
        Caption.objects.filter(Q(image_id__in=images) | Q(pk__in=captions))
        .filter(is_invalid=False)  # an invalid caption is not among the targets
        .values_list("image_id", "pk")
    )
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


def _pair(query: QueryRow, target: int) -> Pair:
    return (query.item_id, target) if query.direction == Direction.I2T else (target, query.item_id)


def policy_settings(config: BatchConfig) -> PolicySettings:
    return PolicySettings(step=config.k)


def next_round_budget(*, batch: Batch, config: BatchConfig) -> RoundBudget:
    """What the next round may buy: the budget left, with a reserve for re-posted work."""
    reviewed = Assignment.objects.filter(
        hit__batch=batch,
        status__in=[AssignmentStatus.APPROVED, AssignmentStatus.REJECTED],
    )
    submitted = reviewed.count()
    rejected = reviewed.filter(status=AssignmentStatus.REJECTED).count()
    return round_budget(
        budget=config.budget_judgements,
        spent=judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit),
        round_size=config.judgements_per_round,
        items_per_hit=config.items_per_hit,
        hit_size=config.hit_size,
        assignments_per_hit=config.assignments_per_hit,
        reposts=repost_share(submitted, rejected),
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


def round_select(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Write the current round's candidates once; return how many the round has.

    Most of the round's pairs come from the adjudication policy; `estimate_share` of them
    is a stratified random sample of the unjudged pairs, split over the directions by
    their number of queries. Idempotent: a round that has candidates is not chosen again.
    """
    recorded = [
        entry
        for entry in batch.reports.get(REPORT_KEY, {}).get("rounds", [])
        if entry["round"] == batch.round
    ]
    if recorded:  # chosen already (the record commits with the candidates): a retry
        chosen = recorded[0]
        total = chosen["policy_pairs"] + chosen["sample_pairs"] + len(chosen["rejudged"])
        tracker.start(total)
        tracker.finish()
        return total
    plan = next_round_budget(batch=batch, config=config)
    inputs = curation_inputs(batch=batch, config=config)
    tracker.start(plan.task_pairs)
    rejudged = rejudge_candidates(batch=batch, config=config)[: plan.task_pairs // 2]
    sample_total = round((plan.task_pairs - len(rejudged)) * config.estimate_share)
    picks = policy_select(
        config.adjudication,
        inputs.rankings,
        inputs.outcomes,
        quota=plan.task_pairs - len(rejudged) - sample_total,
        settings=policy_settings(config),
        excluded=inputs.pending | inputs.known,
    )
    taken = set(inputs.outcomes) | inputs.pending | inputs.known | {p.pair for p in picks}
    rates = pooled_rates(_round_samples(batch, inputs, direction=None))
    rng = np.random.default_rng([config.seed, batch.pk, batch.round])
    n_queries = {
        d: sum(q.direction == d for q in inputs.queries) for d in (Direction.I2T, Direction.T2I)
    }
    design: dict[str, dict[str, int]] = {}
    sampled: list[tuple[int, Pair, str]] = []
    for direction in (Direction.I2T, Direction.T2I):
        if not n_queries[direction]:
            continue
        universes = universes_of(inputs, direction, taken)
        sizes = strata_sizes(universes)
        share = sample_total * n_queries[direction] // max(len(inputs.queries), 1)
        allocation = sample_allocation(sizes, share, rates)
        targets = inputs.caption_pks if direction == Direction.I2T else inputs.image_pks
        drawn = sample_draw(universes, targets, allocation, rng)
        taken.update(pair for _, pair, _ in drawn)
        sampled += drawn
        design[direction] = {h: sizes[h] for h in STRATA}
    directions = {q.pk: q.direction for q in inputs.queries}
    rows = [(p.query_id, p.pair, "") for p in picks] + sampled
    with transaction.atomic():
        ids = rows_insert(
            Candidate,
            CANDIDATE_FIELDS,
            [
                (batch.pk, query_id, directions[query_id], pair[0], pair[1], batch.round, stratum)
                for query_id, pair, stratum in rows
            ],
            with_ids=True,
        )
        scores = _proposal_scores(batch, picks)
        rows_insert(
            Proposal,
            PROPOSAL_FIELDS,
            [
                (
                    candidate_id,
                    annotator_id,
                    pick.query_id,
                    rank,
                    scores[(pick.query_id, annotator_id)][rank - 1],
                )
                # ids start with the picks' (rows lists them first); samples have no proposal
                for candidate_id, pick in zip(ids, picks, strict=False)
                for annotator_id, rank in pick.ranked_by
            ],
        )
        _round_record(
            batch,
            {
                "round": batch.round,
                "hits_planned": plan.hits,
                "judgements_planned": plan.judgements_planned,
                "policy_pairs": len(picks),
                "sample_pairs": len(sampled),
                "rejudged": rejudged,
                "sample_population": design,
            },
        )
    tracker.finish()
    return len(rows) + len(rejudged)


def rejudge_candidates(*, batch: Batch, config: BatchConfig) -> list[int]:
    """Judged pairs the next round shows again: a tie, or fewer answers than asked for.

    Adaptive redundancy: a pair whose workers split evenly (the rule's confidence ≤ ½; ties
    count as negative), that lost work to rejection, or a randomly sampled pair judged
    positive on one answer gets one more HIT's worth of answers, once. Verdicts pool every
    approved answer, so the new ones break the tie (a sampled YES against a NO is a tie:
    negative).
    """
    done = {
        candidate
        for entry in batch.reports.get(REPORT_KEY, {}).get("rounds", [])
        for candidate in entry.get("rejudged", [])
    }
    uncertain = Verdict.objects.filter(candidate__batch=batch).filter(
        Q(confidence__lte=0.5)
        | Q(n_judgements__lt=config.assignments_per_hit)
        # A YES on a randomly sampled pair stands for thousands of unjudged pairs in the
        # estimate: one worker's careless YES must be confirmed by a second answer.
        | Q(candidate__sample_stratum__gt="", is_positive=True, n_judgements__lt=2)
    )
    return sorted(pk for pk in uncertain.values_list("candidate_id", flat=True) if pk not in done)


def round_rejudged(batch: Batch) -> list[int]:
    """The candidates of earlier rounds that the current round shows again."""
    for entry in batch.reports.get(REPORT_KEY, {}).get("rounds", []):
        if entry["round"] == batch.round:
            return list(entry.get("rejudged", []))
    return []


def _proposal_scores(batch: Batch, picks: Iterable[Any]) -> dict[tuple[int, int], list[float]]:
    """The ranking scores of the queries the picks came from, per (query, annotator)."""
    queries = {pick.query_id for pick in picks}
    return {
        (query_id, annotator_id): scores
        for query_id, annotator_id, scores in Ranking.objects.filter(
            query_id__in=queries
        ).values_list("query_id", "annotator_id", "scores")
    }


def _round_record(batch: Batch, entry: Mapping[str, Any]) -> None:
    """Store one round's design in the batch's curation report (replacing a retry's)."""
    locked = Batch.objects.select_for_update().get(pk=batch.pk)
    report = dict(locked.reports.get(REPORT_KEY, {}))
    rounds = [r for r in report.get("rounds", []) if r["round"] != entry["round"]]
    report["rounds"] = sorted([*rounds, dict(entry)], key=lambda r: r["round"])
    locked.reports = {**locked.reports, REPORT_KEY: report}
    locked.save(update_fields=["reports"])
    batch.reports = locked.reports


def _membership(inputs: CurationInputs) -> dict[str, tuple[set[int], int]]:
    """For each direction: the query items, and which side of a pair holds them."""
    return {
        Direction.I2T: ({q.item_id for q in inputs.queries if q.direction == Direction.I2T}, 0),
        Direction.T2I: ({q.item_id for q in inputs.queries if q.direction == Direction.T2I}, 1),
    }


def _round_samples(
    batch: Batch, inputs: CurationInputs, *, direction: str | None
) -> list[RoundSample]:
    """Each recorded round's sample (one direction, or both pooled) with its outcomes."""
    rounds = batch.reports.get(REPORT_KEY, {}).get("rounds", [])
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

    Found: the known positives of the queries (every positive set of the dataset) and the
    batch's positive verdicts. Also lists the queries with the most positives expected to
    remain (each stratum's pooled yield times the query's unjudged pairs in it). A fixed
    batch drew no sample: it gets what was found and no estimate, without reading its
    rankings.
    """
    inputs = curation_inputs(batch=batch, config=config, with_rankings=config.adaptive)
    found_pairs = inputs.known | {pair for pair, positive in inputs.outcomes.items() if positive}
    taken = set(inputs.outcomes) | inputs.pending | inputs.known
    members = _membership(inputs)
    directions: dict[str, Any] = {}
    for direction in (Direction.I2T, Direction.T2I):
        items, side = members[direction]
        if not items:
            continue
        found = sum(pair[side] in items for pair in found_pairs)
        if not config.adaptive:
            directions[direction] = {"estimate": None, "found": found, "queries_most_remaining": []}
            continue
        samples = _round_samples(batch, inputs, direction=direction)
        estimate = remaining_estimate(found, samples)
        directions[direction] = {
            "estimate": None if estimate is None else estimate.to_json(),
            "found": found,
            "queries_most_remaining": _queries_most_remaining(
                inputs, direction, taken, pooled_rates(samples), found_pairs
            ),
        }
    report = {
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

    It stops when the budget cannot buy one more HIT, when the last round got no approved
    work (closed early, or nothing left to choose), after `MAX_ROUNDS`, or once the upper
    95% bound of every direction's unfound positives is below `STOP_SHARE` of those found
    (a small sample with no positive is no proof that none remain).
    """
    if not config.adaptive or batch.round + 1 >= MAX_ROUNDS:
        return False
    if next_round_budget(batch=batch, config=config).hits == 0:
        return False
    last_round_judged = Assignment.objects.filter(
        hit__batch=batch, hit__round=batch.round, status=AssignmentStatus.APPROVED
    ).exists()
    if not last_round_judged:
        return False
    estimates = [d["estimate"] for d in report.get("directions", {}).values()]
    return not (
        estimates
        and all(
            e is not None and e["unfound_high"] <= STOP_SHARE * max(e["found"], 1)
            for e in estimates
        )
    )


def round_advance(*, batch: Batch) -> bool:
    """Move an aggregated batch to the next round's selection; True for the caller that did."""
    moved = Batch.objects.filter(
        pk=batch.pk, state=BatchState.AGGREGATING, round=batch.round
    ).update(state=BatchState.POOLING, round=F("round") + 1, error="")
    return bool(moved)
