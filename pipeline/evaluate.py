"""Evaluation of models on releases: store each model's metrics, read the leaderboard.

The metrics come from `mitl.evaluation` over the release's directory. The release's dataset
gives the caption split (captions in import order, each with its own image; the COCO 1K
folds take the images in order of first appearance, so a COCO annotations file's
interleaved captions fold as its Karpathy file does), so rankings of every caption and
image also get the COCO 1K/5K recalls. A release that carries proxy qrels (its manifest's
`relevance`) adds graded metrics per proxy ("ndcg@25:cider_d", …; `mitl.graded_evaluation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, Evaluation, Release
from mitl.evaluation import CaptionSplit, evaluate, metric_keys
from mitl.evaluation_inputs import (
    DIRECTIONS,
    EvaluationError,
    RankingsByDirection,
    ReleaseTruth,
    rankings_sha256,
    release_load,
)
from mitl.graded_evaluation import leaderboard_graded
from mitl.leaderboard import Agreement, metric_agreement
from mitl.relevance.calibrated import CALIBRATED, CalibratedModel
from mitl.relevance.proxies import PROXIES
from pipeline.calibrated_relevance import CalibratedMissing, calibrated_model
from pipeline.explain import evaluation_explanation
from pipeline.relevance import dataset_corpus

MODEL_NAME_MAX = Evaluation._meta.get_field("model_name").max_length


def caption_split_of(*, dataset: Dataset) -> CaptionSplit:
    """Return the dataset's captions in import order with the image each was written for."""
    rows = list(
        Caption.objects.filter(dataset=dataset)
        .order_by("pk")
        .values_list("ext_id", "image__ext_id")
    )
    return CaptionSplit(
        caption_ids=[caption for caption, _ in rows], image_ids=[image for _, image in rows]
    )


def _may_replace(stored: Evaluation, submitted_by: AbstractBaseUser | None) -> bool:
    """Only the account that submitted a model (or staff) may replace its row."""
    if submitted_by is None:  # the command line, run by whoever runs the server
        return True
    return submitted_by.is_staff or stored.submitted_by_id == submitted_by.pk


# Called with (steps done, steps in all) as scoring goes: an evaluation job's progress.
Progress = Callable[[int, int], None]
SUBMIT_STEPS = 5  # the release read, the metrics, the graded metrics, the explanation, the row


def evaluation_name_check(
    *, release: Release, model_name: str, submitted_by: AbstractBaseUser | None = None
) -> str:
    """Return the model name, stripped, if this account may store it on the release.

    Raises ServiceError for an empty or too long name, or a model another account submitted
    (checked again when the rankings are scored: `evaluation_submit`).
    """
    model_name = model_name.strip()
    if not model_name or len(model_name) > MODEL_NAME_MAX:
        raise ServiceError(f"the model name must have 1 to {MODEL_NAME_MAX} characters")
    stored = Evaluation.objects.filter(release=release, model_name=model_name).first()
    if stored is not None and not _may_replace(stored, submitted_by):
        raise ServiceError(
            f"model {model_name!r} was submitted by another account; choose another name"
        )
    return model_name


