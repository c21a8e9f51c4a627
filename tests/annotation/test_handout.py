"""Handing out crowd work: the platform worker of an account, the next free HIT, expiry,
closing a batch, and the slot hint; on PostgreSQL, simultaneous "next HIT" requests from
many threads and the lock order that keeps freeing a slot from deadlocking with the MTurk page.

Time moves through the `now=` arguments, never by sleeping. `test_services.py` covers
`assignment_create`; this file does not repeat it.
"""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count

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
from annotation.models import HIT, Assignment, Batch, BatchState, Dataset, Worker
from annotation.mturk.hit_page import mturk_assignment_open, mturk_assignment_submit
from annotation.review import assignment_review, worker_block

from .crowd_factories import (
    FAILS_TP,
    MINUTE,
    RIGHT,
    T0,
    all_at_once,
    answers,
    assignment_make,
    batch_make,
    hit_make,
    status_of,
    submit,
    take,
    work_done,
    worker_make,
)

pytestmark = pytest.mark.django_db


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


# --- assignments_close_batch ----------------------------------------------------------------


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


# --- concurrency (PostgreSQL) ---------------------------------------------------------------

RACE_ROUNDS = 5
RACE_WORKERS = 50
RACE_HITS = 8
RACE_SLOTS = 3


def next_hit_all_at_once(workers: list[Worker]) -> list[object]:
    """Ask for a HIT for each worker from its own thread and connection, all at once.

    Returns, per request in order, the assignment, None, or the exception it raised.
    """

    def ask(worker_id: int) -> Assignment | None:  # the worker read on the thread's connection
        return hit_assign_next(worker=Worker.objects.get(pk=worker_id))

    return all_at_once([partial(ask, worker.pk) for worker in workers])


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


def _backends_waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_request_waits_for_the_only_free_hit_while_another_holds_it(tiny):
    """Every free HIT locked for a moment is not "nothing free": the request waits (in a
    transaction of its own, holding no HIT) and gets the HIT once the holder lets go."""
    assert connection.vendor == "postgresql"
    hit = hit_make(batch_make(tiny), 0, max_assignments=1)
    worker = worker_make("waiter")
    holding, release, outcome = threading.Event(), threading.Event(), {}

    def hold() -> None:
        try:
            with transaction.atomic():
                HIT.objects.select_for_update().get(pk=hit.pk)
                holding.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    def ask() -> None:
        try:
            outcome["given"] = hit_assign_next(worker=worker)
        finally:
            connection.close()

    holder, asker = threading.Thread(target=hold), threading.Thread(target=ask)
    holder.start()
    assert holding.wait(timeout=30)
    asker.start()
    deadline = time.monotonic() + 30
    while not _backends_waiting_for_a_lock() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert _backends_waiting_for_a_lock() == 1
        assert asker.is_alive() and "given" not in outcome  # waiting, not told "none"
    finally:
        release.set()
        holder.join(timeout=30)
        asker.join(timeout=30)
    assert outcome["given"].hit_id == hit.pk


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
