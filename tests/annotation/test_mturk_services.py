"""MTurk at the ORM edge, against the real boto3 `mturk` client wrapped in botocore's Stubber.

moto does not implement MTurk; the Stubber checks every request against MTurk's API model
and answers with queued responses, so nothing here reaches the network. A test that queues
no response for a call fails on that call.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import boto3
import botocore.session
import pytest
from botocore.credentials import CredentialResolver
from botocore.stub import Stubber
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation import mturk, mturk_services
from annotation.errors import ServiceError
from annotation.handout import assignment_create, hit_assign_next
from annotation.models import HIT, Assignment, Batch, HITItem, ItemRole, Judgement, Verdict, Worker
from annotation.mturk_services import (
    MTurkError,
    SyncRunning,
    hit_page_path,
    mturk_assignment_open,
    mturk_assignment_submit,
    mturk_bonus_send,
    mturk_export,
    mturk_hits_expire,
    mturk_hits_extend,
    mturk_publish,
    mturk_results_import,
    mturk_sandbox_reset,
    mturk_settings_save,
    mturk_sync,
    mturk_sync_published,
    mturk_sync_recorded,
    mturk_worker_block,
)
from annotation.review import assignment_golden_misses, assignment_review
from annotation.selectors import review_awaiting_mturk, review_queue
from annotation.submissions import AnswerInput
from mitl.config import parse_batch_config
from mitl.quality import AUTOMATIC_REJECTION_PREFIX
from mitl.services.aggregate import _golden_answers, verdicts_aggregate
from mitl.services.progress import StageTracker

pytestmark = pytest.mark.django_db

BASE = "https://mitl.example.org"
TYPE_ID = "3TYPE00000000000000000000000001"
GROUP_ID = "3GROUP0000000000000000000000001"


REAL_CLIENT = mturk_services.mturk_client


def no_default_client(**kwargs):
    pytest.fail("a service made its own MTurk client: pass the stubbed one (client=)")


@pytest.fixture(autouse=True)
def _mturk_settings(settings, monkeypatch):
    settings.MTURK_EXTERNAL_BASE_URL = BASE
    monkeypatch.setattr(mturk_services, "RETRY_BASE_SECONDS", 0)  # retries without waiting
    monkeypatch.setattr(mturk_services, "mturk_client", no_default_client)  # never the network


@pytest.fixture
def client():
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        endpoint_url=mturk.SANDBOX_ENDPOINT,
    )


@pytest.fixture
def stub(client):
    with Stubber(client) as stubber:
        yield stubber


def hits_of(batch: Batch) -> list[HIT]:
    return list(batch.hits.order_by("index"))


def remote_hit_id(hit: HIT) -> str:
    return f"3HIT{hit.pk:026d}"


def expect_hit_type(stub: Stubber, *, production: bool = False) -> None:
    request = mturk.hit_type_request(mturk.HitTypeSettings(), sandbox=not production)
    stub.add_response("create_hit_type", {"HITTypeId": TYPE_ID}, request)


class PublicationToken:
    """Equals the UniqueRequestToken of a HIT's CreateHIT in whichever publication."""

    def __init__(self, environment: str, batch: Batch, hit: HIT) -> None:
        self.pattern = re.compile(rf"mitl-{environment}-[0-9]+-{batch.pk}-{hit.pk}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.pattern.fullmatch(other) is not None

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"<token matching {self.pattern.pattern}>"


def create_hit_params(
    batch: Batch,
    hit: HIT,
    *,
    production: bool = False,
    slots: int | None = None,
    token: str | None = None,
) -> dict:
    environment = "production" if production else "sandbox"
    return {
        "HITTypeId": TYPE_ID,
        "MaxAssignments": hit.max_assignments if slots is None else slots,
        "LifetimeInSeconds": 72 * 3600,
        "Question": mturk.external_question_xml(BASE + hit_page_path(hit)),
        "RequesterAnnotation": f"mitl:batch={batch.pk}:hit={hit.pk}",
        "UniqueRequestToken": token or PublicationToken(environment, batch, hit),
    }


def expect_create_hit(stub: Stubber, batch: Batch, hit: HIT, **params) -> None:
    stub.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": remote_hit_id(hit), "HITTypeId": TYPE_ID, "HITGroupId": GROUP_ID}},
        create_hit_params(batch, hit, **params),
    )


def publish(batch: Batch, client, stub: Stubber) -> list[HIT]:
    expect_hit_type(stub)
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()
    return hits_of(batch)


def level_for(item: HITItem, wrong_golden: bool) -> str:
    if item.role == "golden_tn":
        return "yes" if wrong_golden else "no"
    return "yes"


def accept_and_submit(hit: HIT, worker_id: str, assignment_id: str, *, wrong_golden=False):
    """Open the HIT page as MTurk would and submit its answers, as the page does."""
    assignment = mturk_assignment_open(hit=hit, worker_id=worker_id, assignment_id=assignment_id)
    answers = [
        AnswerInput(item_id=item.pk, level=level_for(item, wrong_golden), elapsed_ms=900)
        for item in hit.items.order_by("position")
    ]
    mturk_assignment_submit(assignment=assignment, answers=answers)
    assignment.refresh_from_db()
    return assignment


