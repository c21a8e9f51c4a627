"""Caption words for the lexical proxies: tokens, content words with their part of speech,
and each content word's WordNet synset. Pure Python over `mitl.relevance.wordnet`.

Tokens are lower-case `[a-z0-9]+` runs (as the bag-of-words annotator and pycocoevalcap's
tokenised input); the stop list is the bag-of-words annotator's.

Part of speech
    No English tagging model installs from the package registries here (spaCy's pipelines
    are not on PyPI), so words are tagged from WordNet itself, a unigram tagger: a word
    takes the part of speech whose senses the SemCor corpus saw most often (WordNet's sense
    counts, `cntlist.rev`), nouns first on a tie or when no sense was counted, and a noun
    when WordNet does not know it (names, typos). Captions add one rule: a word in "-ing"
    that WordNet knows as a verb is a verb ("a man riding a horse"), unless a determiner
    comes right before it and WordNet knows the word as a noun ("a riding lesson"). Only
    nouns and verbs are kept, as Wray et al. (2021) do.

Synsets
    A content word's synset is its lemma's first (most frequent) sense in its part of
    speech; a word WordNet does not know stands for itself. Words that share a sense then
    match ("couch" and "sofa").
"""

from __future__ import annotations

from functools import lru_cache

from mitl.annotators.bow import STOP_WORDS, TOKEN_PATTERN
from mitl.relevance.wordnet import wordnet

NOUN, VERB = "n", "v"
CONTENT_POS: tuple[str, ...] = (NOUN, VERB)
_WORDNET_POS: tuple[str, ...] = ("n", "v", "a", "r")
DETERMINERS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "his",
        "her",
        "its",
        "their",
        "my",
        "our",
        "your",
    ]
)


def tokens(text: str) -> list[str]:
    """Return the lower-case `[a-z0-9]+` tokens of `text`."""
    return TOKEN_PATTERN.findall(text.lower())


def content_words(text: str) -> list[tuple[str, str]]:
    """Return (lemma, part of speech) of every noun and verb of `text`, in order."""
    words = tokens(text)
    tagged: list[tuple[str, str]] = []
    for i, word in enumerate(words):
        if word in STOP_WORDS or word.isdigit():
            continue
        after_determiner = i > 0 and words[i - 1] in DETERMINERS
        lemma, pos = tag_word(word, after_determiner=after_determiner)
        if pos in CONTENT_POS:
            tagged.append((lemma, pos))
    return tagged


@lru_cache(maxsize=65_536)
def tag_word(word: str, *, after_determiner: bool = False) -> tuple[str, str]:
    """Return (lemma, part of speech: n, v, a or r) of one lower-case word."""
    wn = wordnet()
    if word.endswith("ing"):
        if after_determiner and wn.synsets(word, NOUN):
            return word, NOUN
        verb = wn.morphy(word, VERB)
        if verb is not None:
            return verb, VERB
    best: tuple[int, int, str, str] | None = None
    for order, pos in enumerate(_WORDNET_POS):
        lemma = wn.morphy(word, pos)
        if lemma is None:
            continue
        seen = sum(sense.count() for sense in wn.lemmas(lemma, pos))
        candidate = (seen, -order, lemma, pos)
        if best is None or candidate > best:
            best = candidate
    if best is None:
        return word, NOUN
    return best[2], best[3]


@lru_cache(maxsize=65_536)
def synset_of(lemma: str, pos: str) -> str:
    """Return the name of the lemma's most frequent synset, or the lemma when WordNet lacks it."""
    senses = wordnet().synsets(lemma, pos)
    return senses[0].name() if senses else f"{lemma}.{pos}.?"
