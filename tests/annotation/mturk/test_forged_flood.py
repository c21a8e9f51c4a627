"""Made-up MTurk ids on the public HIT page: they never erase a genuine worker's work, their
rows stay bounded per HIT and per client, and MTurk itself is asked before a newcomer waits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from annotation.models import HIT, Assignment, Judgement, Worker
from annotation.mturk import verify
from annotation.mturk.errors import TryLater
from annotation.mturk.hit_page import UNVERIFIED_SPARE, mturk_assignment_open
from annotation.mturk.links import hit_page_path
from annotation.mturk.sync import mturk_sync
from annotation.mturk.verify import unverified_pool

from .helpers import accept_and_submit, expect_listing, listed, publish

pytestmark = pytest.mark.django_db

FORGED = 16  # the attack as reported: 16 made-up (assignmentId, workerId) pairs


@pytest.fixture(autouse=True)
def _fresh_turns(monkeypatch):
    cache.clear()  # verification turns and page limits live in the cache
    # A flood on a slow machine may take seconds: nothing in it is old enough to ask about.
    monkeypatch.setattr(verify, "VERIFY_AFTER", timedelta(minutes=5))
    yield
    cache.clear()


def _flood(hit: HIT, count: int, prefix: str = "F") -> tuple[list[Assignment], int]:
    """Open and submit `count` made-up pairs; return the stored ones and the refused count."""
    stored, refused = [], 0
    for n in range(count):
        try:
            stored.append(accept_and_submit(hit, f"A1{prefix}ORGED{n}", f"3{prefix}ORGED{n}"))
        except TryLater:
            refused += 1
    return stored, refused


def _judgements(assignments: list[Assignment]) -> dict[int, int]:
    return {a.pk: Judgement.objects.filter(assignment=a).count() for a in assignments}


def test_a_forged_flood_never_erases_genuine_work(annotating_batch, client, stub):
    h0, *rest = publish(annotating_batch, client, stub)
    genuine = [accept_and_submit(h0, f"A1REAL{n}", f"3REAL{n}") for n in range(2)]
    answers = _judgements(genuine)
    assert all(answers.values())

    stored, refused = _flood(h0, FORGED)

    bound = h0.max_assignments + UNVERIFIED_SPARE
    assert len(stored) == bound - len(genuine)  # the pool fills up to its bound
    assert refused == FORGED - len(stored)  # then newcomers wait: nothing is deleted
    assert _judgements(genuine) == answers
    assert Assignment.objects.filter(hit=h0).count() == bound
    assert Worker.objects.filter(source="mturk").count() == bound

    # The sync finds the genuine work on MTurk: confirmed and decided; the made-up stays out.
    listing = listed(h0, *[(a.external_id, a.worker.external_id, "Submitted") for a in genuine])
    expect_listing(stub, h0, listing)
    for assignment in genuine:
        stub.add_response("approve_assignment", {}, {"AssignmentId": assignment.external_id})
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert sorted(report.approved) == ["3REAL0", "3REAL1"]
    assert len(report.unconfirmed) == len(stored)
    assert not Assignment.objects.filter(pk__in=[a.pk for a in stored], confirmed_at__isnull=False)


def _not_found(stub, assignment_id: str) -> None:
    stub.add_client_error(
        "get_assignment",
        service_error_code="RequestError",
        service_message=f"Assignment {assignment_id} does not exist.",
        http_status_code=400,
        expected_params={"AssignmentId": assignment_id},
    )


def _found(stub, hit: HIT, assignment_id: str, worker_id: str) -> None:
    entry = {
        "AssignmentId": assignment_id,
        "WorkerId": worker_id,
        "HITId": hit.external_id,
        "AssignmentStatus": "Submitted",
    }
    stub.add_response("get_assignment", {"Assignment": entry}, {"AssignmentId": assignment_id})


def test_a_full_hit_asks_mturk_and_lets_the_newcomer_in(annotating_batch, client, stub):
    h0, *_ = publish(annotating_batch, client, stub)
    slow = accept_and_submit(h0, "A1SLOW", "3SLOW")  # genuine, not yet synced
    stored, _ = _flood(h0, FORGED)
    later = timezone.now() + verify.VERIFY_AFTER + timedelta(seconds=1)
    _found(stub, h0, "3SLOW", "A1SLOW")
    # Oldest first: MTurk has one made-up id for another worker, knows none of the rest.
    _found(stub, h0, stored[0].external_id, "A1SOMEONEELSE")
    for assignment in stored[1:]:
        _not_found(stub, assignment.external_id)

    newcomer = mturk_assignment_open(
        hit=h0, worker_id="A1NEW", assignment_id="3NEW", now=later, client=client
    )
    stub.assert_no_pending_responses()

    assert newcomer.status == "accepted"
    checks = dict(Assignment.objects.filter(hit=h0).values_list("external_id", "mturk_check"))
    assert checks["3SLOW"] == "" and Assignment.objects.get(pk=slow.pk).confirmed_at is not None
    assert checks[stored[0].external_id] == "denied"
    assert {checks[a.external_id] for a in stored[1:]} == {"unknown"}
    assert unverified_pool(h0).count() == 0
    # Everything is kept: the answers of work MTurk did not know stay, set apart.
    assert all(_judgements(stored).values())


def test_mturk_out_of_reach_changes_nothing_and_the_newcomer_waits(annotating_batch, client, stub):
    h0, *_ = publish(annotating_batch, client, stub)
    stored, _ = _flood(h0, FORGED)
    later = timezone.now() + verify.VERIFY_AFTER + timedelta(seconds=1)
    stub.add_client_error(
        "get_assignment", service_error_code="ServiceUnavailable", http_status_code=503
    )

    with pytest.raises(TryLater) as refused:
        mturk_assignment_open(
            hit=h0, worker_id="A1NEW", assignment_id="3NEW", now=later, client=client
        )
    stub.assert_no_pending_responses()  # one question, then it stopped asking
    assert refused.value.retry_after > 0
    assert unverified_pool(h0).count() == len(stored)
    # Asked once per interval: a second newcomer right away asks MTurk nothing.
    with pytest.raises(TryLater):
        mturk_assignment_open(
            hit=h0, worker_id="A1NEW2", assignment_id="3NEW2", now=later, client=client
        )


def test_work_mturk_did_not_know_at_first_is_still_confirmed_when_listed(
    annotating_batch, client, stub
):
    h0, *rest = publish(annotating_batch, client, stub)
    late = accept_and_submit(h0, "A1LATE", "3LATE")  # finished on MTurk minutes later
    _flood(h0, FORGED)
    later = timezone.now() + verify.VERIFY_AFTER + timedelta(seconds=1)
    for assignment in unverified_pool(h0).order_by("submitted_at", "pk"):
        _not_found(stub, assignment.external_id)
    mturk_assignment_open(hit=h0, worker_id="A1NEW", assignment_id="3NEW", now=later, client=client)
    assert Assignment.objects.get(pk=late.pk).mturk_check == "unknown"

    expect_listing(stub, h0, listed(h0, ("3LATE", "A1LATE", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3LATE"})
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.approved == ["3LATE"]
    assert Assignment.objects.get(pk=late.pk).status == "approved"


def _page(hit: HIT, assignment_id: str, worker_id: str) -> str:
    query = (
        f"assignmentId={assignment_id}&workerId={worker_id}&hitId={hit.external_id}"
        "&turkSubmitTo=https://workersandbox.mturk.com"
    )
    return f"{hit_page_path(hit)}?{query}"


def _rate(settings, rate: str) -> None:
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**rates, "mturk-new-assignment": rate},
    }


def test_one_client_address_opens_few_new_assignments(annotating_batch, client, stub, settings):
    _rate(settings, "3/hour")
    h0, h1, *_ = publish(annotating_batch, client, stub)
    browser = Client(REMOTE_ADDR="203.0.113.7")
    for n in range(3):
        assert browser.get(_page(h0, f"3FLOOD{n}", f"A1FLOOD{n}")).status_code == 200
    refused = browser.get(_page(h1, "3FLOOD9", "A1FLOOD9"))
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert not Assignment.objects.filter(external_id="3FLOOD9").exists()  # nothing stored
    # A page already opened still loads; another address is counted apart.
    assert browser.get(_page(h0, "3FLOOD0", "A1FLOOD0")).status_code == 200
    other = Client(REMOTE_ADDR="198.51.100.4")
    assert other.get(_page(h1, "3REAL", "A1REAL")).status_code == 200


def test_a_full_hit_answers_429_on_the_page(annotating_batch, client, stub):
    h0, *_ = publish(annotating_batch, client, stub)
    _flood(h0, FORGED)  # just submitted: too fresh to ask MTurk about

    response = Client(REMOTE_ADDR="198.51.100.4").get(_page(h0, "3NEW", "A1NEW"))

    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "try again in a minute" in response.content.decode()
    assert not Assignment.objects.filter(external_id="3NEW").exists()
