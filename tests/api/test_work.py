"""An annotator's own work through the API: the list, next HIT, a page, a submission."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.answers import ANSWERED_OTHERWISE
from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, HITItem
from mitl.hits import page_order

from .conftest import answers_for

pytestmark = pytest.mark.django_db


def shown_order(page: dict) -> list[str]:
    """The captions of the HIT's items in the order its assignment shows them (its seed)."""
    items = list(HITItem.objects.filter(hit_id=page["hit"]).order_by("position"))
    seed = Assignment.objects.get(pk=page["id"]).page_seed
    return [items[index].caption.text for index in page_order(len(items), seed)]


def numbered(page: dict) -> bool:
    """Say whether the page names its pairs 1, 2, … in page order: never by item id."""
    return [item["id"] for item in page["items"]] == list(range(1, len(page["items"]) + 1))


def test_next_gives_a_page_of_pairs_without_their_roles(ann, annotating_batch):
    response = ann.post("/api/assignments/next/")

    assert response.status_code == 200
    page = response.json()
    assert [item["caption"] for item in page["items"]] == shown_order(page)
    assert numbered(page)
    assert all(set(item) == {"id", "position", "image_url", "caption"} for item in page["items"])
    assert page["status"] == "accepted" and page["submit_url"].endswith("/submit/")
    assert ann.post("/api/assignments/next/").json()["id"] == page["id"]  # resumed, not new


def test_next_is_a_204_when_no_hit_is_free(ann, db):
    response = ann.post("/api/assignments/next/")
    assert response.status_code == 204 and not response.content


def test_a_worker_lists_only_its_own_assignments_and_their_feedback(
    ann, staff_user, flagged_assignment
):
    theirs = hit_assign_next(worker=worker_for_user(user=staff_user))

    body = ann.get("/api/assignments/").json()
    filtered = ann.get("/api/assignments/?status=accepted").json()

    assert [row["id"] for row in body["results"]] == [flagged_assignment.pk]
    assert theirs.pk not in [row["id"] for row in body["results"]]
    assert body["results"][0]["status"] == "submitted"
    assert "flagged" not in body["results"][0] and "golden_passed" not in body["results"][0]
    assert filtered["count"] == 0


def test_a_malformed_submission_names_the_field_in_the_summary(ann, own_assignment):
    body = answers_for(own_assignment)
    body["answers"][1]["level"] = "maybe"
    response = ann.post(f"/api/assignments/{own_assignment.pk}/submit/", body, format="json")

    assert response.status_code == 400
    assert response.json()["detail"] == 'answers.1.level: "maybe" is not a valid choice.'
    assert set(response.json()["errors"]["answers"][1]) == {"level"}


def test_a_submission_is_stored_once(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/"
    first = ann.post(url, answers_for(own_assignment), format="json")
    again = ann.post(url, answers_for(own_assignment), format="json")
    assert (first.status_code, first.json()["created"]) == (201, True)
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert first.json()["status"] == "approved" and first.json()["golden_passed"] is True


def test_a_retry_with_the_same_answers_is_the_stored_result_whatever_its_times(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/"
    first = ann.post(url, answers_for(own_assignment), format="json")
    retry = answers_for(own_assignment)
    for answer in retry["answers"]:
        answer["elapsed_ms"] += 250  # measured again by the client
    again = ann.post(url, retry, format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {**first.json(), "created": False}


def test_a_repeat_with_other_answers_is_a_409_carrying_the_stored_result(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_next=true"
    first = ann.post(url, answers_for(own_assignment), format="json").json()
    stored = sorted(own_assignment.judgements.values_list("item_id", "level"))

    again = ann.post(url, answers_for(own_assignment, golden_right=False), format="json")

    assert again.status_code == 409
    assert again.json() == {
        "detail": ANSWERED_OTHERWISE,
        "stored": {
            key: value
            for key, value in {**first, "created": False}.items()
            if key not in ("next_assignment", "next_reason")
        },
    }
    assert sorted(own_assignment.judgements.values_list("item_id", "level")) == stored


def test_an_expired_hit_is_a_409_without_a_stored_result(ann, own_assignment):
    Assignment.objects.filter(pk=own_assignment.pk).update(deadline=timezone.now())
    url = f"/api/assignments/{own_assignment.pk}/submit/"

    response = ann.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 409
    assert response.json() == {
        "detail": "this assignment expired: its time limit has passed; ask for a new HIT"
    }


def test_take_next_stores_the_work_and_hands_out_the_next_hit(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_next=true"
    response = ann.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 201
    following = response.json()["next_assignment"]
    assert following["id"] != own_assignment.pk and following["hit"] != own_assignment.hit_id
    assert following["status"] == "accepted"
    assert [item["caption"] for item in following["items"]] == shown_order(following)
    assert numbered(following)
    # The same open assignment as "next" would give: one request did both.
    assert ann.post("/api/assignments/next/").json()["id"] == following["id"]
    assert own_assignment.judgements.count() == own_assignment.hit.items.count()


def test_take_next_on_a_repeated_submit_resumes_the_same_next_hit(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_next=1"
    first = ann.post(url, answers_for(own_assignment), format="json").json()
    again = ann.post(url, answers_for(own_assignment), format="json")

    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["next_assignment"]["id"] == first["next_assignment"]["id"]


def test_take_next_is_null_when_no_hit_is_left(ann, own_assignment):
    from annotation.models import HIT

    HIT.objects.exclude(pk=own_assignment.hit_id).delete()
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_next=true"
    response = ann.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 201 and response.json()["next_assignment"] is None


def test_without_take_next_the_answer_has_no_next_assignment(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/"
    assert "next_assignment" not in ann.post(url, answers_for(own_assignment), format="json").json()


def test_a_bad_take_next_value_is_a_400_that_names_it(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_next=maybe"
    response = ann.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 400 and "take_next" in response.json()["detail"]
    assert own_assignment.judgements.count() == 0


def test_submitting_another_workers_assignment_is_a_404_and_stores_nothing(staff, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/"
    response = staff.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 404
    assert own_assignment.judgements.count() == 0
