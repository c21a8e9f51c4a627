"""A model's retrieval failures, explained concept by concept, and their summary.

Pure Python. A failure is a query whose first result is not one of its positives (paper
000, section 4, with the release's extended positives instead of the single original).

- Text to image: I_g is the query caption's own image (the one it was written for; it is
  always a positive of a release) or, without it, the positive the model ranked best; I_r is the
  image ranked first. The query-informed side keeps what the query caption mentions.
- Image to text: I_g is the query image; I_r is the image the first-ranked caption was
  written for. An image query mentions everything in it, so there is no query-informed
  variant.

A failure whose two images are the same (a caption of the query image that the release
does not count as a positive) or whose images have no concepts is counted, not explained.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mitl.explain.concepts import ImageConcepts
from mitl.explain.metrics import DEFAULT_SIZE_THRESHOLD, FailureMetrics, Similarity, failure_metrics
from mitl.explain.synsets import category_similarity

METRICS: tuple[str, ...] = ("ca", "ncs", "ce", "sd", "sd_rate", "aa")
HIGHER_IS_BETTER: dict[str, bool] = {
    "aa": True,
    "ca": True,
    "ncs": True,
    "ce": False,
    "sd": False,
    "sd_rate": False,
}
HISTOGRAM_BINS = 10
TOP_CONFUSIONS = 15
# (caption id, categories) -> those of the categories the caption mentions
MentionedFn = Callable[[int, frozenset[str]], frozenset[str]]


@dataclass(frozen=True)
class Failure:
    """One query whose first result is not a positive, with its concept metrics."""

    direction: str
    query: int
    retrieved: int  # the first-ranked target (image or caption id)
    truth_image: int
    retrieved_image: int
    truth_rank: int | None  # 1-based rank of the first positive; None if not ranked
    agnostic: FailureMetrics
    informed: FailureMetrics | None


@dataclass(frozen=True)
class ExplainInputs:
    """Everything the explanation reads besides the rankings."""

    positives: Mapping[str, Mapping[int, Sequence[int]]]  # direction -> query -> targets
    caption_image: Mapping[int, int]  # caption id -> its own image id
    concepts: Mapping[int, ImageConcepts]  # image id -> its concepts
    mentioned: MentionedFn | None = None  # None: no query-informed metrics
    similarity: Similarity | None = None
    size_threshold: float = DEFAULT_SIZE_THRESHOLD


def first_positive_rank(ranking: Sequence[int], positives: set[int]) -> int | None:
    """Return the 1-based rank of the first positive in `ranking`, None when none is ranked."""
    for rank, target in enumerate(ranking, start=1):
        if target in positives:
            return rank
    return None


def find_failures(
    direction: str, rankings: Mapping[int, Sequence[int]], inputs: ExplainInputs
) -> tuple[list[Failure], int, int]:
    """Return (explained failures, all failures, queries ranked) of one direction."""
    similarity = inputs.similarity or category_similarity
    positives_of = inputs.positives[direction]
    failures: list[Failure] = []
    failed = ranked = 0
    for query, ranking in rankings.items():
        positives = set(positives_of.get(query, ()))
        if not ranking or not positives:
            continue
        ranked += 1
        top = ranking[0]
        if top in positives:
            continue
        failed += 1
        truth_rank = first_positive_rank(ranking, positives)
        if direction == "t2i":
            own = inputs.caption_image.get(query)
            # Without its own image among the positives, the positive the model ranked best.
            if own in positives:
                truth_image = own
            else:
                truth_image = ranking[truth_rank - 1] if truth_rank else min(positives)
            retrieved_image = top
        else:
            truth_image = query
            retrieved_image = inputs.caption_image.get(top, -1)
        truth, retrieved = inputs.concepts.get(truth_image), inputs.concepts.get(retrieved_image)
        if truth is None or retrieved is None or truth_image == retrieved_image:
            continue
        agnostic = failure_metrics(
            truth, retrieved, similarity, size_threshold=inputs.size_threshold
        )
        informed = None
        if inputs.mentioned is not None and direction == "t2i":
            informed = failure_metrics(
                truth,
                retrieved,
                similarity,
                mentioned=inputs.mentioned(query, truth.categories),
                size_threshold=inputs.size_threshold,
            )
        failures.append(
            Failure(
                direction,
                query,
                top,
                truth_image,
                retrieved_image,
                truth_rank,
                agnostic,
                informed,
            )
        )
    return failures, failed, ranked


def _metric_value(metrics: FailureMetrics, name: str) -> float | None:
    value = getattr(metrics, name)  # sd_rate is a property, read the same way
    return None if value is None else float(value)


def summarise_metrics(all_metrics: Sequence[FailureMetrics]) -> dict[str, Any]:
    """Return means (with how many failures define each), Table-3 counts and histograms."""
    summary: dict[str, Any] = {"means": {}, "defined": {}, "histograms": {}}
    for name in METRICS:
        values = [v for m in all_metrics if (v := _metric_value(m, name)) is not None]
        summary["means"][name] = float(np.mean(values)) if values else None
        summary["defined"][name] = len(values)
        summary["histograms"][name] = _histogram(name, values)
    hits = sum(len(m.common) for m in all_metrics)
    misses = sum(len(m.missing) for m in all_metrics)
    enumerated = sum(len(m.count_differences) for m in all_metrics)
    summary["object_hit"] = hits
    summary["object_miss"] = misses
    summary["matched_share"] = hits / (hits + misses) if hits + misses else None
    summary["enumeration_disagreement"] = enumerated / (hits + misses) if hits + misses else None
    return summary


def _histogram(name: str, values: Sequence[float]) -> dict[str, list[float]]:
    """Return {'edges', 'counts'}: ten bins over [0, 1] for shares, integer bins otherwise."""
    values = [v for v in values if np.isfinite(v)]
    if name in ("ca", "ncs", "sd_rate", "aa"):
        edges = np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1)
    else:
        top = max(1.0, float(np.ceil(max(values, default=1.0))))
        edges = np.linspace(0.0, top, min(HISTOGRAM_BINS, int(top)) + 1)
    counts, _ = np.histogram(np.asarray(values, dtype=float), bins=edges)
    return {"edges": [round(float(e), 6) for e in edges], "counts": counts.tolist()}


def confusions(failures: Sequence[Failure]) -> dict[str, list[dict[str, Any]]]:
    """Return the most frequent missed concepts and missed → retrieved concept pairs."""
    missed: Counter[str] = Counter()
    swapped: Counter[tuple[str, str]] = Counter()
    for failure in failures:
        missed.update(failure.agnostic.missing)
        swapped.update((p.truth, p.retrieved) for p in failure.agnostic.ncs_pairs)
    return {
        "missed": [{"concept": c, "failures": n} for c, n in missed.most_common(TOP_CONFUSIONS)],
        "swapped": [
            {"truth": a, "retrieved": b, "failures": n}
            for (a, b), n in swapped.most_common(TOP_CONFUSIONS)
        ],
    }


def worst_failures(failures: Sequence[Failure], limit: int) -> list[Failure]:
    """Return the failures furthest from the truth: lowest CA, then lowest NCS, highest CE."""

    def badness(failure: Failure) -> tuple[float, float, float, int]:
        m = failure.agnostic
        return (
            m.ca if m.ca is not None else 1.0,
            m.ncs if m.ncs is not None else 1.0,
            -(m.ce or 0),
            failure.query,
        )

    return sorted(failures, key=badness)[:limit]


def failure_record(failure: Failure) -> dict[str, Any]:
    """Return a failure as JSON-ready data."""
    record = asdict(failure)
    for side in ("agnostic", "informed"):
        if record[side] is not None:
            metrics = getattr(failure, side)
            record[side]["sd_rate"] = metrics.sd_rate
    return record


def explain_direction(
    direction: str,
    rankings: Mapping[int, Sequence[int]],
    inputs: ExplainInputs,
    *,
    worst: int = 10,
) -> dict[str, Any]:
    """Return a direction's explanation: failure counts, both metric summaries, confusions."""
    failures, failed, ranked = find_failures(direction, rankings, inputs)
    result: dict[str, Any] = {
        "queries": ranked,
        "failures": failed,
        "failure_rate": failed / ranked if ranked else None,
        "explained": len(failures),
        "agnostic": summarise_metrics([f.agnostic for f in failures]),
        "informed": None,
        "confusions": confusions(failures),
        "worst": [failure_record(f) for f in worst_failures(failures, worst)],
    }
    if inputs.mentioned is not None and direction == "t2i":
        result["informed"] = summarise_metrics([f.informed for f in failures if f.informed])
    return result
