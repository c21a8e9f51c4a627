"""Fair pay in the browser: an admin reads the hourly wage on the MTurk page and pays the
top-ups (MTurk is the real boto3 client behind botocore's Stubber). Screenshots go to
var/screenshots/fair_pay_*.png."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Batch
from tests.annotation.wage_factories import approved_work, mturk_worker
from tests.mturk_published import published_on_sandbox

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a long admin password"


@pytest.fixture
def paid_on_mturk(annotating_batch, settings) -> Batch:
    """Published on the sandbox; three approved, confirmed MTurk assignments on HIT 0 and 1."""
    settings.MTURK_EXTERNAL_BASE_URL = "https://mitl.example.org"
    published_on_sandbox(annotating_batch, hit_type_id="3TYPE1")
    h0, h1, *_ = annotating_batch.hits.order_by("index")
    approved_work(h0, mturk_worker("A1QUICK"), 90, assignment_id="3AQUICK")
    approved_work(h0, mturk_worker("A1STEADY"), 120, assignment_id="3ASTEADY")
    approved_work(h1, mturk_worker("A1SLOW"), 150, assignment_id="3ASLOW")
    return annotating_batch


def test_an_admin_reads_the_hourly_wage_and_pays_the_top_ups(
    new_page, paid_on_mturk, mturk_api, screenshots_dir
):
    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    page.goto(f"/batches/{paid_on_mturk.pk}/mturk/")
    section = page.locator("#fair-pay")
    assert section.locator("#wage-median").inner_text() == "120 s"
    assert section.locator("#wage-hourly").inner_text() == "$15.00/h"  # 0.50 × 3600 / 120
    assert "A1SLOW" in section.locator("#wage-workers tr.golden-failed").inner_text()
    section.scroll_into_view_if_needed()
    section.screenshot(path=screenshots_dir / "fair_pay_mturk_page.png")

    mturk_api.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "A1SLOW",
            "AssignmentId": "3ASLOW",
            "BonusAmount": "0.13",  # 15 × 150 / 3600 − 0.50 = 0.125, rounded up
            "Reason": (
                "Top-up to our minimum pay of $15.00 per hour: your measured time on this HIT "
                "was 150 seconds, so its reward of $0.50 made $12.00 per hour. This bonus of "
                "$0.13 brings it to the minimum. Thank you for your work."
            ),
            "UniqueRequestToken": "mitl-topup-3ASLOW",
        },
    )
    page.get_by_role("button", name="Pay top-ups ($0.13)").click()
    page.wait_for_selector("text=1 top-ups to the minimum wage sent, $0.13 in all")
    mturk_api.assert_no_pending_responses()
    assert page.locator("#pay-topups").count() == 0
    assert "$0.13 paid before" in page.locator("#wage-topups-total").inner_text()
    page.locator("#fair-pay").screenshot(path=screenshots_dir / "fair_pay_topups_paid.png")

    page.goto(f"/batches/{paid_on_mturk.pk}/")
    assert page.locator("#fair-pay #wage-hourly").inner_text() == "$15.00/h"
    page.locator("#fair-pay").screenshot(path=screenshots_dir / "fair_pay_batch_page.png")
