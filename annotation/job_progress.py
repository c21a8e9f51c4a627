"""Progress of a long job stored on its row (imports, leaderboard scoring): done/total."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import models

PROGRESS_INTERVAL_S = 0.25  # progress is written at most four times a second


class ProgressWriter:
    """Write a job row's done/total, at most once per `interval` seconds and always at the end.

    `model` is the job's model; it needs `done` and `total` fields.
    """

    def __init__(
        self,
        model: type[models.Model],
        job_id: int,
        *,
        interval: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.job_id = job_id
        self.interval = interval
        self.clock = clock
        self._last: float | None = None
        self.writes = 0

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        self.writes += 1
        self.model.objects.filter(pk=self.job_id).update(done=done, total=total)
