"""Rank torch-computed score blocks exactly on the CPU, from bounds on each k-th score.

The numpy work on a block is split into slices of rows ranked in threads (`keys.in_parallel`),
one per torch thread, so ranking uses the cores the product uses. Pure Python: no Django
import; torch comes with the `TorchEngine` it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .engines import TorchEngine
from .keys import (
    entry_keys,
    in_parallel,
    keys_top,
    scores_of_keys,
    sparse_flatnonzero,
    top_keys,
)
from .plan import Plan
from .topk import TopK, topk_rows

if TYPE_CHECKING:
    import torch

# Scores are ranked from group maxima: a row is cut into groups of this many columns, a block
# column into groups of this many rows. A maximum per group is one cheap streaming pass, and the
# groups with the largest maxima bound the k-th score (see `ThresholdEngine`).
_ROW_GROUP = 32
_COLUMN_GROUP = 16
# Slices of rows a block's numpy work is split into; None: one per torch thread.
_PARTS: int | None = None
# Caption columns are compared with their bounds this many scores at a time (1 MiB of mask).
_MASK_ENTRIES = 1 << 20


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
        # Running top of each caption query as keys from `entry_keys`, best first.
        self.keys = np.empty((len(plan.caption_queries), 0), dtype=np.uint64)
        self.parts = _PARTS or max(1, self.torch.get_num_threads())

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
        grouped = scores[:, : groups * _ROW_GROUP].reshape(n, groups, _ROW_GROUP)
        # torch reduces on all cores; numpy's max along a short last axis is slow.
        maxima = self.torch.from_numpy(grouped).amax(dim=2).numpy()
        top = np.empty((n, kept), dtype=np.uint64)

        def rank(start: int, stop: int) -> None:
            top[start:stop] = _rows_top(scores[start:stop], maxima[start:stop], kept)

        in_parallel(rank, n, self.parts)
        return keys_top(top)

    def add_columns(self, block: np.ndarray, rows: np.ndarray, kept: int) -> None:
        """Merge the block's scores into the running top-`kept` image rows per caption query."""
        query_columns = self.plan.query_columns
        part = block if query_columns is None else block[:, query_columns]
        height, width = part.shape
        held = self.keys.shape[1]
        # Earlier blocks hold lower rows, so a score equal to the k-th so far loses its tie;
        # in the first block, every score at or above a lower bound of the k-th may count.
        strict = held == kept
        bound = (
            scores_of_keys(self.keys[:, -1] >> np.uint64(32))
            if strict
            else _column_floor(part, kept, self.parts)
        )
        # The comparison goes to a mask of a few rows at a time, small enough to stay in the
        # cache while its set entries are found.
        step = max(1, _MASK_ENTRIES // max(width, 1))

        def survivors(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            mask = np.empty((min(step, stop - start), width), dtype=bool)
            columns, keys = [], []
            for first in range(start, stop, step):
                scores = part[first : min(first + step, stop)]
                found = mask[: len(scores)]
                if bound is None:
                    found.fill(True)
                else:
                    (np.greater if strict else np.greater_equal)(scores, bound, out=found)
                at = sparse_flatnonzero(found.reshape(-1))
                block_rows = at // width
                columns.append(at - block_rows * width)
                keys.append(entry_keys(scores.reshape(-1)[at], rows[first + block_rows]))
            return np.concatenate(columns), np.concatenate(keys)

        found = in_parallel(survivors, height, self.parts)
        self.keys = top_keys(
            np.concatenate([np.repeat(np.arange(width), held), *(c for c, _ in found)]),
            np.concatenate([self.keys.reshape(-1), *(k for _, k in found)]),
            width,
            min(kept, held + height),
        )

    def columns_top(self) -> TopK:
        """Return the running top images per caption query."""
        return keys_top(self.keys)


def _rows_top(scores: np.ndarray, maxima: np.ndarray, kept: int) -> np.ndarray:
    """Return the best `kept` keys of each row of `scores`, given its group maxima."""
    n, width = scores.shape
    groups = maxima.shape[1]
    whole = groups * _ROW_GROUP
    grouped = scores[:, :whole].reshape(n, groups, _ROW_GROUP)
    floor = np.partition(maxima, groups - kept, axis=1)[:, groups - kept]
    pair_rows, pair_groups = np.divmod(np.flatnonzero(maxima >= floor[:, None]), groups)
    values = grouped[pair_rows, pair_groups]
    # Only the scores that reach the floor (about k of the pairs' 32 k) are indexed.
    pair, lane = np.nonzero(values >= floor[pair_rows, None])
    segments = [pair_rows[pair]]
    keys = [entry_keys(values[pair, lane], pair_groups[pair] * _ROW_GROUP + lane)]
    if whole < width:  # the columns after the last whole group are checked one by one
        tail = scores[:, whole:]
        tail_rows, tail_columns = np.divmod(np.flatnonzero(tail >= floor[:, None]), width - whole)
        segments.append(tail_rows)
        keys.append(entry_keys(tail[tail_rows, tail_columns], tail_columns + whole))
    return top_keys(np.concatenate(segments), np.concatenate(keys), n, kept)


def _column_floor(part: np.ndarray, kept: int, parts: int) -> np.ndarray | None:
    """Return a lower bound of each column's `kept`-th score, or None when too few rows."""
    import torch  # loaded already by the engine; not at module level, as it takes seconds

    height, width = part.shape
    groups = height // _COLUMN_GROUP
    if groups < kept:
        return None
    # Along the first axis the max is element-wise over whole rows: vectorised, no copy;
    # torch's runs on every core.
    grouped = part[: groups * _COLUMN_GROUP].reshape(groups, _COLUMN_GROUP, width)
    maxima = torch.from_numpy(grouped).amax(dim=1).numpy()
    floor = np.empty(width, dtype=maxima.dtype)

    def select(start: int, stop: int) -> None:
        floor[start:stop] = np.partition(maxima[:, start:stop], groups - kept, axis=0)[
            groups - kept
        ]

    in_parallel(select, width, parts)
    return floor
