"""An admin sees why a round waits and closes it from the batch page, in a real browser.

With eager Celery (no services) the close runs inside the request, so the page it comes
back to shows the batch released; on workers it shows aggregating or released.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Batch, BatchState

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long admin password"


def test_an_admin_closes_a_round_from_the_batch_page(
    new_page, annotating_batch, eager_celery, screenshots_dir
):
    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    get_user_model().objects.create_user("ann", password=PASSWORD)
    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")

    page.goto(f"/batches/{annotating_batch.pk}/")
    stall = page.locator("#round-stall")
    assert "still need" in stall.inner_text()
    assert "1 worker is eligible" in stall.inner_text()  # 2 per HIT, one annotator account
    page.screenshot(path=str(screenshots_dir / "round-controls-waiting.png"), full_page=True)

    dialogs = []

    def accept(dialog):
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    with page.expect_navigation():
        page.get_by_role("button", name="Close this round now").click()

    assert dialogs and dialogs[0].startswith("Close round 0 now?")
    assert "Round 0 of batch" in page.locator("body").inner_text()
    assert Batch.objects.get(pk=annotating_batch.pk).state in (
        BatchState.AGGREGATING,
        BatchState.RELEASED,
    )
    assert page.get_by_role("button", name="Close this round now").count() == 0
    page.screenshot(path=str(screenshots_dir / "round-controls-closed.png"), full_page=True)
