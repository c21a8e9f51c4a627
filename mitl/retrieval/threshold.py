"""Rank torch-computed score blocks exactly on the CPU, from bounds on each k-th score.

Pure Python: no Django import; torch comes with the `TorchEngine` it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .engines import TorchEngine
from .plan import Plan
from .topk import LOW_32, TopK, topk_rows

if TYPE_CHECKING:
    import torch

# Scores are ranked from group maxima: a row is cut into groups of this many columns, a block
# column into groups of this many rows. A maximum per group is one cheap streaming pass, and the
# groups with the largest maxima bound the k-th score (see `ThresholdEngine`).
_ROW_GROUP = 32
_COLUMN_GROUP = 16


class ThresholdEngine(TorchEngine):
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
        plan: Plan,
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
    return TopK(indices=(keys & np.uint64(LOW_32)).astype(np.int64), scores=_scores_of_keys(high))


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
