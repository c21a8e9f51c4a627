"""Exact top-k retrieval in both directions from one annotator's similarity.

Image-to-text and text-to-image rankings come from the same `Annotator.similarity`, so a pair
has the same score whichever way it is retrieved. Queries are processed in chunks to bound
memory, and ties are broken deterministically: higher score first, then the lower target row.

`retrieve_both` ranks both directions from one pass over the image x caption score matrix.
For an `EmbeddingAnnotator` that keeps the plain dot product it computes the blocks itself
with torch (CUDA when available) and ranks them exactly: on the CPU from bounds on each k-th
score (`_ThresholdEngine`), on CUDA with `torch.topk` (`_TopkEngine`).
Pure Python: no Django import; torch is imported only when that path runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mitl.annotators.base import Annotator, EmbeddingAnnotator, as_rows

if TYPE_CHECKING:
    import torch

Progress = Callable[[int, int], None]

# Rows of a score matrix are ranked in batches of about this many entries. The work buffers
# (22 bytes an entry) are allocated once per call and reused, which matters because touching
# fresh memory is a large part of the cost of such simple passes.
_RANK_BATCH_ENTRIES = 1 << 21


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
        columns = (best & np.uint64(0xFFFF_FFFF)).astype(np.int64)
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


# Both directions from one pass over the score matrix.

# A block of the score matrix holds about this many scores (256 MiB as float32): big enough for
# the matrix product to run at full speed and to spread the per-block selection cost (fewer
# blocks re-rank fewer running top-k lists), small enough that a block and its selection
# buffers stay well below 1.5 GB whatever the corpus size.
_BLOCK_ENTRIES = 1 << 26
# Scores are ranked from group maxima: a row is cut into groups of this many columns, a block
# column into groups of this many rows. A maximum per group is one cheap streaming pass, and the
# groups with the largest maxima bound the k-th score (see `_ThresholdEngine`, `_TopkEngine`).
_ROW_GROUP = 32
_COLUMN_GROUP = 16
# The torch.topk path searches the best groups' scores, so its column groups are smaller.
_TOPK_COLUMN_GROUP = 4
# The torch.topk selection serves CUDA; on the CPU its cost per row (~10 us) loses to numpy's
# vectorised partition and sort. Tests switch it on to run its logic without a GPU.
_TOPK_ON_CPU = False
# Dot products stay far from float32 overflow (3.4e38) below this bound, so scores are finite.
_SAFE_SCORE = 1e38
_LOW_32 = 0xFFFF_FFFF


@dataclass(frozen=True, eq=False)
class _Plan:
    """What one `retrieve_both` call scores, with the queries de-duplicated and sorted."""

    image_queries: np.ndarray  # unique image query rows, ascending
    image_inverse: np.ndarray  # where each of the caller's image queries is in image_queries
    caption_queries: np.ndarray  # unique caption query rows, ascending
    caption_inverse: np.ndarray
    scan: np.ndarray  # image rows scored, ascending
    columns: np.ndarray  # caption rows scored for each scanned image row, ascending
    query_columns: np.ndarray | None  # positions of caption_queries in columns; None: all


def _plan(images: np.ndarray, captions: np.ndarray, n_images: int, n_captions: int) -> _Plan:
    """Return the rows and columns to score for these (range-checked) queries."""
    image_queries, image_inverse = np.unique(images, return_inverse=True)
    caption_queries, caption_inverse = np.unique(captions, return_inverse=True)
    # A caption query ranks every image and an image query every caption; otherwise only
    # what the queries name is scored.
    scan = np.arange(n_images, dtype=np.int64) if len(caption_queries) else image_queries
    if len(image_queries):
        columns = np.arange(n_captions, dtype=np.int64)
        full = len(caption_queries) == n_captions
        query_columns = None if full or not len(caption_queries) else caption_queries
    else:
        columns, query_columns = caption_queries, None
    return _Plan(
        image_queries=image_queries,
        image_inverse=image_inverse.reshape(-1),
        caption_queries=caption_queries,
        caption_inverse=caption_inverse.reshape(-1),
        scan=scan,
        columns=columns,
        query_columns=query_columns,
    )


def _check_range(rows: np.ndarray, n: int, what: str) -> None:
    """Raise ValueError unless every row lies in 0..n-1."""
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError(f"{what} rows must lie in 0..{n - 1}")


class _Engine(Protocol):
    """Scores blocks of scanned image rows and keeps the top-k of both directions."""

    def block(self, rows: np.ndarray) -> Any:
        """Return the scores of `rows` (ascending image rows) x all planned columns."""
        ...

    def top_rows(self, block: Any, positions: np.ndarray | None, kept: int) -> TopK:
        """Return the exact top-`kept` columns of the block rows at `positions` (None: all)."""
        ...

    def add_columns(self, block: Any, rows: np.ndarray, kept: int) -> None:
        """Merge the block's scores into the running top-`kept` image rows per caption query."""
        ...

    def columns_top(self) -> TopK:
        """Return the top image rows of every caption query, in caption_queries order."""
        ...


