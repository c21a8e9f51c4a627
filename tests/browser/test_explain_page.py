"""An account opens a release's leaderboard, follows a model's Explain link and reads its worst
failure: the two images side by side and what tells them apart, concept by concept."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from PIL import Image as PILImage

from annotation.models import Dataset, Evaluation, Image, Release
from tests.explain_data import SCRIPT_CAPTION, evaluation_explanation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long reader password"


def png(color: tuple[int, int, int]) -> ContentFile:
    buffer = io.BytesIO()
    PILImage.new("RGB", (160, 120), color).save(buffer, format="PNG")
    return ContentFile(buffer.getvalue())


def test_a_reader_follows_explain_from_the_leaderboard(new_page, screenshots_dir):
    reader = get_user_model().objects.create_user("reader", password=PASSWORD)
    release = Release.objects.create(
        dataset=Dataset.objects.create(name="tiny"),
        name="tiny",
        version=1,
        rule="eccv",
        path="/releases/tiny",
        manifest={},
    )
    # Image 1 is stored; the page serves it to logged-in accounts (media is not public).
    image = Image(dataset=release.dataset, ext_id=1)
    image.file.save("1.png", png((70, 130, 180)), save=True)
    stored = evaluation_explanation()
    for name, explanation in (("clip-a", stored), ("clip-b", None)):
        Evaluation.objects.create(
            release=release,
            submitted_by=reader,  # an explanation is for staff and the model's submitter
            model_name=name,
            metrics={"i2t": {"recall@1": 0.5}, "t2i": {"recall@1": 0.25}},
            rankings_sha256=name.ljust(64, "0"),
            explanation=explanation,
        )

    page = new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.goto("/accounts/login/")
    page.fill("#id_username", "reader")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"/releases/{release.pk}/leaderboard/")
    assert page.locator("a.explain-link").count() == 1  # clip-b has no explanation
    with page.expect_navigation():
        page.click("a.explain-link")

    assert page.locator("h1").inner_text().startswith("Explained failures: clip-a")
    card = page.locator("#explain-t2i article.failure").first
    truth, retrieved = card.locator("figure.truth"), card.locator("figure.retrieved")
    image = truth.locator("img")
    # The image comes from its own view after the page: wait for it rather than race it.
    image.wait_for(state="visible")
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    assert image.evaluate("img => img.naturalWidth") == 160  # it loaded
    assert "a dog catching a frisbee & more" in retrieved.inner_text()  # text-only image
    differences = card.locator("dl.diff").first.inner_text()
    assert "ball" in differences and "frisbee" in differences and "dog 2 vs 1" in differences
    assert page.locator("#explain-t2i figure svg").is_visible()
    assert truth.locator("img").get_attribute("alt") == SCRIPT_CAPTION  # text, not a script
    assert dialogs == []
    page.screenshot(path=screenshots_dir / "explain.png", full_page=True)
