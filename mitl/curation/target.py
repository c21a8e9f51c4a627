"""What a `target_recall` costs: the planner's rounds, and the lower bound each would give.

A batch with `target_recall` ends its rounds once every direction's lower 95% bound of the
estimated recall reaches it (`pipeline.curation.target_reached`). The planner predicts when,
from the curves it already uses (`planner`): each unjudged ranked pair's chance of being a
positive, and the tail's rate measured by earlier batches' samples. Round after round, as
`budget.round_budget` plans them, the policy takes the likeliest pairs left in each
direction, the directions sharing the round as their ranked pairs share the positives
(`_policy_split`); `estimate_share` of the round is the random sample, split over the
directions by their queries, then over three strata by Neyman's rule as
`design.predicted_sample` splits it (the ranked pairs cut in two at equal Σ√(p(1−p)), and
the tail). Each direction's estimate is then what `estimate.remaining_estimate` computes
if every stratum's sample held exactly its expected positives: the same round weights,
weighted count, variance, heaviest positive and mid-p gamma interval. So the predicted
round is the one where a run's bound reaches the target about one time in two; a run whose
sample draws fewer positives than expected takes longer.

It leaves out earlier batches' samples on the same queries (the estimate pools them: the
prediction is then cautious), judges a pair found in both directions twice, and is as good
as the chances: pooled yields know nothing of rich and poor queries, which a learned policy
finds, so it is cautious there too (docs/curation.md has a measure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .budget import MAX_ROUNDS, round_budget
from .estimate import RoundSample, StratumSample, neyman_allocation, remaining_estimate

RATE_RANGE = (1e-3, 0.999)  # as `design.RATE_RANGE`: a rate's spread is never 0
BEYOND = 10  # not reached within the budget: look this many budgets further


@dataclass(frozen=True)
class DirectionPool:
    """One direction's pairs as the planner sees them, before the batch's first round."""

    chances: Sequence[float]  # each unjudged ranked pair's chance of being a positive
    tail_pairs: int  # pairs no annotator ranks
    tail_rate: float  # a tail pair's chance
    found: float  # positives found on these queries already (known, earlier batches)
    queries: int  # the sample is split over the directions by their queries


@dataclass(frozen=True)
class RoundsCost:
    """What the rounds up to the target (or up to the budget) cost."""

    judgements: int
    rounds: int
    hits: int


@dataclass(frozen=True)
class TargetPlan:
    target: float
    budget: int
    reached: bool  # within the budget
    cost: RoundsCost  # up to the target, or every round the budget buys when not reached
    recall_low: dict[str, float]  # each direction's predicted lower bound then
    # Not reached within the budget: the same rounds on, up to BEYOND budgets or MAX_ROUNDS
    # rounds, until it is reached (`beyond_reached`) or they stop.
    beyond: RoundsCost | None = None
    beyond_reached: bool = False


@dataclass(frozen=True)
class RoundPlan:
    """How the batch's rounds are bought: `round_budget`'s inputs besides the budget."""

    round_size: int
    items_per_hit: int
    hit_size: int
    assignments_per_hit: int
    reposts: float
    estimate_share: float


@dataclass
class _Direction:
    """A direction's state as rounds go: the policy takes a prefix of its chances."""

    pool: DirectionPool
    chances: np.ndarray  # descending
    cumulative: np.ndarray  # prefix sums of chances
    spread: np.ndarray  # prefix sums of √(p(1−p))
    taken: int = 0
    tail_sampled: int = 0
    ranked_sampled: int = 0  # ranked pairs the samples drew
    ranked_sample_positives: float = 0.0
    sample_positives: float = 0.0
    samples: list[RoundSample] = field(default_factory=list)  # with expected positives
    found_after: list[float] = field(default_factory=list)  # found at each round's end

    @classmethod
    def of(cls, pool: DirectionPool) -> _Direction:
        chances = np.sort(np.asarray(pool.chances, dtype=float))[::-1]
        clipped = np.clip(chances, *RATE_RANGE)
        spread = np.sqrt(clipped * (1 - clipped))
        return cls(
            pool,
            chances,
            np.concatenate([[0.0], np.cumsum(chances)]),
            np.concatenate([[0.0], np.cumsum(spread)]),
        )

    def strata(self) -> dict[str, tuple[int, float]]:
        """Each stratum of the unjudged pairs: (pairs, Σ chances).

        The ranked pairs the policy left, cut at equal Σ√(p(1−p)), less what earlier
        samples drew from them (taken from both in proportion), and the tail.
        """
        end = len(self.chances)
        half = (self.spread[self.taken] + self.spread[end]) / 2
        cut = int(np.clip(np.searchsorted(self.spread, half), self.taken, end))
        pairs = end - self.taken
        chances = float(self.cumulative[end] - self.cumulative[self.taken])
        keep_pairs = 1 - min(self.ranked_sampled / pairs, 1.0) if pairs else 0.0
        keep = 1 - min(self.ranked_sample_positives / chances, 1.0) if chances > 0 else 0.0
        tail = self.pool.tail_pairs - self.tail_sampled
        return {
            "top": (
                round((cut - self.taken) * keep_pairs),
                float(self.cumulative[cut] - self.cumulative[self.taken]) * keep,
            ),
            "ranked": (
                round((end - cut) * keep_pairs),
                float(self.cumulative[end] - self.cumulative[cut]) * keep,
            ),
            "tail": (tail, tail * self.pool.tail_rate),
        }

    def found(self) -> float:
        return self.pool.found + float(self.cumulative[self.taken]) + self.sample_positives

    def sample(self, round_index: int, total: int) -> None:
        """Draw the round's sample, each stratum holding its expected positives."""
        strata = {h: s for h, s in self.strata().items() if s[0] > 0}
        if strata and total > 0:
            rates = {h: float(np.clip(p / n, *RATE_RANGE)) for h, (n, p) in strata.items()}
            allocation = neyman_allocation({h: n for h, (n, _) in strata.items()}, total, rates)
            drawn = {
                h: StratumSample(n, allocation[h], allocation[h] * p / n)
                for h, (n, p) in strata.items()
            }
            self.samples.append(RoundSample(round_index, drawn, 0))
            for name, stratum in drawn.items():
                self.sample_positives += stratum.positives
                if name == "tail":
                    self.tail_sampled += stratum.judged
                else:
                    self.ranked_sampled += stratum.judged
                    self.ranked_sample_positives += stratum.positives
        self.found_after.append(self.found())

    def recall_low(self) -> float:
        """The lower 95% recall bound `remaining_estimate` gives these samples (0 without)."""
        now = self.found()
        samples = [
            replace(sample, positives_judged_later=now - self.found_after[index])
            for index, sample in enumerate(self.samples)
        ]
        estimate = remaining_estimate(round(now), samples)
        return 0.0 if estimate is None else float(estimate.recall_low)


