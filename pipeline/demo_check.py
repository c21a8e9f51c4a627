"""`demo --check`: the demo's batches, release and printed figures, checked after the run.

The release folder is checked against itself by `mitl.release_check`; this module adds what
only the database and the demo's summary know: the batch was released, the release row
points at the folder, the counts printed agree with stats.json, and every recall,
precision and interval printed is a fraction in order.
"""

from __future__ import annotations

import json
from pathlib import Path

from annotation.models import HIT, Batch, BatchState, Release
from mitl.release_check import fraction_problems, release_problems
from mitl.release_files import STATS_FILE

from .demo import DemoSummary

# Counts the demo's run cannot have left at zero: a release of nothing is no release.
POSITIVE_COUNTS = ("image queries", "caption queries", "candidates", "HITs", "judgements")


def demo_check(summary: DemoSummary) -> list[str]:
    """Return what is off in the demo's run, one sentence each (empty when all is well)."""
    return _batch_problems(summary) + _release_problems(summary) + _figure_problems(summary)


def _batch_problems(summary: DemoSummary) -> list[str]:
    state = Batch.objects.filter(pk=summary.batch_id).values_list("state", flat=True).first()
    problems = []
    if state != BatchState.RELEASED:
        problems.append(f"batch {summary.batch_id} is {state or 'missing'}, not released")
    live = summary.live_batch_id
    if live is None or not HIT.objects.filter(batch_id=live).exists():
        problems.append(f"the batch for people ({live}) has no HITs to judge")
    return problems


def _release_problems(summary: DemoSummary) -> list[str]:
    release_dir = Path(summary.release_path) if summary.release_path else None
    if release_dir is None or not release_dir.is_dir():
        return [f"no release written (no folder at {summary.release_path!r})"]
    problems = []
    if not Release.objects.filter(batches__pk=summary.batch_id, path=str(release_dir)).exists():
        problems.append(f"no release of batch {summary.batch_id} records {release_dir}")
    problems += release_problems(release_dir)
    try:
        stats = json.loads((release_dir / STATS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return problems  # release_problems has said so
    assignments = stats.get("assignments", {})
    for status in ("approved", "rejected"):
        printed = summary.counts.get(f"{status} assignments")
        if printed != assignments.get(status, 0):
            problems.append(
                f"{printed} {status} assignments printed, but stats.json counts "
                f"{assignments.get(status, 0)}"
            )
    return problems


def _figure_problems(summary: DemoSummary) -> list[str]:
    problems = [
        f"the summary counts {summary.counts.get(name)!r} {name}"
        for name in POSITIVE_COUNTS
        if not (summary.counts.get(name) or 0) > 0
    ]
    if not summary.agreement:
        problems.append("the summary has no precision and recall against the synthetic truth")
    for label, agreement in summary.agreement.items():
        problems += fraction_problems(label, agreement, ("precision", "recall"))
    for direction, estimate in summary.estimated_recall.items():
        keys = ("recall_low", "recall", "recall_high")
        found = fraction_problems(f"estimated {direction}", estimate, keys)
        low, recall, high = (estimate.get(key) for key in keys)
        if not found and low > high:
            found.append(f"estimated {direction} recall interval {low}-{high}: lower > upper")
        elif not found and not low <= recall <= high:
            found.append(
                f"estimated {direction} recall {recall} lies outside its interval {low}-{high}"
            )
        problems += found
    if summary.explain_path and not _non_empty(Path(summary.explain_path)):
        problems.append(f"the explanation report {summary.explain_path} is missing or empty")
    return problems


def _non_empty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0
