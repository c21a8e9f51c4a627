"""One direction's positives and gains, prepared once for the metrics of `mitl.metrics`.

`prepare` turns {query: positive targets} (and optional graded gains) into a `Truth`: the
queries with at least one positive, R per query, and (query, target) keys that the ranked
targets are looked up in (`mitl.metric_hits`). A `MetricError` is a value the rankings cannot
determine. Pure Python and numpy.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Rankings = Mapping[int, Sequence[int]]
Positives = Mapping[int, Collection[int]]
Gains = Mapping[int, Mapping[int, float]]  # query -> target -> graded relevance

# Ranked ids become target codes through a dense table when the ids are small (COCO ids
# are below a million), else through a binary search; (query, code) pairs are then looked
# up in a bit set of the positives when it is small, else by binary search in sorted keys.
DENSE_TABLE_MAX_ID = 1 << 22  # int32 entries: 16 MiB at most
BITSET_MAX_BYTES = 64 << 20


class MetricError(ValueError):
    """Rankings from which a metric cannot be computed (missing, too short, repeated)."""


@dataclass(frozen=True, eq=False)
class Truth:
    """The positives (and gains) of one direction, prepared once for any number of rankings.

    Build it with `prepare`. Row i of every per-query array is `queries[i]`.
    """

    queries: list[int]  # queries with at least one positive, in the given order
    counts: np.ndarray  # R per query (int64)
    targets: np.ndarray  # sorted unique targets that are positive or have a gain
    # A target's code is 1 + its index in `targets`; 0 stands for every other id, so a
    # (row, target) pair is the key row * stride + code with stride = len(targets) + 1.
    stride: int
    code_table: np.ndarray | None  # at id + 1: the code of id (0 at both ends and gaps)
    positive_keys: np.ndarray  # sorted keys of the positives
    positive_bits: np.ndarray | None  # bit `key` is set for a positive (little-endian)
    gain_keys: np.ndarray  # sorted keys of the pairs with a gain > 0
    gain_values: np.ndarray  # gain of each of `gain_keys`
    ideal_rows: np.ndarray  # gains of each query, best first: row of each
    ideal_ranks: np.ndarray  # 0-based rank within its row
    ideal_gains: np.ndarray
    graded: bool  # gains other than 1 per positive were given
    ideal_dcg: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # K -> IDCG@K


def prepare(positives: Positives, gains: Gains | None = None) -> Truth:
    """Prepare one direction's positives and optional graded gains for the metric functions.

    `gains[q][t]` is the relevance of target t for query q (finite, >= 0); a positive
    without a gain counts 1. Queries without positives are left out.
    """
    queries = [q for q, targets in positives.items() if len(targets)]
    listed = [positives[q] for q in queries]
    lengths = np.fromiter(map(len, listed), dtype=np.int64, count=len(listed))
    pos_rows = np.repeat(np.arange(len(queries), dtype=np.int64), lengths)
    pos_targets = flatten_ids(listed, None)
    graded_rows, graded_targets, graded_values = _graded_pairs(queries, gains)
    targets = _sorted_unique(np.concatenate([pos_targets, graded_targets]))
    stride = len(targets) + 1
    code_table = _code_table(targets)
    # A target listed twice for a query is one positive (a set of them, as R counts them).
    positive_keys = _sorted_unique(
        pos_rows * stride + _target_codes(targets, code_table, pos_targets)
    )
    counts = np.bincount(positive_keys // stride, minlength=len(queries))
    # Gains: the graded pairs, then 1 for each positive without one (np.unique keeps the
    # first of equal keys); pairs that gain nothing are dropped.
    graded_keys = graded_rows * stride + _target_codes(targets, code_table, graded_targets)
    if len(graded_keys):
        all_keys = np.concatenate([graded_keys, positive_keys])
        all_values = np.concatenate([graded_values, np.ones(len(positive_keys))])
        gain_keys, first = np.unique(all_keys, return_index=True)
        gain_values = all_values[first]
    else:
        gain_keys, gain_values = positive_keys, np.ones(len(positive_keys))
    gain_keys, gain_values = gain_keys[gain_values > 0], gain_values[gain_values > 0]
    gain_rows = gain_keys // stride
    ideal = np.lexsort((-gain_values, gain_rows))
    ideal_rows = gain_rows[ideal]
    row_starts = np.searchsorted(ideal_rows, np.arange(len(queries)))
    return Truth(
        queries=queries,
        counts=counts,
        targets=targets,
        stride=stride,
        code_table=code_table,
        positive_keys=positive_keys,
        positive_bits=_bit_set(positive_keys, len(queries) * stride),
        gain_keys=gain_keys,
        gain_values=gain_values,
        ideal_rows=ideal_rows,
        ideal_ranks=np.arange(len(ideal)) - row_starts[ideal_rows],
        ideal_gains=gain_values[ideal],
        graded=gains is not None,
    )


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Return the distinct values, ascending (np.unique hashes first: 20 times slower here)."""
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _target_codes(targets: np.ndarray, table: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
    """Return 1 + the index in `targets` of each id, all of which are in it."""
    if table is not None:
        return table[ids + 1].astype(np.int64)
    return np.searchsorted(targets, ids) + 1


def _graded_pairs(
    queries: list[int], gains: Gains | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (row, target, gain) of every graded pair of the given queries."""
    if gains is None:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0, dtype=np.float64)
    rows: list[int] = []
    targets: list[int] = []
    values: list[float] = []
    for row, query in enumerate(queries):
        for target, gain in gains.get(query, {}).items():
            if not (math.isfinite(gain) and gain >= 0):
                raise MetricError(f"the gain of query {query}, target {target} is {gain!r}")
            rows.append(row)
            targets.append(target)
            values.append(float(gain))
    return (
        np.array(rows, dtype=np.int64),
        np.array(targets, dtype=np.int64),
        np.array(values, dtype=np.float64),
    )


def _code_table(targets: np.ndarray) -> np.ndarray | None:
    if not len(targets) or targets[0] < 0 or targets[-1] >= DENSE_TABLE_MAX_ID:
        return None
    # Shifted by one, with a 0 at each end: clipping an id outside the table lands on a 0.
    # The narrowest type that holds every code: the table is read at random, so its size
    # decides how much of it stays in the cache.
    dtype = np.int16 if len(targets) < np.iinfo(np.int16).max else np.int32
    table = np.zeros(int(targets[-1]) + 3, dtype=dtype)
    table[targets + 1] = np.arange(1, len(targets) + 1)
    return table


def _bit_set(keys: np.ndarray, n_keys: int) -> np.ndarray | None:
    if (n_keys + 7) // 8 > BITSET_MAX_BYTES:
        return None
    bits = np.zeros((n_keys + 7) // 8, dtype=np.uint8)
    np.bitwise_or.at(bits, keys >> 3, (1 << (keys & 7)).astype(np.uint8))
    return bits


def flatten_ids(rows: Sequence[Iterable[int]], take: list[int] | None) -> np.ndarray:
    """Return the ids of every row (its first `take[i]` when given) as one int64 array."""
    flat: list[int] = []
    extend = flat.extend  # any sequence: lists, tuples, numpy arrays
    if take is None:
        for row in rows:
            extend(row)
    else:
        for row, n in zip(rows, take, strict=True):
            extend(row[:n])
    try:
        # struct converts a list of Python ints about twice as fast as numpy or array do.
        return np.frombuffer(struct.pack(f"{len(flat)}q", *flat), dtype=np.int64)
    except struct.error as exc:
        raise MetricError(f"ids must be integers of at most 64 bits ({exc})") from None
