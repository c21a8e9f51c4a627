"""Exact top-k retrieval in both directions from one annotator's similarity.

Image-to-text and text-to-image rankings come from the same `Annotator.similarity`, so a pair
has the same score whichever way it is retrieved. Queries are processed in chunks to bound
memory, and ties are broken deterministically: higher score first, then the lower target row.
Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mitl.annotators.base import Annotator

Progress = Callable[[int, int], None]

# Rows of a score matrix are ranked in batches of about this many entries, which bounds the
# 8-byte sort keys built per batch (64 MiB) however wide the matrix is.
_RANK_BATCH_ENTRIES = 1 << 23


@dataclass(frozen=True, eq=False)
class TopK:
    """The best targets of each query, best first, with their scores."""

    indices: np.ndarray  # int64 (n_queries, k'), row indices into the targets
    scores: np.ndarray  # float32 (n_queries, k')

    @property
    def k(self) -> int:
        """Return k', the number of targets kept per query (k capped at the target count)."""
        return self.indices.shape[1]


def _check_k(k: int) -> None:
    """Raise ValueError unless `k` is a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _rank_keys(scores: np.ndarray) -> np.ndarray:
    """Return uint64 keys whose ascending order is score descending, then target index ascending.

    The high 32 bits are the float32 score mapped to an order-reversing unsigned integer, the low
    32 bits the column index. Keys are unique within a row, so partitioning them is exact even
    when many scores tie at the k-th place.
    """
    # Adding 0 turns -0.0 into +0.0; the two compare equal and must get the same key.
    bits = (scores + np.float32(0)).view(np.uint32)
    negative = (bits >> np.uint32(31)).astype(bool)
    # Standard float-to-sortable map: flip every bit of negatives, only the sign bit otherwise.
    ascending = np.where(negative, ~bits, bits | np.uint32(0x8000_0000))
    keys = (~ascending).astype(np.uint64) << np.uint64(32)
    keys |= np.arange(scores.shape[1], dtype=np.uint64)
    return keys


def topk_rows(scores: np.ndarray, k: int) -> TopK:
    """Return the k best columns of each row of `scores`, ranked with deterministic ties.

    Scores are compared as float32, the dtype they are kept in, so the kept scores are always
    non-increasing along a row. k larger than the number of columns keeps every column.
    """
    _check_k(k)
    matrix = np.asarray(scores)
    if matrix.ndim != 2:
        raise ValueError(f"scores must be 2-D, got shape {matrix.shape}")
    n_rows, n_targets = matrix.shape
    if n_targets >= 1 << 32:
        raise ValueError(f"at most 2**32 - 1 targets can be ranked, got {n_targets}")
    kept = min(k, n_targets)
    indices = np.empty((n_rows, kept), dtype=np.int64)
    values = np.empty((n_rows, kept), dtype=np.float32)
    if kept == 0 or n_rows == 0:
        return TopK(indices=indices, scores=values)

    batch = max(1, _RANK_BATCH_ENTRIES // n_targets)
    for start in range(0, n_rows, batch):
        stop = min(start + batch, n_rows)
        block = np.ascontiguousarray(matrix[start:stop], dtype=np.float32)
        if np.isnan(block).any():
            raise ValueError("scores contain NaN; similarities must be comparable numbers")
        keys = _rank_keys(block)
        if kept < n_targets:
            keys = np.partition(keys, kept - 1, axis=1)[:, :kept]
        keys.sort(axis=1)
        columns = (keys & np.uint64(0xFFFF_FFFF)).astype(np.int64)
        indices[start:stop] = columns
        values[start:stop] = np.take_along_axis(block, columns, axis=1)
    return TopK(indices=indices, scores=values)


def _as_queries(rows: np.ndarray, what: str) -> np.ndarray:
    """Return query rows as a 1-D int64 array; the annotator checks that they are in range."""
    array = np.asarray(rows)
    if array.ndim != 1:
        raise ValueError(f"{what} rows must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} rows must be integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


def _retrieve(
    block_scores: Callable[[np.ndarray], np.ndarray],
    queries: np.ndarray,
    k: int,
    *,
    n_targets: int,
    chunk_size: int,
    progress: Progress | None,
) -> TopK:
    """Rank all targets for `queries` chunk by chunk; `block_scores(chunk)` scores one chunk."""
    _check_k(k)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    if n_targets < 0:
        raise ValueError(f"the number of targets cannot be negative, got {n_targets}")
    kept = min(k, n_targets)
    indices = np.empty((len(queries), kept), dtype=np.int64)
    values = np.empty((len(queries), kept), dtype=np.float32)
    for start in range(0, len(queries), chunk_size):
        chunk = queries[start : start + chunk_size]
        block = np.asarray(block_scores(chunk))
        if block.shape != (len(chunk), n_targets):
            raise ValueError(
                f"similarity returned shape {block.shape}, expected {(len(chunk), n_targets)}"
            )
        top = topk_rows(block, k)
        indices[start : start + len(chunk)] = top.indices
        values[start : start + len(chunk)] = top.scores
        if progress is not None:
            progress(start + len(chunk), len(queries))
    return TopK(indices=indices, scores=values)


def retrieve_i2t(
    annotator: Annotator,
    query_image_rows: np.ndarray,
    k: int,
    *,
    n_captions: int,
    chunk_size: int = 256,
    progress: Progress | None = None,
) -> TopK:
    """Return the top-k caption rows (of 0..n_captions-1) for each query image row."""
    queries = _as_queries(query_image_rows, "query image")
    targets = np.arange(n_captions, dtype=np.int64)
    return _retrieve(
        lambda chunk: annotator.similarity(chunk, targets),
        queries,
        k,
        n_targets=n_captions,
        chunk_size=chunk_size,
        progress=progress,
    )


def retrieve_t2i(
    annotator: Annotator,
    query_caption_rows: np.ndarray,
    k: int,
    *,
    n_images: int,
    chunk_size: int = 256,
    progress: Progress | None = None,
) -> TopK:
    """Return the top-k image rows (of 0..n_images-1) for each query caption row."""
    queries = _as_queries(query_caption_rows, "query caption")
    targets = np.arange(n_images, dtype=np.int64)
    # Same function, images as rows: transposing keeps every pair's score identical to i2t.
    return _retrieve(
        lambda chunk: annotator.similarity(targets, chunk).T,
        queries,
        k,
        n_targets=n_images,
        chunk_size=chunk_size,
        progress=progress,
    )
