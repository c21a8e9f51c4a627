"""Retrieval metrics over id rankings: hand-worked values, the errors, the lookup paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitl import metric_truth
from mitl.metric_truth import MetricError, prepare
from mitl.metrics import (
    map_at_r,
    ndcg_at_k,
    precision_at_k,
    r_precision,
    recall_at_k,
    retrieval_metrics,
)

RANKINGS = {1: [10, 11, 12, 13], 2: [20, 21, 22, 23], 3: [30, 31]}
POSITIVES = {1: {11}, 2: {99}, 3: {30, 31}}


def test_recall_is_the_share_of_queries_with_a_hit_in_the_top_k():
    assert recall_at_k(RANKINGS, POSITIVES, 1) == pytest.approx(1 / 3)
    assert recall_at_k(RANKINGS, POSITIVES, 2) == pytest.approx(2 / 3)


def test_precision_counts_a_short_ranking_against_the_full_k():
    # query 1: 1 of 4, query 2: 0 of 4, query 3: 2 of 4 (only two ranked)
    assert precision_at_k(RANKINGS, POSITIVES, 4) == pytest.approx((1 / 4 + 0 + 2 / 4) / 3)


def test_a_query_without_a_ranking_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match=r"1 queries have no ranking \(first: 4\)"):
        recall_at_k(RANKINGS, {**POSITIVES, 4: {40}}, 1)


def test_k_below_one_is_refused():
    with pytest.raises(ValueError, match="k must be at least 1"):
        precision_at_k(RANKINGS, POSITIVES, 0)


def test_the_lenient_recall_counts_a_query_without_positives_as_a_miss():
    assert recall_at_k(RANKINGS, {1: {11}, 2: set()}, 2) == pytest.approx(1 / 2)


# ranking 1, 9, 2, 8, 3 against positives {1, 2, 3}: R = 3
HAND_RANKING = {7: [1, 9, 2, 8, 3, 4, 5, 6, 0, 11]}
HAND_POSITIVES = {7: [1, 2, 3]}


def test_r_precision_is_the_share_of_positives_in_the_top_r():
    assert r_precision(HAND_RANKING, HAND_POSITIVES) == pytest.approx(2 / 3)


def test_map_at_r_averages_precision_at_each_positive_rank_within_r():
    # (P@1 * 1 + P@2 * 0 + P@3 * 1) / R = (1 + 2/3) / 3; the positive at rank 5 is past R
    assert map_at_r(HAND_RANKING, HAND_POSITIVES) == pytest.approx((1 + 2 / 3) / 3)


def test_pmrp_caps_r_at_50():
    positives = {1: list(range(100, 160))}  # R = 60
    ranking = {1: list(range(100, 150)) + list(range(1000, 1010)) + list(range(150, 160))}
    truth = prepare(positives)
    values = retrieval_metrics(truth, ranking)
    assert values["pmrp"] == pytest.approx(1.0)  # top 50 all positive
    assert values["r_precision"] == pytest.approx(50 / 60)


def test_ndcg_with_binary_gains_discounts_by_log2_of_the_rank():
    ranking = {1: [9, 1, 2, 8, 7, 6, 5, 4, 3, 0]}
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at_k(ranking, {1: [1, 2]}, 10) == pytest.approx(dcg / ideal)


def test_ndcg_with_graded_gains_uses_them_for_positives_and_other_judged_pairs():
    # 1 gains 0.5, 2 is a positive without a gain (1.0), 7 is no positive but gains 0.25
    ranking = {1: [7, 1, 2, 8, 9, 10, 11, 12, 13, 14]}
    gains = {1: {1: 0.5, 7: 0.25}}
    dcg = 0.25 + 0.5 / math.log2(3) + 1.0 / math.log2(4)
    ideal = 1.0 + 0.5 / math.log2(3) + 0.25 / math.log2(4)
    assert ndcg_at_k(ranking, {1: [1, 2]}, 10, gains) == pytest.approx(dcg / ideal)


def test_ndcg_leaves_out_queries_whose_gains_are_all_zero():
    rankings = {1: [1, *range(20, 29)], 2: [2, *range(30, 39)]}
    # query 2's only positive was judged irrelevant: no ideal gain, no nDCG
    value = ndcg_at_k(rankings, {1: [1], 2: [2]}, 10, gains={2: {2: 0.0}})
    assert value == pytest.approx(1.0)


def test_queries_without_positives_are_left_out_of_every_metric():
    truth = prepare({1: [1], 2: []})
    assert truth.queries == [1]
    values = retrieval_metrics(truth, {1: list(range(1, 11))})  # 2 needs no ranking
    assert values["recall@1"] == values["map_at_r"] == 1.0


def test_a_ranking_shorter_than_r_is_an_error_that_names_the_query():
    with pytest.raises(MetricError, match=r"query 7 ranks 2 targets; R-Precision and mAP@R"):
        r_precision({7: [1, 2]}, HAND_POSITIVES)


def test_recall_needs_k_targets_unless_a_positive_is_among_fewer():
    truth = prepare({1: [5]})
    only_recall = {"ks": (10,), "ndcg_ks": (), "r_based": False}
    assert retrieval_metrics(truth, {1: [4, 5]}, **only_recall)["recall@10"] == 1.0
    with pytest.raises(MetricError, match=r"query 1 ranks 2 targets and no positive; recall@10"):
        retrieval_metrics(truth, {1: [3, 4]}, **only_recall)


def test_ndcg_needs_k_targets():
    with pytest.raises(MetricError, match="ndcg@10"):
        ndcg_at_k({1: [1, 2, 3]}, {1: [1]}, 10)


def test_a_positive_ranked_twice_is_an_error():
    with pytest.raises(MetricError, match="query 7 lists positive 2 twice"):
        r_precision({7: [2, 1, 2, 4, 5]}, HAND_POSITIVES)


def test_a_missing_ranking_is_an_error():
    with pytest.raises(MetricError, match=r"1 queries have no ranking \(first: 8\)"):
        map_at_r(HAND_RANKING, {**HAND_POSITIVES, 8: [1]})


def test_non_integer_ids_are_refused():
    with pytest.raises(MetricError, match="integers"):
        r_precision({7: [1, 2, "3", 4]}, HAND_POSITIVES)


def random_case(seed: int, offset: int = 0):
    rng = np.random.default_rng(seed)
    positives, rankings, gains = {}, {}, {}
    for query in range(60):
        pool = rng.permutation(400)[:80] + offset
        r = int(rng.integers(1, 30))
        positives[query] = pool[rng.permutation(80)[:r]].tolist()
        rankings[query] = pool.tolist()
        gains[query] = {int(t): float(rng.random()) for t in pool[:5]}
    return positives, rankings, gains


@pytest.mark.parametrize("graded", [False, True])
def test_large_ids_and_the_binary_search_fallbacks_give_the_same_values(monkeypatch, graded):
    positives, rankings, gains = random_case(3)
    expected = retrieval_metrics(prepare(positives, gains if graded else None), rankings)
    # ids beyond the dense table's reach are looked up by binary search
    big = 1 << 40
    shifted_gains = {q: {t + big: g for t, g in gs.items()} for q, gs in gains.items()}
    shifted = prepare(
        {q: [t + big for t in ts] for q, ts in positives.items()},
        shifted_gains if graded else None,
    )
    assert shifted.code_table is None
    values = retrieval_metrics(shifted, {q: [t + big for t in r] for q, r in rankings.items()})
    assert values == pytest.approx(expected, abs=1e-12)
    # without the bit set, positives are found in the sorted keys
    monkeypatch.setattr(metric_truth, "BITSET_MAX_BYTES", 0)
    no_bits = prepare(positives, gains if graded else None)
    assert no_bits.positive_bits is None
    assert retrieval_metrics(no_bits, rankings) == pytest.approx(expected, abs=1e-12)


def test_targets_no_query_cares_about_never_hit_even_at_the_table_edges():
    truth = prepare({1: [5], 2: [6]})
    ranking = [-1, 0, 4, 7, 1 << 62, 6, 8, 9, 10, 11]  # 6 is query 2's positive, not query 1's
    values = retrieval_metrics(truth, {1: ranking, 2: [6, -1, 0, 4, 7, 8, 9, 10, 11, 12]}, ks=(10,))
    assert values["recall@10"] == pytest.approx(1 / 2)


def test_rankings_may_be_tuples_or_numpy_arrays():
    positives = {1: [4, 9]}
    for ranking in ([3, 4, 5], (3, 4, 5), np.array([3, 4, 5])):
        assert recall_at_k({1: ranking}, positives, 2) == 1.0
        assert precision_at_k({1: ranking}, positives, 3) == pytest.approx(1 / 3)
