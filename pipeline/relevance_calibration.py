"""Relevance calibration of a dataset: the crowd's answers as ratings beside CxC's, and the
report `python manage.py relevance_calibrate` prints (docs/relevance.md).

The arithmetic lives in `mitl.relevance.calibration`; this module reads the database and
the ratings files and assembles the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from annotation.models import AssignmentStatus, Dataset, Judgement, RelevanceCalibration
from mitl.annotators.encoders import DEFAULT_ENCODER
from mitl.formats.common import ImportFileError
from mitl.formats.positives import parse_cxc_sits, parse_cxc_sts
from mitl.judgements import Level
from mitl.relevance.calibrated import CONTEXT_ENCODER
from mitl.relevance.calibration import (
    COMBINATION,
    Ratings,
    RatingsError,
    caption_ratings,
    context_features,
    correlation_row,
    correlation_table,
    coverage_features,
    fit_combination,
    image_ratings,
    proxy_features,
    recommend,
)
from mitl.relevance.images import CaptionCorpus
from mitl.relevance.proxies import (
    PROXIES,
    UnknownProxy,
    proxy_build,
    proxy_spec,
    proxy_unavailable,
)
from pipeline.relevance import DatasetCorpus

# The crowd's four answers as an ordinal rating.
LEVEL_RATING: dict[str, float] = {
    Level.YES: 3.0,
    Level.WEAK_YES: 2.0,
    Level.WEAK_NO: 1.0,
    Level.NO: 0.0,
}
COUNTED_ASSIGNMENTS = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)

Say = Callable[[str], None]
# What `calibration_report` raises for input it cannot use; each message says what and where.
CALIBRATION_ERRORS = (ImportFileError, RatingsError, UnknownProxy, RuntimeError, OSError)


def crowd_ratings(dataset: Dataset, corpus: CaptionCorpus) -> Ratings | None:
    """Return the platform's judged image–caption pairs of the dataset, rated 0–3 (mean of
    submitted and approved answers per pair), or None when there are none."""
    judged = Judgement.objects.filter(
        item__hit__batch__dataset=dataset, assignment__status__in=COUNTED_ASSIGNMENTS
    ).values_list("item__caption__ext_id", "item__image__ext_id", "level")
    sums: dict[tuple[int, int], list[float]] = {}
    for caption, image, level in judged.iterator():
        entry = sums.setdefault((caption, image), [0.0, 0.0])
        entry[0] += LEVEL_RATING[level]
        entry[1] += 1
    if not sums:
        return None
    pairs = [(0, caption, image, total / n) for (caption, image), (total, n) in sums.items()]
    return image_ratings("crowd", pairs, corpus, where=f"dataset {dataset.name}")


def calibration_report(
    data: DatasetCorpus,
    *,
    sits: Path | None,
    sts: Path | None,
    proxies: Sequence[str],
    combination: bool = True,
    say: Say | None = None,
) -> dict[str, Any]:
    """Return {source: {"pairs", "table", "recommended"}} for every ratings source given."""
    say = say or (lambda _: None)
    sources: list[Ratings] = []
    if data.dataset is not None:
        crowd = crowd_ratings(data.dataset, data.corpus)
        if crowd is not None:
            sources.append(crowd)
    if sits is not None:
        rows = parse_cxc_sits(sits)
        pairs = [(r.line, r.caption_id, r.image_id, r.score) for r in rows]
        sources.append(image_ratings("sits", pairs, data.corpus, where=str(sits)))
    if sts is not None:
        rows = parse_cxc_sts(sts)
        pairs = [(r.line, r.caption1_id, r.caption2_id, r.score) for r in rows]
        sources.append(caption_ratings("sts", pairs, data.corpus, where=str(sts)))
    if not sources:
        return {}
    for name in proxies:
        proxy_spec(name)  # an unknown name, or one that cannot run here, fails before any work
        missing = proxy_unavailable(name)
        if missing:
            raise RuntimeError(missing)
    built = proxies_build(proxies, data.corpus, say)
    report: dict[str, Any] = {}
    for ratings in sources:
        say(f"scoring {len(ratings.score):,} {ratings.source} pairs")
        features = proxy_features(ratings, data.corpus, built)
        table = correlation_table(features, ratings)
        if combination:
            features.update(combination_extras(ratings, data.corpus, built))
        if combination and len(features) > 1:
            say(f"fitting the combination on {ratings.source} (folds by image)")
            predicted = fit_combination(features, ratings)
            if predicted is not None:
                row = correlation_row(COMBINATION, predicted, ratings)
                table.append({**row, "out_of_fold": True})
        report[ratings.source] = {
            "pairs": len(ratings.score),
            "ground_truth_pairs": int(ratings.ground_truth.sum()),
            "table": table,
            "recommended": recommend(table),
        }
    return report


def proxies_build(names: Sequence[str], corpus: CaptionCorpus, say: Say) -> dict[str, Any]:
    """Build each named proxy over the corpus's captions (sentence embeddings through the
    relevance cache), saying which one is being built."""
    built: dict[str, Any] = {}
    for name in names:
        say(f"building {name} over {len(corpus.texts):,} captions")
        built[name] = proxy_build(
            name, corpus.texts, corpus.caption_images, cache_dir=settings.RELEVANCE_CACHE_DIR
        )
    return built


def combination_extras(
    ratings: Ratings, corpus: CaptionCorpus, built: dict[str, Any]
) -> dict[str, np.ndarray]:
    """The features the combination reads beyond the proxies' own: how alike the images'
    captions are (`context_features`, when the context encoder was built) and the words of
    the image's captions taken together (`coverage_features`)."""
    extras: dict[str, np.ndarray] = {}
    if CONTEXT_ENCODER in built:
        vectors = built[CONTEXT_ENCODER].vectors
        extras.update(context_features(ratings, corpus, vectors))
    extras.update(coverage_features(ratings, corpus))
    return extras


