"""Who may take a batch's platform HITs: one definition for the wizard's warning, the
round's stall reasons and the annotator's "no HIT" answer (`annotation.rounds`).

A platform HIT is open to a worker who is active, not blocked, has passed the batch's
qualification round when it has one, and never had an assignment on that HIT
(`handout.hit_assign_next`). Staff accounts count once they have worked: an admin who
judges is a worker, one who only administers is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q

from mitl.config import batch_config

from .models import Assignment, Batch, QualificationAttempt, Worker, WorkerSource


@dataclass(frozen=True)
class EligibleWorkers:
    """The platform workers who may take the batch's HITs, and accounts yet to start."""

    worker_ids: frozenset[int]
    new_accounts: int  # active annotator accounts with no worker row yet

    @property
    def count(self) -> int:
        return len(self.worker_ids) + self.new_accounts


def workers_eligible(batch: Batch | None = None) -> EligibleWorkers:
    """Return the accounts that may take platform HITs: active, not blocked, annotators (staff
    only once they have worked), and qualified for `batch` when its config asks for a
    qualification round (`None`: a batch yet to be created, which nobody passed yet)."""
    users = get_user_model().objects.filter(is_active=True)
    has_worked = Exists(Assignment.objects.filter(worker__user_id=OuterRef("pk")))
    working = users.filter(Q(is_staff=False) | has_worked)
    workers = Worker.objects.filter(
        source=WorkerSource.PLATFORM, user__in=working, is_blocked=False
    )
    new_accounts = working.filter(worker__isnull=True).count()
    if batch is not None and batch_config(batch).qualification_required:
        passed = QualificationAttempt.objects.filter(batch=batch, passed=True)
        workers = workers.filter(pk__in=passed.values("worker_id"))
        new_accounts = 0  # nobody passes a round before having a worker row
    return EligibleWorkers(frozenset(workers.values_list("pk", flat=True)), new_accounts)