def retrieve_both(
    annotator: Annotator,
    query_image_rows: np.ndarray,
    query_caption_rows: np.ndarray,
    k: int,
    *,
    n_images: int,
    n_captions: int,
    chunk_size: int | None = None,
    progress: Progress | None = None,
    device: str | None = None,
) -> tuple[TopK, TopK]:
    """Return (i2t, t2i) top-k from one pass over blocks of the image x caption scores.

    i2t ranks captions 0..n_captions-1 for each query image row, t2i images 0..n_images-1 for
    each query caption row, both exactly as `retrieve_i2t` and `retrieve_t2i` rank a given
    score matrix (score descending, then lower row), and a pair gets one score in both.
    Blocks hold `chunk_size` image rows (default: about 64 Mi scores) by every caption needed.
    `progress(done, total)` counts scanned image rows. An `EmbeddingAnnotator` that keeps the
    plain dot product is scored with torch on `device` (default: CUDA when available); the
    product may then round differently from numpy's in the last bit, never the ranking rule.
    """
    _check_k(k)
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    for count, what in ((n_images, "images"), (n_captions, "captions")):
        if count < 0:
            raise ValueError(f"the number of {what} cannot be negative, got {count}")
        if count >= _LOW_32:  # targets share 64-bit sort keys with their scores
            raise ValueError(f"at most 2**32 - 2 {what} can be ranked, got {count}")
    images = _as_queries(query_image_rows, "query image")
    captions = _as_queries(query_caption_rows, "query caption")
    # Caption queries rank the scanned images, so an image query outside them would be missed.
    _check_range(images, n_images, "query image")
    _check_range(captions, n_captions, "query caption")
    plan = _plan(images, captions, n_images, n_captions)
    kept_i2t, kept_t2i = min(k, n_captions), min(k, n_images)
    i2t = TopK(
        indices=np.empty((len(plan.image_queries), kept_i2t), dtype=np.int64),
        scores=np.empty((len(plan.image_queries), kept_i2t), dtype=np.float32),
    )
    t2i = TopK(
        indices=np.empty((len(plan.caption_queries), kept_t2i), dtype=np.int64),
        scores=np.empty((len(plan.caption_queries), kept_t2i), dtype=np.float32),
    )
    do_rows = bool(len(plan.image_queries)) and kept_i2t > 0
    do_columns = bool(len(plan.caption_queries)) and kept_t2i > 0
    if do_rows or do_columns:
        engine = _engine(annotator, plan, device, kept_t2i if do_columns else 0)
        per_block = chunk_size or max(1, _BLOCK_ENTRIES // max(1, len(plan.columns)))
        for start in range(0, len(plan.scan), per_block):
            rows = plan.scan[start : start + per_block]
            block = engine.block(rows)
            if do_rows:
                _rank_block_rows(engine, block, rows, plan.image_queries, i2t)
            if do_columns:
                engine.add_columns(block, rows, kept_t2i)
            if progress is not None:
                progress(start + len(rows), len(plan.scan))
        if do_columns:
            t2i = engine.columns_top()
    return (
        TopK(indices=i2t.indices[plan.image_inverse], scores=i2t.scores[plan.image_inverse]),
        TopK(indices=t2i.indices[plan.caption_inverse], scores=t2i.scores[plan.caption_inverse]),
    )


def _rank_block_rows(
    engine: _Engine, block: Any, rows: np.ndarray, image_queries: np.ndarray, out: TopK
) -> None:
    """Write the top captions of the image queries among `rows` into their rows of `out`."""
    first, stop = np.searchsorted(image_queries, [rows[0], rows[-1] + 1])
    if first == stop:
        return
    positions = (
        None if stop - first == len(rows) else np.searchsorted(rows, image_queries[first:stop])
    )
    top = engine.top_rows(block, positions, out.k)
    out.indices[first:stop] = top.indices
    out.scores[first:stop] = top.scores


def _engine(annotator: Annotator, plan: _Plan, device: str | None, kept_columns: int) -> _Engine:
    """Return an engine that computes dot products itself when it may, else the numpy one."""
    vectors = _plain_embeddings(annotator)
    if vectors is None:
        return _NumpyEngine(annotator, plan)
    import torch  # here, not at module level: importing torch takes seconds

    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if chosen.type == "cpu" and not _TOPK_ON_CPU:
        return _ThresholdEngine(*vectors, plan, chosen, kept_columns)
    return _TopkEngine(*vectors, plan, chosen, kept_columns)


def _plain_embeddings(annotator: Annotator) -> tuple[np.ndarray, np.ndarray] | None:
    """Return float32 (image, caption) vectors when a pair's score is their plain dot product.

    Vectors whose products could be NaN or overflow are left to `similarity`, so the engines
    that compute products themselves only ever see finite scores.
    """
    if not isinstance(annotator, EmbeddingAnnotator):
        return None
    # A subclass that overrides similarity (e.g. leave-one-out for own captions) must be asked.
    if type(annotator).similarity is not EmbeddingAnnotator.similarity:
        return None
    if annotator.image_vectors is None or annotator.caption_vectors is None:
        return None  # similarity() raises the helpful "call prepare()" error
    images = _float32_rows(annotator.image_vectors, "image")
    captions = _float32_rows(annotator.caption_vectors, "caption")
    if images.shape[1] != captions.shape[1]:
        return None  # similarity() raises numpy's shape error
    # |a . b| <= dim * max|a_i| * max|b_i|, and every partial sum too; NaN fails the test.
    bound = images.shape[1] * _largest_magnitude(images) * _largest_magnitude(captions)
    if not bound < _SAFE_SCORE:
        return None
    return images, captions


def _float32_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    """Return `vectors` as a C-contiguous 2-D float32 array (a copy only when needed)."""
    array = np.ascontiguousarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"{what} vectors must be 2-D, got shape {array.shape}")
    return array


