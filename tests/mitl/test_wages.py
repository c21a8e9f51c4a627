"""Fair-pay arithmetic (mitl.wages), every expected value computed by hand."""

from __future__ import annotations

import statistics
from decimal import Decimal

import pytest

from mitl.wages import (
    BASIS_BATCH,
    BASIS_PAIRS,
    assignment_seconds,
    below_minimum,
    estimate_from_pairs,
    estimate_from_stats,
    hourly_wage,
    pay_needed,
    quantile,
    seconds_text,
    top_up,
    wage_stats,
)

D = Decimal


def test_an_assignment_takes_the_sum_of_its_pairs_times_capped_at_the_time_allowed():
    assert assignment_seconds([40_000, 50_000, 30_000], limit_seconds=1800) == D("120")
    assert assignment_seconds([40_000, 50_000, 30_000], limit_seconds=60) == D("60")
    assert assignment_seconds([1234, 1], limit_seconds=60) == D("1.235")  # to the millisecond
    assert assignment_seconds([], limit_seconds=60) == 0


def test_quartiles_follow_numpys_linear_method():
    # 90, 120, 150: h = 2p, so q1 = 90 + 0.5 × 30, median = 120, q3 = 120 + 0.5 × 30
    assert [quantile([150, 90, 120], p) for p in (0.25, 0.5, 0.75)] == [D(105), D(120), D(135)]
    # 10, 20, 30, 40: h = 3p → 0.75, 1.5, 2.25
    assert [quantile([10, 20, 30, 40], p) for p in (0.25, 0.5, 0.75)] == [
        D("17.5"),
        D("25"),
        D("32.5"),
    ]
    assert quantile([42], 0.25) == quantile([42], 0.75) == D(42)
    # the same as the standard library's inclusive quartiles
    data = [3, 7, 12, 18, 30, 31.5]
    expected = statistics.quantiles(data, n=4, method="inclusive")
    assert [float(quantile(data, p)) for p in (0.25, 0.5, 0.75)] == expected
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)


def test_the_stats_of_90_120_and_150_seconds_at_50_cents_make_15_dollars_an_hour():
    stats = wage_stats([90, 120, 150], reward=D("0.50"), minimum_hourly=D("15.00"))
    assert stats is not None
    assert (stats.assignments, stats.median_seconds) == (3, D(120))
    assert (stats.q1_seconds, stats.q3_seconds) == (D(105), D(135))
    assert stats.hourly == D("15.00")  # 0.50 × 3600 / 120
    assert not stats.below_minimum  # exactly the minimum is not below it
    above = wage_stats([90, 120, 150], reward=D("0.50"), minimum_hourly=D("15.01"))
    assert above is not None and above.below_minimum  # 1800 < 15.01 × 120 = 1801.2
    assert wage_stats([], reward=D("0.50")) is None
    idle = wage_stats([0], reward=D("0.50"), minimum_hourly=D("15.00"))
    assert idle is not None and idle.hourly is None and not idle.below_minimum
    assert stats.to_json()["hourly"] == "15.00"


def test_hourly_wages_round_half_up_to_cents():
    assert hourly_wage(D("0.50"), 150) == D("12.00")
    assert hourly_wage(D("0.50"), 90) == D("20.00")
    assert hourly_wage(D("0.50"), 7) == D("257.14")  # 257.142857…
    assert hourly_wage(D("0.89"), 800) == D("4.01")  # 4.005 exactly: half up
    with pytest.raises(ValueError, match="positive time"):
        hourly_wage(D("0.50"), 0)


def test_a_top_up_brings_the_pay_to_the_minimum_rounded_up_to_cents():
    # 15 × 150 / 3600 = 0.625 owed; 0.625 − 0.50 = 0.125 → 0.13
    assert top_up(reward=D("0.50"), seconds=150, minimum_hourly=D("15.00")) == D("0.13")
    # 15 × 135 / 3600 = 0.5625 → 0.0625 → 0.07
    assert top_up(reward=D("0.50"), seconds=135, minimum_hourly=D("15.00")) == D("0.07")
    # 15 × 121 / 3600 = 0.50416… → 0.00416… → 0.01: never a cent short
    assert top_up(reward=D("0.50"), seconds=121, minimum_hourly=D("15.00")) == D("0.01")
    assert top_up(reward=D("0.50"), seconds=120, minimum_hourly=D("15.00")) == D("0.00")
    assert top_up(reward=D("0.50"), seconds=90, minimum_hourly=D("15.00")) == D("0.00")
    # 15 × 122.4 / 3600 = 0.51 exactly; the float 122.4 is a hair above 122.4, which a
    # binary-exact sum would round up to 0.02: a float counts as the decimal it prints as
    assert top_up(reward=D("0.50"), seconds=122.4, minimum_hourly=D("15.00")) == D("0.01")
    assert below_minimum(reward=D("0.50"), seconds=121, minimum_hourly=D("15.00"))
    assert not below_minimum(reward=D("0.50"), seconds=121, minimum_hourly=None)


def test_an_estimate_from_seconds_per_pair_warns_with_the_reward_that_pays_the_minimum():
    estimate = estimate_from_pairs(
        seconds_per_pair=D("7.5"),
        items_per_hit=18,
        reward=D("0.50"),
        minimum_hourly=D("15.00"),
        assignments=4,
    )
    assert estimate.basis == BASIS_PAIRS
    assert estimate.seconds_per_hit == D(135)  # 7.5 × 18
    assert estimate.hourly == D("13.33")  # 0.50 × 3600 / 135 = 13.333…
    assert estimate.below_minimum
    assert estimate.reward_needed == D("0.57")  # 15 × 135 / 3600 = 0.5625, rounded up
    assert estimate.warning() == (
        "estimated $13.33/h at the median measured time (135 s per HIT) is below the batch's "
        "minimum $15.00/h: raise the reward to at least $0.57 or pay top-ups after review"
    )
    assert estimate.basis_text() == (
        "7.5 s per judged pair (median of 4 approved assignments in other batches) × "
        "18 pairs per HIT"
    )
    assert pay_needed(seconds=135, minimum_hourly=D("15.00")) == D("0.57")
    paid_enough = estimate_from_pairs(
        seconds_per_pair=D("7.5"),
        items_per_hit=18,
        reward=D("0.57"),
        minimum_hourly=D("15.00"),
        assignments=4,
    )
    assert paid_enough.hourly == D("15.20") and paid_enough.warning() is None
    no_minimum = estimate_from_pairs(
        seconds_per_pair=2, items_per_hit=18, reward=D("0.50"), minimum_hourly=None, assignments=1
    )
    assert no_minimum.warning() is None and no_minimum.reward_needed is None


def test_an_estimate_from_the_batchs_own_work_takes_its_median():
    stats = wage_stats([90, 120, 150], reward=D("0.50"), minimum_hourly=D("16.00"))
    assert stats is not None
    estimate = estimate_from_stats(stats, items_per_hit=18)
    assert (estimate.basis, estimate.seconds_per_hit, estimate.hourly) == (
        BASIS_BATCH,
        D(120),
        D("15.00"),
    )
    assert estimate.reward_needed == D("0.54")  # 16 × 120 / 3600 = 0.5333…, rounded up
    assert estimate.basis_text() == "median of this batch's 3 approved assignments"
    assert "raise the reward to at least $0.54" in (estimate.warning() or "")


def test_seconds_are_written_with_at_most_one_decimal():
    assert (seconds_text(D("120.000")), seconds_text(D("72.5")), seconds_text(D("1.04"))) == (
        "120",
        "72.5",
        "1",
    )
