"""Submitting crowd work: deadlines, whose work it is, a repeat submission, and a batch that
stops taking answers.

Time moves through the `now=` arguments, never by sleeping. On PostgreSQL, one HIT
submitted from many connections at once, with the same and with different answers.
`test_services.py` covers the validation of answers and `test_review.py` what the golden
policy decides at submission; this file does not repeat them.
"""

from __future__ import annotations

from functools import partial

import pytest
from django.db import connection

from annotation.errors import ServiceError
from annotation.models import Assignment, Batch, BatchState, Judgement
from annotation.submissions import SubmissionResult

from .crowd_factories import (
    FAILS_TP,
    MINUTE,
    RIGHT,
    T0,
    all_at_once,
    answers,
    batch_make,
    hit_make,
    status_of,
    submit,
    take,
    worker_make,
)

pytestmark = pytest.mark.django_db


# --- assignment_submit ----------------------------------------------------------------------


def test_a_late_submission_is_refused_and_stored_as_expired(tiny):
    hit = hit_make(batch_make(tiny, assignment_minutes=30), 0, max_assignments=1)
    assignment = take(worker_make("w0"))

    with pytest.raises(ServiceError, match="expired"):
        submit(assignment, answers(hit), now=T0 + 31 * MINUTE)

    assert status_of(assignment) == "expired"
    assert not Judgement.objects.exists()
    assert take(worker_make("w1"), now=T0 + 32 * MINUTE).hit == hit  # the slot is free again


def test_a_submission_just_before_the_deadline_is_accepted(tiny):
    hit = hit_make(batch_make(tiny, assignment_minutes=30), 0)
    assignment = take(worker_make("w0"))
    assert submit(assignment, answers(hit), now=T0 + 29 * MINUTE).created is True
    assert status_of(assignment) == "approved"


def test_a_worker_cannot_submit_another_workers_assignment(tiny):
    hit = hit_make(batch_make(tiny), 0)
    owner, intruder = worker_make("owner"), worker_make("intruder")
    assignment = take(owner)

    with pytest.raises(ServiceError, match="belongs to another worker"):
        submit(assignment, answers(hit), worker=intruder)

    assert status_of(assignment) == "accepted"
    assert not Judgement.objects.exists()
    assert submit(assignment, answers(hit), worker=owner).created is True


@pytest.mark.parametrize("policy", ["approve_or_flag", "approve_or_reject", "review_all"])
def test_a_repeat_submission_returns_the_stored_result_and_stores_nothing(tiny, policy):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    first = submit(assignment, answers(hit, FAILS_TP), policy=policy)
    before = Assignment.objects.filter(pk=assignment.pk).values().get()

    again = submit(assignment, answers(hit, FAILS_TP), policy=policy, now=T0 + 3 * MINUTE)

    assert (again.created, again.differs) == (False, False)
    assert [j.pk for j in again.judgements] == [j.pk for j in first.judgements]
    assert again.golden_failures == first.golden_failures != ()
    assert Judgement.objects.count() == 3
    assert Assignment.objects.filter(pk=assignment.pk).values().get() == before


def test_a_repeat_with_other_answers_says_so_and_keeps_the_stored_ones(tiny):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    first = submit(assignment, answers(hit, FAILS_TP))

    retried = submit(assignment, answers(hit, FAILS_TP, elapsed_ms=4321), now=T0 + 2 * MINUTE)
    changed = submit(assignment, answers(hit), now=T0 + 3 * MINUTE)

    assert (retried.created, retried.differs) == (False, False)  # times are not answers
    assert (changed.created, changed.differs) == (False, True)
    assert [j.pk for j in changed.judgements] == [j.pk for j in first.judgements]
    assert sorted(Judgement.objects.values_list("item_id", "level")) == sorted(
        (j.item_id, j.level) for j in first.judgements
    )


# --- a batch that stops taking answers -----------------------------------------------------


@pytest.mark.parametrize("state", [BatchState.AGGREGATING, BatchState.CANCELLED])
def test_work_on_a_batch_that_left_annotating_is_refused_and_nothing_stored(tiny, state):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0)
    assignment = take(worker_make("late"))
    Batch.objects.filter(pk=batch.pk).update(state=state)
    with pytest.raises(ServiceError, match=f"batch is {state} and takes no more answers"):
        submit(assignment, answers(hit))
    assert not Judgement.objects.exists()
    assert status_of(assignment) == "accepted"


# --- the same HIT submitted from several connections at once (PostgreSQL) -------------------

DOUBLE_SUBMITS = 8


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("payloads", ["same", "different"])
def test_a_hit_submitted_many_times_at_once_is_stored_once_and_whole(tiny, payloads):
    assert connection.vendor == "postgresql"
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("double-submitter"))
    sent = [
        answers(hit, RIGHT if i % 2 == 0 or payloads == "same" else {**RIGHT, "task": "yes"})
        for i in range(DOUBLE_SUBMITS)
    ]

    outcomes = all_at_once(
        [partial(submit, assignment, payload, worker=assignment.worker) for payload in sent]
    )

    assert all(isinstance(o, SubmissionResult) for o in outcomes), outcomes
    assert sum(o.created for o in outcomes) == 1  # one stored it; the others got it back
    winner = next(i for i, o in enumerate(outcomes) if o.created)
    stored = list(
        Judgement.objects.filter(assignment=assignment)
        .order_by("item__position")
        .values_list("item_id", "level")
    )
    # Exactly the winner's answers, none mixed in from a loser's payload.
    assert stored == [(answer.item_id, answer.level) for answer in sent[winner]]
    for outcome in outcomes:
        assert sorted((j.item_id, j.level) for j in outcome.judgements) == sorted(stored)
    assert status_of(assignment) == "approved"
    assert Assignment.objects.filter(hit=hit).count() == 1
