"""MTurk workers on the HIT page: assignments opened once, returned HITs, blocked workers."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.handout import hit_assign_next
from annotation.models import HIT, Assignment, Worker
from annotation.mturk.confirmation import assignment_mark_confirmed
from annotation.mturk.hit_page import mturk_assignment_open

from .helpers import (
    accept_and_submit,
    hits_of,
    remote_hit_id,
)

pytestmark = pytest.mark.django_db


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

    # Submitted work is never given up for a newcomer; once MTurk confirmed it, it fills
    # the HIT. (Unconfirmed, it holds no slot: test_only_work_mturk_confirmed_fills_a_hit.)
    accept_and_submit(hit, "A1W3", "3A03")
    for done in Assignment.objects.filter(hit=hit, status="submitted"):
        assignment_mark_confirmed(done, timezone.now())  # the sync found both on MTurk
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


# Forged ids: the page is public, so anyone may make up (assignmentId, workerId) pairs.
FORGED = 40


def test_forged_ids_opened_but_never_submitted_neither_fill_a_hit_nor_pile_up(
    annotating_batch,
):
    hit = hits_of(annotating_batch)[0]
    HIT.objects.filter(pk=hit.pk).update(max_assignments=1)
    hit.refresh_from_db()
    for n in range(FORGED):  # each one opens the page, takes the slot, never submits
        mturk_assignment_open(hit=hit, worker_id=f"A1FORGED{n}", assignment_id=f"3FORGED{n}")
    # A real worker still gets the HIT's one slot, and stores its answers.
    real = accept_and_submit(hit, "A1REAL", "3REAL")
    assert (real.status, real.external_id) == ("submitted", "3REAL")
    # Rows without answers are kept per HIT up to a small bound: they do not grow with FORGED.
    assert Worker.objects.filter(source="mturk").count() <= FORGED // 2
    assert Assignment.objects.filter(hit=hit).count() <= FORGED // 2
    assert Assignment.objects.filter(hit=hit, submitted_at__isnull=False).count() == 1


def test_only_work_mturk_confirmed_fills_a_hit(annotating_batch):
    hit = hits_of(annotating_batch)[0]
    HIT.objects.filter(pk=hit.pk).update(max_assignments=1)
    hit.refresh_from_db()
    real = accept_and_submit(hit, "A1REAL", "3REAL")
    forged = accept_and_submit(hit, "A1FORGED", "3FORGED")  # unconfirmed work holds no slot
    assert forged.status == "submitted"
    assignment_mark_confirmed(real, timezone.now())  # the sync found it on MTurk
    workers = Worker.objects.count()
    for n in range(5):
        with pytest.raises(ServiceError, match="already has all 1 assignments"):
            mturk_assignment_open(hit=hit, worker_id=f"A1LATE{n}", assignment_id=f"3LATE{n}")
    assert Worker.objects.count() == workers  # a refused page view stores no worker
    for n in range(FORGED):  # confirmed work is never pushed out by unconfirmed work
        with pytest.raises(ServiceError, match="already has all 1 assignments"):
            accept_and_submit(hit, f"A1MORE{n}", f"3MORE{n}")
    assert Assignment.objects.get(pk=real.pk).status == "submitted"
