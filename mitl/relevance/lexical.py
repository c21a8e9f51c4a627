"""Set-overlap proxies between captions (Wray et al., 2021, section 4.4), vectorised.

- `bow`: intersection over union of the two captions' word sets, stop words left out.
- `pos`: the same IoU per part of speech (nouns and verbs, `mitl.relevance.words`), each
  weighing 0.5; a part of speech that neither caption has is left out and the weights of
  the others are renormalised, so a caption scores 1 against itself.
- `synset`: the `pos` IoU over WordNet synsets instead of lemmas, so synonyms match.

Two captions without any counted word score 0. Each caption is a row of a binary sparse
matrix over the items of its kind (words, "lemma/pos", "synset/pos"); for a block of
captions against others, |A ∩ B| is one sparse product and |A ∪ B| = |A| + |B| - |A ∩ B|.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import sparse

from mitl.annotators.bow import STOP_WORDS
from mitl.relevance.words import CONTENT_POS, content_words, synset_of, tokens

ItemsOf = Callable[[str], dict[str, set[str]]]  # caption -> {part: set of items}


def bow_items(text: str) -> dict[str, set[str]]:
    """Return the caption's words without stop words, as one part."""
    return {"": {token for token in tokens(text) if token not in STOP_WORDS}}


def pos_items(text: str) -> dict[str, set[str]]:
    """Return the caption's noun and verb lemmas, one part each."""
    parts: dict[str, set[str]] = {pos: set() for pos in CONTENT_POS}
    for lemma, pos in content_words(text):
        parts[pos].add(lemma)
    return parts


def synset_items(text: str) -> dict[str, set[str]]:
    """Return the synsets of the caption's nouns and verbs, one part each."""
    parts: dict[str, set[str]] = {pos: set() for pos in CONTENT_POS}
    for lemma, pos in content_words(text):
        parts[pos].add(synset_of(lemma, pos))
    return parts


class SetOverlap:
    """IoU of item sets, averaged over parts with equal weights (see the module doc)."""

    def __init__(self, texts: Sequence[str], items_of: ItemsOf) -> None:
        """Index the items of every text; rows and columns later name texts by position."""
        per_text = [items_of(text) for text in texts]
        self.parts = sorted({part for items in per_text for part in items})
        self.matrices: list[sparse.csr_array] = []
        for part in self.parts:
            vocabulary: dict[str, int] = {}
            indices: list[int] = []
            indptr = [0]
            for items in per_text:
                indices.extend(
                    vocabulary.setdefault(item, len(vocabulary)) for item in items.get(part, ())
                )
                indptr.append(len(indices))
            data = np.ones(len(indices), dtype=np.float32)
            shape = (len(texts), max(len(vocabulary), 1))
            self.matrices.append(sparse.csr_array((data, indices, indptr), shape=shape))
        self.sizes = [np.diff(m.indptr).astype(np.float32) for m in self.matrices]

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return the proxy of texts `rows` against texts `cols` (len(rows), len(cols))."""
        total = np.zeros((len(rows), len(cols)), dtype=np.float32)
        weight = np.zeros_like(total)
        for m, size in zip(self.matrices, self.sizes, strict=True):
            inter = (m[rows] @ m[cols].T).toarray().astype(np.float32)
            union = size[rows][:, None] + size[cols][None, :] - inter
            present = union > 0
            total += np.divide(inter, union, out=np.zeros_like(inter), where=present)
            weight += present
        return np.divide(total, weight, out=np.zeros_like(total), where=weight > 0)

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return the proxy of each text `left[i]` against text `right[i]`."""
        total = np.zeros(len(left), dtype=np.float32)
        weight = np.zeros_like(total)
        for m, size in zip(self.matrices, self.sizes, strict=True):
            inter = np.asarray(m[left].multiply(m[right]).sum(axis=1), dtype=np.float32).ravel()
            union = size[left] + size[right] - inter
            present = union > 0
            total += np.divide(inter, union, out=np.zeros_like(inter), where=present)
            weight += present
        return np.divide(total, weight, out=np.zeros_like(total), where=weight > 0)
