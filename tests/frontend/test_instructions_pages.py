"""The instructions on the pages: both HIT pages (open on a worker's first HIT with a version),
who may see the example images, the batch page, and the wizard's examples."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from annotation.handout import assignment_create, hit_assign_next, worker_for_user
from annotation.instructions import instructions_current, instructions_save
from annotation.models import HIT, Assignment, Batch, Image, Instructions
from annotation.mturk.links import hit_page_path, instructions_image_path
from annotation.mturk.protocol import PREVIEW_ASSIGNMENT_ID
from mitl.instructions import content_examples
from tests.frontend.test_dashboard import wizard_post
from tests.mturk_published import published_on_sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(db):
    make = get_user_model().objects.create_user
    return {"ann": make("ann"), "bea": make("bea"), "boss": make("boss", is_staff=True)}


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def first(annotating_batch, users) -> Assignment:
    """Ann's first HIT of the batch (instructions version 1)."""
    assignment = hit_assign_next(worker=worker_for_user(user=users["ann"]))
    assert assignment is not None
    return assignment


def dialog_of(html: str) -> str:
    match = re.search(r"<dialog id=\"instructions\".*?</dialog>", html, re.S)
    assert match, "the page has no instructions dialog"
    return match.group(0)


def opens_by_itself(html: str) -> bool:
    return 'data-open="1"' in dialog_of(html)


# --- the platform's HIT page ----------------------------------------------------------------


def test_the_first_hit_shows_the_instructions_open_with_every_example(first, users):
    html = client_of(users["ann"]).get(reverse("frontend:hit", args=[first.pk])).content.decode()
    dialog = dialog_of(html)
    assert opens_by_itself(html)
    assert 'id="instructions-button"' in html and "frontend/instructions.js" in html
    assert 'aria-labelledby="instructions-title"' in dialog
    for label in ("100% YES", "Partially YES, but…", "Mostly NO, because…", "100% NO"):
        assert label in dialog
    content = first.instructions.content
    assert first.instructions.version == 1
    for index, example in enumerate(content["examples"]):
        assert example["caption_text"] in dialog
        assert example["note"] in dialog
        assert reverse("frontend:instructions-image", args=[first.pk, index]) in dialog
    assert "It describes the main concepts in a wrong way" in dialog  # a reason's label


def test_the_second_hit_with_the_same_version_starts_closed(first, users, annotating_batch):
    other = annotating_batch.hits.exclude(pk=first.hit_id).order_by("index").first()
    second = assignment_create(hit=other, worker=first.worker)
    html = client_of(users["ann"]).get(reverse("frontend:hit", args=[second.pk])).content.decode()
    assert not opens_by_itself(html)
    assert "Instructions (<kbd>?</kbd>)" in html  # still one key away


def test_a_new_version_opens_again_and_the_old_work_keeps_its_own(first, users, annotating_batch):
    examples = content_examples(first.instructions.content)[:1]
    newer = instructions_save(batch=annotating_batch, examples=examples)
    other = annotating_batch.hits.exclude(pk=first.hit_id).order_by("index").first()
    second = assignment_create(hit=other, worker=first.worker)
    ann = client_of(users["ann"])
    html = ann.get(reverse("frontend:hit", args=[second.pk])).content.decode()
    assert opens_by_itself(html) and 'data-version="2"' in html
    assert dialog_of(html).count('class="example ') == 1
    old = ann.get(reverse("frontend:hit", args=[first.pk])).content.decode()
    assert 'data-version="1"' in old and dialog_of(old).count('class="example ') == 4
    assert second.instructions_id == newer.pk


# --- the example images ---------------------------------------------------------------------


def test_the_worker_and_staff_get_an_example_image_under_a_neutral_name(first, users):
    url = reverse("frontend:instructions-image", args=[first.pk, 1])
    image = Image.objects.get(
        dataset=first.hit.batch.dataset, ext_id=first.instructions.content["examples"][1]["image"]
    )
    for user in ("ann", "boss"):
        response = client_of(users[user]).get(url)
        assert response.status_code == 200
        assert b"".join(response.streaming_content) == image.file.open("rb").read()
        assert (
            response["Content-Disposition"]
            == f'inline; filename="example-{first.instructions_id}-1.png"'
        )
        assert "synthetic" not in response["Content-Disposition"]


def test_others_get_no_example_image(first, users, client):
    url = reverse("frontend:instructions-image", args=[first.pk, 0])
    assert client_of(users["bea"]).get(url).status_code == 404  # not a 403: nothing to probe
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    beyond = reverse("frontend:instructions-image", args=[first.pk, 4])
    assert client_of(users["ann"]).get(beyond).status_code == 404


def test_work_without_instructions_has_no_example_images(first, users):
    Assignment.objects.filter(pk=first.pk).update(instructions=None)
    url = reverse("frontend:instructions-image", args=[first.pk, 0])
    assert client_of(users["ann"]).get(url).status_code == 404
    html = client_of(users["ann"]).get(reverse("frontend:hit", args=[first.pk])).content.decode()
    assert not opens_by_itself(html) and "100% YES" in dialog_of(html)


# --- the MTurk page ---------------------------------------------------------------------


@pytest.fixture
def published(annotating_batch, settings) -> Batch:
    settings.MTURK_ALLOWED_SUBMIT_HOSTS = []
    return published_on_sandbox(annotating_batch)