def _largest_magnitude(vectors: np.ndarray) -> float:
    """Return max |entry| as a float (NaN if any entry is NaN), without a temporary array."""
    if not vectors.size:
        return 0.0
    return max(float(vectors.max()), -float(vectors.min()))


class _NumpyEngine:
    """Score blocks with `Annotator.similarity` and rank them with `topk_rows`."""

    def __init__(self, annotator: Annotator, plan: _Plan) -> None:
        self.annotator = annotator
        self.plan = plan
        self.indices = np.empty((len(plan.caption_queries), 0), dtype=np.int64)
        self.scores = np.empty((len(plan.caption_queries), 0), dtype=np.float32)

    def block(self, rows: np.ndarray) -> np.ndarray:
        """Return `annotator.similarity(rows, columns)`, checking its shape."""
        columns = self.plan.columns
        block = np.asarray(self.annotator.similarity(rows, columns))
        if block.shape != (len(rows), len(columns)):
            raise ValueError(
                f"similarity returned shape {block.shape}, expected {(len(rows), len(columns))}"
            )
        return block

    def top_rows(self, block: np.ndarray, positions: np.ndarray | None, kept: int) -> TopK:
        """Return the exact top-`kept` columns of the rows at `positions` (None: all)."""
        return topk_rows(block if positions is None else block[positions], kept)

    def add_columns(self, block: np.ndarray, rows: np.ndarray, kept: int) -> None:
        """Merge the block's top images per caption query into the running top-`kept`."""
        query_columns = self.plan.query_columns
        part = block if query_columns is None else block[:, query_columns]
        top = topk_rows(part.T, kept)
        indices = np.concatenate([self.indices, rows[top.indices]], axis=1)
        scores = np.concatenate([self.scores, top.scores], axis=1)
        # Both parts are ranked and earlier blocks hold lower image rows, so a stable sort on
        # the score alone keeps the lower row first among equal scores.
        order = np.argsort(-scores, axis=1, kind="stable")[:, :kept]
        self.indices = np.take_along_axis(indices, order, axis=1)
        self.scores = np.take_along_axis(scores, order, axis=1)

    def columns_top(self) -> TopK:
        """Return the running top images per caption query."""
        return TopK(indices=self.indices, scores=self.scores)


