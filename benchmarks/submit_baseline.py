"""The submit benchmark's baseline: the same judgements written straight with psycopg2.

The floor for the same writes: one transaction per HIT (one INSERT of its rows and one
UPDATE of its assignment, as the service writes them), no web layer. Everything the
service computes is done before the clock starts.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg2
from common import threads_run
from django.utils import timezone
from psycopg2.extras import execute_values
from submit_fixture import BenchError, HitRows

from annotation.models import Assignment, Judgement, Worker, WorkerSource
from mitl.judgements import Level, shortcomings_to_mask, wrong_concepts_to_mask
from mitl.quality import golden_check


@dataclass
class BaselineHit:
    """A baseline HIT's assignment, its judgement rows and the assignment's new state."""

    assignment_id: int
    rows: list[tuple]
    status: str
    passed: bool


def baseline_assignments_create(hits: list[HitRows], n_clients: int) -> list[int]:
    """Accepted assignments for the baseline HITs, held by `n_clients` workers of their own.

    Made at set-up, so the assignment table has a realistic size (and statistics) when ours
    runs. Their workers have no account: the HTTP clients' own open work stays theirs.
    """
    workers = Worker.objects.bulk_create(
        [
            Worker(source=WorkerSource.SIMULATED, external_id=f"bench-baseline-{c:02d}")
            for c in range(n_clients)
        ]
    )
    deadline = timezone.now() + timedelta(days=1)
    assignments = Assignment.objects.bulk_create(
        [
            Assignment(hit_id=hit.hit_id, worker=workers[n % n_clients], deadline=deadline)
            for n, hit in enumerate(hits)
        ],
        batch_size=5000,
    )
    return [assignment.pk for assignment in assignments]


def baseline_prepare(
    hits: list[HitRows], assignment_ids: list[int], answers: list[list[dict[str, Any]]]
) -> list[BaselineHit]:
    """The rows ours wrote, HIT by HIT, ready to insert for the baseline's assignments.

    Everything the service computes (follow-up masks, golden check, new status) is done
    here, before the clock: the baseline only writes.
    """
    prepared = []
    for assignment_id, hit, hit_answers in zip(assignment_ids, hits, answers, strict=True):
        rows = []
        levels = []
        for item_id, answer in zip(hit.item_ids, hit_answers, strict=True):
            level = Level(answer["level"])
            levels.append(level)
            rows.append(
                (
                    assignment_id,
                    item_id,
                    level.value,
                    shortcomings_to_mask(answer["shortcomings"]),
                    wrong_concepts_to_mask(answer["wrong_concepts"]),
                    answer["other_text"],
                    answer["elapsed_ms"],
                )
            )
        passed = golden_check(
            (role, position, level)
            for position, (role, level) in enumerate(zip(hit.roles, levels, strict=True))
        ).passed
        # approve_or_flag: passed work is approved, the rest waits flagged for a person.
        status = "approved" if passed else "submitted"
        prepared.append(BaselineHit(assignment_id, rows, status, passed))
    return prepared


def baseline_run(
    work: list[BaselineHit], n_clients: int, database_url: str
) -> tuple[float, list[float]]:
    """The same clients write the same HITs straight into PostgreSQL, one transaction each.

    Clients take HITs from one shared queue until it is empty. Returns (wall seconds,
    per-HIT transaction milliseconds).
    """
    judgement_table = Judgement._meta.db_table
    assignment_table = Assignment._meta.db_table
    insert = (
        f"INSERT INTO {judgement_table} (assignment_id, item_id, level, shortcomings, "
        "wrong_concepts, other_text, elapsed_ms, created_at) VALUES %s"
    )
    template = "(%s, %s, %s, %s, %s, %s, %s, now())"
    update = (
        f"UPDATE {assignment_table} SET status = %s, submitted_at = now(), golden_passed = %s, "
        "reviewed_at = CASE WHEN %s THEN now() END, flagged = %s, feedback = '' WHERE id = %s"
    )
    queue = deque(work)
    lock = threading.Lock()
    latencies: list[list[float]] = [[] for _ in range(n_clients)]
    errors: list[BaseException] = []
    window: dict[str, float] = {}
    ready = threading.Barrier(
        n_clients + 1, action=lambda: window.__setitem__("start", time.perf_counter())
    )
    finished = [0.0] * n_clients

    def run(c: int) -> None:
        conn = psycopg2.connect(database_url)
        try:
            ready.wait()
            while True:
                with lock:
                    if not queue or errors:
                        break
                    hit = queue.popleft()
                start = time.perf_counter()
                with conn, conn.cursor() as cursor:  # one transaction, committed on exit
                    execute_values(cursor, insert, hit.rows, template=template)
                    approved = hit.status == "approved"
                    cursor.execute(
                        update,
                        (hit.status, hit.passed, approved, not hit.passed, hit.assignment_id),
                    )
                latencies[c].append((time.perf_counter() - start) * 1000)
        except BaseException as exc:
            errors.append(exc)
            ready.abort()
        finally:
            finished[c] = time.perf_counter()
            conn.close()

    threads_run(n_clients, run, ready)
    if errors:
        raise BenchError(f"a baseline client failed: {errors[0]!r}") from errors[0]
    return max(finished) - window["start"], [ms for mine in latencies for ms in mine]
