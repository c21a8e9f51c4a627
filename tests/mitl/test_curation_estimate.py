"""The estimate of the positives not found, against brute-force truth on small populations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from mitl.curation.budget import RoundBudget, repost_share, round_budget
from mitl.curation.design import with_predictions
from mitl.curation.estimate import (
    STRATA,
    QueryUniverse,
    RoundSample,
    StratumSample,
    gamma_interval,
    midp_gamma_interval,
    neyman_allocation,
    remaining_estimate,
    round_estimate,
    sample_allocation,
    sample_draw,
    strata_sizes,
)


def test_round_estimate_by_hand() -> None:
    sample = RoundSample(
        round=0,
        strata={
            "ranked": StratumSample(population=100, judged=10, positives=3),
            "tail": StratumSample(population=50, judged=5, positives=0),
        },
        positives_judged_later=4,
    )
    unfound, variance = round_estimate(sample)
    # 100 x 3/10 + 50 x 0/5 positives were unjudged; 3 were then sampled, 4 judged later.
    assert unfound == pytest.approx(30 - 3 - 4)
    # Each stratum's own unbiased variance, s² = ȳ(1−ȳ)·n/(n−1): none in a sample of negatives.
    ranked = 100**2 * (1 - 10 / 100) * (0.3 * 0.7 * 10 / 9) / 10
    assert variance == pytest.approx(ranked)
    single = RoundSample(0, {"top": StratumSample(population=40, judged=1, positives=1)}, 0)
    # One judged pair has no variance of its own: its rate smoothed by half a positive.
    assert round_estimate(single)[1] == pytest.approx(40**2 * (39 / 40) * (1.5 / 2) * (0.5 / 2))


def test_a_stratum_with_unjudged_pairs_but_no_sample_gives_no_estimate() -> None:
    sample = RoundSample(0, {"ranked": StratumSample(10, 0, 0)}, 0)
    assert round_estimate(sample) is None
    assert remaining_estimate(5, [sample]) is None


def test_a_fully_judged_population_is_exact() -> None:
    exhaustive = RoundSample(1, {"ranked": StratumSample(20, 20, 6)}, 0)
    noisy = RoundSample(0, {"ranked": StratumSample(100, 4, 3)}, 10)
    estimate = remaining_estimate(30, [noisy, exhaustive])
    assert estimate is not None
    assert estimate.unfound == pytest.approx(0) and estimate.high == pytest.approx(0)
    assert estimate.recall == pytest.approx(1.0)


def test_rounds_combine_with_design_weights_and_recall_bounds_are_ordered() -> None:
    first = RoundSample(0, {"tail": StratumSample(1000, 50, 5)}, 20)
    second = RoundSample(1, {"tail": StratumSample(900, 100, 8)}, 0)
    estimate = remaining_estimate(200, [first, second])
    assert estimate is not None
    one = 1000 * 5 / 50 - 5 - 20
    two = 900 * 8 / 100 - 8
    w1, w2 = 50 / 1000**2, 100 / 900**2
    assert estimate.unfound == pytest.approx((one * w1 + two * w2) / (w1 + w2))
    assert estimate.low <= estimate.unfound <= estimate.high
    assert estimate.recall_low <= estimate.recall <= estimate.recall_high
    assert estimate.recall == pytest.approx(200 / (200 + estimate.unfound))


def test_gamma_interval_by_hand() -> None:
    # A count of 120 with variance 900: gamma of shape 16 and scale 7.5 for the lower
    # bound; one more positive of weight 10 for the upper: shape 130²/1000, scale 1000/130.
    low, high = gamma_interval(120.0, 900.0, 10.0)
    assert low == pytest.approx(stats.gamma.ppf(0.025, 16, scale=7.5))
    assert high == pytest.approx(stats.gamma.ppf(0.975, 130**2 / 1000, scale=1000 / 130))
    # Skewed like a count of rare positives: both bounds above the normal interval's.
    assert 120 - 1.96 * 30 < low < 120 < 120 + 1.96 * 30 < high
    # No positive sampled: nothing below, and above the bound of one positive of weight 10
    # (an exponential), where a normal interval would have no width at all.
    assert gamma_interval(0.0, 0.0, 10.0) == (0.0, pytest.approx(-10 * math.log(0.025)))


def test_midp_gamma_interval_by_hand() -> None:
    """The 2.5% and 97.5% points of the even mixture of the count's gamma and the count's
    with one more positive (Fay and Kim 2017): inside Fay and Feuer's interval."""
    total, variance, weight = 120.0, 900.0, 10.0
    low, high = midp_gamma_interval(total, variance, weight)
    observed = stats.gamma(16, scale=7.5)
    one_more = stats.gamma(130**2 / 1000, scale=1000 / 130)
    for bound, point in ((low, 0.025), (high, 0.975)):
        assert (observed.cdf(bound) + one_more.cdf(bound)) / 2 == pytest.approx(point, abs=1e-9)
    conservative = gamma_interval(total, variance, weight)
    assert conservative[0] < low < total < high < conservative[1]
    # No positive sampled: half the mixture sits at 0, so nothing below, and above the 95%
    # point of one positive of weight 10 (an exponential) instead of its 97.5% point.
    assert midp_gamma_interval(0.0, 0.0, 10.0) == (0.0, pytest.approx(-10 * math.log(0.05)))
    # A count known exactly (no variance) is a point mass: the bounds straddle it.
    low, high = midp_gamma_interval(30.0, 0.0, 5.0)
    assert low < 30 < high
    assert stats.gamma(35**2 / 25, scale=25 / 35).cdf(low) / 2 == pytest.approx(0.025, abs=1e-9)


