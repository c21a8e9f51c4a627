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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mitl.annotators.bow import STOP_WORDS

SOURCES: tuple[str, ...] = ("instances", "labels", "captions")
# Nouns of place inside the picture, not things in it ("on the left", "in the background").
POSITION_NOUNS = frozenset(
    [
        "left",
        "right",
        "front",
        "back",
        "top",
        "bottom",
        "side",
        "middle",
        "center",
        "centre",
        "background",
        "foreground",
        "distance",
        "corner",
        "edge",
        "area",
        "view",
        "picture",
        "photo",
        "image",
    ]
)
_NUMBER_WORDS: dict[str, int] = {
    "a": 1, "an": 1, "one": 1, "single": 1, "two": 2, "pair": 2, "couple": 2, "three": 3,
    "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "dozen": 12,
}  # fmt: skip


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


def caption_nouns(text: str) -> Counter[str]:
    """Return the WordNet noun lemmas a caption mentions, each with its count.

    Only nouns of visible things count (`mitl.explain.synsets.is_visible`), not words of
    place in the picture (POSITION_NOUNS), nor a noun that modifies the next one ("an
    orange circle", "a tennis racket"). The count is the number word just before the
    noun or its adjectives ("two brown dogs" gives dog: 2); a plural (the lemma differs
    from the word) without one counts 2, else 1.
    """
    from mitl.explain.synsets import is_visible
    from mitl.relevance.words import DETERMINERS, NOUN, tag_word, tokens

    words = tokens(text)
    tags = [
        tag_word(word, after_determiner=i > 0 and words[i - 1] in DETERMINERS)
        for i, word in enumerate(words)
    ]
    found: Counter[str] = Counter()
    for i, word in enumerate(words):
        if len(word) < 2 or word in STOP_WORDS or word.isdigit() or word in _NUMBER_WORDS:
            continue
        lemma, pos = tags[i]
        # A noun right before another noun modifies it ("an orange circle", "tennis racket").
        if pos != NOUN or (i + 1 < len(words) and _is_known_noun(words[i + 1], tags[i + 1])):
            continue
        lemma = _irregular_singular(word) or lemma
        if lemma in POSITION_NOUNS or not is_visible(lemma):
            continue
        count = _count_before(words, i)
        if count is None:
            count = 2 if lemma != word else 1
        found[lemma] = max(found[lemma], count)
    return found


def _is_known_noun(word: str, tag: tuple[str, str]) -> bool:
    """Return whether a token is a noun WordNet knows (unknown words are tagged nouns too)."""
    from mitl.explain.synsets import category_synset

    return (
        len(word) > 1
        and word not in STOP_WORDS
        and tag[1] == "n"
        and category_synset(tag[0]) is not None
    )


def _irregular_singular(word: str) -> str | None:
    """Return the singular of an irregular plural from WordNet's exception list ("men")."""
    from mitl.relevance.wordnet import wordnet

    # NLTK's reader keeps noun.exc as a map; "men" is also a lemma of its own (a work
    # force), which the part-of-speech tagger returns as is.
    forms = wordnet()._exception_map["n"].get(word) or []
    return forms[0] if forms else None


def _count_before(words: Sequence[str], index: int) -> int | None:
    """Return the number word among the (up to 3) words before `words[index]`, if any.

    Only adjectives may stand between ("two brown dogs"): a stop word ends the search, so
    "a group of tables" does not count one table.
    """

    for back in range(1, 4):
        if index - back < 0:
            return None
        word = words[index - back]
        if word in _NUMBER_WORDS:
            return _NUMBER_WORDS[word]
        if re.fullmatch(r"[0-9]{1,3}", word):
            return int(word)
        if word in STOP_WORDS:
            return None
    return None


def captions_concepts(image_id: int, captions: Iterable[str]) -> ImageConcepts:
    """Return the nouns of an image's captions: each noun once per the most it was counted."""
    from mitl.explain.synsets import canonical_category

    counts: Counter[str] = Counter()
    for text in captions:
        for noun, count in caption_nouns(text).items():
            concept = canonical_category(noun)  # words of one sense are one concept
            counts[concept] = max(counts[concept], count)
    objects = tuple(ConceptObject(noun) for noun in sorted(counts) for _ in range(counts[noun]))
    return ImageConcepts(image_id, objects, "captions")
