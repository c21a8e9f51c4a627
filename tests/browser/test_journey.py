"""The whole journey of a batch for people, from the browser only (issue 28).

An admin creates a batch in the wizard; its automatic stages run in the request (eager
Celery, no services); two annotators judge every HIT with the keyboard, one of them failing
a check pair once; the admin approves that flagged work in the review queue, which closes
the round by itself; the batch is aggregated and released, and the admin downloads the
release zip from the releases page, then opens the batch's bias report. A screenshot per
step goes to var/screenshots/.
"""

from __future__ import annotations

import zipfile

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Assignment, Batch, BatchState, Release

from .people_batch import shapes_dataset, wizard_fill
from .test_hit_page import (
    PASSWORD,
    answer_with_keyboard,
    log_in_with_keyboard,
    open_next_hit_with_keyboard,
    plan_for,
    submitted,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANNOTATORS = ("ann", "bea")


@pytest.fixture
def shapes(db, tmp_path):
    """A small dataset, two machine annotators, an admin and two annotator accounts."""
    dataset = shapes_dataset(tmp_path)
    users = get_user_model().objects
    users.create_user("admin", password=PASSWORD, is_staff=True)
    for username in ANNOTATORS:
        users.create_user(username, password=PASSWORD)
    return dataset


def create_in_wizard(page, dataset, shot) -> Batch:
    """Fill the wizard for a small fixed batch, two assignments per HIT, and create it."""
    wizard_fill(page, dataset, name="shapes, end to end", queries=3, k=2)
    assert page.locator("#workers-warning").is_hidden()  # two accounts: enough workers
    shot(page, "journey-1-wizard")
    with page.expect_navigation(url="**/batches/*/", timeout=120_000):
        page.locator("#create-batch").click()
    batch = Batch.objects.get()
    assert batch.state == BatchState.ANNOTATING
    shot(page, "journey-2-batch-annotating")
    return batch


def judge_every_hit(page, username: str, hits: int, shot, *, fail_first: bool) -> None:
    """Log in and judge `hits` HITs with the keyboard; optionally fail the first check pair."""
    log_in_with_keyboard(page, username)
    for number in range(hits):
        assignment = open_next_hit_with_keyboard(page)
        if number == 0:
            shot(page, f"journey-3-hit-{username}")
        answer_with_keyboard(page, plan_for(assignment, wrong_golden=fail_first and number == 0))
        submitted(page)
    page.goto("/work/")
    shot(page, f"journey-4-work-done-{username}")
    assert Assignment.objects.filter(worker__user__username=username).count() == hits


def review_flagged(page, shot) -> None:
    """Approve every flagged assignment in the review queue."""
    page.goto("/review/")
    shot(page, "journey-5-review-queue")
    rows = page.locator("#review-queue tbody tr", has=page.get_by_role("link", name="Review"))
    assert rows.count() == 1
    while rows.count():
        rows.first.get_by_role("link", name="Review").click()
        page.get_by_role("button", name="Approve").click()
        page.get_by_text("approved.").first.wait_for()
        page.goto("/review/")


def test_a_batch_for_people_from_the_wizard_to_the_release_zip(
    new_page, shapes, eager_celery, screenshots_dir, tmp_path
):
    def shot(page, name: str) -> None:
        page.screenshot(path=screenshots_dir / f"{name}.png", full_page=True)

    admin = new_page()
    log_in_with_keyboard(admin, "admin")
    batch = create_in_wizard(admin, shapes, shot)
    hits = batch.hits.count()
    assert 1 <= hits <= 6  # small enough for a quick run

    for username in ANNOTATORS:
        judge_every_hit(new_page(), username, hits, shot, fail_first=username == "ann")
    batch.refresh_from_db()
    assert batch.state == BatchState.ANNOTATING  # the flagged assignment still waits

    review_flagged(admin, shot)
    batch.refresh_from_db()
    # The last approval closed the round by itself; no "Close this round now" needed.
    assert batch.state == BatchState.RELEASED, batch.error
    assert not Assignment.objects.filter(hit__batch=batch).exclude(status="approved").exists()

    admin.goto(f"/batches/{batch.pk}/")
    assert admin.locator("#live-state").inner_text() == "released"
    shot(admin, "journey-6-batch-released")
    with admin.expect_navigation():
        admin.get_by_role("link", name="download it from the releases").click()
    shot(admin, "journey-7-releases")
    release = Release.objects.get(batches=batch)
    with admin.expect_download() as download:
        admin.locator(f'a[href="/releases/{release.pk}/download/"]').first.click()
    path = tmp_path / "release.zip"
    download.value.save_as(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    assert any(name.endswith("manifest.json") for name in names), names

    with admin.expect_navigation():
        admin.get_by_role("link", name="bias").click()  # the batch's bias report, folded
    assert admin.locator("details.bias-section[open]").count() == 1
    shot(admin, "journey-8-bias")
