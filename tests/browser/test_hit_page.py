"""An annotator judges HITs in a real browser with the keyboard; an admin reviews the work."""

from __future__ import annotations

import json
import re
import statistics
import time

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Assignment, HITItem, Judgement
from mitl.hits import page_order
from mitl.judgements import mask_to_shortcomings, mask_to_wrong_concepts

from .conftest import NARROW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long demo password"
HITS_TO_TIME = 3

# Keys for one pair, by the answer the test wants; after a middle answer the first reason
# has the focus, so Tab walks the reasons and Space ticks one.
KEYS = {
    "yes": ["1"],
    "no": ["4"],
    "weak_yes": ["2", "Space", "Enter"],  # "does not show concepts…"
    "weak_no": ["3", "Tab", "Tab", "Space", "Tab", "Space", "Enter"],  # wrong way: quantity
}
TASK_PLAN = ["yes", "weak_no", "no", "weak_yes"]


@pytest.fixture
def small_config(small_config):
    return {**small_config, "hit_size": 16}  # 16 tasks + 2 goldens, as in production


@pytest.fixture
def users(db):
    make = get_user_model().objects.create_user
    return {
        "ann": make("ann", password=PASSWORD),
        "bea": make("bea", password=PASSWORD),
        "admin": make("admin", password=PASSWORD, is_staff=True),
    }


