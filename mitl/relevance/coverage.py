"""Word coverage of a caption by an image's captions taken together, for the calibrated
combination: people rate a caption relevant to an image when what it says is true there,
which the image's captions say between them rather than any one of them.

An image's words are the union of its captions' words (`bow`'s: lower-case tokens, stop
words left out). For a caption c and an image i:

- `coverage/words`: the share of c's words among i's words;
- `coverage/idf_words`: the same weighted by each word's idf over images (a rare word that
  matches says more than "a man");
- `coverage/image_words`: the share of i's words that c has;
- `coverage/stems`: `coverage/words` with a plural "s" dropped ("dogs" is "dog");
- `coverage/bigrams`: the share of c's word pairs (stop words kept) found among i's;
- with WordNet (`WORDNET_COVERAGE`), `coverage/pos_n`, `coverage/pos_v`,
  `coverage/synset_n`, `coverage/synset_v`: the same share over c's noun and verb lemmas
  and their synsets (`mitl.relevance.lexical`'s `pos` and `synset` items), so "sofa" is
  covered by "couch".

`grid` scores a block of captions against a block of images with one sparse product,
`pairs` rated pairs one by one; both give the same values. Pure numpy and scipy.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from scipy import sparse

from mitl.relevance.images import CaptionCorpus
from mitl.relevance.lexical import SetOverlap, bow_items, pos_items, synset_items
from mitl.relevance.words import tokens

COVERAGE_VERSION = 1  # changes whenever the values would
COVERAGE_FEATURES: tuple[str, ...] = (
    "coverage/bigrams",
    "coverage/idf_words",
    "coverage/image_words",
    "coverage/stems",
    "coverage/words",
)


WORDNET_COVERAGE: tuple[str, ...] = (
    "coverage/pos_n",
    "coverage/pos_v",
    "coverage/synset_n",
    "coverage/synset_v",
)


def _stem(token: str) -> str:
    plural = len(token) > 3 and token.endswith("s") and not token.endswith("ss")
    return token[:-1] if plural else token


def stem_items(text: str) -> dict[str, set[str]]:
    """Return the caption's words without stop words, plural "s" dropped, as one part."""
    return {"": {_stem(token) for token in bow_items(text)[""]}}


def bigram_items(text: str) -> dict[str, set[str]]:
    """Return the caption's pairs of consecutive tokens, as one part."""
    return {"": {f"{a} {b}" for a, b in pairwise(tokens(text))}}


@dataclass(frozen=True, eq=False)
class _Sets:
    """Captions' item sets, and each image's union of its captions' sets."""

    items: sparse.csr_array  # captions × items, binary
    union: sparse.csr_array  # images × items, binary
    sizes: np.ndarray  # items per caption

    @classmethod
    def of(cls, member: sparse.csr_array, matrix: sparse.csr_array) -> _Sets:
        items = sparse.csr_array(matrix).astype(np.float64)
        union = sparse.csr_array((member @ items) > 0).astype(np.float64)
        return cls(items, union, np.asarray(items.sum(axis=1)).ravel())

    def grid(self, captions: np.ndarray, images: np.ndarray) -> np.ndarray:
        shared = (self.items[captions] @ self.union[images].T).toarray()
        return _share(shared, self.sizes[captions][:, None])

    def pairs(self, captions: np.ndarray, images: np.ndarray) -> np.ndarray:
        shared = np.asarray(self.items[captions].multiply(self.union[images]).sum(axis=1))
        return _share(shared.ravel(), self.sizes[captions])


def _tagged(corpus: CaptionCorpus, member: sparse.csr_array) -> dict[str, _Sets]:
    """Return the noun and verb lemma and synset sets of `WORDNET_COVERAGE`."""
    tagged = {}
    for kind, items_of in (("pos", pos_items), ("synset", synset_items)):
        overlap = SetOverlap(corpus.texts, items_of)
        for part, matrix in zip(overlap.parts, overlap.matrices, strict=True):
            tagged[f"coverage/{kind}_{part}"] = _Sets.of(member, matrix)
    return tagged


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    part = np.asarray(part, dtype=np.float64)
    return np.divide(part, whole, out=np.zeros_like(part), where=whole > 0)


