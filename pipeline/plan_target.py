"""The planner's prediction of what a `target_recall` costs: its inputs from the database.

Each direction's pool (`mitl.curation.target.DirectionPool`): the chances of its unjudged
ranked pairs (the planner's, `pair_chances`), its tail, the tail rate earlier adaptive
batches' samples measured in that direction (both directions' together where one has none),
and the positives already found on its queries. Without any measured tail rate the recall
is unknown, and so is when a target is reached: the plan says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from django.db.models import Count, Q

from annotation.models import Candidate, Direction
from mitl.config import BatchConfig
from mitl.curation.planner import pair_chances
from mitl.curation.rankings import Pair, QueryRankings
from mitl.curation.target import (
    DirectionPool,
    RoundPlan,
    TargetPlan,
    target_plan,
    target_sentence,
)

DIRECTIONS = (Direction.I2T, Direction.T2I)


@dataclass(frozen=True)
class TargetPrediction:
    """What the plan says about the config's `target_recall` (absent without one)."""

    plan: TargetPlan | None  # None: it cannot be predicted (`sentence` says why)
    sentence: str

    def to_json(self) -> dict:
        plan = self.plan
        figures = {}
        if plan is not None:
            figures = {
                "reached": plan.reached,
                "budget": plan.budget,
                "judgements": plan.cost.judgements,
                "rounds": plan.cost.rounds,
                "hits": plan.cost.hits,
                "recall_low": {d: round(low, 4) for d, low in plan.recall_low.items()},
                "beyond": None
                if plan.beyond is None
                else {
                    "reached": plan.beyond_reached,
                    "judgements": plan.beyond.judgements,
                    "rounds": plan.beyond.rounds,
                    "hits": plan.beyond.hits,
                },
            }
        return {"predicted": plan is not None, "sentence": self.sentence, **figures}


def history_tail_rates(history: Sequence[int]) -> dict[str, float]:
    """Each direction's yield of earlier batches' random tail samples (where they have one)."""
    rows = (
        Candidate.objects.filter(batch_id__in=list(history), sample_stratum="tail")
        .filter(verdict__isnull=False)
        .values("direction")
        .annotate(judged=Count("pk"), positive=Count("pk", filter=Q(verdict__is_positive=True)))
    )
    return {row["direction"]: row["positive"] / row["judged"] for row in rows if row["judged"]}


def ranked_pools(
    rankings: Sequence[QueryRankings],
    yields: Mapping[tuple[str, int], Sequence[float]],
    excluded: set[Pair],
    *,
    tails: Mapping[str, int],
    found: Mapping[str, float],
    tail_rates: Mapping[str, float],
    pooled_rate: float | None,
) -> dict[str, DirectionPool] | None:
    """Each direction's pool; None when no earlier sample measured a tail rate."""
    if pooled_rate is None:
        return None
    pools = {}
    for direction in DIRECTIONS:
        queries = [q for q in rankings if q.group == direction]
        if not queries:
            continue
        pools[direction] = DirectionPool(
            chances=list(pair_chances(queries, yields, excluded).values()),
            tail_pairs=tails.get(direction, 0),
            tail_rate=tail_rates.get(direction, pooled_rate),
            found=found.get(direction, 0.0),
            queries=len(queries),
        )
    return pools


def found_before(found_pairs: set[Pair], query_items: Mapping[str, set[int]]) -> dict[str, float]:
    """Positives already found on each direction's queries (known, other batches' verdicts)."""
    side = {Direction.I2T: 0, Direction.T2I: 1}
    return {
        direction: float(sum(pair[side[direction]] in items for pair in found_pairs))
        for direction, items in query_items.items()
    }


def found_before_retrieval(config: BatchConfig, captions_per_image: float) -> dict[str, float]:
    """Before the queries are drawn: each query's own known positives, on average."""
    return {
        Direction.I2T: config.n_image_queries * captions_per_image,  # its own captions
        Direction.T2I: float(config.n_caption_queries),  # its own image
    }


def target_prediction(
    config: BatchConfig,
    pools: Mapping[str, DirectionPool] | None,
    *,
    budgets: Sequence[int],
    reposts: float,
) -> TargetPrediction | None:
    """Predict what the config's `target_recall` takes (None when it names none)."""
    if not config.target_recall:
        return None
    if pools is None:
        return TargetPrediction(
            None,
            f"target_recall {config.target_recall:g}: not predicted: no earlier adaptive "
            "batch on this dataset sampled the pairs nobody ranks, so the positives there, "
            "and the recall, are unknown.",
        )
    budget = config.budget_judgements or max(budgets, default=0)
    rounds = RoundPlan(
        round_size=replace(config, budget_judgements=budget).judgements_per_round,
        items_per_hit=config.items_per_hit,
        hit_size=config.hit_size,
        assignments_per_hit=config.assignments_per_hit,
        reposts=reposts,
        estimate_share=config.estimate_share,
    )
    plan = target_plan(pools, rounds, budget=budget, target=config.target_recall)
    return TargetPrediction(plan, target_sentence(plan))
