"""Fair pay on the batch page and the MTurk page: the figures, the warning before the
publish button, the minimum-wage setting and the "Pay top-ups" action (Stubber)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import HIT, Batch
from annotation.mturk.wages import NO_ESTIMATE
from tests.annotation.wage_factories import approved_work, mturk_worker, platform_worker
from tests.mturk_published import published_on_sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _mturk_settings(settings, monkeypatch):
    settings.MTURK_EXTERNAL_BASE_URL = "https://mitl.example.org"

    def no_default_client(**kwargs):
        pytest.fail("a page made its own MTurk client: this test gives none")

    monkeypatch.setattr("annotation.mturk.client.mturk_client", no_default_client)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user("boss", password="pw-boss-123", is_staff=True)
    client.force_login(user)
    return client


def batch_url(batch: Batch) -> str:
    return reverse("frontend:batch", args=[batch.pk])


def mturk_url(batch: Batch) -> str:
    return reverse("frontend:mturk-batch", args=[batch.pk])


def hits(batch: Batch) -> list[HIT]:
    return list(batch.hits.order_by("index"))


def test_a_batch_without_approved_work_says_so_and_that_nothing_estimates_it(
    staff, annotating_batch
):
    html = staff.get(batch_url(annotating_batch)).content.decode()
    assert '<strong id="wage-reward">$0.50</strong>' in html
    assert '<strong id="wage-minimum">$15.00/h</strong>' in html
    assert "No approved work yet" in html
    assert f"{NO_ESTIMATE}." in html
    mturk = staff.get(mturk_url(annotating_batch)).content.decode()
    assert "No approved work yet" in mturk
    # before the publish button: there is no estimate
    assert f'<p class="muted" id="publish-wage-warning">Fair pay: {NO_ESTIMATE}.</p>' in mturk


def test_the_batch_page_shows_the_median_its_spread_and_who_is_below(staff, annotating_batch):
    h0, h1, *_ = hits(annotating_batch)
    approved_work(h0, platform_worker("quick"), 90)
    approved_work(h0, platform_worker("steady"), 120)
    approved_work(h1, platform_worker("slow"), 150)
    html = staff.get(batch_url(annotating_batch)).content.decode()
    assert '<span id="wage-median">120 s</span> (105–135 s)' in html
    assert '<strong id="wage-hourly">$15.00/h</strong>' in html  # 0.50 × 3600 / 120
    assert "1 of 3" in html  # workers below the minimum
    assert '<tr class="golden-failed">\n      <td><code>slow</code></td>' in html  # $12.00/h
    assert "$12.00/h" in html and "$20.00/h" in html
    assert "median of this batch&#x27;s 3 approved assignments" in html
    assert "No approved work yet" not in html


def test_the_mturk_page_warns_before_publishing_below_the_minimum(staff, annotating_batch):
    h0, *_ = hits(annotating_batch)
    approved_work(h0, platform_worker("slow"), 150)  # 0.50 × 3600 / 150 = $12.00/h
    html = staff.get(mturk_url(annotating_batch)).content.decode()
    warning = html.index('id="publish-wage-warning"')
    assert warning < html.index('id="publish-sandbox"')
    assert (
        "Fair pay: estimated $12.00/h at the median measured time (150 s per HIT) is below "
        "the batch&#x27;s minimum $15.00/h: raise the reward to at least $0.63 or pay top-ups "
        "after review."
    ) in html  # 15 × 150 / 3600 = 0.625 → $0.63
    assert 'id="publish-sandbox"' in html  # never blocked


def test_the_minimum_wage_is_a_setting_that_may_change_after_publication(staff, annotating_batch):
    html = staff.get(mturk_url(annotating_batch)).content.decode()
    assert 'name="min_hourly_wage" value="15.00"' in html
    staff.post(mturk_url(annotating_batch), {"action": "settings", "min_hourly_wage": "17.5"})
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["settings"]["min_hourly_wage"] == "17.50"
    bad = staff.post(
        mturk_url(annotating_batch), {"action": "settings", "min_hourly_wage": "a lot"}, follow=True
    )
    assert "`min_hourly_wage` must be a dollar amount like 0.50" in bad.content.decode()

    annotating_batch.hits.filter(index=0).update(external_id="3HITX")  # published
    staff.post(mturk_url(annotating_batch), {"action": "settings", "min_hourly_wage": ""})
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["settings"]["min_hourly_wage"] is None  # empty: no check
    refused = staff.post(
        mturk_url(annotating_batch), {"action": "settings", "reward": "0.90"}, follow=True
    )
    assert "only `min_hourly_wage` may" in refused.content.decode()
    html = staff.get(mturk_url(annotating_batch)).content.decode()
    assert '<strong id="wage-minimum">none</strong> (no check)' in html
    assert "Save the minimum wage" in html


@pytest.fixture
def published(annotating_batch):
    """The annotating batch as if published on the sandbox (no MTurk call needed here)."""
    return published_on_sandbox(annotating_batch, hit_type_id="3TYPE1")


def test_staff_pay_the_top_ups_from_the_mturk_page_once(staff, published, mturk_api):
    h0, *_ = hits(published)
    approved_work(h0, mturk_worker("A1FAST"), 90, assignment_id="3AFAST")
    approved_work(h0, mturk_worker("A1SLOW"), 150, assignment_id="3ASLOW")
    html = staff.get(mturk_url(published)).content.decode()
    assert "1 top-up due, <strong>$0.13</strong> in all ($0.00 paid before)." in html
    assert "Pay top-ups ($0.13)" in html
    mturk_api.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "A1SLOW",
            "AssignmentId": "3ASLOW",
            "BonusAmount": "0.13",
            "Reason": (
                "Top-up to our minimum pay of $15.00 per hour: your measured time on this HIT "
                "was 150 seconds, so its reward of $0.50 made $12.00 per hour. This bonus of "
                "$0.13 brings it to the minimum. Thank you for your work."
            ),
            "UniqueRequestToken": "mitl-topup-3ASLOW",
        },
    )
    response = staff.post(mturk_url(published), {"action": "topups"}, follow=True)
    mturk_api.assert_no_pending_responses()
    html = response.content.decode()
    assert "1 top-ups to the minimum wage sent, $0.13 in all (0 paid before)." in html
    assert "0 top-ups due, <strong>$0.00</strong> in all ($0.13 paid before)." in html
    assert "Pay top-ups (" not in html
    # The manual bonus column still offers a bonus: a top-up is not one.
    assert 'name="action" value="bonus"' in html
    again = staff.post(mturk_url(published), {"action": "topups"}, follow=True)
    assert "No top-up to pay (1 paid before)." in again.content.decode()
