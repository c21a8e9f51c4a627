"""Kendall's tau between the orderings of models that two metrics give (Table D.3)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from mitl.leaderboard import kendall_tau_b, metric_agreement


def test_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    assert kendall_tau_b([0.1, 0.5, 0.9], [10, 20, 30]) == 1.0
    assert kendall_tau_b([0.1, 0.5, 0.9], [30, 20, 10]) == -1.0


@pytest.mark.parametrize("seed", range(5))
def test_tau_matches_scipys_tau_b_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, 12).astype(float)  # few values: many ties
    y = rng.integers(0, 4, 12).astype(float)
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic)


def test_tau_is_undefined_for_fewer_than_two_models_or_a_constant_metric():
    assert kendall_tau_b([0.3], [0.4]) is None
    assert kendall_tau_b([], []) is None
    assert kendall_tau_b([0.3, 0.3, 0.3], [0.1, 0.2, 0.3]) is None


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        kendall_tau_b([1, 2], [1])


def test_the_matrix_compares_every_two_metrics_over_the_models_that_have_both():
    scores = {
        "a": {"recall@1": 0.9, "map_at_r": 0.5, "coco_5k_recall@1": 0.7},
        "b": {"recall@1": 0.8, "map_at_r": 0.6, "coco_5k_recall@1": None},
        "c": {"recall@1": 0.7, "map_at_r": 0.7, "coco_5k_recall@1": 0.9},
    }
    metrics = ["recall@1", "map_at_r", "coco_5k_recall@1"]

    agreement = metric_agreement(scores, metrics)

    assert agreement.metrics == metrics
    assert agreement.tau[0][0] == 1.0
    assert agreement.tau[0][1] == agreement.tau[1][0] == -1.0  # opposite orders
    # b has no COCO recall: the pair is over a and c only
    assert agreement.models[0][2] == 2
    assert agreement.tau[0][2] == -1.0
    assert agreement.tau[1][2] == 1.0


def test_one_model_gives_an_undefined_matrix():
    agreement = metric_agreement(
        {"a": {"recall@1": 0.5, "map_at_r": 0.2}}, ["recall@1", "map_at_r"]
    )
    assert agreement.tau == [[None, None], [None, None]]
    assert agreement.models == [[1, 1], [1, 1]]