class _TorchEngine:
    """Compute score blocks as one torch matrix product each, into a reused buffer."""

    def __init__(
        self,
        images: np.ndarray,
        captions: np.ndarray,
        plan: _Plan,
        device: torch.device,
        kept_columns: int,
    ) -> None:
        import torch

        self.torch = torch
        self.device = device
        as_rows(plan.scan, len(images), "image")
        columns = as_rows(plan.columns, len(captions), "caption")
        if len(columns) and columns[-1] != len(columns) - 1:  # sorted and unique: not 0..n-1
            captions = captions[columns]
        else:
            captions = captions[: len(columns)]
        self.images = self._tensor(images)
        self.captions = self._tensor(captions)
        self.plan = plan
        self.kept_columns = kept_columns
        self.buffer: torch.Tensor | None = None

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """Return `array` on the device, sharing its memory on the CPU."""
        with warnings.catch_warnings():
            # Read-only arrays (e.g. vectors read from a store) are fine: nothing writes to them.
            warnings.filterwarnings("ignore", message=".*not writable.*")
            return self.torch.from_numpy(array).to(self.device)

    def scores(self, rows: np.ndarray) -> torch.Tensor:
        """Return the scores of `rows` x columns as a tensor on the device."""
        torch = self.torch
        n = len(rows)
        if self.buffer is None or self.buffer.shape[0] < n:
            # Every block but the last has the same size, so this allocates once; reusing the
            # buffer saves faulting in fresh pages for each block.
            self.buffer = torch.empty(
                (n, self.captions.shape[0]), dtype=torch.float32, device=self.device
            )
        out = self.buffer[:n]
        if rows[-1] - rows[0] == n - 1:  # ascending and unique, so consecutive: a view
            images = self.images[int(rows[0]) : int(rows[0]) + n]
        else:
            images = self.images[self._tensor(rows)]
        torch.matmul(images, self.captions.T, out=out)
        return out


