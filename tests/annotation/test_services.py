"""Crowd-side services: giving out HITs, storing a submission with its golden check, reviewing."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from annotation.errors import ServiceError
from annotation.handout import assignment_create
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    Candidate,
    Caption,
    Dataset,
    HITItem,
    Image,
    Judgement,
    Query,
    Worker,
)
from annotation.review import assignment_review
from annotation.services import worker_simulated_get_or_create
from annotation.submissions import AnswerInput, assignment_submit

pytestmark = pytest.mark.django_db

PASSING = {"task": "weak_no", "golden_tp": "yes", "golden_tn": "no"}


def make_hit(batch: Batch, index: int, images, captions, candidate: Candidate) -> HIT:
    """A HIT of three items: a golden TN at position 0, the task at 1, a golden TP at 2."""
    hit = HIT.objects.create(batch=batch, index=index, max_assignments=2)
    HITItem.objects.create(
        hit=hit, position=0, role="golden_tn", image=images[2], caption=captions[0]
    )
    HITItem.objects.create(
        hit=hit, position=1, role="task", candidate=candidate, image=images[0], caption=captions[1]
    )
    HITItem.objects.create(
        hit=hit, position=2, role="golden_tp", image=images[1], caption=captions[1]
    )
    return hit


@pytest.fixture
def crowd():
    dataset = Dataset.objects.create(name="tiny")
    images = [Image.objects.create(dataset=dataset, ext_id=i) for i in range(3)]
    captions = [
        Caption.objects.create(dataset=dataset, ext_id=10 + i, image=images[i], text=f"caption {i}")
        for i in range(3)
    ]
    # A batch's config is checked at creation and read on every hand-out and submission,
    # so even a hand-made row carries a valid one (its defaults otherwise).
    batch = Batch.objects.create(
        dataset=dataset, name="b", config={"annotators": ["tfidf"]}, state="annotating"
    )
    query = Query.objects.create(batch=batch, direction="i2t", image=images[0])
    candidate = Candidate.objects.create(
        batch=batch, query=query, direction="i2t", image=images[0], caption=captions[1]
    )
    workers = [Worker.objects.create(source="platform", external_id=f"w{i}") for i in range(4)]
    return SimpleNamespace(
        hit=make_hit(batch, 0, images, captions, candidate),
        other_hit=make_hit(batch, 1, images, captions, candidate),
        workers=workers,
    )


def answers_for(hit: HIT, levels: dict[str, str] = PASSING, **extra) -> list[AnswerInput]:
    """One answer per item of `hit`, the level chosen by the item's role."""
    answers = []
    for item in hit.items.order_by("position"):
        level = levels[item.role]
        followups = {}
        if level in ("weak_yes", "weak_no"):
            followups = {"shortcomings": ("wrong_description",), "wrong_concepts": ("color",)}
        answers.append(
            AnswerInput(item_id=item.pk, level=level, elapsed_ms=1000 + item.position, **followups)
        )
    return answers


def submit(assignment: Assignment, answers: list[AnswerInput], required: bool = True):
    return assignment_submit(assignment=assignment, answers=answers, followups_required=required)


# --- assignment_create --------------------------------------------------------------------


