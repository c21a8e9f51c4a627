"""The batch page's round controls and stall reasons, and what an annotator with no HIT reads."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, Batch, BatchState, TaskLease
from pipeline.curation import FINISH_KEY
from pipeline.leases import stage_lease
from pipeline.stages import batch_create, stage_advance

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user("boss", password=PASSWORD, is_staff=True)
    client.force_login(user)
    return client


def control(client, batch: Batch, action: str) -> tuple[int, list[str]]:
    """POST one control; its status and what it said (the earlier requests' messages read)."""
    response = client.post(reverse("frontend:batch-control", args=[batch.pk]), {"action": action})
    said = [str(m) for m in get_messages(response.wsgi_request)]
    return response.status_code, said[-1:]


def state_of(batch: Batch) -> str:
    return Batch.objects.get(pk=batch.pk).state


def adaptive(dataset, small_config) -> Batch:
    config = {**small_config, "strategy": "adaptive", "budget_judgements": 400, "round_size": 40}
    return batch_create(dataset=dataset, name="adaptive", raw_config=config)


def test_close_this_round_aggregates_and_releases_a_fixed_batch(
    staff, annotating_batch, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        status, said = control(staff, annotating_batch, "close_round")

    assert status == 302 and said[0].startswith("Round 0 of batch")
    assert state_of(annotating_batch) == BatchState.RELEASED


def test_close_this_round_is_refused_outside_annotating(staff, batch):
    status, said = control(staff, batch, "close_round")
    assert status == 302
    assert said == [
        f"batch {batch.pk} is draft: only a batch that is annotating has a round to close"
    ]
    assert state_of(batch) == BatchState.DRAFT


def test_finish_after_this_round_is_stored_and_can_be_undone(
    staff, dataset, annotators, small_config
):
    batch = adaptive(dataset, small_config)
    assert control(staff, batch, "finish_after_round")[1] == [
        f"batch {batch.pk} is draft: it runs no rounds now"
    ]
    Batch.objects.filter(pk=batch.pk).update(state=BatchState.ANNOTATING)

    _, said = control(staff, batch, "finish_after_round")
    assert said[0].startswith(f"Batch {batch.pk} finishes after round 0")
    assert Batch.objects.get(pk=batch.pk).reports[FINISH_KEY] == 0
    page = staff.get(reverse("frontend:batch", args=[batch.pk])).content.decode()
    assert 'id="round-finishing"' in page and 'value="keep_rounds"' in page

    control(staff, batch, "keep_rounds")
    assert FINISH_KEY not in Batch.objects.get(pk=batch.pk).reports


def test_finish_after_this_round_is_refused_for_a_fixed_batch(staff, annotating_batch):
    _, said = control(staff, annotating_batch, "finish_after_round")
    assert said == [
        f"batch {annotating_batch.pk} is fixed: it has one round and releases after it anyway"
    ]


def test_cancel_stops_the_batch_and_a_second_cancel_is_refused(staff, annotating_batch):
    _, said = control(staff, annotating_batch, "cancel")
    assert said[0].startswith(f"Batch {annotating_batch.pk} cancelled")
    assert state_of(annotating_batch) == BatchState.CANCELLED

    status, said = control(staff, annotating_batch, "cancel")
    assert status == 302 and said == [
        f"batch {annotating_batch.pk} is cancelled; it cannot be cancelled"
    ]


def test_resume_runs_a_failed_stage_again(
    staff, annotating_batch, eager_celery, django_capture_on_commit_callbacks
):
    stage_advance(batch_id=annotating_batch.pk, stage=BatchState.ANNOTATING, force=True)
    Batch.objects.filter(pk=annotating_batch.pk).update(error="aggregating: worker lost")

    with django_capture_on_commit_callbacks(execute=True):
        _, said = control(staff, annotating_batch, "resume")

    assert said == [f"Batch {annotating_batch.pk}: its aggregating stage is queued again."]
    batch = Batch.objects.get(pk=annotating_batch.pk)
    assert (batch.state, batch.error) == (BatchState.RELEASED, "")


def test_resume_is_refused_while_people_work_or_a_live_worker_runs_the_stage(
    staff, annotating_batch
):
    _, said = control(staff, annotating_batch, "resume")
    assert "it waits for people: nothing to resume" in said[0]

    Batch.objects.filter(pk=annotating_batch.pk).update(state=BatchState.AGGREGATING)
    TaskLease.objects.create(
        key=stage_lease(annotating_batch.pk, BatchState.AGGREGATING).key,
        batch_id=annotating_batch.pk,
        task="mitl.run_stage",
        args=[annotating_batch.pk, "aggregating"],
        state="running",
        holder="w1",
        queued_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    _, said = control(staff, annotating_batch, "resume")
    assert said == [
        f"batch {annotating_batch.pk} cannot be resumed: its aggregating stage is running on a "
        "worker right now"
    ]


def test_controls_are_staff_only_and_post_only(client, annotating_batch, staff):
    url = reverse("frontend:batch-control", args=[annotating_batch.pk])
    assert staff.get(url).status_code == 405
    assert staff.post(url, {"action": "explode"}).status_code == 302
    annotator = get_user_model().objects.create_user("ann", password=PASSWORD)
    client.force_login(annotator)
    assert client.post(url, {"action": "cancel"}).status_code == 403
    assert state_of(annotating_batch) == BatchState.ANNOTATING


def test_the_batch_page_and_dashboard_say_why_the_round_waits(staff, annotating_batch):
    annotating_batch.hits.update(max_assignments=3)
    get_user_model().objects.create_user("ann", password=PASSWORD)

    page = staff.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    dashboard = staff.get(reverse("frontend:dashboard")).content.decode()

    reason = "3 assignments per HIT but only 1 worker is eligible"
    assert reason in page and reason in dashboard
    assert 'value="close_round"' in page and 'value="cancel"' in page
    assert 'value="resume"' not in page and 'value="finish_after_round"' not in page
    assert "confirm(" in page


def test_an_annotator_with_no_hit_reads_why_briefly(client, annotating_batch):
    annotating_batch.hits.update(max_assignments=1)
    user = get_user_model().objects.create_user("ann", password=PASSWORD)
    worker = worker_for_user(user=user)
    while hit_assign_next(worker=worker) is not None:  # takes them all, submits none
        Assignment.objects.filter(worker=worker, status="accepted").update(status="expired")
    other = get_user_model().objects.create_user("other", password=PASSWORD)
    client.force_login(other)

    response = client.post(reverse("frontend:work-next"), follow=True)
    text = response.content.decode()
    assert "There is no HIT to do right now" in text
    api = client.post("/api/assignments/next/")
    assert api.status_code == 204 and not api.content
    assert api["X-No-HIT-Reason"] == "no HIT is free right now"

    client.force_login(user)
    api = client.post("/api/assignments/next/")
    assert api["X-No-HIT-Reason"] == (
        f"batch {annotating_batch.pk}: you have done every HIT of it that is still open; it "
        "waits for other annotators"
    )
    page = client.post(reverse("frontend:work-next"), follow=True).content.decode()
    assert f"{annotating_batch.name}: you have done every HIT of it" in page
    assert "ann" not in api["X-No-HIT-Reason"].replace("annotators", "")


def test_pause_and_resume_handing_out_from_the_page(staff, annotating_batch):
    page = staff.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    assert 'value="pause"' in page and 'value="unpause"' not in page

    status, said = control(staff, annotating_batch, "pause")

    assert status == 302 and said[0].startswith(f"Batch {annotating_batch.pk} paused")
    page = staff.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    assert 'id="round-paused"' in page and 'value="unpause"' in page
    assert 'data-stall="paused"' in page
    assert control(staff, annotating_batch, "unpause")[1][0].endswith("hands out its HITs again.")
