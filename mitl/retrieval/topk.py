"""Exact top-k of score rows, and one-direction retrieval in chunks of queries.

Queries are processed in chunks to bound memory, and ties are broken deterministically:
higher score first, then the lower target row. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mitl.annotators.base import Annotator

Progress = Callable[[int, int], None]

# Rows of a score matrix are ranked in batches of about this many entries. The work buffers
# (22 bytes an entry) are allocated once per call and reused, which matters because touching
# fresh memory is a large part of the cost of such simple passes.
_RANK_BATCH_ENTRIES = 1 << 21
# Sort keys hold the score in their high 32 bits and the target in the low 32 bits.
LOW_32 = 0xFFFF_FFFF


@dataclass(frozen=True, eq=False)
class TopK:
    """The best targets of each query, best first, with their scores."""

    indices: np.ndarray  # int64 (n_queries, k'), row indices into the targets
    scores: np.ndarray  # float32 (n_queries, k')

    @property
    def k(self) -> int:
        """Return k', the number of targets kept per query (k capped at the target count)."""
        return self.indices.shape[1]


def check_k(k: int) -> None:
    """Raise ValueError unless `k` is a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


@dataclass
class _RankBuffers:
    """Reusable work arrays for ranking up to `rows` rows of `columns` targets."""

    scores: np.ndarray  # float32 (rows, columns)
    scratch: np.ndarray  # int32 (rows, columns)
    is_nan: np.ndarray  # bool (rows, columns)
    keys: np.ndarray  # uint64 (rows, columns)
    column_index: np.ndarray  # uint64 (columns,)

    @classmethod
    def allocate(cls, rows: int, columns: int) -> _RankBuffers:
        """Return buffers for batches of at most `rows` rows."""
        shape = (rows, columns)
        return cls(
            scores=np.empty(shape, dtype=np.float32),
            scratch=np.empty(shape, dtype=np.int32),
            is_nan=np.empty(shape, dtype=bool),
            keys=np.empty(shape, dtype=np.uint64),
            column_index=np.arange(columns, dtype=np.uint64),
        )


def _fill_rank_keys(scores: np.ndarray, scratch: np.ndarray, keys: np.ndarray) -> None:
    """Write uint64 keys whose ascending order is score descending, then column ascending.

    The high 32 bits hold the float32 score mapped to an order-reversing unsigned integer, the
    low 32 bits the column. Keys are unique within a row, so partitioning them is exact even when
    many scores tie at the k-th place. `scores` is modified (-0.0 becomes +0.0); `scratch` is
    int32 and `keys` uint64, both of the same shape.
    """
    # -0.0 == +0.0 as numbers, so they must share a key; adding +0.0 turns -0.0 into +0.0.
    scores += np.float32(0)
    bits = scores.view(np.int32)
    # Float-to-int order map: as int32, a negative float's magnitude bits count the wrong way,
    # so flip them (bits ^ 0x7FFFFFFF); non-negative floats already sort correctly.
    np.right_shift(bits, 31, out=scratch)
    np.bitwise_and(scratch, np.int32(0x7FFF_FFFF), out=scratch)
    np.bitwise_xor(bits, scratch, out=scratch)
    # Reverse the order (best first), then move from signed to unsigned order.
    np.invert(scratch, out=scratch)
    unsigned = scratch.view(np.uint32)
    np.bitwise_xor(unsigned, np.uint32(0x8000_0000), out=unsigned)
    np.copyto(keys, unsigned)
    np.left_shift(keys, np.uint64(32), out=keys)


def topk_rows(scores: np.ndarray, k: int) -> TopK:
    """Return the k best columns of each row of `scores`, ranked with deterministic ties.

    Scores are compared as float32, the dtype they are kept in, so the kept scores never increase
    along a row. k larger than the number of columns keeps every column. NaN is rejected.
    """
    check_k(k)
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

    batch = min(n_rows, max(1, _RANK_BATCH_ENTRIES // n_targets))
    buffers = _RankBuffers.allocate(batch, n_targets)
    for start in range(0, n_rows, batch):
        stop = min(start + batch, n_rows)
        rows = stop - start
        block, keys = buffers.scores[:rows], buffers.keys[:rows]
        np.copyto(block, matrix[start:stop], casting="unsafe")
        if np.isnan(block, out=buffers.is_nan[:rows]).any():
            raise ValueError("scores contain NaN; similarities must be comparable numbers")
        _fill_rank_keys(block, buffers.scratch[:rows], keys)
        np.bitwise_or(keys, buffers.column_index, out=keys)
        if kept < n_targets:
            keys.partition(kept - 1, axis=1)
        best = np.sort(keys[:, :kept], axis=1)
        columns = (best & np.uint64(LOW_32)).astype(np.int64)
        indices[start:stop] = columns
        values[start:stop] = np.take_along_axis(block, columns, axis=1)
    return TopK(indices=indices, scores=values)


def as_queries(rows: np.ndarray, what: str) -> np.ndarray:
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
    check_k(k)
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
    queries = as_queries(query_image_rows, "query image")
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
    queries = as_queries(query_caption_rows, "query caption")
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
