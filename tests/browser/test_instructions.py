"""The instructions in a real browser: open by themselves on a worker's first HIT, closed on
the next HIT with the same version, one `?` away there; Escape closes them; the pair keys
stay off while they are open. The same on the MTurk page, inside MTurk's frame."""

from __future__ import annotations

import pytest

from annotation.instructions import instructions_examples_propose
from annotation.models import Assignment, Caption, Dataset, Image

from . import test_hit_page as hit_page
from . import test_mturk_hit as mturk_hit
from .test_hit_page import answer_with_keyboard, log_in_with_keyboard, plan_for, submitted

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The fixtures of the HIT page tests, shared.
users = hit_page.users
small_config = hit_page.small_config
fake_mturk = mturk_hit.fake_mturk
published = mturk_hit.published
FIRST_IMAGE_LOADED = (
    "() => { const img = document.querySelector('#instructions img');"
    " return img && img.complete && img.naturalWidth > 0; }"
)


def state(page_or_frame) -> str:
    return page_or_frame.locator("#instructions").get_attribute("data-state")


def wait_state(page_or_frame, value: str) -> None:
    page_or_frame.locator(f"#instructions[data-state={value}]").wait_for(state="attached")


def focus_in_dialog(page) -> bool:
    return page.evaluate("document.getElementById('instructions').contains(document.activeElement)")


def start_next_hit(page) -> None:
    page.locator("#start-next:focus, #next-hit:focus").wait_for()
    with page.expect_navigation(url="**/work/assignments/*/"):
        page.keyboard.press("Enter")


def test_instructions_open_on_the_first_hit_and_come_back_with_the_help_key(
    new_page, users, annotating_batch, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "ann")
    start_next_hit(page)

    # The first HIT: the instructions are open, focused, with the batch's worked examples.
    wait_state(page, "open")
    dialog = page.get_by_role("dialog", name="Instructions: Is the image correctly described?")
    assert dialog.is_visible() and focus_in_dialog(page)
    assert dialog.locator(".example").count() == 4
    for answer in ("100% YES", "Partially YES, but…", "Mostly NO, because…", "100% NO"):
        assert dialog.get_by_text(f"Right answer: {answer}").count() == 1
    page.wait_for_function(FIRST_IMAGE_LOADED)
    page.screenshot(path=screenshots_dir / "instructions-first-hit.png")
    page.keyboard.press("1")  # the pair keys are off while the instructions are open
    assert page.locator(".pair input[type=radio]:checked").count() == 0
    page.keyboard.press("Escape")
    wait_state(page, "closed")
    assert not dialog.is_visible()
    page.locator(".pair:focus").wait_for()  # the focus is back on the pair

    assignment = Assignment.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    answer_with_keyboard(page, plan_for(assignment))  # and Enter submits
    submitted(page)

    # The second HIT with the same version: closed, one key away.
    start_next_hit(page)
    wait_state(page, "closed")
    page.locator(".pair:focus").wait_for()
    assert not dialog.is_visible()
    page.keyboard.press("?")
    wait_state(page, "open")
    assert dialog.is_visible() and focus_in_dialog(page)
    page.screenshot(path=screenshots_dir / "instructions-help-key.png")
    page.keyboard.press("ArrowRight")  # not a pair key now either
    assert page.locator("#progress-text").inner_text().startswith("1 / ")
    page.keyboard.press("Escape")
    wait_state(page, "closed")
    page.locator(".pair:focus").wait_for()
    page.keyboard.press("1")  # the pair keys work again
    page.locator("#progress-text").get_by_text("2 / ").wait_for()

    # The visible button and the Close button; `?` typed into a text box is text.
    page.get_by_role("button", name="Instructions (?)").click()
    wait_state(page, "open")
    dialog.get_by_role("button", name="Back to the HIT").click()
    wait_state(page, "closed")
    pair = page.locator(".pair:not([hidden])")
    pair.get_by_role("radio", name="Mostly NO, because…").check()
    pair.get_by_role("checkbox", name="It describes the main concepts in a wrong way").check()
    pair.get_by_role("checkbox", name="Others").check()
    pair.get_by_role("textbox", name="Describe the other concept").click()
    page.keyboard.type("what is it?")
    assert state(page) == "closed"
    text = pair.get_by_role("textbox", name="Describe the other concept").input_value()
    assert text == "what is it?"


