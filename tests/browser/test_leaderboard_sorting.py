"""A reader sorts a release's leaderboard by clicking its headers, then opens the release page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Dataset, Evaluation, Release
from mitl.release_files import write_release_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long reader password"
DATASHEET = "# tiny v1\n\n| direction | positives |\n|---|---|\n| i2t | 3 |\n"


def model_names(page) -> list[str]:
    return page.locator("#leaderboard tbody tr td:first-child").evaluate_all(
        "cells => cells.map(cell => cell.dataset.value)"
    )


def test_a_reader_sorts_the_leaderboard_and_opens_the_release(new_page, tmp_path, screenshots_dir):
    get_user_model().objects.create_user("reader", password=PASSWORD)
    folder = tmp_path / "tiny" / "1"
    manifest = write_release_dir(
        folder,
        i2t={"1": [11]},
        t2i={"11": [1]},
        judgements=[],
        stats={},
        manifest={},
        text_files={"README.md": DATASHEET},
    )
    release = Release.objects.create(
        dataset=Dataset.objects.create(name="tiny"),
        name="tiny",
        version=1,
        rule="eccv",
        path=str(folder),
        manifest=manifest,
    )
    for name, recall in (("alpha", 0.5), ("beta", 0.9), ("gamma", 0.1)):
        Evaluation.objects.create(
            release=release,
            model_name=name,
            metrics={"i2t": {"recall@1": recall}, "t2i": {"recall@1": 1 - recall}},
            rankings_sha256=name.ljust(64, "0"),
        )

    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "reader")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"/releases/{release.pk}/leaderboard/")
    assert model_names(page) == ["alpha", "beta", "gamma"]  # the server's order
    assert page.locator("td.best").count() == 2  # one per metric column
    header = page.locator('#leaderboard th[data-column="1"]')  # i2t recall@1
    header.click()
    assert model_names(page) == ["beta", "alpha", "gamma"]  # highest first
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    assert model_names(page) == ["gamma", "alpha", "beta"]
    page.locator('#leaderboard th[data-column="0"]').click()
    assert model_names(page) == ["alpha", "beta", "gamma"]
    page.screenshot(path=screenshots_dir / "leaderboard-sorted.png", full_page=True)

    with page.expect_navigation():
        page.click(f"#leaderboard-downloads a[href$='/releases/{release.pk}/']")
    assert page.locator("#datasheet table td").first.inner_text() == "i2t"
    assert page.locator("#release-files tbody tr").count() == len(manifest["files"]) + 1
    page.screenshot(path=screenshots_dir / "release.png", full_page=True)
