"""The planner's ORM edge: a batch's rankings, earlier batches' yields, the plan and its chart.

Needs the batch's rankings (retrieval done; nothing paid yet). Yields come from every
earlier batch on the dataset that has verdicts: their own rankings and verdicts, per
direction, annotator and rank band (`mitl.curation.policies.band_yields`); an annotator
no earlier batch used starts from the generic prior. See `mitl.curation.planner`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from django.db.models import Count, Q

from annotation.errors import ServiceError
from annotation.models import (
    Batch,
    Candidate,
    Dataset,
    MachineAnnotator,
    Ranking,
)
from mitl.config import BatchConfig, batch_config
from mitl.curation.estimate import strata_sizes
from mitl.curation.planner import (
    PlanCosts,
    PlanPoint,
    fixed_pairs,
    pair_chances,
    plan_chart_svg,
    plan_empty_reason,
    plan_points,
    slot_rankings,
)
from mitl.curation.policies import RANK_BANDS, band_yields, prior_yield
from mitl.curation.rankings import QueryRankings
from mitl.curation.target import DirectionPool

from .curation import CurationInputs, curation_inputs, repost_share_of, universes_of
from .plan_target import (
    DIRECTIONS,
    TargetPrediction,
    found_before,
    found_before_retrieval,
    history_tail_rates,
    ranked_pools,
    target_prediction,
)

BUDGET_SHARES = (0.25, 0.5, 1.0, 1.5, 2.0)  # default budgets: shares of fixed's cost
HISTORY_BATCHES = 5  # the most recent earlier batches with verdicts whose yields count
YIELD_STRENGTH = 5.0


@dataclass(frozen=True)
class Plan:
    points: list[PlanPoint]
    fixed_judgements: int  # what fixed spends to judge every annotator's top k
    history: list[int]  # earlier batches whose verdicts gave the yields
    tail_rate: float | None
    target: TargetPrediction | None = None  # what the config's `target_recall` takes

    @property
    def empty(self) -> str | None:
        """Why there is nothing to chart (None when there is)."""
        return plan_empty_reason(self.points, self.fixed_judgements)

    def chart_svg(self) -> str:
        """The chart, or "" when the plan is empty (pages show `empty` instead)."""
        return "" if self.empty else plan_chart_svg(self.points)

    def to_json(self) -> dict:
        return {
            "empty": self.empty,
            "fixed_judgements": self.fixed_judgements,
            "history_batches": self.history,
            "tail_rate": self.tail_rate,
            "target": None if self.target is None else self.target.to_json(),
            "points": [
                {
                    "strategy": p.strategy,
                    "budget": p.budget,
                    "judgements": p.judgements,
                    "pairs": p.pairs,
                    "positives": round(p.positives, 1),
                    "recall": None if p.recall is None else round(p.recall, 4),
                }
                for p in self.points
            ],
        }


def batch_plan(*, batch: Batch, config: BatchConfig, budgets: Sequence[int] = ()) -> Plan:
    """Predict what each budget buys under each strategy for this batch's queries."""
    if not Ranking.objects.filter(query__batch=batch).exists():
        raise ServiceError(
            f"batch {batch.pk} has no rankings yet: plan it once retrieval has run "
            f"(python manage.py batch_run {batch.pk} --until pooling)"
        )
    inputs = curation_inputs(batch=batch, config=config)
    history = _history(dataset_id=batch.dataset_id, exclude=batch.pk)
    yields = _history_yields(history)
    _prior_where_unknown(yields, inputs.rankings)
    excluded = set(inputs.outcomes) | inputs.pending | inputs.known
    chances = pair_chances(inputs.rankings, yields, excluded)
    fixed = fixed_pairs(inputs.rankings, config.k, excluded)
    costs = PlanCosts(
        config.hit_size, config.items_per_hit, config.assignments_per_hit, repost_share_of(history)
    )
    tails = _tail_pairs(inputs)
    plan = _plan(chances, fixed, costs, config, budgets, sum(tails.values()), history)
    if not config.target_recall:
        return plan
    items = {d: {q.item_id for q in inputs.queries if q.direction == d} for d in DIRECTIONS}
    found = inputs.known | {pair for pair, positive in inputs.outcomes.items() if positive}
    pools = ranked_pools(
        inputs.rankings,
        yields,
        excluded,
        tails=tails,
        found=found_before(found, items),
        tail_rates=history_tail_rates(history),
        pooled_rate=plan.tail_rate,
    )
    return _with_target(plan, config, pools, costs)


def _with_target(
    plan: Plan, config: BatchConfig, pools: Mapping[str, DirectionPool] | None, costs: PlanCosts
) -> Plan:
    """The plan with what its `target_recall` takes, up to its largest budget if it has none."""
    budgets = [point.budget for point in plan.points]
    target = target_prediction(config, pools, budgets=budgets, reposts=costs.reposts)
    return replace(plan, target=target)


