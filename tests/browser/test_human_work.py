"""An admin creates a batch for people in the wizard and watches their work arrive.

The wizard warns that one annotator account cannot do two assignments per HIT, the Create
button waits disabled ("Creating…") while the stages run in the request, the batch page
says $0.25 wherever it names the reward, and the human-work counts follow an annotator's
judged HIT without a reload (progress.js polls the batch API). Screenshots go to
var/screenshots/.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Batch
from annotation.submissions import AnswerInput, assignment_submit

from .people_batch import shapes_dataset, wizard_fill

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long admin password"
LEVELS = {"task": "yes", "golden_tp": "yes", "golden_tn": "no"}


@pytest.fixture
def shapes(db, tmp_path):
    """A small dataset, two machine annotators, an admin and one annotator account."""
    dataset = shapes_dataset(tmp_path)
    users = get_user_model().objects
    users.create_user("admin", password=PASSWORD, is_staff=True)
    users.create_user("annotator1", password=PASSWORD)
    return dataset


def judge_next_hit(username: str) -> None:
    """The annotator takes the next HIT and judges it right: approved at once."""
    user = get_user_model().objects.get(username=username)
    assignment = hit_assign_next(worker=worker_for_user(user=user))
    answers = [
        AnswerInput(item_id=item.pk, level=LEVELS[item.role], elapsed_ms=4000)
        for item in assignment.hit.items.order_by("position")
    ]
    assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=False,
        golden_policy="approve_or_flag",
    )


def test_a_batch_for_people_keeps_its_reward_and_counts_their_work(
    new_page, shapes, screenshots_dir
):
    from playwright.sync_api import expect

    page = new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")

    wizard_fill(page, shapes, name="shapes for people", queries=4, k=3)
    # One annotator account cannot do two assignments of a HIT: said before creating.
    warning = page.locator("#workers-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("2 assignments per HIT but only 1 annotator account")
    page.get_by_label("Assignments per HIT", exact=True).fill("1")
    expect(warning).to_be_hidden()
    page.get_by_label("Assignments per HIT", exact=True).fill("2")
    expect(warning).to_be_visible()
    page.get_by_label("Create it anyway", exact=False).check()
    page.screenshot(path=screenshots_dir / "wizard_few_workers.png", full_page=True)

    # What the button looks like once wait.js has handled the submit (a listener added
    # after it runs after it); sessionStorage outlives the navigation to the batch page.
    page.evaluate(
        """document.addEventListener("submit", () => {
             const button = document.getElementById("create-batch");
             sessionStorage.setItem("waiting", JSON.stringify(
               [button.disabled, button.textContent.trim(), !!button.querySelector(".spinner")]));
           })"""
    )
    with page.expect_navigation(url="**/batches/*/", timeout=180_000):
        page.locator("#create-batch").click()
    waiting = page.evaluate('JSON.parse(sessionStorage.getItem("waiting"))')
    assert waiting == [True, "Creating…", True]

    batch = Batch.objects.get()
    assert batch.state == "annotating"
    expect(page.locator("#hw-reward")).to_have_text("$0.25")
    expect(page.locator("#wage-reward")).to_have_text("$0.25")
    expect(page.locator("#hw-current-approved")).to_have_text("0")
    needed = batch.hits.count() * 2
    expect(page.locator("#hw-current-needed")).to_have_text(str(needed))
    expect(page.locator("#hw-time-left")).to_have_text("—")

    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    judge_next_hit("annotator1")
    expect(page.locator("#hw-current-approved")).to_have_text("1", timeout=10_000)
    expect(page.locator("#hw-spent")).to_have_text("$0.30")  # 0.25 + 20% commission
    expect(page.locator("#hw-time-left")).not_to_have_text("—")
    assert page.evaluate("window.loadedOnce === true")
    page.screenshot(path=screenshots_dir / "batch_human_work.png", full_page=True)

    page.goto(f"/batches/{batch.pk}/mturk/")
    expect(page.locator('input[name="reward"]')).to_have_value("0.25")