def evaluation_submit(
    *,
    release: Release,
    model_name: str,
    rankings: RankingsByDirection,
    submitted_by: AbstractBaseUser | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Score a model's rankings on a release and store them as its leaderboard row.

    The same rankings again return the stored row untouched; other rankings under the
    same model name replace its metrics, when the same account (or staff) sends them.
    Bad rankings raise ServiceError, storing nothing. `progress` hears each step.
    """
    step = progress or (lambda done, total: None)
    model_name = evaluation_name_check(
        release=release, model_name=model_name, submitted_by=submitted_by
    )
    checksum = rankings_sha256(rankings)
    stored = Evaluation.objects.filter(release=release, model_name=model_name).first()
    if stored is not None and stored.rankings_sha256 == checksum:
        step(SUBMIT_STEPS, SUBMIT_STEPS)
        return stored
    step(0, SUBMIT_STEPS)
    try:
        truth = release_load(release.path)
        step(1, SUBMIT_STEPS)
        split = None
        if _ranks_beyond_queries(truth.positives, rankings):
            split = caption_split_of(dataset=release.dataset)
        metrics = evaluate(truth, rankings, split=split)
    except EvaluationError as exc:
        raise ServiceError(str(exc)) from None
    step(2, SUBMIT_STEPS)
    graded = _graded_metrics(release, truth, rankings)
    for direction in DIRECTIONS:
        metrics[direction].update(graded[direction])
    step(3, SUBMIT_STEPS)
    explanation = evaluation_explanation(release=release, truth=truth, rankings=rankings)
    step(4, SUBMIT_STEPS)
    with transaction.atomic():
        evaluation, _ = Evaluation.objects.update_or_create(
            release=release,
            model_name=model_name,
            defaults={
                "metrics": metrics,
                "rankings_sha256": checksum,
                "explanation": explanation,
                "submitted_by": submitted_by,
            },
        )
    step(SUBMIT_STEPS, SUBMIT_STEPS)
    return evaluation


def _graded_metrics(
    release: Release, truth: ReleaseTruth, rankings: RankingsByDirection
) -> dict[str, dict[str, float | None]]:
    """Return the graded metrics of the proxies whose qrels the release carries.

    A proxy whose values changed since the release was written (its version) is left out,
    and so is `calibrated` when the model of the release's version is gone, so every model
    on a leaderboard is scored by the same relevance.
    """
    relevance = release.manifest.get("relevance") or {}
    versions = relevance.get("versions") or {}
    calibrated = _release_calibrated(release, versions)
    proxies = [
        name
        for name in relevance.get("proxies") or []
        if (name in PROXIES and versions.get(name, PROXIES[name].version) == PROXIES[name].version)
        or (name == CALIBRATED and calibrated is not None)
    ]
    if not proxies:
        return {direction: {} for direction in DIRECTIONS}
    try:
        return leaderboard_graded(
            truth,
            rankings,
            dataset_corpus(release.dataset).corpus,
            proxies,
            aggregation=relevance.get("aggregation", "mean"),
            cache_dir=settings.RELEVANCE_CACHE_DIR,
            calibrated=calibrated,
        )
    except (EvaluationError, RuntimeError, OSError, ValueError) as exc:
        raise ServiceError(f"graded metrics of {', '.join(proxies)}: {exc}") from None


def _release_calibrated(release: Release, versions: dict[str, object]) -> CalibratedModel | None:
    """Return the stored model of the version the release's calibrated qrels were made
    with, or None (no such qrels, or that model is gone: left out); a model that cannot run
    here is a ServiceError that says why."""
    version = versions.get(CALIBRATED)
    if version is None:
        return None
    try:
        return calibrated_model(release.dataset, str(version))
    except CalibratedMissing:
        return None
    except RuntimeError as exc:
        raise ServiceError(f"graded metrics of {CALIBRATED}: {exc}") from None


def _ranks_beyond_queries(
    positives: dict[str, dict[int, list[int]]], rankings: RankingsByDirection
) -> bool:
    """Say whether the rankings hold queries past the release's (a whole split, maybe)."""
    return any(q not in positives[d] for d in DIRECTIONS for q in rankings[d])


@dataclass(frozen=True)
class Leaderboard:
    """Every model's metrics on a release, and how similarly the metrics order the models."""

    evaluations: list[Evaluation]
    metrics: list[str]  # metric names, in display order
    agreement: dict[str, Agreement]  # direction -> Kendall tau between metrics


def leaderboard_of(*, release: Release) -> Leaderboard:
    """Return the release's evaluations (by model name) with the metric agreement.

    Explanations stay in the database (they can be large); `has_explanation` says whether
    each row has one.
    """
    evaluations = list(
        Evaluation.objects.filter(release=release)
        .select_related("submitted_by")
        .defer("explanation")
        .annotate(
            has_explanation=ExpressionWrapper(
                Q(explanation__isnull=False), output_field=BooleanField()
            )
        )
        .order_by("model_name")
    )
    metrics: list[str] = []
    for evaluation in evaluations:
        for key in metric_keys(evaluation.metrics):
            if key not in metrics:
                metrics.append(key)
    agreement = {
        direction: metric_agreement(
            {e.model_name: e.metrics.get(direction, {}) for e in evaluations}, metrics
        )
        for direction in DIRECTIONS
    }
    return Leaderboard(evaluations=evaluations, metrics=metrics, agreement=agreement)
