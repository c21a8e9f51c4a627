"""A reader uploads rankings: the form checks them, a job page follows their scoring."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Caption, Dataset, Image, Release
from mitl.release_files import write_release_dir
from pipeline.evaluation_jobs import evaluation_job_create, evaluation_job_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long reader password"
# Images 1-10; captions 11-16 of image 1, 21-26 of image 2 (rankings of 10 or more: nDCG@10).
IMAGES = list(range(1, 11))
CAPTIONS = [11, 12, 13, 14, 15, 16, 21, 22, 23, 24, 25, 26]
RANKINGS = {"i2t": {"1": CAPTIONS, "2": CAPTIONS[::-1]}, "t2i": {"11": IMAGES, "21": IMAGES}}


@pytest.fixture
def release(tmp_path) -> Release:
    folder = tmp_path / "tiny" / "1"
    manifest = write_release_dir(
        folder,
        i2t={"1": [11, 12], "2": [21, 22]},
        t2i={"11": [1], "21": [2]},
        judgements=[],
        stats={},
        manifest={},
    )
    dataset = Dataset.objects.create(name="tiny")
    images = {ext_id: Image.objects.create(dataset=dataset, ext_id=ext_id) for ext_id in IMAGES}
    for caption in CAPTIONS:
        Caption.objects.create(
            dataset=dataset, image=images[caption // 10], ext_id=caption, text="c"
        )
    return Release.objects.create(
        dataset=dataset, name="tiny", version=1, rule="eccv", path=str(folder), manifest=manifest
    )


def test_an_upload_is_refused_over_a_limit_then_scored_on_its_job_page(
    new_page, release, settings, screenshots_dir
):
    reader = get_user_model().objects.create_user("reader", password=PASSWORD)
    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "reader")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")

    def upload(name: str, content: dict, *, timeout: float = 15_000) -> None:
        page.goto(f"/releases/{release.pk}/leaderboard/")
        page.fill("#id_model_name", name)
        payload = json.dumps(content).encode()
        files = {"name": "model.json", "mimeType": "application/json", "buffer": payload}
        page.set_input_files("#id_rankings", files)
        with page.expect_navigation(timeout=timeout):
            page.click("#upload button[type=submit]", timeout=timeout)

    settings.EVALUATION_MAX_RANKING_LENGTH = 11  # the API's depth limit, here too
    upload("deep", RANKINGS)
    assert "more than the 11 accepted (the depth limit" in page.locator("#upload").inner_text()

    settings.EVALUATION_MAX_RANKING_LENGTH = 1000
    # No broker: scored in the request's process, on commit; the explanation's first load of
    # WordNet (caption nouns of a dataset without labels) takes seconds.
    upload("clip", RANKINGS, timeout=180_000)
    assert page.locator("#live-state").inner_text() == "done"
    assert page.locator("#job-metrics").is_visible()
    with page.expect_navigation():
        page.click("#live-next a")
    assert "clip" in page.locator("#leaderboard").inner_text()

    # A job scored while its page is open: the bar follows it, then the page shows the result.
    job = evaluation_job_create(
        release=release, model_name="later", rankings=RANKINGS, submitted_by=reader
    )
    page.goto(f"/releases/{release.pk}/leaderboard/jobs/{job.pk}/")
    assert page.locator("#live-progress").get_attribute("data-live") == "polling"
    assert page.locator("#job-metrics").count() == 0
    evaluation_job_run(job_id=job.pk)
    page.locator("#job-metrics").wait_for()
    assert page.locator("#live-state").inner_text() == "done"
    page.screenshot(path=screenshots_dir / "leaderboard-job.png", full_page=True)
