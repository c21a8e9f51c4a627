"""Explain a model's failures on a release: concepts from the dataset, metrics from mitl.explain.

A dataset's concepts come from one source for all its images: stored instances, else class
labels, else the nouns of the captions (`mitl.explain.concepts`); the report names it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, Evaluation, Image, MachineAnnotator, Release
from mitl.annotators import Annotator
from mitl.crowd_answers import rationale_shares
from mitl.evaluation_inputs import DIRECTIONS, RankingsByDirection, ReleaseTruth
from mitl.explain.concepts import (
    ConceptError,
    ImageConcepts,
    captions_concepts,
    instances_concepts,
    labels_concepts,
)
from mitl.explain.failures import ExplainInputs, explain_direction
from mitl.explain.mentions import categories_mentioned
from mitl.explain.metrics import DEFAULT_SIZE_THRESHOLD
from mitl.judgements import WRONG_CONCEPTS
from mitl.relevance.wordnet import wordnet_available
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i
from pipeline.bias import batch_proposals, judged_answers
from pipeline.corpus import LoadedCorpus, rows_of

DEFAULT_WORST = 12
ANNOTATOR_DEPTH = 100  # how deep an annotator's own rankings go; top-1 is what is explained


@dataclass(frozen=True)
class DatasetConcepts:
    """A dataset's concepts per image (ext ids) and its captions, for explanations."""

    concepts: dict[int, ImageConcepts]
    caption_image: dict[int, int]  # caption ext id -> image ext id
    caption_text: dict[int, str]
    image_files: dict[int, str]  # image ext id -> stored file name ("" when text-only)
    sources: dict[str, int]  # concept source -> images

    def mentioned_fn(self) -> Callable[[int, frozenset[str]], frozenset[str]]:
        """Return (caption id, categories) -> the categories the caption mentions."""
        texts = self.caption_text

        @lru_cache(maxsize=200_000)
        def mentioned(caption: int, categories: frozenset[str]) -> frozenset[str]:
            return categories_mentioned(texts.get(caption, ""), categories)

        return mentioned


def dataset_concepts(dataset: Dataset) -> DatasetConcepts:
    """Read every image's concepts from one source for the whole dataset.

    Instances when any image has them (an image with none has no objects), else labels when
    any image has them, else the nouns of each image's captions: mixing sources would
    compare COCO category names with caption words. Raise ServiceError when stored
    instances are malformed, or when only captions are left and WordNet (needed to read
    their nouns) is not installed.
    """
    images = Image.objects.filter(dataset=dataset)
    if images.exclude(instances=[]).exists():
        source = "instances"
    elif images.exclude(labels=[]).exists():
        source = "labels"
    elif wordnet_available():
        source = "captions"
    else:
        raise ServiceError(
            f"dataset {dataset.name!r} has no image concepts: import instances "
            "(import_instances) or labels, or install WordNet (wordnet-base) to read them "
            "from the captions"
        )
    # Every caption owns its image, invalid ones too: a query or a result may be one.
    captions = list(
        Caption.objects.filter(dataset=dataset).values_list(
            "ext_id", "image__ext_id", "text", "is_invalid"
        )
    )
    texts_of: dict[int, list[str]] = {}
    for _, image, text, invalid in captions:
        if not invalid:
            texts_of.setdefault(image, []).append(text)
    concepts: dict[int, ImageConcepts] = {}
    files: dict[int, str] = {}
    rows = images.values_list("ext_id", "instances", "labels", "file")
    for ext_id, instances, labels, file_name in rows.iterator(chunk_size=5000):
        files[ext_id] = file_name or ""
        try:
            if source == "instances":
                concepts[ext_id] = instances_concepts(ext_id, instances)
            elif source == "labels":
                concepts[ext_id] = labels_concepts(ext_id, labels)
            else:
                concepts[ext_id] = captions_concepts(ext_id, texts_of.get(ext_id, []))
        except ConceptError as exc:
            raise ServiceError(f"dataset {dataset.name!r}: {exc}") from None
    return DatasetConcepts(
        concepts=concepts,
        caption_image={c: i for c, i, _, _ in captions},
        caption_text={c: t for c, _, t, _ in captions},
        image_files=files,
        sources=_source_counts(source, concepts),
    )


