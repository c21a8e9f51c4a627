"""The sync through the Stubber: work confirmed by MTurk before the golden policy decides
it, decisions sent once, rejected work re-posted, missing answers, overlapping syncs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.stub import ANY
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import HIT, Assignment, Batch, ItemRole, Verdict
from annotation.mturk.errors import SyncRunning
from annotation.mturk.feedback import MISSING_FEEDBACK
from annotation.mturk.hit_page import mturk_assignment_open
from annotation.mturk.payments import mturk_bonus_send
from annotation.mturk.sync import mturk_sync, mturk_sync_published, mturk_sync_recorded
from annotation.mturk.sync_report import MISSING_GRACE
from annotation.review import assignment_review
from annotation.review_selectors import review_awaiting_mturk, review_queue
from mitl.config import parse_batch_config
from mitl.quality import AUTOMATIC_REJECTION_PREFIX
from pipeline.aggregate import verdicts_aggregate
from pipeline.progress import StageTracker
from pipeline.truth import golden_answers

from .helpers import (
    accept_and_submit,
    expect_listing,
    expect_reject_and_repost,
    listed,
    publish,
)

pytestmark = pytest.mark.django_db


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
    expect_reject_and_repost(
        stub,
        h1,
        "3A12",
        "The check pairs were wrong. 1 pair with a known answer was answered wrongly.",
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
        f"HIT {h0.pk} ({h0.external_id}): MTurk ListAssignmentsForHIT failed (RequestError): "
        f"Hit {h0.external_id} does not exist. (1700000000000)"
    ]
    assert report.approved == ["3A11"]
    assert f"PROBLEM HIT {h0.pk} " in "\n".join(report.lines())


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
    later = forged.deadline + MISSING_GRACE + timedelta(minutes=1)
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
    golden_workers = {answer.worker for answer in golden_answers([annotating_batch.pk], {})}
    assert golden_workers == {str(genuine.worker_id)}  # Dawid-Skene's known labels too


def test_confirmed_work_that_fails_under_approve_or_reject_is_rejected_with_feedback(
    annotating_batch, client, stub
):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    h0, *rest = publish(annotating_batch, client, stub)
    failed = accept_and_submit(h0, "A1W1", "3A01", wrong_golden=True)
    assert (failed.status, failed.flagged) == ("submitted", True)  # not rejected at submit
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    expect_reject_and_repost(stub, h0, "3A01", "1 pair with a known answer was answered wrongly.")
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
    old = now - MISSING_GRACE - timedelta(minutes=1)
    on_h0 = listed(h0, ("3A01", "A1W1", "Submitted"), ("3A02", "A1W2", "Submitted"))
    on_h0[0]["SubmitTime"] = old  # posted straight to externalSubmit, never used our page
    on_h0[1]["SubmitTime"] = now - timedelta(minutes=5)  # its answers may be on their way
    on_h1 = listed(h1, ("3A11", "A1W11", "Submitted"))
    on_h1[0]["SubmitTime"] = old  # opened our page, never sent the answers
    expect_listing(stub, h0, on_h0)
    expect_reject_and_repost(stub, h0, "3A01", MISSING_FEEDBACK)
    expect_listing(stub, h1, on_h1)
    expect_reject_and_repost(stub, h1, "3A11", MISSING_FEEDBACK)
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client, now=now)
    stub.assert_no_pending_responses()
    assert "no answers reached the platform" in MISSING_FEEDBACK.lower()
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


def test_made_up_work_on_the_page_does_not_stop_a_rejected_assignment_being_reposted(
    annotating_batch, client, stub
):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    h0, *rest = publish(annotating_batch, client, stub)  # two slots each
    accept_and_submit(h0, "A1W1", "3A01", wrong_golden=True)
    for n in range(2):  # made-up ids: stored, never listed by MTurk
        accept_and_submit(h0, f"A1FORGED{n}", f"3FORGED{n}")
    expect_listing(stub, h0, listed(h0, ("3A01", "A1W1", "Submitted")))
    expect_reject_and_repost(stub, h0, "3A01", ANY)
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert (report.rejected, report.replaced) == (["3A01"], ["3A01"])
    assert sorted(report.unconfirmed) == ["3FORGED0", "3FORGED1"]
