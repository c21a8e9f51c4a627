"""A bag-of-words annotator: TF-IDF similarity between captions, images stood in for by captions.

Crisscrossed Captions scored text-text pairs this way; here an image is represented by its own
captions, so the annotator needs no pixels and serves as a cheap, deterministic baseline.

Model
    Captions are lower-cased and split into `[a-z0-9]+` tokens; with `stop_words` (default true)
    a small English stop list, plus words like "photo" and "picture" that describe the medium
    rather than the content, is dropped. A term's weight in a caption is its count, or
    `1 + log(count)` with `sublinear_tf` (default true), times the smooth idf
    `log((1 + n) / (1 + df)) + 1`, where n is the number of captions and df the number of
    captions holding the term. Each caption vector v_c is L2-normalised (a caption with no
    remaining token is the zero vector). An image's vector is the L2-normalised sum S_i of its
    captions' vectors.

Scores
    similarity(i, c) = cos(v_c, S_i) for a caption c of another image. For a caption whose
    original image is i the caption is left out of i's centroid, otherwise every image would
    find its own captions trivially:
    cos(v_c, S_i - v_c) = (S_i·v_c - 1) / ||S_i - v_c||, ||S_i - v_c||² = ||S_i||² - 2 S_i·v_c + 1.
    The left-out score is 0 when c is i's only caption (nothing is left), when c has no tokens,
    and for images without captions, which score 0 against everything.

    The left-out scores depend only on the caption, so `prepare` computes them once, summing the
    other captions directly rather than subtracting, so a caption sharing no word with its
    siblings gets exactly 0 and not a rounding residue.

Free text
    `text_similarity` vectorises a text t with the vocabulary and idf fitted by `prepare` (words
    the corpus never used are dropped) and scores it like a caption: cos(t, S_i) against every
    image, and cos(t, S_i - v_c) against the own image i of the caption c it stands in for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from mitl.annotators.base import Annotator, Corpus, as_rows, as_text_rows

TOKEN_PATTERN = re.compile(r"[a-z0-9]+")

# Function words, then words about the medium ("photo", "picture") rather than the content.
_STOP_LIST = """
    a about above after against all also an and any are as at be been being below between both
    but by can could did do does doing down during each few for from further had has have having
    he her here hers him his how i if in into is it its itself just me more most my near next no
    nor not of off on once only or other our out over own same she should so some such than that
    the their theirs them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your
    image images photo photos photograph picture pictures shot showing shows view
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_LIST.split())

# Captions are processed in blocks when computing left-out scores, to bound the temporaries.
_LEAVE_OUT_BLOCK = 65_536
# Free texts are scored in blocks, so the densified side of each product stays (terms x block).
_TEXT_BLOCK = 512


def tokenize(text: str, *, stop_words: bool = True) -> list[str]:
    """Split `text` into lower-case `[a-z0-9]+` tokens, dropping stop words if asked."""
    tokens = TOKEN_PATTERN.findall(text.lower())
    if stop_words:
        return [token for token in tokens if token not in STOP_WORDS]
    return tokens


def term_counts(
    texts: Sequence[str], *, stop_words: bool, vocabulary: Mapping[str, int] | None = None
) -> tuple[sparse.csr_array, Mapping[str, int]]:
    """Return the (n_texts, n_terms) count matrix and the term → column vocabulary.

    Without `vocabulary`, one is built with columns in the order terms first appear, which
    keeps the result deterministic. With it, only its terms are counted, in its columns.
    """
    terms: dict[str, int] = {}
    indices: list[int] = []
    indptr = [0]
    for text in texts:
        for token in tokenize(text, stop_words=stop_words):
            if vocabulary is None:
                indices.append(terms.setdefault(token, len(terms)))
            elif (column := vocabulary.get(token)) is not None:
                indices.append(column)
        indptr.append(len(indices))
    columns = terms if vocabulary is None else vocabulary
    counts = sparse.csr_array(
        (
            np.ones(len(indices), dtype=np.float64),
            np.asarray(indices, dtype=np.int64),
            np.asarray(indptr, dtype=np.int64),
        ),
        shape=(len(texts), len(columns)),
    )
    counts.sum_duplicates()  # repeated tokens in a caption become one entry holding the count
    return counts, columns


def smooth_idf(counts: sparse.csr_array) -> np.ndarray:
    """Return each term's idf `log((1 + n) / (1 + df)) + 1` over the rows of a count matrix."""
    n_docs, n_terms = counts.shape
    document_frequency = np.bincount(counts.indices, minlength=n_terms)
    return np.log((1.0 + n_docs) / (1.0 + document_frequency)) + 1.0


