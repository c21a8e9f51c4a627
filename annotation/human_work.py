"""How far people have got with a batch: assignments, judgements, money and pace, live.

Counted from the assignments as they are now, not from a stage's stored progress: work
arrives through hand-out, submission, review and the MTurk sync, none of which runs a
stage. One selector (`batch_human_work`) feeds the batch page, the dashboard and the
API's batch detail, so the three always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from mitl.config import batch_config
from mitl.costs import assignments_cost

from .budget import spent_of
from .models import HIT, Assignment, AssignmentStatus, Batch, Judgement
from .mturk.hit_settings import batch_reward

PACE_WINDOW = timedelta(hours=1)  # the pace is that of the last hour, else of the round
PACE_FLOOR = timedelta(minutes=5)
_DONE_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)


@dataclass(frozen=True)
class WorkCount:
    """Assignments of some HITs: approved (at most what each HIT needs) against needed."""

    hits: int = 0
    hits_done: int = 0  # HITs with all the approved work they need
    needed: int = 0  # Σ assignments per HIT
    approved: int = 0
    submitted: int = 0  # waiting for review
    open: int = 0  # accepted, not submitted yet

    def to_json(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "hits_done": self.hits_done,
            "needed": self.needed,
            "approved": self.approved,
            "submitted": self.submitted,
            "open": self.open,
        }


@dataclass(frozen=True)
class HumanWork:
    """People's work on one batch: the current round, all rounds, money and pace."""

    batch_id: int
    round: int
    current: WorkCount
    all_rounds: WorkCount
    judgements: int  # answers stored, golden pairs included
    judgements_spent: int  # as the budget counts them: stored + pairs of open work
    budget_judgements: int | None
    reward: Decimal
    spent: Decimal  # (approved + submitted) × (reward + MTurk's commission)
    budget_dollars: Decimal  # the budget in dollars, else what every needed assignment costs
    per_hour: float | None  # assignments submitted per hour; None: no pace yet
    seconds_left: int | None  # the current round's missing work at that pace

    @property
    def time_left(self) -> str:
        """The time left as people read it: "—" without a pace, "none" with nothing left."""
        if self.current.needed and self.remaining == 0:
            return "none"
        if self.seconds_left is None:
            return "—"
        minutes = max(1, round(self.seconds_left / 60))
        if minutes < 60:
            return f"{minutes} min"
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes:02d} min" if hours < 48 else f"{round(hours / 24)} days"

    @property
    def remaining(self) -> int:
        """Assignments of the current round still to submit."""
        return max(self.current.needed - self.current.approved - self.current.submitted, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "current_round": self.current.to_json(),
            "all_rounds": self.all_rounds.to_json(),
            "judgements": self.judgements,
            "judgements_spent": self.judgements_spent,
            "budget_judgements": self.budget_judgements,
            "reward": str(self.reward),
            "spent": str(self.spent),
            "budget_dollars": str(self.budget_dollars),
            "per_hour": None if self.per_hour is None else round(self.per_hour, 2),
            "seconds_left": self.seconds_left,
            "time_left": self.time_left,
        }


def work_count(*, batch_id: int, round: int | None = None) -> WorkCount:
    """Count the assignments of the batch's HITs (of one round, or of all: None)."""
    return _work_counts(batch_id=batch_id, round=round)[0 if round is None else 1]


def _work_counts(*, batch_id: int, round: int | None) -> tuple[WorkCount, WorkCount]:
    """Count the assignments of all the batch's HITs and of one round's, in one query."""
    rows = (
        HIT.objects.filter(batch_id=batch_id)
        .annotate(
            approved=Count("assignments", filter=Q(assignments__status=AssignmentStatus.APPROVED)),
            submitted=Count(
                "assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED)
            ),
            open=Count("assignments", filter=Q(assignments__status=AssignmentStatus.ACCEPTED)),
        )
        .values_list("round", "max_assignments", "approved", "submitted", "open")
    )
    everything, current = [0] * 6, [0] * 6
    for hit_round, needed, approved, submitted, accepted in rows:
        counted = min(approved, needed)  # extra approved work does not make a HIT more done
        figures = (1, int(counted >= needed), needed, counted, submitted, accepted)
        for totals in (everything, current) if hit_round == round else (everything,):
            for index, value in enumerate(figures):
                totals[index] += value
    return WorkCount(*everything), WorkCount(*current)


def batch_human_work(
    *, batch_id: int, now: datetime | None = None, batch: Batch | None = None
) -> HumanWork:
    """Return people's work on the batch: done/needed, judgements, money spent, time left
    (`batch`: the batch as just read, to save reading it again)."""
    batch = batch if batch is not None else Batch.objects.get(pk=batch_id)
    config = batch_config(batch)
    reward = batch_reward(batch)
    everything, current = _work_counts(batch_id=batch_id, round=batch.round)
    judgements = Judgement.objects.filter(assignment__hit__batch_id=batch_id).count()

    def cost(assignments: int) -> Decimal:
        return assignments_cost(
            assignments=assignments,
            assignments_per_hit=config.assignments_per_hit,
            reward_per_assignment=reward,
        )

    budget = config.budget_judgements or None
    planned = budget // config.items_per_hit if budget else everything.needed
    per_hour = _pace(batch, now=now or timezone.now())
    missing = max(current.needed - current.approved - current.submitted, 0)
    return HumanWork(
        batch_id=batch_id,
        round=batch.round,
        current=current,
        all_rounds=everything,
        judgements=judgements,
        judgements_spent=spent_of(
            stored=judgements,
            open_assignments=everything.open,
            items_per_hit=config.items_per_hit,
        ),
        budget_judgements=budget,
        reward=reward,
        spent=cost(everything.approved + everything.submitted),
        budget_dollars=cost(planned),
        per_hour=per_hour,
        seconds_left=round(missing / per_hour * 3600) if per_hour and missing else None,
    )


def _pace(batch: Batch, *, now: datetime) -> float | None:
    """Assignments submitted per hour: over the last hour, else over the current round.

    The last hour's work is spread over the time since its first submission (at least
    `PACE_FLOOR`, so a burst does not promise the impossible); before that, two submissions
    of the round give a span to measure. None: no pace yet.
    """
    submitted = Assignment.objects.filter(
        hit__batch_id=batch.pk, status__in=_DONE_STATUSES, submitted_at__isnull=False
    )
    recent = list(
        submitted.filter(submitted_at__gte=now - PACE_WINDOW).values_list("submitted_at", flat=True)
    )
    if recent:
        span = max(now - min(recent), PACE_FLOOR)
        return len(recent) / (span.total_seconds() / 3600)
    times = list(
        submitted.filter(hit__round=batch.round)
        .order_by("submitted_at")
        .values_list("submitted_at", flat=True)
    )
    if len(times) < 2:
        return None
    hours = (times[-1] - times[0]).total_seconds() / 3600
    return (len(times) - 1) / hours if hours > 0 else None
