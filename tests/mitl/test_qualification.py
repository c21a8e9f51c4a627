"""The qualification round's pure rules: the exact pass mark, the mix, who stands where, the
pool the tries need and one try's draw from it."""

from __future__ import annotations

import random

import pytest

from mitl.config import parse_batch_config
from mitl.judgements import Level
from mitl.qualification import (
    QualificationStatus,
    qualification_answer_right,
    qualification_mix,
    qualification_passed,
    qualification_pool_needs,
    qualification_pool_shortfall,
    qualification_state,
    qualification_try_draw,
)


@pytest.mark.parametrize(
    ("correct", "total", "share", "passed"),
    [
        (4, 5, 0.8, True),  # exactly the mark; the float 0.8 is a hair above 4/5
        (3, 5, 0.8, False),
        (8, 10, 0.8, True),
        (7, 10, 0.7, True),
        (6, 10, 0.7, False),
        (2, 3, 0.66, True),  # 2/3 = 0.666… ≥ 0.66
        (2, 3, 0.67, False),
        (5, 5, 1.0, True),
        (4, 5, 1.0, False),
        (1, 2, 0.5, True),
        (29, 50, 0.58, True),  # 0.58 * 50 is 28.999999999999996 in floats
        (28, 50, 0.58, False),
    ],
)
def test_the_pass_mark_is_exact(correct, total, share, passed):
    assert qualification_passed(correct, total, share) is passed


def test_the_pass_mark_needs_a_round_and_a_possible_count():
    with pytest.raises(ValueError, match="at least one pair"):
        qualification_passed(0, 0, 0.8)
    with pytest.raises(ValueError, match="between 0 and 5"):
        qualification_passed(6, 5, 0.8)


@pytest.mark.parametrize(("count", "mix"), [(1, (1, 0)), (4, (2, 2)), (5, (3, 2)), (10, (5, 5))])
def test_half_the_pairs_match_the_odd_one_a_match(count, mix):
    assert qualification_mix(count) == mix


@pytest.mark.parametrize(
    ("positive", "level", "right"),
    [
        (True, Level.YES, True),
        (True, Level.WEAK_YES, True),
        (True, Level.WEAK_NO, False),
        (True, Level.NO, False),
        (False, Level.YES, False),
        (False, Level.WEAK_YES, False),
        (False, Level.WEAK_NO, True),
        (False, Level.NO, True),
    ],
)
def test_either_yes_is_right_for_a_match_and_either_no_for_a_mismatch(positive, level, right):
    assert qualification_answer_right(positive, level) is right


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"required": False, "passed": False, "in_progress": False, "finished": 0}, "not_required"),
        ({"required": True, "passed": False, "in_progress": False, "finished": 0}, "open"),
        ({"required": True, "passed": False, "in_progress": True, "finished": 1}, "open"),
        ({"required": True, "passed": False, "in_progress": False, "finished": 1}, "open"),
        ({"required": True, "passed": False, "in_progress": False, "finished": 2}, "failed"),
        ({"required": True, "passed": True, "in_progress": False, "finished": 2}, "qualified"),
    ],
)
def test_a_worker_stands_open_until_it_passes_or_uses_every_try(state, expected):
    assert qualification_state(**state, allowed=2) == QualificationStatus(expected)


@pytest.mark.parametrize(
    ("pairs", "attempts", "needs"),
    [(5, 2, (6, 4)), (4, 3, (6, 6)), (1, 1, (1, 0)), (7, 3, (12, 9))],
)
def test_the_pool_holds_each_tries_mix_for_every_try(pairs, attempts, needs):
    assert qualification_pool_needs(pairs, attempts) == needs
    config = parse_batch_config(
        {"annotators": ["tfidf"], "qualification_pairs": pairs, "qualification_attempts": attempts}
    )
    assert config.qualification_pool == sum(needs) == pairs * attempts


def test_a_pool_short_of_either_kind_says_what_it_lacks():
    assert qualification_pool_shortfall(matches=6, mismatches=4, pairs=5, attempts=2) is None
    assert qualification_pool_shortfall(matches=9, mismatches=9, pairs=5, attempts=2) is None
    short = qualification_pool_shortfall(matches=7, mismatches=3, pairs=5, attempts=2)
    assert short == (
        "each try shows 5 pairs (3 YES, 2 NO) that no earlier try of the worker showed, in up "
        "to 2 tries, so the pool needs at least 6 YES and 4 NO pairs (5 pairs x 2 tries); it "
        "has 7 YES and 3 NO"
    )


def test_a_try_draws_the_mix_in_an_order_of_its_own_or_nothing_when_too_few_are_left():
    rng = random.Random(7)
    draws = [
        qualification_try_draw(matches=[1, 2, 3, 4], mismatches=[5, 6, 7], pairs=3, rng=rng)
        for _ in range(20)
    ]
    for drawn in draws:
        assert len(drawn) == 3 and len({pk for pk in drawn if pk <= 4}) == 2
    assert len({tuple(drawn) for drawn in draws}) > 1
    assert len({drawn.index(next(pk for pk in drawn if pk > 4)) for drawn in draws}) > 1
    assert qualification_try_draw(matches=[1], mismatches=[5, 6], pairs=3, rng=rng) is None