def default_proxies() -> list[str]:
    """Return every proxy that runs here (METEOR only with Java, pos/synset with WordNet),
    less the optional encoders' (mpnet reads a corpus five times slower than MiniLM: named
    when wanted)."""
    return [
        name
        for name, spec in PROXIES.items()
        if proxy_unavailable(name) is None and spec.encoder in (None, DEFAULT_ENCODER)
    ]


def format_report(report: dict[str, Any]) -> str:
    """Return the report as plain-text tables, one per ratings source."""
    lines: list[str] = []
    for source, part in report.items():
        lines.append(
            f"{source}: {part['pairs']:,} rated pairs ({part['ground_truth_pairs']:,} ground truth)"
        )
        lines.append(
            f"{'proxy':<16} {'all: pearson':>12} {'spearman':>9} {'kendall':>8}"
            f" {'non-GT: pearson':>16} {'spearman':>9} {'kendall':>8}"
        )
        for row in part["table"]:
            cells = [
                _cell(row[group][measure])
                for group in ("all", "non_gt")
                for measure in ("pearson", "spearman", "kendall")
            ]
            name = row["proxy"] + (" (out of fold)" if row.get("out_of_fold") else "")
            lines.append(
                f"{name:<16} {cells[0]:>12} {cells[1]:>9} {cells[2]:>8}"
                f" {cells[3]:>16} {cells[4]:>9} {cells[5]:>8}"
            )
        recommended = part["recommended"] or "none (no proxy agrees with people on non-GT pairs)"
        lines.append(f"recommended for {source}: {recommended}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def calibration_save(dataset: Dataset, report: dict[str, Any]) -> RelevanceCalibration:
    """Store a report for the dataset's relevance page (the newest is shown)."""
    return RelevanceCalibration.objects.create(dataset=dataset, report=report)


def latest_calibration(dataset: Dataset) -> RelevanceCalibration | None:
    """Return the dataset's newest calibration report, or None."""
    return dataset.relevance_calibrations.order_by("-created_at", "-pk").first()