def test_assignment_create_gives_the_hit_to_the_worker(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    assert (assignment.hit, assignment.worker, assignment.status) == (
        crowd.hit,
        crowd.workers[0],
        "accepted",
    )


def test_assignment_create_refuses_a_full_hit(crowd):
    assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    assignment_create(hit=crowd.hit, worker=crowd.workers[1])
    with pytest.raises(ServiceError, match="already has all 2 assignments"):
        assignment_create(hit=crowd.hit, worker=crowd.workers[2])
    assert crowd.hit.assignments.count() == 2
    assignment_create(hit=crowd.other_hit, worker=crowd.workers[2])  # other HITs stay open


def test_assignment_create_refuses_a_repeat_worker(crowd):
    assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    with pytest.raises(ServiceError, match="already worked on"):
        assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    assert crowd.hit.assignments.count() == 1


def test_assignment_create_refuses_a_blocked_worker(crowd):
    blocked = crowd.workers[0]
    blocked.is_blocked = True
    blocked.save()
    with pytest.raises(ServiceError, match="blocked"):
        assignment_create(hit=crowd.hit, worker=blocked)
    assert not Assignment.objects.exists()


def test_a_rejected_worker_cannot_take_the_same_hit_again(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    submit(assignment, answers_for(crowd.hit, {**PASSING, "golden_tp": "no"}))
    assignment_review(assignment=assignment, approve=False, feedback="golden pair wrong")
    with pytest.raises(ServiceError, match="already worked on"):
        assignment_create(hit=crowd.hit, worker=crowd.workers[0])


# --- assignment_submit ----------------------------------------------------------------------


def test_submission_stores_one_judgement_per_item(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    result = submit(assignment, answers_for(crowd.hit))

    assert result.created is True
    stored = {j.item.role: j for j in Judgement.objects.filter(assignment=assignment)}
    assert set(stored) == {"task", "golden_tp", "golden_tn"}
    assert len(result.judgements) == 3
    task = stored["task"]
    assert (task.level, task.shortcoming_names, task.wrong_concept_names) == (
        "weak_no",
        ["wrong_description"],
        ["color"],
    )
    assert task.elapsed_ms == 1001
    assert (stored["golden_tp"].level, stored["golden_tp"].shortcomings) == ("yes", 0)


def test_submission_that_passes_the_goldens_is_approved(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    result = submit(assignment, answers_for(crowd.hit, {**PASSING, "golden_tp": "weak_yes"}))

    assignment.refresh_from_db()
    assert assignment.status == "approved"
    assert assignment.golden_passed is True
    assert assignment.flagged is False
    assert assignment.submitted_at is not None and assignment.reviewed_at is not None
    assert result.golden_failures == ()


@pytest.mark.parametrize(
    ("levels", "failed_position"),
    [
        ({**PASSING, "golden_tp": "weak_no"}, 3),  # a known match answered NO
        ({**PASSING, "golden_tn": "weak_yes"}, 1),  # a known mismatch answered YES
    ],
)
def test_submission_that_fails_a_golden_is_flagged_for_review(crowd, levels, failed_position):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    result = submit(assignment, answers_for(crowd.hit, levels))

    assignment.refresh_from_db()
    assert assignment.status == "submitted"
    assert assignment.flagged is True
    assert assignment.golden_passed is False
    assert assignment.submitted_at is not None and assignment.reviewed_at is None
    assert len(result.golden_failures) == 1
    assert result.golden_failures[0].startswith(f"pair {failed_position} ")
    assert Judgement.objects.filter(assignment=assignment).count() == 3  # stored all the same


def refused_submissions(crowd) -> dict[str, tuple[list[AnswerInput], str]]:
    good = answers_for(crowd.hit)
    foreign_item = crowd.other_hit.items.get(position=0)
    task = next(a for a in good if a.level == "weak_no")
    others = [a for a in good if a is not task]
    return {
        "missing item": (good[:-1], "1 of 3 pairs are not answered"),
        "no answer at all": ([], "3 of 3 pairs are not answered"),
        "duplicate item": ([*good, good[0]], "answered twice"),
        "foreign item": (
            [*good[:-1], AnswerInput(item_id=foreign_item.pk, level="no")],
            "does not belong to this HIT",
        ),
        "middle level without a shortcoming": (
            [*others, AnswerInput(item_id=task.item_id, level="weak_no")],
            "pair 2: choose at least one shortcoming",
        ),
        "wrong description without a concept": (
            [
                *others,
                AnswerInput(
                    item_id=task.item_id, level="weak_yes", shortcomings=("wrong_description",)
                ),
            ],
            "pair 2: say which concept",
        ),
        "other concept without its text": (
            [
                *others,
                AnswerInput(
                    item_id=task.item_id,
                    level="weak_yes",
                    shortcomings=("wrong_description",),
                    wrong_concepts=("other",),
                ),
            ],
            "pair 2: describe the 'other' wrong concept",
        ),
        "follow-up on a YES": (
            [*others, AnswerInput(item_id=task.item_id, level="yes", shortcomings=("grammar",))],
            "pair 2: follow-up answers are only for the middle levels",
        ),
        "unknown level": ([*others, AnswerInput(item_id=task.item_id, level="maybe")], "pair 2"),
        "unknown shortcoming": (
            [*others, AnswerInput(item_id=task.item_id, level="weak_no", shortcomings=("ugly",))],
            "unknown shortcoming 'ugly'",
        ),
        "negative time": (
            [*others, AnswerInput(item_id=task.item_id, level="no", elapsed_ms=-1)],
            "pair 2: elapsed time must be between 0 and 86400000 ms (got -1)",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing item",
        "no answer at all",
        "duplicate item",
        "foreign item",
        "middle level without a shortcoming",
        "wrong description without a concept",
        "other concept without its text",
        "follow-up on a YES",
        "unknown level",
        "unknown shortcoming",
        "negative time",
    ],
)
def test_refused_submission_stores_nothing(crowd, case):
    answers, message = refused_submissions(crowd)[case]
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])

    with pytest.raises(ServiceError, match=re.escape(message)):
        submit(assignment, answers)

    assert not Judgement.objects.exists()
    assignment.refresh_from_db()
    assert (assignment.status, assignment.submitted_at, assignment.golden_passed) == (
        "accepted",
        None,
        None,
    )
    submit(assignment, answers_for(crowd.hit))  # the worker can still submit properly
    assert Judgement.objects.count() == 3


def test_followups_may_be_left_out_when_the_batch_does_not_ask_for_them(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    answers = [
        AnswerInput(item_id=a.item_id, level=a.level) for a in answers_for(crowd.hit)
    ]  # weak_no without any shortcoming
    submit(assignment, answers, required=False)
    task = Judgement.objects.get(assignment=assignment, item__role="task")
    assert (task.level, task.shortcomings, task.wrong_concepts) == ("weak_no", 0, 0)


def test_other_concept_text_is_stored_stripped(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    answers = [
        a
        if a.level != "weak_no"
        else AnswerInput(
            item_id=a.item_id,
            level="weak_no",
            shortcomings=("wrong_description",),
            wrong_concepts=("other",),
            other_text="  wrong size  ",
        )
        for a in answers_for(crowd.hit)
    ]
    submit(assignment, answers)
    task = Judgement.objects.get(assignment=assignment, item__role="task")
    assert task.other_text == "wrong size"


@pytest.mark.parametrize(
    "oversized",
    [
        {"wrong_concepts": ("other",), "other_text": "x" * 501},
        {"wrong_concepts": ("color",), "elapsed_ms": 2**31},
    ],
    ids=["other_text-501-chars", "elapsed_ms-2**31"],
)
def test_oversized_answers_are_refused_with_a_service_error(crowd, oversized):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    answers = [
        a
        if a.level != "weak_no"
        else AnswerInput(
            item_id=a.item_id, level="weak_no", shortcomings=("wrong_description",), **oversized
        )
        for a in answers_for(crowd.hit)
    ]
    with pytest.raises(ServiceError, match="pair 2"):
        submit(assignment, answers)
    assert not Judgement.objects.exists()


@pytest.mark.parametrize("first_levels", [PASSING, {**PASSING, "golden_tp": "no"}])
def test_second_submission_returns_the_stored_result_without_duplicates(crowd, first_levels):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    first = submit(assignment, answers_for(crowd.hit, first_levels))
    status = Assignment.objects.get(pk=assignment.pk).status

    again = submit(
        assignment, answers_for(crowd.hit, {"task": "yes", "golden_tp": "yes", "golden_tn": "yes"})
    )

    assert again.created is False
    assert Judgement.objects.count() == 3
    assert [j.pk for j in again.judgements] == [j.pk for j in first.judgements]
    assert [j.level for j in again.judgements] == [
        first_levels[r] for r in ("golden_tn", "task", "golden_tp")
    ]
    assert again.assignment.status == status


def test_expired_assignment_cannot_be_submitted(crowd):
    assignment = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    Assignment.objects.filter(pk=assignment.pk).update(status="expired")
    with pytest.raises(ServiceError, match="expired"):
        submit(assignment, answers_for(crowd.hit))
    assert not Judgement.objects.exists()


# --- assignment_review ---------------------------------------------------------------------


def flagged_assignment(crowd, worker: Worker) -> Assignment:
    assignment = assignment_create(hit=crowd.hit, worker=worker)
    submit(assignment, answers_for(crowd.hit, {**PASSING, "golden_tn": "yes"}))
    return assignment


def test_review_approves_flagged_work(crowd):
    assignment = flagged_assignment(crowd, crowd.workers[0])
    reviewed = assignment_review(assignment=assignment, approve=True, feedback="fine after all")

    reviewed.refresh_from_db()
    assert reviewed.status == "approved"
    assert reviewed.flagged is False
    assert reviewed.feedback == "fine after all"
    assert reviewed.reviewed_at is not None
    assert reviewed.golden_passed is False  # the check's result is kept


def test_rejecting_work_reopens_the_slot_for_another_worker(crowd):
    good = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    submit(good, answers_for(crowd.hit))
    bad = flagged_assignment(crowd, crowd.workers[1])
    with pytest.raises(ServiceError, match="already has all 2"):  # flagged work holds its slot
        assignment_create(hit=crowd.hit, worker=crowd.workers[2])

    rejected = assignment_review(assignment=bad, approve=False, feedback="a golden pair was wrong")

    rejected.refresh_from_db()
    assert (rejected.status, rejected.flagged, rejected.feedback) == (
        "rejected",
        False,
        "a golden pair was wrong",
    )
    replacement = assignment_create(hit=crowd.hit, worker=crowd.workers[2])
    assert replacement.status == "accepted"
    with pytest.raises(ServiceError, match="already has all 2"):
        assignment_create(hit=crowd.hit, worker=crowd.workers[3])


@pytest.mark.parametrize("approve", [True, False])
def test_only_submitted_work_can_be_reviewed(crowd, approve):
    accepted = assignment_create(hit=crowd.hit, worker=crowd.workers[0])
    with pytest.raises(ServiceError, match="only submitted work"):
        assignment_review(assignment=accepted, approve=approve, feedback="checked")
    approved = assignment_create(hit=crowd.hit, worker=crowd.workers[1])
    submit(approved, answers_for(crowd.hit))
    with pytest.raises(ServiceError, match=r"this one is approved"):
        assignment_review(assignment=approved, approve=approve, feedback="checked")
    assert Assignment.objects.get(pk=approved.pk).status == "approved"


def test_simulated_worker_is_created_once_and_keeps_its_first_profile():
    first = worker_simulated_get_or_create(name="sim-1", profile={"accuracy": 0.9})
    again = worker_simulated_get_or_create(name="sim-1", profile={"accuracy": 0.1})
    assert again.pk == first.pk
    assert again.profile == {"accuracy": 0.9}
    assert (again.source, Worker.objects.count()) == ("simulated", 1)
