"""A round whose work is all approved closes by itself: after the submit or review that
completes it (the pages ask), or by the periodic task (work that came without a page)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, Batch, BatchState
from annotation.submissions import AnswerInput, assignment_submit
from config.celery import app
from pipeline.curation import FINISH_KEY
from pipeline.round_controls import rounds_finish_after
from pipeline.stages import batch_create, batch_run_until
from pipeline.tasks import annotation_close_check_queue, close_complete_rounds
from tests.page_answers import page_answers

pytestmark = pytest.mark.django_db


def account(name: str, **extra):
    return get_user_model().objects.create_user(name, password="a long password", **extra)


def answers(assignment: Assignment, *, golden_right: bool = True) -> list[dict]:
    level = {"golden_tp": "yes", "golden_tn": "no" if golden_right else "yes", "task": "yes"}
    return page_answers(assignment, level)


def judge_all_but_one(batch: Batch, users) -> Assignment:
    """Approve every assignment the round needs but one, through the service (no page asks);
    return the last one, taken and open."""
    needed = sum(batch.hits.filter(round=batch.round).values_list("max_assignments", flat=True))
    taken = []
    for user in users:
        worker = worker_for_user(user=user)
        while (assignment := hit_assign_next(worker=worker)) is not None:
            taken.append(assignment)
            if len(taken) == needed:
                return assignment
            rows = [AnswerInput(item_id=a["item"], level=a["level"]) for a in answers(assignment)]
            assignment_submit(
                assignment=assignment, answers=rows, followups_required=False, by_page=True
            )
    raise AssertionError(f"only {len(taken)} of {needed} assignments could be taken")


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def test_the_last_approved_submission_closes_the_round_and_releases(
    annotating_batch, eager_celery, django_capture_on_commit_callbacks
):
    users = [account("a"), account("b")]
    last = judge_all_but_one(annotating_batch, users)
    assert annotating_batch.state == BatchState.ANNOTATING
    client = api_client(last.worker.user)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("api:assignment-submit", args=[last.pk]),
            {"answers": answers(last)},
            format="json",
        )

    assert response.status_code == 201 and response.json()["status"] == "approved"
    annotating_batch.refresh_from_db()
    assert annotating_batch.state == BatchState.RELEASED  # no command ran


def approve_on_the_review_page(client, assignment: Assignment):
    return client.post(
        reverse("frontend:review-detail", args=[assignment.pk]), {"decision": "approve"}
    )


def approve_in_the_django_admin(client, assignment: Assignment):
    return client.post(
        reverse("admin:annotation_assignment_changelist"),
        {"action": "approve", "_selected_action": [assignment.pk], "index": 0},
    )


@pytest.mark.parametrize("approve", [approve_on_the_review_page, approve_in_the_django_admin])
def test_a_staff_approval_that_completes_the_round_closes_it(
    client, annotating_batch, eager_celery, django_capture_on_commit_callbacks, approve
):
    last = judge_all_but_one(annotating_batch, [account("a"), account("b")])
    api_client(last.worker.user).post(
        reverse("api:assignment-submit", args=[last.pk]),
        {"answers": answers(last, golden_right=False)},
        format="json",
    )  # flagged: it waits for a person, the round with it
    annotating_batch.refresh_from_db()
    assert annotating_batch.state == BatchState.ANNOTATING
    boss = account("boss", is_staff=True)
    boss.user_permissions.add(Permission.objects.get(codename="change_assignment"))
    client.force_login(boss)

    with django_capture_on_commit_callbacks(execute=True):
        response = approve(client, last)

    assert response.status_code == 302
    annotating_batch.refresh_from_db()
    assert annotating_batch.state == BatchState.RELEASED


def test_an_adaptive_round_moves_on_to_the_next_round_by_itself(
    dataset, annotators, small_config, eager_celery, django_capture_on_commit_callbacks
):
    config = {**small_config, "strategy": "adaptive", "budget_judgements": 400, "round_size": 40}
    batch = batch_create(dataset=dataset, name="adaptive", raw_config=config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == "annotating"
    batch.refresh_from_db()
    last = judge_all_but_one(batch, [account("a"), account("b")])

    with django_capture_on_commit_callbacks(execute=True):
        api_client(last.worker.user).post(
            reverse("api:assignment-submit", args=[last.pk]),
            {"answers": answers(last)},
            format="json",
        )

    batch.refresh_from_db()
    assert (batch.state, batch.round) == (BatchState.ANNOTATING, 1)  # round 1 waits for people


def test_finish_after_this_round_releases_instead_of_looping(
    dataset, annotators, small_config, eager_celery, django_capture_on_commit_callbacks
):
    config = {**small_config, "strategy": "adaptive", "budget_judgements": 400, "round_size": 40}
    batch = batch_create(dataset=dataset, name="adaptive", raw_config=config)
    batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED)
    rounds_finish_after(batch_id=batch.pk)
    batch.refresh_from_db()
    assert batch.reports[FINISH_KEY] == 0
    last = judge_all_but_one(batch, [account("a"), account("b")])

    with django_capture_on_commit_callbacks(execute=True):
        api_client(last.worker.user).post(
            reverse("api:assignment-submit", args=[last.pk]),
            {"answers": answers(last)},
            format="json",
        )

    batch.refresh_from_db()
    assert (batch.state, batch.round) == (BatchState.RELEASED, 0)


def test_the_periodic_task_closes_a_complete_round_and_leaves_an_incomplete_one(
    dataset, annotators, small_config, eager_celery, django_capture_on_commit_callbacks
):
    complete = batch_create(dataset=dataset, name="complete", raw_config=small_config)
    batch_run_until(batch_id=complete.pk, until=BatchState.RELEASED)
    complete.refresh_from_db()
    last = judge_all_but_one(complete, [account("a"), account("b")])
    rows = [AnswerInput(item_id=a["item"], level=a["level"]) for a in answers(last)]
    # No page asks.
    assignment_submit(assignment=last, answers=rows, followups_required=False, by_page=True)
    incomplete = batch_create(dataset=dataset, name="incomplete", raw_config=small_config)
    batch_run_until(batch_id=incomplete.pk, until=BatchState.RELEASED)
    complete.refresh_from_db()
    assert complete.state == BatchState.ANNOTATING

    with django_capture_on_commit_callbacks(execute=True):
        closed = close_complete_rounds.delay().get()

    assert closed == [complete.pk]
    assert Batch.objects.get(pk=complete.pk).state == BatchState.RELEASED
    assert Batch.objects.get(pk=incomplete.pk).state == BatchState.ANNOTATING


def test_the_check_after_a_submit_costs_one_query_when_work_is_missing(
    annotating_batch, django_assert_num_queries
):
    with django_assert_num_queries(1):
        assert annotation_close_check_queue(batch_id=annotating_batch.pk) is False


def test_the_periodic_task_is_in_the_beat_schedule(settings):
    entries = {entry["task"]: entry for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert entries["mitl.close_complete_rounds"]["schedule"] == 60.0
    assert "mitl.close_complete_rounds" in app.tasks


@pytest.mark.django_db(transaction=True)  # on_commit runs at once, as in eager production
def test_a_stage_that_fails_after_the_close_never_fails_the_submission(
    annotating_batch, eager_celery, monkeypatch
):
    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("pipeline.stages.verdicts_aggregate", broken)
    last = judge_all_but_one(annotating_batch, [account("a"), account("b")])

    response = api_client(last.worker.user).post(
        reverse("api:assignment-submit", args=[last.pk]),
        {"answers": answers(last)},
        format="json",
    )

    assert response.status_code == 201  # the work is stored; the batch says what failed
    annotating_batch.refresh_from_db()
    assert annotating_batch.state == BatchState.AGGREGATING
    assert annotating_batch.error == "aggregating: disk full"
