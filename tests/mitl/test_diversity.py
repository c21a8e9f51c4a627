"""Diversity between annotators' rankings, ECCV Caption Table A.1 (no Django needed)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from mitl.diversity import (
    diversity_report,
    kendall_tau,
    kendall_taus,
    mean_rank_of_top1,
    top1_rank_stats,
)


def test_identical_rankings_agree_fully() -> None:
    assert kendall_tau([5, 1, 9, 3], [5, 1, 9, 3]) == pytest.approx(1.0)


def test_reversed_rankings_disagree_fully() -> None:
    assert kendall_tau([5, 1, 9, 3], [3, 9, 1, 5]) == pytest.approx(-1.0)


def test_hand_computed_tau_with_one_missing_target_each() -> None:
    # Union 1, 2, 3, 4; A = 1 2 3 (4 below), B = 2 1 4 (3 below). Of the 6 pairs, (1, 2) and
    # (3, 4) disagree, the other 4 agree, none is tied: tau = (4 - 2) / 6.
    assert kendall_tau([1, 2, 3], [2, 1, 4]) == pytest.approx(1 / 3)


def test_hand_computed_tau_of_disjoint_lists() -> None:
    # A = 1 2 (3, 4 tied below), B = 3 4 (1, 2 tied below): the 4 cross pairs disagree, (1, 2)
    # is tied in B and (3, 4) in A, so 5 untied pairs each: tau = -4 / sqrt(5 * 5).
    assert kendall_tau([1, 2], [3, 4]) == pytest.approx(-0.8)


@pytest.mark.parametrize("seed", range(5))
def test_tau_is_tau_b_with_missing_targets_tied_at_the_bottom(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rank_a = [int(x) for x in rng.choice(40, size=25, replace=False)]
    rank_b = [int(x) for x in rng.choice(40, size=25, replace=False)]
    union = sorted(set(rank_a) | set(rank_b))
    positions_a = [rank_a.index(t) if t in rank_a else 25 for t in union]
    positions_b = [rank_b.index(t) if t in rank_b else 25 for t in union]
    expected = stats.kendalltau(positions_a, positions_b, variant="b").statistic
    assert kendall_tau(rank_a, rank_b) == pytest.approx(expected)
    assert kendall_tau(rank_b, rank_a) == pytest.approx(expected)


def test_tau_is_undefined_without_pairs_to_compare() -> None:
    assert math.isnan(kendall_tau([7], [7]))
    assert math.isnan(kendall_tau([], [1, 2]))


def test_tau_rejects_a_repeated_target() -> None:
    with pytest.raises(ValueError, match="twice"):
        kendall_tau([1, 2, 1], [1, 2])
    with pytest.raises(ValueError, match="ranking B of query 7 ranks target 4 twice"):
        top1_rank_stats({7: [4, 5]}, {7: [4, 3, 4]})


def _ranking_pairs(seed: int, count: int) -> tuple[list[list[int]], list[list[int]]]:
    """Pairs of top lists as a batch holds them, with every shape the batch path must leave
    to `kendall_tau`: mostly 25 deep (some identical, some reversed, overlaps of every
    size), and a few shorter, empty or single lists."""
    rng = np.random.default_rng(seed)
    lists_a, lists_b = [], []
    for _ in range(count):
        depth = int(rng.choice([25] * 12 + [0, 1, 2, 7, 24]))
        pool = rng.permutation(int(rng.integers(max(depth, 1), 70)))
        a = pool[:depth].tolist()
        shape = rng.random()
        if shape < 0.05:
            b = list(a)
        elif shape < 0.1:
            b = a[::-1]
        else:
            b = rng.permutation(pool)[: depth - (shape > 0.9)].tolist()
        lists_a.append(a)
        lists_b.append(b)
    return lists_a, lists_b


@pytest.mark.parametrize("seed", range(3))
def test_batch_taus_equal_one_by_one_taus_exactly(seed: int) -> None:
    lists_a, lists_b = _ranking_pairs(seed, 3000)
    expected = [kendall_tau(a, b) for a, b in zip(lists_a, lists_b, strict=True)]
    got = kendall_taus(lists_a, lists_b)
    assert len(got) == len(expected)
    assert sum(math.isnan(tau) for tau in expected) > 10  # undefined ones are covered
    for one_by_one, batch in zip(expected, got, strict=True):
        assert batch == one_by_one or (math.isnan(batch) and math.isnan(one_by_one))


def test_batch_taus_of_targets_that_are_not_integers_equal_one_by_one_taus() -> None:
    # 1.5 is not 1 and "3" is not 3 to kendall_tau; numpy would have made them equal.
    lists_a = [[1.5, 2, 3], ["3", 4, 5], [1, 2, 3]]
    lists_b = [[1, 2, 3], [3, 4, 5], [3, 2, 1]]
    expected = [kendall_tau(a, b) for a, b in zip(lists_a, lists_b, strict=True)]
    assert kendall_taus(lists_a, lists_b) == expected
    assert expected[0] != 1.0 and expected[2] == -1.0


def test_batch_taus_reject_a_repeated_target_as_one_by_one_does() -> None:
    regular = list(range(25))
    repeated = [*range(24), 3]
    with pytest.raises(ValueError, match="rank_b ranks target 3 twice"):
        kendall_taus([regular, regular], [regular, repeated])


def test_mean_rank_of_top1_counts_beyond_depth_as_length_plus_one() -> None:
    rankings_a = {1: [10, 11], 2: [20], 3: [30, 31], 4: []}
    rankings_b = {1: [11, 10, 12], 2: [21, 22], 3: [30], 5: [1]}
    # Query 1: B ranks 10 second; query 2: 20 is beyond B's depth 2, so rank 3; query 3: 1st.
    # Query 4 has no top-1 and query 5 no ranking by A: both are left out.
    assert mean_rank_of_top1(rankings_a, rankings_b) == pytest.approx(2.0)
    result = top1_rank_stats(rankings_a, rankings_b)
    assert (result.queries, result.beyond_depth) == (3, 1)
    assert result.beyond_depth_share == pytest.approx(1 / 3)


def test_mean_rank_of_top1_without_common_queries_is_nan() -> None:
    assert math.isnan(mean_rank_of_top1({1: [3]}, {2: [3]}))
    assert math.isnan(top1_rank_stats({}, {}).beyond_depth_share)


def test_report_has_one_entry_per_ordered_pair() -> None:
    rankings = {
        "clip": {1: [1, 2, 3], 2: [4, 5, 6]},
        "bow": {1: [2, 1, 4], 2: [6, 5, 4]},
        "vse": {1: [1, 2, 3]},
    }
    report = diversity_report(rankings)
    json.dumps(report, allow_nan=False)  # JSON-serialisable, with no NaN
    assert report["annotators"] == ["bow", "clip", "vse"]
    assert report["queries"] == {"bow": 2, "clip": 2, "vse": 1}
    pairs = {(pair["a"], pair["b"]): pair for pair in report["pairs"]}
    assert set(pairs) == {
        ("bow", "clip"),
        ("bow", "vse"),
        ("clip", "bow"),
        ("clip", "vse"),
        ("vse", "bow"),
        ("vse", "clip"),
    }
    clip_bow = pairs[("clip", "bow")]
    assert clip_bow["common_queries"] == 2
    # Query 1: tau 1/3 (hand-computed above); query 2: the same targets reversed, -1.
    assert clip_bow["kendall_tau"] == {"mean": pytest.approx(-1 / 3), "queries": 2, "undefined": 0}
    # clip's top-1 is 1 (bow ranks it 2nd) and 4 (3rd).
    assert clip_bow["top1_of_a_in_b"] == {
        "mean_rank": pytest.approx(2.5),
        "queries": 2,
        "beyond_depth": 0,
        "beyond_depth_share": 0.0,
    }
    assert pairs[("bow", "clip")]["kendall_tau"]["mean"] == pytest.approx(-1 / 3)
    # bow's top-1 is 2 (clip ranks it 2nd) and 6 (3rd).
    assert pairs[("bow", "clip")]["top1_of_a_in_b"]["mean_rank"] == pytest.approx(2.5)
    # vse's top-1 of query 1 is 1, bow's 2nd; vse did not rank query 2.
    assert pairs[("vse", "bow")]["top1_of_a_in_b"]["mean_rank"] == pytest.approx(2.0)
    assert pairs[("clip", "vse")]["kendall_tau"]["mean"] == pytest.approx(1.0)
    assert pairs[("vse", "clip")]["common_queries"] == 1


def test_report_means_over_no_query_are_none() -> None:
    report = diversity_report({"a": {1: [1, 2]}, "b": {2: [1, 2]}})
    pair = report["pairs"][0]
    assert pair["common_queries"] == 0
    assert pair["kendall_tau"] == {"mean": None, "queries": 0, "undefined": 0}
    assert pair["top1_of_a_in_b"]["mean_rank"] is None
    assert pair["top1_of_a_in_b"]["beyond_depth_share"] is None
    json.dumps(report, allow_nan=False)