@dataclass(frozen=True, eq=False)
class Coverage:
    words: sparse.csr_array  # captions × vocabulary, 1 where the caption has the word
    weighted: sparse.csr_array  # the same, each word weighted by its idf over images
    union: sparse.csr_array  # images × vocabulary, 1 where one of its captions has the word
    sizes: np.ndarray  # words per caption
    weighted_sizes: np.ndarray  # idf mass per caption
    union_sizes: np.ndarray  # words per image
    stems: _Sets
    bigrams: _Sets
    tagged: dict[str, _Sets]  # feature name -> WordNet-tagged sets (WORDNET_COVERAGE)

    @classmethod
    def of(cls, corpus: CaptionCorpus, *, wordnet: bool = False) -> Coverage:
        """Index the corpus; `wordnet`: also the WORDNET_COVERAGE features."""
        words = SetOverlap(corpus.texts, bow_items).matrices[0].astype(np.float64)
        images = len(corpus.image_ids)
        member = sparse.csr_array(
            (np.ones(len(corpus.image_of)), (corpus.image_of, np.arange(len(corpus.image_of)))),
            shape=(images, len(corpus.texts)),
        )
        union = sparse.csr_array((member @ words) > 0).astype(np.float64)
        document_frequency = np.asarray(union.sum(axis=0)).ravel()
        idf = np.log((images + 1) / (document_frequency + 1))
        weighted = sparse.csr_array(words @ sparse.diags_array(idf))
        return cls(
            words=words,
            weighted=weighted,
            union=union,
            sizes=np.asarray(words.sum(axis=1)).ravel(),
            weighted_sizes=np.asarray(weighted.sum(axis=1)).ravel(),
            union_sizes=np.asarray(union.sum(axis=1)).ravel(),
            stems=_Sets.of(member, SetOverlap(corpus.texts, stem_items).matrices[0]),
            bigrams=_Sets.of(member, SetOverlap(corpus.texts, bigram_items).matrices[0]),
            tagged=_tagged(corpus, member) if wordnet else {},
        )

    def grid(self, captions: np.ndarray, images: np.ndarray) -> dict[str, np.ndarray]:
        """Return each coverage feature of captions `captions` (rows) against images
        `images` (columns), by index."""
        union = self.union[images].T
        shared = (self.words[captions] @ union).toarray()
        weighted = (self.weighted[captions] @ union).toarray()
        return {
            "coverage/words": _share(shared, self.sizes[captions][:, None]),
            "coverage/idf_words": _share(weighted, self.weighted_sizes[captions][:, None]),
            "coverage/image_words": _share(shared, self.union_sizes[images][None, :]),
            "coverage/stems": self.stems.grid(captions, images),
            "coverage/bigrams": self.bigrams.grid(captions, images),
            **{name: sets.grid(captions, images) for name, sets in self.tagged.items()},
        }

    def pairs(self, captions: np.ndarray, images: np.ndarray) -> dict[str, np.ndarray]:
        """Return each coverage feature of the pairs (captions[k], images[k]), by index."""
        union = self.union[images]
        shared = np.asarray(self.words[captions].multiply(union).sum(axis=1)).ravel()
        weighted = np.asarray(self.weighted[captions].multiply(union).sum(axis=1)).ravel()
        return {
            "coverage/words": _share(shared, self.sizes[captions]),
            "coverage/idf_words": _share(weighted, self.weighted_sizes[captions]),
            "coverage/image_words": _share(shared, self.union_sizes[images]),
            "coverage/stems": self.stems.pairs(captions, images),
            "coverage/bigrams": self.bigrams.pairs(captions, images),
            **{name: sets.pairs(captions, images) for name, sets in self.tagged.items()},
        }
