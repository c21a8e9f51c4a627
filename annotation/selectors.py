"""Reads that are more than a one-line query: batches, datasets, HIT pages, releases.

The reads of reviewing crowd work live in `review_selectors`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from django.db.models import Count, Q
from django.urls import reverse

from mitl.config import batch_config
from mitl.costs import BatchEstimate, cost_estimate
from mitl.curation.estimate import RECALL_TRUTH, recall_wording
from mitl.judgements import (
    LEVEL_LABELS,
    SHORTCOMING_LABELS,
    WRONG_CONCEPT_LABELS,
    Level,
)
from mitl.release_files import bundle_path

from .budget import judgements_spent
from .human_work import work_count
from .models import (
    HIT,
    Assignment,
    Batch,
    BatchState,
    Caption,
    Dataset,
    Image,
    PositiveSet,
    Release,
)
from .mturk.hit_settings import batch_reward
from .pages import page_items

# States whose HITs are all built, and the state in which the candidates are all pooled.
_BUILT = frozenset({BatchState.ANNOTATING, BatchState.AGGREGATING, BatchState.RELEASED})
_POOLED = frozenset({BatchState.BUILDING})
PIPELINE_STAGES: tuple[str, ...] = (
    BatchState.RETRIEVING,
    BatchState.POOLING,
    BatchState.BUILDING,
    BatchState.ANNOTATING,
    BatchState.AGGREGATING,
)


def batch_progress(*, batch: Batch) -> list[dict[str, Any]]:
    """Return done/total per pipeline stage, in pipeline order (missing stages as 0/0).

    Annotating is counted live (HITs of the current round with all their approved work)
    while the batch annotates, or when no stage run stored it (people's work arrives
    through submission, review and the MTurk sync, not a stage). Done never exceeds total.
    """
    rows = {row.stage: row for row in batch.progress.all()}
    result = []
    for stage in PIPELINE_STAGES:
        row = rows.get(stage)
        done, total = (row.done, row.total) if row else (0, 0)
        finished = bool(row and row.finished_at)
        if stage == BatchState.ANNOTATING and _annotating_live(batch, row):
            count = work_count(batch_id=batch.pk, round=batch.round)
            done, total = count.hits_done, count.hits
            finished = batch.state != BatchState.ANNOTATING
        result.append(
            {"stage": str(stage), "done": min(done, total), "total": total, "finished": finished}
        )
    return result


def _annotating_live(batch: Batch, row: Any) -> bool:
    """Say whether the annotating stage's counts come from the work itself."""
    if batch.state == BatchState.ANNOTATING:
        return True
    return batch.state in _BUILT and (row is None or not row.total)


def batch_curation(*, batch: Batch, spent: int | None = None) -> dict[str, Any]:
    """Strategy, round, budget and the estimated recall per direction (docs/curation.md).

    Read from the batch's configuration and the report its aggregations keep
    (`Batch.reports["curation"]`); the estimate is None until a random sample is judged.
    `spent`: the judgements spent as just counted (`HumanWork.judgements_spent`), if known.
    """
    config = batch_config(batch)
    report = batch.reports.get("curation", {})
    directions = report.get("directions", {})
    return {
        "strategy": config.strategy,
        "adjudication": config.adjudication if config.adaptive else None,
        "round": batch.round,
        "budget_judgements": config.budget_judgements or None,
        # Live, as the budget counts it: the report's figure is that of the last aggregation.
        "judgements_spent": spent
        if spent is not None
        else judgements_spent(batch_id=batch.pk, items_per_hit=config.items_per_hit),
        "recall_truth": RECALL_TRUTH,
        "estimates": {
            direction: _worded(directions.get(direction, {}).get("estimate"))
            for direction in ("i2t", "t2i")
            if direction in directions
        },
        "rounds": [
            {
                "round": entry["round"],
                "hits_planned": entry.get("hits_planned", 0),
                "policy_pairs": entry.get("policy_pairs", 0),
                "sample_pairs": entry.get("sample_pairs", 0),
                "rejudged": len(entry.get("rejudged", [])),
            }
            for entry in report.get("rounds", [])
        ],
        "queries_most_remaining": {
            direction: values.get("queries_most_remaining", [])
            for direction, values in directions.items()
        },
    }


