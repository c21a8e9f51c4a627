"""Accept a map {"<id>": [ids]} in a few passes over all its ids at once, or leave it be.

`id_lists_fast` is the fast path of `mitl.evaluation_inputs`' check of positives and
rankings: it returns the map with integer keys only when that check would accept it
(keys integer ids of at most 64 bits, none twice; values lists of such ids, none twice in
a list; within the given limits), and None otherwise, so that the per-list check finds
and names the fault. It never accepts what the per-list check refuses.

Every id is checked in one `struct.pack` (64-bit integers only: floats, strings, null and
ids past 64 bits are refused) and one sort per list row in numpy, instead of a set and a
min/max per list. Pure Python and numpy.
"""

from __future__ import annotations

import re
import struct
from itertools import chain
from typing import Any

import numpy as np

_ID = re.compile(r"-?[0-9]+")
_ID_MIN, _ID_MAX = -(2**63), 2**63 - 1
_PAD = np.iinfo(np.int64).max  # fills the short rows of a padded (lists x longest) matrix
_INT_ONLY = frozenset({int})


def id_lists_fast(
    data: Any, *, max_length: int | None, max_keys: int | None, json_types: bool
) -> dict[int, list[int]] | None:
    """Return {int id: the same list} when every check passes, else None.

    With `json_types` the data comes from a JSON decoder, so the only values that
    `struct.pack` takes for integers are ints and bools, and only the ids 0 and 1 need a
    second look (a bool packs as one of them); otherwise every id's type is checked.
    """
    if type(data) is not dict or (max_keys is not None and len(data) > max_keys):
        return None
    queries = _query_ids(list(data))
    values = list(data.values())
    if queries is None or (values and set(map(type, values)) != {list}):
        return None
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    if max_length is not None and len(values) and int(lengths.max()) > max_length:
        return None
    if not json_types and not set(map(type, chain.from_iterable(values))) <= _INT_ONLY:
        return None
    try:
        # Packed straight from the lists: a flat list of them first costs as much again.
        packed = struct.pack(f"{int(lengths.sum())}q", *chain.from_iterable(values))
    except struct.error:  # not an integer, or not one of 64 bits
        return None
    ids = np.frombuffer(packed, dtype=np.int64)
    if json_types and _has_bool(ids, values, lengths):
        return None
    if _has_repeat(ids, lengths):
        return None
    return dict(zip(queries, values, strict=True))


def _query_ids(keys: list[Any]) -> list[int] | None:
    """Return the keys as ints when all are id strings of 64 bits, distinct as numbers."""
    if not keys:
        return []
    if set(map(type, keys)) != {str} or not all(map(_ID.fullmatch, keys)):
        return None
    queries = list(map(int, keys))
    if min(queries) < _ID_MIN or max(queries) > _ID_MAX or len(set(queries)) != len(queries):
        return None  # e.g. "1" and "01"
    return queries


def _has_bool(ids: np.ndarray, values: list[list[Any]], lengths: np.ndarray) -> bool:
    """Say whether a list holds a bool (packed as 0 or 1, so only those are looked at)."""
    maybe = np.flatnonzero(ids.view(np.uint64) <= 1)
    if not len(maybe):
        return False
    ends = np.cumsum(lengths)
    rows = np.searchsorted(ends, maybe, side="right")
    places = maybe - (ends[rows] - lengths[rows])
    return any(
        type(values[row][place]) is bool
        for row, place in zip(rows.tolist(), places.tolist(), strict=True)
    )


def _has_repeat(ids: np.ndarray, lengths: np.ndarray) -> bool:
    """Say whether any list (a run of `lengths[i]` consecutive `ids`) holds an id twice."""
    n = len(lengths)
    width = int(lengths.max()) if n else 0
    if width < 2:
        return False
    if n * width <= 2 * len(ids) + 4096 and not (ids == _PAD).any():
        # Rows of a padded matrix, sorted row-wise (numpy's vectorised sort of short rows is
        # fast); the padding is a value no id has, so only real ids can sit side by side.
        if (lengths == width).all():
            rows = ids.reshape(n, width)
        else:
            rows = np.full((n, width), _PAD, dtype=np.int64)
            rows[np.arange(width) < lengths[:, None]] = ids
        rows = np.sort(rows, axis=1)
        same = rows[:, 1:] == rows[:, :-1]
        if width * n != len(ids):
            same &= rows[:, 1:] != _PAD
        return bool(same.any())
    low, high = int(ids.min()), int(ids.max())
    if n * (high - low + 1) < 2**62:
        # Lists of very unequal lengths, ids of a small range: (list, id) as one number, so
        # that one sort puts an id twice in one list side by side.
        keyed = np.sort(np.repeat(np.arange(n) * (high - low + 1), lengths) + (ids - low))
        return bool((keyed[1:] == keyed[:-1]).any())
    # Else one stable sort of every id keeps each id's lists in order, so an id twice in
    # one list shows as two neighbours of the same list.
    order = np.argsort(ids, kind="stable")
    owner = np.repeat(np.arange(n), lengths)[order]
    ordered = ids[order]
    return bool(((ordered[1:] == ordered[:-1]) & (owner[1:] == owner[:-1])).any())
