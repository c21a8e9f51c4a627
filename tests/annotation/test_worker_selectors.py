"""Reads of the workers pages: figures, flags and filters, answers over time, and the
review page's co-workers' answers and next/previous."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import Assignment, ItemRole, Worker
from annotation.review_selectors import assignment_coworker_answers, review_neighbours
from annotation.worker_selectors import worker_figures, worker_figures_one, worker_history
from mitl.worker_flags import WorkerFlag

from .crowd_factories import MINUTE, RIGHT, T0, batch_make, hit_make, work_done, worker_make

pytestmark = pytest.mark.django_db

YES = {**RIGHT, "task": "yes"}
NO = {**RIGHT, "task": "no"}


@pytest.fixture
def crowd(tiny):
    """Four workers on one HIT: three say YES to its task pair at 20 s a pair, the fourth
    NO at 0.3 s a pair."""
    batch = batch_make(tiny)
    hit = hit_make(batch, 0, max_assignments=4)
    workers = [worker_make(f"w{i}") for i in range(4)]
    work = [work_done(hit, w, YES, elapsed_ms=20_000) for w in workers[:3]]
    work.append(work_done(hit, workers[3], NO, elapsed_ms=300))
    return batch, hit, workers, work


def test_agreement_with_co_workers_speed_pay_and_flags(crowd):
    rows = {row.worker.external_id: row for row in worker_figures()}

    careful, hasty = rows["w0"], rows["w3"]
    assert (careful.coworker_agreement, careful.coworkers_compared) == (1.0, 1)
    assert (hasty.coworker_agreement, hasty.coworkers_compared) == (0.0, 1)
    assert careful.median_pair_seconds == 20.0 and hasty.median_pair_seconds == 0.3
    assert careful.hourly == Decimal("30.00")  # $0.50 for 60 s
    assert hasty.hourly == Decimal("2000.00")  # $0.50 for 0.9 s
    assert careful.flags == () and hasty.flags == (WorkerFlag.FAST, WorkerFlag.PAY)
    assert careful.stats.golden_accuracy == 1.0


def test_a_worker_alone_on_their_pairs_has_no_agreement(tiny):
    hit = hit_make(batch_make(tiny), 0)
    work_done(hit, worker_make("alone"), YES, elapsed_ms=20_000)

    row = worker_figures_one(worker=Worker.objects.get(external_id="alone"))

    assert (row.coworker_agreement, row.coworkers_compared) == (None, 0)


def test_rejected_work_is_no_co_workers_majority(crowd):
    work = crowd[3]
    for assignment in work[1:3]:
        assignment.refresh_from_db()
        assignment.status = "rejected"
        assignment.save(update_fields=["status"])

    rows = {row.worker.external_id: row for row in worker_figures()}

    # w0 is now compared with w3 alone, who said NO.
    assert rows["w0"].coworker_agreement == 0.0


def test_the_filters_by_flag_source_and_batch(crowd, tiny):
    other = hit_make(batch_make(tiny), 1)
    work_done(other, Worker.objects.get(external_id="w1"), YES, elapsed_ms=20_000)
    Worker.objects.create(source="mturk", external_id="A1TURK")

    def names(**filters):
        return [row.worker.external_id for row in worker_figures(**filters)]

    assert names(flag="fast") == ["w3"]
    assert names(flag="pay") == ["w3"]
    assert names(source="mturk") == ["A1TURK"]
    assert names(batch_id=other.batch_id) == ["w1"]
    assert names(source="platform", flag="fast", batch_id=crowd[0].pk) == ["w3"]


def test_answers_over_time_count_each_level_per_day_and_batch(crowd):
    _, hit, workers, _ = crowd
    later = work_done(hit_make(hit.batch, 1), workers[0], NO)
    Assignment.objects.filter(pk=later.pk).update(submitted_at=T0 + 1440 * MINUTE)

    history = worker_history(worker=workers[0])

    # YES, partly YES, mostly NO, NO
    assert [(day.label, day.cells) for day in history.by_day] == [
        ("2025-01-06", [2, 0, 0, 1]),
        ("2025-01-07", [1, 0, 0, 2]),
    ]
    assert [row.cells for row in history.by_batch] == [[3, 0, 0, 3]]
    assert history.level_labels[0] == "100% YES"


def test_the_review_shows_co_workers_answers_on_the_same_pairs(crowd):
    _, hit, _, work = crowd
    task = hit.items.get(role=ItemRole.TASK)

    answers = assignment_coworker_answers(assignment=work[0])

    assert answers.workers == ["platform:w1", "platform:w2", "platform:w3"]
    assert answers.by_item[task.pk] == ["100% YES", "100% YES", "100% NO"]
    assert set(answers.by_item) == set(hit.items.values_list("pk", flat=True))


def test_next_and_previous_follow_the_review_queue(tiny):
    hit = hit_make(batch_make(tiny), 0, max_assignments=3)
    work = [
        work_done(hit, worker_make(f"r{i}"), YES, policy="review_all", now=T0 + (i + 1) * MINUTE)
        for i in range(3)
    ]
    first, middle, last = (a.pk for a in work)

    assert review_neighbours(assignment_id=first) == (None, middle)
    assert review_neighbours(assignment_id=middle) == (first, last)
    assert review_neighbours(assignment_id=last) == (middle, None)
    assert review_neighbours(assignment_id=10_000) == (None, first)  # not in it: the first
