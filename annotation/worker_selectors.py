"""Reads for the workers pages: each worker's figures and flags, and one worker's answers
over time.

The arithmetic (agreement with co-workers, flags, hourly pay) is `mitl.worker_flags`.
Work counts once submitted; rejected work is left out of what co-workers answered (its
answers are not trusted) and of the measured pay (it is not paid), but a worker's own
agreement and speed include all of their submitted work.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from mitl import wages as pay
from mitl.judgements import LEVEL_LABELS, POSITIVE_LEVELS, Level
from mitl.worker_flags import (
    FLAG_TEXT,
    WorkerFlag,
    coworker_agreement,
    measured_hourly,
    median_seconds_per_pair,
    worker_flags,
)

from .models import Assignment, AssignmentStatus, Batch, ItemRole, Judgement, Worker
from .mturk.hit_settings import hit_settings_or_defaults
from .review_selectors import WorkerStats, worker_stats

LEVELS = tuple(Level)


@dataclass(frozen=True)
class WorkerFigures:
    """A worker's review figures (`stats`) with speed, pay, agreement and flags."""

    stats: WorkerStats
    pairs: int  # pairs judged in submitted work
    median_pair_seconds: float | None
    hourly: Decimal | None  # measured pay per hour of work not rejected
    coworker_agreement: float | None
    coworkers_compared: int  # answers that had a co-workers' majority to compare with
    flags: tuple[WorkerFlag, ...]

    @property
    def worker(self) -> Worker:
        return self.stats.worker

    @property
    def flag_texts(self) -> list[str]:
        return [FLAG_TEXT[flag] for flag in self.flags]


def worker_figures(
    *, source: str | None = None, batch_id: int | None = None, flag: str | None = None
) -> list[WorkerFigures]:
    """Return every worker's figures, optionally only those of a source, who worked on a
    batch, or who raise a flag (`WorkerFlag` value)."""
    workers = Worker.objects.order_by("pk")
    if source:
        workers = workers.filter(source=source)
    if batch_id is not None:
        workers = workers.filter(assignments__hit__batch_id=batch_id).distinct()
    figures = _figures(list(workers))
    if flag:
        figures = [row for row in figures if flag in row.flags]
    return figures


def worker_figures_one(*, worker: Worker) -> WorkerFigures:
    """Return one worker's figures."""
    return _figures([worker])[0]


def _figures(workers: list[Worker]) -> list[WorkerFigures]:
    ids = [w.pk for w in workers]
    rows = list(
        Judgement.objects.filter(
            assignment__worker_id__in=ids, assignment__submitted_at__isnull=False
        )
        .values_list(
            "assignment__worker_id",
            "assignment_id",
            "assignment__status",
            "assignment__hit__batch_id",
            "item__role",
            "item__candidate_id",
            "level",
            "elapsed_ms",
        )
        .order_by("pk")
    )
    others = _coworker_answers(
        {row[5] for row in rows if row[4] == ItemRole.TASK and row[5] is not None}
    )
    per_worker: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        per_worker[row[0]].append(row)
    stats = {row.worker.pk: row for row in worker_stats(workers=workers)}
    return [_one(stats[w.pk], per_worker[w.pk], others) for w in workers]


def _coworker_answers(candidates: set[int]) -> dict[int, list[tuple[int, bool]]]:
    """Map each task pair to the (worker, yes) answers of work submitted and not rejected."""
    answers: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    rows = (
        Judgement.objects.filter(
            item__candidate_id__in=candidates,
            item__role=ItemRole.TASK,
            assignment__submitted_at__isnull=False,
        )
        .exclude(assignment__status=AssignmentStatus.REJECTED)
        .values_list("item__candidate_id", "assignment__worker_id", "level")
    )
    for candidate_id, worker_id, level in rows:
        answers[candidate_id].append((worker_id, Level(level) in POSITIVE_LEVELS))
    return answers