def log_in_with_keyboard(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.locator("#id_username:focus").wait_for()  # autofocus lands after the load event
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/work/")


def open_next_hit_with_keyboard(page) -> Assignment:
    page.locator("#start-next:focus, #next-hit:focus").wait_for()
    with page.expect_navigation(url=re.compile(r"/work/assignments/\d+/$")):
        page.keyboard.press("Enter")  # "Start next HIT" has the focus
    close_instructions_if_open(page)
    page.locator(".pair:focus").wait_for()
    return Assignment.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def close_instructions_if_open(page) -> bool:
    """Close the instructions with Escape when they opened by themselves (a worker's first
    HIT with them); say whether they had. The focus goes back to the pair."""
    dialog = page.locator("#instructions[data-state]")
    dialog.wait_for(state="attached")  # instructions.js has run
    if dialog.get_attribute("data-state") != "open":
        return False
    page.keyboard.press("Escape")
    page.locator("#instructions[data-state=closed]").wait_for(state="attached")
    return True


def items_as_shown(assignment: Assignment) -> list[HITItem]:
    """The HIT's items in the order this assignment's page shows them."""
    items = list(HITItem.objects.filter(hit=assignment.hit).order_by("position"))
    return [items[index] for index in page_order(len(items), assignment.page_seed)]


def plan_for(assignment: Assignment, wrong_golden: bool = False) -> list[str]:
    """Right answers for the goldens (or a wrong one for the TN), a mix for the tasks, in the
    order the page shows the pairs."""
    plan = []
    for index, item in enumerate(items_as_shown(assignment)):
        if item.role == "golden_tp":
            plan.append("yes")
        elif item.role == "golden_tn":
            plan.append("yes" if wrong_golden else "no")
        else:
            plan.append(TASK_PLAN[index % len(TASK_PLAN)])
    return plan


def answer_with_keyboard(page, plan: list[str], *, submit: bool = True) -> None:
    """Answer every pair with the keyboard; with `submit`, Enter then submits the HIT.

    After an extreme answer on the last pair Submit has the focus, and Enter presses it;
    a middle answer's Enter on the last pair submits at once. Without `submit` that last
    Enter is left out: every pair is answered, nothing is sent.
    """
    total = len(plan)
    for index, answer in enumerate(plan):
        keys = KEYS[answer]
        last = index + 1 == total
        if last and not submit and keys[-1] == "Enter":
            keys = keys[:-1]
        for key in keys:
            page.keyboard.press(key)
        if not last:  # wait for the page to move on before the next key
            page.locator("#progress-text").get_by_text(f"{index + 2} / {total}").wait_for()
    if KEYS[plan[-1]][-1] != "Enter":
        page.locator("#submit:focus").wait_for()  # after the last pair, Submit has the focus
        if submit:
            page.keyboard.press("Enter")


def submitted(page) -> None:
    page.locator("#status").get_by_text("Submitted").wait_for()


def test_an_annotator_completes_whole_hits_with_the_keyboard_only(
    new_page, users, annotating_batch, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    seconds = []
    for round_ in range(HITS_TO_TIME):
        assignment = open_next_hit_with_keyboard(page)
        plan = plan_for(assignment)
        started = time.perf_counter()
        if round_ == 0:
            page.screenshot(path=screenshots_dir / "hit_page_wide.png")
        answer_with_keyboard(page, plan)
        submitted(page)
        seconds.append(time.perf_counter() - started)
        if round_ == 0:
            page.screenshot(path=screenshots_dir / "hit_page_submitted.png")
        assignment.refresh_from_db()
        assert assignment.status == "approved"
        by_item = {j.item_id: j for j in Judgement.objects.filter(assignment=assignment)}
        stored = [by_item[item.pk] for item in items_as_shown(assignment)]
        assert [j.level for j in stored] == plan
        assert all(j.elapsed_ms > 0 for j in stored)
        for judgement in stored:
            if judgement.level == "weak_yes":
                assert mask_to_shortcomings(judgement.shortcomings) == ["not_in_image"]
            if judgement.level == "weak_no":
                assert mask_to_shortcomings(judgement.shortcomings) == ["wrong_description"]
                assert mask_to_wrong_concepts(judgement.wrong_concepts) == ["quantity"]
    (screenshots_dir / "hit_keyboard_timing.json").write_text(
        json.dumps(
            {
                "pairs_per_hit": len(plan),
                "seconds_per_hit": [round(s, 2) for s in seconds],
                "median_seconds": round(statistics.median(seconds), 2),
            }
        )
    )


def test_the_hit_page_fits_a_narrow_window(new_page, users, annotating_batch, screenshots_dir):
    page = new_page(NARROW)
    log_in_with_keyboard(page, "ann")
    open_next_hit_with_keyboard(page)
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= NARROW["width"]  # no sideways scrolling
    for label in ("100% YES", "Partially YES, but…", "Mostly NO, because…", "100% NO"):
        assert page.get_by_role("radio", name=label).is_visible()
    page.screenshot(path=screenshots_dir / "hit_page_narrow.png", full_page=True)


def test_follow_ups_appear_for_the_middle_answers_and_are_required(
    new_page, users, annotating_batch
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    open_next_hit_with_keyboard(page)
    pair = page.locator(".pair:not([hidden])")
    reasons = pair.get_by_role("group", name="Why? Choose all that apply.")
    assert not reasons.is_visible()
    page.keyboard.press("2")
    reasons.wait_for()
    page.keyboard.press("Enter")  # no reason chosen yet
    assert pair.get_by_role("alert").inner_text() == "Choose at least one reason."
    assert page.locator("#progress-text").inner_text().startswith("1 / ")
    assert page.locator("#submit").is_disabled()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # "in a wrong way": now which concept?
    page.keyboard.press("Enter")
    assert pair.get_by_role("alert").inner_text() == (
        "Choose which concept is described in a wrong way."
    )
    concepts = pair.get_by_role("group", name="Which concept is described in a wrong way?")
    concepts.get_by_role("checkbox", name="Others").check()
    page.keyboard.press("Enter")
    assert pair.get_by_role("alert").inner_text() == "Describe the other concept."
    pair.get_by_role("textbox", name="Describe the other concept").fill("the clock shows noon")
    page.keyboard.press("Enter")
    page.locator("#progress-text").get_by_text("2 / ").wait_for()
    page.keyboard.press("1")  # an extreme answer asks nothing more and moves on
    page.locator("#progress-text").get_by_text("3 / ").wait_for()


def test_a_batch_without_follow_ups_moves_on_after_a_middle_answer(
    new_page, users, annotating_batch
):
    annotating_batch.config = {**annotating_batch.config, "followups": False}
    annotating_batch.save(update_fields=["config"])
    page = new_page()
    log_in_with_keyboard(page, "ann")
    open_next_hit_with_keyboard(page)
    page.keyboard.press("3")
    page.locator("#progress-text").get_by_text("2 / ").wait_for()
    assert page.locator(".followups").count() == 0


def test_enter_on_the_last_pair_submits_once_every_pair_is_answered(
    new_page, users, annotating_batch
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    assignment = open_next_hit_with_keyboard(page)
    answer_with_keyboard(page, plan_for(assignment), submit=False)
    assert Assignment.objects.get(pk=assignment.pk).status == "accepted"
    page.locator(".pair:not([hidden])").focus()  # the last pair, answered

    page.keyboard.press("Enter")  # the README: Enter goes on, and submits after the last

    submitted(page)
    assert page.locator("#status").inner_text() == "Submitted and approved. Thank you!"
    assert Assignment.objects.get(pk=assignment.pk).status == "approved"


def test_a_submit_sent_twice_is_stored_once(new_page, users, annotating_batch):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    assignment = open_next_hit_with_keyboard(page)
    deliveries = []

    def deliver_twice(route):
        deliveries.append(route.fetch().status)  # the request reaches the server…
        response = route.fetch()  # …and a retry sends it again
        deliveries.append(response.status)
        route.fulfill(response=response)

    page.route("**/api/assignments/*/submit/", deliver_twice)
    answer_with_keyboard(page, plan_for(assignment), submit=False)
    page.locator("#submit").dblclick()  # and the person double-clicks
    submitted(page)
    assert deliveries == [201, 200]
    assert Judgement.objects.filter(assignment=assignment).count() == assignment.hit.items.count()
    assert Assignment.objects.get(pk=assignment.pk).status == "approved"


def test_a_resubmit_with_other_answers_says_the_first_ones_stand(new_page, users, annotating_batch):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    assignment = open_next_hit_with_keyboard(page)

    def other_tab_first(route):
        first = json.loads(route.request.post_data)  # another tab sent other answers first
        for answer in first["answers"]:
            answer.update(level="yes", shortcomings=[], wrong_concepts=[], other_text="")
        assert route.fetch(post_data=json.dumps(first)).status == 201
        route.fulfill(response=route.fetch())

    page.route("**/api/assignments/*/submit/", other_tab_first)
    answer_with_keyboard(page, plan_for(assignment))

    page.locator("#status").get_by_text("Not stored").wait_for()
    assert page.locator("#status").inner_text() == (
        "Not stored: this HIT was submitted before with other answers: those stand, these "
        "were not stored."
    )
    page.locator("#next-hit:focus").wait_for()  # the work is done: on to the next HIT
    stored = Judgement.objects.filter(assignment=assignment).values_list("level", flat=True)
    assert set(stored) == {"yes"}


def test_an_admin_approves_flagged_work_in_the_review_queue(
    new_page, users, annotating_batch, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    assignment = open_next_hit_with_keyboard(page)
    answer_with_keyboard(page, plan_for(assignment, wrong_golden=True))
    submitted(page)
    assignment.refresh_from_db()
    assert (assignment.status, assignment.flagged) == ("submitted", True)
    # What happened, plainly, and never which pair was the check.
    assert page.locator("#status").inner_text() == (
        "Submitted; it waits for a review because a check pair was answered differently "
        "from its known answer."
    )

    admin = new_page()
    log_in_with_keyboard(admin, "admin")
    admin.goto("/review/")
    row = admin.locator("#review-queue tbody tr", has_text=str(assignment.worker))
    # The HIT number the worker saw (the page's title) is the one the queue shows.
    assert f"HIT {assignment.hit_id}" in row.inner_text()
    admin.screenshot(path=screenshots_dir / "review_queue.png", full_page=True)
    row.get_by_role("link", name="Review").click()
    admin.get_by_text("a NO (known mismatch): wrong").wait_for()
    admin.screenshot(path=screenshots_dir / "review_detail.png", full_page=True)
    admin.get_by_role("button", name="Approve").click()
    admin.get_by_text(f"Assignment {assignment.pk} approved.").wait_for()
    assignment.refresh_from_db()
    assert (assignment.status, assignment.flagged, assignment.reviewed_by) == (
        "approved",
        False,
        users["admin"],
    )


def test_a_second_annotator_cannot_open_the_first_ones_assignment(
    new_page, users, annotating_batch
):
    first = new_page()
    log_in_with_keyboard(first, "ann")
    assignment = open_next_hit_with_keyboard(first)
    second = new_page()
    log_in_with_keyboard(second, "bea")
    response = second.goto(f"/work/assignments/{assignment.pk}/")
    assert response.status == 404
    item = assignment.hit.items.first()
    image = second.goto(f"/work/assignments/{assignment.pk}/items/{item.pk}/image/")
    assert image.status == 404
    assert not Judgement.objects.exists()