def test_remaining_estimate_interval_by_hand() -> None:
    first = RoundSample(
        0, {"top": StratumSample(200, 10, 4), "tail": StratumSample(5000, 20, 1)}, 30
    )
    second = RoundSample(
        1, {"top": StratumSample(150, 10, 2), "tail": StratumSample(4980, 20, 0)}, 0
    )
    estimate = remaining_estimate(500, [first, second])
    assert estimate is not None
    w1, w2 = 30 / 5200**2, 30 / 5130**2
    w1, w2 = w1 / (w1 + w2), w2 / (w1 + w2)
    one = 200 * 4 / 10 + 5000 * 1 / 20 - 4 - 1 - 30
    two = 150 * 2 / 10 - 2
    assert estimate.unfound == pytest.approx(w1 * one + w2 * two)
    counted = w1 * (80 + 250) + w2 * 30
    variance = w1**2 * round_estimate(first)[1] + w2**2 * round_estimate(second)[1]
    # A tail positive weighs most: Σ_r w_r·N_tail over the tail's 40 judged pairs.
    heaviest = (w1 * 5000 + w2 * 4980) / 40
    low, high = midp_gamma_interval(counted, variance, heaviest)
    known = counted - estimate.unfound
    assert (estimate.low, estimate.high) == (
        pytest.approx(low - known),
        pytest.approx(high - known),
    )


def test_rounds_drawn_before_the_model_assisted_sample_still_estimate() -> None:
    """A batch recorded with the rank strata (no predictions) reads and estimates as before."""
    old = RoundSample(
        0,
        {
            "top": StratumSample(300, 2, 1),
            "ranked": StratumSample(2000, 10, 1),
            "tail": StratumSample(9000, 30, 1),
        },
        12,
    )
    assert with_predictions([old], {}) == [old]  # nothing recorded: left as it was
    new = RoundSample(
        1,
        {
            "top": StratumSample(500, 6, 2),
            "ranked": StratumSample(1600, 6, 0),
            "tail": StratumSample(8900, 30, 1),
        },
        0,
    )
    design = {
        1: {"top": {"predicted": 90.0, "rate": 0.2}, "ranked": {"predicted": 40.0, "rate": 0.03}}
    }
    filled = with_predictions([old, new], design)
    assert filled[0] == old and filled[1].strata["top"].predicted == 90.0
    assert filled[1].strata["tail"].predicted is None  # the tail records no prediction
    alone = remaining_estimate(100, [old])
    assert alone is not None and alone.low < alone.unfound < alone.high
    # The point estimate of an old batch is the one it always had.
    assert alone.unfound == pytest.approx(300 / 2 + 2000 / 10 + 9000 / 30 - 3 - 12)
    both = remaining_estimate(100, filled)
    assert both is not None and both.rounds_used == 2


