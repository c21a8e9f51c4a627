"""A staff member opens a dataset's relevance calibration in a real browser: the link on the
dataset page, the table per ratings source, the chart, and the recommended proxy."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.pipeline.test_relevance_service import rated_pairs, sits_file

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long staff password"


def test_staff_read_the_calibration_table_and_chart(new_page, dataset, tmp_path, screenshots_dir):
    get_user_model().objects.create_user("staff", password=PASSWORD, is_staff=True)
    ratings = sits_file(tmp_path, rated_pairs(dataset, 40))
    call_command(
        "relevance_calibrate", dataset.name, "--sits", str(ratings), "--proxies", "bow,cider_d",
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip

    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"/datasets/{dataset.pk}/")
    with page.expect_navigation():
        page.click("#relevance-link")

    section = page.locator("#calibration-sits")
    assert section.locator("h2").inner_text().startswith("CxC image-caption ratings")
    rows = section.locator("tbody tr")
    names = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
    assert names[:4] == ["bow/mean", "bow/max", "cider_d/mean", "cider_d/max"]
    assert names[-1].startswith("combination")
    assert section.locator("svg").count() == 1 and section.locator("svg").is_visible()
    # The ratings are word overlap by another hand: a word-overlap proxy is recommended.
    assert "Recommended relevance for this dataset: bow/" in section.inner_text()
    page.screenshot(path=screenshots_dir / "relevance_calibration.png", full_page=True)
