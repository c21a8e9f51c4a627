"""Kendall's tau between the orderings of models that two metrics give (Table D.3)."""

from __future__ import annotations

from mitl.leaderboard import metric_agreement


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
