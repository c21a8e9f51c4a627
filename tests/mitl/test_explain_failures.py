"""Failures of a model's rankings, their summary, and how re-ranked queries move."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.explain.concepts import ConceptObject, ImageConcepts
from mitl.explain.failures import ExplainInputs, explain_direction, find_failures
from mitl.explain.reranking import movement, positive_ranks, rank_metrics


def scene(image_id: int, *categories: str) -> ImageConcepts:
    return ImageConcepts(image_id, tuple(ConceptObject(c, 0.1) for c in categories), "instances")


def same_or_nothing(a: str, b: str) -> float:
    return 1.0 if a == b else 0.25 if {a, b} == {"ball", "frisbee"} else 0.0


CONCEPTS = {
    1: scene(1, "dog", "ball", "park"),
    2: scene(2, "dog", "frisbee", "park"),
    3: scene(3, "cat", "fish"),
    4: scene(4, "dog", "dog", "ball", "park"),
}
# Captions 10, 11 were written for image 1; 20 for image 2; 30 for image 3; 40 for image 4.
CAPTION_IMAGE = {10: 1, 11: 1, 20: 2, 30: 3, 40: 4}
MENTIONS = {10: {"dog", "ball"}, 11: {"park"}, 20: {"frisbee"}, 30: {"cat"}, 40: {"dog"}}


def inputs(**overrides) -> ExplainInputs:
    values = {
        "positives": {
            "t2i": {10: [1], 11: [1], 20: [2], 30: [3], 40: [4, 1]},
            "i2t": {1: [10, 11], 2: [20], 3: [30]},
        },
        "caption_image": CAPTION_IMAGE,
        "concepts": CONCEPTS,
        "mentioned": lambda caption, categories: frozenset(MENTIONS[caption]) & categories,
        "similarity": same_or_nothing,
    }
    return ExplainInputs(**(values | overrides))


def test_text_to_image_failures_compare_the_queries_own_image_with_the_first_result():
    rankings = {10: [2, 1, 3], 11: [1, 2], 20: [3, 2], 30: [3], 40: [1, 4]}
    failures, failed, ranked = find_failures("t2i", rankings, inputs())
    # 11, 30 and 40 (image 1 is one of 40's positives) succeed; 10 and 20 fail.
    assert (failed, ranked) == (2, 5)
    by_query = {f.query: f for f in failures}
    assert by_query[10].truth_image == 1 and by_query[10].retrieved_image == 2
    assert by_query[10].truth_rank == 2
    assert by_query[10].agnostic.ca == pytest.approx(2 / 3)
    assert by_query[10].agnostic.ncs == pytest.approx(0.25)  # ball – frisbee
    # Query-informed: caption 10 mentions dog and ball; ball is missing, so CA = 1/2.
    assert by_query[10].informed.ca == pytest.approx(1 / 2)
    assert by_query[20].agnostic.ca == 0.0 and by_query[20].truth_rank == 2


def test_image_to_text_failures_use_the_image_the_retrieved_caption_was_written_for():
    rankings = {1: [40, 10], 2: [20], 3: [10, 30]}
    failures, failed, _ = find_failures("i2t", rankings, inputs())
    assert failed == 2
    by_query = {f.query: f for f in failures}
    assert by_query[1].retrieved == 40 and by_query[1].retrieved_image == 4
    assert by_query[1].agnostic.ca == 1.0 and by_query[1].agnostic.ce == 1  # one dog more
    assert by_query[3].retrieved_image == 1 and by_query[3].agnostic.ca == 0.0
    # An image query mentions everything in it: no query-informed variant.
    assert by_query[1].informed is None
    assert explain_direction("i2t", rankings, inputs())["informed"] is None


def test_failures_without_concepts_or_on_the_same_image_are_counted_not_explained():
    rankings = {1: [99, 10], 2: [11]}  # caption 99 has no image; 11 is image 1's, not 2's
    no_concepts = dict(CONCEPTS)
    del no_concepts[1]
    failures, failed, _ = find_failures("i2t", rankings, inputs(concepts=no_concepts))
    assert failed == 2 and failures == []
    positives = {"t2i": {}, "i2t": {1: [10]}}
    failures, failed, _ = find_failures("i2t", {1: [11, 10]}, inputs(positives=positives))
    assert failed == 1 and failures == []  # caption 11 is of image 1 itself


def test_explain_direction_summarises_means_histograms_confusions_and_worst_first():
    rankings = {10: [2, 1], 11: [1], 20: [3, 2], 30: [3], 40: [2, 4]}
    result = explain_direction("t2i", rankings, inputs(), worst=2)
    assert result["queries"] == 5 and result["failures"] == 3 and result["explained"] == 3
    assert result["failure_rate"] == pytest.approx(3 / 5)
    means = result["agnostic"]["means"]
    # CAs: query 10 → 2/3, query 20 → 0, query 40 (truth 4 vs 2) → 2/3.
    assert means["ca"] == pytest.approx((2 / 3 + 0 + 2 / 3) / 3)
    assert result["agnostic"]["histograms"]["ca"]["counts"][0] == 1
    assert sum(result["agnostic"]["histograms"]["ca"]["counts"]) == 3
    assert result["agnostic"]["object_hit"] == 2 + 0 + 2
    assert result["agnostic"]["object_miss"] == 1 + 3 + 1
    assert result["confusions"]["missed"][0] == {"concept": "ball", "failures": 2}
    assert result["confusions"]["swapped"][0] == {
        "truth": "ball",
        "retrieved": "frisbee",
        "failures": 2,
    }
    # Query 40 ties with 10 on CA and NCS but also miscounts the dogs (CE 1): it is worse.
    assert [w["query"] for w in result["worst"]] == [20, 40]
    assert result["informed"]["means"]["ca"] is not None


def test_positive_ranks_count_only_non_positives_above_the_best_positive():
    scores = np.array([[0.9, 0.5, 0.7, 0.1], [0.2, 0.2, 0.3, 0.1]])
    positives = np.array([[False, True, True, False], [True, False, False, False]])
    # Row 0: best positive 0.7, one non-positive above. Row 1: 0.2 ties with a non-positive
    # (counted in the positive's favour) and 0.3 is above.
    assert positive_ranks(scores, positives).tolist() == [2, 2]


def test_movement_counts_moves_and_calls_an_unmoved_model_blind():
    before, after = np.array([1, 3, 2, 5, 1, 4]), np.array([1, 3, 2, 7, 1, 4])
    result = movement(
        "color_all",
        before,
        after,
        queries=[1, 2, 3, 4, 5, 6],
        originals=["a red car"] * 6,
        texts=["a blue car"] * 6,
        total_queries=12,
    )
    # One in six moved lower: under the 20% that reads as colour blindness.
    assert (result["lower"], result["higher"], result["same"]) == (1, 0, 5)
    assert result["perturbed_share"] == 0.5
    assert result["blind"] and result["verdict"].startswith("blind to colours")
    assert result["examples"][0]["query"] == 4
    assert result["delta"]["mrr"] == pytest.approx((1 / 7 - 1 / 5) / 6)
    moved = movement(
        "size",
        np.array([1, 1]),
        np.array([2, 3]),
        queries=[1, 2],
        originals=["x", "y"],
        texts=["x2", "y2"],
        total_queries=2,
    )
    assert not moved["blind"] and moved["verdict"].startswith("reads sizes")
    assert moved["after"]["recall@1"] == 0.0 and moved["before"]["recall@1"] == 1.0


def test_rank_metrics_of_no_query_are_none():
    assert rank_metrics(np.array([], dtype=int))["mrr"] is None
