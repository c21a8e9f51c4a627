"""A stage's stored progress: done never above total, even when the stage counts anew."""

from __future__ import annotations

import pytest

from annotation.models import BatchStageProgress
from pipeline.progress import StageTracker

pytestmark = pytest.mark.django_db


def stored(batch, stage: str) -> tuple[int, int]:
    row = BatchStageProgress.objects.get(batch=batch, stage=stage)
    return row.done, row.total


def test_a_second_count_in_one_stage_starts_from_zero(batch):
    # Aggregating counts the pairs (4021), then the release's blocks (100): the dashboard
    # showed "aggregating 4021/100" when the second start wrote the first count.
    tracker = StageTracker(batch=batch, stage="aggregating")
    tracker.start(4021)
    tracker.finish()
    tracker.start(100)
    assert stored(batch, "aggregating") == (0, 100)
    tracker.update(10)
    tracker.finish()
    assert stored(batch, "aggregating") == (100, 100)


def test_an_update_past_the_total_stops_at_the_total(batch):
    tracker = StageTracker(batch=batch, stage="pooling")
    tracker.start(5)
    tracker._last_write = 0.0  # let the throttled write happen now
    tracker.update(9)
    assert tracker.done == 5
    assert stored(batch, "pooling") == (5, 5)