class _ThresholdEngine(_TorchEngine):
    """Rank torch-computed blocks on the CPU: bound each k-th score, sort only what reaches it.

    A row's k-th largest group maximum is at most its k-th score (k distinct scores reach it),
    so only scores at or above it can be in the top k; they are few, and sorting them by
    (score, target) is exact whatever the ties. A caption query's running k-th score bounds
    its later blocks: their rows come later, so only a strictly higher score can enter.
    """

    def __init__(
        self,
        images: np.ndarray,
        captions: np.ndarray,
        plan: _Plan,
        device: torch.device,
        kept_columns: int,
    ) -> None:
        super().__init__(images, captions, plan, device, kept_columns)
        # Running top of each caption query as keys from `_entry_keys`, best first.
        self.keys = np.empty((len(plan.caption_queries), 0), dtype=np.uint64)
        self.mask: np.ndarray | None = None

    def block(self, rows: np.ndarray) -> np.ndarray:
        """Return the scores of `rows` x columns as a numpy view of the block buffer."""
        return self.scores(rows).numpy()

    def top_rows(self, block: np.ndarray, positions: np.ndarray | None, kept: int) -> TopK:
        """Return the exact top-`kept` columns of the block rows at `positions` (None: all)."""
        scores = block if positions is None else block[positions]
        n, width = scores.shape
        groups = width // _ROW_GROUP
        if groups < kept:
            return topk_rows(scores, kept)
        whole = groups * _ROW_GROUP
        grouped = scores[:, :whole].reshape(n, groups, _ROW_GROUP)
        # torch reduces on all cores; numpy's max along a short last axis is slow.
        maxima = self.torch.from_numpy(grouped).amax(dim=2).numpy()
        floor = np.partition(maxima, groups - kept, axis=1)[:, groups - kept]
        pair_rows, pair_groups = np.divmod(np.flatnonzero(maxima >= floor[:, None]), groups)
        values = grouped[pair_rows, pair_groups]
        keep = values >= floor[pair_rows, None]
        columns = pair_groups[:, None] * _ROW_GROUP + np.arange(_ROW_GROUP)
        segments = [np.broadcast_to(pair_rows[:, None], keep.shape)[keep]]
        keys = [_entry_keys(values[keep], columns[keep])]
        if whole < width:  # the columns after the last whole group are checked one by one
            tail = scores[:, whole:]
            tail_rows, tail_columns = np.divmod(
                np.flatnonzero(tail >= floor[:, None]), width - whole
            )
            segments.append(tail_rows)
            keys.append(_entry_keys(tail[tail_rows, tail_columns], tail_columns + whole))
        return _keys_top(_top_keys(np.concatenate(segments), np.concatenate(keys), n, kept))

    def add_columns(self, block: np.ndarray, rows: np.ndarray, kept: int) -> None:
        """Merge the block's scores into the running top-`kept` image rows per caption query."""
        query_columns = self.plan.query_columns
        part = block if query_columns is None else block[:, query_columns]
        height, width = part.shape
        if self.mask is None or self.mask.shape[0] < height:
            # Reused like the score buffer: fresh pages cost more than the comparison.
            self.mask = np.empty(part.shape, dtype=bool)
        mask = self.mask[:height]
        held = self.keys.shape[1]
        if held == kept:
            # Earlier blocks hold lower rows, so a score equal to the k-th so far loses its tie.
            np.greater(part, _scores_of_keys(self.keys[:, -1] >> np.uint64(32)), out=mask)
        else:
            floor = _column_floor(part, kept)
            if floor is None:
                mask.fill(True)
            else:
                np.greater_equal(part, floor, out=mask)
        found = np.flatnonzero(mask)
        block_rows = found // width
        columns = found - block_rows * width
        new_keys = _entry_keys(part.reshape(-1)[found], rows[block_rows])
        self.keys = _top_keys(
            np.concatenate([np.repeat(np.arange(width), held), columns]),
            np.concatenate([self.keys.reshape(-1), new_keys]),
            width,
            min(kept, held + height),
        )

    def columns_top(self) -> TopK:
        """Return the running top images per caption query."""
        return _keys_top(self.keys)


def _column_floor(part: np.ndarray, kept: int) -> np.ndarray | None:
    """Return a lower bound of each column's `kept`-th score, or None when too few rows."""
    height, width = part.shape
    groups = height // _COLUMN_GROUP
    if groups < kept:
        return None
    # Along the first axis numpy's max is element-wise over whole rows: vectorised, no copy.
    maxima = part[: groups * _COLUMN_GROUP].reshape(groups, _COLUMN_GROUP, width).max(axis=1)
    return np.partition(maxima, groups - kept, axis=0)[groups - kept]