def universes_of(truth: np.ndarray, ranked_depth: int, taken: set[tuple[int, int]]):
    """Image queries 0..n-1 over caption targets; each query ranks its first targets."""
    n_queries, n_targets = truth.shape
    return [
        QueryUniverse(
            query_id=q,
            is_image_query=True,
            item_id=q,
            n_targets=n_targets,
            ranked={(q, t): t + 1 for t in range(ranked_depth)},
            taken=frozenset(p for p in taken if p[0] == q),
        )
        for q in range(n_queries)
    ]


def test_sample_draw_respects_strata_and_never_draws_a_taken_pair() -> None:
    truth = np.zeros((3, 40), dtype=bool)
    taken = {(0, 0), (0, 1), (1, 30), (2, 39)}
    universes = universes_of(truth, ranked_depth=14, taken=taken)
    sizes = strata_sizes(universes)
    # Ranks 1-10 are `top`, 11-14 `ranked`, the rest `tail`; taken pairs are in none.
    assert sizes == {"top": 30 - 2, "ranked": 12, "tail": 3 * 26 - 2}
    drawn = sample_draw(
        universes, np.arange(40), {"top": 28, "ranked": 5, "tail": 20}, np.random.default_rng(0)
    )
    top = [pair for _, pair, stratum in drawn if stratum == "top"]
    ranked = [pair for _, pair, stratum in drawn if stratum == "ranked"]
    tail = [pair for _, pair, stratum in drawn if stratum == "tail"]
    assert (len(top), len(ranked), len(tail)) == (28, 5, 20)  # the whole top stratum
    assert not (set(top) | set(ranked) | set(tail)) & taken
    assert all(pair[1] < 10 for pair in top)
    assert all(10 <= pair[1] < 14 for pair in ranked) and all(pair[1] >= 14 for pair in tail)
    assert len(set(tail)) == 20


def test_allocation_follows_neyman_with_a_floor() -> None:
    rates = {"top": 0.5, "ranked": 0.5, "tail": 0.01}
    allocation = sample_allocation({"top": 0, "ranked": 100, "tail": 10_000}, 60, rates)
    weights = (100 * math.sqrt(0.5 * 0.5), 10_000 * math.sqrt(0.01 * 0.99))
    assert allocation["tail"] == round(60 * weights[1] / sum(weights))
    assert allocation["ranked"] == round(60 * weights[0] / sum(weights)) == 3
    assert allocation["top"] == 0  # an empty stratum is not sampled
    rare = {"top": 0.5, "ranked": 0.01, "tail": 0.5}
    floor = sample_allocation({"top": 0, "ranked": 10, "tail": 10_000}, 60, rare)
    assert floor["ranked"] == 2  # the floor: every stratum is sampled
    tight = sample_allocation({"top": 50, "ranked": 50, "tail": 50}, 4, rates)
    assert sum(tight.values()) == 4  # never more than asked, even with the floor
    empty = sample_allocation(dict.fromkeys(rates, 0), 10, rates)
    assert empty == dict.fromkeys(rates, 0)
    # Any strata, by name: the model-assisted design's, or a direction with one stratum.
    named = neyman_allocation({"low": 900, "high": 100}, 40, {"low": 0.01, "high": 0.4})
    weights = (900 * math.sqrt(0.01 * 0.99), 100 * math.sqrt(0.4 * 0.6))
    assert named == {"low": round(40 * weights[0] / sum(weights)), "high": 40 - named["low"]}
    assert neyman_allocation({"tail": 50}, 80, {"tail": 0.1}) == {"tail": 50}  # all it holds


