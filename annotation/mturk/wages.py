"""Fair pay of a batch: measured time per HIT, the effective hourly wage, and top-ups.

Reads only; the arithmetic is `mitl.wages` (see there how an assignment's time is measured
and which median and quartiles are used). Paying the top-ups is
`annotation.mturk.topups.mturk_topups_pay`.

The assignments that count are those aggregation counts (`annotation.judgements_counted`:
approved, MTurk work only once MTurk confirmed it), but all their time is paid: every
judgement of an assignment is summed, goldens included. The batch's figures include every
source of counted work (simulated work too: the demo shows them); the estimate before
publication uses people's work only (platform and MTurk workers), since a simulated
worker's time is whatever the simulator was told.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db.models import Count, QuerySet, Sum

from annotation.judgements_counted import assignments_counted
from annotation.models import Assignment, Batch, Worker, WorkerSource
from mitl import wages as pay
from mitl.config import batch_config

from .hit_settings import hit_settings_or_defaults
from .payments import TOPUP, bonus_token
from .state import state_read

# The estimate from other batches looks at this many of the latest approved assignments.
ESTIMATE_SAMPLE = 2000
HUMAN_SOURCES = (WorkerSource.PLATFORM, WorkerSource.MTURK)
NO_ESTIMATE = (
    "no measured time yet: publish a few HITs on the sandbox or let platform workers do some first"
)


@dataclass(frozen=True)
class Measured:
    """An approved assignment and its measured time (`mitl.wages.assignment_seconds`)."""

    assignment: Assignment
    seconds: Decimal
    pairs: int


@dataclass(frozen=True)
class WorkerWages:
    worker: Worker
    stats: pay.WageStats

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker.external_id,
            "source": self.worker.source,
            **self.stats.to_json(),
        }


@dataclass(frozen=True)
class BatchWages:
    """A batch's approved work: its time per HIT and hourly wage, overall and per worker.

    `overall` is None when the batch has no approved work yet.
    """

    batch_id: int
    reward: Decimal
    minimum_hourly: Decimal | None
    limit_seconds: int
    overall: pay.WageStats | None
    workers: list[WorkerWages]

    @property
    def workers_below(self) -> int:
        return sum(1 for row in self.workers if row.stats.below_minimum)

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch_id,
            "reward": str(self.reward),
            "minimum_hourly": None if self.minimum_hourly is None else str(self.minimum_hourly),
            "limit_seconds": self.limit_seconds,
            "overall": self.overall.to_json() if self.overall else None,
            "workers": [row.to_json() for row in self.workers],
            "workers_below": self.workers_below,
        }


@dataclass(frozen=True)
class TopUp:
    """What an approved MTurk assignment paid below the minimum for its measured time is owed.

    `paid`: a top-up for it is recorded in `Batch.mturk["bonuses"]` under `token`; `amount`
    is then what was paid.
    """

    assignment: Assignment
    seconds: Decimal
    reward: Decimal
    minimum_hourly: Decimal
    amount: Decimal
    paid: bool
    token: str

    @property
    def hourly(self) -> Decimal | None:
        return pay.hourly_wage(self.reward, self.seconds) if self.seconds else None

    def reason(self) -> str:
        """Tell the worker why the bonus comes: the minimum and the time measured."""
        return (
            f"Top-up to our minimum pay of ${self.minimum_hourly} per hour: your measured time "
            f"on this HIT was {pay.seconds_text(self.seconds)} seconds, so its reward of "
            f"${self.reward} made ${self.hourly} per hour. This bonus of ${self.amount} "
            "brings it to the minimum. Thank you for your work."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "assignment": self.assignment.external_id,
            "worker": self.assignment.worker.external_id,
            "seconds": str(self.seconds),
            "reward": str(self.reward),
            "hourly": None if self.hourly is None else str(self.hourly),
            "minimum_hourly": str(self.minimum_hourly),
            "amount": str(self.amount),
            "paid": self.paid,
        }


def _approved(*, batch_id: int | None = None) -> QuerySet[Assignment]:
    """Counted work (of one batch, or of all: None) with its judgements' time and count."""
    return (
        assignments_counted(batch_id=batch_id)
        # Every judgement, goldens included: the worker is paid for all the time on the HIT.
        .annotate(elapsed=Sum("judgements__elapsed_ms"), pairs=Count("judgements"))
        .filter(pairs__gt=0)  # nothing measured: e.g. approved on MTurk without answers here
    )


def _measured(assignments: QuerySet[Assignment], *, limit_seconds: int) -> list[Measured]:
    return [
        Measured(
            assignment=assignment,
            seconds=pay.assignment_seconds([assignment.elapsed], limit_seconds=limit_seconds),
            pairs=assignment.pairs,
        )
        for assignment in assignments
    ]


def batch_measured(*, batch: Batch, limit_seconds: int) -> list[Measured]:
    """Return the batch's approved assignments with their measured times, oldest first."""
    assignments = _approved(batch_id=batch.pk).select_related("worker", "hit").order_by("pk")
    return _measured(assignments, limit_seconds=limit_seconds)


