"""Where the positives are in each ranking: the shared first step of every metric.

Speed (benchmarks/bench_metrics.py): only the targets a metric can look at, the first
max(K, R) of each ranking, are copied into one flat int64 array; ids become target codes
through a dense table and (query, code) pairs are looked up in a bit set of the positives
(binary searches stand in when ids or the bit set would be too large); every metric is
then a few array operations on the running count of hits.

A ranking that lists a positive twice is refused here; `refuse_short` refuses rankings too
short for a metric. Pure Python and numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mitl.metric_truth import MetricError, Rankings, Truth, flatten_ids


@dataclass(frozen=True, eq=False)
class RankedHits:
    """The first targets of each ranking, flat, and where the positives among them are."""

    truth: Truth
    length: np.ndarray  # per query: targets its ranking holds (after any restriction)
    take: np.ndarray  # per query: how many of them are in the flat arrays
    starts: np.ndarray  # per query: where its targets begin in the flat arrays
    keys: np.ndarray  # flat: (row, target code) key of each ranked target
    cumulative: np.ndarray  # [0, cumsum(is positive)]: positives before flat index i
    hit_rows: np.ndarray  # per positive found, in flat order: its query row
    hit_ranks: np.ndarray  # ... and its 0-based rank in that query's ranking

    def hits_within(self, depth: np.ndarray) -> np.ndarray:
        """Return each query's number of positives among its first `depth` targets."""
        return self.cumulative[self.starts + depth] - self.cumulative[self.starts]

    def found_within(self, k: int) -> np.ndarray:
        """Return whether each query has a positive among its first k targets."""
        return self.hits_within(np.minimum(self.take, k)) > 0


def ranked_hits(
    truth: Truth,
    rankings: Rankings,
    depth: np.ndarray | int | None,
    allowed: np.ndarray | None = None,
) -> RankedHits:
    """Flatten the first `depth` targets of each query's ranking (all when None).

    With `allowed` (sorted ids), each ranking is first restricted to those targets.
    """
    rows_in = _rows_of(truth.queries, rankings)
    length = np.fromiter(map(len, rows_in), dtype=np.int64, count=len(rows_in))
    if allowed is None and depth is not None:
        take = np.minimum(length, depth)
        flat = flatten_ids(rows_in, take.tolist())
    else:
        flat = flatten_ids(rows_in, None)
        take = length
        if allowed is not None:
            kept = _is_in(flat, allowed)
            owner = np.repeat(np.arange(len(rows_in)), length)
            take = length = np.bincount(owner[kept], minlength=len(rows_in))
            flat = flat[kept]
    starts = np.zeros(len(take), dtype=np.int64)
    np.cumsum(take[:-1], out=starts[1:])
    row_keys = np.arange(len(take), dtype=np.int64) * truth.stride
    keys = np.add(np.repeat(row_keys, take), _codes(truth, flat), dtype=np.int64)
    if truth.positive_bits is not None:
        hits = ((truth.positive_bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1).view(bool)
    else:
        hits = _is_in(keys, truth.positive_keys)
    hit_at = np.flatnonzero(hits)
    hit_keys = keys[hit_at]
    _refuse_repeated_positives(truth, hit_keys)
    hit_rows = hit_keys // truth.stride
    cumulative = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum(hits, out=cumulative[1:])
    hit_ranks = hit_at - starts[hit_rows]
    return RankedHits(truth, length, take, starts, keys, cumulative, hit_rows, hit_ranks)


def _rows_of(queries: list[int], rankings: Rankings) -> list[Sequence[int]]:
    try:
        return [rankings[q] for q in queries]
    except KeyError:
        missing = [q for q in queries if q not in rankings]
        raise MetricError(f"{len(missing)} queries have no ranking (first: {missing[0]})") from None


def _codes(truth: Truth, ids: np.ndarray) -> np.ndarray:
    """Return the code of each id: 1 + its index in `truth.targets`, 0 when absent."""
    if truth.code_table is not None:
        # An id past either end (or so large that id + 1 wraps) is clipped onto a 0.
        return np.take(truth.code_table, ids + 1, mode="clip")
    at = np.minimum(np.searchsorted(truth.targets, ids), max(len(truth.targets) - 1, 0))
    if not len(truth.targets):
        return np.zeros(len(ids), dtype=np.int64)
    return np.where(truth.targets[at] == ids, at + 1, 0)


def _is_in(values: np.ndarray, sorted_pool: np.ndarray) -> np.ndarray:
    if not len(sorted_pool):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_pool, values), len(sorted_pool) - 1)
    return sorted_pool[at] == values


def _refuse_repeated_positives(truth: Truth, keys: np.ndarray) -> None:
    # Sorting int32 is about twice as fast; keys fit whenever rows * stride does.
    narrow = len(truth.queries) * truth.stride < np.iinfo(np.int32).max
    ordered = np.sort(keys.astype(np.int32) if narrow else keys)
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(repeated):
        row, code = divmod(int(ordered[repeated[0]]), truth.stride)
        raise MetricError(
            f"the ranking of query {truth.queries[row]} lists positive "
            f"{int(truth.targets[code - 1])} twice"
        )


def refuse_short(
    truth: Truth,
    short: np.ndarray,
    length: np.ndarray,
    need: np.ndarray | int,
    metric: str,
    note: str = "",
) -> None:
    """Raise when any ranking is too short for a metric; name the first one."""
    if short.any():
        bad = np.flatnonzero(short)
        row = int(bad[0])
        needed = int(need[row]) if isinstance(need, np.ndarray) else int(need)
        raise MetricError(
            f"{len(bad)} rankings are too short for {metric} (first: query "
            f"{truth.queries[row]} ranks {int(length[row])} targets{note}; {metric} needs "
            f"{needed})"
        )


def check_ks(ks: Iterable[int]) -> list[int]:
    """Return the distinct cut-offs in order; raise ValueError for one below 1."""
    ks = sorted(set(ks))
    if ks and ks[0] < 1:
        raise ValueError(f"k must be at least 1 (got {ks[0]})")
    return ks


def query_mean(values: np.ndarray) -> float:
    """Return the mean over the queries, or NaN when no query counts."""
    return float(values.sum() / len(values)) if len(values) else math.nan
