"""Recall@K (hit rate) and Precision@K over id rankings."""

from __future__ import annotations

import pytest

from mitl.metrics import precision_at_k, recall_at_k

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
