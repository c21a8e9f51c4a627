"""Sort keys of (score, target) pairs, the best of each segment, and work split over threads.

`entry_keys` packs a float32 score and a target row into one uint64 whose ascending order is
score descending, then target ascending, so ranking is sorting and ties never depend on the
sort; `top_keys` keeps the best keys of each segment (a query). `in_parallel` runs numpy work
on slices of a block in threads (numpy releases the GIL for its loops), as torch runs the
product on every core. Pure Python and numpy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import TypeVar

import numpy as np

from .topk import LOW_32, TopK

T = TypeVar("T")
_POOL: ThreadPoolExecutor | None = None
# Segment, score and target are packed into one sort key when their bits fit in this many
# (tests lower it to run the dense ranking on small data).
_PACK_BITS = 64


# Per byte value: how many bits are set, and where (lowest first, padded with 0).
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
_BIT_COUNTS = _BITS.sum(axis=1, dtype=np.int64)
_BIT_PLACES = np.argsort(1 - _BITS, axis=1, kind="stable")


def sparse_flatnonzero(mask: np.ndarray) -> np.ndarray:
    """Return `np.flatnonzero(mask)` of a 1-D bool array, faster when few are set.

    numpy's nonzero looks at every byte; packed 8 to a byte, the mask has 8 times fewer to
    look at, and only the bytes with a bit set are unpacked (about 40% less time at the 1%
    of scores that pass a column's bound).
    """
    if np.count_nonzero(mask) * 16 > len(mask):
        return np.flatnonzero(mask)
    packed = np.packbits(mask, bitorder="little")
    at = np.flatnonzero(packed != 0)
    values = packed[at]
    counts = _BIT_COUNTS[values]
    owner = np.repeat(np.arange(len(at)), counts)
    lane = np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner]
    return at[owner] * 8 + _BIT_PLACES[values[owner], lane]


def in_parallel(work: Callable[[int, int], T], n: int, parts: int) -> list[T]:
    """Return [work(start, stop)] over `parts` consecutive slices of range(n), in threads."""
    bounds = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(int).tolist()
    spans = [(a, b) for a, b in pairwise(bounds) if b > a]
    if len(spans) <= 1:
        return [work(a, b) for a, b in spans]
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(os.cpu_count() or 2, thread_name_prefix="mitl-rank")
    return list(_POOL.map(lambda span: work(*span), spans))


def entry_keys(scores: np.ndarray, targets: np.ndarray) -> np.ndarray:
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


def keys_top(keys: np.ndarray) -> TopK:
    """Return the targets and float32 scores of keys made by `entry_keys`."""
    high = (keys >> np.uint64(32)).astype(np.uint32)
    return TopK(indices=(keys & np.uint64(LOW_32)).astype(np.int64), scores=scores_of_keys(high))


def scores_of_keys(high: np.ndarray) -> np.ndarray:
    """Return the float32 scores of the high halves of `entry_keys` keys."""
    ordered = ~((high.astype(np.uint32) ^ np.uint32(0x8000_0000)).view(np.int32))
    return (ordered ^ ((ordered >> 31) & 0x7FFF_FFFF)).view(np.float32)


def top_keys(segments: np.ndarray, keys: np.ndarray, n_segments: int, kept: int) -> np.ndarray:
    """Return the `kept` smallest keys of each of `n_segments` segments, ascending.

    Entries are (segment, key) pairs in any order, every segment holding at least `kept` of
    them. When the segment, the score and the target fit in 64 bits together (COCO 5K: 15 +
    32 + 13), one sort of those packed numbers ranks every segment at once. Otherwise
    segments become rows of a dense matrix that numpy partitions and sorts row-wise (its
    vectorised sort shines on short rows); crowded segments, e.g. a constant column whose
    scores all tie, would make that matrix huge and are ranked by one lexsort instead.
    """
    counts = np.bincount(segments, minlength=n_segments)
    target_bits = int((keys & np.uint64(LOW_32)).max(initial=0)).bit_length()
    if max(n_segments - 1, 0).bit_length() + 32 + target_bits <= _PACK_BITS:
        return _top_packed(segments, keys, counts, kept, target_bits)
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


def _top_packed(
    segments: np.ndarray, keys: np.ndarray, counts: np.ndarray, kept: int, target_bits: int
) -> np.ndarray:
    """`top_keys` by one sort of (segment, score, target) packed into a uint64 each."""
    shift = np.uint64(target_bits)
    low = np.uint64((1 << target_bits) - 1)
    packed = segments.astype(np.uint64) << np.uint64(32 + target_bits)
    packed |= (keys >> np.uint64(32)) << shift
    packed |= keys & low
    packed.sort()  # segment, then score descending, then target: each segment's best first
    starts = np.cumsum(counts) - counts
    best = packed[starts[:, None] + np.arange(kept)]
    return (((best >> shift) & np.uint64(LOW_32)) << np.uint64(32)) | (best & low)
