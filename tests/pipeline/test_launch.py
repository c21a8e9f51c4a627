"""Launching a batch from the wizard: explicit queries are kept; the simulated crowd follows."""

from __future__ import annotations

import pytest

from annotation.errors import ServiceError
from annotation.models import Batch, BatchState, Caption, InvalidReason, Query, Release
from pipeline.autopilot import REPORT_KEY
from pipeline.launch import batch_create_with_queries, batch_launch
from pipeline.stages import batch_run_until

pytestmark = pytest.mark.django_db


def test_listed_ids_become_the_queries_and_their_counts(dataset, annotators, small_config):
    images = [3, 1, 3]  # a repeated id counts once
    batch = batch_create_with_queries(
        dataset=dataset, name="listed", raw_config=small_config, image_ids=images, caption_ids=[7]
    )

    queries = Query.objects.filter(batch=batch).order_by("pk")
    assert [q.image.ext_id for q in queries if q.direction == "i2t"] == [3, 1]
    assert [q.caption.ext_id for q in queries if q.direction == "t2i"] == [7]
    assert (batch.config["n_image_queries"], batch.config["n_caption_queries"]) == (2, 1)
    assert batch_run_until(batch_id=batch.pk, until="pooling") == "pooling"
    assert Query.objects.filter(batch=batch).count() == 3  # retrieval drew no other sample


def test_without_lists_retrieval_samples_the_configured_counts(dataset, annotators, small_config):
    batch = batch_create_with_queries(dataset=dataset, name="sampled", raw_config=small_config)
    assert not Query.objects.filter(batch=batch).exists()
    batch_run_until(batch_id=batch.pk, until="pooling")
    assert Query.objects.filter(batch=batch).count() == 16


@pytest.mark.parametrize(
    ("images", "captions", "message"),
    [
        ([1, 998, 999], [], "the dataset has no image with id 998, 999"),
        ([], list(range(10_000, 10_007)), "no caption with id 10000, 10001, 10002, 10003, 10004 "),
        ([], [], "ask for at least one query"),
    ],
)
def test_unknown_ids_are_refused_and_nothing_is_created(
    dataset, annotators, small_config, images, captions, message
):
    with pytest.raises(ValueError, match=message):
        batch_create_with_queries(
            dataset=dataset,
            name="bad",
            raw_config=small_config,
            image_ids=images,
            caption_ids=captions,
        )
    assert not Batch.objects.exists()


def test_an_invalid_caption_cannot_be_a_query(dataset, annotators, small_config):
    Caption.objects.filter(dataset=dataset, ext_id=5).update(
        is_invalid=True, invalid_reason=InvalidReason.MEANINGLESS
    )
    with pytest.raises(ServiceError, match="caption 5 of 'small' is marked invalid"):
        batch_create_with_queries(
            dataset=dataset, name="bad", raw_config=small_config, caption_ids=[5]
        )


def test_the_mturk_estimate_is_stored_on_the_batch(dataset, annotators, small_config):
    batch = batch_create_with_queries(
        dataset=dataset, name="priced", raw_config=small_config, mturk={"estimate": {"hits": 3}}
    )
    batch.refresh_from_db()
    assert batch.mturk == {"estimate": {"hits": 3}}


@pytest.mark.django_db(transaction=True)
def test_a_launch_with_the_simulated_crowd_ends_released(dataset, annotators, small_config):
    batch = batch_create_with_queries(dataset=dataset, name="demo", raw_config=small_config)

    batch_launch(batch=batch, simulated_crowd=True)  # no broker: everything runs here

    batch.refresh_from_db()
    assert batch.state == BatchState.RELEASED
    assert batch.reports[REPORT_KEY]["status"] == "done"
    assert Release.objects.filter(batches=batch).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_launch_without_it_waits_for_people(dataset, annotators, small_config):
    batch = batch_create_with_queries(dataset=dataset, name="people", raw_config=small_config)
    batch_launch(batch=batch)
    batch.refresh_from_db()
    assert batch.state == BatchState.ANNOTATING
    assert REPORT_KEY not in batch.reports
