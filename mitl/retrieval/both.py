"""Top-k in both directions from one pass over blocks of the image x caption scores.

For an `EmbeddingAnnotator` that keeps the plain dot product the blocks are computed with
torch (CUDA when available) and ranked exactly: on the CPU from bounds on each k-th score
(`ThresholdEngine`), on CUDA with `torch.topk` (`TopkEngine`); any other annotator is
asked for its `similarity` (`NumpyEngine`). Pure Python: no Django import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mitl.annotators.base import Annotator

from .engines import Engine, NumpyEngine, plain_embeddings
from .plan import BLOCK_ENTRIES, Plan, check_range, query_plan
from .threshold import ThresholdEngine
from .topk import LOW_32, Progress, TopK, as_queries, check_k
from .torch_topk import TopkEngine

# The torch.topk selection serves CUDA; on the CPU its cost per row (~10 us) loses to numpy's
# vectorised partition and sort. Tests switch it on to run its logic without a GPU.
_TOPK_ON_CPU = False


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
    check_k(k)
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    for count, what in ((n_images, "images"), (n_captions, "captions")):
        if count < 0:
            raise ValueError(f"the number of {what} cannot be negative, got {count}")
        if count >= LOW_32:  # targets share 64-bit sort keys with their scores
            raise ValueError(f"at most 2**32 - 2 {what} can be ranked, got {count}")
    images = as_queries(query_image_rows, "query image")
    captions = as_queries(query_caption_rows, "query caption")
    # Caption queries rank the scanned images, so an image query outside them would be missed.
    check_range(images, n_images, "query image")
    check_range(captions, n_captions, "query caption")
    plan = query_plan(images, captions, n_images, n_captions)
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
        engine = engine_for(annotator, plan, device, kept_t2i if do_columns else 0)
        per_block = chunk_size or max(1, BLOCK_ENTRIES // max(1, len(plan.columns)))
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
    engine: Engine, block: Any, rows: np.ndarray, image_queries: np.ndarray, out: TopK
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


def engine_for(annotator: Annotator, plan: Plan, device: str | None, kept_columns: int) -> Engine:
    """Return an engine that computes dot products itself when it may, else the numpy one."""
    vectors = plain_embeddings(annotator)
    if vectors is None:
        return NumpyEngine(annotator, plan)
    import torch  # here, not at module level: importing torch takes seconds

    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if chosen.type == "cpu" and not _TOPK_ON_CPU:
        return ThresholdEngine(*vectors, plan, chosen, kept_columns)
    return TopkEngine(*vectors, plan, chosen, kept_columns)
