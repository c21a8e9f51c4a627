"""Pausing a batch's hand-out: no new work starts (platform or the HIT page inside MTurk),
open work may still be submitted, staff and annotators read why; every way in agrees."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.errors import ServiceError, StateConflict
from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Batch
from annotation.mturk.hit_page import mturk_assignment_open
from annotation.pause import PAUSED_WHY, batch_pause_set
from annotation.rounds import round_stall, round_waits_for_worker
from annotation.submissions import AnswerInput, assignment_submit

pytestmark = pytest.mark.django_db


def _worker(name: str):
    return worker_for_user(user=get_user_model().objects.create_user(name))


def test_a_paused_batch_hands_out_nothing_new_and_says_why(annotating_batch):
    early, late = _worker("early"), _worker("late")
    open_work = hit_assign_next(worker=early)
    assert open_work is not None

    said = batch_pause_set(batch_id=annotating_batch.pk, paused=True)

    assert said.startswith(f"Batch {annotating_batch.pk} paused")
    assert hit_assign_next(worker=late) is None
    assert [w.why for w in round_waits_for_worker(worker=late)] == [PAUSED_WHY]
    fresh = Batch.objects.get(pk=annotating_batch.pk)
    assert [s.code for s in round_stall(batch=fresh)][:2] == ["missing", "paused"]
    # Work already open is still the worker's, and may be submitted.
    assert hit_assign_next(worker=early).pk == open_work.pk
    answers = [
        AnswerInput(item_id=item.pk, level="yes", elapsed_ms=900)
        for item in open_work.hit.items.order_by("position")
    ]
    result = assignment_submit(assignment=open_work, answers=answers, worker=early)
    assert result.created

    batch_pause_set(batch_id=annotating_batch.pk, paused=False)
    assert hit_assign_next(worker=late) is not None


def test_a_paused_batch_opens_no_new_mturk_assignment(annotating_batch):
    hit = annotating_batch.hits.order_by("index").first()
    hit.external_id = "3HITPAUSED"
    hit.save(update_fields=["external_id"])
    opened = mturk_assignment_open(hit=hit, worker_id="A1EARLY", assignment_id="3EARLY")
    batch_pause_set(batch_id=annotating_batch.pk, paused=True)
    hit.batch.refresh_from_db()

    with pytest.raises(ServiceError, match="paused: please return this HIT"):
        mturk_assignment_open(hit=hit, worker_id="A1LATE", assignment_id="3LATE")
    again = mturk_assignment_open(hit=hit, worker_id="A1EARLY", assignment_id="3EARLY")
    assert again.pk == opened.pk  # the worker already on it goes on


def test_only_a_batch_being_judged_can_be_paused(batch):
    with pytest.raises(StateConflict, match="is draft"):
        batch_pause_set(batch_id=batch.pk, paused=True)
    assert batch_pause_set(batch_id=batch.pk, paused=False).endswith("not paused already.")


def test_the_command_and_the_api_run_the_same_controls(annotating_batch, staff_api):
    call_command("batch_control", str(annotating_batch.pk), "pause")
    assert Batch.objects.get(pk=annotating_batch.pk).paused_at is not None

    response = staff_api.post(
        f"/api/batches/{annotating_batch.pk}/control/", {"action": "unpause"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["batch"]["paused_at"] is None
    assert response.json()["detail"].endswith("hands out its HITs again.")

    refused = staff_api.post(
        f"/api/batches/{annotating_batch.pk}/control/",
        {"action": "finish_after_round"},
        format="json",
    )
    assert refused.status_code == 409  # a fixed batch has one round
    assert "is fixed" in refused.json()["detail"]
    unknown = staff_api.post(
        f"/api/batches/{annotating_batch.pk}/control/", {"action": "explode"}, format="json"
    )
    assert unknown.status_code == 400 and "action" in unknown.json()["errors"]
    with pytest.raises(CommandError, match="is fixed"):
        call_command("batch_control", str(annotating_batch.pk), "finish_after_round")


@pytest.fixture
def staff_api():
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("boss", is_staff=True))
    return client
