"""Build the whole `explain` report: models' concept failures, adversarial moves, crowd concepts.

The report is JSON-ready data (see docs/explain.md for its layout); `mitl.explain.html`
renders it.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.files.storage import default_storage

from annotation.errors import ServiceError
from annotation.models import Dataset, MachineAnnotator, Release
from mitl.annotators import AnnotatorError
from mitl.evaluation_inputs import DIRECTIONS, RankingsByDirection, ReleaseTruth
from mitl.explain.html import render_report
from mitl.explain.metrics import DEFAULT_SIZE_THRESHOLD
from pipeline.corpus import corpus_load
from pipeline.explain import (
    DEFAULT_WORST,
    DatasetConcepts,
    annotator_rankings,
    crowd_concepts,
    dataset_concepts,
    explain_rankings,
    image_details,
    release_annotators,
    release_of,
    shown_images,
)
from pipeline.explain_adversarial import (
    adversarial_rerank,
    available_kinds,
    perturbed_queries,
    rankings_movement,
)
from pipeline.progress import ProgressListener
from pipeline.retrieve import annotator_prepare

MAX_INLINE_IMAGE_BYTES = 400_000  # a larger file is left out: its caption stands in


@dataclass(frozen=True)
class ExplainRequest:
    """What to explain: a model's rankings and/or machine annotators, and how."""

    release_dir: Path
    truth: ReleaseTruth
    dataset: Dataset
    rankings: RankingsByDirection | None = None
    model_name: str = "model"
    annotators: Sequence[str] = ()
    adversarial: bool = False
    kinds: Sequence[str] | None = None
    seed: int = 0
    adversarial_rankings: dict[str, dict[int, list[int]]] | None = None  # kind → t2i rankings
    worst: int = DEFAULT_WORST
    size_threshold: float = DEFAULT_SIZE_THRESHOLD


def inline_image(file_name: str) -> str | None:
    """Return a stored image as a data: URI, so an HTML report travels as one file."""
    try:
        if default_storage.size(file_name) > MAX_INLINE_IMAGE_BYTES:
            return None
        with default_storage.open(file_name, "rb") as handle:
            data = handle.read()
    except Exception:  # any storage failure (S3 too) leaves the image out, not the report
        return None
    mime = mimetypes.guess_type(file_name)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _chosen_annotators(request: ExplainRequest, release: Release | None) -> list[MachineAnnotator]:
    if request.annotators:
        rows = {a.name: a for a in MachineAnnotator.objects.filter(name__in=request.annotators)}
        unknown = [name for name in request.annotators if name not in rows]
        if unknown:
            raise ServiceError(f"no machine annotator named {unknown[0]!r} (annotator_create)")
        return [rows[name] for name in request.annotators]
    if request.adversarial:
        return release_annotators(release, request.dataset)
    return []


def explain_report(
    request: ExplainRequest,
    *,
    url_of: Callable[[str], str | None] = inline_image,
    listener: ProgressListener | None = None,
) -> dict[str, Any]:
    """Explain the request's models on its release; raise ServiceError on bad input."""
    if request.rankings is None and not request.annotators and not request.adversarial:
        raise ServiceError("nothing to explain: give rankings, an annotator or --adversarial")
    release = release_of(request.release_dir)
    concepts = dataset_concepts(request.dataset)
    given = request.rankings
    models = [] if given is None else [_rankings_model(request, given, concepts)]
    annotator_models, skipped = _annotator_models(request, release, concepts, listener)
    models += annotator_models
    shown = [image for model in models for image in shown_images(model["explanation"])]
    return {
        "release": str(request.release_dir),
        "dataset": request.dataset.name,
        "concept_sources": concepts.sources,
        "settings": _report_settings(request),
        "models": models,
        "skipped_annotators": skipped,
        "crowd": crowd_concepts(release),
        "images": image_details(concepts, shown, url_of),
    }


def _report_settings(request: ExplainRequest) -> dict[str, Any]:
    """Return the settings of the report (the perturbation kinds only when adversarial)."""
    return {
        "worst": request.worst,
        "size_threshold": request.size_threshold,
        "seed": request.seed,
        "kinds": available_kinds(request.kinds) if request.adversarial else [],
    }


def _explanation(
    request: ExplainRequest, rankings: RankingsByDirection, concepts: DatasetConcepts
) -> dict[str, Any]:
    """Explain one model's rankings with the request's settings."""
    return explain_rankings(
        truth=request.truth,
        rankings=rankings,
        concepts=concepts,
        worst=request.worst,
        size_threshold=request.size_threshold,
    )


def _rankings_model(
    request: ExplainRequest, rankings: RankingsByDirection, concepts: DatasetConcepts
) -> dict[str, Any]:
    """Explain the rankings the request brings (a model run elsewhere)."""
    return {
        "name": request.model_name,
        "source": "rankings",
        "explanation": _explanation(request, rankings, concepts),
        "adversarial": _rankings_adversarial(request, concepts.caption_text),
    }


def _annotator_models(
    request: ExplainRequest,
    release: Release | None,
    concepts: DatasetConcepts,
    listener: ProgressListener | None,
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Rank the release's queries with each chosen annotator and explain its rankings.

    Return the explained models and the annotators skipped, each with its reason (e.g. an
    image model on a text-only dataset).
    """
    chosen = _chosen_annotators(request, release)
    if not chosen:
        return [], []
    loaded = corpus_load(dataset=request.dataset)
    queries = {d: sorted(request.truth.positives[d]) for d in DIRECTIONS}
    models: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for row in chosen:
        try:
            prepared = annotator_prepare(
                row=row, dataset=request.dataset, loaded=loaded, listener=listener
            )
        except AnnotatorError as exc:
            skipped.append({"name": row.name, "reason": str(exc)})
            continue
        rankings = annotator_rankings(loaded=loaded, prepared=prepared, queries=queries)
        adversarial = (
            adversarial_rerank(
                name=row.name,
                prepared=prepared,
                loaded=loaded,
                truth=request.truth,
                kinds=request.kinds,
                seed=request.seed,
                listener=listener,
            )
            if request.adversarial
            else None
        )
        models.append(
            {
                "name": row.name,
                "source": f"annotator ({row.kind})",
                "explanation": _explanation(request, rankings, concepts),
                "adversarial": adversarial,
            }
        )
    return models, skipped


def report_write(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write report.html and report.json into `out_dir`; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, json_path = out_dir / "report.html", out_dir / "report.json"
    json_path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    html_path.write_text(render_report(report), encoding="utf-8")
    return html_path, json_path


def _rankings_adversarial(
    request: ExplainRequest, caption_text: dict[int, str]
) -> dict[str, Any] | None:
    """Compare the model's rankings with its rankings of the perturbed queries, if given."""
    if request.rankings is None or request.adversarial_rankings is None:
        return None
    queries = perturbed_queries(
        request.truth, caption_text, kinds=list(request.adversarial_rankings), seed=request.seed
    )
    return rankings_movement(
        request.truth,
        request.rankings["t2i"],
        request.adversarial_rankings,
        queries,
        caption_text,
    )
