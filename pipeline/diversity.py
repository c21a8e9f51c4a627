"""Reports about a batch: how diverse its machine annotators are (ECCV Caption Table A.1)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation.models import Batch, Ranking
from mitl.diversity import diversity_report


def diversity_compute(*, batch: Batch) -> dict[str, Any]:
    """Compare the annotators' stored rankings of the same queries, per direction."""
    rankings: dict[str, dict[str, dict[int, list[int]]]] = defaultdict(lambda: defaultdict(dict))
    for name, direction, query_id, targets in Ranking.objects.filter(
        query__batch=batch
    ).values_list("annotator__name", "query__direction", "query_id", "targets"):
        rankings[direction][name][query_id] = targets
    return {
        direction: diversity_report(by_annotator)
        for direction, by_annotator in sorted(rankings.items())
    }


def diversity_save(*, batch: Batch) -> dict[str, Any]:
    """Compute the diversity report and keep it with the batch."""
    report = diversity_compute(batch=batch)
    batch.reports = {**batch.reports, "diversity": report}
    Batch.objects.filter(pk=batch.pk).update(reports=batch.reports)
    return report
