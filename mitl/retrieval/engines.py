"""How `retrieve_both` scores blocks: the engine interface, numpy's and torch's scoring.

`NumpyEngine` asks `Annotator.similarity` and ranks with `topk_rows`. For an
`EmbeddingAnnotator` that keeps the plain dot product (`plain_embeddings`), `TorchEngine`
computes the blocks itself; its subclasses rank them (`threshold`, `torch_topk`).
Pure Python: no Django import; torch is imported only when a torch engine is made.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mitl.annotators.base import Annotator, EmbeddingAnnotator, as_rows

from .plan import Plan
from .topk import TopK, topk_rows

if TYPE_CHECKING:
    import torch

# Dot products stay far from float32 overflow (3.4e38) below this bound, so scores are finite.
_SAFE_SCORE = 1e38


class Engine(Protocol):
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


def plain_embeddings(annotator: Annotator) -> tuple[np.ndarray, np.ndarray] | None:
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


class NumpyEngine:
    """Score blocks with `Annotator.similarity` and rank them with `topk_rows`."""

    def __init__(self, annotator: Annotator, plan: Plan) -> None:
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


class TorchEngine:
    """Compute score blocks as one torch matrix product each, into a reused buffer."""

    def __init__(
        self,
        images: np.ndarray,
        captions: np.ndarray,
        plan: Plan,
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
