"""What a qualification round buys: the same HITs judged by the same simulated crowd twice,
once without and once with the round, and the golden failures and rejections of each.

Both arms are batches with one configuration and seed on one dataset, so they sample the
same queries and build the same HITs; only `qualification_pairs` differs. The crowd holds
careless workers and learning ones (`mitl.simulation`): the round keeps most careless
workers out and trains the learners before their first HIT. The arms are cancelled once
measured, so people are never handed their HITs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.judgements_counted import judgements_counted
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    Dataset,
    QualificationAnswer,
    QualificationAttempt,
)
from mitl.config import batch_config
from mitl.judgements import POSITIVE_LEVELS, Level

from .progress import ProgressListener
from .simulate import crowd_simulate_reviewed, truth_source
from .stages import batch_cancel, batch_create, batch_run_until

# Small enough for the demo's minute, large enough for rates over about a hundred HITs.
STUDY_BATCH: dict[str, Any] = {
    "n_image_queries": 30,
    "n_caption_queries": 30,
    "k": 5,
    "assignments_per_hit": 2,
    "golden_policy": "approve_or_flag",
}
STUDY_QUALIFICATION: dict[str, Any] = {
    "qualification_pairs": 10,
    "qualification_pass": 0.8,
    "qualification_attempts": 2,
}
STUDY_CROWD = {"n_workers": 16, "learning_share": 0.5}
STUDY_FEEDBACK = "A pair with a known answer was answered wrongly."


@dataclass(frozen=True)
class ArmResult:
    """One arm's crowd work: every submission, over all review rounds."""

    label: str
    batch_id: int
    submitted: int
    golden_failed: int
    rejected: int
    workers_tried: int = 0  # took the qualification round
    workers_passed: int = 0
    practice_answers: int = 0  # qualification pairs answered, every try counted
    # Approved answers to the pairs being judged (not goldens), and how many of them fall
    # on the truth's side of YES / NO: the data the release is made of.
    task_answers: int = 0
    task_answers_right: int = 0

    @property
    def golden_failure_rate(self) -> float:
        return self.golden_failed / self.submitted if self.submitted else 0.0

    @property
    def rejection_rate(self) -> float:
        return self.rejected / self.submitted if self.submitted else 0.0

    @property
    def task_accuracy(self) -> float:
        return self.task_answers_right / self.task_answers if self.task_answers else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "batch": self.batch_id,
            "submitted": self.submitted,
            "golden_failed": self.golden_failed,
            "rejected": self.rejected,
            "golden_failure_rate": round(self.golden_failure_rate, 4),
            "rejection_rate": round(self.rejection_rate, 4),
            "workers_tried": self.workers_tried,
            "workers_passed": self.workers_passed,
            "practice_answers": self.practice_answers,
            "task_answers": self.task_answers,
            "task_accuracy": round(self.task_accuracy, 4),
        }


def qualification_study(
    *,
    dataset: Dataset,
    annotators: Sequence[str],
    seed: int = 0,
    batch_settings: Mapping[str, Any] | None = None,
    n_workers: int = STUDY_CROWD["n_workers"],
    learning_share: float = STUDY_CROWD["learning_share"],
    listener: ProgressListener | None = None,
) -> tuple[ArmResult, ArmResult]:
    """Judge the same HITs without and with a qualification round; return both arms."""
    base = {**STUDY_BATCH, **(batch_settings or {}), "annotators": list(annotators), "seed": seed}
    arms = []
    for label, extra in (
        ("without qualification", {}),
        ("with qualification", STUDY_QUALIFICATION),
    ):
        batch = batch_create(
            dataset=dataset, name=f"qualification study: {label}", raw_config={**base, **extra}
        )
        batch_run_until(batch_id=batch.pk, until=BatchState.ANNOTATING, listener=listener)
        batch.refresh_from_db()
        crowd_simulate_reviewed(
            batch=batch,
            config=batch_config(batch),
            n_workers=n_workers,
            feedback=STUDY_FEEDBACK,
            seed=seed,
            listener=listener,
            learning_share=learning_share,
        )
        arms.append(_arm_result(label, batch))
        batch_cancel(batch=batch)
    return arms[0], arms[1]


def _arm_result(label: str, batch: Batch) -> ArmResult:
    submitted = Assignment.objects.filter(hit__batch=batch, submitted_at__isnull=False)
    attempts = QualificationAttempt.objects.filter(batch=batch)
    answers, right = _task_answers_right(batch)
    return ArmResult(
        label=label,
        batch_id=batch.pk,
        submitted=submitted.count(),
        golden_failed=submitted.filter(golden_passed=False).count(),
        rejected=submitted.filter(status=AssignmentStatus.REJECTED).count(),
        workers_tried=attempts.values("worker").distinct().count(),
        workers_passed=attempts.filter(passed=True).values("worker").distinct().count(),
        practice_answers=QualificationAnswer.objects.filter(attempt__batch=batch).count(),
        task_answers=answers,
        task_answers_right=right,
    )


def _task_answers_right(batch: Batch) -> tuple[int, int]:
    """Count the answers to the batch's task pairs that count (`annotation.judgements_counted`),
    and those the truth agrees with on YES against NO."""
    truth = truth_source(batch=batch, oracle_dir=None)
    rows = judgements_counted(batch_id=batch.pk).values_list(
        "level", "item__image__ext_id", "item__caption__ext_id"
    )
    answers = right = 0
    for level, image, caption in rows:
        answers += 1
        right += (Level(level) in POSITIVE_LEVELS) == truth(image, caption).is_positive
    return answers, right


def study_table(arms: Sequence[ArmResult]) -> str:
    """Return the arms as the demo prints them, one line each."""
    lines = [
        f"{'':24} {'HITs done':>9} {'golden failed':>14} {'rejected':>9} "
        f"{'answers right':>14}  workers passed"
    ]
    for arm in arms:
        passed = f"{arm.workers_passed}/{arm.workers_tried}" if arm.workers_tried else "(no round)"
        lines.append(
            f"{arm.label:24} {arm.submitted:>9} {arm.golden_failure_rate:>14.1%} "
            f"{arm.rejection_rate:>9.1%} {arm.task_accuracy:>14.1%}  {passed}"
        )
    return "\n".join(lines)
