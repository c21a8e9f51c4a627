"""What the crowd-work tests share: a batch with HITs in a fixed page layout, workers,
assignments in a given state, answers by role, and shortcuts for taking and submitting work.

Time moves through the `now=` arguments, never by sleeping: `T0` is the tests' "now". The
`tiny` dataset they build on is the fixture of `conftest.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from django.db import connection

from annotation.handout import assignment_create, hit_assign_next
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchState,
    Candidate,
    Dataset,
    HITItem,
    ItemRole,
    Query,
    Worker,
    items_shown_to,
)
from annotation.submissions import AnswerInput, SubmissionResult, assignment_submit
from mitl.config import parse_batch_config

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LAYOUT = (ItemRole.GOLDEN_TN, ItemRole.TASK, ItemRole.GOLDEN_TP)  # pairs 1, 2, 3 on the page
RIGHT = {"golden_tn": "no", "task": "no", "golden_tp": "yes"}
FAILS_TP = {**RIGHT, "golden_tp": "no"}  # pair 3, a known match, answered NO
N_PAIRS = 12


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
    assignment: Assignment | None = None,
) -> list[AnswerInput]:
    """One answer per item `assignment` shows (default: what a new one would show): the
    level of its role, or `at[position]` where given."""
    at = at or {}
    shown = hit.items.filter(items_shown_to(assignment.pk if assignment else None))
    return [
        AnswerInput(
            item_id=item.pk, level=at.get(item.position, levels[item.role]), elapsed_ms=elapsed_ms
        )
        for item in shown.order_by("position")
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
    answered = answers(hit, levels, elapsed_ms=elapsed_ms, assignment=assignment)
    submit(assignment, answered, policy=policy, now=now)
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


def shown_in_seed_order(assignment: Assignment, seed: int | None) -> Assignment:
    """Fix the order the assignment shows its pairs in (None: the HIT's own order)."""
    Assignment.objects.filter(pk=assignment.pk).update(page_seed=seed)
    assignment.page_seed = seed
    return assignment


def status_of(assignment: Assignment) -> str:
    return Assignment.objects.get(pk=assignment.pk).status


def all_at_once(calls: Sequence[Callable[[], object]]) -> list[object]:
    """Run each call in its own thread and database connection, all released together.

    Returns, per call in order, what it returned or the exception it raised.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            connection.ensure_connection()  # connect first, so the calls start together
            barrier.wait()
            outcomes[i] = calls[i]()
        except Exception as exc:  # reported by the test, not swallowed
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
