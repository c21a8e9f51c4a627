"""The sync's work on one HIT: each assignment MTurk lists, matched with the platform's.

Work that MTurk lists with the same AssignmentId, WorkerId and HITId as the platform
stored is confirmed, and only then does the batch's golden policy decide it
(`review.assignment_decide_confirmed`); the decision goes to MTurk. A submission whose
answers never reached the platform is reported, and rejected once `MISSING_GRACE` has
passed. Stored work that MTurk does not list is never approved. Whatever was sent is
recorded in `Batch.mturk["sent"]`, so a second sync sends nothing again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from annotation.errors import ServiceError
from annotation.handout import hits_lock, hits_recount_slots
from annotation.models import HIT, Assignment, AssignmentStatus
from annotation.review import (
    assignment_decide_confirmed,
    assignment_golden_misses,
    assignment_review,
)

from .client import mturk_call
from .confirmation import MTURK_STATUS, assignment_mark_confirmed
from .errors import MTurkError
from .feedback import FEEDBACK_MAX, MISSING_FEEDBACK, rejection_feedback
from .state import now_iso, state_read, state_update
from .sync_report import MISSING_GRACE, SyncRun


def hit_assignments_sync(run: SyncRun, hit: HIT, remote: list[dict[str, Any]]) -> dict[str, Any]:
    """Decide and send each assignment that MTurk lists for a HIT; return the new state."""
    state = state_read(run.batch)
    sent = state.get("sent", {})
    local = {
        a.external_id: a
        for a in Assignment.objects.select_related("worker").filter(
            hit=hit, external_id__isnull=False
        )
    }
    for entry in remote:
        if entry["AssignmentId"] in sent:
            continue
        platform = local.get(entry["AssignmentId"])
        state = _listed_sync(run, hit, entry, platform) or state
    listed = {entry["AssignmentId"] for entry in remote}
    unlisted = [
        platform
        for aid, platform in local.items()
        if aid not in listed and aid not in sent and platform.submitted_at is not None
    ]
    _unlisted_report(run, unlisted)
    return state


def _listed_sync(
    run: SyncRun, hit: HIT, entry: dict[str, Any], platform: Assignment | None
) -> dict[str, Any] | None:
    """Sync one assignment MTurk lists; return the state if it changed."""
    aid, mturk_status = entry["AssignmentId"], entry.get("AssignmentStatus", "")
    problem = _identity_mismatch(entry, platform, hit)
    if problem:
        run.report.problems.append(problem)
        return None
    if platform is None or platform.submitted_at is None:
        return _missing_sync(run, hit, entry, platform)
    # Confirmed by MTurk: now, and only now, the golden policy may decide the work
    # (not over a rejection made on MTurk's site: that disagreement goes to a person),
    # and a person may approve it.
    platform = assignment_mark_confirmed(platform, run.now)
    if mturk_status in ("Submitted", "Approved"):
        platform = assignment_decide_confirmed(assignment=platform, policy=run.policy)
    if mturk_status != "Submitted":  # auto-approved, or decided in MTurk's web UI
        if MTURK_STATUS.get(platform.status) != mturk_status:
            run.report.problems.append(
                f"{aid}: {mturk_status} on MTurk, but {platform.status} here"
            )
        return _record(run, aid, hit, mturk_status.lower(), by="mturk")
    return _decision_send(run, hit, platform)


def _identity_mismatch(entry: dict[str, Any], platform: Assignment | None, hit: HIT) -> str:
    """Return why MTurk's entry is not the platform's assignment of that id ("" if it is)."""
    aid = entry["AssignmentId"]
    if platform is not None and platform.worker.external_id != entry.get("WorkerId"):
        return (
            f"{aid}: MTurk names worker {entry.get('WorkerId')}, the platform "
            f"{platform.worker.external_id}"
        )
    if platform is not None and entry.get("HITId") != hit.external_id:
        return (
            f"{aid}: MTurk lists it for HIT {entry.get('HITId')}, the platform for "
            f"{hit.external_id}"
        )
    return ""


def _decision_send(run: SyncRun, hit: HIT, platform: Assignment) -> dict[str, Any] | None:
    """Send the platform's decision on confirmed work to MTurk; None while a person decides."""
    aid, report = platform.external_id, run.report
    if platform.status == AssignmentStatus.APPROVED:
        params = {"AssignmentId": aid}
        if platform.feedback.strip():
            params["RequesterFeedback"] = platform.feedback.strip()[:FEEDBACK_MAX]
        decision, method, bucket = "approved", "approve_assignment", report.approved
    elif platform.status == AssignmentStatus.REJECTED:
        feedback = rejection_feedback(
            reviewer_text=platform.feedback,
            misses=assignment_golden_misses(assignment_id=platform.pk),
        )
        params = {"AssignmentId": aid, "RequesterFeedback": feedback}
        decision, method, bucket = "rejected", "reject_assignment", report.rejected
    else:  # submitted: flagged or review_all, a person decides on the review page
        report.waiting.append(aid)
        return None
    try:
        mturk_call(run.client, method, **params)
    except MTurkError as exc:
        report.problems.append(f"{aid}: {exc}")
        return None
    bucket.append(aid)
    return _record(run, aid, hit, decision, by="platform")


