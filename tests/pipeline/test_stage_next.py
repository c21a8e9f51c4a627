"""Stages queue nothing: they return what comes next, and only the tasks layer queues it."""

from __future__ import annotations

import pytest
from django.db import transaction

from annotation.models import Batch, BatchState, TaskLease
from mitl.config import batch_config
from pipeline.simulate import crowd_simulate_reviewed
from pipeline.stages import StageNext, batch_run_until, stage_advance
from pipeline.tasks import next_queue, run_stage

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker_celery():
    """Queue as with a broker (leases written); the captured messages are never sent."""
    from config.celery import app

    saved = app.conf["CELERY_TASK_ALWAYS_EAGER"]
    app.conf.update({"CELERY_TASK_ALWAYS_EAGER": False})
    yield
    app.conf.update({"CELERY_TASK_ALWAYS_EAGER": saved})


def test_a_stage_queues_nothing_and_its_task_queues_what_it_returns(
    batch, eager_celery, django_capture_on_commit_callbacks
):
    batch_run_until(batch_id=batch.pk, until=BatchState.RETRIEVING)  # started, nothing run

    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        step = stage_advance(batch_id=batch.pk, stage=BatchState.RETRIEVING)
    assert callbacks == []  # nothing queued, not even on commit
    assert step == StageNext(batch_id=batch.pk, moved=True, stage=BatchState.POOLING)
    assert Batch.objects.get(pk=batch.pk).state == BatchState.POOLING

    # A late duplicate of the same stage moves nothing and names nothing to queue.
    duplicate = stage_advance(batch_id=batch.pk, stage=BatchState.RETRIEVING)
    assert duplicate == StageNext(batch_id=batch.pk)
    with django_capture_on_commit_callbacks() as callbacks:
        next_queue(duplicate)
    assert callbacks == []

    # The task runs pooling and queues the building it returned, once the commit comes.
    with django_capture_on_commit_callbacks() as callbacks:
        assert run_stage.delay(batch.pk, BatchState.POOLING).get() == BatchState.BUILDING
    assert len(callbacks) == 1
    callbacks[0]()  # the commit: eager, building runs here; annotating waits for people
    assert Batch.objects.get(pk=batch.pk).state == BatchState.ANNOTATING


def test_the_task_layer_queues_the_next_stage_leased_on_commit(
    batch, broker_celery, django_capture_on_commit_callbacks
):
    Batch.objects.filter(pk=batch.pk).update(state=BatchState.POOLING)
    with django_capture_on_commit_callbacks() as callbacks:
        next_queue(StageNext(batch_id=batch.pk, moved=True, stage=BatchState.BUILDING))

    assert len(callbacks) == 1
    lease = TaskLease.objects.get(key=f"batch:{batch.pk}:building")
    assert (lease.task, lease.args) == ("mitl.run_stage", [batch.pk, "building"])
    assert lease.state == "queued"


def test_a_later_rounds_hits_join_the_batchs_mturk_publication(
    dataset, annotators, small_config, broker_celery, django_capture_on_commit_callbacks
):
    from pipeline.stages import batch_create

    config = {
        **small_config,
        "strategy": "adaptive",
        "budget_judgements": 200,
        "round_size": 70,
        "ranking_depth": 20,
        "estimate_share": 0.25,
    }
    batch = batch_create(dataset=dataset, name="adaptive on MTurk", raw_config=config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    crowd_simulate_reviewed(
        batch=batch, config=batch_config(batch), n_workers=6, feedback="golden", seed=3
    )
    Batch.objects.filter(pk=batch.pk).update(
        mturk={"hit_type_id": "3TYPE1", "environment": "production"}
    )
    for stage in (BatchState.ANNOTATING, BatchState.AGGREGATING, BatchState.POOLING):
        stage_advance(batch_id=batch.pk, stage=stage, force=True)  # round 0 ends, 1 selects
    assert Batch.objects.values_list("state", "round").get(pk=batch.pk) == ("building", 1)

    step = stage_advance(batch_id=batch.pk, stage=BatchState.BUILDING)
    assert step == StageNext(
        batch_id=batch.pk, moved=True, mturk_publish=True, mturk_production=True
    )
    with django_capture_on_commit_callbacks() as callbacks:
        next_queue(step)
    assert len(callbacks) == 1
    lease = TaskLease.objects.get(key=f"batch:{batch.pk}:mturk_publish")
    assert (lease.task, lease.args) == ("annotation.mturk_publish", [batch.pk, True])
