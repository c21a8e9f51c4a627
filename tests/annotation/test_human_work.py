"""People's work on a batch, counted live: assignments, judgements, money, pace, progress."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.eligible import workers_eligible
from annotation.handout import hit_assign_next, worker_for_user
from annotation.human_work import batch_human_work, work_count
from annotation.models import Assignment, Batch
from annotation.review import worker_block
from annotation.selectors import batch_cost_estimate, batch_curation, batch_progress
from annotation.submissions import AnswerInput, assignment_submit

pytestmark = pytest.mark.django_db
LEVELS = {"task": "yes", "golden_tp": "yes", "golden_tn": "no"}


def take(name: str) -> Assignment:
    """An annotator account takes the next HIT."""
    user = get_user_model().objects.create_user(name)
    assignment = hit_assign_next(worker=worker_for_user(user=user))
    assert assignment is not None
    return assignment


def judge(assignment: Assignment, *, policy: str = "approve_or_flag", now=None) -> Assignment:
    """Answer every pair of the assignment right; approved at once unless `policy` waits."""
    answers = [
        AnswerInput(item_id=item.pk, level=LEVELS[item.role], elapsed_ms=4000)
        for item in assignment.hit.items.order_by("position")
    ]
    return assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=False,
        golden_policy=policy,
        now=now,
    ).assignment


def test_before_any_work_everything_is_still_needed(annotating_batch):
    work = batch_human_work(batch_id=annotating_batch.pk)
    hits = annotating_batch.hits.count()

    assert (work.current.hits, work.current.needed) == (hits, hits * 2)
    assert (work.current.approved, work.current.submitted, work.current.open) == (0, 0, 0)
    assert work.all_rounds == work.current
    assert work.judgements == 0 and work.spent == Decimal("0.00")
    assert work.per_hour is None and work.time_left == "—"  # no pace yet
    # No budget: the money to compare with is what every needed assignment costs.
    assert work.budget_dollars == batch_cost_estimate(batch=annotating_batch).cost.total


def test_the_counts_follow_submissions_reviews_and_hand_out(annotating_batch):
    approved = judge(take("a1"))
    waiting = judge(take("a2"), policy="review_all")
    take("a3")  # accepted, not submitted

    work = batch_human_work(batch_id=annotating_batch.pk)

    assert approved.status == "approved" and waiting.status == "submitted"
    assert (work.current.approved, work.current.submitted, work.current.open) == (1, 1, 1)
    items = approved.hit.items.count()
    assert work.judgements == 2 * items
    assert work.judgements_spent == 3 * items  # the open work will be answered
    # (approved + waiting) × (reward $0.50 + 20% commission $0.10)
    assert work.reward == Decimal("0.50") and work.spent == Decimal("1.20")
    assert work.per_hour is not None and work.per_hour > 0
    assert work.seconds_left is not None and work.time_left not in ("—", "none")
    assert work.to_json()["current_round"]["approved"] == 1


def test_money_uses_the_batchs_stored_reward(annotating_batch):
    Batch.objects.filter(pk=annotating_batch.pk).update(mturk={"settings": {"reward": "0.25"}})
    judge(take("a1"))

    work = batch_human_work(batch_id=annotating_batch.pk)

    assert work.reward == Decimal("0.25")
    assert work.spent == Decimal("0.30")  # 0.25 + its 20% commission 0.05


def test_the_pace_is_that_of_the_last_hour_else_of_the_round(annotating_batch):
    now = timezone.now()
    judge(take("a1"))
    judge(take("a2"))
    Assignment.objects.filter(status="approved").update(submitted_at=now - timedelta(hours=3))
    first = Assignment.objects.filter(status="approved").order_by("pk").first()
    Assignment.objects.filter(pk=first.pk).update(submitted_at=now - timedelta(hours=5))

    work = batch_human_work(batch_id=annotating_batch.pk, now=now)

    assert work.per_hour == pytest.approx(0.5)  # one more submission two hours later
    assert work.seconds_left == round(work.remaining / 0.5 * 3600)


def test_annotating_progress_is_counted_live_and_never_above_its_total(annotating_batch):
    hit = judge(take("a1")).hit
    for name in ("a2", "a3"):
        assignment = take(name)
        if assignment.hit_id == hit.pk:
            judge(assignment)

    rows = {row["stage"]: row for row in batch_progress(batch=annotating_batch)}
    count = work_count(batch_id=annotating_batch.pk, round=annotating_batch.round)

    assert rows["annotating"]["total"] == annotating_batch.hits.count() > 0
    assert rows["annotating"]["done"] == count.hits_done
    assert not rows["annotating"]["finished"]
    assert all(row["done"] <= row["total"] for row in rows.values())


def test_a_stored_count_above_its_total_is_shown_at_most_the_total(annotating_batch):
    annotating_batch.progress.filter(stage="building").update(done=4021, total=100)
    rows = {row["stage"]: row for row in batch_progress(batch=annotating_batch)}
    assert (rows["building"]["done"], rows["building"]["total"]) == (100, 100)


def test_the_curation_line_counts_judgements_as_they_arrive(annotating_batch):
    assert batch_curation(batch=annotating_batch)["judgements_spent"] == 0
    assignment = judge(take("a1"))
    spent = batch_curation(batch=annotating_batch)["judgements_spent"]
    assert spent == assignment.judgements.count() > 0


def test_eligible_workers_are_active_unblocked_annotator_accounts(db):
    users = get_user_model().objects
    users.create_user("boss", is_staff=True)
    users.create_user("gone", is_active=False)
    users.create_user("a1")
    blocked = users.create_user("a2")
    assert workers_eligible().count == 2
    worker_block(worker=worker_for_user(user=blocked), blocked=True)
    assert workers_eligible().count == 1
