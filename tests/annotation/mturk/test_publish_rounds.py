"""An adaptive batch on MTurk: each round's new HITs join the same publication (Stubber)."""

from __future__ import annotations

import pytest

from annotation.models import Batch, BatchState
from mitl.config import batch_config
from pipeline.simulate import crowd_simulate_reviewed
from pipeline.stages import batch_create, batch_run_until
from pipeline.tasks import next_queue

from .helpers import TYPE_ID, expect_create_hit, hits_of, publish, remote_hit_id

pytestmark = pytest.mark.django_db


def test_each_round_appends_its_hits_to_the_same_publication(
    dataset,
    annotators,
    small_config,
    client,
    stub,
    monkeypatch,
    eager_celery,
    django_capture_on_commit_callbacks,
):
    config = {
        **small_config,
        "strategy": "adaptive",
        "budget_judgements": 200,
        "round_size": 70,
        "ranking_depth": 20,
    }
    batch = batch_create(dataset=dataset, name="adaptive on mturk", raw_config=config)
    assert batch_run_until(batch_id=batch.pk, until=BatchState.RELEASED) == BatchState.ANNOTATING
    first_round = publish(batch, client, stub)  # HIT type + one CreateHIT per HIT
    crowd_simulate_reviewed(
        batch=batch, config=batch_config(batch), n_workers=6, feedback="golden", seed=3
    )

    with django_capture_on_commit_callbacks() as queued:
        state = batch_run_until(
            batch_id=batch.pk, until=BatchState.RELEASED, force=True, queue=next_queue
        )

    batch = Batch.objects.get(pk=batch.pk)
    assert state == BatchState.ANNOTATING and batch.round == 1
    second_round = [hit for hit in hits_of(batch) if hit.round == 1]
    assert second_round and not any(hit.external_id for hit in second_round)
    # The queued publication (the task's own client is the stubbed one): a resumed
    # publication first looks for HITs an interrupted run made, then creates only the new.
    monkeypatch.setattr("annotation.mturk.client.mturk_client", lambda **kwargs: client)
    stub.add_response("list_hits", {"NumResults": 0, "HITs": []}, {"MaxResults": 100})
    for hit in second_round:
        expect_create_hit(stub, batch, hit)
    for callback in queued:
        callback()
    stub.assert_no_pending_responses()

    hits = hits_of(batch)
    assert {hit.round for hit in hits} == {0, 1}
    assert all(hit.external_id == remote_hit_id(hit) for hit in hits)
    assert [h.external_id for h in hits if h.round == 0] == [h.external_id for h in first_round]
    state = Batch.objects.get(pk=batch.pk).mturk
    assert state["hit_type_id"] == TYPE_ID and "PROBLEM" not in str(state.get("last_publish"))
