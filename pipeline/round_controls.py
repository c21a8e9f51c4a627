"""The batch page's round controls: close this round, finish after it, pause or resume
handing out, cancel, resume a stage.

Each does what the `batch_run` command does (`--force` while annotating; a plain run for a
stage that failed or whose worker was lost), through the same queue functions, on workers
and with eager Celery alike. Each refuses, with a sentence that says why, when the batch's
state does not allow it; each returns a sentence for the admin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from django.db import transaction

from annotation.errors import ServiceError, StateConflict
from annotation.models import Batch, BatchState
from annotation.pause import batch_pause_set
from annotation.task_leases import lease_live
from mitl.config import batch_config

from .curation import FINISH_KEY
from .leases import close_lease, stage_lease
from .stages import AUTOMATIC_STAGES, batch_cancel
from .tasks import annotation_close_queue, failures_to_batch, stage_queue

_ENDED = (BatchState.RELEASED, BatchState.CANCELLED)


@dataclass(frozen=True)
class RoundControls:
    """Which controls the batch's state allows now (the page shows only those)."""

    close_round: bool
    finish_after_round: bool
    keep_rounds: bool  # undo "finish after this round"
    pause: bool  # stop handing out new work (annotation.pause)
    unpause: bool
    cancel: bool
    resume: bool
    finishing_after: int | None  # the round after which the batch finishes, if asked


def round_controls_for(*, batch: Batch) -> RoundControls:
    """Say which round controls apply to the batch as it is now."""
    adaptive = batch_config(batch).adaptive
    finishing = batch.reports.get(FINISH_KEY)
    looping = adaptive and batch.state not in (*_ENDED, BatchState.DRAFT)
    return RoundControls(
        close_round=batch.state == BatchState.ANNOTATING,
        finish_after_round=looping and finishing is None,
        keep_rounds=looping and finishing is not None,
        pause=batch.state == BatchState.ANNOTATING and batch.paused_at is None,
        unpause=batch.paused_at is not None,
        cancel=batch.state not in _ENDED,
        resume=_resumable(batch) is None,
        finishing_after=finishing,
    )


def _batch(batch_id: int) -> Batch:
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        raise ServiceError(f"no batch {batch_id}")
    return batch


def round_close_now(*, batch_id: int) -> str:
    """Close the round being judged now and aggregate its approved work (`batch_run --force`).

    An adaptive batch goes on to its next round unless asked to finish after this one.
    """
    batch = _batch(batch_id)
    if batch.state != BatchState.ANNOTATING:
        raise StateConflict(
            f"batch {batch_id} is {batch.state}: only a batch that is annotating has a round "
            "to close"
        )
    failures_to_batch(lambda: annotation_close_queue(batch_id=batch_id, force=True))
    return _with_failure(
        batch_id,
        f"Round {batch.round} of batch {batch_id} closed: its approved work is being "
        "aggregated. Open work on it has ended.",
    )


def _with_failure(batch_id: int, text: str) -> str:
    """Add the batch's error, when a stage run here (eager Celery) failed, to `text`."""
    error = Batch.objects.values_list("error", flat=True).get(pk=batch_id)
    return f"{text} Then a stage failed: {error} (resume it below)." if error else text


def rounds_finish_after(*, batch_id: int, finish: bool = True) -> str:
    """Ask an adaptive batch to release after its current round instead of looping (or, with
    `finish=False`, to go on as planned). Stored in `Batch.reports` (`FINISH_KEY`)."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(pk=batch_id).first()
        if batch is None:
            raise ServiceError(f"no batch {batch_id}")
        if not batch_config(batch).adaptive:
            raise StateConflict(
                f"batch {batch_id} is fixed: it has one round and releases after it anyway"
            )
        if batch.state in (*_ENDED, BatchState.DRAFT):
            raise StateConflict(f"batch {batch_id} is {batch.state}: it runs no rounds now")
        reports = {k: v for k, v in batch.reports.items() if k != FINISH_KEY}
        if finish:
            reports[FINISH_KEY] = batch.round
        batch.reports = reports
        batch.save(update_fields=["reports"])
    if finish:
        return (
            f"Batch {batch_id} finishes after round {batch.round}: once that round is "
            "aggregated it is released, whatever budget is left."
        )
    return f"Batch {batch_id} runs its rounds as planned again."


def batch_cancel_now(*, batch_id: int) -> str:
    """Cancel the batch for good (`stages.batch_cancel`)."""
    batch_cancel(batch=_batch(batch_id))
    return f"Batch {batch_id} cancelled: no stage runs any more and its open HITs are withdrawn."


def _resumable(batch: Batch) -> str | None:
    """None when the batch can be resumed now, else why not."""
    if batch.state in AUTOMATIC_STAGES:
        if lease_live(key_prefix=stage_lease(batch.pk, batch.state).key):
            return f"its {batch.state} stage is running on a worker right now"
        return None
    if batch.state == BatchState.ANNOTATING:
        if batch.error:
            return None
        return (
            "it waits for people: nothing to resume (close the round to go on without the "
            "missing work)"
        )
    if batch.state == BatchState.DRAFT:
        return "it is a draft: start it first"
    return f"it is {batch.state}"


def batch_resume(*, batch_id: int) -> str:
    """Queue the batch's current stage again (`batch_run BATCH`), clearing its error.

    For a stage that failed, whose worker was lost too often, or that a stopped web process
    left half-done with eager Celery. A stage a live worker runs is refused; the stages are
    idempotent, so one that is merely slow is never run twice at once.
    """
    batch = _batch(batch_id)
    why_not = _resumable(batch)
    if why_not is not None:
        raise StateConflict(f"batch {batch_id} cannot be resumed: {why_not}")
    Batch.objects.filter(pk=batch_id, state=batch.state).update(error="")
    if batch.state == BatchState.ANNOTATING:
        if lease_live(key_prefix=close_lease(batch_id).key):
            return f"Batch {batch_id}'s close is running on a worker right now."
        failures_to_batch(lambda: annotation_close_queue(batch_id=batch_id, force=False))
        text = f"Batch {batch_id}: its close is queued again (it waits while work is missing)."
        return _with_failure(batch_id, text)
    failures_to_batch(lambda: stage_queue(batch_id=batch_id, stage=batch.state))
    return _with_failure(batch_id, f"Batch {batch_id}: its {batch.state} stage is queued again.")


# Every control by name, as the batch page's buttons, the API's `control` action and the
# `batch_control` command name them; each takes `batch_id` and returns a sentence.
ROUND_CONTROLS: dict[str, Callable[..., str]] = {
    "close_round": round_close_now,
    "finish_after_round": rounds_finish_after,
    "keep_rounds": partial(rounds_finish_after, finish=False),
    "pause": partial(batch_pause_set, paused=True),
    "unpause": partial(batch_pause_set, paused=False),
    "cancel": batch_cancel_now,
    "resume": batch_resume,
}