def test_estimate_is_unbiased_and_covers_the_brute_force_truth() -> None:
    """Many independent samples of one small population: mean on target, ~95% coverage."""
    rng = np.random.default_rng(7)
    n_queries, n_targets, depth = 6, 60, 12
    # Positives dense at the top of each ranking, sparse in the tail.
    probability = np.where(np.arange(n_targets) < depth, 0.5, 0.08)
    truth = rng.random((n_queries, n_targets)) < probability
    judged = {(q, t) for q, t in itertools.product(range(n_queries), range(4))}  # each top 4
    found = sum(truth[q, t] for q, t in judged)
    true_unfound = int(truth.sum()) - found
    universes = universes_of(truth, depth, judged)
    sizes = strata_sizes(universes)
    allocation = {"top": 10, "ranked": 4, "tail": 30}
    estimates, covered = [], 0
    for trial in range(600):
        drawn = sample_draw(
            universes, np.arange(n_targets), allocation, np.random.default_rng(trial)
        )
        strata = {}
        for stratum in STRATA:
            outcomes = [bool(truth[pair]) for _, pair, s in drawn if s == stratum]
            strata[stratum] = StratumSample(sizes[stratum], len(outcomes), sum(outcomes))
        sample_positives = sum(s.positives for s in strata.values())
        estimate = remaining_estimate(found, [RoundSample(0, strata, 0)])
        assert estimate is not None
        # The estimate is of the positives left after the sample itself was judged.
        truth_after = true_unfound - sample_positives
        unclamped = round_estimate(RoundSample(0, strata, 0))[0]
        estimates.append(unclamped - truth_after)
        covered += estimate.low <= truth_after <= estimate.high
    assert abs(np.mean(estimates)) < 0.05 * true_unfound
    assert covered / 600 >= 0.88


def test_round_budget_by_hand_and_never_past_the_budget() -> None:
    plan = round_budget(
        budget=1000,
        spent=100,
        round_size=600,
        items_per_hit=18,
        hit_size=16,
        assignments_per_hit=2,
        reposts=0.25,
    )
    # One HIT costs 18 x 2 x 1.25 = 45 judgements; 600 // 45 = 13 HITs.
    assert plan == RoundBudget(hits=13, task_pairs=13 * 16, judgements_planned=585)
    last = round_budget(
        budget=1000,
        spent=960,
        round_size=600,
        items_per_hit=18,
        hit_size=16,
        assignments_per_hit=2,
        reposts=0.25,
    )
    assert last.hits == 0
    for spent, size, reposts in itertools.product((0, 333, 999), (36, 500, 5000), (0.05, 0.5)):
        plan = round_budget(
            budget=1000,
            spent=spent,
            round_size=size,
            items_per_hit=18,
            hit_size=16,
            assignments_per_hit=2,
            reposts=reposts,
        )
        assert spent + plan.judgements_planned <= 1000


def test_repost_share_has_a_prior_and_a_floor() -> None:
    assert repost_share(0, 0) == pytest.approx(0.15)
    assert repost_share(100, 0) == pytest.approx(0.05)
    assert repost_share(100, 30) == pytest.approx(0.3)


def test_the_tail_draw_is_uniform_over_tail_pairs_whatever_the_query() -> None:
    """Query 0 has a tail of 5 pairs, query 1 of 20: a uniform draw takes 1 in 5 from query 0."""
    taken = {(0, t) for t in range(5, 25)} | {(1, t) for t in range(5)}  # tails of 5 and 20
    universes = universes_of(np.zeros((2, 25), dtype=bool), 0, taken)
    assert strata_sizes(universes)["tail"] == 25
    from_first = 0
    trials = 4000
    for trial in range(trials):
        drawn = sample_draw(universes, np.arange(25), {"tail": 1}, np.random.default_rng(trial))
        from_first += drawn[0][0] == 0
    assert from_first / trials == pytest.approx(5 / 25, abs=0.025)
