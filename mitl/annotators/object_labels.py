"""An object-label annotator: PCME's "plausible match" from instance labels.

Chun et al. (2021, "Probabilistic Embeddings for Cross-Modal Retrieval") call an image and a
caption a plausible match when their multi-hot instance-label vectors differ in at most ζ
positions. The annotator needs neither pixels nor caption text, only `Corpus.image_labels`.

Labels
    An image's labels form a set (repeats, such as one "person" per instance, count once); the
    vocabulary is every label of the corpus. A caption takes the labels of its original image,
    as PCME did with the COCO instance annotations, so all captions of an image score alike and
    ties between them fall to the retrieval's tie-break (the lower caption row).

Scores
    For image i and caption c with label sets A (i's) and B (c's original image's):
    shared s = |A ∩ B|, differing h = |A △ B| (the Hamming distance of the multi-hot vectors),
    plausible p = 1 when h <= ζ and neither set is empty, else 0. With m the largest label
    count of any image of the corpus (at least 1) and W = 2m + 1,

        similarity(i, c) = p · W · (m + 1) + W · s - h.

    Since h <= 2m < W, the score orders pairs by plausibility first, then by more shared labels,
    then by fewer differing labels: the top-k of a query are its plausible matches first, those
    sharing more labels before those sharing fewer. Scores are integers, exact in float32 while
    m < 2048, so the ranking is deterministic.

    An empty label set means "not annotated", not "nothing in the image", so such an item is
    never a plausible match (PCME's rule alone would match two unlabelled items).

Leave-one-out
    Not needed: the caption's labels are its image's labels by definition, so the original pair
    is a plausible match by construction rather than through anything the caption itself says.

Config
    `zeta`: ζ, the number of differing labels a plausible match tolerates (integer >= 0,
    default 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from mitl.annotators.base import Annotator, AnnotatorError, Corpus, as_rows

DEFAULT_ZETA = 1
# Scores reach (2m + 1)², which float32 holds exactly only below 2**24.
MAX_LABELS_PER_IMAGE = 2047


def label_matrix(image_labels: Sequence[Sequence[str]]) -> tuple[sparse.csr_array, list[str]]:
    """Return the (n_images, n_labels) 0/1 float32 matrix and its sorted label vocabulary."""
    vocabulary = sorted({label for labels in image_labels for label in labels})
    column = {label: j for j, label in enumerate(vocabulary)}
    indices: list[int] = []
    indptr = [0]
    for labels in image_labels:
        indices.extend(sorted({column[label] for label in labels}))
        indptr.append(len(indices))
    matrix = sparse.csr_array(
        (
            np.ones(len(indices), dtype=np.float32),
            np.asarray(indices, dtype=np.int64),
            np.asarray(indptr, dtype=np.int64),
        ),
        shape=(len(image_labels), len(vocabulary)),
    )
    return matrix, vocabulary


def shared_counts(left: sparse.csr_array, right: sparse.csr_array) -> np.ndarray:
    """Return the dense (len(left), len(right)) float32 counts of labels two rows share."""
    # Densify only the smaller side (labels x rows), so memory is the block plus that slab.
    if left.shape[0] <= right.shape[0]:
        block = (right @ left.T.toarray()).T
    else:
        block = left @ right.T.toarray()
    return np.asarray(block, dtype=np.float32)


def plausible_scores(
    shared: np.ndarray, left_sizes: np.ndarray, right_sizes: np.ndarray, *, zeta: int, most: int
) -> np.ndarray:
    """Return the documented score p·W·(m + 1) + W·s - h for a block of shared counts."""
    differing = left_sizes[:, None] + right_sizes[None, :] - 2.0 * shared
    labelled = (left_sizes > 0)[:, None] & (right_sizes > 0)[None, :]
    plausible = (differing <= zeta) & labelled
    weight = 2.0 * most + 1.0
    scores = plausible * (weight * (most + 1.0)) + weight * shared - differing
    return scores.astype(np.float32)


class ObjectLabelsAnnotator(Annotator):
    """PCME plausible matches: label sets differing in at most ζ labels rank first."""

    kind = "object_labels"
    config_keys = ("zeta",)

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Read `zeta` (integer >= 0, default 1)."""
        super().__init__(name=name, config=config)
        zeta = self.config.get("zeta", DEFAULT_ZETA)
        if isinstance(zeta, bool) or not isinstance(zeta, int) or zeta < 0:
            raise AnnotatorError(
                f"{self.kind} annotator '{name}': config key 'zeta' must be an integer >= 0, "
                f"got {zeta!r}"
            )
        self.zeta: int = zeta
        self._labels: sparse.csr_array | None = None
        self._sizes = np.zeros(0, dtype=np.float32)
        self._caption_image = np.zeros(0, dtype=np.int64)
        self._most = 1
        self.vocabulary: list[str] = []

    def prepare(self, corpus: Corpus) -> None:
        """Build the multi-hot label matrix, or raise AnnotatorError if there are no labels."""
        labels = corpus.image_labels
        if labels is None or not any(labels):
            raise AnnotatorError(
                f"{self.kind} annotator '{self.name}': dataset has no object labels "
                "(import images with labels to use this annotator)"
            )
        matrix, self.vocabulary = label_matrix(labels)
        sizes = np.diff(matrix.indptr).astype(np.float32)
        most = int(sizes.max())
        if most > MAX_LABELS_PER_IMAGE:
            raise AnnotatorError(
                f"{self.kind} annotator '{self.name}': an image has {most} distinct labels, "
                f"more than the {MAX_LABELS_PER_IMAGE} the scores can rank exactly"
            )
        self._labels = matrix
        self._sizes = sizes
        self._most = most
        self._caption_image = corpus.caption_image

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        """Return the float32 score block; captions are scored through their original images."""
        if self._labels is None:
            raise RuntimeError(f"{self.kind} annotator '{self.name}': call prepare() first")
        images = as_rows(image_rows, self._labels.shape[0], "image")
        captions = as_rows(caption_rows, len(self._caption_image), "caption")
        # Captions of one image share its labels: score each distinct owner image once.
        owners, inverse = np.unique(self._caption_image[captions], return_inverse=True)
        shared = shared_counts(self._labels[images], self._labels[owners])
        scores = plausible_scores(
            shared, self._sizes[images], self._sizes[owners], zeta=self.zeta, most=self._most
        )
        return scores[:, inverse.reshape(-1)]
