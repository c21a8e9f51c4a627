"""An admin reviews with the keyboard (j/k to move, r to write feedback, a to approve) and
approves several submissions at once from the queue."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Assignment, Caption, Dataset, Image
from tests.annotation.crowd_factories import (
    MINUTE,
    N_PAIRS,
    RIGHT,
    T0,
    batch_make,
    hit_make,
    work_done,
    worker_make,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long demo password"


@pytest.fixture
def waiting(db) -> list[Assignment]:
    """Three submissions of one HIT, by three workers, that wait for review, oldest first."""
    dataset = Dataset.objects.create(name="tiny")
    for i in range(N_PAIRS):
        image = Image.objects.create(dataset=dataset, ext_id=i)
        Caption.objects.create(dataset=dataset, ext_id=100 + i, image=image, text=f"caption {i}")
    hit = hit_make(batch_make(dataset), 0, max_assignments=3)
    levels = {**RIGHT, "task": "yes"}
    return [
        work_done(
            hit,
            worker_make(f"w{i}"),
            levels,
            elapsed_ms=5000,
            policy="review_all",
            now=T0 + (i + 1) * MINUTE,
        )
        for i in range(3)
    ]


def log_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/work/")


def test_an_admin_reviews_with_the_keyboard(new_page, waiting, screenshots_dir):
    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    first, second, third = waiting
    page = new_page()
    log_in(page, "admin")
    page.goto(f"/review/{first.pk}/")
    page.locator("th.coworker").first.wait_for()
    page.screenshot(path=screenshots_dir / "review_side_by_side.png", full_page=True)

    with page.expect_navigation(url=re.compile(rf"/review/{second.pk}/$")):
        page.keyboard.press("j")
    with page.expect_navigation(url=re.compile(rf"/review/{first.pk}/$")):
        page.keyboard.press("k")
    page.keyboard.press("r")
    page.locator("#feedback:focus").wait_for()
    page.keyboard.type("a j k")  # typed into the feedback: no shortcut fires
    assert page.url.endswith(f"/review/{first.pk}/")
    page.locator("#feedback").fill("")
    page.locator("#feedback").blur()
    with page.expect_navigation(url=re.compile(rf"/review/{second.pk}/$")):
        page.keyboard.press("a")  # approved: the next submission opens
    page.get_by_text(f"Assignment {first.pk} approved.").wait_for()
    first.refresh_from_db()
    assert first.status == "approved"

    page.goto("/review/")
    page.locator("#select-all").check()
    page.get_by_role("button", name="Approve selected").click()
    page.get_by_text(f"Approved 2 assignments: {second.pk}, {third.pk}.").wait_for()
    page.screenshot(path=screenshots_dir / "review_bulk_approved.png", full_page=True)
    statuses = set(Assignment.objects.values_list("status", flat=True))
    assert statuses == {"approved"}