def _policy_split(directions: Mapping[str, _Direction], picks: int) -> None:
    """Give each direction its share of the round's policy picks, likeliest pairs first.

    In proportion to the positives its ranked pairs hold (Σ chances): the yields are pooled
    per direction, so they cannot say which direction's pair is likelier (a learned policy
    calibrates each direction on its own, and goes deep in its rich queries). A direction
    with nothing left gives its share to the others.
    """
    while picks > 0:
        left = {n: d for n, d in directions.items() if d.taken < len(d.chances)}
        if not left:
            return
        weights = {n: max(float(d.cumulative[-1]), 1e-9) for n, d in left.items()}
        given = 0
        for name, direction in left.items():
            share = max(round(picks * weights[name] / sum(weights.values())), 1)
            take = min(share, len(direction.chances) - direction.taken, picks - given)
            direction.taken += take
            given += take
        picks -= given


def rounds_to_target(
    pools: Mapping[str, DirectionPool], rounds: RoundPlan, *, budget: int, target: float
) -> tuple[RoundsCost, dict[str, float], bool]:
    """Run the rounds `budget` buys until every direction's lower bound reaches `target`.

    Returns what they cost, each direction's lower bound after the last, and whether the
    target was reached.
    """
    directions = {d: _Direction.of(pool) for d, pool in pools.items()}
    ranked = sum(len(d.chances) for d in directions.values())
    queries = sum(pool.queries for pool in pools.values()) or 1
    spent = hits = picked = count = 0
    lows = dict.fromkeys(directions, 0.0)
    while count < MAX_ROUNDS:
        plan = round_budget(
            budget=budget,
            spent=spent,
            round_size=rounds.round_size,
            items_per_hit=rounds.items_per_hit,
            hit_size=rounds.hit_size,
            assignments_per_hit=rounds.assignments_per_hit,
            reposts=rounds.reposts,
        )
        if plan.hits == 0:
            break
        sample = round(plan.task_pairs * rounds.estimate_share)
        policy = min(plan.task_pairs - sample, ranked - picked)
        picked += policy
        _policy_split(directions, policy)
        for direction in directions.values():
            direction.sample(count, (plan.task_pairs - policy) * direction.pool.queries // queries)
        spent += plan.judgements_planned
        hits += plan.hits
        count += 1
        lows = {name: direction.recall_low() for name, direction in directions.items()}
        if all(low >= target for low in lows.values()):
            return RoundsCost(spent, count, hits), lows, True
    return RoundsCost(spent, count, hits), lows, False


def target_plan(
    pools: Mapping[str, DirectionPool], rounds: RoundPlan, *, budget: int, target: float
) -> TargetPlan:
    """Predict what reaching `target` takes within `budget`, or that it is not reached.

    When it is not, the same rounds go on past the budget (up to `BEYOND` budgets) to say
    what it would take.
    """
    cost, lows, reached = rounds_to_target(pools, rounds, budget=budget, target=target)
    if reached:
        return TargetPlan(target, budget, True, cost, lows)
    more, _, later = rounds_to_target(pools, rounds, budget=budget * BEYOND, target=target)
    return TargetPlan(target, budget, False, cost, lows, more, later)


def target_sentence(plan: TargetPlan) -> str:
    """One sentence for the pages and the command (the JSON carries the figures)."""
    bound = ", ".join(f"{d} {low:.2f}" for d, low in sorted(plan.recall_low.items()))
    if plan.reached:
        return (
            f"target_recall {plan.target:g}: every direction's lower 95% bound is predicted "
            f"to reach it after {plan.cost.rounds} round{'s' * (plan.cost.rounds != 1)}, "
            f"{plan.cost.judgements:,} judgements ({plan.cost.hits:,} HITs) of the "
            f"{plan.budget:,} budgeted (bounds then: {bound})."
        )
    more = plan.beyond or RoundsCost(plan.cost.judgements, plan.cost.rounds, plan.cost.hits)
    after = (
        f"; about {more.judgements:,} judgements ({more.rounds} rounds) would reach it"
        if plan.beyond_reached
        else f"; not even {more.judgements:,} judgements ({more.rounds} rounds) would reach it"
    )
    return (
        f"target_recall {plan.target:g}: not reachable within the budget of "
        f"{plan.budget:,} judgements (predicted lower bounds after its "
        f"{plan.cost.rounds} rounds: {bound or 'no estimate'}){after}."
    )
