"""Per-stage progress: stored for the API and UI, and echoed to an optional listener."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.utils import timezone

from annotation.models import Batch, BatchStageProgress

# (stage, done, total), e.g. to draw a progress bar on the command line.
ProgressListener = Callable[[str, int, int], None]

_WRITE_INTERVAL_S = 0.5  # throttle: progress rows are for people, not an audit log


class StageTracker:
    """Count work done in one stage of a batch."""

    def __init__(self, *, batch: Batch, stage: str, listener: ProgressListener | None = None):
        self.batch_id = batch.pk
        self.stage = stage
        self.listener = listener
        self.done = 0
        self.total = 0
        self._last_write = 0.0

    def start(self, total: int) -> None:
        # A stage may count several kinds of work in turn (aggregating: pairs, then the
        # release's blocks): each start counts from 0, or the old count would be written
        # against the new total (aggregating 4021/100).
        self.done = 0
        self.total = total
        BatchStageProgress.objects.update_or_create(
            batch_id=self.batch_id,
            stage=self.stage,
            defaults={"done": 0, "total": total, "started_at": timezone.now(), "finished_at": None},
        )
        self._notify(force=True)

    def update(self, done: int) -> None:
        self.done = min(done, self.total) if self.total else done
        self._notify()

    def advance(self, step: int = 1) -> None:
        self.update(self.done + step)

    def finish(self) -> None:
        self.done = self.total
        BatchStageProgress.objects.filter(batch_id=self.batch_id, stage=self.stage).update(
            done=self.done, total=self.total, finished_at=timezone.now()
        )
        if self.listener:
            self.listener(self.stage, self.done, self.total)

    def _notify(self, *, force: bool = False) -> None:
        if self.listener:
            self.listener(self.stage, self.done, self.total)
        now = time.monotonic()
        if force or now - self._last_write >= _WRITE_INTERVAL_S:
            self._last_write = now
            BatchStageProgress.objects.filter(batch_id=self.batch_id, stage=self.stage).update(
                done=self.done, total=self.total
            )