def tfidf(
    counts: sparse.csr_array, *, sublinear_tf: bool, idf: np.ndarray | None = None
) -> sparse.csr_array:
    """Return L2-normalised TF-IDF rows (float64) for a count matrix; empty rows stay zero.

    The idf comes from `counts` itself unless given (free texts reuse the corpus' idf).
    """
    weights = counts.copy()
    if sublinear_tf:
        weights.data = 1.0 + np.log(weights.data)
    if idf is None:
        idf = smooth_idf(counts)
    weights.data *= idf[weights.indices]
    return normalize_rows(weights)


def normalize_rows(matrix: sparse.csr_array) -> sparse.csr_array:
    """Return a copy of `matrix` with each non-zero row scaled to unit L2 norm."""
    result = matrix.copy()
    norms = np.sqrt(row_dot(result, result))
    entry_rows = np.repeat(np.arange(result.shape[0]), np.diff(result.indptr))
    # Only rows that hold entries get divided, so the zero norms never reach the division.
    result.data /= norms[entry_rows]
    return result


def row_dot(left: sparse.csr_array, right: sparse.csr_array) -> np.ndarray:
    """Return the dot product of each row of `left` with the same row of `right` (float64)."""
    return np.asarray(left.multiply(right).sum(axis=1), dtype=np.float64).ravel()


def membership(caption_image: np.ndarray, n_images: int) -> sparse.csr_array:
    """Return the (n_images, n_captions) 0/1 matrix that sums captions into their images."""
    n_captions = len(caption_image)
    return sparse.csr_array(
        (np.ones(n_captions), (caption_image, np.arange(n_captions))),
        shape=(n_images, n_captions),
    )


def leave_one_out_scores(
    captions: sparse.csr_array, image_sums: sparse.csr_array, caption_image: np.ndarray
) -> np.ndarray:
    """Return cos(v_c, S_i - v_c) for each caption c of image i; 0 where either side is zero."""
    return left_out_cosines(captions, captions, image_sums, caption_image)


def left_out_cosines(
    queries: sparse.csr_array,
    left_out: sparse.csr_array,
    image_sums: sparse.csr_array,
    images: np.ndarray,
) -> np.ndarray:
    """Return cos(q_k, S_i - v_k) with i = images[k]; 0 where either side is zero.

    Row k of `left_out` is v_k, a caption of image i; `queries` is that caption or a text
    standing in for it. All inputs are float64, unit (or zero) rows and their sums.
    """
    n_queries = queries.shape[0]
    scores = np.zeros(n_queries, dtype=np.float64)
    for start in range(0, n_queries, _LEAVE_OUT_BLOCK):
        block = slice(start, min(start + _LEAVE_OUT_BLOCK, n_queries))
        query = queries[block]
        others = image_sums[images[block]] - left_out[block]
        # A term only c holds leaves an exact 0 here (x - x), which would otherwise be stored.
        others.eliminate_zeros()
        numerator = row_dot(others, query)
        denominator = np.sqrt(row_dot(others, others) * row_dot(query, query))
        # Non-empty vectors are sums of non-negative unit vectors, so their squared norms are
        # at least 1; anything below 0.5 is a zero vector up to rounding.
        defined = denominator > 0.5
        scores[block][defined] = numerator[defined] / denominator[defined]
    return scores


def dense_product(left: sparse.csr_array, right: sparse.csr_array) -> np.ndarray:
    """Return `left @ right.T` as a dense float32 array.

    Only the side with fewer rows is densified (terms x rows), so memory is the result plus
    that slab.
    """
    if left.shape[0] <= right.shape[0]:
        product = (right @ left.T.toarray()).T
    else:
        product = left @ right.T.toarray()
    return np.asarray(product, dtype=np.float32)


def _take_rows(matrix: sparse.csr_array, rows: np.ndarray) -> sparse.csr_array:
    """Return `matrix[rows]`, skipping the copy when `rows` is every row in order."""
    if len(rows) == matrix.shape[0] and np.array_equal(rows, np.arange(len(rows))):
        return matrix
    return matrix[rows]


