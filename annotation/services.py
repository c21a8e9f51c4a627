"""Writes on workers outside the crowd's own work: simulated workers.

Crowd work has its own modules (`handout`, `submissions`, `review`), imports their package
(`annotation/imports/`). Arguments are keyword-only.
"""

from __future__ import annotations

from .models import Worker, WorkerSource


def worker_simulated_get_or_create(*, name: str, profile: dict) -> Worker:
    """Return the simulated worker `name`, creating it with `profile` the first time."""
    worker, _ = Worker.objects.get_or_create(
        source=WorkerSource.SIMULATED, external_id=name, defaults={"profile": profile}
    )
    return worker