def test_the_mturk_page_opens_them_in_the_preview_and_on_the_first_hit(
    new_page, live_server, fake_mturk, published, screenshots_dir
):
    fake_mturk.frame_src = mturk_hit.frame_src(
        live_server, published, assignmentId=mturk_hit.PREVIEW_ASSIGNMENT_ID
    )
    page = new_page()
    page.goto(fake_mturk.origin + "/")
    frame = page.frame_locator("#mturk")
    wait_state(frame, "open")  # a preview shows them open
    assert frame.locator("#instructions .example").count() == 4
    frame.locator("#instructions [data-close]").first.click()
    wait_state(frame, "closed")

    fake_mturk.frame_src = mturk_hit.frame_src(
        live_server,
        published,
        assignmentId="3ASGINSTRUCT1",
        workerId="A1INSTRUCT",
        turkSubmitTo=fake_mturk.origin,
    )
    page.goto(fake_mturk.origin + "/")
    frame = page.frame_locator("#mturk")
    wait_state(frame, "open")  # this worker's first HIT
    frame.locator("#instructions img").first.wait_for()
    page.screenshot(path=screenshots_dir / "instructions-mturk.png")
    frame.get_by_role("button", name="Back to the HIT").click()
    wait_state(frame, "closed")
    frame.locator(".pair:not([hidden]) .caption").click()  # focus inside the frame
    page.keyboard.press("?")
    wait_state(frame, "open")
    page.keyboard.press("1")  # no answer while they are open
    page.keyboard.press("Escape")
    wait_state(frame, "closed")
    assert frame.locator("input[type=radio]:checked").count() == 0
    page.keyboard.press("?")
    wait_state(frame, "open")
    page.keyboard.press("?")  # the same key closes them again
    wait_state(frame, "closed")
    page.keyboard.press("1")
    frame.locator("#progress-text").get_by_text("2 / ").wait_for()


def test_the_wizard_fills_the_examples_with_the_proposal_for_the_dataset(
    new_page, users, dataset, annotators, screenshots_dir
):
    page = new_page()
    log_in_with_keyboard(page, "admin")
    page.goto(f"/batches/new/?dataset={dataset.pk}")
    page.locator("#instructions-examples[data-ready]").wait_for(state="attached")
    proposed = {e.level.value: e for e in instructions_examples_propose(dataset=dataset)}
    for level, example in proposed.items():
        row = page.locator(f".example-row[data-level={level}]")
        assert row.get_by_label("Image id").input_value() == str(example.image)
        assert row.get_by_label("Caption id").input_value() == str(example.caption)
        assert row.get_by_label("Note").input_value() == example.note
        assert example.caption_text in row.locator(".example-caption").inner_text()
    weak_yes = page.locator(".example-row[data-level=weak_yes]")
    for name in proposed["weak_yes"].wrong_concepts:
        assert weak_yes.locator(f"input[value={name}]").is_checked()
    page.locator("#instructions-examples").screenshot(
        path=screenshots_dir / "instructions-wizard.png"
    )


def test_a_late_proposal_for_a_dataset_left_behind_never_fills_the_rows(
    new_page, users, dataset, annotators
):
    # Ids repeat across datasets: the late answer for the first dataset must not land on the
    # rows of the second, where its ids would pair another image with another caption.
    other = Dataset.objects.create(name="other")
    for i in range(4):
        image = Image.objects.create(dataset=other, ext_id=i)
        Caption.objects.create(dataset=other, ext_id=100 + i, image=image, text=f"caption {i}")
    wanted = {e.level.value: e for e in instructions_examples_propose(dataset=other)}
    page = new_page()
    log_in_with_keyboard(page, "admin")
    held = []

    def hold_the_first_datasets(route):
        if f"dataset={dataset.pk}&" in route.request.url:
            held.append(route)  # answered only once the other dataset's proposal is in
        else:
            route.continue_()

    page.route("**/batches/new/instructions/*", hold_the_first_datasets)
    page.goto(f"/batches/new/?dataset={dataset.pk}")
    page.wait_for_function("() => document.getElementById('examples-status').textContent")
    assert len(held) == 1
    page.locator("#id_dataset").select_option(str(other.pk))
    page.locator("#instructions-examples[data-ready]").wait_for(state="attached")
    with page.expect_response(lambda response: f"dataset={dataset.pk}&" in response.url):
        held[0].continue_()
    page.wait_for_timeout(300)  # the late answer is read, then dropped
    yes = page.locator(".example-row[data-level=yes]")
    assert yes.get_by_label("Caption id").input_value() == str(wanted["yes"].caption)
    assert (
        page.locator(".example-row[data-level=weak_yes]").get_by_label("Image id").input_value()
        == ""
    )
    assert "proposed for this dataset" in page.locator("#examples-status").inner_text()
