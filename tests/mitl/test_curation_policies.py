"""Adjudication policies on small hand-made rankings: which arm is drawn next, and why."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.curation.learned import learned_order, logistic_fit, logistic_predict
from mitl.curation.policies import (
    Arm,
    PolicySettings,
    arms_draw,
    band_yields,
    bandit_arms,
    depth_arms,
    policy_select,
    prior_yield,
    rank_band,
)
from mitl.curation.rankings import QueryRankings, fused_ranking


def pairs(image: int, *captions: int) -> list[tuple[int, int]]:
    return [(image, c) for c in captions]


# Query 1 (image 1) ranked by annotators 7 and 8; query 2 (image 2) by both as well.
RANKINGS = [
    QueryRankings(1, {7: pairs(1, 10, 11, 12, 13, 14), 8: pairs(1, 20, 21, 22, 23, 24)}, "i2t"),
    QueryRankings(2, {7: pairs(2, 30, 31, 32, 33, 34), 8: pairs(2, 40, 41, 42, 43, 44)}, "i2t"),
]


def test_rank_bands_and_prior_fall_with_depth() -> None:
    assert [rank_band(r) for r in (1, 2, 3, 4, 5, 6)] == [0, 1, 2, 3, 3, 4]
    assert rank_band(5000) == rank_band(1000)
    priors = [prior_yield(b) for b in range(6)]
    assert priors == sorted(priors, reverse=True)
    assert prior_yield(0) == pytest.approx(0.5)


def test_before_any_judgement_every_arm_gets_its_top_pair_first() -> None:
    picks = policy_select("bandit", RANKINGS, {}, quota=4, settings=PolicySettings())
    assert sorted(p.pair for p in picks) == [(1, 10), (1, 20), (2, 30), (2, 40)]


def test_bandit_draws_deeper_from_the_arm_that_keeps_finding_positives() -> None:
    # Annotator 7 was right twice on query 1, annotator 8 wrong twice.
    outcomes = {(1, 10): True, (1, 11): True, (1, 20): False, (1, 21): False}
    arms = {(a.query_id, a.key): a for a in bandit_arms(RANKINGS, outcomes, PolicySettings())}
    assert arms[(1, 7)].factor > 1 > arms[(1, 8)].factor
    picks = policy_select("bandit", RANKINGS[:1], outcomes, quota=1, settings=PolicySettings())
    assert [p.pair for p in picks] == [(1, 12)]  # annotator 7's next, not annotator 8's
    assert picks[0].ranked_by == ((7, 3),)


def test_bandit_drops_an_arm_that_keeps_failing() -> None:
    query = QueryRankings(1, {7: pairs(1, *range(10, 18)), 8: pairs(1, *range(20, 28))}, "i2t")
    outcomes = {pair: False for pair in pairs(1, *range(20, 26))}  # annotator 8: six misses
    settings = PolicySettings(drop_below=0.1, min_evidence=3)
    arms = {a.key: a for a in bandit_arms([query], outcomes, settings)}
    arms[8].position = 6  # its next pair, rank 7: yield ~0.16 at that depth x factor ~0.58
    assert arms[8].dropped(settings)
    assert not arms[7].dropped(settings)
    picks = policy_select("bandit", [query], outcomes, quota=20, settings=settings)
    assert {p.pair for p in picks} == set(pairs(1, *range(10, 18)))  # never (1, 26), (1, 27)


def test_band_yields_pool_every_query_of_a_group_and_never_rise_with_depth() -> None:
    outcomes = {(1, 10): True, (2, 30): True, (1, 11): False, (2, 31): False}
    curves = band_yields(RANKINGS, outcomes, strength=5.0)
    # Rank 1: two positives of two, smoothed toward the prior 0.5 with 5 pseudo-judgements.
    assert curves[("i2t", 7)][0] == pytest.approx((2 + 5 * 0.5) / (2 + 5))
    assert curves[("i2t", 7)][1] == pytest.approx((0 + 5 * prior_yield(1)) / (2 + 5))
    assert curves[("i2t", 8)][0] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(curves[("i2t", 7)], curves[("i2t", 7)][1:], strict=False))


def test_arms_draw_values_an_arm_again_when_another_took_its_next_pair() -> None:
    shared = (1, 99)
    first = Arm(1, 7, [shared, (1, 10)], factor=1.0, evidence=0, yields=[0.9] * 16)
    second = Arm(1, 8, [shared, (1, 20)], factor=0.5, evidence=0, yields=[0.9] * 16)
    chosen = arms_draw([first, second], quota=3, settings=PolicySettings(), taken=set())
    assert [pair for _, pair in chosen] == [shared, (1, 10), (1, 20)]


def test_depth_policy_goes_deeper_only_where_recent_yield_stays_high() -> None:
    rich = QueryRankings(1, {7: pairs(1, 10, 11, 12, 13), 8: pairs(1, 10, 12, 11, 13)})
    poor = QueryRankings(2, {7: pairs(2, 30, 31, 32, 33), 8: pairs(2, 30, 31, 33, 32)})
    assert fused_ranking(rich.lists) == pairs(1, 10, 11, 12, 13)  # ties: first seen first
    outcomes = {(1, 10): True, (1, 11): True, (2, 30): False, (2, 31): False, (2, 32): False}
    settings = PolicySettings(step=1, drop_below=0.3, min_evidence=3, window=3)
    arms = {a.query_id: a for a in depth_arms([rich, poor], outcomes, settings)}
    assert arms[1].factor == pytest.approx(3 / 4)  # (1 + 2) / (2 + 2)
    assert arms[2].dropped(settings)  # (1 + 0) / (2 + 3) = 0.2 < 0.3
    picks = policy_select("depth", [rich, poor], outcomes, quota=5, settings=settings)
    assert [p.pair for p in picks] == pairs(1, 12, 13)


def test_excluded_and_judged_pairs_are_never_chosen() -> None:
    outcomes = {(1, 10): True}
    picks = policy_select(
        "depth", RANKINGS, outcomes, quota=100, settings=PolicySettings(), excluded={(2, 30)}
    )
    chosen = [p.pair for p in picks]
    assert (1, 10) not in chosen and (2, 30) not in chosen
    assert len(chosen) == len(set(chosen)) == 18


def test_logistic_fit_matches_a_hand_checked_separable_direction() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((400, 2))
    y = (x[:, 0] + 0.1 * rng.standard_normal(400) > 0.5).astype(float)
    weights = logistic_fit(x, y, l2=0.01)
    assert weights[1] > 5 and abs(weights[2]) < 1.5  # the first feature decides
    probabilities = logistic_predict(weights, np.array([[0.9, 0.5], [0.1, 0.5]]))
    assert probabilities[0] > 0.9 > 0.1 > probabilities[1]


def test_learned_order_ranks_what_the_reliable_annotator_ranks_first() -> None:
    # Annotator 7 ranks positives first on every query; annotator 8 ranks them last.
    queries = []
    outcomes = {}
    for q in range(20):
        good = pairs(q, *range(100, 110))
        queries.append(QueryRankings(q, {7: good, 8: list(reversed(good))}, "i2t"))
        if q < 15:  # judged: the top 3 of annotator 7 positive, its bottom 3 negative
            outcomes.update({pair: True for pair in good[:3]})
            outcomes.update({pair: False for pair in good[-3:]})
    order = learned_order(queries, outcomes, taken=set(outcomes))
    first = order[:5]
    assert all(pair[1] in (100, 101, 102) for _, pair in first)  # unjudged queries' tops
    assert not set(outcomes) & {pair for _, pair in order}


def test_learned_order_falls_back_to_fused_round_robin_without_examples() -> None:
    order = learned_order(RANKINGS, {}, taken=set())
    assert [pair for _, pair in order[:4]] == [(1, 10), (2, 30), (1, 20), (2, 40)]


def test_learned_order_is_empty_once_every_ranked_pair_is_judged() -> None:
    outcomes = {
        pair: i % 2 == 0
        for i, pair in enumerate(
            sorted(p for q in RANKINGS for pairs in q.lists.values() for p in pairs)
        )
    }
    many = [QueryRankings(q, {7: pairs(q, 1, 2, 3), 8: pairs(q, 4, 5, 6)}, "i2t") for q in range(4)]
    judged = {
        p: i % 2 == 0 for i, p in enumerate(p for q in many for ps in q.lists.values() for p in ps)
    }
    assert learned_order(RANKINGS, outcomes, taken=set(outcomes)) == []
    assert learned_order(many, judged, taken=set(judged)) == []  # a model is fit, nothing left
