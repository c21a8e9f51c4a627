"""The annotator and review pages through Django's test client: access, flow, ownership."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Assignment, HITItem, Judgement
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.pages import page_items
from annotation.submissions import AnswerInput
from tests.page_answers import page_answers

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("boss", password=PASSWORD, is_staff=True)


def logged_in(client, user):
    client.force_login(user)
    return client


def correct_answers(assignment: Assignment, task_level: str = "yes") -> dict:
    level_of = {"golden_tp": "yes", "golden_tn": "no", "task": task_level}
    return {"answers": page_answers(assignment, level_of)}


def take_hit(client) -> Assignment:
    response = client.post(reverse("frontend:work-next"))
    assert response.status_code == 302
    return Assignment.objects.get(pk=int(response.url.rstrip("/").rsplit("/", 1)[1]))


@pytest.mark.parametrize("name", ["frontend:work", "frontend:review", "frontend:workers"])
def test_anonymous_visitors_are_sent_to_log_in(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("name", ["frontend:review", "frontend:workers"])
def test_annotators_cannot_open_staff_pages(client, annotator, name):
    assert logged_in(client, annotator).get(reverse(name)).status_code == 403


def test_start_next_hit_opens_a_page_with_every_pair_and_no_role(
    client, annotator, annotating_batch
):
    assignment = take_hit(logged_in(client, annotator))
    page = client.get(reverse("frontend:hit", args=[assignment.pk]))
    html = page.content.decode()
    items = HITItem.objects.filter(hit=assignment.hit)
    assert page.status_code == 200
    assert html.count('class="pair"') == items.count()
    assert "golden" not in html.lower()
    assert f"1 / {items.count()}" in html


def test_without_free_hits_the_worker_is_told_so(client, annotator, annotating_batch):
    annotating_batch.hits.update(max_assignments=1)  # another worker then fills every HIT
    other = get_user_model().objects.create_user("other", password=PASSWORD)
    other_client = logged_in(type(client)(), other)
    for _ in range(annotating_batch.hits.count()):
        assignment = take_hit(other_client)
        other_client.post(
            reverse("api:assignment-submit", args=[assignment.pk]),
            correct_answers(assignment),
            content_type="application/json",
        )
    response = logged_in(client, annotator).post(reverse("frontend:work-next"), follow=True)
    assert "no HIT to do right now" in response.content.decode()
    assert not Assignment.objects.filter(worker__user=annotator).exists()


def test_submit_is_stored_once_and_a_repeat_returns_the_stored_result(
    client, annotator, annotating_batch
):
    assignment = take_hit(logged_in(client, annotator))
    url = reverse("api:assignment-submit", args=[assignment.pk])
    first = client.post(url, correct_answers(assignment), content_type="application/json")
    again = client.post(url, correct_answers(assignment), content_type="application/json")
    assert (first.status_code, first.json()["created"]) == (201, True)
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert first.json()["status"] == again.json()["status"] == "approved"
    assert Judgement.objects.filter(assignment=assignment).count() == assignment.hit.items.count()


def test_a_submission_with_a_missing_follow_up_is_refused_and_nothing_is_stored(
    client, annotator, annotating_batch
):
    assignment = take_hit(logged_in(client, annotator))
    body = correct_answers(assignment, task_level="weak_no")  # no reason given
    response = client.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        body,
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "choose at least one shortcoming" in response.json()["detail"]
    assert not Judgement.objects.exists()


def test_a_malformed_submission_gets_a_400_naming_the_field(client, annotator, annotating_batch):
    assignment = take_hit(logged_in(client, annotator))
    response = client.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        {"answers": [{"item": 1, "level": "maybe", "elapsed_ms": -1}]},
        content_type="application/json",
    )
    assert response.status_code == 400
    errors = response.json()["errors"]["answers"][0]
    assert set(errors) == {"level", "elapsed_ms"}


def test_another_worker_can_neither_open_nor_submit_nor_see_the_images(
    client, annotator, annotating_batch
):
    assignment = take_hit(logged_in(client, annotator))
    intruder = get_user_model().objects.create_user("intruder", password=PASSWORD)
    other = logged_in(type(client)(), intruder)
    assert other.get(reverse("frontend:hit", args=[assignment.pk])).status_code == 404
    assert other.get(reverse("api:assignment-detail", args=[assignment.pk])).status_code == 404
    assert other.get(reverse("frontend:pair-image", args=[assignment.pk, 1])).status_code == 404
    submit = other.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        correct_answers(assignment),
        content_type="application/json",
    )
    assert submit.status_code == 404
    assert not Judgement.objects.exists()
    own = client.get(reverse("frontend:pair-image", args=[assignment.pk, 1]))
    assert own.status_code == 200 and own["Content-Type"] == "image/png"


def test_an_item_image_does_not_reveal_its_stored_file_name(client, annotator, annotating_batch):
    # On COCO the file name names the image a caption was written for: a worker must not see it.
    assignment = take_hit(logged_in(client, annotator))
    page = client.get(reverse("frontend:hit", args=[assignment.pk])).content.decode()
    for number, item in enumerate(page_items(hit_id=assignment.hit_id, assignment=assignment), 1):
        stored = Path(HITItem.objects.get(pk=item[0]).image.file.name)
        url = reverse("frontend:pair-image", args=[assignment.pk, number])
        response = client.get(url)

        assert response.status_code == 200
        assert response["Content-Disposition"] == f'inline; filename="pair-{number}.png"'
        assert stored.stem not in url and stored.stem not in page


def test_staff_reviews_a_flagged_submission_and_a_rejection_needs_feedback(
    client, annotator, staff, annotating_batch
):
    assignment = take_hit(logged_in(client, annotator))
    body = correct_answers(assignment)
    for answer in body["answers"]:
        answer["level"] = "yes"  # the golden TN answered YES: flagged
    client.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        body,
        content_type="application/json",
    )
    admin = logged_in(type(client)(), staff)
    queue = admin.get(reverse("frontend:review")).content.decode()
    assert reverse("frontend:review-detail", args=[assignment.pk]) in queue
    detail_url = reverse("frontend:review-detail", args=[assignment.pk])
    detail = admin.get(detail_url).content.decode()
    assert "a NO (known mismatch): <strong>wrong</strong>" in detail
    refused = admin.post(detail_url, {"decision": "reject", "feedback": " "}, follow=True)
    assert "say why the work is rejected" in refused.content.decode()
    admin.post(detail_url, {"decision": "reject", "feedback": "pair 3 is clearly not a match"})
    assignment.refresh_from_db()
    assert (assignment.status, assignment.reviewed_by, assignment.feedback) == (
        "rejected",
        staff,
        "pair 3 is clearly not a match",
    )
    mine = client.get(reverse("frontend:work")).content.decode()
    assert "pair 3 is clearly not a match" in mine


def test_the_review_page_refuses_a_decision_on_ones_own_work(client, staff, annotating_batch):
    assignment = take_hit(logged_in(client, staff))
    body = correct_answers(assignment)
    for answer in body["answers"]:
        answer["level"] = "yes"  # the golden TN answered YES: flagged, waits for a person
    client.post(
        reverse("api:assignment-submit", args=[assignment.pk]),
        body,
        content_type="application/json",
    )
    detail_url = reverse("frontend:review-detail", args=[assignment.pk])

    response = client.post(detail_url, {"decision": "approve"}, follow=True)

    assert "you cannot review your own work" in response.content.decode()
    assignment.refresh_from_db()
    assert (assignment.status, assignment.reviewed_by) == ("submitted", None)


def test_the_review_pages_hold_back_mturk_work_until_mturk_confirms_it(
    client, staff, annotating_batch
):
    hit = annotating_batch.hits.order_by("index").first()
    forged = mturk_assignment_open(hit=hit, worker_id="A1MADEUP", assignment_id="3AMADEUP")
    level = {"golden_tp": "yes", "golden_tn": "no", "task": "yes"}
    answers = [
        AnswerInput(item_id=i.pk, level=level[i.role], elapsed_ms=900) for i in hit.items.all()
    ]
    mturk_assignment_submit(assignment=forged, answers=answers)
    admin = logged_in(client, staff)
    detail_url = reverse("frontend:review-detail", args=[forged.pk])

    queue = admin.get(reverse("frontend:review")).content.decode()
    assert detail_url not in queue
    assert "Not listed here: 1 MTurk submission that MTurk has not confirmed yet" in queue
    detail = admin.get(detail_url).content.decode()
    assert "Waiting for MTurk" in detail
    assert 'id="approve"' not in detail
    response = admin.post(detail_url, {"decision": "approve"}, follow=True)
    assert response.status_code == 200
    assert "MTurk has not confirmed assignment 3AMADEUP yet" in response.content.decode()
    forged.refresh_from_db()
    assert forged.status == "submitted"


def test_staff_blocks_a_worker_who_then_gets_no_hit(client, annotator, staff, annotating_batch):
    worker_page = logged_in(client, annotator)
    take_hit(worker_page)
    worker = Assignment.objects.get(worker__user=annotator).worker
    admin = logged_in(type(client)(), staff)
    assert "ann" in admin.get(reverse("frontend:workers")).content.decode()
    admin.post(reverse("frontend:worker-block", args=[worker.pk]), {"blocked": "1"})
    assert Assignment.objects.get(worker=worker).status == "expired"
    response = worker_page.post(reverse("frontend:work-next"), follow=True)
    assert "blocked" in response.content.decode()
