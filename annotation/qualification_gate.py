"""Who a batch's qualification round keeps from its HITs: the hand-out's side of the round.

Platform and simulated workers get a batch's HITs only after passing its round
(`annotation.qualification`). MTurk workers are kept out by MTurk itself, through the
QualificationRequirement the batch's HIT type carries, so the platform never refuses them
here (the MTurk page creates their assignments through `handout.assignment_create` too).
A module of its own so that the hand-out imports it without a cycle (the round's services
build on the goldens, which build on the hand-out).
"""

from __future__ import annotations

from django.db.models import QuerySet

from mitl.config import batch_config

from .models import Batch, QualificationAttempt, Worker, WorkerSource


def qualification_gates(worker: Worker) -> bool:
    """Say whether the platform checks this worker's qualification (all but MTurk workers)."""
    return worker.source != WorkerSource.MTURK


def batches_closed_to(*, worker: Worker) -> QuerySet[Batch]:
    """The ids of batches with a qualification round that `worker` has not passed.

    A batch has a round when its config sets `qualification_pairs` above 0 (read in the
    query: a config without the key has none), so the hand-out can leave such batches out
    in the same statement that finds a free HIT.
    """
    passed = QualificationAttempt.objects.filter(worker=worker, passed=True).values("batch_id")
    return (
        Batch.objects.filter(config__qualification_pairs__gt=0).exclude(pk__in=passed).values("pk")
    )


def qualification_missing(*, worker: Worker, batch: Batch) -> bool:
    """Say whether `batch`'s round keeps `worker` from its HITs (not passed yet)."""
    if not qualification_gates(worker) or not batch_config(batch).qualification_required:
        return False
    return not QualificationAttempt.objects.filter(worker=worker, batch=batch, passed=True).exists()
