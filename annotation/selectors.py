"""Reads that are more than a one-line query."""

from __future__ import annotations

from typing import Any

from .models import Batch, BatchState

PIPELINE_STAGES: tuple[str, ...] = (
    BatchState.RETRIEVING,
    BatchState.POOLING,
    BatchState.BUILDING,
    BatchState.ANNOTATING,
    BatchState.AGGREGATING,
)


def batch_progress(*, batch: Batch) -> list[dict[str, Any]]:
    """Return done/total per pipeline stage, in pipeline order (missing stages as 0/0)."""
    rows = {row.stage: row for row in batch.progress.all()}
    result = []
    for stage in PIPELINE_STAGES:
        row = rows.get(stage)
        result.append(
            {
                "stage": str(stage),
                "done": row.done if row else 0,
                "total": row.total if row else 0,
                "finished": bool(row and row.finished_at),
            }
        )
    return result


def diversity_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten a diversity report into table rows: direction, annotator pair and figures."""
    rows = []
    for direction, by_pair in sorted(report.items()):
        for pair in by_pair.get("pairs", []):
            rows.append({"direction": direction, **pair})
    return rows