def _one(
    stats: WorkerStats, rows: list[tuple], others: dict[int, list[tuple[int, bool]]]
) -> WorkerFigures:
    me = stats.worker.pk
    own = [
        (candidate, Level(level) in POSITIVE_LEVELS)
        for _, _, _, _, role, candidate, level, _ in rows
        if role == ItemRole.TASK and candidate is not None
    ]
    theirs = {
        candidate: [yes for worker, yes in others.get(candidate, []) if worker != me]
        for candidate, _ in own
    }
    agreement = coworker_agreement(own, theirs)
    reward, seconds = _paid_work(rows)
    median_pair = median_seconds_per_pair([row[7] for row in rows])
    hourly = measured_hourly(reward=reward, seconds=seconds)
    return WorkerFigures(
        stats=stats,
        pairs=len(rows),
        median_pair_seconds=median_pair,
        hourly=hourly,
        coworker_agreement=agreement.share,
        coworkers_compared=agreement.compared,
        flags=worker_flags(
            median_pair_seconds=median_pair, hourly=hourly, paid_untimed=reward > 0 and seconds == 0
        ),
    )


def _paid_work(rows: Iterable[tuple]) -> tuple[Decimal, Decimal]:
    """Return the rewards and measured seconds (`mitl.wages.assignment_seconds`) of the
    work in `rows` that was not rejected."""
    times: dict[int, list[int]] = defaultdict(list)
    batch_of: dict[int, int] = {}
    for _, assignment_id, status, batch_id, _, _, _, elapsed_ms in rows:
        if status == AssignmentStatus.REJECTED:
            continue
        times[assignment_id].append(elapsed_ms)
        batch_of[assignment_id] = batch_id
    settings = {
        batch.pk: hit_settings_or_defaults(batch)
        for batch in Batch.objects.filter(pk__in=set(batch_of.values()))
    }
    reward = sum((settings[batch_of[a]].reward for a in times), Decimal(0))
    seconds = sum(
        (
            pay.assignment_seconds(ms, limit_seconds=settings[batch_of[a]].assignment_minutes * 60)
            for a, ms in times.items()
        ),
        Decimal(0),
    )
    return reward, seconds


@dataclass(frozen=True)
class LevelCounts:
    """How often each of the four answers was given in one period or batch."""

    label: str
    counts: dict[Level, int] = field(default_factory=dict)

    @property
    def cells(self) -> list[int]:
        return [self.counts.get(level, 0) for level in LEVELS]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class WorkerHistory:
    by_day: list[LevelCounts]
    by_batch: list[LevelCounts]
    level_labels: list[str]


def worker_history(*, worker: Worker) -> WorkerHistory:
    """Return a worker's submitted answers counted by level, per day and per batch."""
    days: dict[date, Counter] = defaultdict(Counter)
    batches: dict[tuple[int, str], Counter] = defaultdict(Counter)
    rows = Judgement.objects.filter(
        assignment__worker=worker, assignment__submitted_at__isnull=False
    ).values_list(
        "assignment__submitted_at",
        "assignment__hit__batch_id",
        "assignment__hit__batch__name",
        "level",
    )
    for submitted_at, batch_id, batch_name, level in rows:
        days[submitted_at.date()][Level(level)] += 1
        batches[(batch_id, batch_name)][Level(level)] += 1
    return WorkerHistory(
        by_day=[LevelCounts(day.isoformat(), dict(days[day])) for day in sorted(days)],
        by_batch=[
            LevelCounts(f"{name} (batch {pk})", dict(batches[(pk, name)]))
            for pk, name in sorted(batches)
        ],
        level_labels=[LEVEL_LABELS[level] for level in LEVELS],
    )


def worker_recent_assignments(*, worker: Worker, limit: int = 20) -> list[Assignment]:
    """Return a worker's latest submitted assignments, newest first."""
    return list(
        Assignment.objects.filter(worker=worker, submitted_at__isnull=False)
        .select_related("hit__batch")
        .order_by("-submitted_at", "-pk")[:limit]
    )
