"""Run a test batch through the pipeline, the simulated crowd judging it, to its release."""

from __future__ import annotations

from annotation.models import Batch
from mitl.config import batch_config
from pipeline.progress import StageTracker
from pipeline.simulate import crowd_simulate
from pipeline.stages import batch_run_until


def run_to_release(batch: Batch, *, until: str = "released") -> Batch:
    """Retrieve, build, let the simulated crowd judge, aggregate and release (or stop at
    `until`, e.g. "aggregating": judged, the work closed); return the batch."""
    batch_run_until(batch_id=batch.pk, until="annotating")
    batch = Batch.objects.select_related("dataset").get(pk=batch.pk)
    crowd_simulate(
        batch=batch,
        config=batch_config(batch),
        tracker=StageTracker(batch=batch, stage="annotating"),
    )
    assert batch_run_until(batch_id=batch.pk, until=until, force=True) == until
    return Batch.objects.select_related("dataset").get(pk=batch.pk)
