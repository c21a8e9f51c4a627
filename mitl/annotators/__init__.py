"""Machine annotators: score image-caption pairs so the crowd only judges likely positives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mitl.annotators.base import Annotator, AnnotatorError, Corpus
from mitl.annotators.bow import BowAnnotator

__all__ = [
    "ANNOTATOR_KINDS",
    "Annotator",
    "AnnotatorError",
    "BowAnnotator",
    "Corpus",
    "build_annotator",
]

ANNOTATOR_KINDS: dict[str, type[Annotator]] = {
    BowAnnotator.kind: BowAnnotator,
}


def build_annotator(*, kind: str, name: str, config: Mapping[str, Any]) -> Annotator:
    """Return a configured annotator of `kind`, or raise AnnotatorError for an unknown kind."""
    try:
        annotator_class = ANNOTATOR_KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(ANNOTATOR_KINDS))
        raise AnnotatorError(
            f"annotator '{name}': unknown kind '{kind}' (known: {known})"
        ) from None
    return annotator_class(name=name, config=config)