def own_pairs(image_rows: np.ndarray, caption_images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (block row, block column) of every pair whose caption belongs to that image.

    `caption_images[j]` is the original image row of block column j; image rows may repeat.
    """
    order = np.argsort(image_rows, kind="stable")
    sorted_rows = image_rows[order]
    low = np.searchsorted(sorted_rows, caption_images, side="left")
    high = np.searchsorted(sorted_rows, caption_images, side="right")
    matches = high - low
    columns = np.repeat(np.arange(len(caption_images)), matches)
    # Position of each match inside its caption's run of equal image rows.
    run_start = np.repeat(np.cumsum(matches) - matches, matches)
    offsets = np.arange(len(columns)) - run_start
    rows = order[np.repeat(low, matches) + offsets]
    return rows, columns


class BowAnnotator(Annotator):
    """TF-IDF caption similarity; an image is the centroid of its own captions."""

    kind = "bow"
    config_keys = ("stop_words", "sublinear_tf")
    can_score_text = True

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Read `stop_words` and `sublinear_tf` (both booleans, default true)."""
        super().__init__(name=name, config=config)
        self.stop_words = self._bool_option("stop_words", True)
        self.sublinear_tf = self._bool_option("sublinear_tf", True)
        self._captions: sparse.csr_array | None = None
        self._images: sparse.csr_array | None = None
        # Kept for free texts: the corpus' idf and the unnormalised float64 image sums S_i.
        self._idf = np.zeros(0, dtype=np.float64)
        self._image_sums: sparse.csr_array | None = None
        self._caption_image = np.zeros(0, dtype=np.int64)
        self._leave_one_out = np.zeros(0, dtype=np.float32)
        self.vocabulary: Mapping[str, int] = {}

    def prepare(self, corpus: Corpus) -> None:
        """Build caption vectors, image centroids and every caption's left-out score."""
        counts, self.vocabulary = term_counts(corpus.caption_texts, stop_words=self.stop_words)
        self._idf = smooth_idf(counts)
        captions = tfidf(counts, sublinear_tf=self.sublinear_tf, idf=self._idf).astype(np.float32)
        # The float64 sums are built from the stored float32 vectors, so the left-out scores
        # describe exactly the vectors used for every other pair.
        captions64 = captions.astype(np.float64)
        image_sums = membership(corpus.caption_image, corpus.n_images) @ captions64
        self._captions = captions
        self._images = normalize_rows(image_sums).astype(np.float32)
        self._image_sums = image_sums
        self._caption_image = corpus.caption_image
        self._leave_one_out = leave_one_out_scores(
            captions64, image_sums, corpus.caption_image
        ).astype(np.float32)

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        """Return the dense float32 cosine block; own captions use the left-out centroid."""
        if self._captions is None or self._images is None:
            raise RuntimeError(f"bow annotator '{self.name}': call prepare() before similarity()")
        images = as_rows(image_rows, self._images.shape[0], "image")
        captions = as_rows(caption_rows, self._captions.shape[0], "caption")
        block = dense_product(
            _take_rows(self._images, images), _take_rows(self._captions, captions)
        )
        rows, columns = own_pairs(images, self._caption_image[captions])
        block[rows, columns] = self._leave_one_out[captions[columns]]
        return block

    def text_similarity(self, texts: Sequence[str], caption_rows: np.ndarray) -> np.ndarray:
        """Return float32 cosines (len(texts), n_images) of free texts with every image.

        A text standing in for caption c scores c's own image against its other captions.
        """
        if self._captions is None or self._images is None or self._image_sums is None:
            raise RuntimeError(
                f"bow annotator '{self.name}': call prepare() before text_similarity()"
            )
        rows = as_text_rows(caption_rows, len(texts), self._captions.shape[0])
        counts, _ = term_counts(texts, stop_words=self.stop_words, vocabulary=self.vocabulary)
        # Rounded through float32 like the caption vectors, so the original text scores
        # exactly as its caption does in `similarity`.
        queries = tfidf(counts, sublinear_tf=self.sublinear_tf, idf=self._idf).astype(np.float32)
        scores = np.empty((len(texts), self._images.shape[0]), dtype=np.float32)
        for start in range(0, len(texts), _TEXT_BLOCK):
            block = slice(start, start + _TEXT_BLOCK)
            scores[block] = dense_product(queries[block], self._images)
        replaced = np.flatnonzero(rows >= 0)
        own_images = self._caption_image[rows[replaced]]
        scores[replaced, own_images] = left_out_cosines(
            queries[replaced].astype(np.float64),
            self._captions[rows[replaced]].astype(np.float64),
            self._image_sums,
            own_images,
        )
        return scores

    @property
    def prepared(self) -> bool:
        """Return whether `prepare` has run."""
        return self._captions is not None
