"""Concept categories as WordNet synsets, and the path similarity between two categories.

Pure Python over `mitl.relevance.wordnet`. A category's synset is, in order: the table
below (names whose visual sense WordNet cannot find by itself: "sports ball" has no lemma,
"mouse" is first an animal), the most used *visible* noun sense of the whole name
("traffic light" → traffic_light.n.01; "table" → the furniture, not a table of data), the
same for its last word ("baseball glove" → glove.n.01), then the first noun sense of any
kind. A
sense is visible when its lexicographer file is one of VISUAL_LEXNAMES (things, people,
animals, plants, food, substances, shapes, places). A category WordNet cannot place has no
synset: it is only similar to itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from mitl.relevance.wordnet import wordnet, wordnet_available

# The synthetic generator's shapes and the COCO categories whose first sense is not the
# object in the picture.
CATEGORY_SYNSETS: dict[str, str] = {
    "circle": "circle.n.01",
    "square": "square.n.01",
    "triangle": "triangle.n.01",
    "star": "star.n.05",
    "cross": "crisscross.n.01",
    "ring": "ring.n.02",
    "person": "person.n.01",  # a top-level sense (noun.Tops), visible all the same
    "animal": "animal.n.01",
    "sports ball": "ball.n.01",
    "mouse": "mouse.n.04",
    "remote": "remote_control.n.01",
    "tv": "television_receiver.n.01",
    "laptop": "laptop.n.01",
    "keyboard": "computer_keyboard.n.01",
    "cell phone": "cellular_telephone.n.01",
    "dining table": "dining_table.n.01",
    "potted plant": "pot_plant.n.01",
    "hair drier": "hand_blower.n.01",
    "fire hydrant": "fireplug.n.01",
    "tie": "necktie.n.01",
    "mouth": "mouth.n.01",
    "glass": "glass.n.02",
    "bat": "bat.n.05",
    "kite": "kite.n.03",
    "bus": "bus.n.01",
    "orange": "orange.n.01",
}


VISUAL_LEXNAMES = frozenset(
    "noun." + name
    for name in (
        "animal", "artifact", "body", "food", "location", "object", "person", "phenomenon",
        "plant", "shape", "substance",
    )
)  # fmt: skip


VISIBLE_SHARE = 0.3  # of a noun's counted senses, for the noun to name something visible


def _sense_count(sense: Any, lemma: str) -> int:
    return sum(name.count() for name in sense.lemmas() if name.name().lower() == lemma)


# Words whose WordNet sense is a group of the category ("people" is not a kind of person).
ALIASES: dict[str, str] = {"people": "person"}


@lru_cache(maxsize=65_536)
def category_synset(category: str) -> str | None:
    """Return the WordNet synset name of a category, or None when WordNet cannot place it."""
    category = ALIASES.get(category, category)
    if category in CATEGORY_SYNSETS:
        return CATEGORY_SYNSETS[category]
    if not wordnet_available():
        return None
    wn = wordnet()
    words = category.strip().lower().split()
    for lemma in ["_".join(words), words[-1]] if words else []:
        senses = wn.synsets(lemma, "n")
        visible = [s for s in senses if s.lexname() in VISUAL_LEXNAMES]
        # The visible sense people use most (SemCor counts), WordNet's order on a tie.
        chosen = max(visible, key=lambda s: _sense_count(s, lemma), default=None)
        if chosen is not None or senses:
            return str((chosen or senses[0]).name())
    return None


@lru_cache(maxsize=65_536)
def canonical_category(noun: str) -> str:
    """Return the name of the noun's synset ("people" → person, "couch" → sofa).

    Caption words that share a sense become one concept, so "people" and "person" agree.
    """
    if noun in ALIASES:
        return ALIASES[noun]
    synset = category_synset(noun)
    if synset is None or noun in CATEGORY_SYNSETS:  # the table's names stay as they are
        return noun
    return str(wordnet().synset(synset).lemmas()[0].name()).replace("_", " ").lower()


@lru_cache(maxsize=65_536)
def is_visible(noun: str) -> bool:
    """Return whether a noun mostly names something one can see.

    True when its visible senses hold at least VISIBLE_SHARE of the noun's counted uses
    ("table": the furniture; not "group", "day", "view"), or, for a noun WordNet counted no
    use of, when any sense is visible ("kite"). A word WordNet does not know is not a
    concept (names, pronouns, typos).
    """
    if noun in CATEGORY_SYNSETS or noun in ALIASES:
        return True
    if not wordnet_available():
        return False
    senses = wordnet().synsets(noun, "n")
    counts = [(_sense_count(s, noun), s.lexname() in VISUAL_LEXNAMES) for s in senses]
    total = sum(count for count, _ in counts)
    if total == 0:
        return any(visible for _, visible in counts)
    return sum(count for count, visible in counts if visible) >= VISIBLE_SHARE * total


@lru_cache(maxsize=1_048_576)
def category_similarity(left: str, right: str) -> float:
    """Return WordNet path similarity of two categories' synsets (1 for the same category).

    Categories without a synset are similar only to themselves (1) and to nothing else (0).
    """
    if left == right:
        return 1.0
    a, b = category_synset(left), category_synset(right)
    if a is None or b is None:
        return 0.0
    if a == b:
        return 1.0
    wn = wordnet()
    # Nouns share one root (entity.n.01), so no root needs simulating; skipping it spares
    # NLTK a re-read of a file header on every call.
    return float(wn.synset(a).path_similarity(wn.synset(b), simulate_root=False) or 0.0)


@lru_cache(maxsize=65_536)
def _hypernym_closure(synset: str) -> frozenset[str]:
    """Return the synset and every hypernym above it (instance hypernyms included)."""
    node = wordnet().synset(synset)
    above = node.closure(lambda s: s.hypernyms() + s.instance_hypernyms())
    return frozenset([synset, *(s.name() for s in above)])


def mentioned_synsets(nouns: Iterable[str]) -> frozenset[str]:
    """Return the nouns themselves and every synset they name or are a kind of."""
    found: set[str] = set()
    for noun in nouns:
        found.add(noun)
        synset = category_synset(noun)
        if synset is not None:
            found |= _hypernym_closure(synset)
    return frozenset(found)
