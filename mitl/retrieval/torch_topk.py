"""Rank score blocks exactly on the device with `torch.topk` (the CUDA path).

Pure Python: no Django import; torch comes with the `TorchEngine` it extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .engines import TorchEngine
from .plan import Plan
from .topk import LOW_32, TopK, topk_rows

if TYPE_CHECKING:
    import torch

# As in `threshold`, the k-th score is bounded from group maxima: rows are cut into groups of
# this many columns; this path searches the best groups' scores, so its column groups (of
# block rows) are smaller.
_ROW_GROUP = 32
_COLUMN_GROUP = 4


class TopkEngine(TorchEngine):
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
        plan: Plan,
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

    The column counterpart of `_row_candidates`, with groups of `_COLUMN_GROUP` block rows.
    Maxima over row groups are element-wise maxima of whole rows (fast, contiguous), and the
    candidates are gathered straight into a column-major layout for the second `torch.topk`.
    """
    height, width = block.shape
    n_groups, want = height // _COLUMN_GROUP, kept + 1
    if n_groups <= want:
        ids = torch.arange(height, device=block.device).expand(width, height)
        return block.T.contiguous(), ids, None
    whole = n_groups * _COLUMN_GROUP
    maxima = block[:whole].view(n_groups, _COLUMN_GROUP, width).amax(dim=1)
    floor, chosen = torch.topk(maxima.T.contiguous(), want, dim=1, sorted=False)
    within = torch.arange(_COLUMN_GROUP, device=block.device)
    ids = (chosen.unsqueeze(2) * _COLUMN_GROUP + within).reshape(width, want * _COLUMN_GROUP)
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
    Scores are finite (see `plain_embeddings`), so NaN needs no check here.
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
    return ordered.to(torch.int64) * (1 << 32) + (LOW_32 - ids)


def _decode(torch: Any, keys: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 ids, float32 scores) as numpy arrays from keys made by `_encode`."""
    high = torch.div(keys, 1 << 32, rounding_mode="floor")
    ids = LOW_32 - (keys - high * (1 << 32))
    ordered = high.to(torch.int32)
    bits = ordered ^ ((ordered >> 31) & 0x7FFF_FFFF)  # the mapping is its own inverse
    return ids.cpu().numpy().astype(np.int64, copy=False), bits.view(torch.float32).cpu().numpy()
