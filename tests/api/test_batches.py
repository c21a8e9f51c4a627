"""Batches through the API: create from a config, start, cancel, filters, pages, cost."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, Batch, Query
from mitl.costs import hits_for
from pipeline.stages import (
    batch_create,
    batch_run_until,
    next_state,
    retrieval_chunk_run,
    stage_run,
)

pytestmark = pytest.mark.django_db


def create(client, dataset, config, name="api batch"):
    return client.post(
        "/api/batches/", {"dataset": dataset.name, "name": name, "config": config}, format="json"
    )


def test_staff_create_a_draft_batch_with_the_defaults_filled_in(
    staff, dataset, annotators, small_config
):
    response = create(staff, dataset, small_config)

    assert response.status_code == 201
    body = response.json()
    assert (body["state"], body["dataset"], body["name"]) == ("draft", "small", "api batch")
    assert sorted(body["annotators"]) == ["bow-plain", "tfidf"]
    assert body["config"]["k"] == 3 and body["config"]["aggregation"] == "eccv"  # a default
    assert [p["stage"] for p in body["progress"]] == [
        "retrieving",
        "pooling",
        "building",
        "annotating",
        "aggregating",
    ]
    assert body["counts"] == {"queries": 0, "candidates": 0, "hits": 0, "assignments": {}}
    assert Batch.objects.get(pk=body["id"]).state == "draft"


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"k": 0}, "k", "`k` must be between 1 and 100 (got 0)"),
        ({"colour": "red"}, "colour", "unknown key 'colour'"),
        ({"annotators": ["tfidf", "nope"]}, "annotators", "unknown annotator 'nope'"),
        ({"annotators": []}, "annotators", "non-empty list"),
        ({"golden_negative_depth": 2}, "golden_negative_depth", "must be at least `k`"),
        ({"aggregation": "vote"}, "aggregation", "must be one of"),
        ({"n_image_queries": 500}, "non_field_errors", "fewer than the 500 image"),
    ],
)
def test_a_bad_config_is_a_400_naming_the_key_and_creates_nothing(
    staff, dataset, annotators, small_config, change, key, words
):
    response = create(staff, dataset, {**small_config, **change})

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert list(errors) == ["config"] and list(errors["config"]) == [key]
    assert words in errors["config"][key][0]
    prefix = "config: " if key == "non_field_errors" else f"config.{key}: "
    assert response.json()["detail"].startswith(prefix)
    assert not Batch.objects.exists()


def test_a_config_that_is_not_an_object_is_refused(staff, dataset, annotators):
    response = create(staff, dataset, ["tfidf"])
    assert response.status_code == 400
    assert "must be a JSON object" in response.json()["errors"]["config"]["non_field_errors"][0]


def test_an_unknown_dataset_is_named(staff, dataset, annotators, small_config):
    response = staff.post(
        "/api/batches/", {"dataset": "nope", "name": "x", "config": small_config}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["dataset"]


def test_start_runs_the_automatic_stages_and_a_second_start_is_refused(
    staff, batch, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the stages queue on commit
        started = staff.post(f"/api/batches/{batch.pk}/start/")
    after = staff.get(f"/api/batches/{batch.pk}/")
    again = staff.post(f"/api/batches/{batch.pk}/start/")

    assert started.status_code == 200 and started.json()["state"] == "retrieving"
    assert after.json()["state"] == "annotating"  # eager Celery ran the automatic stages
    assert after.json()["counts"]["hits"] == batch.hits.count() > 0
    assert again.status_code == 409
    assert again.json()["detail"] == f"batch {batch.pk} has already started (state annotating)"


def test_cancel_stops_a_draft_batch_and_every_stage_is_a_no_op(staff, batch):
    response = staff.post(f"/api/batches/{batch.pk}/cancel/")

    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert next_state("cancelled") == "cancelled"
    assert stage_run(batch_id=batch.pk, stage="retrieving") == "cancelled"
    assert batch_run_until(batch_id=batch.pk, until="released") == "cancelled"
    assert not retrieval_chunk_run(batch_id=batch.pk, annotator_id=1, query_ids=[1]).moved
    assert not Query.objects.filter(batch=batch).exists()  # retrieval never ran
    assert staff.post(f"/api/batches/{batch.pk}/start/").status_code == 409


def test_a_queued_stage_task_does_nothing_on_a_cancelled_batch(staff, batch, eager_celery):
    from pipeline.tasks import close_annotation, run_stage

    batch_run_until(batch_id=batch.pk, until="pooling")
    staff.post(f"/api/batches/{batch.pk}/cancel/")

    assert run_stage.delay(batch.pk, "pooling").get() == "cancelled"
    assert close_annotation.delay(batch.pk, True).get() == "cancelled"
    assert not batch.candidates.exists()


def test_cancel_withdraws_open_hits_but_keeps_submitted_work(
    staff, staff_user, flagged_assignment, annotator_user
):
    batch = flagged_assignment.hit.batch
    other = worker_for_user(user=staff_user)  # staff can work on HITs too
    open_work = hit_assign_next(worker=other)

    response = staff.post(f"/api/batches/{batch.pk}/cancel/")

    assert response.status_code == 200
    assert Assignment.objects.get(pk=open_work.pk).status == "expired"
    assert Assignment.objects.get(pk=flagged_assignment.pk).status == "submitted"
    assert hit_assign_next(worker=worker_for_user(user=annotator_user)) is None
    assert hit_assign_next(worker=other) is None


def test_a_released_or_cancelled_batch_cannot_be_cancelled(staff, released):
    response = staff.post(f"/api/batches/{released.pk}/cancel/")
    assert response.status_code == 409
    assert response.json()["detail"] == f"batch {released.pk} is released; it cannot be cancelled"


def test_cancelling_twice_is_refused(staff, batch):
    staff.post(f"/api/batches/{batch.pk}/cancel/")
    response = staff.post(f"/api/batches/{batch.pk}/cancel/")
    assert response.status_code == 409
    assert "is cancelled" in response.json()["detail"]


def test_batches_filter_by_dataset_and_state(staff, dataset, annotators, small_config):
    kept = batch_create(dataset=dataset, name="kept", raw_config=small_config)
    gone = batch_create(dataset=dataset, name="gone", raw_config=small_config)
    staff.post(f"/api/batches/{gone.pk}/cancel/")

    def ids(query: str) -> list[int]:
        response = staff.get(f"/api/batches/?{query}")
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert ids("state=cancelled") == [gone.pk]
    assert ids("state=draft") == [kept.pk]
    assert ids("dataset=small") == [gone.pk, kept.pk]  # newest first
    assert ids("dataset=other") == []
    refused = staff.get("/api/batches/?state=sleeping")
    assert refused.status_code == 400 and list(refused.json()["errors"]) == ["state"]


def test_batches_come_in_pages(staff, dataset, annotators, small_config):
    made = [
        batch_create(dataset=dataset, name=f"b{i}", raw_config=small_config).pk for i in range(3)
    ]

    first = staff.get("/api/batches/?page_size=2").json()
    second = staff.get("/api/batches/?page_size=2&page=2").json()
    beyond = staff.get("/api/batches/?page_size=2&page=3")

    assert first["count"] == second["count"] == 3
    assert [r["id"] for r in first["results"] + second["results"]] == made[::-1]
    assert first["next"].endswith("/api/batches/?page=2&page_size=2")
    assert second["next"] is None and second["previous"] is not None
    assert beyond.status_code == 404 and set(beyond.json()) == {"detail"}


def test_progress_lists_every_stage_of_a_running_batch(staff, annotating_batch):
    response = staff.get(f"/api/batches/{annotating_batch.pk}/progress/")
    assert response.status_code == 200
    rows = {row["stage"]: row for row in response.json()}
    assert rows["retrieving"]["finished"] and rows["building"]["finished"]
    assert rows["building"]["done"] == rows["building"]["total"] > 0
    assert not rows["aggregating"]["finished"]


def test_the_detail_counts_the_work_and_carries_the_reports(staff, own_assignment):
    batch = own_assignment.hit.batch
    body = staff.get(f"/api/batches/{batch.pk}/").json()
    assert body["counts"]["queries"] == 16
    assert body["counts"]["candidates"] == batch.candidates.count()
    assert body["counts"]["hits"] == batch.hits.count()
    assert body["counts"]["assignments"] == {"accepted": 1}
    assert set(body["reports"]["diversity"]) == {"i2t", "t2i"}


def test_before_retrieval_the_cost_is_an_upper_bound(staff, batch):
    response = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.50")

    assert response.status_code == 200
    body = response.json()
    # 16 queries × k 3 × 2 annotators = 96 pairs at most, 8 per HIT, 2 workers per HIT.
    assert (body["basis"], body["upper_bound"]) == ("config", True)
    assert (body["candidates_at_most"], body["hits_at_most"], body["hits"]) == (96, 12, None)
    assert (body["assignments"], body["items_per_hit"], body["judgements"]) == (24, 10, 240)
    assert Decimal(body["total"]) == Decimal("14.40")  # 24 × ($0.50 + 20% commission)


def test_once_pooled_the_hits_are_counted_from_the_candidates(staff, batch):
    batch_run_until(batch_id=batch.pk, until="building")
    pooled = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.50").json()
    batch_run_until(batch_id=batch.pk, until="annotating")
    built = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.50").json()

    candidates = batch.candidates.count()
    assert (pooled["basis"], pooled["upper_bound"]) == ("candidates", False)
    assert pooled["candidates"] == candidates < 96  # de-duplication removed some
    assert pooled["hits"] == hits_for(candidates, 8) == batch.hits.count()
    assert (built["basis"], built["hits"], built["hits_at_most"]) == ("hits", pooled["hits"], None)
    assert built["total"] == pooled["total"]


@pytest.mark.parametrize("reward", ["0", "0.00", "", "0.001", "1e3", "-1"])
def test_the_cost_needs_a_reward_of_at_least_a_cent(staff, batch, reward):
    response = staff.get(f"/api/batches/{batch.pk}/cost/?reward={reward}")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["reward"]
    assert "dollars and cents from 0.01" in response.json()["errors"]["reward"][0]


def test_the_cost_without_a_reward_uses_the_batchs_own(staff, batch):
    default = staff.get(f"/api/batches/{batch.pk}/cost/").json()
    assert default["reward_per_assignment"] == "0.50"  # nothing stored: the default

    Batch.objects.filter(pk=batch.pk).update(mturk={"settings": {"reward": "0.25"}})
    stored = staff.get(f"/api/batches/{batch.pk}/cost/").json()
    assert stored["reward_per_assignment"] == "0.25"
    asked = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.40").json()
    assert asked["reward_per_assignment"] == "0.40"


def test_an_estimate_of_a_config_not_created_matches_the_draft_batch(staff, batch, small_config):
    estimate = staff.post(
        "/api/batches/estimate/", {"config": small_config, "reward": "0.50"}, format="json"
    )
    draft = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.50")

    assert estimate.status_code == 200
    assert estimate.json() == draft.json()
    assert estimate.json()["hits_at_most"] == 12
    assert Batch.objects.count() == 1  # nothing created


def test_an_estimate_with_a_bad_config_names_the_key(staff, db, small_config):
    response = staff.post(
        "/api/batches/estimate/",
        {"config": {**small_config, "k": 500}, "reward": "1"},
        format="json",
    )
    assert response.status_code == 400
    assert list(response.json()["errors"]["config"]) == ["k"]
