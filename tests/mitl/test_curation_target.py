"""What a `target_recall` costs: the planner's rounds, the estimator's bound on them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mitl.curation.budget import round_budget
from mitl.curation.estimate import (
    RoundSample,
    StratumSample,
    neyman_allocation,
    remaining_estimate,
)
from mitl.curation.target import (
    DirectionPool,
    RoundPlan,
    rounds_to_target,
    target_plan,
    target_sentence,
)

# One HIT: 10 pairs, 1 worker, no golden pair, no re-post reserve: 10 judgements buy 10 pairs.
ROUNDS = RoundPlan(
    round_size=100,
    items_per_hit=10,
    hit_size=10,
    assignments_per_hit=1,
    reposts=0.0,
    estimate_share=0.2,
)


def test_one_round_is_the_estimate_of_its_expected_sample_by_hand() -> None:
    # 200 ranked pairs of chance 0.3, 1,000 tail pairs of chance 0.01, 5 positives known.
    pool = DirectionPool(chances=[0.3] * 200, tail_pairs=1000, tail_rate=0.01, found=5, queries=1)
    cost, lows, reached = rounds_to_target({"i2t": pool}, ROUNDS, budget=100, target=0.99)
    assert (cost.judgements, cost.rounds, cost.hits, reached) == (100, 1, 10, False)
    # The round: the policy takes 80 ranked pairs, the sample 20 of what is left: the 120
    # ranked pairs cut in two at equal Σ√(p(1−p)) (60 and 60), and the tail.
    sizes = {"top": 60, "ranked": 60, "tail": 1000}
    rates = {"top": 0.3, "ranked": 0.3, "tail": 0.01}
    allocation = neyman_allocation(sizes, 20, rates)
    strata = {h: StratumSample(sizes[h], allocation[h], allocation[h] * rates[h]) for h in sizes}
    found = 5 + 80 * 0.3 + sum(s.positives for s in strata.values())
    estimate = remaining_estimate(round(found), [RoundSample(0, strata, 0)])
    assert estimate is not None
    assert lows["i2t"] == pytest.approx(estimate.recall_low)
    # Its unfound positives are exactly what the round left, in expectation.
    assert estimate.unfound == pytest.approx(120 * 0.3 + 1000 * 0.01 - found + 5 + 80 * 0.3)


def test_a_higher_target_takes_more_rounds_and_every_round_is_bought_as_the_batch_buys_it():
    rng = np.random.default_rng(3)
    pools = {
        "i2t": DirectionPool(list(rng.beta(0.5, 2, 400)), 3000, 0.005, 20, 4),
        "t2i": DirectionPool(list(rng.beta(0.5, 3, 300)), 1000, 0.01, 4, 4),
    }
    costs = []
    for target in (0.3, 0.5, 0.7):
        plan = target_plan(pools, ROUNDS, budget=2000, target=target)
        assert plan.reached, target_sentence(plan)
        assert all(low >= target for low in plan.recall_low.values())
        costs.append(plan.cost)
    assert costs[0].judgements <= costs[1].judgements <= costs[2].judgements
    assert costs[0].rounds < costs[2].rounds
    # Each round spends what `round_budget` plans for it: 100 judgements, 10 HITs.
    first = round_budget(
        budget=2000, spent=0, round_size=100, items_per_hit=10, hit_size=10,
        assignments_per_hit=1, reposts=0.0,
    )  # fmt: skip
    assert costs[2].judgements == costs[2].rounds * first.judgements_planned
    assert costs[2].hits == costs[2].rounds * first.hits


def test_an_unreachable_target_says_so_and_what_more_would_take() -> None:
    # Most positives sit in a tail the policy never draws from: only the sample sees it.
    pool = DirectionPool([0.5] * 50, tail_pairs=20_000, tail_rate=0.01, found=0, queries=1)
    plan = target_plan({"t2i": pool}, ROUNDS, budget=300, target=0.2)
    assert not plan.reached and plan.cost.rounds == 3 and plan.cost.judgements == 300
    assert "not reachable within the budget of 300 judgements" in target_sentence(plan)
    hopeless = target_plan({"t2i": pool}, ROUNDS, budget=300, target=0.9)
    assert hopeless.beyond is not None and not hopeless.beyond_reached
    assert "not even 3,000 judgements (30 rounds) would reach it" in target_sentence(hopeless)
    # A lower target: reached once the samples have seen enough of the tail, past the budget.
    reachable = target_plan({"t2i": pool}, ROUNDS, budget=300, target=0.1)
    assert not reachable.reached and reachable.beyond_reached
    assert reachable.beyond is not None and reachable.beyond.judgements > 300
    assert f"about {reachable.beyond.judgements:,} judgements" in target_sentence(reachable)


def _rounds_to_reach(rng: np.random.Generator, chances: np.ndarray, tail: int, rate: float):
    """One run against a drawn truth, as a batch runs: the round where its bound reaches 0.6."""
    chance = np.concatenate([chances, np.full(tail, rate)])
    truth = rng.random(len(chance)) < chance
    ranked = [int(i) for i in np.argsort(-chances, kind="stable")]  # likeliest first
    unranked = list(range(len(chances), len(chance)))
    found, samples, found_after = 0, [], []
    for count in range(1, 31):
        found += int(truth[ranked[:80]].sum())  # the policy's 80 pairs, then a sample of 20
        ranked = ranked[80:]
        spread = np.sqrt(np.clip(chance[ranked], 1e-3, 0.999) * (1 - chance[ranked]))
        cut = int(np.searchsorted(np.cumsum(spread), spread.sum() / 2))
        strata = {"top": ranked[:cut], "ranked": ranked[cut:], "tail": unranked}
        rates = {
            h: float(np.clip(chance[m].mean() if m else 0, 1e-3, 0.999)) for h, m in strata.items()
        }
        allocation = neyman_allocation({h: len(m) for h, m in strata.items()}, 20, rates)
        drawn, judged = {}, set()
        for h, members in strata.items():
            chosen = [members[i] for i in rng.choice(len(members), allocation[h], replace=False)]
            drawn[h] = StratumSample(len(members), len(chosen), int(truth[chosen].sum()))
            found += drawn[h].positives
            judged.update(chosen)
        ranked = [i for i in ranked if i not in judged]
        unranked = [i for i in unranked if i not in judged]
        samples.append(RoundSample(count, drawn, 0))
        found_after.append(found)
        later = [found - before for before in found_after]  # judged after each round
        so_far = [replace(s, positives_judged_later=n) for s, n in zip(samples, later, strict=True)]
        estimate = remaining_estimate(found, so_far)
        if estimate is not None and estimate.recall_low >= 0.6:
            return count
    return None


def test_the_predicted_round_is_where_simulated_runs_reach_the_target_about_half_the_time():
    """Runs with random samples against truths drawn from the chances: the median run
    reaches the target within a round of the prediction."""
    rng = np.random.default_rng(11)
    chances = rng.beta(0.4, 3, 1500)
    pool = DirectionPool(list(chances), tail_pairs=3000, tail_rate=0.004, found=0, queries=1)
    plan = target_plan({"i2t": pool}, ROUNDS, budget=3000, target=0.6)
    assert plan.reached
    runs = [_rounds_to_reach(np.random.default_rng(run), chances, 3000, 0.004) for run in range(40)]
    assert None not in runs
    assert abs(float(np.median(runs)) - plan.cost.rounds) <= 1


def test_the_directions_share_the_policys_picks_as_their_ranked_pairs_share_the_positives():
    from mitl.curation.target import _Direction, _policy_split

    rich = _Direction.of(DirectionPool([0.6] * 50, 0, 0.0, 0, 1))  # Σ chances 30
    poor = _Direction.of(DirectionPool([0.1] * 100, 0, 0.0, 0, 1))  # Σ chances 10
    _policy_split({"i2t": rich, "t2i": poor}, 40)
    assert (rich.taken, poor.taken) == (30, 10)
    # The rich direction runs out: the poor one takes what is left of the round.
    _policy_split({"i2t": rich, "t2i": poor}, 60)
    assert (rich.taken, poor.taken) == (50, 50)
