"""Reviews: the queue of flagged work, its answers beside the golden truth, the decision."""

from __future__ import annotations

import pytest

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, Batch
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.submissions import AnswerInput, assignment_submit

from .conftest import answers_for

pytestmark = pytest.mark.django_db


def test_the_queue_lists_flagged_submissions(staff, flagged_assignment):
    body = staff.get("/api/reviews/").json()
    assert body["count"] == 1
    row = body["results"][0]
    assert (row["id"], row["flagged"], row["golden_passed"]) == (flagged_assignment.pk, True, False)
    assert row["worker"] == "platform:ann"
    assert row["batch"] == flagged_assignment.hit.batch_id


def test_the_detail_shows_each_answer_beside_the_golden_truth(staff, flagged_assignment):
    rows = staff.get(f"/api/reviews/{flagged_assignment.pk}/").json()["rows"]

    by_role = {row["role"]: row for row in rows if row["role"] != "task"}
    assert len(rows) == flagged_assignment.hit.items.count()
    assert by_role["golden_tn"]["expected"] == "a NO (known mismatch)"
    assert by_role["golden_tn"]["golden_ok"] is False  # answered YES
    assert by_role["golden_tp"]["golden_ok"] is True
    assert all(row["expected"] is None for row in rows if row["role"] == "task")
    assert [row["position"] for row in rows] == list(range(1, len(rows) + 1))


def test_staff_approve_flagged_work_and_the_queue_empties(staff, staff_user, flagged_assignment):
    response = staff.post(f"/api/reviews/{flagged_assignment.pk}/approve/")

    assert response.status_code == 200 and response.json()["status"] == "approved"
    stored = Assignment.objects.get(pk=flagged_assignment.pk)
    assert (stored.status, stored.flagged, stored.reviewed_by) == ("approved", False, staff_user)
    assert staff.get("/api/reviews/").json()["count"] == 0


def test_a_rejection_needs_feedback_and_the_worker_reads_it(staff, ann, flagged_assignment):
    url = f"/api/reviews/{flagged_assignment.pk}/reject/"
    blank = staff.post(url, {"feedback": "  "}, format="json")
    missing = staff.post(url, {}, format="json")
    rejected = staff.post(url, {"feedback": "pair 3 is clearly not a match"}, format="json")

    assert (blank.status_code, missing.status_code) == (400, 400)
    assert blank.json()["errors"] == {"feedback": ["This field may not be blank."]}
    assert missing.json()["errors"] == {"feedback": ["This field is required."]}
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    mine = ann.get("/api/assignments/").json()["results"][0]
    assert (mine["status"], mine["feedback"]) == ("rejected", "pair 3 is clearly not a match")


def test_work_that_is_not_waiting_cannot_be_reviewed_again(staff, flagged_assignment):
    staff.post(f"/api/reviews/{flagged_assignment.pk}/approve/")
    again = staff.post(f"/api/reviews/{flagged_assignment.pk}/approve/")
    assert again.status_code == 409  # the work's state, as the schema says
    assert again.json()["detail"] == "only submitted work can be reviewed (this one is approved)"


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_staff_cannot_review_their_own_work(staff, staff_user, annotating_batch, decision):
    own = hit_assign_next(worker=worker_for_user(user=staff_user))
    body = answers_for(own, golden_right=False)["answers"]
    answers = [AnswerInput(item_id=a["item"], level=a["level"], elapsed_ms=900) for a in body]
    assignment_submit(assignment=own, answers=answers, followups_required=True, by_page=True)

    response = staff.post(
        f"/api/reviews/{own.pk}/{decision}/", {"feedback": "looks right"}, format="json"
    )

    assert response.status_code == 403
    assert response.json() == {
        "detail": "you cannot review your own work: another staff member must decide it"
    }
    assert Assignment.objects.get(pk=own.pk).status == "submitted"


def mturk_submission(batch: Batch, worker_id: str, assignment_id: str) -> Assignment:
    """Answers sent from the public MTurk HIT page, under ids that nobody checked yet."""
    hit = batch.hits.order_by("index").first()
    assignment = mturk_assignment_open(hit=hit, worker_id=worker_id, assignment_id=assignment_id)
    level = {"golden_tp": "yes", "golden_tn": "no", "task": "yes"}
    answers = [
        AnswerInput(item_id=i.pk, level=level[i.role], elapsed_ms=900) for i in hit.items.all()
    ]
    return mturk_assignment_submit(assignment=assignment, answers=answers).assignment


def test_mturk_work_that_mturk_has_not_confirmed_is_neither_queued_nor_approved(
    staff, annotating_batch
):
    forged = mturk_submission(annotating_batch, "A1MADEUP", "3AMADEUP")

    assert staff.get("/api/reviews/").json()["count"] == 0
    assert staff.get(f"/api/reviews/{forged.pk}/").json()["awaits_mturk"] is True
    refused = staff.post(f"/api/reviews/{forged.pk}/approve/")
    assert refused.status_code == 409  # its state: MTurk has not confirmed it yet
    detail = refused.json()["detail"]
    assert detail.startswith("MTurk has not confirmed assignment 3AMADEUP yet")
    assert f"Run `mturk_sync {annotating_batch.pk}` first" in detail
    assert Assignment.objects.get(pk=forged.pk).status == "submitted"
