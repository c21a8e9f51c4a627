"""MTurk cost estimates: commission tiers, the per-assignment minimum, exact cents."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mitl.costs import candidates_at_most, hits_for, mturk_cost


def test_small_hits_pay_twenty_percent_commission():
    cost = mturk_cost(
        hits=100, assignments_per_hit=3, items_per_hit=18, reward_per_assignment=Decimal("0.50")
    )
    assert (cost.rewards, cost.commission, cost.total) == (
        Decimal("150.00"),
        Decimal("30.00"),
        Decimal("180.00"),
    )
    assert (cost.assignments, cost.judgements) == (300, 5400)


def test_hits_with_ten_or_more_assignments_pay_forty_percent():
    nine = mturk_cost(hits=1, assignments_per_hit=9, items_per_hit=18, reward_per_assignment=1)
    ten = mturk_cost(hits=1, assignments_per_hit=10, items_per_hit=18, reward_per_assignment=1)
    assert nine.commission_rate == Decimal("0.20") and nine.total == Decimal("10.80")
    assert ten.commission_rate == Decimal("0.40") and ten.total == Decimal("14.00")


def test_commission_is_at_least_a_cent_per_assignment():
    cost = mturk_cost(
        hits=10, assignments_per_hit=1, items_per_hit=18, reward_per_assignment=Decimal("0.02")
    )
    assert cost.commission == Decimal("0.10")  # 20% of 2 cents would round to 0


def test_the_eccv_caption_scale_costs_what_the_paper_implies():
    # 2,160 HITs of one assignment each at $0.50 (illustrative reward).
    cost = mturk_cost(
        hits=2160, assignments_per_hit=1, items_per_hit=20, reward_per_assignment=Decimal("0.5")
    )
    assert cost.judgements == 43_200 and cost.total == Decimal("1296.00")
    assert cost.to_json()["total"] == "1296.00"


@pytest.mark.parametrize("reward", [Decimal("0"), Decimal("0.009")])
def test_a_reward_below_a_cent_is_refused(reward):
    with pytest.raises(ValueError, match="at least"):
        mturk_cost(hits=1, assignments_per_hit=1, items_per_hit=18, reward_per_assignment=reward)


def test_hits_and_candidates_bounds():
    assert [hits_for(n, 16) for n in (0, 1, 16, 17)] == [0, 1, 1, 2]
    assert candidates_at_most(queries=2594, k=5, annotators=5) == 64_850


def test_a_dollar_budget_buys_whole_assignments_of_judgements():
    from mitl.costs import judgements_for_dollars

    # $0.50 + 20% commission ($0.10) = $0.60 an assignment; $100 buys 166 of 18 pairs each.
    assert (
        judgements_for_dollars(
            Decimal("100"),
            assignments_per_hit=3,
            items_per_hit=18,
            reward_per_assignment=Decimal("0.50"),
        )
        == 166 * 18
    )
    # 10 or more assignments per HIT: 40% commission, $0.70 each; $7 buys exactly 10.
    assert (
        judgements_for_dollars(
            Decimal("7"),
            assignments_per_hit=10,
            items_per_hit=18,
            reward_per_assignment=Decimal("0.50"),
        )
        == 10 * 18
    )
