"""Annotating stage, simulated: a crowd answers every open assignment from a known truth.

The truth is the synthetic generator's (regenerated from the dataset's recorded seed), or
a reference positive set in the ECCV format (`--oracle DIR`: in the set → YES, else NO).
Answers go through the same submission service as the web UI, golden check included.
When the batch has a qualification round, every simulated worker takes it first through
the same services as the practice page (annotation.qualification.attempts), and only those who pass
work on the batch's HITs; a learning worker answers as trained once it has done a round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.db.models import Count, Q

from annotation.budget import BudgetSpent
from annotation.errors import ServiceError
from annotation.handout import ACTIVE_STATUSES, assignment_create
from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    QualificationAttempt,
    Worker,
    items_shown_to,
)
from annotation.qualification.attempts import (
    qualification_answer_record,
    qualification_attempt_open,
    qualification_pair_next,
    qualification_status,
)
from annotation.review import assignment_review
from annotation.services import worker_simulated_get_or_create
from annotation.submissions import AnswerInput, SubmissionResult, assignment_submit
from annotation.synthetic import synthetic_regenerate
from mitl.config import BatchConfig
from mitl.formats.positives import parse_eccv_pairs
from mitl.qualification import QualificationStatus
from mitl.simulation import WorkerProfile, answer, crowd_profiles, oracle_truth
from mitl.synthetic.truth import Truth, judge

from .progress import ProgressListener, StageTracker

TruthFn = Callable[[int, int], Truth]  # (image ext id, caption ext id) → truth
# Rounds of "simulate, reject what failed the golden check" (the ECCV Caption run rejected
# 37% of submitted HITs).
REVIEW_ROUNDS = 3


@dataclass(frozen=True)
class SimulationSummary:
    assignments: int
    approved: int
    flagged: int
    # With a qualification round: the simulated workers who passed it, and those who did
    # not (they get none of the batch's HITs).
    qualified: int = 0
    not_qualified: int = 0


def truth_source(*, batch: Batch, oracle_dir: Path | None) -> TruthFn:
    """Return how the simulated crowd knows the answer for this batch's dataset."""
    if oracle_dir is not None:
        pairs = parse_eccv_pairs(
            oracle_dir / "image_to_caption.json", oracle_dir / "caption_to_image.json"
        )
        return lambda image, caption: oracle_truth((image, caption) in pairs)
    try:
        generated = synthetic_regenerate(dataset=batch.dataset)
    except ServiceError as error:
        raise ServiceError(
            f"{error}: pass --oracle DIR with image_to_caption.json and caption_to_image.json"
        ) from None
    return lambda image, caption: judge(generated.scene(image), generated.caption(caption))


def crowd_simulate(
    *,
    batch: Batch,
    config: BatchConfig,
    tracker: StageTracker,
    n_workers: int = 12,
    careless_share: float = 0.1,
    error_rate: float | None = None,
    oracle_dir: Path | None = None,
    seed: int = 0,
    learning_share: float = 0.0,
    crowd_seed: int | None = None,
) -> SimulationSummary:
    """Fill every open assignment slot of the batch's HITs with simulated work.

    A `learning_share` of the careful workers misread the scale until they practise
    (`mitl.simulation.WorkerProfile.learning_gain`). The workers' profiles are drawn from
    `crowd_seed` (default `seed`), their answers from `seed`: runs that share a crowd
    seed meet the same workers, who keep the qualification they earned.
    """
    truth = truth_source(batch=batch, oracle_dir=oracle_dir)
    if n_workers < config.assignments_per_hit:
        raise ServiceError(
            f"{n_workers} simulated workers cannot fill {config.assignments_per_hit} "
            "assignments per HIT"
        )
    accuracy = (0.85, 0.98) if error_rate is None else (1 - error_rate, 1 - error_rate)
    profiles = crowd_profiles(
        n_workers,
        careless_share=careless_share,
        accuracy_range=accuracy,
        seed=seed if crowd_seed is None else crowd_seed,
        learning_share=learning_share,
    )
    workers = _crowd_workers(profiles)
    rng = np.random.default_rng([seed, batch.pk])
    allowed, trained = _crowd_admitted(batch, workers, profiles, rng)
    hits = list(
        HIT.objects.filter(batch=batch)
        .annotate(active=Count("assignments", filter=Q(assignments__status__in=ACTIVE_STATUSES)))
        .order_by("index")
    )
    tracker.start(len(hits))
    approved = flagged = 0
    for hit in hits:
        taken = set(hit.assignments.values_list("worker_id", flat=True))
        free = [
            i
            for i, worker in enumerate(workers)
            if worker.pk not in taken and worker.pk in allowed and not worker.is_blocked
        ]
        open_slots = min(hit.max_assignments - hit.active, len(free))
        try:
            for index in rng.choice(free, size=max(open_slots, 0), replace=False):
                worker = workers[index]
                result = _work_on(
                    hit, worker, profiles[index], truth, rng, config, worker.pk in trained
                )
                approved += result.assignment.status == "approved"
                flagged += result.assignment.flagged
        except BudgetSpent:
            break  # the batch cannot pay for more work: the rest of its HITs stay open
        tracker.advance()
    tracker.finish()
    return SimulationSummary(
        assignments=approved + flagged,
        approved=approved,
        flagged=flagged,
        qualified=len(allowed) if config.qualification_required else 0,
        not_qualified=len(workers) - len(allowed),
    )


