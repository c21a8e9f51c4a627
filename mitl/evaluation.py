"""Evaluate one model's rankings on a release: check the queries, compute every metric.

Pure Python (no Django); `python manage.py evaluate` and the leaderboard call it.

A release is read and checked by `mitl.evaluation_inputs` (`release_load`), rankings by
`rankings_read` or `rankings_parse` there.

Checks (an `EvaluationError`): every query of the release is ranked; a ranked query that is
not a query of the release is refused, unless the rankings cover a whole split (below).
`mitl.metrics` then refuses rankings too short for a metric.

COCO 5K / 1K recalls
    They rank every caption and image of a split (e.g. the COCO 5K test split), not only the
    release's queries, against the original links. Given a `CaptionSplit` (captions in any
    order, each with its own image; the images' split order is their first appearance)
    and rankings for every image (i2t) and caption (t2i) of it, the result adds
    `coco_5k_recall@K` and `coco_1k_recall@K` (1K: 5 folds of whole images, see
    `mitl.coco_recalls`); otherwise, or when the split has fewer images than folds, they are
    not defined for these rankings and left out.

Output
    {"i2t": {...}, "t2i": {...}}, each with `recall@1/5/10`, `r_precision`, `map_at_r`,
    `pmrp`, `ndcg@10`, then the COCO recalls when defined, then `queries` (queries scored:
    those with a positive) and `queries_without_positives` (ranked but not scored). A
    metric over no query is None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mitl.coco_recalls import COCO_FOLDS, coco_recalls
from mitl.evaluation_inputs import DIRECTIONS, EvaluationError, RankingsByDirection, ReleaseTruth
from mitl.metric_truth import MetricError
from mitl.metrics import retrieval_metrics

KS: tuple[int, ...] = (1, 5, 10)
NDCG_K = 10
COUNT_KEYS: tuple[str, ...] = ("queries", "queries_without_positives")


@dataclass(frozen=True)
class CaptionSplit:
    """A dataset's captions, each with the image it was written for.

    The captions may come in any order (a COCO annotations file interleaves images); the
    images' order, which the COCO 1K folds follow, is their first appearance.
    """

    caption_ids: Sequence[int]
    image_ids: Sequence[int]


def evaluate(
    release: ReleaseTruth,
    rankings: RankingsByDirection,
    *,
    split: CaptionSplit | None = None,
) -> dict[str, dict[str, Any]]:
    """Return every metric per direction (see the module doc); raise EvaluationError."""
    covered = _check_queries(release, rankings, split)
    result: dict[str, dict[str, Any]] = {}
    for direction in DIRECTIONS:
        try:
            truth = release.prepared(direction)
            values = retrieval_metrics(truth, rankings[direction], ks=KS, ndcg_ks=(NDCG_K,))
        except MetricError as exc:
            raise EvaluationError(f"{direction}: {exc}") from None
        result[direction] = {key: _finite_or_none(value) for key, value in values.items()}
    if covered and split is not None and _has_coco_folds(split):
        try:
            coco = coco_recalls(
                rankings["i2t"],
                rankings["t2i"],
                caption_ids=split.caption_ids,
                caption_images=split.image_ids,
                ks=KS,
            )
        except MetricError as exc:
            raise EvaluationError(f"COCO recalls: {exc}") from None
        for direction in DIRECTIONS:
            result[direction].update(coco[direction])
    for direction in DIRECTIONS:
        scored = len(release.prepared(direction).queries)
        result[direction]["queries"] = scored
        result[direction]["queries_without_positives"] = len(release.positives[direction]) - scored
    return result


def _has_coco_folds(split: CaptionSplit) -> bool:
    """Say whether the split has an image for every COCO 1K fold (a tiny dataset may not)."""
    return len(set(split.image_ids)) >= COCO_FOLDS


def _check_queries(
    release: ReleaseTruth, rankings: RankingsByDirection, split: CaptionSplit | None
) -> bool:
    """Refuse unranked release queries and foreign ranked queries; say if the split is covered."""
    items = (
        {"i2t": set(split.image_ids), "t2i": set(split.caption_ids)} if split is not None else None
    )
    covered = items is not None and all(items[d].issubset(rankings[d]) for d in DIRECTIONS)
    for direction in DIRECTIONS:
        queries, ranked = release.positives[direction], rankings[direction]
        missing = [q for q in queries if q not in ranked]
        if missing:
            raise EvaluationError(
                f"{direction}: {len(missing)} of the release's {len(queries)} queries have no "
                f"ranking (first: {missing[0]})"
            )
        extra = [q for q in ranked if q not in queries]
        if not extra:
            continue
        kind = "images" if direction == "i2t" else "captions"
        if items is None:
            raise EvaluationError(
                f"{direction}: {len(extra)} ranked queries are not queries of the release "
                f"(first: {extra[0]})"
            )
        foreign = [q for q in extra if q not in items[direction]]
        if foreign:
            raise EvaluationError(
                f"{direction}: {len(foreign)} ranked queries are neither queries of the "
                f"release nor {kind} of its dataset (first: {foreign[0]})"
            )
        if not covered:
            raise EvaluationError(
                f"{direction}: {len(extra)} ranked queries are not queries of the release "
                f"(first: {extra[0]}); rank only its queries, or every image "
                f"({len(items['i2t'])}) and caption ({len(items['t2i'])}) of the dataset "
                "for the COCO 1K/5K recalls"
            )
    return covered


def _finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


# Display order of the metric families; "@K" metrics follow K. A stored result's own key
# order is not kept (PostgreSQL's jsonb sorts keys), so the order is decided here.
METRIC_FAMILIES = (
    "recall",
    "r_precision",
    "map_at_r",
    "pmrp",
    "ndcg",
    "coco_5k_recall",
    "coco_1k_recall",
)


def _display_rank(key: str) -> tuple[str, int, int, str]:
    # Graded metrics of a proxy ("ndcg@25:cider_d") follow the binary ones, by proxy.
    name, _, proxy = key.partition(":")
    family, _, k = name.partition("@")
    rank = METRIC_FAMILIES.index(family) if family in METRIC_FAMILIES else len(METRIC_FAMILIES)
    return proxy, rank, int(k) if k.isdigit() else 0, key


def metric_keys(result: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Return the metric names of a result in display order (counts left out)."""
    keys = {key for direction in DIRECTIONS for key in result.get(direction, {})}
    return sorted(keys - set(COUNT_KEYS), key=_display_rank)


def format_table(result: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the result as a plain-text table: one row per metric, one column per direction."""
    rows = [("metric", *DIRECTIONS)]
    for key in [*metric_keys(result), *COUNT_KEYS]:
        cells = []
        for direction in DIRECTIONS:
            value = result[direction].get(key)
            if value is None:
                cells.append("-")
            elif key in COUNT_KEYS:
                cells.append(str(value))
            else:
                cells.append(f"{value:.4f}")
        rows.append((key, *cells))
    width = max(len(row[0]) for row in rows)
    return "\n".join(
        f"{row[0]:<{width}}  " + "  ".join(f"{cell:>8}" for cell in row[1:]) for row in rows
    )