def _plan(
    chances: dict[tuple[int, int], float],
    fixed: set[tuple[int, int]],
    costs: PlanCosts,
    config: BatchConfig,
    budgets: Sequence[int],
    tail_pairs: int,
    history: list[int],
) -> Plan:
    fixed_cost = costs.judgements_for(len(fixed))
    wanted = sorted(
        set(budgets)
        or {round(fixed_cost * share) for share in BUDGET_SHARES}
        | ({config.budget_judgements} if config.budget_judgements else set())
    )
    tail_rate = _history_tail_rate(history)
    points = plan_points(
        chances=chances,
        fixed=fixed,
        budgets=[b for b in wanted if b > 0],
        fixed_costs=costs,
        adaptive_costs=costs,
        estimate_share=config.estimate_share,
        tail_pairs=tail_pairs,
        tail_rate=tail_rate,
    )
    return Plan(points, fixed_cost, history, tail_rate)


def _history(*, dataset_id: int, exclude: int | None) -> list[int]:
    """The most recent earlier batches on the dataset that have verdicts (oldest first)."""
    batches = Batch.objects.filter(dataset_id=dataset_id, candidates__verdict__isnull=False)
    if exclude is not None:
        batches = batches.exclude(pk=exclude)
    return sorted(batches.distinct().order_by("-pk").values_list("pk", flat=True)[:HISTORY_BATCHES])


def _prior_where_unknown(
    yields: dict[tuple[str, int], list[float]], rankings: Sequence[QueryRankings]
) -> None:
    """An annotator no earlier batch judged starts from the generic prior."""
    for query in rankings:
        for annotator in query.lists:
            yields.setdefault(
                (query.group, annotator), [prior_yield(b) for b in range(len(RANK_BANDS))]
            )


def config_plan(*, dataset: Dataset, config: BatchConfig, budgets: Sequence[int] = ()) -> Plan:
    """The plan before retrieval (the wizard): every annotator's slots instead of rankings.

    Overlaps between annotators are unknown before retrieval, so fixed's pairs and cost are
    the bounds the wizard's estimate shows; yields and the tail rate come from earlier
    batches on the dataset as for `batch_plan`.
    """
    annotators = list(
        MachineAnnotator.objects.filter(name__in=config.annotators)
        .order_by("name")
        .values_list("pk", flat=True)
    )
    history = _history(dataset_id=dataset.pk, exclude=None)
    yields = _history_yields(history)
    rankings = slot_rankings(
        {"i2t": config.n_image_queries, "t2i": config.n_caption_queries}, annotators, config.depth
    )
    _prior_where_unknown(yields, rankings)
    chances = pair_chances(rankings, yields, set())
    fixed = fixed_pairs(rankings, config.k, set())
    costs = PlanCosts(
        config.hit_size, config.items_per_hit, config.assignments_per_hit, repost_share_of(history)
    )
    n_images = dataset.images.count()
    n_captions = dataset.captions.filter(is_invalid=False).count()
    slots = config.depth * len(annotators)
    tails = {
        "i2t": config.n_image_queries * max(n_captions - slots, 0),
        "t2i": config.n_caption_queries * max(n_images - slots, 0),
    }
    plan = _plan(chances, fixed, costs, config, budgets, sum(tails.values()), history)
    if not config.target_recall:
        return plan
    pools = ranked_pools(
        rankings,
        yields,
        set(),
        tails=tails,
        found=found_before_retrieval(config, n_captions / max(n_images, 1)),
        tail_rates=history_tail_rates(history),
        pooled_rate=plan.tail_rate,
    )
    return _with_target(plan, config, pools, costs)


def _history_yields(history: list[int]) -> dict[tuple[str, int], list[float]]:
    """Band yields over the earlier batches' own rankings and verdicts."""
    rankings = []
    outcomes: dict[tuple[int, int], bool] = {}
    for batch in Batch.objects.filter(pk__in=history).order_by("pk"):
        inputs = curation_inputs(batch=batch, config=batch_config(batch))
        rankings += inputs.rankings
        outcomes.update(inputs.outcomes)
    return band_yields(rankings, outcomes, YIELD_STRENGTH) if rankings else {}


def _history_tail_rate(history: list[int]) -> float | None:
    """The yield of earlier adaptive batches' random tail samples (None without any)."""
    counts = Candidate.objects.filter(
        batch_id__in=history, sample_stratum="tail", verdict__isnull=False
    ).aggregate(judged=Count("pk"), positive=Count("pk", filter=Q(verdict__is_positive=True)))
    if not counts["judged"]:
        return None
    return counts["positive"] / counts["judged"]


def _tail_pairs(inputs: CurationInputs) -> dict[str, int]:
    """Each direction's pairs that no annotator ranks and nobody took."""
    taken = set(inputs.outcomes) | inputs.pending | inputs.known
    return {
        direction: strata_sizes(universes_of(inputs, direction, taken))["tail"]
        for direction in DIRECTIONS
    }
