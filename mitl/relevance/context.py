"""Sentence-embedding context of image–caption pairs, for the calibrated combination.

An image is the normalised mean of its captions' embeddings (its centroid). For a caption
c and an image i the context is: c against i's centroid, c's own image against i (how
alike the two images read), the share of images that score below i for c and i's gap to
c's best image (where i ranks among images, from the caption's side), and the share of the
corpus's captions that score below c against i (where c ranks among captions, from the
image's side). `pair_context` scores rated pairs; `grid_context` a block of captions
against a block of images, with the same arithmetic so both agree. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mitl.relevance.images import CaptionCorpus

CONTEXT_FEATURES: tuple[str, ...] = (
    "context/caption_share",
    "context/centroid",
    "context/gap_to_best",
    "context/images",
    "context/rank_share",
)
BLOCK_ROWS = 2048  # captions scored against every centroid at once
# Cosines this close count as ties, not below: two matrix products may round the same
# cosine differently in the last bits, and a pair must rank alike in every block.
TIE = 1e-5


@dataclass(frozen=True, eq=False)
class Context:
    """A corpus's unit-norm caption vectors, image centroids and, per image, every caption's
    cosine to its centroid sorted (for the image-side rank)."""

    vectors: np.ndarray  # captions × dim
    centroids: np.ndarray  # images × dim
    image_of: np.ndarray  # image index of each caption
    by_image_sorted: np.ndarray  # images × captions, float32, each row ascending

    @classmethod
    def of(cls, corpus: CaptionCorpus, vectors: np.ndarray) -> Context:
        sums = np.zeros((len(corpus.image_ids), vectors.shape[1]), dtype=np.float64)
        np.add.at(sums, corpus.image_of, vectors)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
        centroids = centroids.astype(np.float32)
        columns = np.empty((len(centroids), len(vectors)), dtype=np.float32)
        for start in range(0, len(vectors), BLOCK_ROWS):
            block = vectors[start : start + BLOCK_ROWS] @ centroids.T
            columns[:, start : start + len(block)] = block.T
        columns.sort(axis=1)
        return cls(vectors.astype(np.float32), centroids, corpus.image_of, columns)

    def scores(self, captions: np.ndarray) -> np.ndarray:
        """Return the cosine of each caption to every image centroid (float32)."""
        return self.vectors[captions] @ self.centroids.T


def _share_below(
    sorted_rows: np.ndarray, values: np.ndarray, which: np.ndarray | None = None
) -> np.ndarray:
    """Return, row by row, the share of `sorted_rows[which[r]]` (default: row r) below each
    `values[r]` by more than TIE."""
    counts = np.empty(values.shape, dtype=np.float64)
    for r in range(len(values)):
        row = sorted_rows[r if which is None else which[r]]
        counts[r] = np.searchsorted(row, values[r] - TIE, side="left")
    return counts / max(sorted_rows.shape[1], 1)


def grid_context(
    context: Context, captions: np.ndarray, images: np.ndarray
) -> dict[str, np.ndarray]:
    """Return each context feature for captions `captions` (rows) against images `images`
    (columns), by index."""
    out = {name: np.empty((len(captions), len(images))) for name in CONTEXT_FEATURES}
    for start in range(0, len(captions), BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        chunk = np.asarray(captions[rows])
        scores = context.scores(chunk)
        target = scores[:, images]
        ranked = np.sort(scores, axis=1)
        out["context/centroid"][rows] = target
        out["context/rank_share"][rows] = _share_below(ranked, target)
        out["context/gap_to_best"][rows] = ranked[:, -1:] - target
        own = context.centroids[context.image_of[chunk]]
        out["context/images"][rows] = own @ context.centroids[images].T
        out["context/caption_share"][rows] = _share_below(
            context.by_image_sorted, target.T, images
        ).T
    return out


def pair_context(
    context: Context, captions: np.ndarray, images: np.ndarray
) -> dict[str, np.ndarray]:
    """Return each context feature of the pairs (captions[k], images[k]), by index."""
    out = {name: np.empty(len(captions)) for name in CONTEXT_FEATURES}
    for start in range(0, len(captions), BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        chunk, targets = np.asarray(captions[rows]), np.asarray(images[rows])
        scores = context.scores(chunk)
        target = scores[np.arange(len(chunk)), targets]
        ranked = np.sort(scores, axis=1)
        out["context/centroid"][rows] = target
        out["context/rank_share"][rows] = _share_below(ranked, target[:, None])[:, 0]
        out["context/gap_to_best"][rows] = ranked[:, -1] - target
        own = context.centroids[context.image_of[chunk]]
        out["context/images"][rows] = np.einsum("ij,ij->i", own, context.centroids[targets])
        out["context/caption_share"][rows] = _share_below(
            context.by_image_sorted, target[:, None], targets
        )[:, 0]
    return out