def listed(hit: HIT, *entries: tuple[str, str, str]) -> list[dict]:
    return [
        {
            "AssignmentId": aid,
            "WorkerId": wid,
            "HITId": hit.external_id,
            "AssignmentStatus": status,
        }
        for aid, wid, status in entries
    ]


def expect_listing(stub: Stubber, hit: HIT, *pages: list[dict]) -> None:
    for number, page in enumerate(pages):
        params = {"HITId": hit.external_id, "MaxResults": 100}
        if number:
            params["NextToken"] = f"page-{number}"
        response = {"NumResults": len(page), "Assignments": page}
        if number + 1 < len(pages):
            response["NextToken"] = f"page-{number + 1}"
        stub.add_response("list_assignments_for_hit", response, params)


# --- publishing -------------------------------------------------------------------------


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
    for _ in range(mturk_services.RETRY_TRIES):
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
    for _ in range(mturk_services.RETRY_TRIES):
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


def test_throttling_and_unavailability_are_retried(annotating_batch, client, stub):
    stub.add_client_error("create_hit_type", "ThrottlingException", "Rate exceeded")
    stub.add_client_error(
        "create_hit_type", "ServiceUnavailable", "Try again", http_status_code=503
    )
    expect_hit_type(stub)
    for hit in hits_of(annotating_batch):
        expect_create_hit(stub, annotating_batch, hit)
    result = mturk_publish(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert result.created == len(hits_of(annotating_batch))


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
    qualifications = mturk.hit_type_request(mturk.HitTypeSettings(), sandbox=False)[
        "QualificationRequirements"
    ]
    assert {q["QualificationTypeId"] for q in qualifications} == {
        "000000000000000000L0",
        "00000000000000000040",
        "00000000000000000071",
    }


def test_only_an_annotating_batch_with_hits_is_published(batch, client):
    with pytest.raises(MTurkError, match=r"is draft: only a batch in the annotating state"):
        mturk_publish(batch=batch, client=client)


def test_settings_are_validated_stored_with_the_cost_and_frozen_once_published(
    annotating_batch, client, stub
):
    with pytest.raises(MTurkError, match="whole cents"):
        mturk_settings_save(batch=annotating_batch, raw={"reward": "0.333"})
    saved = mturk_settings_save(batch=annotating_batch, raw={"reward": "1.00", "locales": "GB"})
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["settings"]["reward"] == "1.00" and saved.locales == ("GB",)
    hits = annotating_batch.hits.count()
    assert state["cost_estimate"]["total"] == str(Decimal("1.20") * hits * 2)
    annotating_batch.hits.filter(index=0).update(external_id="3HITX")
    with pytest.raises(MTurkError, match="can no longer change"):
        mturk_settings_save(batch=annotating_batch, raw={"reward": "2.00"})


def test_credentials_never_reach_logs_errors_or_the_database(annotating_batch, monkeypatch, caplog):
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSECRETKEY"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    client = REAL_CLIENT(production=False)  # boto3's default chain
    assert client._request_signer._credentials.secret_key == secret  # the test means it
    caplog.set_level(logging.DEBUG)
    with Stubber(client) as stub:
        for _ in range(mturk_services.RETRY_TRIES):
            stub.add_client_error("create_hit_type", "ServiceFault", "Internal", 500)
        with pytest.raises(MTurkError) as refusal:
            mturk_publish(batch=annotating_batch, client=client)
    assert "ServiceFault" in str(refusal.value)
    assert secret not in str(refusal.value)
    assert secret not in caplog.text
    assert "retrying" in caplog.text  # the log did record the publish
    assert secret not in json.dumps(Batch.objects.get(pk=annotating_batch.pk).mturk)


def test_missing_credentials_are_explained(annotating_batch):
    session = botocore.session.Session()
    session.register_component("credential_provider", CredentialResolver(providers=[]))
    client = boto3.Session(botocore_session=session).client(
        "mturk", region_name="us-east-1", endpoint_url=mturk.SANDBOX_ENDPOINT
    )
    with pytest.raises(MTurkError, match="no AWS credentials for MTurk: set AWS_ACCESS_KEY_ID"):
        mturk_publish(batch=annotating_batch, client=client)


# --- workers on the HIT page ------------------------------------------------------------


def test_accepting_creates_the_worker_and_the_assignment_once(annotating_batch):
    hit = hits_of(annotating_batch)[0]
    first = mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASG1")
    again = mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASG1")
    assert first.pk == again.pk
    assert (first.external_id, first.worker.source, first.worker.external_id) == (
        "3ASG1",
        "mturk",
        "A1WORKER",
    )
    assert Worker.objects.filter(source="mturk").count() == 1
    with pytest.raises(ServiceError, match="belongs to another HIT or worker"):
        mturk_assignment_open(hit=hit, worker_id="A2OTHER", assignment_id="3ASG1")


def test_a_worker_who_returned_the_hit_and_accepted_again_keeps_one_assignment(
    annotating_batch,
):
    hit = hits_of(annotating_batch)[0]
    first = mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASG1")
    Assignment.objects.filter(pk=first.pk).update(status="expired")
    second = mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASG2")
    assert (second.pk, second.status, second.external_id) == (first.pk, "accepted", "3ASG2")
    accept_and_submit(hit, "A1WORKER", "3ASG2")
    with pytest.raises(ServiceError, match="already submitted this HIT"):
        mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASG3")


def test_a_returned_mturk_assignment_gives_its_slot_to_the_next_worker(annotating_batch):
    hit = hits_of(annotating_batch)[0]  # two slots
    first = mturk_assignment_open(hit=hit, worker_id="A1W1", assignment_id="3A01")
    mturk_assignment_open(hit=hit, worker_id="A1W2", assignment_id="3A02")
    # MTurk handed a third worker the HIT: one of the first two returned it there.
    third = mturk_assignment_open(hit=hit, worker_id="A1W3", assignment_id="3A03")
    assert third.status == "accepted"
    statuses = dict(Assignment.objects.values_list("external_id", "status"))
    assert statuses == {"3A01": "expired", "3A02": "accepted", "3A03": "accepted"}  # oldest
    assert HIT.objects.get(pk=hit.pk).active_assignments == 2

    # The guess was wrong: A1W1 was still at it. Its submit takes the oldest open slot back.
    back = accept_and_submit(hit, "A1W1", "3A01")
    assert (back.pk, back.status) == (first.pk, "submitted")
    assert Assignment.objects.get(external_id="3A02").status == "expired"
    assert HIT.objects.get(pk=hit.pk).active_assignments == 2

    # Submitted work is never given up for a newcomer.
    accept_and_submit(hit, "A1W3", "3A03")
    with pytest.raises(ServiceError, match="already has all 2 assignments"):
        mturk_assignment_open(hit=hit, worker_id="A1W4", assignment_id="3A04")
    assert Assignment.objects.filter(hit=hit, status__in=["submitted"]).count() == 2


def test_a_blocked_worker_is_refused_clearly(annotating_batch):
    Worker.objects.create(source="mturk", external_id="A1BAD", is_blocked=True)
    with pytest.raises(ServiceError, match="blocked from these HITs: please return this HIT"):
        mturk_assignment_open(
            hit=hits_of(annotating_batch)[0], worker_id="A1BAD", assignment_id="3ASG1"
        )
    assert not Assignment.objects.exists()


def test_hits_on_mturk_are_not_handed_to_platform_annotators(annotating_batch):
    annotating_batch.hits.update(external_id=None)
    hits = hits_of(annotating_batch)
    for hit in hits[:-1]:
        HIT.objects.filter(pk=hit.pk).update(external_id=remote_hit_id(hit))
    worker = Worker.objects.create(source="platform", external_id="ann")
    assert hit_assign_next(worker=worker).hit_id == hits[-1].pk  # the one left unpublished


# --- sync -------------------------------------------------------------------------------


def test_sync_approves_rejects_reposts_and_a_second_sync_sends_nothing(
    annotating_batch, client, stub
):
    h0, h1, h2, h3, *rest = publish(annotating_batch, client, stub)
    accept_and_submit(h0, "A1W1", "3A01")
    accept_and_submit(h0, "A1W2", "3A02")
    accept_and_submit(h1, "A1W1", "3A11")
    flagged = accept_and_submit(h1, "A1W3", "3A12", wrong_golden=True)
    assert (flagged.status, flagged.flagged) == ("submitted", True)
    assignment_review(assignment=flagged, approve=False, feedback="The check pairs were wrong.")
    accept_and_submit(h2, "A1W4", "3A21")
    waiting = accept_and_submit(h3, "A1W5", "3A31", wrong_golden=True)
    tn = h1.items.get(role="golden_tn").position + 1

    expect_listing(
        stub,
        h0,
        listed(h0, ("3A01", "A1W1", "Submitted")),
        listed(h0, ("3A02", "A1W2", "Submitted")),
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A02"})
    expect_listing(
        stub, h1, listed(h1, ("3A11", "A1W1", "Submitted"), ("3A12", "A1W3", "Submitted"))
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A11"})
    stub.add_response(
        "reject_assignment",
        {},
        {
            "AssignmentId": "3A12",
            "RequesterFeedback": "The check pairs were wrong. Check pairs with a known answer "
            f"were answered wrongly: pair {tn} does not match its description, but you "
            "answered “100% YES”.",
        },
    )
    stub.add_response(
        "create_additional_assignments_for_hit",
        {},
        {
            "HITId": h1.external_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": "mitl-replace-3A12",
        },
    )
    # 3A22 was submitted on MTurk, but its answers never reached the platform.
    expect_listing(
        stub, h2, listed(h2, ("3A21", "A1W4", "Submitted"), ("3A22", "A1W6", "Submitted"))
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A21"})
    expect_listing(stub, h3, listed(h3, ("3A31", "A1W5", "Submitted")))
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.approved == ["3A01", "3A02", "3A11", "3A21"]
    assert report.rejected == ["3A12"]
    assert report.replaced == ["3A12"]
    assert report.waiting == ["3A31"]
    assert report.missing == ["3A22"]
    assert report.problems == []
    assert any("MISSING 3A22" in line for line in report.lines())
    assert Assignment.objects.get(pk=waiting.pk).status == "submitted"  # still a person's call

    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "A1W1",
            "AssignmentId": "3A01",
            "BonusAmount": "0.25",
            "Reason": "Careful work",
            "UniqueRequestToken": "mitl-bonus-3A01",
        },
    )
    paid = Assignment.objects.get(external_id="3A01")
    assert mturk_bonus_send(assignment=paid, amount="0.25", reason="Careful work", client=client)
    # paid once: a second request sends nothing
    assert not mturk_bonus_send(assignment=paid, amount="0.25", reason="Again", client=client)
    stub.assert_no_pending_responses()

    # Second sync: h0 is settled (not listed); the others are listed, nothing is sent.
    expect_listing(stub, h1, listed(h1, ("3A11", "A1W1", "Approved"), ("3A12", "A1W3", "Rejected")))
    expect_listing(
        stub, h2, listed(h2, ("3A21", "A1W4", "Approved"), ("3A22", "A1W6", "Submitted"))
    )
    expect_listing(stub, h3, listed(h3, ("3A31", "A1W5", "Submitted")))
    for hit in rest:
        expect_listing(stub, hit, [])
    again = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (again.approved, again.rejected, again.replaced) == ([], [], [])
    assert again.hits_settled == 1
    assert again.missing == ["3A22"]  # still reported, still not approved
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["sent"]["3A12"]["decision"] == "rejected"
    assert state["extra"] == {str(h1.pk): 1}
    assert state["bonuses"]["mitl-bonus-3A01"]["amount"] == "0.25"


def test_a_decision_already_made_on_mturk_is_recorded_not_sent(annotating_batch, client, stub):
    h0, *rest = publish(annotating_batch, client, stub)
    accept_and_submit(h0, "A1W1", "3A01", wrong_golden=True)  # flagged here
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Approved")))  # auto-approved there
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.approved == []
    assert report.problems == ["3A01: Approved on MTurk, but submitted here"]
    assert Batch.objects.get(pk=annotating_batch.pk).mturk["sent"]["3A01"]["by"] == "mturk"


def test_a_hit_that_no_longer_exists_is_reported_and_the_others_synced(
    annotating_batch, client, stub
):
    h0, h1, *rest = publish(annotating_batch, client, stub)
    stub.add_client_error(
        "list_assignments_for_hit",
        "RequestError",
        f"Hit {h0.external_id} does not exist. (1700000000000)",
        expected_params={"HITId": h0.external_id, "MaxResults": 100},
    )
    accept_and_submit(h1, "A1W1", "3A11")
    expect_listing(stub, h1, listed(h1, ("3A11", "A1W1", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A11"})
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.problems == [
        f"HIT 0 ({h0.external_id}): MTurk ListAssignmentsForHIT failed (RequestError): "
        f"Hit {h0.external_id} does not exist. (1700000000000)"
    ]
    assert report.approved == ["3A11"]
    assert "PROBLEM HIT 0" in "\n".join(report.lines())


def test_work_from_the_hit_page_counts_only_once_mturk_lists_it(annotating_batch, client, stub):
    h0, h1, *rest = publish(annotating_batch, client, stub)
    genuine = accept_and_submit(h0, "A1W1", "3A01")
    forged = accept_and_submit(h0, "A1MADEUP", "3AMADEUP")  # made-up ids on the public page
    impostor = accept_and_submit(h1, "A1FAKE", "3A11")
    for assignment in (genuine, forged, impostor):  # stored and checked, not decided
        assert (assignment.status, assignment.golden_passed) == ("submitted", True)

    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    expect_listing(stub, h1, listed(h1, ("3A11", "A1REAL", "Submitted")))  # another worker
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.approved == ["3A01"]
    assert report.unconfirmed == ["3AMADEUP"]
    assert report.problems == ["3A11: MTurk names worker A1REAL, the platform A1FAKE"]
    assert "not on MTurk yet: 3AMADEUP" in "\n".join(report.lines())
    approved = Assignment.objects.filter(hit__batch=annotating_batch, status="approved")
    assert list(approved.values_list("external_id", flat=True)) == ["3A01"]  # aggregated

    # MTurk never lists it, and its time is long over: rejected here, its slot freed.
    later = forged.deadline + mturk_services.MISSING_GRACE + timedelta(minutes=1)
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Approved")))
    expect_listing(stub, h1, listed(h1, ("3A11", "A1REAL", "Submitted")))
    for hit in rest:
        expect_listing(stub, hit, [])
    again = mturk_sync(batch=annotating_batch, client=client, now=later)
    stub.assert_no_pending_responses()
    assert (again.approved, again.dropped, again.unconfirmed) == ([], ["3AMADEUP"], [])
    assert Assignment.objects.get(pk=forged.pk).status == "rejected"
    assert HIT.objects.get(pk=h0.pk).active_assignments == 1


def test_nobody_approves_mturk_work_before_the_sync_finds_it_on_mturk(
    annotating_batch, client, stub
):
    h0, *rest = publish(annotating_batch, client, stub)
    flagged = accept_and_submit(h0, "A1W1", "3A01", wrong_golden=True)
    forged = accept_and_submit(h0, "A1MADEUP", "3AMADEUP", wrong_golden=True)
    assert flagged.awaits_mturk and forged.awaits_mturk
    assert review_queue() == []  # not offered to a reviewer...
    assert review_awaiting_mturk() == 2  # ...but counted, so the page can say why
    for assignment in (flagged, forged):
        with pytest.raises(ServiceError) as refused:
            assignment_review(assignment=assignment, approve=True)
        message = str(refused.value)
        assert f"MTurk has not confirmed assignment {assignment.external_id} yet" in message
        assert f"Run `mturk_sync {annotating_batch.pk}` first" in message
    assert set(Assignment.objects.values_list("status", flat=True)) == {"submitted"}

    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (report.waiting, report.unconfirmed) == (["3A01"], ["3AMADEUP"])
    confirmed = Assignment.objects.get(pk=flagged.pk)
    assert confirmed.confirmed_at is not None and not confirmed.awaits_mturk
    assert [a.pk for a in review_queue()] == [flagged.pk]
    assert review_awaiting_mturk() == 1
    assert assignment_review(assignment=confirmed, approve=True).status == "approved"
    with pytest.raises(ServiceError, match="MTurk has not confirmed assignment 3AMADEUP yet"):
        assignment_review(assignment=forged, approve=True)


def test_unconfirmed_mturk_work_never_reaches_the_verdicts(annotating_batch, client, stub):
    h0, *rest = publish(annotating_batch, client, stub)
    genuine = accept_and_submit(h0, "A1W1", "3A01")
    forged = accept_and_submit(h0, "A1MADEUP", "3AMADEUP")
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    for hit in rest:
        expect_listing(stub, hit, [])
    assert mturk_sync(batch=annotating_batch, client=client).approved == ["3A01"]
    # Approved before approval needed MTurk's confirmation (the old review page allowed it).
    Assignment.objects.filter(pk=forged.pk).update(status="approved", reviewed_at=timezone.now())

    config = parse_batch_config(annotating_batch.config)
    tracker = StageTracker(batch=annotating_batch, stage="aggregating")
    verdicts_aggregate(batch=annotating_batch, config=config, tracker=tracker)
    tasks = h0.items.filter(role=ItemRole.TASK).values_list("candidate_id", flat=True)
    counted = Verdict.objects.filter(candidate_id__in=tasks).values_list("n_judgements", flat=True)
    assert set(counted) == {1}  # the genuine answer only
    golden_workers = {answer.worker for answer in _golden_answers(annotating_batch, {})}
    assert golden_workers == {str(genuine.worker_id)}  # Dawid-Skene's known labels too


def test_confirmed_work_that_fails_under_approve_or_reject_is_rejected_with_feedback(
    annotating_batch, client, stub
):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    h0, *rest = publish(annotating_batch, client, stub)
    failed = accept_and_submit(h0, "A1W1", "3A01", wrong_golden=True)
    assert (failed.status, failed.flagged) == ("submitted", True)  # not rejected at submit
    tn = h0.items.get(role="golden_tn").position + 1
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    stub.add_response(
        "reject_assignment",
        {},
        {
            "AssignmentId": "3A01",
            "RequesterFeedback": "Check pairs with a known answer were answered wrongly: "
            f"pair {tn} does not match its description, but you answered “100% YES”.",
        },
    )
    stub.add_response(
        "create_additional_assignments_for_hit",
        {},
        {
            "HITId": h0.external_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": "mitl-replace-3A01",
        },
    )
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (report.rejected, report.replaced) == (["3A01"], ["3A01"])
    rejected = Assignment.objects.get(pk=failed.pk)
    assert rejected.status == "rejected"
    assert rejected.feedback.startswith(AUTOMATIC_REJECTION_PREFIX)
    assert rejected.reviewed_by is None


def test_a_submission_without_answers_is_rejected_on_mturk_after_the_grace_period(
    annotating_batch, client, stub
):
    h0, h1, *rest = publish(annotating_batch, client, stub)
    opened = mturk_assignment_open(hit=h1, worker_id="A1W11", assignment_id="3A11")
    now = timezone.now()
    old = now - mturk_services.MISSING_GRACE - timedelta(minutes=1)
    on_h0 = listed(h0, ("3A01", "A1W1", "Submitted"), ("3A02", "A1W2", "Submitted"))
    on_h0[0]["SubmitTime"] = old  # posted straight to externalSubmit, never used our page
    on_h0[1]["SubmitTime"] = now - timedelta(minutes=5)  # its answers may be on their way
    on_h1 = listed(h1, ("3A11", "A1W11", "Submitted"))
    on_h1[0]["SubmitTime"] = old  # opened our page, never sent the answers
    expect_listing(stub, h0, on_h0)
    stub.add_response(
        "reject_assignment",
        {},
        {"AssignmentId": "3A01", "RequesterFeedback": mturk.MISSING_FEEDBACK},
    )
    stub.add_response(
        "create_additional_assignments_for_hit",
        {},
        {
            "HITId": h0.external_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": "mitl-replace-3A01",
        },
    )
    expect_listing(stub, h1, on_h1)
    stub.add_response(
        "reject_assignment",
        {},
        {"AssignmentId": "3A11", "RequesterFeedback": mturk.MISSING_FEEDBACK},
    )
    stub.add_response(
        "create_additional_assignments_for_hit",
        {},
        {
            "HITId": h1.external_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": "mitl-replace-3A11",
        },
    )
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client, now=now)
    stub.assert_no_pending_responses()
    assert "no answers reached the platform" in mturk.MISSING_FEEDBACK.lower()
    assert report.missing_rejected == ["3A01", "3A11"] == report.rejected
    assert report.missing == ["3A02"]
    assert report.approved == []
    lines = "\n".join(report.lines())
    assert "REJECTED 3A01 on MTurk: submitted there over 1 hour ago, but no answers" in lines
    assert "MISSING 3A02" in lines
    assert Assignment.objects.get(pk=opened.pk).status == "expired"  # no late answers now
    sent = Batch.objects.get(pk=annotating_batch.pk).mturk["sent"]
    assert sent["3A01"]["decision"] == sent["3A11"]["decision"] == "rejected"


def test_two_syncs_of_one_batch_never_run_at_once(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    overlapping: list[list[str]] = []

    def second_sync(**kwargs):  # e.g. the next beat, while this sync waits on MTurk
        if not overlapping:
            overlapping.append([])
            overlapping[0] = mturk_sync_recorded(batch=annotating_batch, client=client)

    client.meta.events.register("before-parameter-build.mturk.ListAssignmentsForHIT", second_sync)
    for hit in hits:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()  # every listing went to the first sync
    ((line,),) = overlapping
    assert line.startswith(f"a sync of batch {annotating_batch.pk} is already running (since ")
    assert report.hits_checked == len(hits)
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["report"]["hits_checked"] == len(hits)  # the second wrote no report
    assert "sync_lease" not in state  # given back

    # A lease that a killed sync never gave back lapses; a live one refuses.
    lease = {"token": "x", "since": "2025-03-01T12:00:00+00:00"}
    for until, runs in (("2025-03-01T12:31:00+00:00", True), ("2999-01-01T00:00:00+00:00", False)):
        Batch.objects.filter(pk=annotating_batch.pk).update(
            mturk={**state, "sync_lease": {**lease, "until": until}}
        )
        if runs:
            for hit in hits:
                expect_listing(stub, hit, [])
            mturk_sync(batch=annotating_batch, client=client)
        else:
            with pytest.raises(SyncRunning, match="already running"):
                mturk_sync(batch=annotating_batch, client=client)
        stub.assert_no_pending_responses()


def test_the_periodic_sync_covers_every_published_batch(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    for hit in hits:
        expect_listing(stub, hit, [])
    reports = mturk_sync_published(clients={"sandbox": client})
    stub.assert_no_pending_responses()
    assert list(reports) == [annotating_batch.pk]
    assert reports[annotating_batch.pk][0] == f"HITs checked: {len(hits)} (settled, skipped: 0)"


def test_the_sync_task_says_when_a_batch_is_not_on_mturk(annotating_batch, eager_celery):
    from annotation.tasks import mturk_sync as task

    message = f"batch {annotating_batch.pk} is not published on MTurk"
    assert task.delay(annotating_batch.pk).get() == {annotating_batch.pk: [f"PROBLEM {message}"]}
    report = Batch.objects.get(pk=annotating_batch.pk).mturk["report"]
    assert report["problems"] == [message]  # the admin page shows it


def test_the_periodic_sync_leaves_batches_of_the_offline_path_alone(annotating_batch, client, stub):
    annotating_batch.hits.filter(index=0).update(external_id="3HITFROMCSV")  # imported results
    assert mturk_sync_published(clients={"sandbox": client}) == {}


# --- time, blocks, the sandbox ----------------------------------------------------------


def test_hits_are_extended_or_expired(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    now = datetime(2025, 3, 1, 12, tzinfo=UTC)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit",
            {},
            {"HITId": hit.external_id, "ExpireAt": now + timedelta(hours=24)},
        )
    assert mturk_hits_extend(batch=annotating_batch, hours=24, client=client, now=now) == len(hits)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit.external_id, "ExpireAt": stub_past()}
        )
    assert mturk_hits_expire(batch=annotating_batch, client=client) == len(hits)
    stub.assert_no_pending_responses()


def stub_past() -> datetime:
    return mturk_services.EXPIRED_AT


def test_blocking_a_worker_blocks_it_on_mturk_and_here(annotating_batch, client, stub):
    hit = hits_of(annotating_batch)[0]
    assignment = mturk_assignment_open(hit=hit, worker_id="A1SPAM", assignment_id="3ASG1")
    stub.add_response("create_worker_block", {}, {"WorkerId": "A1SPAM", "Reason": "Random answers"})
    mturk_worker_block(
        worker=assignment.worker, reason="Random answers", production=False, client=client
    )
    stub.assert_no_pending_responses()
    assert Worker.objects.get(external_id="A1SPAM").is_blocked
    assert Assignment.objects.get(pk=assignment.pk).status == "expired"  # its open work freed
    with pytest.raises(MTurkError, match="say why"):
        mturk_worker_block(worker=assignment.worker, reason=" ", production=False, client=client)


def test_a_sandbox_publication_is_reset_before_production(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    accept_and_submit(hits[0], "A1TESTER", "3ASG1")
    with pytest.raises(MTurkError, match="published on the sandbox: reset it first"):
        mturk_publish(batch=annotating_batch, client=client, production=True)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit.external_id, "ExpireAt": stub_past()}
        )
    assert mturk_sandbox_reset(batch=annotating_batch, client=client) == 1
    stub.assert_no_pending_responses()
    assert not Judgement.objects.exists()
    assert not annotating_batch.hits.filter(external_id__isnull=False).exists()
    assert list(Batch.objects.get(pk=annotating_batch.pk).mturk) == ["settings"]  # kept
    assert set(HIT.objects.values_list("active_assignments", flat=True)) == {0}


# --- the offline path -------------------------------------------------------------------


def results_from_export(input_csv: str, plans: list[tuple[str, str, str, bool]]) -> str:
    """Fill MTurk's results CSV the way its web UI would, for the first HITs of the export."""
    rows = list(csv.DictReader(io.StringIO(input_csv)))
    out = io.StringIO()
    header = [
        "HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime",
        "SubmitTime", *[f"Input.{key}" for key in rows[0]], "Answer.answers", "Answer.hit_id",
        "Approve", "Reject",
    ]  # fmt: skip
    writer = csv.DictWriter(out, header)
    writer.writeheader()
    for row, (hit_remote, assignment_id, worker_id, wrong_golden) in zip(rows, plans, strict=False):
        answers = []
        n = 1
        while row.get(f"item_{n}"):
            item = HITItem.objects.get(pk=int(row[f"item_{n}"]))
            answers.append(
                {"item": item.pk, "level": level_for(item, wrong_golden), "elapsed_ms": 700}
            )
            n += 1
        writer.writerow(
            {
                "HITId": hit_remote,
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "AssignmentStatus": "Submitted",
                "AcceptTime": "Thu Oct 09 07:30:20 PDT 2025",
                "SubmitTime": "Thu Oct 09 07:41:02 PDT 2025",
                **{f"Input.{key}": value for key, value in row.items()},
                "Answer.answers": json.dumps(answers),
                "Answer.hit_id": row["hit_id"],
            }
        )
    return out.getvalue()


def with_row(text: str, changes: dict[str, str]) -> str:
    """Append a copy of the first result row with some cells changed."""
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    out = io.StringIO()
    writer = csv.DictWriter(out, reader.fieldnames)
    writer.writeheader()
    writer.writerows([*rows, {**rows[0], **changes}])
    return out.getvalue()


def test_export_writes_one_row_per_hit_with_signed_image_links(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    rows = list(csv.DictReader(io.StringIO(files.input_csv)))
    hits = hits_of(annotating_batch)
    assert (files.hits, files.skipped, len(rows)) == (len(hits), 0, len(hits))
    first = hits[0].items.order_by("position")
    assert [int(rows[0][f"item_{n + 1}"]) for n in range(first.count())] == [
        item.pk for item in first
    ]
    assert rows[0]["image_url_1"].startswith(f"{BASE}/mturk/images/{first[0].pk}/")
    assert rows[0]["caption_1"] == first[0].caption.text
    assert "golden" not in files.input_csv and "golden" not in files.layout_html.lower()


def test_imported_results_go_through_the_submit_service_once(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    text = results_from_export(
        files.input_csv,
        [("3HITOFF0", "3AOFF0", "A1OFF1", False), ("3HITOFF1", "3AOFF1", "A1OFF2", True)],
    )
    text = with_row(text, {"Input.hit_id": "999999", "AssignmentId": "3AOFFBAD"})
    report = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")
    assert (report.imported, report.already) == (2, 0)
    assert report.statuses == {"approved": 1, "submitted": 1}  # golden pass / flagged
    assert report.errors == [
        f"results.csv:4: HIT 999999 is not a HIT of batch {annotating_batch.pk}"
    ]
    approved = Assignment.objects.get(external_id="3AOFF0")
    assert approved.hit.external_id == "3HITOFF0"
    assert approved.worker.external_id == "A1OFF1"
    assert approved.submitted_at == datetime(2025, 10, 9, 14, 41, 2, tzinfo=UTC)
    assert approved.judgements.count() == approved.hit.items.count()
    assert report.decisions == {"3AOFF0": (True, ""), "3AOFF1": None}

    judgements = Judgement.objects.count()
    again = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")
    assert (again.imported, again.already) == (0, 2)
    assert Judgement.objects.count() == judgements


def test_mturks_results_csv_confirms_work_the_hit_page_stored(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    h0 = hits_of(annotating_batch)[0]
    HIT.objects.filter(pk=h0.pk).update(external_id="3HITOFF0")  # created in MTurk's web UI
    stored = accept_and_submit(h0, "A1OFF1", "3AOFF0")
    assert (stored.status, stored.awaits_mturk) == ("submitted", True)
    plans = [("3HITOFF0", "3AOFF0", "A1OFF1", False), ("3HITOFF1", "3AOFF1", "A1OFF2", True)]
    text = results_from_export(files.input_csv, plans)

    report = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")

    assert (report.imported, report.already, report.errors) == (1, 1, [])
    confirmed = Assignment.objects.get(pk=stored.pk)
    assert confirmed.confirmed_at is not None
    assert confirmed.status == "approved"  # MTurk vouches for it: the batch's policy decides
    assert report.decisions["3AOFF0"] == (True, "")
    flagged = Assignment.objects.get(external_id="3AOFF1")  # imported: confirmed at once
    assert (flagged.status, flagged.awaits_mturk) == ("submitted", False)
    assert [a.pk for a in review_queue()] == [flagged.pk]
    assert assignment_review(assignment=flagged, approve=True).status == "approved"


def test_imported_work_rejected_by_the_golden_policy_gets_feedback(annotating_batch):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    files = mturk_export(batch=annotating_batch)
    text = results_from_export(files.input_csv, [("3HITOFF0", "3AOFF0", "A1OFF1", True)])
    report = mturk_results_import(batch=annotating_batch, text=text, source="r.csv")
    approve, feedback = report.decisions["3AOFF0"]
    assignment = Assignment.objects.get(external_id="3AOFF0")
    (miss,) = assignment_golden_misses(assignment_id=assignment.pk)
    assert not approve
    assert f"pair {miss.position} does not match its description" in feedback


# --- the commands -----------------------------------------------------------------------


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def default_client(client, stub, monkeypatch):
    """Hand the stubbed client to services called without `client=` (the commands)."""
    monkeypatch.setattr(mturk_services, "mturk_client", lambda **kwargs: client)
    return client


def test_the_publish_command_prints_the_cost_then_publishes(annotating_batch, default_client, stub):
    hits = hits_of(annotating_batch)
    out = run("mturk_publish", str(annotating_batch.pk), "--estimate-only")
    assignments = len(hits) * 2
    assert out == (
        f"batch {annotating_batch.pk}: {len(hits)} HITs × 2 assignments at $0.50 = "
        f"${Decimal('0.50') * assignments} + MTurk commission ${Decimal('0.10') * assignments} "
        f"(20%) = ${Decimal('0.60') * assignments}\n"
    )
    expect_hit_type(stub)
    for hit in hits:
        expect_create_hit(stub, annotating_batch, hit)
    out = run("mturk_publish", str(annotating_batch.pk))
    stub.assert_no_pending_responses()
    assert f"published on the sandbox: {len(hits)} HITs now, 0 before" in out
    assert (
        f"workers see them at https://workersandbox.mturk.com/mturk/preview?groupId={GROUP_ID}"
        in out
    )


def test_the_publish_command_turns_refusals_into_clear_errors(
    annotating_batch, small_config, default_client, monkeypatch
):
    from mitl.services.pipeline import batch_create

    draft = batch_create(dataset=annotating_batch.dataset, name="draft", raw_config=small_config)
    with pytest.raises(CommandError, match="is draft: only a batch in the annotating state"):
        run("mturk_publish", str(draft.pk))
    with pytest.raises(CommandError, match="no batch 999999"):
        run("mturk_publish", "999999")
    with pytest.raises(CommandError, match="--hit-settings is not JSON"):
        run("mturk_publish", str(annotating_batch.pk), "--hit-settings", "{reward: 1}")
    with pytest.raises(CommandError, match=r"at least \$0.01"):
        run("mturk_publish", str(annotating_batch.pk), "--hit-settings", '{"reward": "0"}')
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="not published"):
        run("mturk_publish", str(annotating_batch.pk), "--production")


def test_the_sync_command_reports_and_pays_bonuses(annotating_batch, client, stub, default_client):
    h0, *rest = publish(annotating_batch, client, stub)
    accept_and_submit(h0, "A1W1", "3A01")
    expect_listing(
        stub, h0, listed(h0, ("3A01", "A1W1", "Submitted"), ("3A09", "A1W9", "Submitted"))
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    for hit in rest:
        expect_listing(stub, hit, [])
    stub.add_response("send_bonus", {}, None)
    out = run("mturk_sync", str(annotating_batch.pk), "--bonus", "3A01", "0.10", "--reason", "Fast")
    stub.assert_no_pending_responses()
    assert "approved on MTurk: 1, rejected: 0, re-posted: 0, waiting for review here: 0" in out
    assert "MISSING 3A09: submitted on MTurk, but its answers never reached the platform" in out
    assert "bonus $0.10 for 3A01: sent" in out


def test_the_offline_commands_export_and_import_with_file_and_line_errors(
    annotating_batch, tmp_path
):
    out = run("mturk_export", str(annotating_batch.pk), "--out", str(tmp_path))
    hits = len(hits_of(annotating_batch))
    input_csv = tmp_path / f"batch-{annotating_batch.pk}-input.csv"
    assert out.startswith(f"{hits} HITs → {input_csv}")
    assert "<crowd-form>" in (tmp_path / f"batch-{annotating_batch.pk}-layout.html").read_text()
    text = results_from_export(input_csv.read_text(), [("3HITOFF0", "3AOFF0", "A1OFF1", False)])
    results = tmp_path / "results.csv"
    results.write_text(with_row(text, {"Input.hit_id": "999999", "AssignmentId": "3AOFF9"}))
    decisions = tmp_path / "decisions.csv"
    with pytest.raises(CommandError) as refusal:
        run(
            "mturk_import_results",
            str(annotating_batch.pk),
            str(results),
            "--decisions",
            str(decisions),
        )
    assert str(refusal.value) == (
        f"1 rows not imported:\n{results}:3: HIT 999999 is not a HIT of batch {annotating_batch.pk}"
    )
    rows = {row["AssignmentId"]: row for row in csv.DictReader(io.StringIO(decisions.read_text()))}
    assert rows["3AOFF0"]["Approve"] == "x"
    assert Assignment.objects.get(external_id="3AOFF0").status == "approved"
