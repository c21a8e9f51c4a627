"""Choosing an adaptive round's pairs: the policy's picks, the random sample, the re-shown.

`round_select` runs as the pooling stage of an adaptive batch (`pipeline.pool`); the
estimate its sample feeds and the decision to go on live in `pipeline.curation`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Q

from annotation.models import Batch, Candidate, Direction, Proposal, Ranking, Verdict
from mitl.config import BatchConfig
from mitl.curation.crowd_learner import LEARNER_ID
from mitl.curation.design import predicted_sample, with_predictions
from mitl.curation.learned import group_model
from mitl.curation.policies import Pick, policy_select
from mitl.curation.rankings import Pair

from .bulk import CANDIDATE_FIELDS, PROPOSAL_FIELDS, rows_insert
from .curation import (
    REPORT_KEY,
    CurationInputs,
    curation_inputs,
    current_round_record,
    next_round_budget,
    policy_settings,
    round_records,
    round_samples,
    universes_of,
)
from .curation_learner import learner_rankings_add
from .progress import StageTracker

SampledPair = tuple[int, Pair, str]  # (query id, pair, stratum) of the random sample
Populations = dict[str, dict[str, int]]  # direction -> stratum -> unjudged pairs in it
# direction -> stratum -> {"predicted": Σ predictions over its pairs, "rate": anticipated yield}
Predictions = dict[str, dict[str, dict[str, float]]]


def round_select(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Write the current round's candidates once; return how many the round has.

    Most of the round's pairs come from the adjudication policy; `estimate_share` of them
    is a stratified random sample of the unjudged pairs, split over the directions by
    their number of queries. Idempotent: a round that has candidates is not chosen again.
    """
    chosen = current_round_record(batch)
    if chosen is not None:  # chosen already (the record commits with the candidates): a retry
        return _round_already_chosen(chosen, tracker)
    plan = next_round_budget(batch=batch, config=config)
    inputs = curation_inputs(batch=batch, config=config)
    tracker.start(plan.task_pairs)
    learner = learner_rankings_add(batch=batch, config=config, inputs=inputs)
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
    sampled, populations, predictions = _unjudged_sample(
        batch=batch, config=config, inputs=inputs, taken=taken, total=sample_total
    )
    with transaction.atomic():
        _candidates_write(batch, inputs, picks, sampled)
        _round_record(
            batch,
            {
                "round": batch.round,
                "hits_planned": plan.hits,
                "judgements_planned": plan.judgements_planned,
                "policy_pairs": len(picks),
                "sample_pairs": len(sampled),
                "rejudged": rejudged,
                "sample_population": populations,
                "sample_design": predictions,
                **({"learner": learner} if learner else {}),
            },
        )
    tracker.finish()
    return len(picks) + len(sampled) + len(rejudged)


def _round_already_chosen(chosen: Mapping[str, Any], tracker: StageTracker) -> int:
    """Report a retried round as done at once; return how many pairs it has."""
    total = chosen["policy_pairs"] + chosen["sample_pairs"] + len(chosen["rejudged"])
    tracker.start(total)
    tracker.finish()
    return total


def _unjudged_sample(
    *,
    batch: Batch,
    config: BatchConfig,
    inputs: CurationInputs,
    taken: set[Pair],
    total: int,
) -> tuple[list[SampledPair], Populations, Predictions]:
    """Draw the round's stratified random sample of unjudged pairs, direction by direction.

    Each direction gets a share of `total` by its number of queries, stratified by the
    logistic fusion's predictions (`mitl.curation.design`); `taken` grows by the pairs
    drawn. Return the sample, each direction's stratum sizes when it was drawn, and each
    stratum's population sum of predictions and anticipated yield (what the next rounds'
    allocation calibrates against).
    """
    rng = np.random.default_rng([config.seed, batch.pk, batch.round])
    n_queries = {
        d: sum(q.direction == d for q in inputs.queries) for d in (Direction.I2T, Direction.T2I)
    }
    recorded = [entry for entry in round_records(batch) if "sample_design" in entry]
    populations: Populations = {}
    predictions: Predictions = {}
    sampled: list[SampledPair] = []
    for direction in (Direction.I2T, Direction.T2I):
        if not n_queries[direction]:
            continue
        queries = [q for q in inputs.rankings if q.group == direction]
        earlier = with_predictions(
            round_samples(batch, inputs, direction=direction),
            {e["round"]: e["sample_design"].get(direction, {}) for e in recorded},
        )
        sample = predicted_sample(
            universes_of(inputs, direction, taken),
            inputs.caption_pks if direction == Direction.I2T else inputs.image_pks,
            group_model(queries, inputs.outcomes, taken),
            earlier,
            total * n_queries[direction] // max(len(inputs.queries), 1),
            rng,
        )
        taken.update(pair for _, pair, _ in sample.drawn)
        sampled += sample.drawn
        populations[direction] = sample.population
        predictions[direction] = sample.design
    return sampled, populations, predictions


def _candidates_write(
    batch: Batch, inputs: CurationInputs, picks: Sequence[Pick], sampled: Sequence[SampledPair]
) -> None:
    """Insert the round's candidates, the policy's picks first, and the picks' proposals."""
    directions = {q.pk: q.direction for q in inputs.queries}
    rows = [(p.query_id, p.pair, "") for p in picks] + list(sampled)
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
            if annotator_id != LEARNER_ID  # the learner has no annotator row
        ],
    )


def rejudge_candidates(*, batch: Batch, config: BatchConfig) -> list[int]:
    """Judged pairs the next round shows again: a tie, or fewer answers than asked for.

    Adaptive redundancy: a pair whose workers split evenly (the rule's confidence ≤ ½; ties
    count as negative), that lost work to rejection, or a randomly sampled pair judged
    positive on one answer gets one more HIT's worth of answers, once. Verdicts pool every
    approved answer, so the new ones break the tie (a sampled YES against a NO is a tie:
    negative).
    """
    done = {candidate for entry in round_records(batch) for candidate in entry.get("rejudged", [])}
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
    chosen = current_round_record(batch)
    return list(chosen.get("rejudged", [])) if chosen else []


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
