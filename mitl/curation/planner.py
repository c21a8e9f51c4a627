"""The planner: what N judgements buy under each strategy, before anyone is paid.

From a batch's rankings (retrieval is free: machines only) and the annotators' yields per
direction and rank band (`band_yields` over earlier batches' verdicts on the dataset, or
the generic prior falling with rank when there are none), every ranked pair gets a chance
of being a positive: the best of its annotators' yields at their ranks. Then, for each
budget:

- `fixed` judges every annotator's top k once; a budget below its cost buys that share of
  it (a fixed batch cut short), a larger one buys nothing more.
- `adaptive` spends `estimate_share` on its random sample and the rest on the pairs most
  likely positive, as if its policy ranked them as well as the yields do.

Recall needs the positives nobody ranks: with a tail rate measured by earlier adaptive
batches' samples it is Σ chances + tail pairs × tail rate; without one it is left out.
A model, not a promise: the prediction is as good as the yields it starts from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mitl.bias_charts import figure_svg

from .budget import round_budget
from .policies import rank_band
from .rankings import Pair, QueryRankings


@dataclass(frozen=True)
class PlanCosts:
    """What one pair costs: HIT packing, workers per HIT and the re-post reserve."""

    hit_size: int
    items_per_hit: int
    assignments_per_hit: int
    reposts: float

    def pairs_for(self, judgements: int) -> int:
        """The pairs `judgements` buy, as an adaptive round plans them (`round_budget`)."""
        return round_budget(
            budget=judgements,
            spent=0,
            round_size=judgements,
            items_per_hit=self.items_per_hit,
            hit_size=self.hit_size,
            assignments_per_hit=self.assignments_per_hit,
            reposts=self.reposts,
        ).task_pairs

    def judgements_for(self, pairs: int) -> int:
        hits = math.ceil(pairs / self.hit_size)
        return math.ceil(hits * self.items_per_hit * self.assignments_per_hit * (1 + self.reposts))


@dataclass(frozen=True)
class PlanPoint:
    strategy: str
    budget: int
    judgements: int  # what the strategy spends of the budget
    pairs: int
    positives: float  # predicted positives found
    recall: float | None  # predicted recall of the queries' positives, when it can be told


def slot_rankings(
    queries_by_group: Mapping[str, int], annotators: Sequence[int], depth: int
) -> list[QueryRankings]:
    """Stand-in rankings before retrieval: every annotator's `depth` slots of every query.

    Each slot is its own pair (negative ids, never a real pk), so overlaps between
    annotators are ignored: an upper bound, as the wizard's cost estimate is.
    """
    rankings = []
    query_id = 0
    for group, count in sorted(queries_by_group.items()):
        for _ in range(count):
            query_id += 1
            lists = {
                annotator: [(-query_id, -(column * depth + rank)) for rank in range(1, depth + 1)]
                for column, annotator in enumerate(annotators)
            }
            rankings.append(QueryRankings(query_id, lists, group))
    return rankings


def pair_chances(
    rankings: Sequence[QueryRankings],
    yields: Mapping[tuple[str, int], Sequence[float]],
    excluded: set[Pair],
) -> dict[Pair, float]:
    """Each ranked pair's chance of being positive: its best annotator yield at its rank."""
    chances: dict[Pair, float] = {}
    for query in rankings:
        for annotator, pairs in query.lists.items():
            curve = yields[(query.group, annotator)]
            for rank, pair in enumerate(pairs, start=1):
                if pair in excluded:
                    continue
                chance = curve[rank_band(rank)]
                if chance > chances.get(pair, -1.0):
                    chances[pair] = chance
    return chances


def fixed_pairs(rankings: Sequence[QueryRankings], k: int, excluded: set[Pair]) -> set[Pair]:
    """The union of every annotator's top k over the queries (what `fixed` judges)."""
    return {
        pair
        for query in rankings
        for pairs in query.lists.values()
        for pair in pairs[:k]
        if pair not in excluded
    }


def plan_points(
    *,
    chances: Mapping[Pair, float],
    fixed: set[Pair],
    budgets: Sequence[int],
    fixed_costs: PlanCosts,
    adaptive_costs: PlanCosts,
    estimate_share: float,
    tail_pairs: int,
    tail_rate: float | None,
) -> list[PlanPoint]:
    """Predicted positives (and recall, when the tail rate is known) per strategy and budget."""
    ordered = sorted(chances.values(), reverse=True)
    cumulative = [0.0]
    for chance in ordered:
        cumulative.append(cumulative[-1] + chance)
    total = None if tail_rate is None else cumulative[-1] + tail_pairs * tail_rate
    fixed_positives = sum(chances.get(pair, 0.0) for pair in fixed)
    fixed_cost = fixed_costs.judgements_for(len(fixed))
    points = []
    for budget in budgets:
        share = min(1.0, budget / fixed_cost) if fixed_cost else 0.0
        found = fixed_positives * share
        points.append(
            PlanPoint(
                "fixed",
                budget,
                min(budget, fixed_cost),
                round(len(fixed) * share),
                found,
                None if not total else found / total,
            )
        )
        pairs = adaptive_costs.pairs_for(budget)
        policy = min(round(pairs * (1 - estimate_share)), len(ordered))
        sampled = pairs - policy
        sample_rate = tail_rate if tail_rate is not None else 0.0
        found = cumulative[policy] + sampled * sample_rate
        points.append(
            PlanPoint(
                "adaptive",
                budget,
                min(budget, adaptive_costs.judgements_for(pairs)),
                pairs,
                found,
                None if not total else min(found / total, 1.0),
            )
        )
    return points


def plan_empty_reason(points: Sequence[PlanPoint], fixed_judgements: int) -> str | None:
    """Say why a plan has nothing to chart, or None when some budget finds positives.

    An empty chart would draw a meaningless axis (−0.04…0.04) and "fixed judges every
    annotator's top k once for 0 judgements": a sentence says what is going on instead.
    """
    if not fixed_judgements and not any(p.pairs for p in points):
        return (
            "Nothing to plan: no ranked pair is left to judge (every pair the annotators "
            "rank is judged or known already), so no budget buys anything."
        )
    if not any(p.positives > 0 for p in points):
        return (
            "No chart: no budget is predicted to find a positive (the yields these "
            "predictions start from are all zero)."
        )
    return None


def plan_chart_svg(points: Sequence[PlanPoint]) -> str:
    """Predicted positives against budget, one line per strategy (inline SVG)."""
    # Here: matplotlib is slow to import, so only while a chart is drawn (as in bias_charts).
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.5, 3.4))
    axes = figure.add_subplot()
    for strategy, style in (("fixed", "o--"), ("adaptive", "s-")):
        mine = [p for p in points if p.strategy == strategy]
        axes.plot([p.budget for p in mine], [p.positives for p in mine], style, label=strategy)
    axes.set_xlabel("budget (judgements)")
    axes.set_ylabel("predicted positives found")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left")
    figure.tight_layout()
    return figure_svg(figure, scope="plan-chart")
