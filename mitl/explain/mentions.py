"""What a caption mentions: the nouns of visible things it names, counted, and the concept
categories those nouns name or are a kind of.

Pure Python over `mitl.relevance.words` (tokens, WordNet part-of-speech tags) and
`mitl.explain.synsets` (which nouns name something visible, and their synsets). The
explanation reads it twice: an image without instances or labels gets the nouns of its
captions as concepts (`mitl.explain.concepts.captions_concepts`), and a text query keeps
the categories it mentions (the query-informed metrics, `categories_mentioned`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from mitl.annotators.bow import STOP_WORDS
from mitl.explain.synsets import category_synset, is_visible, mentioned_synsets
from mitl.relevance.wordnet import wordnet
from mitl.relevance.words import DETERMINERS, NOUN, tag_word, tokens

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


def caption_nouns(text: str) -> Counter[str]:
    """Return the WordNet noun lemmas a caption mentions, each with its count.

    Only nouns of visible things count (`mitl.explain.synsets.is_visible`), not words of
    place in the picture (POSITION_NOUNS), nor a noun that modifies the next one ("an
    orange circle", "a tennis racket"). The count is the number word just before the
    noun or its adjectives ("two brown dogs" gives dog: 2); a plural (the lemma differs
    from the word) without one counts 2, else 1.
    """
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
    return (
        len(word) > 1
        and word not in STOP_WORDS
        and tag[1] == "n"
        and category_synset(tag[0]) is not None
    )


def _irregular_singular(word: str) -> str | None:
    """Return the singular of an irregular plural from WordNet's exception list ("men")."""
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


def categories_mentioned(text: str, categories: Iterable[str]) -> frozenset[str]:
    """Return the categories that a noun of `text` names, itself or as a kind of it.

    "A man riding a horse" mentions `person` (a man is a kind of person), `horse` and
    `animal`, not `dog`: naming a kind does not mention the other kinds beside it. A
    category of several words is mentioned by those words in a row ("dining tables").
    """
    named = mentioned_synsets(caption_nouns(text))
    phrase = f" {' '.join(_singular_tokens(text))} "
    return frozenset(
        c
        for c in categories
        if c in named or category_synset(c) in named or (" " in c and f" {c} " in phrase)
    )


def _singular_tokens(text: str) -> list[str]:
    """Return the text's tokens with plural nouns made singular ("dining tables")."""
    singular = []
    for word in tokens(text):
        lemma, pos = tag_word(word)
        singular.append(lemma if pos == NOUN else word)
    return singular