def batch_wages(*, batch: Batch) -> BatchWages:
    """Return the time per HIT and hourly wage of the batch's approved work, overall and per
    worker (the lowest paid first)."""
    settings = hit_settings_or_defaults(batch)
    limit = settings.assignment_minutes * 60
    measured = batch_measured(batch=batch, limit_seconds=limit)
    reward, minimum = settings.reward, settings.min_hourly_wage
    by_worker: dict[int, list[Measured]] = defaultdict(list)
    for row in measured:
        by_worker[row.assignment.worker_id].append(row)
    workers = [
        WorkerWages(
            worker=rows[0].assignment.worker,
            stats=pay.wage_stats([r.seconds for r in rows], reward=reward, minimum_hourly=minimum),
        )
        for rows in by_worker.values()
    ]
    workers.sort(
        key=lambda row: (
            row.stats.hourly is None,
            row.stats.hourly or 0,
            row.worker.source,
            row.worker.external_id,
        )
    )
    return BatchWages(
        batch_id=batch.pk,
        reward=settings.reward,
        minimum_hourly=settings.min_hourly_wage,
        limit_seconds=limit,
        overall=pay.wage_stats(
            [row.seconds for row in measured], reward=reward, minimum_hourly=minimum
        ),
        workers=workers,
    )


def wage_estimate(*, batch: Batch) -> pay.WageEstimate | None:
    """Estimate the effective hourly wage of the batch's HITs, before publication.

    From the median time of this batch's approved work by people, when it has some; else
    from the median seconds per judged pair of people's approved work in other batches (the
    latest `ESTIMATE_SAMPLE` assignments) × this batch's pairs per HIT; else None
    (`NO_ESTIMATE` says what to do).
    """
    settings = hit_settings_or_defaults(batch)
    items_per_hit = batch_config(batch).items_per_hit
    own = [
        row
        for row in batch_measured(batch=batch, limit_seconds=settings.assignment_minutes * 60)
        if row.assignment.worker.source in HUMAN_SOURCES
    ]
    if own:
        stats = pay.wage_stats(
            [row.seconds for row in own],
            reward=settings.reward,
            minimum_hourly=settings.min_hourly_wage,
        )
        assert stats is not None
        return pay.estimate_from_stats(stats, items_per_hit=items_per_hit)
    per_pair = _seconds_per_pair_elsewhere(batch)
    if not per_pair:
        return None
    return pay.estimate_from_pairs(
        seconds_per_pair=pay.quantile(per_pair, Fraction(1, 2)),
        items_per_hit=items_per_hit,
        reward=settings.reward,
        minimum_hourly=settings.min_hourly_wage,
        assignments=len(per_pair),
    )


def _seconds_per_pair_elsewhere(batch: Batch) -> list[Decimal]:
    """Return seconds per judged pair of each of the latest approved assignments by people
    in other batches, each capped at its own batch's time per assignment."""
    rows = list(
        _approved()
        .filter(worker__source__in=HUMAN_SOURCES)
        .exclude(hit__batch=batch)
        .order_by("-submitted_at", "-pk")
        .values("hit__batch_id", "elapsed", "pairs")[:ESTIMATE_SAMPLE]
    )
    batches = Batch.objects.in_bulk({row["hit__batch_id"] for row in rows})
    limits = {
        pk: hit_settings_or_defaults(other).assignment_minutes * 60 for pk, other in batches.items()
    }
    return [
        pay.assignment_seconds([row["elapsed"]], limit_seconds=limits[row["hit__batch_id"]])
        / row["pairs"]
        for row in rows
    ]


def wage_warnings(*, batch: Batch) -> list[str]:
    """Return what to tell the person publishing about the batch's pay: the estimate below
    the minimum, or that there is no estimate. Nothing when the batch has no minimum."""
    minimum = hit_settings_or_defaults(batch).min_hourly_wage
    if minimum is None:
        return []
    estimate = wage_estimate(batch=batch)
    if estimate is None:
        return [f"no wage estimate for the minimum of ${minimum}/h: {NO_ESTIMATE}"]
    warning = estimate.warning()
    return [warning] if warning else []


def topups_proposed(*, batch: Batch) -> list[TopUp]:
    """Return the top-ups owed to approved, confirmed MTurk work paid below the batch's
    minimum hourly wage for its measured time, each saying whether it was already paid.

    Nothing when the batch has no minimum. A top-up once paid stays listed (paid), with the
    amount paid, even if the minimum changed since.
    """
    settings = hit_settings_or_defaults(batch)
    minimum = settings.min_hourly_wage
    if minimum is None:
        return []
    paid = state_read(batch).get("bonuses", {})
    assignments = (
        _approved(batch_id=batch.pk)
        .filter(
            worker__source=WorkerSource.MTURK,
            external_id__isnull=False,
            confirmed_at__isnull=False,
        )
        .select_related("worker", "hit")
        .order_by("pk")
    )
    proposed = []
    for row in _measured(assignments, limit_seconds=settings.assignment_minutes * 60):
        token = bonus_token(row.assignment.external_id or "", purpose=TOPUP)
        record = paid.get(token)
        amount = pay.top_up(reward=settings.reward, seconds=row.seconds, minimum_hourly=minimum)
        if record is None and amount <= 0:
            continue
        proposed.append(
            TopUp(
                assignment=row.assignment,
                seconds=row.seconds,
                reward=settings.reward,
                minimum_hourly=minimum,
                amount=Decimal(record["amount"]) if record else amount,
                paid=record is not None,
                token=token,
            )
        )
    return proposed


def batch_wage_overview(*, batch: Batch) -> dict[str, Any]:
    """Return what the batch page and the MTurk page show about fair pay (`_wages.html`)."""
    wages = batch_wages(batch=batch)
    estimate = wage_estimate(batch=batch)
    topups = topups_proposed(batch=batch)
    due = [topup for topup in topups if not topup.paid]
    return {
        "wages": wages,
        "estimate": estimate,
        "warning": estimate.warning() if estimate else None,
        "no_estimate": NO_ESTIMATE if estimate is None else "",
        "topups": topups,
        "topups_due": len(due),
        "topups_due_total": sum((topup.amount for topup in due), Decimal("0.00")),
        "topups_paid_total": sum((topup.amount for topup in topups if topup.paid), Decimal("0.00")),
    }