def _source_counts(source: str, concepts: dict[int, ImageConcepts]) -> dict[str, int]:
    """Return {source: images with objects}, and how many have none under the instances source.

    An image with no instances was either not in the instances file or shows no object; the
    report says how many, since a file that covers part of a dataset leaves the rest empty.
    """
    with_objects = sum(1 for found in concepts.values() if found.objects)
    counts = {source: with_objects} if with_objects else {}
    if source == "instances" and with_objects < len(concepts):
        counts["no instances"] = len(concepts) - with_objects
    elif source != "instances" and with_objects < len(concepts):
        counts["no concepts"] = len(concepts) - with_objects
    return counts


def release_dataset(release_dir: Path, name: str | None) -> Dataset:
    """Return the dataset named `name`, else the one the release's manifest names."""
    if name is None:
        manifest = release_dir / "manifest.json"
        try:
            name = json.loads(manifest.read_text(encoding="utf-8")).get("dataset")
        except (OSError, ValueError, AttributeError):
            name = None
        if not isinstance(name, str):
            raise ServiceError(
                f"{release_dir} has no manifest.json naming its dataset; give --dataset NAME"
            )
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        raise ServiceError(f"no dataset named {name!r}; import it first (import_dataset)")
    return dataset


def explain_rankings(
    *,
    truth: ReleaseTruth,
    rankings: RankingsByDirection,
    concepts: DatasetConcepts,
    worst: int = DEFAULT_WORST,
    size_threshold: float = DEFAULT_SIZE_THRESHOLD,
) -> dict[str, Any]:
    """Return one model's explanation per direction (`mitl.explain.failures`)."""
    inputs = ExplainInputs(
        positives=truth.positives,
        caption_image=concepts.caption_image,
        concepts=concepts.concepts,
        mentioned=concepts.mentioned_fn() if wordnet_available() else None,
        size_threshold=size_threshold,
    )
    return {
        direction: explain_direction(direction, rankings.get(direction, {}), inputs, worst=worst)
        for direction in DIRECTIONS
    }


def annotator_rankings(
    *,
    loaded: LoadedCorpus,
    prepared: Annotator,
    queries: Mapping[str, Sequence[int]],
    depth: int = ANNOTATOR_DEPTH,
) -> RankingsByDirection:
    """Rank the release's queries that are in the corpus with a prepared annotator."""
    corpus = loaded.corpus
    rankings: RankingsByDirection = {}
    for direction in DIRECTIONS:
        query_side = corpus.image_ids if direction == "i2t" else corpus.caption_ids
        in_corpus = set(query_side.tolist())
        wanted = [q for q in queries.get(direction, ()) if q in in_corpus]
        if not wanted:
            rankings[direction] = {}
            continue
        rows = rows_of(query_side, wanted)
        if direction == "i2t":
            top = retrieve_i2t(prepared, rows, depth, n_captions=corpus.n_captions)
            targets = corpus.caption_ids
        else:
            top = retrieve_t2i(prepared, rows, depth, n_images=corpus.n_images)
            targets = corpus.image_ids
        rankings[direction] = {q: targets[top.indices[i]].tolist() for i, q in enumerate(wanted)}
    return rankings


def image_details(
    concepts: DatasetConcepts, image_ids: Sequence[int], url_of: Callable[[str], str | None]
) -> dict[str, dict[str, Any]]:
    """Return {image id: {'src', 'file', 'caption', 'concepts', 'source'}} of shown images.

    `file` is the stored name (empty for a text-only dataset), so a stored explanation can
    get fresh URLs when it is shown (`shown_explanation`).
    """
    first_caption: dict[int, str] = {}
    for caption, image in sorted(concepts.caption_image.items()):
        first_caption.setdefault(image, concepts.caption_text[caption])
    details: dict[str, dict[str, Any]] = {}
    for image in sorted(set(image_ids)):
        found = concepts.concepts.get(image)
        file_name = concepts.image_files.get(image, "")
        details[str(image)] = {
            "src": url_of(file_name) if file_name else None,
            "file": file_name,
            "caption": first_caption.get(image, ""),
            "concepts": dict(sorted(found.counts.items())) if found else {},
            "source": found.source if found else None,
        }
    return details


def shown_images(explanation: Mapping[str, Any]) -> list[int]:
    """Return the ground-truth and retrieved images of every worst failure listed."""
    images: list[int] = []
    for direction in DIRECTIONS:
        for failure in (explanation.get(direction) or {}).get("worst", []):
            images += [failure["truth_image"], failure["retrieved_image"]]
    return images


