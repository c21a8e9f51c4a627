"""Precision and recall of one positive set against another, micro-averaged over pairs."""

from __future__ import annotations

import pytest

from mitl.positive_sets import set_agreement

TRUTH = {"1": [10, 11, 12], "2": [20], "3": []}


def test_precision_and_recall_on_a_small_example():
    predicted = {"1": [10, 11, 99], "2": [], "3": [30]}
    result = set_agreement(predicted, TRUTH)
    # predicted pairs: (1,10) (1,11) (1,99) (3,30); true pairs: (1,10) (1,11) (1,12) (2,20)
    assert (result.predicted, result.true, result.both) == (4, 4, 2)
    assert result.precision == pytest.approx(2 / 4)
    assert result.recall == pytest.approx(2 / 4)


def test_precision_and_recall_differ_when_the_sets_differ_in_size():
    predicted = {"1": [10], "2": [20]}
    result = set_agreement(predicted, TRUTH)
    assert result.precision == pytest.approx(1.0)
    assert result.recall == pytest.approx(2 / 4)


def test_identical_sets_agree_fully():
    result = set_agreement(TRUTH, TRUTH)
    assert result.precision == 1.0
    assert result.recall == 1.0
    assert result.both == result.true == result.predicted == 4


def test_predicted_queries_that_are_not_in_the_truth_are_ignored():
    predicted = {"1": [10, 11, 12], "2": [20], "404": [1, 2, 3, 4, 5]}
    result = set_agreement(predicted, TRUTH)
    assert result.predicted == 4
    assert result.precision == 1.0
    assert result.recall == 1.0


def test_a_target_is_matched_only_within_its_own_query():
    # 20 is a positive of query "2", not of query "1".
    result = set_agreement({"1": [20]}, TRUTH)
    assert result.both == 0
    assert result.precision == 0.0


def test_pairs_are_counted_once_even_when_repeated():
    result = set_agreement({"1": [10, 10, 10]}, TRUTH)
    assert result.predicted == 1
    assert result.precision == 1.0
    assert result.recall == pytest.approx(1 / 4)


def test_nothing_predicted_gives_zero_precision_not_an_error():
    result = set_agreement({}, TRUTH)
    assert (result.precision, result.recall, result.predicted) == (0.0, 0.0, 0)


def test_an_empty_truth_gives_zero_recall_not_an_error():
    result = set_agreement({"1": [10]}, {"1": []})
    assert (result.precision, result.recall, result.true) == (0.0, 0.0, 0)