def _crowd_workers(profiles: list[WorkerProfile]) -> list[Worker]:
    """Return the simulated workers of these profiles, created the first time."""
    return [
        worker_simulated_get_or_create(
            name=p.name,
            profile={"accuracy": p.accuracy, "careless": p.careless, "learning": p.learning_gain},
        )
        for p in profiles
    ]


def _crowd_admitted(
    batch: Batch, workers: list[Worker], profiles: list[WorkerProfile], rng: np.random.Generator
) -> tuple[set[int], set[int]]:
    """Return the workers who may work on the batch's HITs (all, or those who pass its
    round) and those among them who did a practice round (trained)."""
    allowed = {
        worker.pk
        for worker, profile in zip(workers, profiles, strict=True)
        if _qualify(batch, worker, profile, rng)
    }
    trained = set(
        QualificationAttempt.objects.filter(
            batch=batch, worker_id__in=allowed, finished_at__isnull=False
        ).values_list("worker_id", flat=True)
    )
    return allowed, trained


def _qualify(
    batch: Batch, worker: Worker, profile: WorkerProfile, rng: np.random.Generator
) -> bool:
    """Let a simulated worker take the batch's qualification round until it passes or has no
    tries left; return whether it may work on the batch's HITs.

    Its first try is answered untrained; the feedback of that try trains a learning worker
    for the tries and the HITs that follow.
    """
    while True:
        status = qualification_status(worker=worker, batch=batch)
        if status in (QualificationStatus.NOT_REQUIRED, QualificationStatus.QUALIFIED):
            return True
        if status == QualificationStatus.FAILED or worker.is_blocked:
            return False
        attempt = qualification_attempt_open(batch=batch, worker=worker)
        trained = attempt.number > 1
        while (pair := qualification_pair_next(attempt=attempt)) is not None:
            given = answer(
                oracle_truth(pair.positive), profile, rng, followups=False, trained=trained
            )
            qualification_answer_record(
                attempt=attempt,
                pair_id=pair.pk,
                level=given.level.value,
                elapsed_ms=given.elapsed_ms,
            )


def crowd_simulate_reviewed(
    *,
    batch: Batch,
    config: BatchConfig,
    n_workers: int,
    feedback: str,
    oracle_dir: Path | None = None,
    seed: int = 0,
    listener: ProgressListener | None = None,
    learning_share: float = 0.0,
) -> int:
    """Simulate the crowd, reject the work that failed the golden check, and repeat.

    A rejection re-posts the HIT for another worker, as an admin's would; a few rounds
    fill nearly every HIT. Every round meets the same workers (one crowd seed) with new
    answers. Stops after `REVIEW_ROUNDS` rounds or once no work is flagged;
    returns how many assignments were rejected.
    """
    rejected = 0
    for round_index in range(REVIEW_ROUNDS):
        crowd_simulate(
            batch=batch,
            config=config,
            tracker=StageTracker(batch=batch, stage=BatchState.ANNOTATING, listener=listener),
            n_workers=n_workers,
            oracle_dir=oracle_dir,
            seed=seed + round_index,
            crowd_seed=seed,
            learning_share=learning_share,
        )
        flagged = list(
            Assignment.objects.filter(
                hit__batch=batch, status=AssignmentStatus.SUBMITTED, flagged=True
            )
        )
        if not flagged:
            break
        for assignment in flagged:
            assignment_review(assignment=assignment, approve=False, feedback=feedback)
        rejected += len(flagged)
    return rejected


def _work_on(
    hit: HIT,
    worker: Worker,
    profile: WorkerProfile,
    truth: TruthFn,
    rng: np.random.Generator,
    config: BatchConfig,
    trained: bool,
) -> SubmissionResult:
    assignment = assignment_create(hit=hit, worker=worker)
    items = (
        hit.items.filter(items_shown_to(assignment.pk))
        .order_by("position")
        .values_list("pk", "image__ext_id", "caption__ext_id")
    )
    answers = []
    for item_id, image, caption in items:
        given = answer(
            truth(image, caption), profile, rng, followups=config.followups, trained=trained
        )
        answers.append(
            AnswerInput(
                item_id=item_id,
                level=given.level.value,
                shortcomings=given.shortcomings,
                wrong_concepts=given.wrong_concepts,
                other_text=given.other_text,
                elapsed_ms=given.elapsed_ms,
            )
        )
    return assignment_submit(
        assignment=assignment,
        answers=answers,
        followups_required=config.followups,
        golden_policy=config.golden_policy,
    )
