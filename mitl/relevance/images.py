"""Image–caption relevance from a caption–caption proxy: an image stands for its captions.

Following Wray et al. (2021, eq. 5) and Messina et al. (2021), the relevance of image i to
caption c is the proxy between c and i's own captions G_i, aggregated over G_i:

- `mean` (default): the mean of proxy(c, g) over g in G_i; this is how CIDEr-D scores a
  candidate against several references (Biten et al.'s N_ij);
- `max`: the largest proxy(c, g), "the image is relevant when one of its captions says the
  same".

c is the candidate and each g a reference (the order matters for CIDEr-D and ROUGE-L). When c
is one of i's own captions it counts as itself in G_i: proxy(c, c) = 1, so under `max` an
image's own captions have relevance 1, and under `mean` they score at least 1 / |G_i|.

Matrices are computed in blocks of queries, with a progress callback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from mitl.relevance.proxies import CaptionProxy

AGGREGATIONS: tuple[str, ...] = ("mean", "max")
BLOCK_PAIRS = 8_000_000  # caption pairs scored per block (bounds the temporaries)

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True, eq=False)
class CaptionCorpus:
    """A dataset's captions with their images; texts are indexed by position."""

    caption_ids: np.ndarray  # int64, one per caption
    caption_images: np.ndarray  # int64 image id of each caption
    texts: Sequence[str]
    image_ids: np.ndarray = field(init=False)  # images in order of first appearance
    image_of: np.ndarray = field(init=False)  # image index of each caption
    by_image: np.ndarray = field(init=False)  # caption indexes grouped by image index
    starts: np.ndarray = field(init=False)  # start of each image's group in by_image

    def __post_init__(self) -> None:
        images, first, inverse = np.unique(
            self.caption_images, return_index=True, return_inverse=True
        )
        order = np.argsort(first, kind="stable")  # first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        object.__setattr__(self, "image_ids", images[order])
        object.__setattr__(self, "image_of", rank[inverse])
        by_image = np.argsort(self.image_of, kind="stable")
        object.__setattr__(self, "by_image", by_image)
        starts = np.searchsorted(self.image_of[by_image], np.arange(len(order)))
        object.__setattr__(self, "starts", starts)

    @classmethod
    def of(
        cls, caption_ids: Sequence[int], caption_images: Sequence[int], texts: Sequence[str]
    ) -> CaptionCorpus:
        return cls(
            np.asarray(caption_ids, dtype=np.int64),
            np.asarray(caption_images, dtype=np.int64),
            list(texts),
        )

    def captions_of(self, image_index: int) -> np.ndarray:
        """Return the caption indexes of one image (by image index)."""
        stop = (
            self.starts[image_index + 1]
            if image_index + 1 < len(self.starts)
            else len(self.by_image)
        )
        return self.by_image[self.starts[image_index] : stop]


def _reduce(scores: np.ndarray, starts: np.ndarray, aggregation: str) -> np.ndarray:
    """Aggregate groups of columns (each starting at `starts`) by mean or max."""
    if aggregation == "max":
        return np.maximum.reduceat(scores, starts, axis=1)
    sizes = np.diff(np.append(starts, scores.shape[1]))
    return np.add.reduceat(scores, starts, axis=1) / sizes


def _check(aggregation: str) -> None:
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}"
        )


def _blocks(
    queries: np.ndarray, block: int, progress: Progress | None
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (offset, queries) block by block, reporting progress after each block."""
    for start in range(0, len(queries), block):
        yield start, np.asarray(queries[start : start + block])
        if progress:
            progress(min(start + block, len(queries)), len(queries))


def caption_to_images(
    proxy: CaptionProxy,
    corpus: CaptionCorpus,
    queries: np.ndarray,
    *,
    aggregation: str = "mean",
    progress: Progress | None = None,
) -> np.ndarray:
    """Return the relevance of every image (columns, `corpus.image_ids` order) to each query
    caption (rows, caption indexes)."""
    _check(aggregation)
    cols = corpus.by_image
    block = max(1, BLOCK_PAIRS // max(len(cols), 1))
    out = np.zeros((len(queries), len(corpus.image_ids)), dtype=np.float32)
    column_of = np.empty(len(cols), dtype=np.int64)
    column_of[cols] = np.arange(len(cols))  # where each caption sits among the columns
    for start, rows in _blocks(queries, block, progress):
        scores = proxy.matrix(rows, cols)
        scores[np.arange(len(rows)), column_of[rows]] = 1.0  # a caption counts as itself
        out[start : start + len(rows)] = _reduce(scores, corpus.starts, aggregation)
    return out


def image_to_captions(
    proxy: CaptionProxy,
    corpus: CaptionCorpus,
    queries: np.ndarray,
    *,
    aggregation: str = "mean",
    progress: Progress | None = None,
) -> np.ndarray:
    """Return the relevance of every caption (columns, corpus order) to each query image
    (rows, image indexes)."""
    _check(aggregation)
    everything = np.arange(len(corpus.texts))
    per_image = max(1, int(np.diff(np.append(corpus.starts, len(corpus.by_image))).max(initial=1)))
    block = max(1, BLOCK_PAIRS // max(len(everything) * per_image, 1))
    out = np.zeros((len(queries), len(everything)), dtype=np.float32)
    for start, images in _blocks(queries, block, progress):
        groups = [corpus.captions_of(int(i)) for i in images]
        refs = np.concatenate(groups)
        starts = np.cumsum([0, *map(len, groups)])[:-1]
        scores = proxy.matrix(everything, refs)  # candidates: every caption
        scores[refs, np.arange(len(refs))] = 1.0  # a caption counts as itself
        out[start : start + len(images)] = _reduce(scores, starts, aggregation).T
    return out


def pair_relevance(
    proxy: CaptionProxy,
    corpus: CaptionCorpus,
    captions: np.ndarray,
    images: np.ndarray,
    *,
    aggregation: str = "mean",
) -> np.ndarray:
    """Return the relevance of image `images[k]` (index) to caption `captions[k]` (index)."""
    _check(aggregation)
    groups = [corpus.captions_of(int(i)) for i in images]
    sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
    refs = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    cands = np.repeat(np.asarray(captions), sizes)
    scores = proxy.pairs(cands, refs).astype(np.float64)
    scores[cands == refs] = 1.0
    starts = np.cumsum(np.append(0, sizes))[:-1]
    if aggregation == "max":
        return np.maximum.reduceat(scores, starts).astype(np.float32)
    return (np.add.reduceat(scores, starts) / sizes).astype(np.float32)


def caption_image_grid(
    proxy: CaptionProxy, corpus: CaptionCorpus, captions: np.ndarray, images: np.ndarray
) -> dict[str, np.ndarray]:
    """Return per aggregation the relevance of images `images` (columns, indexes) to
    captions `captions` (rows, indexes): one proxy block serves every aggregation."""
    groups = [corpus.captions_of(int(i)) for i in images]
    refs = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    starts = np.cumsum([0, *map(len, groups)])[:-1]
    scores = proxy.matrix(np.asarray(captions), refs)
    rows, cols = np.nonzero(np.asarray(captions)[:, None] == refs[None, :])
    scores[rows, cols] = 1.0  # a caption counts as itself
    return {aggregation: _reduce(scores, starts, aggregation) for aggregation in AGGREGATIONS}
