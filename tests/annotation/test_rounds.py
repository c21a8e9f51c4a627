"""Where a round stands (annotation/rounds.py): complete, or each reason it cannot finish."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.handout import worker_for_user
from annotation.models import Assignment, BatchState, QualificationAttempt
from annotation.rounds import (
    batches_round_complete,
    round_complete,
    round_stall,
    round_waits_for_worker,
)

from .crowd_factories import FAILS_TP, RIGHT, T0, batch_make, hit_make, work_done

pytestmark = pytest.mark.django_db


def annotator(name: str, **extra):
    user = get_user_model().objects.create_user(name, password="a long password", **extra)
    return worker_for_user(user=user)


def codes(batch) -> dict[str, str]:
    return {stall.code: stall.text for stall in round_stall(batch=batch)}


def test_a_round_is_complete_once_every_hit_has_its_approved_work(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, i, max_assignments=1) for i in range(2)]
    work_done(hits[0], annotator("a"), RIGHT)
    assert batches_round_complete() == [] and not round_complete(batch_id=batch.pk)

    work_done(hits[1], annotator("b"), RIGHT)

    assert batches_round_complete() == [batch.pk] and round_complete(batch_id=batch.pk)
    assert list(codes(batch)) == ["complete"]


def test_only_annotating_batches_and_their_current_round_count(tiny, django_assert_num_queries):
    done = batch_make(tiny, state=BatchState.AGGREGATING)
    later = batch_make(tiny)
    later.round = 1
    later.save(update_fields=["round"])
    hit_make(later, 0)  # round 0, closed early: never blocks round 1 (which has no HIT)

    with django_assert_num_queries(1):
        complete = batches_round_complete()

    assert complete == [later.pk] and done.pk not in complete


def test_too_few_eligible_workers_is_said_with_the_numbers(tiny):
    batch = batch_make(tiny, assignments_per_hit=3)
    hit = hit_make(batch, 0, max_assignments=3)
    work_done(hit, annotator("a"), RIGHT)
    annotator("b")
    annotator("boss", is_staff=True)  # staff who never worked do not count
    blocked = annotator("c")
    blocked.is_blocked = True
    blocked.save()

    assert "3 assignments per HIT but only 2 workers are eligible" in codes(batch)["workers"]
    assert "2 approved assignments" in codes(batch)["missing"]


def test_a_worker_who_had_the_hit_cannot_fill_its_freed_slot(tiny):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=2)
    first, second = annotator("a"), annotator("b")
    work_done(hit, first, RIGHT)
    rejected = work_done(hit, second, RIGHT)
    Assignment.objects.filter(pk=rejected.pk).update(status="rejected")

    assert "more free slots than eligible workers" in codes(batch)["workers"]


def test_the_qualification_round_narrows_who_is_eligible(tiny):
    batch = batch_make(tiny, qualification_pairs=4)
    hit_make(batch, 0, max_assignments=2)
    qualified, _ = annotator("a"), annotator("b")
    QualificationAttempt.objects.create(
        batch=batch, worker=qualified, number=1, passed=True, finished_at=T0
    )

    text = codes(batch)["workers"]
    assert "only 1 worker is eligible" in text and "qualification round" in text


def test_flagged_work_waits_for_review(tiny):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=2)
    work_done(hit, annotator("a"), FAILS_TP)
    work_done(hit, annotator("b"), RIGHT)

    stalls = codes(batch)
    assert stalls["review"] == "1 submission wait for review (1 failed a golden check)."
    assert "workers" not in stalls and "waiting" not in stalls


def test_unconfirmed_mturk_work_is_named(tiny):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=1)
    Assignment.objects.create(
        hit=hit,
        worker=annotator("a"),
        status="submitted",
        submitted_at=T0,
        external_id="A1",
    )
    assert codes(batch)["mturk"].startswith("MTurk has not confirmed 1 submission")


def test_a_spent_budget_is_named_before_the_workers(tiny):
    # 3 pairs answered per HIT here, 5 held per HIT by the config (3 + 2 goldens).
    batch = batch_make(tiny, budget_judgements=12, hit_size=3, assignments_per_hit=1)
    hits = [hit_make(batch, i, max_assignments=1) for i in range(4)]
    worker = annotator("a")
    for hit in hits[:3]:
        work_done(hit, worker, RIGHT)

    stalls = codes(batch)
    assert stalls["budget"].startswith("The budget is spent (9 of 12 judgements)")
    assert "workers" not in stalls
    waits = round_waits_for_worker(worker=annotator("b"))
    assert [w.why for w in waits] == ["its judgement budget is spent"]


def test_the_annotator_reads_why_without_anyone_named(tiny):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=2)
    me, other = annotator("me"), annotator("someone")
    work_done(hit, me, RIGHT)

    (wait,) = round_waits_for_worker(worker=me)
    assert wait.batch_id == batch.pk
    assert wait.why.startswith("you have done every HIT of it that is still open")
    assert "someone" not in wait.why
    assert round_waits_for_worker(worker=other) == []  # a HIT is free for them
    work_done(hit, other, FAILS_TP)
    (wait,) = round_waits_for_worker(worker=annotator("third"))
    assert wait.why == "its remaining work waits for review"


def test_a_batch_that_is_not_annotating_has_no_stall(tiny):
    assert round_stall(batch=batch_make(tiny, state=BatchState.POOLING)) == []