def _entry_keys(scores: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Return uint64 keys whose ascending order is score descending, then target ascending.

    The high 32 bits hold the float32 score mapped to an order-reversing uint32 (-0.0 and +0.0
    share it), the low 32 bits the target, so keys of distinct targets never tie.
    """
    bits = (np.asarray(scores, dtype=np.float32) + np.float32(0)).view(np.int32)
    # As int32, a negative float's magnitude bits count the wrong way: flip them.
    ordered = bits ^ ((bits >> 31) & 0x7FFF_FFFF)
    # Reverse the order (best first), then move from signed to unsigned order.
    high = (~ordered).view(np.uint32) ^ np.uint32(0x8000_0000)
    return (high.astype(np.uint64) << np.uint64(32)) | targets.astype(np.uint64)


def _keys_top(keys: np.ndarray) -> TopK:
    """Return the targets and float32 scores of keys made by `_entry_keys`."""
    high = (keys >> np.uint64(32)).astype(np.uint32)
    return TopK(indices=(keys & np.uint64(_LOW_32)).astype(np.int64), scores=_scores_of_keys(high))


def _scores_of_keys(high: np.ndarray) -> np.ndarray:
    """Return the float32 scores of the high halves of `_entry_keys` keys."""
    ordered = ~((high.astype(np.uint32) ^ np.uint32(0x8000_0000)).view(np.int32))
    return (ordered ^ ((ordered >> 31) & 0x7FFF_FFFF)).view(np.float32)


def _top_keys(segments: np.ndarray, keys: np.ndarray, n_segments: int, kept: int) -> np.ndarray:
    """Return the `kept` smallest keys of each of `n_segments` segments, ascending.

    Entries are (segment, key) pairs in any order, every segment holding at least `kept` of
    them. Segments become rows of a dense matrix that numpy partitions and sorts row-wise (its
    vectorised sort shines on short rows); crowded segments, e.g. a constant column whose
    scores all tie, would make that matrix huge and are ranked by one lexsort instead.
    """
    counts = np.bincount(segments, minlength=n_segments)
    width = max(kept, min(int(counts.max(initial=0)), 4 * kept + 64))
    top = np.empty((n_segments, kept), dtype=np.uint64)
    crowded = counts > width
    if crowded.any():
        heavy = crowded[segments]
        order = np.lexsort((keys[heavy], segments[heavy]))
        ranked = keys[heavy][order]
        heavy_counts = counts[crowded]
        starts = np.cumsum(heavy_counts) - heavy_counts
        top[crowded] = ranked[starts[:, None] + np.arange(kept)]
        segments, keys = segments[~heavy], keys[~heavy]
        counts = np.where(crowded, 0, counts)
    # Any order by segment will do, as each row is sorted below; 16-bit ids get a radix sort.
    small = segments.astype(np.uint16) if n_segments <= 1 << 16 else segments
    order = np.argsort(small, kind="stable")
    ordered_segments = segments[order]
    starts = np.cumsum(counts) - counts
    slots = np.arange(len(order)) - starts[ordered_segments]
    # Empty slots hold the largest key, which no entry has (targets stay below 2**32 - 1).
    dense = np.full((n_segments, width), np.iinfo(np.uint64).max, dtype=np.uint64)
    dense.reshape(-1)[ordered_segments * width + slots] = keys[order]
    if width > kept:
        dense = np.partition(dense, kept - 1, axis=1)[:, :kept]
    dense.sort(axis=1)
    light = ~crowded
    top[light] = dense[light]
    return top


class _TopkEngine(_TorchEngine):
    """Rank blocks on the device with `torch.topk`, exactly (the CUDA path).

    `torch.topk` picks among equal scores arbitrarily, so selection keeps one candidate more
    than needed and checks it: when the k-th score is strictly above everything left out, the
    candidates hold every score that can reach the top k, and sorting them by (score, row) is
    exact. Rows or columns where a tie reaches the boundary are ranked again by `topk_rows`.
    """

    def __init__(
        self,
        images: np.ndarray,
        captions: np.ndarray,
        plan: _Plan,
        device: torch.device,
        kept_columns: int,
    ) -> None:
        super().__init__(images, captions, plan, device, kept_columns)
        torch = self.torch
        self.query_columns = None
        if plan.query_columns is not None:
            self.query_columns = self._tensor(plan.query_columns)
        # Running top of each caption query as int64 keys (see `_encode`); the initial keys
        # are below every real key and are pushed out because every image row is scanned.
        self.keys = torch.full(
            (len(plan.caption_queries), kept_columns),
            torch.iinfo(torch.int64).min,
            dtype=torch.int64,
            device=device,
        )

    def block(self, rows: np.ndarray) -> torch.Tensor:
        """Return the scores of `rows` x columns on the device."""
        return self.scores(rows)

    def top_rows(self, block: torch.Tensor, positions: np.ndarray | None, kept: int) -> TopK:
        """Return the exact top-`kept` columns of the block rows at `positions` (None: all)."""
        scores = block if positions is None else block[self._tensor(positions)]
        values, ids, floor = _row_candidates(self.torch, scores, kept)
        keys, unsure = _finish(self.torch, values, ids, kept, floor)
        indices, top_scores = _decode(self.torch, keys)
        redo = self.torch.nonzero(unsure).flatten()
        if len(redo):
            exact = topk_rows(scores[redo].cpu().numpy(), kept)
            at = redo.cpu().numpy()
            indices[at], top_scores[at] = exact.indices, exact.scores
        return TopK(indices=indices, scores=top_scores)

    def add_columns(self, block: torch.Tensor, rows: np.ndarray, kept: int) -> None:
        """Merge the block's top images per caption query into the running top-`kept`."""
        torch = self.torch
        part = block if self.query_columns is None else block.index_select(1, self.query_columns)
        here = min(kept, part.shape[0])
        values, ids, floor = _column_candidates(torch, part, here)
        # Caption queries make every image row scanned, so a block's rows are consecutive.
        offset = int(rows[0])
        keys, unsure = _finish(torch, values, ids + offset, here, floor)
        redo = torch.nonzero(unsure).flatten()
        if len(redo):
            exact = topk_rows(part[:, redo].T.cpu().numpy(), here)
            keys[redo] = _encode(
                torch,
                self._tensor(exact.scores),
                self._tensor(exact.indices + offset),
            )
        merged = torch.cat([self.keys, keys], dim=1)
        self.keys = torch.topk(merged, kept, dim=1, sorted=True).values

    def columns_top(self) -> TopK:
        """Return the running top images per caption query."""
        indices, scores = _decode(self.torch, self.keys)
        return TopK(indices=indices, scores=scores)


def _row_candidates(
    torch: Any, scores: torch.Tensor, kept: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return (values, column ids, floor): candidates for the top `kept` of each row.

    A row is cut into groups of `_ROW_GROUP` columns and only the `kept + 1` groups with the
    largest maxima, plus the columns after the last whole group, are candidates. Every score
    left out is at most the row's floor, the smallest maximum kept (None: nothing left out).
    """
    n, width = scores.shape
    n_groups, want = width // _ROW_GROUP, kept + 1
    if n_groups <= want:
        return scores, torch.arange(width, device=scores.device).expand(n, width), None
    whole = n_groups * _ROW_GROUP
    grouped = scores[:, :whole].view(n, n_groups, _ROW_GROUP)
    maxima, chosen = torch.topk(grouped.amax(dim=2), want, dim=1, sorted=False)
    spread = chosen.unsqueeze(2).expand(n, want, _ROW_GROUP)
    values = torch.gather(grouped, 1, spread).reshape(n, want * _ROW_GROUP)
    within = torch.arange(_ROW_GROUP, device=scores.device)
    ids = (chosen.unsqueeze(2) * _ROW_GROUP + within).reshape(n, want * _ROW_GROUP)
    if whole < width:
        tail = torch.arange(whole, width, device=scores.device).expand(n, width - whole)
        values = torch.cat([values, scores[:, whole:]], dim=1)
        ids = torch.cat([ids, tail], dim=1)
    return values, ids, maxima.amin(dim=1)


def _column_candidates(
    torch: Any, block: torch.Tensor, kept: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return (values, row ids, floor) per column of `block`, laid out one column per row.

    The column counterpart of `_row_candidates`, with groups of `_TOPK_COLUMN_GROUP` block rows.
    Maxima over row groups are element-wise maxima of whole rows (fast, contiguous), and the
    candidates are gathered straight into a column-major layout for the second `torch.topk`.
    """
    height, width = block.shape
    n_groups, want = height // _TOPK_COLUMN_GROUP, kept + 1
    if n_groups <= want:
        ids = torch.arange(height, device=block.device).expand(width, height)
        return block.T.contiguous(), ids, None
    whole = n_groups * _TOPK_COLUMN_GROUP
    maxima = block[:whole].view(n_groups, _TOPK_COLUMN_GROUP, width).amax(dim=1)
    floor, chosen = torch.topk(maxima.T.contiguous(), want, dim=1, sorted=False)
    within = torch.arange(_TOPK_COLUMN_GROUP, device=block.device)
    ids = (chosen.unsqueeze(2) * _TOPK_COLUMN_GROUP + within).reshape(
        width, want * _TOPK_COLUMN_GROUP
    )
    columns = torch.arange(width, device=block.device).unsqueeze(1)
    values = torch.take(block, ids * width + columns)
    if whole < height:
        tail = torch.arange(whole, height, device=block.device).expand(width, height - whole)
        values = torch.cat([values, block[whole:].T], dim=1)
        ids = torch.cat([ids, tail], dim=1)
    return values, ids, floor.amin(dim=1)


def _finish(
    torch: Any, values: torch.Tensor, ids: torch.Tensor, kept: int, floor: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (keys of the top `kept` per row, best first; rows whose result is unsure).

    Keeps `kept + 1` candidates with `torch.topk`. The result is exact when the k-th score is
    above both the first score dropped here and the floor of everything dropped before;
    otherwise a tie may continue outside the candidates and the row is flagged for `topk_rows`.
    Scores are finite (see `_plain_embeddings`), so NaN needs no check here.
    """
    n, width = values.shape
    size = min(kept + 1, width)
    top, order = torch.topk(values, size, dim=1, sorted=True)
    kth = top[:, kept - 1]
    unsure = torch.zeros(n, dtype=torch.bool, device=values.device)
    if size < width:
        unsure |= kth <= top[:, size - 1]
    if floor is not None:
        unsure |= kth <= floor
    keys = _encode(torch, top, torch.gather(ids, 1, order))
    return torch.topk(keys, kept, dim=1, sorted=True).values, unsure


def _encode(torch: Any, scores: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Return int64 keys whose descending order is score descending, then id ascending.

    The high 32 bits hold the float32 score mapped to an order-preserving int32, the low 32
    bits `2**32 - 1 - id`, so keys of distinct ids never tie. -0.0 and +0.0 share a key.
    """
    bits = (scores + 0.0).view(torch.int32)  # adding +0.0 turns -0.0 into +0.0
    # As int32, a negative float's magnitude bits count the wrong way: flip them.
    ordered = bits ^ ((bits >> 31) & 0x7FFF_FFFF)
    return ordered.to(torch.int64) * (1 << 32) + (_LOW_32 - ids)


def _decode(torch: Any, keys: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 ids, float32 scores) as numpy arrays from keys made by `_encode`."""
    high = torch.div(keys, 1 << 32, rounding_mode="floor")
    ids = _LOW_32 - (keys - high * (1 << 32))
    ordered = high.to(torch.int32)
    bits = ordered ^ ((ordered >> 31) & 0x7FFF_FFFF)  # the mapping is its own inverse
    return ids.cpu().numpy().astype(np.int64, copy=False), bits.view(torch.float32).cpu().numpy()
