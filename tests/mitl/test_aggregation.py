"""The ECCV verdict of one pair: majority of YES votes, ties negative, graded score."""

from __future__ import annotations

import pytest

from mitl.aggregation import eccv_verdict
from mitl.judgements import Level

Y, WY, WN, N = Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO


@pytest.mark.parametrize(
    ("levels", "is_positive"),
    [
        ([Y], True),
        ([WY], True),
        ([WN], False),
        ([N], False),
        ([Y, Y, N], True),
        ([WY, WY, N], True),
        ([WN, WN, Y], False),
        ([WY, WN, WN], False),
        ([Y, WY, WN, N, WY], True),
    ],
)
def test_the_label_is_the_majority_of_yes_votes(levels, is_positive):
    assert eccv_verdict(levels).is_positive is is_positive


@pytest.mark.parametrize(
    "levels",
    [[Y, N], [WY, WN], [Y, Y, N, N], [Y, WY, WN, N], [Y, Y, Y, WN, N, N]],
)
def test_a_tie_is_negative(levels):
    verdict = eccv_verdict(levels)
    assert verdict.is_positive is False
    assert verdict.confidence == 0.5


@pytest.mark.parametrize(
    ("levels", "score"),
    [
        ([Y], 1.0),
        ([WY], 0.5),
        ([WN], 0.0),
        ([N], 0.0),
        ([Y, WY], 0.75),
        ([Y, N], 0.5),
        ([WY, WN, N], 0.5 / 3),
        ([Y, Y, WY, N], 2.5 / 4),
    ],
)
def test_the_score_averages_yes_1_weak_yes_half_and_no_answers_0(levels, score):
    assert eccv_verdict(levels).score == pytest.approx(score)


def test_a_negative_verdict_can_still_have_a_positive_score():
    verdict = eccv_verdict([Y, WN, N])
    assert not verdict.is_positive
    assert verdict.score == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("levels", "confidence"),
    [
        ([Y], 1.0),
        ([Y, WY, WY], 1.0),
        ([Y, Y, N], 2 / 3),
        ([N, WN, WY], 2 / 3),
        ([Y, WY, WY, N, WN], 3 / 5),
    ],
)
def test_confidence_is_the_share_of_votes_agreeing_with_the_label(levels, confidence):
    assert eccv_verdict(levels).confidence == pytest.approx(confidence)


def test_the_distribution_counts_every_level_including_unused_ones():
    verdict = eccv_verdict([Y, WN, WN])
    assert verdict.distribution == {"yes": 1, "weak_yes": 0, "weak_no": 2, "no": 0}


@pytest.mark.parametrize("levels", [[Y], [WY, N], [Y, Y, WY, WN, N, N, N]])
def test_the_distribution_adds_up_to_the_number_of_answers(levels):
    distribution = eccv_verdict(levels).distribution
    assert set(distribution) == {level.value for level in Level}
    assert sum(distribution.values()) == len(levels)


def test_answers_given_as_strings_are_read_as_levels():
    assert eccv_verdict(["weak_yes", "yes", "no"]) == eccv_verdict([WY, Y, N])


def test_an_unknown_answer_is_refused():
    with pytest.raises(ValueError):
        eccv_verdict(["maybe"])


def test_the_order_of_the_answers_does_not_matter():
    assert eccv_verdict([Y, N, WY, WN, WY]) == eccv_verdict([WY, WY, WN, N, Y])


def test_a_pair_without_answers_cannot_be_aggregated():
    with pytest.raises(ValueError, match="without judgements"):
        eccv_verdict([])
