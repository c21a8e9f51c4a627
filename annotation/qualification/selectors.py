"""Reads about qualification rounds: a worker's rounds (My work) and a batch's (batch page)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q

from annotation.models import (
    HIT,
    Batch,
    BatchState,
    QualificationAttempt,
    QualificationPair,
    Worker,
)
from mitl.config import batch_config
from mitl.qualification import QualificationStatus

from .attempts import qualification_progress


@dataclass(frozen=True)
class WorkerRound:
    """A batch's qualification round as one worker sees it on the My work page."""

    batch_id: int
    batch_name: str
    status: QualificationStatus
    attempts_used: int
    attempts_allowed: int
    in_progress: bool  # a try started and not finished
    pairs: int  # shown in a try (each try draws its own from the pool)
    pass_percent: str  # "80", "87.5"
    keeps_hits: bool  # free HITs of the batch that the round keeps from the worker

    @property
    def attempts_left(self) -> int:
        return max(0, self.attempts_allowed - self.attempts_used)


def percent(share: float) -> str:
    """Write a share as a percentage without float noise: 0.8 → "80", 0.875 → "87.5"."""
    return f"{share * 100:.4g}"


def qualification_rounds_for(*, worker: Worker) -> list[WorkerRound]:
    """Return the rounds of annotating batches that hand HITs out here, for `worker`.

    A batch whose every HIT is published on MTurk is left out: MTurk hands its work out.
    """
    batches = (
        Batch.objects.filter(
            state=BatchState.ANNOTATING,
            config__qualification_pairs__gt=0,
            hits__external_id__isnull=True,
        )
        .distinct()
        .order_by("pk")
    )
    rounds = []
    for batch in batches:
        progress = qualification_progress(worker=worker, batch=batch)
        config = batch_config(batch)
        free = (
            HIT.objects.filter(
                batch=batch,
                external_id__isnull=True,
                active_assignments__lt=F("max_assignments"),
            )
            .exclude(assignments__worker=worker)
            .exists()
        )
        rounds.append(
            WorkerRound(
                batch_id=batch.pk,
                batch_name=batch.name,
                status=progress.status,
                attempts_used=progress.attempts_used,
                attempts_allowed=progress.attempts_allowed,
                in_progress=progress.in_progress is not None,
                pairs=config.qualification_pairs,
                pass_percent=percent(config.qualification_pass),
                keeps_hits=free and progress.status != QualificationStatus.QUALIFIED,
            )
        )
    return rounds


def qualification_summary(*, batch: Batch) -> dict[str, Any] | None:
    """Return the batch page's view of its round: settings, pairs (the pool, then MTurk's
    test pairs: `mturk_test`), tries and who passed.

    None for a batch without a round (and without pairs). The pass rate is over finished
    tries; a failed worker has used every try without passing.
    """
    config = batch_config(batch)
    pairs = list(
        QualificationPair.objects.filter(batch=batch)
        .select_related("image", "caption")
        .annotate(
            n_answers=Count("answers"),
            n_right=Count("answers", filter=Q(answers__correct=True)),
        )
        .order_by("mturk_test", "position")
    )
    if not config.qualification_required and not pairs:
        return None
    pool = [pair for pair in pairs if not pair.mturk_test]
    attempts = QualificationAttempt.objects.filter(batch=batch)
    finished = attempts.filter(finished_at__isnull=False)
    per_worker = attempts.values("worker").annotate(
        tries=Count("pk", filter=Q(finished_at__isnull=False)),
        passes=Count("pk", filter=Q(passed=True)),
    )
    passed_workers = sum(1 for row in per_worker if row["passes"])
    failed_workers = sum(
        1
        for row in per_worker
        if not row["passes"] and row["tries"] >= config.qualification_attempts
    )
    n_finished = finished.count()
    n_passed = finished.filter(passed=True).count()
    sources = dict(
        QualificationPair.objects.filter(batch=batch, mturk_test=False)
        .values_list("source")
        .annotate(n=Count("pk"))
        .values_list("source", "n")
    )
    return {
        "required": config.qualification_required,
        "pairs_configured": config.qualification_pairs,
        "pool_needed": config.qualification_pool,
        "pool_size": len(pool),
        "test_pairs": len(pairs) - len(pool),
        "pass_percent": percent(config.qualification_pass),
        "attempts_allowed": config.qualification_attempts,
        "pairs": pairs,
        "sources": sources,
        "attempts": attempts.count(),
        "finished": n_finished,
        "passed_attempts": n_passed,
        "passed_workers": passed_workers,
        "failed_workers": failed_workers,
        "in_progress": attempts.filter(finished_at__isnull=True).count(),
        "pass_rate": n_passed / n_finished if n_finished else None,
    }
