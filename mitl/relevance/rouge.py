"""ROUGE-L between captions (Lin, 2004; pycocoevalcap's F-measure with beta = 1.2), with a
bit-parallel longest common subsequence vectorised over many pairs at once.

For a candidate c and a reference r with longest common subsequence L (over lower-case
`[a-z0-9]+` tokens, stop words kept): P = L / |c|, R = L / |r|, and
ROUGE-L = (1 + β²) P R / (R + β² P), 0 when L = 0. Several references: pycocoevalcap takes
the largest P and the largest R separately; the `max` aggregation of
`mitl.relevance.images` takes the largest pairwise F, which differs only when two references
win on different sides.

LCS, bit-parallel (Allison and Dix, 1986; Hyyrö, 2004): with one bit per token of the
candidate (at most 64 tokens: longer candidates are cut, which no caption of COCO needs), a
match mask per reference token, and V = all ones, each reference token b updates
U = V & M[b], V = (V + U) | (V - U); L is the number of zero bits left. One pass over the
reference's tokens, each a few uint64 operations for every pair of the block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mitl.relevance.words import tokens

BETA = 1.2
MAX_TOKENS = 64  # bits of a uint64 word
PAD = -1


class RougeL:
    """ROUGE-L F of candidate texts against reference texts (see the module doc)."""

    def __init__(self, texts: Sequence[str]) -> None:
        """Turn every text into token ids, padded into one (n_texts, longest) array."""
        vocabulary: dict[str, int] = {}
        ids = [[vocabulary.setdefault(t, len(vocabulary)) for t in tokens(text)] for text in texts]
        self.vocabulary_size = max(len(vocabulary), 1)
        self.lengths = np.array([len(row) for row in ids], dtype=np.int64)
        width = max(int(self.lengths.max(initial=0)), 1)
        self.ids = np.full((len(texts), width), PAD, dtype=np.int64)
        for i, row in enumerate(ids):
            self.ids[i, : len(row)] = row
        self.pattern_lengths = np.minimum(self.lengths, MAX_TOKENS)

    def _f_measure(self, lcs: np.ndarray, cand_len: np.ndarray, ref_len: np.ndarray) -> np.ndarray:
        lcs = lcs.astype(np.float64)
        precision = np.divide(lcs, cand_len, out=np.zeros_like(lcs), where=cand_len > 0)
        recall = np.divide(lcs, ref_len, out=np.zeros_like(lcs), where=ref_len > 0)
        denominator = recall + BETA**2 * precision
        score = np.divide(
            (1 + BETA**2) * precision * recall,
            denominator,
            out=np.zeros_like(lcs),
            where=(precision > 0) & (recall > 0),
        )
        return score.astype(np.float32)

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return ROUGE-L of candidates `rows` against references `cols`."""
        rows, cols = np.asarray(rows), np.asarray(cols)
        patterns = self.ids[rows, :MAX_TOKENS]
        # Each row's match mask of every token id it holds; other ids (and PAD) match nothing.
        local = np.full(self.vocabulary_size + 1, 0, dtype=np.int64)  # last slot: PAD
        present = np.unique(patterns[patterns != PAD])
        local[present] = np.arange(1, len(present) + 1)
        table = np.zeros((len(rows), len(present) + 1), dtype=np.uint64)
        for i in range(patterns.shape[1]):
            column = patterns[:, i]
            hit = column != PAD
            table[np.flatnonzero(hit), local[column[hit]]] |= np.uint64(1) << np.uint64(i)
        # References longest first, so step j only touches those with a token j.
        order = np.argsort(-self.lengths[cols], kind="stable")
        refs = self.ids[cols[order]]
        ref_lengths = self.lengths[cols[order]]
        v = np.full((len(rows), len(cols)), np.iinfo(np.uint64).max, dtype=np.uint64)
        for j in range(int(ref_lengths.max(initial=0))):
            active = int(np.count_nonzero(ref_lengths > j))
            masks = table[:, local[refs[:active, j]]]
            head = v[:, :active]
            u = head & masks
            v[:, :active] = (head + u) | (head - u)
        lcs = self._common_length(v, self.pattern_lengths[rows][:, None])
        scores = np.empty((len(rows), len(cols)), dtype=np.float32)
        scores[:, order] = self._f_measure(
            lcs, self.lengths[rows][:, None], ref_lengths[None, :].astype(np.float64)
        )
        return scores

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return ROUGE-L of each candidate `left[i]` against reference `right[i]`."""
        left, right = np.asarray(left), np.asarray(right)
        patterns = self.ids[left, :MAX_TOKENS]
        refs = self.ids[right]
        v = np.full(len(left), np.iinfo(np.uint64).max, dtype=np.uint64)
        for j in range(refs.shape[1]):
            token = refs[:, j]
            masks = np.zeros(len(left), dtype=np.uint64)
            for i in range(patterns.shape[1]):
                hit = (patterns[:, i] == token) & (token != PAD)
                masks |= hit.astype(np.uint64) << np.uint64(i)
            u = v & masks
            v = (v + u) | (v - u)
        lcs = self._common_length(v, self.pattern_lengths[left])
        return self._f_measure(lcs, self.lengths[left], self.lengths[right].astype(np.float64))

    @staticmethod
    def _common_length(v: np.ndarray, pattern_length: np.ndarray) -> np.ndarray:
        """Return the zero bits of v among the pattern's bits: the LCS length."""
        bits = pattern_length.astype(np.uint64)
        full = bits >= MAX_TOKENS
        shift = np.where(full, np.uint64(0), bits)
        low = np.where(full, np.iinfo(np.uint64).max, (np.uint64(1) << shift) - np.uint64(1))
        return pattern_length - np.bitwise_count(v & low).astype(np.int64)