def _worded(estimate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored estimate with what its recall counts and whether its interval is usable."""
    if estimate is None:
        return None
    wording = recall_wording(recall_low=estimate["recall_low"], recall_high=estimate["recall_high"])
    return {**estimate, "truth": wording.truth, "warning": wording.warning}


def diversity_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten a diversity report into table rows: direction, annotator pair and figures."""
    rows = []
    for direction, by_pair in sorted(report.items()):
        for pair in by_pair.get("pairs", []):
            rows.append({"direction": direction, **pair})
    return rows


def hit_page_content(
    *, hit: HIT, image_url: Callable[[int], str], assignment: Assignment | None = None
) -> dict[str, Any]:
    """Return what a HIT page shows: the pairs in the assignment's order without their roles,
    whether it asks why, and the labels of the answers and reasons.

    The platform's page and MTurk's frame show the same content; `image_url` gives a pair's
    image link there, from its number (asked only for items whose image has a file). Golden
    pairs must look exactly like the others, so nothing here tells them apart, not even an
    id: a pair's `id` is its number on this page (`annotation.pages`), `position` its place
    from 0. The assignment's pairs (a golden replaced since it was handed out stays on its
    page) come in its own order (its `page_seed`); without one, the pairs a new assignment
    would get, in the HIT's order.
    """
    # Plain rows, not model instances: every "next HIT" builds this page.
    shown = page_items(
        hit_id=hit.pk, assignment=assignment, fields=("image__file", "caption__text")
    )
    return {
        "followups": batch_config(hit.batch).followups,
        "items": [
            {
                "id": position + 1,
                "position": position,
                "image_url": image_url(position + 1) if image_file else None,
                "caption": caption,
            }
            for position, (_pk, image_file, caption) in enumerate(shown)
        ],
        "levels": [
            (level.value, LEVEL_LABELS[level], index + 1) for index, level in enumerate(Level)
        ],
        # The page's script reads the levels that ask why from a data attribute, as JSON.
        "middle_levels": json.dumps([Level.WEAK_YES.value, Level.WEAK_NO.value]),
        "shortcomings": list(SHORTCOMING_LABELS.items()),
        "wrong_concepts": list(WRONG_CONCEPT_LABELS.items()),
    }


def item_image_url(assignment_id: int, number: int) -> str:
    """Return the platform's link to the image of pair `number` of an assignment's page, for
    the worker who holds the HIT."""
    return reverse("frontend:pair-image", args=[assignment_id, number])


def assignment_page(*, assignment: Assignment) -> dict[str, Any]:
    """Return the pairs (with the worker's image links) and follow-ups of an assignment's HIT."""
    page = hit_page_content(
        hit=assignment.hit,
        image_url=partial(item_image_url, assignment.pk),
        assignment=assignment,
    )
    return {"followups": page["followups"], "items": page["items"]}


def dataset_rows(*, datasets: Iterable[Dataset]) -> list[dict[str, Any]]:
    """Return each dataset with its counts and positive sets, in a fixed number of queries."""
    datasets = list(datasets)
    ids = [dataset.pk for dataset in datasets]
    images = dict(
        Image.objects.filter(dataset_id__in=ids)
        .values_list("dataset_id")
        .annotate(n=Count("pk"))
        .values_list("dataset_id", "n")
    )
    captions = {
        row["dataset_id"]: row
        for row in Caption.objects.filter(dataset_id__in=ids)
        .values("dataset_id")
        .annotate(total=Count("pk"), invalid=Count("pk", filter=Q(is_invalid=True)))
    }
    sets: dict[int, list[PositiveSet]] = {pk: [] for pk in ids}
    for positive_set in (
        PositiveSet.objects.filter(dataset_id__in=ids)
        .annotate(n_pairs=Count("pairs"))
        .order_by("created_at", "name")
    ):
        sets[positive_set.dataset_id].append(positive_set)
    return [
        {
            "dataset": dataset,
            "images": images.get(dataset.pk, 0),
            "captions": captions.get(dataset.pk, {}).get("total", 0),
            "invalid_captions": captions.get(dataset.pk, {}).get("invalid", 0),
            "positive_sets": sets[dataset.pk],
        }
        for dataset in datasets
    ]


def positive_sets_counted(*, dataset: Dataset) -> list[PositiveSet]:
    """Return a dataset's positive sets in creation order, each with `n_pairs`."""
    return list(
        PositiveSet.objects.filter(dataset=dataset).annotate(n_pairs=Count("pairs")).order_by("pk")
    )


def batch_counts(*, batch: Batch) -> dict[str, Any]:
    """Return a batch's queries, candidates, HITs and assignments per status."""
    by_status = (
        batch.hits.values("assignments__status")
        .exclude(assignments__status=None)
        .annotate(n=Count("assignments"))
        .order_by()
    )
    return {
        "queries": batch.queries.count(),
        "candidates": batch.candidates.count(),
        "hits": batch.hits.count(),
        "assignments": {row["assignments__status"]: row["n"] for row in by_status},
    }


def batch_cost_estimate(*, batch: Batch, reward: Decimal | None = None) -> BatchEstimate:
    """Estimate a batch's cost from its HITs once built, its candidates once pooled.

    `reward` per assignment: the batch's own (`batch_reward`) unless another is asked about.
    """
    if reward is None:
        reward = batch_reward(batch)
    hits = candidates = None
    if batch.state in _BUILT or (batch.state == BatchState.CANCELLED and batch.hits.exists()):
        hits = batch.hits.count()
    elif batch.state in _POOLED:
        candidates = batch.candidates.count()
    return cost_estimate(
        config=batch_config(batch), reward_per_assignment=reward, candidates=candidates, hits=hits
    )


@dataclass(frozen=True)
class ReleaseZip:
    """A release's zip on disk and the name a download gives it."""

    path: Path
    filename: str


def release_zip(*, release: Release) -> ReleaseZip | None:
    """Return the release's zip, or None when it is missing (older release, moved files)."""
    path = bundle_path(Path(release.path))
    if not path.is_file():
        return None
    return ReleaseZip(path=path, filename=f"{release.name}-v{release.version}.zip")


def dataset_target_ids(*, dataset: Dataset, limit: int) -> tuple[list[int], list[int]]:
    """Return up to `limit` image and caption ids of the dataset (by id), invalid captions out.

    They are the other targets of an example rankings file: ids a model could rank.
    """
    images = Image.objects.filter(dataset=dataset).order_by("ext_id")
    captions = Caption.objects.filter(dataset=dataset, is_invalid=False).order_by("ext_id")
    return (
        list(images.values_list("ext_id", flat=True)[:limit]),
        list(captions.values_list("ext_id", flat=True)[:limit]),
    )
