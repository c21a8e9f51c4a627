"""A batch's fair pay (annotation.mturk.wages): measured time of approved work, the hourly wage
overall and per worker, the estimate before publication and the top-ups owed. Every
expected value computed by hand."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import Batch
from annotation.mturk.hit_settings import mturk_settings_save
from annotation.mturk.wages import (
    NO_ESTIMATE,
    batch_wages,
    topups_proposed,
    wage_estimate,
    wage_warnings,
)
from mitl.wages import BASIS_BATCH, BASIS_PAIRS

from .crowd_factories import batch_make, hit_make
from .wage_factories import approved_work, mturk_worker, platform_worker

pytestmark = pytest.mark.django_db
D = Decimal


@pytest.fixture
def paid_batch(tiny) -> Batch:
    """Approved platform work of 90, 120 and 150 s (W2 did two HITs), and work that does
    not count: submitted, rejected, and approved MTurk work MTurk never confirmed."""
    batch = batch_make(tiny)
    h0, h1, h2 = (hit_make(batch, index) for index in range(3))
    w1, w2, w3 = (platform_worker(name) for name in ("w1", "w2", "w3"))
    approved_work(h0, w1, 90)
    approved_work(h0, w2, 120)
    approved_work(h1, w2, 150)
    approved_work(h1, w3, 500, status="submitted")  # flagged, waiting for a person
    approved_work(h2, w3, 400, status="rejected")
    approved_work(h2, mturk_worker("A1MADEUP"), 600, assignment_id="3AX", confirmed=False)
    return batch


def test_batch_wages_take_the_median_and_quartiles_of_approved_work(paid_batch):
    wages = batch_wages(batch=paid_batch)
    assert (wages.reward, wages.minimum_hourly, wages.limit_seconds) == (
        D("0.50"),
        D("15.00"),
        1800,
    )
    overall = wages.overall
    assert overall is not None
    assert overall.assignments == 3  # 90, 120, 150
    assert (overall.q1_seconds, overall.median_seconds, overall.q3_seconds) == (105, 120, 135)
    assert overall.hourly == D("15.00") and not overall.below_minimum
    # per worker, lowest paid first: w2 (120, 150: median 135 → 0.50 × 3600 / 135 = 13.33)
    rows = [
        (row.worker.external_id, row.stats.assignments, row.stats.median_seconds)
        for row in wages.workers
    ]
    assert rows == [("w2", 2, 135), ("w1", 1, 90)]
    w2, w1 = wages.workers
    assert (w2.stats.q1_seconds, w2.stats.q3_seconds) == (D("127.5"), D("142.5"))
    assert (w2.stats.hourly, w2.stats.below_minimum) == (D("13.33"), True)
    assert (w1.stats.hourly, w1.stats.below_minimum) == (D("20.00"), False)
    assert wages.workers_below == 1
    assert wages.to_json()["overall"]["median_seconds"] == "120.000"


def test_time_is_capped_at_the_time_allowed_per_assignment(tiny):
    batch = batch_make(tiny, assignment_minutes=2)
    hits = [hit_make(batch, index) for index in range(3)]
    for hit, seconds in zip(hits, (90, 120, 150), strict=True):
        approved_work(hit, platform_worker(f"w{seconds}"), seconds)
    overall = batch_wages(batch=batch).overall
    assert overall is not None
    # 150 s counts as the 120 s allowed: 90, 120, 120
    assert (overall.q1_seconds, overall.median_seconds, overall.q3_seconds) == (105, 120, 120)


def test_a_batch_without_approved_work_has_no_figures(tiny):
    wages = batch_wages(batch=batch_make(tiny))
    assert (wages.overall, wages.workers) == (None, [])


def test_the_estimate_uses_the_batchs_own_work_else_seconds_per_pair_elsewhere(paid_batch, tiny):
    own = wage_estimate(batch=paid_batch)
    assert own is not None
    assert (own.basis, own.seconds_per_hit, own.hourly, own.assignments) == (
        BASIS_BATCH,
        120,
        D("15.00"),
        3,
    )
    assert wage_warnings(batch=paid_batch) == []  # exactly the minimum

    fresh = batch_make(tiny)  # 16 pairs to judge + 2 check pairs per HIT
    estimate = wage_estimate(batch=fresh)
    assert estimate is not None
    # paid_batch's HITs have 3 pairs: 30, 40 and 50 s per pair → median 40 s × 18 pairs
    assert (estimate.basis, estimate.seconds_per_pair, estimate.seconds_per_hit) == (
        BASIS_PAIRS,
        40,
        720,
    )
    assert estimate.hourly == D("2.50")  # 0.50 × 3600 / 720
    assert estimate.reward_needed == D("3.00")  # 15 × 720 / 3600
    assert wage_warnings(batch=fresh) == [
        "estimated $2.50/h at the median measured time (720 s per HIT) is below the batch's "
        "minimum $15.00/h: raise the reward to at least $3.00 or pay top-ups after review"
    ]
    assert estimate.basis_text() == (
        "40 s per judged pair (median of 3 approved assignments in other batches) × "
        "18 pairs per HIT"
    )

    mturk_settings_save(batch=paid_batch, raw={"min_hourly_wage": "16.00"})
    warnings = wage_warnings(batch=Batch.objects.get(pk=paid_batch.pk))
    assert warnings == [
        "estimated $15.00/h at the median measured time (120 s per HIT) is below the batch's "
        "minimum $16.00/h: raise the reward to at least $0.54 or pay top-ups after review"
    ]  # 16 × 120 / 3600 = 0.5333… → 0.54


def test_simulated_time_shows_in_its_batch_but_never_estimates_another(tiny):
    simulated = batch_make(tiny)
    worker = platform_worker("sim")
    worker.source = "simulated"
    worker.save()
    approved_work(hit_make(simulated, 0), worker, 60)
    assert batch_wages(batch=simulated).overall is not None
    assert wage_estimate(batch=simulated) is None
    fresh = batch_make(tiny)
    assert wage_estimate(batch=fresh) is None
    assert wage_warnings(batch=fresh) == [
        f"no wage estimate for the minimum of $15.00/h: {NO_ESTIMATE}"
    ]
    mturk_settings_save(batch=fresh, raw={"min_hourly_wage": ""})  # no check
    assert wage_warnings(batch=Batch.objects.get(pk=fresh.pk)) == []


def test_top_ups_are_proposed_for_confirmed_mturk_work_below_the_minimum(tiny):
    batch = batch_make(tiny)
    h0, h1, h2 = (hit_make(batch, index) for index in range(3))
    approved_work(h0, mturk_worker("A1FAST"), 90, assignment_id="3A01")  # $20/h: none
    slow = approved_work(h0, mturk_worker("A1SLOW"), 150, assignment_id="3A02")
    approved_work(h1, mturk_worker("A1MADEUP"), 150, assignment_id="3A03", confirmed=False)
    approved_work(h1, platform_worker("local"), 150)  # platform work: not paid on MTurk
    approved_work(h2, mturk_worker("A1PAID"), 135, assignment_id="3A04")
    approved_work(h2, mturk_worker("A1WAIT"), 300, assignment_id="3A05", status="submitted")
    Batch.objects.filter(pk=batch.pk).update(
        mturk={
            "bonuses": {
                "mitl-bonus-3A02": {"assignment": "3A02", "amount": "0.25", "purpose": "bonus"},
                "mitl-topup-3A04": {"assignment": "3A04", "amount": "0.07", "purpose": "topup"},
            }
        }
    )
    proposed = topups_proposed(batch=batch)
    assert [(t.assignment.external_id, t.amount, t.paid, t.token) for t in proposed] == [
        ("3A02", D("0.13"), False, "mitl-topup-3A02"),  # 15 × 150 / 3600 − 0.50 = 0.125
        ("3A04", D("0.07"), True, "mitl-topup-3A04"),  # 15 × 135 / 3600 − 0.50 = 0.0625
    ]
    assert proposed[0].assignment == slow
    assert proposed[0].reason() == (
        "Top-up to our minimum pay of $15.00 per hour: your measured time on this HIT was "
        "150 seconds, so its reward of $0.50 made $12.00 per hour. This bonus of $0.13 "
        "brings it to the minimum. Thank you for your work."
    )
    mturk_settings_save(batch=batch, raw={"min_hourly_wage": ""})
    assert topups_proposed(batch=Batch.objects.get(pk=batch.pk)) == []
