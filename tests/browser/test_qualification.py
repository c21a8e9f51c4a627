"""A worker meets a batch's qualification round in a real browser: kept from the batch's
HITs until qualified, a practice round with feedback after every answer, a failed try and
a passed one, after which "Start next HIT" opens a HIT of the batch."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Assignment, QualificationAnswer, QualificationAttempt
from annotation.models import QualificationPair as Pair

from .test_hit_page import PASSWORD, log_in_with_keyboard

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAIRS = 4  # 2 matches + 2 mismatches; 3 right of 4 passes at 0.75


@pytest.fixture
def small_config(small_config):
    return {
        **small_config,
        "hit_size": 16,
        "qualification_pairs": PAIRS,
        "qualification_pass": 0.75,
        "qualification_attempts": 2,
    }


@pytest.fixture
def worker_account(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


def shown_pair(page) -> Pair:
    page.locator("#answer-form").wait_for()
    return Pair.objects.get(pk=int(page.locator("#qualification-pair").get_attribute("data-pair")))


def answer_with_key(page, right: bool) -> Pair:
    """Answer the pair on the page with key 1 (100% YES) or 4 (100% NO); wait for feedback."""
    pair = shown_pair(page)
    page.keyboard.press("1" if pair.positive == right else "4")
    page.locator("#feedback").wait_for()
    return pair


def next_pair(page) -> None:
    page.locator("#next-pair:focus").wait_for()
    page.keyboard.press("Enter")


def answer_round(page, rights: list[bool]) -> None:
    """Answer every pair of a started try; end on the result page."""
    for index, right in enumerate(rights):
        answer_with_key(page, right)
        if index + 1 < len(rights):
            next_pair(page)
    page.locator("#see-result:focus").wait_for()
    page.keyboard.press("Enter")
    page.locator("#result").wait_for()


def test_a_worker_practises_fails_once_passes_and_then_gets_hits(
    new_page, worker_account, annotating_batch, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "ann")

    # Kept from the batch's HITs until qualified: "Start next HIT" points to the round.
    page.locator("#start-next:focus").wait_for()
    page.keyboard.press("Enter")
    page.get_by_text("need their qualification round first").wait_for()
    assert page.get_by_role("link", name="Take the qualification round").is_visible()
    page.screenshot(path=screenshots_dir / "qualification-blocked.png", full_page=True)
    assert not Assignment.objects.exists()

    page.get_by_role("link", name="Take the qualification round").click()
    page.locator("#start-round:focus").wait_for()
    page.keyboard.press("Enter")
    shown_pair(page)
    page.screenshot(path=screenshots_dir / "qualification-pair.png", full_page=True)

    # Feedback after each answer: a wrong one says so, gives the right answer and why.
    pair = answer_with_key(page, right=False)
    verdict = page.locator("#verdict").inner_text()
    assert verdict.startswith("Wrong.")
    expected = "100% YES or Partially YES" if pair.positive else "Mostly NO or 100% NO"
    assert expected in page.locator("#expected").inner_text()
    assert page.locator("#note").inner_text() == pair.note
    assert page.locator("#qualification-pair img").evaluate("img => img.naturalWidth") > 0
    page.screenshot(path=screenshots_dir / "qualification-feedback.png", full_page=True)
    stored = QualificationAnswer.objects.get(pair=pair)
    assert stored.correct is False and stored.elapsed_ms > 0

    # The rest of the first try: one more wrong answer, 2 of 4 right, below 75%.
    next_pair(page)
    answer_round(page, [True, False, True])
    assert page.locator("#result").get_attribute("data-status") == "open"
    assert "Try 1: 2 of 4 right" in page.locator("#result").inner_text()
    page.locator("#try-again:focus").wait_for()
    page.screenshot(path=screenshots_dir / "qualification-failed.png", full_page=True)

    # The second try passes with 3 of 4; the batch's HITs open.
    page.keyboard.press("Enter")
    answer_round(page, [True, True, False, True])
    assert page.locator("#result").get_attribute("data-status") == "qualified"
    assert "Try 2: 3 of 4 right" in page.locator("#result").inner_text()
    page.locator("#start-next:focus").wait_for()
    page.screenshot(path=screenshots_dir / "qualification-passed.png", full_page=True)
    attempts = QualificationAttempt.objects.filter(worker__user=worker_account).order_by("number")
    assert [(a.correct, a.passed) for a in attempts] == [(2, False), (3, True)]

    with page.expect_navigation(url=re.compile(r"/work/assignments/\d+/$")):
        page.keyboard.press("Enter")
    page.locator("#hit").wait_for()  # the HIT page (instructions may come first)
    assignment = Assignment.objects.get()
    assert assignment.hit.batch == annotating_batch
    assert assignment.worker.user == worker_account


def test_a_worker_out_of_tries_is_told_the_batch_is_closed(
    new_page, worker_account, annotating_batch, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    page.goto(f"/work/qualification/{annotating_batch.pk}/")
    page.locator("#start-round:focus").wait_for()
    page.keyboard.press("Enter")
    answer_round(page, [False] * PAIRS)
    page.locator("#try-again:focus").wait_for()
    page.keyboard.press("Enter")
    answer_round(page, [True, False, False, True])

    result = page.locator("#result")
    assert result.get_attribute("data-status") == "failed"
    assert "no tries left: this batch is closed to you" in result.inner_text()
    page.goto("/work/")
    closed = page.locator(f'#qualification-rounds li[data-batch="{annotating_batch.pk}"]')
    assert "You did not pass the qualification for batch small batch; no tries left" in (
        closed.inner_text()
    )
    page.screenshot(path=screenshots_dir / "qualification-closed.png", full_page=True)
    page.locator("#start-next").click()
    page.get_by_text("There is no HIT to do right now").wait_for()
    assert not Assignment.objects.exists()
