"""Publishing a batch on MTurk through the Stubber: one ExternalQuestion per HIT, resumed
without duplicates, free slots only, request tokens per publication."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from annotation.handout import assignment_create
from annotation.models import HIT, Batch, Worker
from annotation.mturk.client import RETRY_TRIES
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_type import HitTypeSettings, hit_type_request
from annotation.mturk.publish import mturk_publish
from annotation.mturk.sandbox import mturk_sandbox_reset
from annotation.mturk.sync import mturk_sync

from .helpers import (
    BASE,
    GROUP_ID,
    TYPE_ID,
    accept_and_submit,
    create_hit_params,
    expect_create_hit,
    expect_hit_type,
    expect_listing,
    hits_of,
    listed,
    publish,
    remote_hit_id,
    stub_past,
)

pytestmark = pytest.mark.django_db


def test_publish_creates_one_external_question_per_hit_and_records_the_batch(
    annotating_batch, client, stub
):
    hits = publish(annotating_batch, client, stub)
    assert all(hit.external_id == remote_hit_id(hit) for hit in hits)
    assert all(hit.published_at is not None for hit in hits)
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert (state["environment"], state["hit_type_id"]) == ("sandbox", TYPE_ID)
    assert state["hit_group_id"] == GROUP_ID
    cost = state["cost_estimate"]
    # 2 assignments per HIT at $0.50 plus 20% commission ($0.10 each)
    assignments = len(hits) * 2
    assert cost["rewards"] == str(Decimal("0.50") * assignments)
    assert cost["commission"] == str(Decimal("0.10") * assignments)
    assert cost["total"] == str(Decimal("0.60") * assignments)
    assert state["settings"]["reward"] == "0.50"


def test_publishing_again_sends_nothing(annotating_batch, client, stub):
    publish(annotating_batch, client, stub)
    result = mturk_publish(batch=annotating_batch, client=client)  # no response queued
    assert (result.created, result.already, result.recovered) == (
        0,
        len(hits_of(annotating_batch)),
        0,
    )


def test_an_interrupted_publish_resumes_without_creating_a_hit_twice(
    annotating_batch, client, stub
):
    hits = hits_of(annotating_batch)
    expect_hit_type(stub)
    expect_create_hit(stub, annotating_batch, hits[0])
    expect_create_hit(stub, annotating_batch, hits[1])
    for _ in range(RETRY_TRIES):
        stub.add_client_error(
            "create_hit_with_hit_type", "ServiceFault", "We are sorry", http_status_code=500
        )
    with pytest.raises(MTurkError) as refusal:
        mturk_publish(batch=annotating_batch, client=client)
    assert str(refusal.value).startswith(f"2 of {len(hits)} HITs are on MTurk; then MTurk ")
    assert "ServiceFault" in str(refusal.value)
    assert "Run the publish again to resume" in str(refusal.value)
    assert annotating_batch.hits.filter(external_id__isnull=False).count() == 2

    # MTurk had created the third HIT before the connection dropped: found again, not re-made.
    stub.add_response(
        "list_hits",
        {
            "NumResults": 1,
            "HITs": [
                {
                    "HITId": remote_hit_id(hits[2]),
                    "HITTypeId": TYPE_ID,
                    "RequesterAnnotation": f"mitl:batch={annotating_batch.pk}:hit={hits[2].pk}",
                }
            ],
        },
        {"MaxResults": 100},
    )
    for hit in hits[3:]:
        expect_create_hit(stub, annotating_batch, hit)
    result = mturk_publish(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (result.already, result.recovered, result.created) == (2, 1, len(hits) - 3)
    assert all(hit.external_id == remote_hit_id(hit) for hit in hits_of(annotating_batch))


def test_only_the_slots_platform_annotators_left_free_go_to_mturk(annotating_batch, client, stub):
    h0, h1, *rest = hits_of(annotating_batch)
    for name in ("ann", "bea"):
        worker = Worker.objects.create(source="platform", external_id=name)
        assignment_create(hit=h0, worker=worker)  # h0 is full
    assignment_create(hit=h1, worker=Worker.objects.get(external_id="ann"))  # one left on h1
    expect_hit_type(stub)
    expect_create_hit(stub, annotating_batch, h1, slots=1)
    for hit in rest:
        expect_create_hit(stub, annotating_batch, hit)
    result = mturk_publish(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (result.created, result.full) == (len(rest) + 1, 1)
    assert HIT.objects.get(pk=h0.pk).external_id is None
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["max_assignments"] == {str(h1.pk): 1}

    # h1's one MTurk assignment decided: settled, never listed again.
    accept_and_submit(HIT.objects.get(pk=h1.pk), "A1W1", "3A11")
    h1 = HIT.objects.get(pk=h1.pk)
    expect_listing(stub, h1, listed(h1, ("3A11", "A1W1", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A11"})
    for hit in rest:
        expect_listing(stub, HIT.objects.get(pk=hit.pk), [])
    mturk_sync(batch=annotating_batch, client=client)
    for hit in rest:
        expect_listing(stub, HIT.objects.get(pk=hit.pk), [])
    assert mturk_sync(batch=annotating_batch, client=client).hits_settled == 1
    stub.assert_no_pending_responses()


def test_free_slots_are_counted_right_before_each_hit_is_created(annotating_batch, client, stub):
    h0, h1, *rest = hits_of(annotating_batch)
    ann = Worker.objects.create(source="platform", external_id="ann")

    def platform_worker_takes_h1(params, **kwargs):  # while h0 goes to MTurk
        if params["RequesterAnnotation"].endswith(f"hit={h0.pk}"):
            assignment_create(hit=h1, worker=ann)

    client.meta.events.register(
        "before-parameter-build.mturk.CreateHITWithHITType", platform_worker_takes_h1
    )
    expect_hit_type(stub)
    expect_create_hit(stub, annotating_batch, h0)
    expect_create_hit(stub, annotating_batch, h1, slots=1)  # the slot ann took is not offered
    for hit in rest:
        expect_create_hit(stub, annotating_batch, hit)
    result = mturk_publish(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert result.created == len(rest) + 2
    assert Batch.objects.get(pk=annotating_batch.pk).mturk["max_assignments"] == {str(h1.pk): 1}


def test_request_tokens_repeat_when_resuming_and_change_after_a_sandbox_reset(
    annotating_batch, client, stub
):
    hits = hits_of(annotating_batch)
    first = datetime(2025, 3, 1, 12, tzinfo=UTC)

    def token(hit: HIT, started: datetime) -> str:
        return f"mitl-sandbox-{int(started.timestamp())}-{annotating_batch.pk}-{hit.pk}"

    expect_hit_type(stub)
    expect_create_hit(stub, annotating_batch, hits[0], token=token(hits[0], first))
    for _ in range(RETRY_TRIES):
        stub.add_client_error(
            "create_hit_with_hit_type",
            "ServiceFault",
            "We are sorry",
            http_status_code=500,
            expected_params=create_hit_params(
                annotating_batch, hits[1], token=token(hits[1], first)
            ),
        )
    with pytest.raises(MTurkError, match="Run the publish again to resume"):
        mturk_publish(batch=annotating_batch, client=client, now=first)

    # Resumed an hour later: the same publication sends the same tokens.
    stub.add_response("list_hits", {"NumResults": 0, "HITs": []}, {"MaxResults": 100})
    for hit in hits[1:]:
        expect_create_hit(stub, annotating_batch, hit, token=token(hit, first))
    mturk_publish(batch=annotating_batch, client=client, now=first + timedelta(hours=1))
    stub.assert_no_pending_responses()

    # Reset and published again the same day: MTurk would refuse the old tokens as repeats.
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": remote_hit_id(hit), "ExpireAt": stub_past()}
        )
    mturk_sandbox_reset(batch=annotating_batch, client=client)
    second = first + timedelta(hours=2)
    expect_hit_type(stub)
    for hit in hits:
        expect_create_hit(stub, annotating_batch, hit, token=token(hit, second))
    mturk_publish(batch=annotating_batch, client=client, now=second)
    stub.assert_no_pending_responses()


def test_production_asks_for_worker_history_and_an_https_base_url(
    annotating_batch, client, stub, settings
):
    settings.MTURK_EXTERNAL_BASE_URL = "http://mitl.example.org"
    with pytest.raises(MTurkError, match="production HITs need an HTTPS base URL"):
        mturk_publish(batch=annotating_batch, client=client, production=True)
    settings.MTURK_EXTERNAL_BASE_URL = BASE
    expect_hit_type(stub, production=True)
    for hit in hits_of(annotating_batch):
        expect_create_hit(stub, annotating_batch, hit, production=True)
    result = mturk_publish(batch=annotating_batch, client=client, production=True)
    stub.assert_no_pending_responses()
    assert result.environment == "production"
    assert result.preview_url == f"https://worker.mturk.com/mturk/preview?groupId={GROUP_ID}"
    qualifications = hit_type_request(HitTypeSettings(), sandbox=False)["QualificationRequirements"]
    assert {q["QualificationTypeId"] for q in qualifications} == {
        "000000000000000000L0",
        "00000000000000000040",
        "00000000000000000071",
    }


def test_only_an_annotating_batch_with_hits_is_published(batch, client):
    with pytest.raises(MTurkError, match=r"is draft: only a batch in the annotating state"):
        mturk_publish(batch=batch, client=client)
