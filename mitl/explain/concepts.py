"""What is in an image, as the explanation metrics see it: object concepts with their boxes.

Pure Python: no Django import. Three sources, from the most to the least exact, and every
set of concepts says which one it came from, since the metrics mean less the vaguer it is:

- ``instances``: one object per instance with its box (the synthetic generator's scenes,
  COCO ``instances_*.json``); every metric applies.
- ``labels``: the classes present, one object each, no boxes; CA and NCS apply, CE and SD
  are undefined (each class counts once, no area).
- ``captions``: the nouns of the image's captions mapped to WordNet synsets (named by the
  synset's first lemma, so "people" and "person" are one concept), one object per noun,
  counted by the number words in front of it ("two dogs") where there are any; no boxes.
  Which nouns a caption mentions is `mitl.explain.mentions`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mitl.explain.mentions import caption_nouns
from mitl.explain.synsets import canonical_category

SOURCES: tuple[str, ...] = ("instances", "labels", "captions")


class ConceptError(ValueError):
    """Concept data that cannot be read; the message says where and why."""


@dataclass(frozen=True)
class ConceptObject:
    """One object of an image: its category, box area (fraction of the image) and attributes."""

    category: str
    area: float | None = None
    attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageConcepts:
    """The objects of one image and the source they were read from (one of SOURCES)."""

    image_id: int
    objects: tuple[ConceptObject, ...]
    source: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConceptError(f"unknown concept source {self.source!r}")

    @cached_property
    def categories(self) -> frozenset[str]:
        """Return the set of categories present (the paper's V(I))."""
        return frozenset(obj.category for obj in self.objects)

    @cached_property
    def counts(self) -> Counter[str]:
        """Return the multiset of categories (the paper's V_m(I))."""
        return Counter(obj.category for obj in self.objects)

    def areas(self, category: str) -> list[float]:
        """Return the known box areas of the category's objects."""
        return [o.area for o in self.objects if o.category == category and o.area is not None]

    @property
    def has_boxes(self) -> bool:
        """Return whether every object has a box area (SD is defined)."""
        return bool(self.objects) and all(obj.area is not None for obj in self.objects)


def instances_concepts(image_id: int, instances: Sequence[Mapping[str, Any]]) -> ImageConcepts:
    """Return the concepts stored as `Image.instances` rows ({'category', 'area', …})."""
    objects = []
    for k, row in enumerate(instances):
        category = row.get("category")
        if not isinstance(category, str) or not category.strip():
            raise ConceptError(f"image {image_id}: instance {k} has no category")
        area = row.get("area")
        if area is not None and (not isinstance(area, int | float) or not 0 <= area <= 1):
            raise ConceptError(f"image {image_id}: instance {k} area {area!r} is not in [0, 1]")
        attributes = tuple(str(a) for a in row.get("attributes") or ())
        objects.append(
            ConceptObject(
                category.strip().lower(),
                None if area is None else float(area),
                attributes,
            )
        )
    return ImageConcepts(image_id, tuple(objects), "instances")


def labels_concepts(image_id: int, labels: Iterable[str]) -> ImageConcepts:
    """Return one object per distinct class label, without boxes."""
    categories = sorted({label.strip().lower() for label in labels if label.strip()})
    return ImageConcepts(image_id, tuple(ConceptObject(c) for c in categories), "labels")


def captions_concepts(image_id: int, captions: Iterable[str]) -> ImageConcepts:
    """Return the nouns of an image's captions: each noun once per the most it was counted."""
    counts: Counter[str] = Counter()
    for text in captions:
        for noun, count in caption_nouns(text).items():
            concept = canonical_category(noun)  # words of one sense are one concept
            counts[concept] = max(counts[concept], count)
    objects = tuple(ConceptObject(noun) for noun in sorted(counts) for _ in range(counts[noun]))
    return ImageConcepts(image_id, objects, "captions")