def _unlisted_report(run: SyncRun, stored: list[Assignment]) -> None:
    """Report submitted work that MTurk does not list; reject what never turned up in time."""
    for platform in stored:
        if platform.confirmed_at is not None:  # in MTurk's results CSV: MTurk work for sure
            continue
        if _drop_unconfirmed(platform, run.now):
            run.report.dropped.append(platform.external_id)
        else:
            run.report.unconfirmed.append(platform.external_id)


def _missing_sync(
    run: SyncRun, hit: HIT, entry: dict[str, Any], platform: Assignment | None
) -> dict[str, Any] | None:
    """Handle an MTurk submission without answers here; return the state if it changed.

    Decided on MTurk already: recorded. Still `Submitted` there and older than
    MISSING_GRACE (the answers are not merely on their way): rejected on MTurk, or MTurk's
    auto-approval would pay for work nobody can check (a worker may post to externalSubmit
    without ever using the HIT page). Otherwise reported, and nothing is sent.
    """
    aid, mturk_status = entry["AssignmentId"], entry.get("AssignmentStatus", "")
    report, now = run.report, run.now
    if mturk_status != "Submitted":  # decided on MTurk already: nothing left to send
        report.missing.append(aid)
        return _record(run, aid, hit, mturk_status.lower(), by="mturk")
    submitted = entry.get("SubmitTime")
    if not isinstance(submitted, datetime) or submitted + MISSING_GRACE > now:
        report.missing.append(aid)
        return None
    try:
        mturk_call(
            run.client, "reject_assignment", AssignmentId=aid, RequesterFeedback=MISSING_FEEDBACK
        )
    except MTurkError as exc:
        report.missing.append(aid)
        report.problems.append(f"{aid}: {exc}")
        return None
    if platform is not None:  # its page was opened but never sent answers: no late ones now
        with transaction.atomic():
            hits_lock(hit_ids=[hit.pk])  # before the assignment (see handout.hits_lock)
            closed = Assignment.objects.filter(
                pk=platform.pk,
                status__in=[AssignmentStatus.ACCEPTED, AssignmentStatus.EXPIRED],
                submitted_at__isnull=True,
            ).update(status=AssignmentStatus.EXPIRED, deadline=now)  # never reclaimed
            if closed:
                hits_recount_slots(hit_ids=[hit.pk])
    report.rejected.append(aid)
    report.missing_rejected.append(aid)
    return _record(run, aid, hit, "rejected", by="platform")


def _drop_unconfirmed(assignment: Assignment, now: datetime) -> bool:
    """Reject (here only) stored work that MTurk never listed before its time ran out.

    MTurk abandons an assignment at the end of its duration, so work it still does not
    list by the deadline plus MISSING_GRACE never was MTurk work (made-up ids on the public
    page) or was given up: its slot goes back to the HIT, and it is never counted.
    """
    if (
        assignment.status != AssignmentStatus.SUBMITTED
        or assignment.deadline is None
        or assignment.deadline + MISSING_GRACE > now
    ):
        return False
    try:
        assignment_review(
            assignment=assignment,
            approve=False,
            feedback="Not submitted on MTurk: MTurk does not list this assignment for its HIT.",
        )
    except ServiceError:  # a person decided meanwhile
        return False
    return True


def _record(run: SyncRun, aid: str, hit: HIT, decision: str, *, by: str) -> dict[str, Any]:
    """Record a decision sent to MTurk (by "platform") or found there (by "mturk")."""

    def store(state: dict[str, Any]) -> None:
        sent = dict(state.get("sent", {}))
        sent[aid] = {"decision": decision, "hit": hit.pk, "by": by, "at": now_iso(run.now)}
        state["sent"] = sent

    return state_update(run.batch.pk, store)
