"""Approved work with a given measured time, for the fair-pay tests: the state written
directly (as `crowd_factories.assignment_make` does), not the path that led to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from annotation.models import HIT, Assignment, Judgement, Worker, items_shown_to

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def split_ms(total_ms: int, pairs: int) -> list[int]:
    """Spread `total_ms` over `pairs`: 1 s on each but the first, the rest on the first."""
    assert total_ms >= (pairs - 1) * 1000
    return [total_ms - (pairs - 1) * 1000] + [1000] * (pairs - 1)


def approved_work(
    hit: HIT,
    worker: Worker,
    seconds: float,
    *,
    assignment_id: str | None = None,
    confirmed: bool = True,
    status: str = "approved",
) -> Assignment:
    """An assignment of `hit` by `worker` in `status` whose pairs took `seconds` in all.

    `assignment_id`: MTurk work (confirmed by MTurk unless `confirmed=False`).
    """
    assignment = Assignment.objects.create(
        hit=hit,
        worker=worker,
        status=status,
        submitted_at=T0 + timedelta(minutes=5),
        external_id=assignment_id,
        confirmed_at=T0 + timedelta(minutes=10) if assignment_id and confirmed else None,
    )
    items = list(hit.items.filter(items_shown_to(assignment.pk)).order_by("position"))
    Judgement.objects.bulk_create(
        Judgement(assignment=assignment, item=item, level="yes", elapsed_ms=ms)
        for item, ms in zip(items, split_ms(round(seconds * 1000), len(items)), strict=True)
    )
    return assignment


def mturk_worker(worker_id: str) -> Worker:
    return Worker.objects.create(source="mturk", external_id=worker_id)


def platform_worker(name: str) -> Worker:
    return Worker.objects.create(source="platform", external_id=name)
