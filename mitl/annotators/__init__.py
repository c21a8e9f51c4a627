"""Machine annotators: score image-caption pairs so the crowd only judges likely positives.

Kinds are registered by dotted path and imported on first use, so the web process never
imports torch, open_clip or sentence-transformers at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from mitl.annotators.base import Annotator, AnnotatorError, Corpus, EmbeddingAnnotator
from mitl.annotators.bow import BowAnnotator

__all__ = [
    "ANNOTATOR_KINDS",
    "Annotator",
    "AnnotatorError",
    "BowAnnotator",
    "Corpus",
    "EmbeddingAnnotator",
    "annotator_class",
    "build_annotator",
]

ANNOTATOR_KINDS: dict[str, str] = {
    "bow": "mitl.annotators.bow:BowAnnotator",
    "embeddings": "mitl.annotators.precomputed_embeddings:PrecomputedEmbeddingAnnotator",
    "object_labels": "mitl.annotators.object_labels:ObjectLabelsAnnotator",
    "open_clip": "mitl.annotators.open_clip:OpenClipAnnotator",
    "precomputed": "mitl.annotators.precomputed:PrecomputedAnnotator",
    "text_embedding": "mitl.annotators.text_embedding:TextEmbeddingAnnotator",
}


def annotator_class(kind: str) -> type[Annotator]:
    """Import and return the class of annotator `kind`; raise AnnotatorError if unknown."""
    try:
        module_name, class_name = ANNOTATOR_KINDS[kind].split(":")
    except KeyError:
        known = ", ".join(sorted(ANNOTATOR_KINDS))
        raise AnnotatorError(f"unknown annotator kind '{kind}' (known: {known})") from None
    return getattr(import_module(module_name), class_name)


def build_annotator(*, kind: str, name: str, config: Mapping[str, Any]) -> Annotator:
    """Return a configured annotator of `kind`, or raise AnnotatorError for an unknown kind."""
    try:
        cls = annotator_class(kind)
    except AnnotatorError as exc:
        raise AnnotatorError(f"annotator '{name}': {exc}") from None
    return cls(name=name, config=config)
