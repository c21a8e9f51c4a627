"""Crowd work: handing out HITs, expiry, golden policies, review, blocking, and the reads
reviewers and workers see (worker figures, suspect goldens, the review queue, the HIT page);
on PostgreSQL, simultaneous "next HIT" requests from many threads.

Time moves through the `now=` arguments, never by sleeping. `test_services.py` covers
`assignment_create` and the validation of answers; this file does not repeat it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.handout import (
    ACTIVE_STATUSES,
    assignment_create,
    assignments_close_batch,
    assignments_expire,
    hit_assign_next,
    hits_recount_slots,
    worker_for_user,
)
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchState,
    Candidate,
    Caption,
    Dataset,
    HITItem,
    Image,
    ItemRole,
    Judgement,
    Query,
    Verdict,
    Worker,
)
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.review import assignment_review, worker_block
from annotation.selectors import (
    assignment_page,
    assignment_review_rows,
    goldens_suspect,
    review_queue,
    worker_stats,
)
from annotation.submissions import AnswerInput, SubmissionResult, assignment_submit
from mitl.config import parse_batch_config

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LAYOUT = (ItemRole.GOLDEN_TN, ItemRole.TASK, ItemRole.GOLDEN_TP)  # pairs 1, 2, 3 on the page
RIGHT = {"golden_tn": "no", "task": "no", "golden_tp": "yes"}
FAILS_TP = {**RIGHT, "golden_tp": "no"}  # pair 3, a known match, answered NO
N_PAIRS = 12


# --- factories ------------------------------------------------------------------------------


@pytest.fixture
def tiny() -> Dataset:
    """Twelve images with one caption each, without image files."""
    dataset = Dataset.objects.create(name="tiny")
    for i in range(N_PAIRS):
        image = Image.objects.create(dataset=dataset, ext_id=i)
        Caption.objects.create(dataset=dataset, ext_id=100 + i, image=image, text=f"caption {i}")
    return dataset


def batch_make(dataset: Dataset, *, state: str = BatchState.ANNOTATING, **config) -> Batch:
    """A batch whose config went through the real validation, so its keys are the real ones."""
    config = parse_batch_config({"annotators": ["tfidf"], **config}).to_json()
    return Batch.objects.create(dataset=dataset, name="b", state=state, config=config)


def hit_make(
    batch: Batch, index: int, *, max_assignments: int = 2, roles: Sequence[str] = LAYOUT
) -> HIT:
    """A HIT with one item per role, in page order; no two task pairs of a batch are equal."""
    images = list(batch.dataset.images.order_by("ext_id"))
    captions = list(batch.dataset.captions.order_by("ext_id"))
    query, _ = Query.objects.get_or_create(batch=batch, direction="i2t", image=images[0])
    hit = HIT.objects.create(batch=batch, index=index, max_assignments=max_assignments)
    for position, role in enumerate(roles):
        image = images[(index + position) % N_PAIRS]
        caption = captions[(index + 2 * position + 1) % N_PAIRS]  # never its own image's
        candidate = None
        if role == ItemRole.TASK:
            candidate = Candidate.objects.create(
                batch=batch, query=query, direction="i2t", image=image, caption=caption
            )
        HITItem.objects.create(
            hit=hit, position=position, role=role, candidate=candidate, image=image, caption=caption
        )
    return hit


def worker_make(name: str) -> Worker:
    return Worker.objects.create(source="platform", external_id=name)


def assignment_make(hit: HIT, worker: Worker, status: str, deadline: datetime) -> Assignment:
    """An assignment already in `status`, written directly (the state, not how it got there)."""
    submitted_at = None if status in ("accepted", "expired") else deadline - MINUTE
    return Assignment.objects.create(
        hit=hit, worker=worker, status=status, deadline=deadline, submitted_at=submitted_at
    )


def answers(
    hit: HIT,
    levels: Mapping[str, str] = RIGHT,
    *,
    at: Mapping[int, str] | None = None,
    elapsed_ms: int = 1000,
) -> list[AnswerInput]:
    """One answer per item of `hit`: the level of its role, or `at[position]` where given."""
    at = at or {}
    return [
        AnswerInput(
            item_id=item.pk, level=at.get(item.position, levels[item.role]), elapsed_ms=elapsed_ms
        )
        for item in hit.items.order_by("position")
    ]


def submit(
    assignment: Assignment,
    answered: list[AnswerInput],
    *,
    policy: str = "approve_or_flag",
    now: datetime = T0 + MINUTE,
    worker: Worker | None = None,
) -> SubmissionResult:
    return assignment_submit(
        assignment=assignment,
        answers=answered,
        followups_required=False,
        golden_policy=policy,
        worker=worker,
        now=now,
    )


def work_done(
    hit: HIT,
    worker: Worker,
    levels: Mapping[str, str],
    *,
    elapsed_ms: int = 1000,
    policy: str = "approve_or_flag",
    now: datetime = T0 + MINUTE,
) -> Assignment:
    """Give `hit` to `worker` and submit answers by role, as of `now`."""
    assignment = assignment_create(hit=hit, worker=worker, now=T0)
    submit(assignment, answers(hit, levels, elapsed_ms=elapsed_ms), policy=policy, now=now)
    return assignment


def verdict_fields(hit: HIT, *, is_positive: bool) -> dict:
    return {
        "candidate": hit.items.get(role=ItemRole.TASK).candidate,
        "rule": "eccv",
        "is_positive": is_positive,
        "score": 1.0 if is_positive else 0.0,
        "confidence": 1.0,
        "n_judgements": 2,
        "distribution": {},
    }


def take(worker: Worker, now: datetime = T0) -> Assignment | None:
    return hit_assign_next(worker=worker, now=now)


def status_of(assignment: Assignment) -> str:
    return Assignment.objects.get(pk=assignment.pk).status


# --- worker_for_user ------------------------------------------------------------------------


def test_an_account_gets_one_platform_worker_named_after_it():
    user = get_user_model().objects.create_user("ada")
    first, again = worker_for_user(user=user), worker_for_user(user=user)
    assert first.pk == again.pk
    assert (first.source, first.external_id, Worker.objects.count()) == ("platform", "ada", 1)


# --- hit_assign_next ------------------------------------------------------------------------


def test_next_hit_is_the_first_free_one_with_a_deadline_from_the_batch_config(tiny):
    batch = batch_make(tiny, assignment_minutes=7)
    first, _ = hit_make(batch, 0), hit_make(batch, 1)

    assignment = take(worker_make("w0"))

    assert (assignment.hit, assignment.status) == (first, "accepted")
    assert assignment.deadline == T0 + 7 * MINUTE


def test_next_hit_resumes_the_open_assignment_instead_of_giving_a_second(tiny):
    batch = batch_make(tiny)
    for index in range(2):
        hit_make(batch, index)
    worker = worker_make("w0")

    first = take(worker)
    again = take(worker, now=T0 + 5 * MINUTE)

    assert again.pk == first.pk
    assert Assignment.objects.filter(worker=worker).count() == 1


@pytest.mark.parametrize("status", ["submitted", "approved", "rejected", "expired"])
def test_next_hit_never_gives_a_worker_a_hit_it_already_had(tiny, status):
    hit = hit_make(batch_make(tiny), 0, max_assignments=3)
    worker = worker_make("w0")
    assignment_make(hit, worker, status, deadline=T0 - MINUTE)

    assert take(worker) is None  # the only HIT still has two free slots, but not for this worker
    assert take(worker_make("w1")).hit == hit


def test_next_hit_never_gives_more_than_max_assignments(tiny):
    batch = batch_make(tiny)
    first, second = hit_make(batch, 0, max_assignments=2), hit_make(batch, 1, max_assignments=1)
    workers = [worker_make(f"w{i}") for i in range(4)]

    given = [take(worker) for worker in workers]

    assert [a.hit if a else None for a in given] == [first, first, second, None]
    assert Assignment.objects.count() == 3


@pytest.mark.parametrize(
    "state",
    [BatchState.DRAFT, BatchState.BUILDING, BatchState.AGGREGATING, BatchState.RELEASED],
)
def test_next_hit_skips_batches_that_are_not_annotating(tiny, state):
    hit_make(batch_make(tiny, state=state), 0)  # older, so it would come first
    worker = worker_make("w0")
    assert take(worker) is None

    open_hit = hit_make(batch_make(tiny), 0)
    assert take(worker).hit == open_hit


def test_next_hit_without_any_hit_returns_none(tiny):
    batch_make(tiny)
    assert take(worker_make("w0")) is None
    assert not Assignment.objects.exists()


def test_next_hit_refuses_a_blocked_worker(tiny):
    hit_make(batch_make(tiny), 0)
    worker = worker_make("w0")
    worker_block(worker=worker, blocked=True)

    with pytest.raises(ServiceError, match="your account is blocked"):
        take(worker)
    assert not Assignment.objects.exists()


def test_work_past_its_deadline_frees_the_slot_for_another_worker(tiny):
    batch = batch_make(tiny, assignment_minutes=30)
    hit = hit_make(batch, 0, max_assignments=1)
    late, other = worker_make("late"), worker_make("other")
    held = take(late)

    assert take(other, now=T0 + 29 * MINUTE) is None  # still held
    given = take(other, now=T0 + 31 * MINUTE)

    assert given.hit == hit
    assert status_of(held) == "expired"
    assert take(late, now=T0 + 32 * MINUTE) is None  # the expired HIT is not given back to it


def test_a_worker_whose_assignment_expired_gets_another_hit(tiny):
    batch = batch_make(tiny, assignment_minutes=30)
    first, second = hit_make(batch, 0), hit_make(batch, 1)
    worker = worker_make("w0")
    assert take(worker).hit == first

    again = take(worker, now=T0 + 31 * MINUTE)

    assert again.hit == second
    assert again.deadline == T0 + 61 * MINUTE


# --- assignments_expire ---------------------------------------------------------------------


def test_only_accepted_work_past_its_deadline_expires(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, i, max_assignments=5) for i in range(2)]
    worker = worker_make("w0")
    past, future = T0 - MINUTE, T0 + MINUTE
    made = {
        "accepted, late": assignment_make(hits[0], worker, "accepted", past),
        "accepted, in time": assignment_make(hits[1], worker, "accepted", future),
        "submitted, late": assignment_make(hits[0], worker_make("w1"), "submitted", past),
        "approved, late": assignment_make(hits[0], worker_make("w2"), "approved", past),
        "rejected, late": assignment_make(hits[0], worker_make("w3"), "rejected", past),
    }

    assert assignments_expire(now=T0) == 1

    assert {name: status_of(a) for name, a in made.items()} == {
        "accepted, late": "expired",
        "accepted, in time": "accepted",
        "submitted, late": "submitted",
        "approved, late": "approved",
        "rejected, late": "rejected",
    }


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


@pytest.mark.parametrize(
    ("policy", "levels", "status", "flagged", "golden_passed", "reviewed"),
    [
        ("approve_or_flag", RIGHT, "approved", False, True, True),
        ("approve_or_flag", FAILS_TP, "submitted", True, False, False),
        ("approve_or_reject", RIGHT, "approved", False, True, True),
        ("approve_or_reject", FAILS_TP, "rejected", False, False, True),
        ("review_all", RIGHT, "submitted", False, True, False),
        ("review_all", FAILS_TP, "submitted", True, False, False),
    ],
)
def test_the_golden_policy_decides_the_outcome_of_a_submission(
    tiny, policy, levels, status, flagged, golden_passed, reviewed
):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))

    result = submit(assignment, answers(hit, levels), policy=policy, now=T0 + 2 * MINUTE)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.flagged, stored.golden_passed) == (status, flagged, golden_passed)
    assert stored.submitted_at == T0 + 2 * MINUTE
    assert stored.reviewed_at == (T0 + 2 * MINUTE if reviewed else None)
    assert stored.reviewed_by is None  # decided automatically
    assert Judgement.objects.filter(assignment=assignment).count() == 3
    assert len(result.golden_failures) == (0 if golden_passed else 1)


def test_an_automatic_rejection_names_the_failed_pair_and_reopens_the_slot(tiny):
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    assignment = take(worker_make("w0"))

    submit(assignment, answers(hit, FAILS_TP), policy="approve_or_reject")

    stored = Assignment.objects.get(pk=assignment.pk)
    assert stored.feedback == "Rejected automatically: pair 3 is a known match but was answered no"
    assert take(worker_make("w1"), now=T0 + 2 * MINUTE).hit == hit


@pytest.mark.parametrize("policy", ["approve_or_flag", "approve_or_reject", "review_all"])
def test_a_repeat_submission_returns_the_stored_result_and_stores_nothing(tiny, policy):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    first = submit(assignment, answers(hit, FAILS_TP), policy=policy)
    before = Assignment.objects.filter(pk=assignment.pk).values().get()

    again = submit(assignment, answers(hit), policy=policy, now=T0 + 3 * MINUTE)

    assert again.created is False
    assert [j.pk for j in again.judgements] == [j.pk for j in first.judgements]
    assert again.golden_failures == first.golden_failures != ()
    assert Judgement.objects.count() == 3
    assert Assignment.objects.filter(pk=assignment.pk).values().get() == before


# --- assignment_review ----------------------------------------------------------------------


@pytest.mark.parametrize("feedback", ["", "   \n"])
def test_a_rejection_without_feedback_is_refused(tiny, feedback):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit, FAILS_TP))

    with pytest.raises(ServiceError, match="say why"):
        assignment_review(assignment=assignment, approve=False, feedback=feedback)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.flagged, stored.reviewed_at) == ("submitted", True, None)


@pytest.mark.parametrize("approve", [True, False])
def test_a_review_records_who_reviewed(tiny, approve):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit), policy="review_all")
    reviewer = get_user_model().objects.create_user("reviewer", is_staff=True)

    assignment_review(assignment=assignment, approve=approve, feedback="ok", reviewer=reviewer)

    stored = Assignment.objects.get(pk=assignment.pk)
    assert stored.reviewed_by == reviewer
    assert stored.status == ("approved" if approve else "rejected")


def test_a_rejection_hands_the_hit_to_the_next_worker_who_asks(tiny):
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    rejected_worker, next_worker = worker_make("w0"), worker_make("w1")
    assignment = take(rejected_worker)
    submit(assignment, answers(hit), policy="review_all")
    assert take(next_worker) is None  # submitted work holds its slot

    assignment_review(assignment=assignment, approve=False, feedback="answers look random")

    assert take(next_worker).hit == hit
    assert take(rejected_worker) is None


# --- worker_block ---------------------------------------------------------------------------


def test_blocking_expires_open_work_and_returns_its_hit_to_the_pool(tiny):
    batch = batch_make(tiny)
    done_hit, open_hit = (hit_make(batch, i, max_assignments=1) for i in range(2))
    blocked, other = worker_make("blocked"), worker_make("other")
    done = assignment_create(hit=done_hit, worker=blocked, now=T0)
    submit(done, answers(done_hit))
    held = take(blocked)
    assert held.hit == open_hit

    worker_block(worker=blocked, blocked=True)

    assert blocked.is_blocked is True
    assert (status_of(held), status_of(done)) == ("expired", "approved")
    assert take(other).hit == open_hit
    with pytest.raises(ServiceError, match="blocked"):
        take(blocked)


def test_an_unblocked_worker_can_take_hits_again(tiny):
    hit = hit_make(batch_make(tiny), 0)
    worker = worker_make("w0")
    worker_block(worker=worker, blocked=True)

    unblocked = worker_block(worker=worker, blocked=False)

    assert Worker.objects.get(pk=worker.pk).is_blocked is False
    assert take(unblocked).hit == hit


# --- worker_stats ---------------------------------------------------------------------------


def test_worker_stats_match_hand_computed_figures(tiny):
    batch = batch_make(tiny)
    h0, h1, h2, h3 = (hit_make(batch, i) for i in range(4))
    Verdict.objects.create(**verdict_fields(h0, is_positive=True))
    Verdict.objects.create(**verdict_fields(h1, is_positive=False))
    a, b, idle = worker_make("a"), worker_make("b"), worker_make("idle")

    # a: h0 all right (approved, 3 s); h1 both goldens wrong (flagged, then rejected, 6 s).
    work_done(h0, a, {**RIGHT, "task": "yes"}, elapsed_ms=1000)
    a_h1 = work_done(h1, a, {"golden_tn": "yes", "task": "no", "golden_tp": "no"}, elapsed_ms=2000)
    assignment_review(assignment=a_h1, approve=False, feedback="both known pairs wrong")
    # b: h0 golden TP wrong (flagged, then approved, 12 s); h1 right (approved, 3 s) but its
    # task disagrees with the verdict; h2 right, waiting for review (30 s); h3 still open.
    b_h0 = work_done(h0, b, {**RIGHT, "task": "yes", "golden_tp": "weak_no"}, elapsed_ms=4000)
    assignment_review(assignment=b_h0, approve=True, feedback="")
    work_done(h1, b, {**RIGHT, "task": "weak_yes"}, elapsed_ms=1000)
    work_done(h2, b, RIGHT, elapsed_ms=10_000, policy="review_all")
    assignment_create(hit=h3, worker=b, now=T0)

    stats = {s.worker.external_id: s for s in worker_stats(workers=[a, b, idle])}

    figures = {
        name: (
            s.submitted,
            s.approved,
            s.rejected,
            s.golden_accuracy,
            s.approval_rate,
            s.median_hit_seconds,
            s.verdict_agreement,
        )
        for name, s in stats.items()
    }
    assert figures == {
        "a": (2, 1, 1, 2 / 4, 1 / 2, 4.5, 2 / 2),
        "b": (3, 2, 0, pytest.approx(5 / 6), 1.0, 12.0, 1 / 2),  # median of 12, 3, 30 s
        "idle": (0, 0, 0, None, None, None, None),
    }
    assert [s.worker for s in worker_stats(workers=[b, a])] == [b, a]


# --- goldens_suspect ------------------------------------------------------------------------


def test_a_golden_most_workers_fail_is_suspect_and_one_few_fail_is_not(tiny):
    roles = (ItemRole.GOLDEN_TN, ItemRole.GOLDEN_TN, ItemRole.TASK, ItemRole.GOLDEN_TP)
    hit = hit_make(batch_make(tiny), 0, max_assignments=4, roles=roles)
    doubtful, sound = hit.items.get(position=0), hit.items.get(position=1)
    # Pair 1 is answered YES by 3 of 4 workers; pair 2 by 1 of 4.
    for i, at in enumerate([{0: "yes", 1: "yes"}, {0: "yes"}, {0: "yes"}, {}]):
        submit(assignment_create(hit=hit, worker=worker_make(f"w{i}"), now=T0), answers(hit, at=at))

    suspects = goldens_suspect()

    assert [(s.role, s.image, s.caption, s.answers, s.failures) for s in suspects] == [
        ("golden_tn", doubtful.image, doubtful.caption, 4, 3)
    ]
    assert (sound.image, sound.caption) != (doubtful.image, doubtful.caption)


# --- review_queue and assignment_review_rows ------------------------------------------------


def test_the_review_queue_lists_submitted_work_flagged_first_then_oldest_first(tiny):
    batch = batch_make(tiny)
    h0, h1, h2 = (hit_make(batch, i) for i in range(3))
    w0, w1, w2 = (worker_make(f"w{i}") for i in range(3))

    plain = work_done(h0, w0, RIGHT, policy="review_all", now=T0 + MINUTE)
    late_flag = work_done(h0, w1, FAILS_TP, now=T0 + 3 * MINUTE)
    early_flag = work_done(h1, w0, FAILS_TP, now=T0 + 2 * MINUTE)
    work_done(h1, w1, RIGHT)  # approved: nothing to review
    assignment_create(hit=h2, worker=w2, now=T0)  # open: nothing to review

    assert [a.pk for a in review_queue()] == [early_flag.pk, late_flag.pk, plain.pk]
    assert [a.pk for a in review_queue(limit=1)] == [early_flag.pk]


def test_review_rows_show_each_answer_beside_the_golden_truth_in_page_order(tiny):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    submit(assignment, answers(hit, {"golden_tn": "yes", "task": "no", "golden_tp": "weak_yes"}))

    rows = assignment_review_rows(assignment=assignment)

    assert [(r["position"], r["role"], r["answer"], r["golden_ok"]) for r in rows] == [
        (1, "golden_tn", "100% YES", False),
        (2, "task", "100% NO", None),
        (3, "golden_tp", "Partially YES, but…", True),
    ]
    assert [r["expected"] for r in rows] == ["a NO (known mismatch)", None, "a YES (known match)"]


# --- assignment_page ------------------------------------------------------------------------


def test_the_hit_page_lists_pairs_in_page_order_and_nothing_that_tells_goldens_apart(tiny):
    roles = (ItemRole.TASK, ItemRole.GOLDEN_TP, ItemRole.TASK, ItemRole.GOLDEN_TN)
    hit = hit_make(batch_make(tiny, followups=False), 0, roles=roles)
    Image.objects.filter(pk=hit.items.get(position=1).image_id).update(file="images/1.png")
    assignment = take(worker_make("w0"))

    page = assignment_page(assignment=assignment)

    assert set(page) == {"followups", "items"}
    assert page["followups"] is False
    items = list(hit.items.order_by("position"))
    item_keys = {"id", "position", "image_url", "caption"}  # no role, nothing golden-only
    assert [set(entry) for entry in page["items"]] == [item_keys] * len(items)
    assert [(e["id"], e["position"], e["caption"]) for e in page["items"]] == [
        (item.pk, item.position, item.caption.text) for item in items
    ]
    urls = [entry["image_url"] for entry in page["items"]]
    assert urls[1] == reverse("frontend:item-image", args=[assignment.pk, items[1].pk])
    assert urls[0] is None  # an image without a file


# --- concurrency (PostgreSQL) ---------------------------------------------------------------

RACE_ROUNDS = 5
RACE_WORKERS = 50
RACE_HITS = 8
RACE_SLOTS = 3


def next_hit_all_at_once(workers: list[Worker]) -> list[object]:
    """Ask for a HIT for each worker from its own thread and connection, all at once.

    Returns, per request in order, the assignment, None, or the exception it raised.
    """
    barrier = threading.Barrier(len(workers))
    outcomes: list[object] = [None] * len(workers)

    def request(i: int) -> None:
        try:
            connection.ensure_connection()  # connect first, so the requests start together
            barrier.wait()
            outcomes[i] = hit_assign_next(worker=Worker.objects.get(pk=workers[i].pk))
        except Exception as exc:  # reported by the test, not swallowed
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=request, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def race_hits(dataset: Dataset) -> Batch:
    batch = batch_make(dataset)
    for index in range(RACE_HITS):
        hit_make(batch, index, max_assignments=RACE_SLOTS)
    return batch


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_simultaneous_next_hit_requests_fill_every_slot_exactly_once(tiny):
    assert connection.vendor == "postgresql"
    for round_ in range(RACE_ROUNDS):
        batch = race_hits(tiny)
        workers = [worker_make(f"round{round_}-w{i}") for i in range(RACE_WORKERS)]

        outcomes = next_hit_all_at_once(workers)

        errors = [o for o in outcomes if not isinstance(o, Assignment | None)]
        assert errors == [], f"round {round_}"
        given = Assignment.objects.filter(hit__batch=batch)
        per_hit = dict(given.values_list("hit").annotate(n=Count("pk")))
        assert max(per_hit.values()) <= RACE_SLOTS, f"round {round_}: {per_hit}"
        # Slots only fill during the race, so a request told "nothing free" while slots
        # stay free at the end was told wrong.
        assert given.count() == RACE_HITS * RACE_SLOTS, f"round {round_}: {per_hit}"
        assert not given.values("worker").annotate(n=Count("pk")).filter(n__gt=1).exists()
        got = {w.pk: o.pk for w, o in zip(workers, outcomes, strict=True) if o is not None}
        assert got == dict(given.values_list("worker", "pk")), f"round {round_}"
        batch.state = BatchState.RELEASED  # the next round races on fresh HITs only
        batch.save(update_fields=["state"])


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_simultaneous_requests_of_one_worker_share_one_assignment(tiny):
    race_hits(tiny)
    worker = worker_make("double-clicker")

    outcomes = next_hit_all_at_once([worker] * 10)

    assert all(isinstance(o, Assignment) for o in outcomes), outcomes
    assert Assignment.objects.filter(worker=worker).count() == 1
    assert {o.pk for o in outcomes} == {Assignment.objects.get(worker=worker).pk}


# Lock order: each of these frees a slot by writing an overdue MTurk assignment and then
# recounting its HIT, while the MTurk page, holding that HIT's row, gives the same
# assignment's slot to a newcomer (`_free_returned_slot`). Before the HIT-first order they
# waited for each other crosswise, and PostgreSQL killed one of them as a deadlock.
LATE = T0 + 60 * MINUTE  # the first MTurk assignment (deadline T0 + 30 min) is overdue


def _expire(stale: Assignment) -> object:
    return assignments_expire(now=LATE)


def _submit_late(stale: Assignment) -> object:
    return mturk_assignment_submit(assignment=stale, answers=answers(stale.hit), now=LATE)


def _block(stale: Assignment) -> object:
    return worker_block(worker=stale.worker, blocked=True)


def _locks_assignments(sql: str) -> bool:
    sql = sql.upper()
    locking = "FOR UPDATE" in sql or "FOR NO KEY UPDATE" in sql
    return (locking and 'FROM "ANNOTATION_ASSIGNMENT"' in sql) or sql.startswith(
        'UPDATE "ANNOTATION_ASSIGNMENT"'
    )


def _locks_a_hit(sql: str) -> bool:
    sql = sql.upper()
    return 'FROM "ANNOTATION_HIT"' in sql and ("FOR UPDATE" in sql or "FOR NO KEY UPDATE" in sql)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("free_slot", [_expire, _submit_late, _block], ids=lambda f: f.__name__)
def test_freeing_a_slot_and_the_mturk_page_taking_it_never_deadlock(tiny, free_slot):
    """Force the interleaving that deadlocked: the writer holds the overdue assignment's
    row, then the MTurk page locks the HIT; the writer goes on only once the page holds
    the HIT or waits for a lock. With one lock order, the page waits and nothing fails."""
    assert connection.vendor == "postgresql"
    hit = hit_make(batch_make(tiny), 0, max_assignments=2)
    stale = mturk_assignment_open(hit=hit, worker_id="A1W1", assignment_id="3A01", now=T0)
    mturk_assignment_open(hit=hit, worker_id="A1W2", assignment_id="3A02", now=T0 + 40 * MINUTE)
    writer_locked, page_holds_hit = threading.Event(), threading.Event()
    page_pid: list[int] = []
    outcomes: dict[str, object] = {}

    def writer_wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if _locks_assignments(sql) and not writer_locked.is_set():
            writer_locked.set()
            with connection.cursor() as cursor:  # wait until the page holds or waits
                for _ in range(500):
                    cursor.execute("SELECT cardinality(pg_blocking_pids(%s))", page_pid)
                    if page_holds_hit.is_set() or cursor.fetchone()[0]:
                        break
                    time.sleep(0.01)
        return result

    def page_wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if _locks_a_hit(sql):
            page_holds_hit.set()
        return result

    def run(name: str, wrapper, call) -> None:
        try:
            with connection.cursor() as cursor:  # a bug fails the test instead of hanging it
                cursor.execute("SET lock_timeout = '20s'")
                cursor.execute("SELECT pg_backend_pid()")
                if name == "page":
                    page_pid.append(cursor.fetchone()[0])
            with connection.execute_wrapper(wrapper):
                outcomes[name] = call()
        except Exception as exc:  # reported by the test, not swallowed
            outcomes[name] = exc
        finally:
            connection.close()

    def take_the_slot() -> object:
        assert writer_locked.wait(timeout=20)
        return mturk_assignment_open(hit=hit, worker_id="A1W3", assignment_id="3A03", now=LATE)

    page = threading.Thread(target=run, args=("page", page_wrapper, take_the_slot))
    page.start()
    while not page_pid:
        time.sleep(0.01)
    writer = threading.Thread(target=run, args=("writer", writer_wrapper, lambda: free_slot(stale)))
    writer.start()
    writer.join()
    page.join()

    if free_slot is _submit_late:
        assert isinstance(outcomes["writer"], ServiceError), outcomes
        assert "expired" in str(outcomes["writer"])
    else:
        assert not isinstance(outcomes["writer"], Exception), outcomes
    newcomer = outcomes["page"]
    assert isinstance(newcomer, Assignment), outcomes
    assert (newcomer.external_id, newcomer.status) == ("3A03", "accepted")
    assert status_of(stale) == "expired"
    assert slot_hints_match_the_truth()


# --- the slot hint ---------------------------------------------------------------------------


def slot_hints_match_the_truth() -> bool:
    exact = {
        hit.pk: hit.assignments.filter(status__in=ACTIVE_STATUSES).count()
        for hit in HIT.objects.all()
    }
    return dict(HIT.objects.values_list("pk", "active_assignments")) == exact


def test_the_slot_hint_follows_every_way_work_takes_or_frees_a_slot(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, index, max_assignments=3) for index in range(2)]
    workers = [worker_make(f"w{i}") for i in range(5)]
    taken = [take(worker) for worker in workers]
    assert slot_hints_match_the_truth()
    submit(taken[0], answers(taken[0].hit, FAILS_TP), policy="approve_or_reject")
    assert slot_hints_match_the_truth()
    flagged = taken[1]
    submit(flagged, answers(flagged.hit, FAILS_TP))
    assignment_review(assignment=flagged, approve=False, feedback="pair 3 is a match")
    assert slot_hints_match_the_truth()
    worker_block(worker=workers[2], blocked=True)
    assert slot_hints_match_the_truth()
    assignments_expire(now=T0 + 24 * 60 * MINUTE)
    assert slot_hints_match_the_truth()
    HIT.objects.filter(pk=hits[0].pk).update(active_assignments=3)  # drifted: looks full
    assert hits_recount_slots() == 1  # only the drifted HIT is written
    assert slot_hints_match_the_truth()
    assert take(worker_make("late"), now=T0 + 24 * 60 * MINUTE).hit == hits[0]


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


def test_closing_a_batch_ends_its_open_work_only(tiny):
    batch, other = batch_make(tiny), batch_make(tiny)
    open_here = assignment_create(hit=hit_make(batch, 0), worker=worker_make("a"), now=T0)
    done_here = work_done(hit_make(batch, 1), worker_make("b"), RIGHT)
    open_there = assignment_create(hit=hit_make(other, 0), worker=worker_make("c"), now=T0)
    assert assignments_close_batch(batch_id=batch.pk) == 1
    assert [status_of(a) for a in (open_here, done_here, open_there)] == [
        "expired",
        "approved",
        "accepted",
    ]
