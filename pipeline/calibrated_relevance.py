"""The calibrated relevance of a dataset: fit the combination on every rated pair, keep it
(`CalibratedRelevanceModel`), and find the model `evaluate`, releases and the leaderboard
apply as the relevance source `calibrated` (docs/relevance.md).

The arithmetic lives in `mitl.relevance.calibrated`; this module reads and writes the
database and the ratings file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from annotation.models import CalibratedRelevanceModel, Dataset
from mitl.formats.positives import parse_cxc_sits
from mitl.relevance.calibrated import (
    CONTEXT_ENCODER,
    NON_GT_WEIGHT,
    CalibratedModel,
    calibrated_fit,
    calibrated_unavailable,
)
from mitl.relevance.calibration import (
    correlation_row,
    fit_combination,
    image_ratings,
    proxy_features,
)
from mitl.relevance.proxies import PROXIES, proxy_unavailable
from pipeline.relevance import DatasetCorpus
from pipeline.relevance_calibration import combination_extras, proxies_build

SITS_SCALE = 5.0  # CxC's SITS ratings run 0–5

Say = Callable[[str], None]


class CalibratedMissing(RuntimeError):
    """No stored calibrated model where one is needed; the message says how to fit one."""


def model_proxies(proxies: Sequence[str]) -> list[str]:
    """Return the proxies a stored model may read: the vectorised ones (METEOR scores pair by
    pair, hours for a corpus) that run here."""
    return [name for name in proxies if PROXIES[name].cheap and proxy_unavailable(name) is None]


def calibrated_train(
    data: DatasetCorpus, *, sits: Path, proxies: Sequence[str], say: Say | None = None
) -> tuple[CalibratedModel, dict[str, Any]]:
    """Fit the combination on every SITS pair of the corpus and return it with its figures:
    the out-of-fold Pearson (folds by image) of the same features and settings beside the
    best single proxy's, over all pairs and over non-ground-truth pairs."""
    say = say or (lambda _: None)
    rows = parse_cxc_sits(sits)
    pairs = [(r.line, r.caption_id, r.image_id, r.score) for r in rows]
    ratings = image_ratings("sits", pairs, data.corpus, where=str(sits))
    used = model_proxies(proxies)
    if not used:
        raise RuntimeError("no vectorised proxy runs here to fit a calibrated model on")
    built = proxies_build(used, data.corpus, say)
    features = proxy_features(ratings, data.corpus, built)
    singles = [correlation_row(name, values, ratings) for name, values in features.items()]
    context = CONTEXT_ENCODER in built
    features.update(combination_extras(ratings, data.corpus, built))
    say(f"scoring the combination out of fold on {len(ratings.score):,} SITS pairs")
    predicted = fit_combination(features, ratings)
    say("fitting the calibrated model on every pair")
    model = calibrated_fit(
        features,
        ratings.score,
        ratings.ground_truth,
        proxies=used,
        context=context,
        scale=SITS_SCALE,
    )
    best = max(singles, key=lambda row: row["non_gt"]["pearson"] or -1.0)
    figures = {
        "ratings": "sits",
        "pairs": len(ratings.score),
        "non_gt_pairs": int((~ratings.ground_truth).sum()),
        "non_gt_weight": NON_GT_WEIGHT,
        "out_of_fold": None
        if predicted is None
        else correlation_row("calibrated", predicted, ratings),
        "best_single": best,
    }
    return model, figures


def calibrated_save(
    dataset: Dataset, model: CalibratedModel, figures: dict[str, Any]
) -> CalibratedRelevanceModel:
    """Store the model as the dataset's newest calibrated relevance."""
    return CalibratedRelevanceModel.objects.create(
        dataset=dataset,
        version=model.version,
        spec=model.spec(),
        model=model.model,
        figures=json.loads(json.dumps(figures)),
    )


def calibrated_model(dataset: Dataset, version: str | None = None) -> CalibratedModel:
    """Return the dataset's newest stored model (of `version` when given); raise
    CalibratedMissing when there is none, or RuntimeError when it cannot run here."""
    rows = dataset.calibrated_relevance_models.all()
    if version is not None:
        rows = rows.filter(version=version)
    row = rows.order_by("-created_at", "-pk").first()
    if row is None:
        which = f" of version {version}" if version is not None else ""
        raise CalibratedMissing(
            f"dataset {dataset.name} has no calibrated relevance model{which}: fit one with "
            f"python manage.py relevance_calibrate {dataset.name} --sits RATINGS.csv --save"
        )
    model = CalibratedModel.from_spec(row.spec, bytes(row.model))
    missing = calibrated_unavailable(model)
    if missing:
        raise RuntimeError(missing)
    return model


def release_calibrated_model(manifest: dict[str, Any], dataset_name: str | None) -> CalibratedModel:
    """Return the model a release's calibrated relevance uses: the version its manifest
    records, of the dataset it names (or `dataset_name`), else that dataset's newest."""
    name = dataset_name or manifest.get("dataset")
    if not name:
        raise CalibratedMissing(
            "the release does not name its dataset: give the dataset whose calibrated "
            "relevance model to use (--calibration-dataset)"
        )
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        raise CalibratedMissing(f"there is no dataset {name} to take a calibrated model from")
    recorded = ((manifest.get("relevance") or {}).get("versions") or {}).get("calibrated")
    return calibrated_model(dataset, str(recorded) if recorded and not dataset_name else None)


def release_manifest_read(release_dir: Path) -> dict[str, Any]:
    """Return a release directory's manifest.json, or {} when it has none."""
    try:
        return dict(json.loads((release_dir / "manifest.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}
