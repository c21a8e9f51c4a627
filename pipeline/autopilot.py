"""The simulated crowd on autopilot: judge a batch once it reaches annotating, then close it.

For demos and tests. A batch launched with the simulated crowd gets one `mitl.crowd_autopilot`
task; it waits while the automatic stages run, fills every HIT with simulated work (rejecting
work that fails the golden check and posting it again, as an admin would), then closes the
annotating stage so aggregation and the release follow by themselves. An adaptive batch
comes back to annotating once per round; the task keeps waiting for it until the release.
"""

from __future__ import annotations

import json
import tempfile
from enum import StrEnum
from pathlib import Path

from django.db import transaction

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    PositivePair,
    PositiveSource,
)
from mitl.config import batch_config
from mitl.release_files import I2T_FILE, T2I_FILE

from .simulate import REVIEW_ROUNDS, crowd_simulate_reviewed
from .stages import stage_advance

REPORT_KEY = "simulated_crowd"  # in Batch.reports: what the autopilot did, for the batch page
MIN_WORKERS = 12
REJECTION_FEEDBACK = "A golden pair was answered wrongly (simulated crowd, rejected automatically)."


class AutopilotStep(StrEnum):
    WAIT = "wait"  # the automatic stages are still running: ask again later
    CLOSED = "closed"  # the crowd judged the batch (or this round) and closed annotating
    DONE = "done"  # nothing to do: the batch is released
    STOPPED = "stopped"  # a stage failed or the batch was cancelled: the autopilot gives up


def autopilot_request(*, batch: Batch) -> None:
    """Record that the simulated crowd will judge this batch (shown on its page)."""
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        locked.reports = {**locked.reports, REPORT_KEY: {"status": "waiting"}}
        locked.save(update_fields=["reports"])
    batch.reports = locked.reports


def crowd_autopilot(*, batch_id: int, seed: int = 0) -> AutopilotStep:
    """Judge the batch with the simulated crowd if it is annotating; say what happened."""
    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    if batch.state == BatchState.CANCELLED:
        _report(batch, {"status": "stopped", "reason": "the batch was cancelled"})
        return AutopilotStep.STOPPED
    if batch.state == BatchState.RELEASED:
        return AutopilotStep.DONE  # delivered again after the last round closed
    if batch.state != BatchState.ANNOTATING:
        if batch.error:
            _report(batch, {"status": "stopped", "reason": batch.error})
            return AutopilotStep.STOPPED
        return AutopilotStep.WAIT  # automatic stages, or an adaptive batch between rounds
    config = batch_config(batch)
    # More workers than slots per HIT: a rejected worker never gets the same HIT again.
    n_workers = max(MIN_WORKERS, config.assignments_per_hit * (REVIEW_ROUNDS + 1))
    with tempfile.TemporaryDirectory() as folder:
        oracle = (
            None
            if batch.dataset.meta.get("synthetic")
            else known_positives_write(batch.dataset_id, folder)
        )
        rejected = crowd_simulate_reviewed(
            batch=batch,
            config=config,
            n_workers=n_workers,
            feedback=REJECTION_FEEDBACK,
            oracle_dir=oracle,
            seed=seed,
        )
    approved = Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.APPROVED)
    _report(
        batch,
        {
            "status": "done",
            "truth": "known positive sets" if oracle else "synthetic generator",
            "approved": approved.count(),
            "rejected": rejected,
            "round": batch.round,
        },
    )
    # force: HITs still short of approved work after the rounds close as they are.
    # The caller (the `mitl.crowd_autopilot` task) queues the aggregation that follows.
    closed = stage_advance(batch_id=batch.pk, stage=BatchState.ANNOTATING, force=True)
    return AutopilotStep.CLOSED if closed.moved else AutopilotStep.DONE


def known_positives_write(dataset_id: int, folder: str) -> Path:
    """Write the dataset's known positives (original and imported sets) in the ECCV format.

    A dataset without a synthetic generator has no full truth; its known positives are the
    next best oracle: the crowd answers YES to them and NO to every other pair.
    """
    pairs = (
        PositivePair.objects.filter(positive_set__dataset_id=dataset_id)
        .exclude(positive_set__source=PositiveSource.HUMAN)
        .values_list("image__ext_id", "caption__ext_id")
    )
    i2t: dict[str, list[int]] = {}
    t2i: dict[str, list[int]] = {}
    for image, caption in pairs:
        i2t.setdefault(str(image), []).append(caption)
        t2i.setdefault(str(caption), []).append(image)
    path = Path(folder)
    (path / I2T_FILE).write_text(json.dumps(i2t), encoding="utf-8")
    (path / T2I_FILE).write_text(json.dumps(t2i), encoding="utf-8")
    return path


def _report(batch: Batch, values: dict) -> None:
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        locked.reports = {**locked.reports, REPORT_KEY: values}
        locked.save(update_fields=["reports"])
