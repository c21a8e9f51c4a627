"""Fair pay on MTurk through the Stubber: top-ups to the minimum wage paid with SendBonus
(once each, beside a manual bonus), the warning at publication, and `mturk_wages`."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import call_command

from annotation.models import HIT, Assignment, Batch, items_shown_to
from annotation.mturk import payments
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.mturk.payments import mturk_bonus_send
from annotation.mturk.publish import mturk_publish
from annotation.mturk.sync import mturk_sync
from annotation.mturk.topups import TopUpResult, mturk_topups_pay
from annotation.mturk.wages import NO_ESTIMATE
from annotation.submissions import AnswerInput

from ..crowd_factories import batch_make, hit_make
from ..wage_factories import approved_work, platform_worker, split_ms
from .helpers import expect_create_hit, expect_hit_type, expect_listing, hits_of, listed, publish

pytestmark = pytest.mark.django_db

REASON_3A02 = (
    "Top-up to our minimum pay of $15.00 per hour: your measured time on this HIT was "
    "150 seconds, so its reward of $0.50 made $12.00 per hour. This bonus of $0.13 brings it "
    "to the minimum. Thank you for your work."
)
REASON_3A03 = (
    "Top-up to our minimum pay of $15.00 per hour: your measured time on this HIT was "
    "135 seconds, so its reward of $0.50 made $13.33 per hour. This bonus of $0.07 brings it "
    "to the minimum. Thank you for your work."
)


def submit_taking(hit: HIT, worker_id: str, assignment_id: str, seconds: int) -> Assignment:
    """Open the HIT page as MTurk would and submit right answers whose times add up."""
    assignment = mturk_assignment_open(hit=hit, worker_id=worker_id, assignment_id=assignment_id)
    items = list(hit.items.filter(items_shown_to(assignment.pk)).order_by("position"))
    level = {"golden_tp": "yes", "golden_tn": "no", "task": "yes"}
    answers = [
        AnswerInput(item_id=item.pk, level=level[item.role], elapsed_ms=ms)
        for item, ms in zip(items, split_ms(seconds * 1000, len(items)), strict=True)
    ]
    mturk_assignment_submit(assignment=assignment, answers=answers)
    return assignment


@pytest.fixture
def approved_on_mturk(annotating_batch, client, stub) -> Batch:
    """Published; A1W1 took 90 s and A1W2 150 s on HIT 0, A1W3 135 s on HIT 1; the sync
    confirmed and approved all three."""
    h0, h1, *rest = publish(annotating_batch, client, stub)
    submit_taking(h0, "A1W1", "3A01", 90)
    submit_taking(h0, "A1W2", "3A02", 150)
    submit_taking(h1, "A1W3", "3A03", 135)
    expect_listing(
        stub, h0, listed(h0, ("3A01", "A1W1", "Submitted"), ("3A02", "A1W2", "Submitted"))
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A02"})
    expect_listing(stub, h1, listed(h1, ("3A03", "A1W3", "Submitted")))
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A03"})
    for hit in rest:
        expect_listing(stub, hit, [])
    report = mturk_sync(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert report.approved == ["3A01", "3A02", "3A03"]
    return annotating_batch


def expect_topup(stub, worker_id: str, assignment_id: str, amount: str, reason: str) -> None:
    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": worker_id,
            "AssignmentId": assignment_id,
            "BonusAmount": amount,
            "Reason": reason,
            "UniqueRequestToken": f"mitl-topup-{assignment_id}",
        },
    )


def expect_bonus_listing(stub, assignment_id: str, payments: list[dict]) -> None:
    stub.add_response(
        "list_bonus_payments",
        {"BonusPayments": payments, "NumResults": len(payments)},
        {"AssignmentId": assignment_id, "MaxResults": 100},
    )


def crash_after_mturk_answers(monkeypatch, token: str) -> None:
    """Make the write that notes `token` as paid fail, as if the process died right there."""
    real = payments.state_update

    def flaky(batch_id, mutate):
        trial = dict(Batch.objects.get(pk=batch_id).mturk or {})
        mutate(trial)
        if token in trial.get("bonuses", {}):
            raise RuntimeError("the worker process died")
        return real(batch_id, mutate)

    monkeypatch.setattr(payments, "state_update", flaky)


def test_top_ups_are_paid_once_each_with_their_own_token_beside_a_manual_bonus(
    approved_on_mturk, client, stub
):
    # A manual bonus for 3A02 first: it must not stand in the way of its top-up.
    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "A1W2",
            "AssignmentId": "3A02",
            "BonusAmount": "0.25",
            "Reason": "Careful work",
            "UniqueRequestToken": "mitl-bonus-3A02",
        },
    )
    assert mturk_bonus_send(
        assignment=Assignment.objects.get(external_id="3A02"),
        amount="0.25",
        reason="Careful work",
        client=client,
    )
    # 3A01 (90 s: $20/h) is owed nothing; 3A02 and 3A03 are, rounded up to cents.
    expect_topup(stub, "A1W2", "3A02", "0.13", REASON_3A02)
    expect_topup(stub, "A1W3", "3A03", "0.07", REASON_3A03)
    result = mturk_topups_pay(batch=approved_on_mturk, client=client)
    stub.assert_no_pending_responses()
    assert result == TopUpResult(paid=2, already=0, total=Decimal("0.20"))

    # Again: nothing is sent (the Stubber would refuse any call), both count as paid.
    again = mturk_topups_pay(batch=approved_on_mturk, client=client)
    assert again == TopUpResult(paid=0, already=2, total=Decimal("0.00"))
    bonuses = Batch.objects.get(pk=approved_on_mturk.pk).mturk["bonuses"]
    assert sorted(bonuses) == ["mitl-bonus-3A02", "mitl-topup-3A02", "mitl-topup-3A03"]
    assert (bonuses["mitl-topup-3A02"]["amount"], bonuses["mitl-topup-3A02"]["purpose"]) == (
        "0.13",
        "topup",
    )
    assert bonuses["mitl-bonus-3A02"]["purpose"] == "bonus"
    # A manual bonus is still once per assignment, whatever top-up it got.
    assert not mturk_bonus_send(
        assignment=Assignment.objects.get(external_id="3A02"),
        amount="0.10",
        reason="Again",
        client=client,
    )


def test_a_refused_top_up_says_how_many_went_out_and_a_rerun_pays_the_rest(
    approved_on_mturk, client, stub
):
    expect_topup(stub, "A1W2", "3A02", "0.13", REASON_3A02)
    stub.add_client_error(
        "send_bonus", service_error_code="RequestError", service_message="Insufficient funds"
    )
    with pytest.raises(
        MTurkError,
        match=r"1 top-ups paid \(\$0.13\) before MTurk refused the one "
        r"for 3A03: .*Insufficient funds.*Run it again to pay the rest",
    ):
        mturk_topups_pay(batch=approved_on_mturk, client=client)
    # Was it paid after all (an answer lost on the way)? MTurk lists no bonus of that amount
    # and reason for 3A03 (another one is not it): it is sent again.
    other = {"WorkerId": "A1W3", "BonusAmount": "0.07", "AssignmentId": "3A03", "Reason": "Hi"}
    expect_bonus_listing(stub, "3A03", [other])
    expect_topup(stub, "A1W3", "3A03", "0.07", REASON_3A03)
    result = mturk_topups_pay(batch=approved_on_mturk, client=client)
    stub.assert_no_pending_responses()
    assert result == TopUpResult(paid=1, already=1, total=Decimal("0.07"))


def test_a_top_up_paid_by_a_run_that_died_before_noting_it_is_never_sent_again(
    approved_on_mturk, client, stub, monkeypatch
):
    # MTurk pays 3A02's top-up, and the run dies before writing it down.
    expect_topup(stub, "A1W2", "3A02", "0.13", REASON_3A02)
    crash_after_mturk_answers(monkeypatch, "mitl-topup-3A02")
    with pytest.raises(RuntimeError):
        mturk_topups_pay(batch=approved_on_mturk, client=client)
    monkeypatch.undo()
    # The rerun asks MTurk first (its UniqueRequestToken protects for 24 hours only): the
    # bonus is listed, so it is noted as paid and only 3A03's is sent.
    paid = {"WorkerId": "A1W2", "BonusAmount": "0.13", "AssignmentId": "3A02"}
    expect_bonus_listing(stub, "3A02", [paid | {"Reason": REASON_3A02}])
    expect_topup(stub, "A1W3", "3A03", "0.07", REASON_3A03)
    result = mturk_topups_pay(batch=approved_on_mturk, client=client)
    stub.assert_no_pending_responses()
    assert result == TopUpResult(paid=1, already=1, total=Decimal("0.07"))
    state = Batch.objects.get(pk=approved_on_mturk.pk).mturk
    assert sorted(state["bonuses"]) == ["mitl-topup-3A02", "mitl-topup-3A03"]
    assert state["bonuses"]["mitl-topup-3A02"]["amount"] == "0.13"
    assert state["bonuses_pending"] == {}


def publish_all(batch: Batch, client, stub) -> list[str]:
    hits = hits_of(batch)
    expect_hit_type(stub)
    for hit in hits:
        expect_create_hit(stub, batch, hit)
    result = mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()
    assert result.created == len(hits)  # a warning never stops the publication
    return result.warnings


def test_publication_says_when_there_is_no_wage_estimate(annotating_batch, client, stub):
    warnings = publish_all(annotating_batch, client, stub)
    assert f"no wage estimate for the minimum of $15.00/h: {NO_ESTIMATE}" in warnings


def test_publication_warns_when_the_estimate_is_below_the_minimum(annotating_batch, client, stub):
    # Another batch's people took 120 s on HITs of 3 pairs: 40 s a pair. This batch's HITs
    # have 8 pairs to judge + 2 check pairs: 400 s, so $0.50 makes 0.50 × 3600 / 400 = $4.50.
    other = batch_make(annotating_batch.dataset)
    approved_work(hit_make(other, 0), platform_worker("w1"), 120)
    warnings = publish_all(annotating_batch, client, stub)
    assert (
        "estimated $4.50/h at the median measured time (400 s per HIT) is below the batch's "
        "minimum $15.00/h: raise the reward to at least $1.67 or pay top-ups after review"
    ) in warnings  # 15 × 400 / 3600 = 1.666… → $1.67


@pytest.fixture
def default_client(client, monkeypatch):
    """Hand the stubbed client to services called without `client=` (the command)."""
    monkeypatch.setattr("annotation.mturk.client.mturk_client", lambda **kwargs: client)
    return client


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_wages_command_prints_the_table_and_pays_the_top_ups(
    approved_on_mturk, default_client, stub
):
    pk = approved_on_mturk.pk
    out = run("mturk_wages", str(pk))
    assert out.splitlines() == [
        f"batch {pk}: reward $0.50 per assignment, minimum $15.00/h, time counted up to "
        "1800 s per assignment",
        # 90, 135, 150: q1 = 90 + 0.5 × 45, median 135, q3 = 135 + 0.5 × 15
        "approved: 3 assignments, median 135 s (quartiles 112.5–142.5 s), $13.33/h at the "
        "median (below the minimum)",
        f"{'worker':<24} {'source':<10} {'assignments':>11} {'median s':>9} "
        f"{'quartiles s':>15} {'$/h':>8}  below",
        f"{'A1W2':<24} {'mturk':<10} {1:>11} {'150':>9} {'150–150':>15} {'12.00':>8}  BELOW",
        f"{'A1W3':<24} {'mturk':<10} {1:>11} {'135':>9} {'135–135':>15} {'13.33':>8}  BELOW",
        f"{'A1W1':<24} {'mturk':<10} {1:>11} {'90':>9} {'90–90':>15} {'20.00':>8}  -",
        "estimate: $13.33/h at 135 s per HIT (median of this batch's 3 approved assignments)",
        "warning: estimated $13.33/h at the median measured time (135 s per HIT) is below the "
        "batch's minimum $15.00/h: raise the reward to at least $0.57 or pay top-ups after "
        "review",
        "top-ups proposed: 2 due, $0.20 in all; 0 paid before ($0.00)",
        "  3A02 A1W2: 150 s, $12.00/h → top-up $0.13 due",
        "  3A03 A1W3: 135 s, $13.33/h → top-up $0.07 due",
    ]
    expect_topup(stub, "A1W2", "3A02", "0.13", REASON_3A02)
    expect_topup(stub, "A1W3", "3A03", "0.07", REASON_3A03)
    out = run("mturk_wages", str(pk), "--pay-topups")
    stub.assert_no_pending_responses()
    assert "top-ups proposed: 0 due, $0.00 in all; 2 paid before ($0.20)" in out
    assert "  3A02 A1W2: 150 s, $12.00/h → top-up $0.13 paid" in out
    assert out.endswith("top-ups paid now: 2, $0.20 in all; 0 paid before, not sent again\n")

    data = json.loads(run("mturk_wages", str(pk), "--json", "--pay-topups"))
    assert data["paid_now"] == {"paid": 0, "already": 2, "total": "0.00"}
    assert data["wages"]["overall"]["median_seconds"] == "135.000"
    assert data["wages"]["overall"]["hourly"] == "13.33"
    assert [(t["assignment"], t["amount"], t["paid"]) for t in data["topups"]] == [
        ("3A02", "0.13", True),
        ("3A03", "0.07", True),
    ]
    assert data["estimate"]["reward_needed"] == "0.57"
