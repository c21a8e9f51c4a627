"""CIDEr-D between captions (Vedantam et al., 2015, as coco-caption and pycocoevalcap compute
it), divided by 10 so it lies in [0, 1]; vectorised as sparse products.

For a candidate caption h and a reference caption r, per n-gram order n = 1..4: each
caption's vector holds tf(g) * idf(g) for its n-grams g of that order, with
idf(g) = log(number of reference sets) - log(max(1, df(g))) and df(g) the number of
reference sets (here: images, or single captions when no grouping is given) whose
captions hold g;

    val_n = sum over g of min(h_g, r_g) * r_g / (|h_n| |r_n|)      ("clipped" cosine)

(the division is skipped when a norm is 0), times exp(-d² / (2 * 6²)) with d the difference
of the captions' lengths (pycocoevalcap counts a caption's bigrams as its length: kept, so
the values match). The pair's CIDEr-D is 10 * mean over n of val_n; against several
references CIDEr-D is the mean over them, which is the `mean` aggregation of
`mitl.relevance.images`.

Vectorised: min(h_g, r_g) = idf(g) * min(tf_h(g), tf_r(g)) and
min(a, b) = sum over t >= 1 of [a >= t][b >= t], so the clipped dot product is
sum over t of H_t · R_tᵀ with H_t = [tf >= t] idf and R_t = [tf >= t] tf idf: a few sparse
matrix products per order, t up to the largest term frequency.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from mitl.relevance.words import tokens

MAX_ORDER = 4
SIGMA = 6.0


def ngram_counts(words: Sequence[str]) -> dict[tuple[str, ...], int]:
    """Return the count of every n-gram of order 1..4 of the words."""
    counts: dict[tuple[str, ...], int] = {}
    for n in range(1, MAX_ORDER + 1):
        for i in range(len(words) - n + 1):
            gram = tuple(words[i : i + n])
            counts[gram] = counts.get(gram, 0) + 1
    return counts


class CiderD:
    """CIDEr-D / 10 of candidate texts against reference texts (see the module doc)."""

    def __init__(self, texts: Sequence[str], groups: Sequence[int] | None = None) -> None:
        """Count the n-grams of every text; document frequencies count `groups` (images)."""
        vocabulary: dict[tuple[str, ...], int] = {}
        indices: list[int] = []
        values: list[int] = []
        indptr = [0]
        for text in texts:
            for gram, count in ngram_counts(tokens(text)).items():
                indices.append(vocabulary.setdefault(gram, len(vocabulary)))
                values.append(count)
            indptr.append(len(indices))
        n_grams = max(len(vocabulary), 1)
        tf = sparse.csr_array(
            (np.array(values, dtype=np.float64), indices, indptr), shape=(len(texts), n_grams)
        )
        order = np.zeros(n_grams, dtype=np.int64)
        for gram, column in vocabulary.items():
            order[column] = len(gram)
        group_ids = np.arange(len(texts)) if groups is None else np.asarray(groups)
        idf = self._idf(tf, group_ids)
        self.length = np.zeros(len(texts))  # bigrams per text (pycocoevalcap's "length")
        self.norms = np.zeros((MAX_ORDER, len(texts)))
        self.blocks: list[list[tuple[sparse.csr_array, sparse.csr_array]]] = []
        top = int(tf.data.max()) if tf.nnz else 0
        for n in range(1, MAX_ORDER + 1):
            block = tf[:, order == n]
            weights = idf[order == n]
            vec = block.multiply(weights[None, :]).tocsr()
            self.norms[n - 1] = np.sqrt(np.asarray(vec.multiply(vec).sum(axis=1)).ravel())
            if n == 2:
                self.length = np.asarray(block.sum(axis=1)).ravel()
            levels = []
            for t in range(1, top + 1):
                at_least = (block >= t).astype(np.float64)
                if not at_least.nnz:
                    break
                levels.append(
                    (
                        at_least.multiply(weights[None, :]).tocsr().astype(np.float32),
                        at_least.multiply(vec).tocsr().astype(np.float32),
                    )
                )
            self.blocks.append(levels)

    @staticmethod
    def _idf(tf: sparse.csr_array, groups: np.ndarray) -> np.ndarray:
        _, group_of = np.unique(groups, return_inverse=True)
        n_groups = int(group_of.max()) + 1 if len(group_of) else 1
        coo = tf.tocoo()
        seen = np.unique(group_of[coo.row].astype(np.int64) * tf.shape[1] + coo.col)
        df = np.bincount(seen % tf.shape[1], minlength=tf.shape[1])
        return np.log(float(n_groups)) - np.log(np.maximum(1.0, df))

    def _penalty(self, delta: np.ndarray) -> np.ndarray:
        return np.exp(-(delta**2) / (2 * SIGMA**2))

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return CIDEr-D / 10 of candidates `rows` against references `cols`."""
        total = np.zeros((len(rows), len(cols)))
        for n, levels in enumerate(self.blocks):
            clipped = np.zeros((len(rows), len(cols)))
            for hyp, ref in levels:
                clipped += (hyp[rows] @ ref[cols].T).toarray()
            norm = self.norms[n][rows][:, None] * self.norms[n][cols][None, :]
            total += np.divide(clipped, norm, out=clipped.copy(), where=norm != 0)
        delta = self.length[rows][:, None] - self.length[cols][None, :]
        return (total * self._penalty(delta) / MAX_ORDER).astype(np.float32)

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return CIDEr-D / 10 of each candidate `left[i]` against reference `right[i]`."""
        total = np.zeros(len(left))
        for n, levels in enumerate(self.blocks):
            clipped = np.zeros(len(left))
            for hyp, ref in levels:
                clipped += np.asarray(hyp[left].multiply(ref[right]).sum(axis=1)).ravel()
            norm = self.norms[n][left] * self.norms[n][right]
            total += np.divide(clipped, norm, out=clipped.copy(), where=norm != 0)
        delta = self.length[left] - self.length[right]
        return (total * self._penalty(delta) / MAX_ORDER).astype(np.float32)
