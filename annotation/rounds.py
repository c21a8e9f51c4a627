"""Where a batch's current round of crowd work stands: complete, or why it cannot finish.

A round is complete when every HIT of the batch's current round has its approved
assignments (`HIT.max_assignments`); the pipeline then closes it by itself
(`pipeline.tasks.annotation_close_check_queue`, the periodic `mitl.close_complete_rounds`).
Until then `round_stall` says what holds it up, for staff (the batch page, the dashboard),
and `round_waits_for_worker` says it briefly to an annotator who got no HIT, without a word
about who else works on it.

Who may take the HITs is `annotation.eligible` (the wizard counts the same workers). A HIT
stays closed to a worker who ever had an assignment on it, whatever became of it
(`handout.hit_assign_next`): a rejected or expired assignment frees its slot, never its
worker.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from mitl.config import batch_config

from .budget import judgements_spent
from .eligible import EligibleWorkers, workers_eligible
from .handout import ACTIVE_STATUSES
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Worker,
)
from .pause import PAUSED_WHY
from .prepared import Prepared


def round_hits_missing_work(*, batch_id: OuterRef | int, round_: OuterRef | int):
    """The HITs of one round with fewer approved assignments than they need.

    The one rule for a complete round: the close trigger here and the annotating stage
    (`pipeline.stages.hits_missing_work`) both read it.
    """
    approved = Count("assignments", filter=Q(assignments__status=AssignmentStatus.APPROVED))
    return (
        HIT.objects.filter(batch_id=batch_id, round=round_)
        .annotate(approved=approved)
        .filter(approved__lt=F("max_assignments"))
    )


def batches_round_complete(*, batch_ids: Iterable[int] | None = None) -> list[int]:
    """Return the annotating batches whose current round has all its approved work.

    One query, whatever the number of batches: it runs after every submission and review.
    `batch_ids` limits it to those batches; None looks at every annotating batch.
    """
    annotating = Batch.objects.filter(state=BatchState.ANNOTATING)
    if batch_ids is not None:
        annotating = annotating.filter(pk__in=list(batch_ids))
    missing = round_hits_missing_work(batch_id=OuterRef("pk"), round_=OuterRef("round"))
    return list(annotating.exclude(Exists(missing)).order_by("pk").values_list("pk", flat=True))


def round_complete(*, batch_id: int) -> bool:
    """Say whether the batch is annotating and its current round has all its approved work
    (as `batches_round_complete` for one batch, in a statement built once: approved work
    asks it on every submission)."""
    return bool(_ROUND_COMPLETE.rows(batch_id))


def _round_complete_query(batch_id: int) -> QuerySet[Batch]:
    missing = round_hits_missing_work(batch_id=OuterRef("pk"), round_=OuterRef("round"))
    annotating = Batch.objects.filter(state=BatchState.ANNOTATING, pk=batch_id)
    return annotating.exclude(Exists(missing)).values_list("pk")


_ROUND_COMPLETE = Prepared(_round_complete_query, 1)


# --- why a round cannot finish ---------------------------------------------------------------


@dataclass(frozen=True)
class Stall:
    """One thing that holds a round up; `code` names it for tests and page styles."""

    code: str
    text: str


@dataclass
class _HitRow:
    pk: int
    max_assignments: int
    approved: int
    active: int
    on_mturk: bool

    @property
    def free(self) -> int:
        return max(self.max_assignments - self.active, 0)


@dataclass
class _RoundFacts:
    """What the explanations read about the current round, in a few queries."""

    missing: list[_HitRow]  # HITs still short of approved work
    review: int = 0  # submitted work waiting for a person
    flagged: int = 0  # of which failed a golden check
    unconfirmed: int = 0  # MTurk work that MTurk has not confirmed yet
    open_work: int = 0  # accepted, not yet submitted
    worked: dict[int, set[int]] = field(default_factory=dict)  # HIT → workers who had it


def _round_facts(batch: Batch) -> _RoundFacts:
    active = Count("assignments", filter=Q(assignments__status__in=ACTIVE_STATUSES))
    rows = (
        round_hits_missing_work(batch_id=batch.pk, round_=batch.round)
        .annotate(active=active)
        .order_by("index")
        .values_list("pk", "max_assignments", "approved", "active", "external_id")
    )
    missing = [_HitRow(pk, most, ok, act, ext is not None) for pk, most, ok, act, ext in rows]
    submitted = Q(status=AssignmentStatus.SUBMITTED)
    unconfirmed = submitted & Q(external_id__isnull=False, confirmed_at__isnull=True)
    counts = Assignment.objects.filter(hit__batch=batch, hit__round=batch.round).aggregate(
        review=Count("pk", filter=submitted & ~unconfirmed),
        flagged=Count("pk", filter=submitted & ~unconfirmed & Q(flagged=True)),
        unconfirmed=Count("pk", filter=unconfirmed),
        open_work=Count("pk", filter=Q(status=AssignmentStatus.ACCEPTED)),
    )
    worked: dict[int, set[int]] = defaultdict(set)
    for hit_id, worker_id in Assignment.objects.filter(
        hit_id__in=[h.pk for h in missing if not h.on_mturk]
    ).values_list("hit_id", "worker_id"):
        worked[hit_id].add(worker_id)
    return _RoundFacts(missing=missing, worked=worked, **counts)


def _budget_spent(batch: Batch) -> tuple[int, int] | None:
    """(spent, budget) when the batch cannot pay for one more HIT, else None."""
    config = batch_config(batch)
    if not config.budget_judgements:
        return None
    spent = judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit)
    if spent + config.items_per_hit <= config.budget_judgements:
        return None
    return spent, config.budget_judgements


def _short_of_workers(facts: _RoundFacts, eligible: EligibleWorkers) -> list[_HitRow]:
    """The platform HITs with more free slots than eligible workers who never had them."""
    short = []
    for hit in facts.missing:
        if hit.on_mturk or not hit.free:
            continue
        had_it = len(facts.worked.get(hit.pk, set()) & eligible.worker_ids)
        if hit.free > eligible.count - had_it:
            short.append(hit)
    return short


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def round_stall(*, batch: Batch) -> list[Stall]:
    """Say, for staff, why the batch's current round has not finished; [] unless annotating.

    Each reason names a way on (review, invite or unblock workers, close the round). A
    complete round says that it closes by itself.
    """
    if batch.state != BatchState.ANNOTATING:
        return []
    facts = _round_facts(batch)
    if not facts.missing:
        return [Stall("complete", _COMPLETE.format(round=batch.round))]
    stalls = [_missing_stall(batch, facts)]
    if batch.paused_at is not None:
        return [*stalls, Stall("paused", _PAUSED)]
    if facts.review:
        flagged = f" ({facts.flagged} failed a golden check)" if facts.flagged else ""
        stalls.append(
            Stall("review", f"{_plural(facts.review, 'submission')} wait for review{flagged}.")
        )
    if facts.unconfirmed:
        stalls.append(
            Stall(
                "mturk",
                f"MTurk has not confirmed {_plural(facts.unconfirmed, 'submission')}: "
                "sync the batch with MTurk (its MTurk page, “Sync now”).",
            )
        )
    stalls.extend(_slot_stalls(batch, facts))
    if facts.open_work:
        stalls.append(
            Stall("open", f"{_plural(facts.open_work, 'assignment')} being judged right now.")
        )
    return stalls


_PAUSED = (
    "Handing out is paused: no new assignment starts until you resume it (open work may "
    "still be submitted)."
)
_COMPLETE = (
    "Every HIT of round {round} has its approved work: the round closes by itself "
    "(or close it now below)."
)


def _missing_stall(batch: Batch, facts: _RoundFacts) -> Stall:
    needed = sum(h.max_assignments - h.approved for h in facts.missing)
    return Stall(
        "missing",
        f"Round {batch.round}: {_plural(len(facts.missing), 'HIT')} still "
        f"{'needs' if len(facts.missing) == 1 else 'need'} "
        f"{_plural(needed, 'approved assignment')}.",
    )


def _slot_stalls(batch: Batch, facts: _RoundFacts) -> list[Stall]:
    """Free slots that nobody can fill: the budget, or too few eligible workers."""
    free = [h for h in facts.missing if h.free]
    if not free:
        return []
    spent = _budget_spent(batch)
    if spent is not None:
        return [
            Stall(
                "budget",
                f"The budget is spent ({spent[0]} of {spent[1]} judgements): no more work is "
                "handed out. Close this round to aggregate what is approved.",
            )
        ]
    stalls = []
    on_mturk = [h for h in free if h.on_mturk]
    if on_mturk:
        stalls.append(
            Stall(
                "mturk_open",
                f"{_plural(len(on_mturk), 'HIT')} on MTurk wait for MTurk workers "
                f"({sum(h.free for h in on_mturk)} free slots).",
            )
        )
    if not batch.reports.get("simulated_crowd"):
        stalls.extend(_worker_stalls(batch, facts))
    return stalls


def _worker_stalls(batch: Batch, facts: _RoundFacts) -> list[Stall]:
    eligible = workers_eligible(batch)
    short = _short_of_workers(facts, eligible)
    who = "active, not blocked" + (
        ", passed the qualification round" if batch_config(batch).qualification_required else ""
    )
    if short:
        most = max(h.max_assignments for h in short)
        if most > eligible.count:
            are = _plural(eligible.count, "worker is", "workers are")
            text = f"{most} assignments per HIT but only {are} eligible ({who})."

        else:
            text = (
                f"{_plural(len(short), 'HIT has', 'HITs have')} more free slots than eligible "
                f"workers ({who}) who have not worked on them yet: a worker does a HIT once, "
                "and rejected work frees its slot, not its worker."
            )
        return [Stall("workers", text + " Add or unblock workers, or close this round.")]
    free = sum(h.free for h in facts.missing if not h.on_mturk)
    if not free:
        return []
    return [
        Stall(
            "waiting",
            f"{_plural(free, 'assignment')} free for the "
            f"{_plural(eligible.count, 'eligible worker')} to take.",
        )
    ]


# --- what an annotator who got no HIT reads ----------------------------------------------------


@dataclass(frozen=True)
class WorkerWait:
    """Why one annotating batch has no HIT for this worker, in words safe to show them."""

    batch_id: int
    batch_name: str
    why: str


def round_waits_for_worker(*, worker: Worker, limit: int = 3) -> list[WorkerWait]:
    """Say briefly why the open batches have no HIT for `worker` (at most `limit`).

    Only what the worker may know: that work waits for review or for MTurk, that they did
    every open HIT already, that the budget is spent; never who else works on it.
    """
    waits = []
    for batch in Batch.objects.filter(state=BatchState.ANNOTATING).order_by("pk"):
        facts = _round_facts(batch)
        why = _worker_why(batch, facts, worker)
        if why:
            waits.append(WorkerWait(batch.pk, batch.name, why))
        if len(waits) >= limit:
            break
    return waits


def _worker_why(batch: Batch, facts: _RoundFacts, worker: Worker) -> str:
    if not facts.missing:
        return "its round is complete and closes shortly"
    if batch.paused_at is not None:
        return PAUSED_WHY
    free = [h for h in facts.missing if h.free and not h.on_mturk]
    if free and _budget_spent(batch) is not None:
        return "its judgement budget is spent"
    if free and all(worker.pk in facts.worked.get(h.pk, set()) for h in free):
        return "you have done every HIT of it that is still open; it waits for other annotators"
    if free:
        return ""  # a HIT is free for this worker: the hand-out decides (e.g. qualification)
    if any(h.free and h.on_mturk for h in facts.missing):
        return "its HITs are handed out on Amazon Mechanical Turk"
    if facts.review or facts.unconfirmed:
        return "its remaining work waits for review"
    if facts.open_work:
        return "its remaining HITs are being judged"
    return ""