def mturk_page(hit: HIT, assignment: str, worker: str = "A1WORKER") -> str:
    params = {"assignmentId": assignment, "hitId": hit.external_id, "workerId": worker}
    params["turkSubmitTo"] = "https://workersandbox.mturk.com"
    response = Client().get(f"{hit_page_path(hit)}?{urlencode(params)}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_mturk_preview_shows_the_current_instructions_open_with_signed_images(published):
    hit = published.hits.order_by("index").first()
    current = instructions_current(batch=published)
    html = mturk_page(hit, PREVIEW_ASSIGNMENT_ID)
    assert opens_by_itself(html) and 'data-version="1"' in html
    path = instructions_image_path(current.pk, 0)
    assert path in dialog_of(html)
    assert Client().get(path).status_code == 200  # no account needed: the link is signed
    assert Client().get(path.replace(path.split("/")[-2], "forged")).status_code == 404


def test_an_mturk_worker_sees_them_open_on_the_first_hit_only(published):
    first, second = published.hits.order_by("index")[:2]
    assert opens_by_itself(mturk_page(first, "3ASSIGNMENT01"))
    assert not opens_by_itself(mturk_page(second, "3ASSIGNMENT02"))
    assert opens_by_itself(mturk_page(first, "3ASSIGNMENT01"))  # the first HIT, reloaded


# --- the batch page -------------------------------------------------------------------------


def test_the_batch_page_shows_the_current_examples_and_the_work_of_each_version(first, users):
    batch = first.hit.batch
    html = client_of(users["boss"]).get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    section = html[html.index('id="batch-instructions"') :].split("</section>")[0]
    assert "Workers see version <strong>1</strong> with 4 worked examples" in section
    for example in first.instructions.content["examples"]:
        assert example["caption_text"] in section
    assert instructions_image_path(first.instructions_id, 0) in section
    rows = re.findall(r'<td class="num">(\d+)</td>', section.split('id="instructions-versions"')[1])
    assert rows == ["1", "4", "1"]  # version 1, 4 examples, 1 assignment


# --- the wizard -----------------------------------------------------------------------------


def example_fields(**rows: tuple) -> dict:
    """The wizard's example rows: level → (image, caption, note[, reasons, concepts])."""
    data = {}
    for level, (image, caption, note, *reasons) in rows.items():
        data |= {
            f"examples-{level}_image": str(image),
            f"examples-{level}_caption": str(caption),
            f"examples-{level}_note": note,
        }
        if reasons:
            data[f"examples-{level}_shortcomings"] = reasons[0]
            data[f"examples-{level}_wrong_concepts"] = reasons[1]
    return data


def test_the_wizard_has_a_row_per_answer_and_the_proposal_endpoint(users, dataset, annotators):
    staff = client_of(users["boss"])
    html = staff.get(reverse("frontend:batch-new"), {"dataset": dataset.pk}).content.decode()
    for level in ("yes", "weak_yes", "weak_no", "no"):
        assert f'name="examples-{level}_image"' in html
    assert 'name="examples-weak_no_shortcomings"' in html
    assert "frontend/wizard_instructions.js" in html
    url = reverse("frontend:batch-instructions-proposal")
    proposal = staff.get(url, {"dataset": dataset.pk, "seed": 1}).json()["examples"]
    assert [e["level"] for e in proposal] == ["yes", "weak_yes", "weak_no", "no"]
    assert staff.get(url, {"dataset": "x"}).status_code == 400
    # A seed that is not a plain number proposes as seed 0 (not a crash).
    seed_0 = staff.get(url, {"dataset": dataset.pk, "seed": 0}).json()
    for seed in ("²", "-3", "x"):
        assert staff.get(url, {"dataset": dataset.pk, "seed": seed}).json() == seed_0


def test_the_wizard_saves_the_admins_examples_as_version_1(users, dataset, annotators):
    staff = client_of(users["boss"])
    fields = example_fields(
        yes=(3, 11, "Its own caption."),
        weak_no=(3, 20, "Mostly wrong.", ["wrong_description"], ["quantity"]),
    )
    response = staff.post(reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk) | fields)
    assert response.status_code == 302
    (saved,) = Instructions.objects.filter(batch=Batch.objects.get())
    assert saved.version == 1 and saved.created_by == users["boss"]
    examples = saved.content["examples"]
    assert [(e["level"], e["image"], e["caption"]) for e in examples] == [
        ("yes", 3, 11),
        ("weak_no", 3, 20),
    ]
    assert examples[1]["wrong_concepts"] == ["quantity"] and examples[1]["note"] == "Mostly wrong."


def test_empty_rows_in_the_wizard_save_the_proposal(users, dataset, annotators):
    response = client_of(users["boss"]).post(
        reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk)
    )
    assert response.status_code == 302
    saved = Instructions.objects.get(batch=Batch.objects.get())
    assert [e["level"] for e in saved.content["examples"]] == ["yes", "weak_yes", "weak_no", "no"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            example_fields(no=(3, 9999, "")),
            "instructions example for “100% NO”: dataset &#x27;small&#x27; has no caption with "
            "id 9999",
        ),
        (
            example_fields(weak_yes=(3, 11, "", ["grammar"], ["color"])),
            "wrong concepts need the shortcoming &#x27;wrong_description&#x27;",
        ),
        ({"examples-weak_yes_image": "3"}, "Give both an image id and a caption id"),
        ({"examples-yes_caption": "two"}, "Enter a whole number."),
        # Beyond the database's 64-bit ids: a form error, not a crash in the query.
        (
            example_fields(yes=(10**30, 11, "")),
            "Ensure this value is less than or equal to 9223372036854775807.",
        ),
    ],
)
def test_bad_examples_are_a_form_error_and_create_no_batch(
    users, dataset, annotators, fields, message
):
    staff = client_of(users["boss"])
    response = staff.post(reverse("frontend:batch-new"), wizard_post(dataset=dataset.pk) | fields)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Batch.objects.exists()
