"""A worker's figures that need a second look: agreement with co-workers, speed and pay."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mitl.worker_flags import (
    Agreement,
    WorkerFlag,
    coworker_agreement,
    majority,
    measured_hourly,
    median_seconds_per_pair,
    worker_flags,
)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([], None),
        ([True], True),
        ([False, False, True], False),
        ([True, False], None),  # a tie has no majority
        ([True, True, False, False, True], True),
    ],
)
def test_the_majority_of_yes_no_answers(answers, expected):
    assert majority(answers) is expected


def test_agreement_counts_only_pairs_where_co_workers_have_a_majority():
    own = [("a", True), ("b", False), ("c", True), ("d", False)]
    others = {
        "a": [True, True],  # agrees
        "b": [True, True, False],  # disagrees
        "c": [True, False],  # a tie: left out
        # "d": nobody else judged it: left out
    }

    agreement = coworker_agreement(own, others)

    assert agreement == Agreement(compared=2, agreed=1)
    assert agreement.share == 0.5


def test_agreement_is_none_without_co_workers():
    assert coworker_agreement([("a", True)], {}).share is None
    assert coworker_agreement([], {"a": [True]}).share is None


def test_the_median_time_per_pair_is_in_seconds():
    assert median_seconds_per_pair([400, 300, 5000]) == 0.4
    assert median_seconds_per_pair([1000, 3000]) == 2.0
    assert median_seconds_per_pair([]) is None


@pytest.mark.parametrize(
    ("reward", "seconds", "hourly"),
    [
        (Decimal("0.50"), Decimal(60), Decimal("30.00")),
        (Decimal("0.50"), Decimal("3.285"), Decimal("547.95")),  # 0.4 s on each of 8 pairs
        (Decimal("0.25"), Decimal(7), Decimal("128.57")),
        (Decimal(0), Decimal(60), None),  # nothing paid: nothing to say
        (Decimal("0.50"), Decimal(0), None),  # no time measured: no finite rate
    ],
)
def test_measured_hourly_pay(reward, seconds, hourly):
    assert measured_hourly(reward=reward, seconds=seconds) == hourly


@pytest.mark.parametrize(
    ("median", "hourly", "untimed", "flags"),
    [
        (0.4, Decimal("548"), False, (WorkerFlag.FAST, WorkerFlag.PAY)),
        (1.99, None, False, (WorkerFlag.FAST,)),
        (2.0, Decimal("60.00"), False, ()),  # at the limits: not flagged
        (5.0, Decimal("60.01"), False, (WorkerFlag.PAY,)),
        (None, None, True, (WorkerFlag.PAY,)),  # paid for no measured time
        (None, None, False, ()),
    ],
)
def test_speed_and_pay_flags(median, hourly, untimed, flags):
    assert worker_flags(median_pair_seconds=median, hourly=hourly, paid_untimed=untimed) == flags