def release_of(release_dir: Path) -> Release | None:
    """Return the platform's Release row written to `release_dir`, if there is one."""
    resolved = str(release_dir.resolve())
    for release in Release.objects.all().only("pk", "path"):
        if str(Path(release.path).resolve()) == resolved:
            return release
    return None


def crowd_concepts(release: Release | None) -> dict[str, Any] | None:
    """Return, per annotator of the release's batches, the wrong concepts the crowd named.

    Both middle answers together: among the approved judgements of the annotator's
    proposals that said "described in a wrong way", the share naming each concept
    (ECCV Caption Table B.3). None when the release was not made on this platform.
    """
    if release is None:
        return None
    batches = list(release.batches.all())
    names = sorted({name for b in batches for name in b.annotators.values_list("name", flat=True)})
    answers = []
    for batch in batches:
        index = {pk: names.index(name) for pk, name in batch.annotators.values_list("pk", "name")}
        proposals, _ = batch_proposals(batch, index)
        answers += judged_answers(batch, proposals)[0]
    shares = rationale_shares(answers, names)
    result: dict[str, Any] = {}
    for name in names:
        levels = shares[name].values()
        wrong = sum(level["wrong_description"] for level in levels)
        result[name] = {
            "judgements": sum(level["judgements"] for level in levels),
            "wrong_description": wrong,
            "wrong_concepts": {
                concept: (
                    sum(
                        (level["wrong_concepts"][concept] or 0) * level["wrong_description"]
                        for level in levels
                    )
                    / wrong
                    if wrong
                    else None
                )
                for concept in WRONG_CONCEPTS
            },
        }
    return result


def release_annotators(release: Release | None, dataset: Dataset) -> list[MachineAnnotator]:
    """Return the annotators of the release's batches, else of the dataset's, else all."""
    for rows in (
        MachineAnnotator.objects.filter(batches__releases=release) if release else None,
        MachineAnnotator.objects.filter(batches__dataset=dataset),
    ):
        if rows is not None and rows.exists():
            return list(rows.distinct().order_by("name"))
    return list(MachineAnnotator.objects.order_by("name"))


def evaluation_explanation(
    *, release: Release, truth: ReleaseTruth, rankings: RankingsByDirection
) -> dict[str, Any] | None:
    """Return a leaderboard submission's explanation, None when the dataset has no concepts.

    Images carry their stored file name, not a URL: storage URLs may be signed and expire,
    so `shown_explanation` adds them when the explanation is shown.
    """
    try:
        concepts = dataset_concepts(release.dataset)
    except ServiceError:
        return None
    explanation = explain_rankings(truth=truth, rankings=rankings, concepts=concepts)
    return {
        "dataset": release.dataset.name,
        "concept_sources": concepts.sources,
        "explanation": explanation,
        "images": image_details(concepts, shown_images(explanation), lambda name: None),
    }


def may_read_explanation(evaluation: Evaluation | None, user: Any) -> bool:
    """Return whether `user` may see the explanation: staff, or the account that submitted it.

    An explanation shows dataset images and captions chosen by the submitter's rankings;
    others (crowd workers among them) see the leaderboard's numbers only. For them a missing
    evaluation is refused like another's, so ids tell nothing.
    """
    if not user.is_authenticated:
        return False
    return bool(user.is_staff or (evaluation and evaluation.submitted_by_id == user.pk))


def shown_explanation(evaluation: Evaluation) -> dict[str, Any]:
    """Return an evaluation's stored explanation as the page and the API show it.

    Each image with a file gets the login-protected view that serves it as `src`; the
    stored file names are left out, since on COCO a file name tells which image a caption
    was written for.
    """
    from django.urls import reverse

    stored = evaluation.explanation or {}
    images = {
        key: {
            **{k: v for k, v in image.items() if k != "file"},
            "src": (
                reverse("frontend:explain-image", args=[evaluation.release_id, evaluation.pk, key])
                if image.get("file")
                else None
            ),
        }
        for key, image in (stored.get("images") or {}).items()
    }
    return {**stored, "images": images}


def explanation_image(evaluation: Evaluation, image_id: int) -> Image | None:
    """Return an image an evaluation's explanation shows, None for any other image."""
    shown = ((evaluation.explanation or {}).get("images") or {}).get(str(image_id))
    if not shown or not shown.get("file"):
        return None
    return Image.objects.filter(dataset_id=evaluation.release.dataset_id, ext_id=image_id).first()
