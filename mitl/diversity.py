"""How differently machine annotators rank the same queries (ECCV Caption, Table A.1).

ECCV Caption (Chun et al., 2022) picks annotators whose rankings differ, and shows it with two
numbers per pair of annotators: Kendall's tau between their rankings of a query, and the mean
rank that annotator B gives to annotator A's top-1 target. The paper compares full rankings;
the platform stores only each annotator's top N (N >= 25) per query, so both numbers are
computed on those top lists, as follows.

- `kendall_tau` is Kendall's tau-b over the union of the two lists. A target missing from a
  list ranks below everything that list holds, and the missing targets tie with each other
  there: that is what the full ranking says about them, short of their unknown order. Pairs
  tied in a list count as neither agreeing nor disagreeing, as tau-b prescribes. Identical
  lists give 1, one list reversed gives -1, and lists with no target in common give a
  negative tau (every cross pair disagrees) rather than no value at all.
- `top1_rank_stats` gives A's top-1 its 1-based rank in B's list, or len(B's list) + 1 when B
  did not keep it ("beyond depth"); the share of such queries is reported next to the mean,
  since the mean is then only a lower bound of the full-ranking value.

Pure Python and numpy (scipy for long lists' tau): no Django import.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, combinations, permutations
from typing import Any

import numpy as np

from mitl.rank_correlation import kendall_tau_b

Ranking = Sequence[int]  # targets, best first
Rankings = Mapping[int, Ranking]  # query -> ranking

TAU_VARIANT = (
    "Kendall tau-b over the union of the two top lists; a target missing from a list ranks "
    "below all of its targets, tied with the other missing ones"
)


def _positions(ranking: Ranking, what: str) -> dict[int, int]:
    """Return {target: 0-based position}, raising ValueError on a repeated target."""
    positions: dict[int, int] = {}
    for position, target in enumerate(ranking):
        if target in positions:
            raise ValueError(f"{what} ranks target {target!r} twice")
        positions[target] = position
    return positions


def kendall_tau(rank_a: Ranking, rank_b: Ranking) -> float:
    """Return Kendall's tau-b between two top lists over their union (see the module doc).

    Returns NaN when tau is undefined: fewer than two targets in the union, or an empty list
    (it ties every pair, so it orders nothing to compare).
    """
    positions_a = _positions(rank_a, "rank_a")
    positions_b = _positions(rank_b, "rank_b")
    union = list(positions_a) + [target for target in positions_b if target not in positions_a]
    # Missing targets share the position just past the end of the list: tied at the bottom.
    a = [positions_a.get(target, len(positions_a)) for target in union]
    b = [positions_b.get(target, len(positions_b)) for target in union]
    tau = kendall_tau_b(a, b)
    return math.nan if tau is None else tau


@dataclass(frozen=True)
class Top1RankStats:
    """Where annotator B ranks annotator A's top-1 target, over the queries both ranked."""

    mean_rank: float  # 1-based; a target beyond B's depth counts as len(B's list) + 1
    queries: int
    beyond_depth: int  # queries where B's list does not hold A's top-1

    @property
    def beyond_depth_share(self) -> float:
        """Return the share of queries where A's top-1 is beyond B's depth (NaN if none)."""
        return self.beyond_depth / self.queries if self.queries else math.nan


def top1_rank_stats(rankings_a: Rankings, rankings_b: Rankings) -> Top1RankStats:
    """Return where B ranks A's top-1, over the queries where both have a non-empty list."""
    ranks: list[int] = []
    beyond = 0
    for query, ranking_a in rankings_a.items():
        ranking_b = rankings_b.get(query)
        if not ranking_a or not ranking_b:
            continue
        if len(set(ranking_b)) != len(ranking_b):  # a repeat: raise, naming it
            _positions(ranking_b, f"ranking B of query {query!r}")
        if ranking_a[0] in ranking_b:
            ranks.append(ranking_b.index(ranking_a[0]) + 1)
        else:
            beyond += 1
            ranks.append(len(ranking_b) + 1)
    mean = sum(ranks) / len(ranks) if ranks else math.nan
    return Top1RankStats(mean_rank=mean, queries=len(ranks), beyond_depth=beyond)


def mean_rank_of_top1(rankings_a: Rankings, rankings_b: Rankings) -> float:
    """Return the mean 1-based rank B gives A's top-1 (beyond B's depth: len + 1; NaN if none)."""
    return top1_rank_stats(rankings_a, rankings_b).mean_rank


def kendall_taus(lists_a: Sequence[Ranking], lists_b: Sequence[Ranking]) -> list[float]:
    """Return `kendall_tau(a, b)` for every pair of lists, equal to it value for value.

    Pairs whose two lists are as long as the longest list and hold no target twice (a
    batch's rankings: every list as deep as the others) are computed together in numpy, a
    chunk of rows at a time; any other pair goes to `kendall_tau`, which also raises for a
    repeated target. The pipeline computes tens of thousands of these per batch.
    """
    if len(lists_a) != len(lists_b):
        raise ValueError(f"{len(lists_a)} lists against {len(lists_b)}")
    taus = [math.nan] * len(lists_a)
    depth = max(map(len, chain(lists_a, lists_b)), default=0)
    regular = [
        row
        for row, (a, b) in enumerate(zip(lists_a, lists_b, strict=True))
        if len(a) == depth and len(b) == depth
    ]
    for start in range(0, len(regular) if depth >= 2 else 0, _TAU_CHUNK):
        rows = regular[start : start + _TAU_CHUNK]
        a, b = _id_matrix(lists_a, rows, depth), _id_matrix(lists_b, rows, depth)
        if a is None or b is None:
            continue  # not all 64-bit integers: one by one, as `kendall_tau` compares them
        chunk = _union_taus(a, b)
        for row, tau in zip(rows, chunk.tolist(), strict=True):
            taus[row] = tau
    for row, tau in enumerate(taus):
        if math.isnan(tau):  # irregular, not integers, a repeat (raises), or undefined
            taus[row] = kendall_tau(lists_a[row], lists_b[row])
    return taus


_TAU_CHUNK = 2048  # rows per numpy pass: (rows x depth x depth) comparisons, a few MiB


def _id_matrix(lists: Sequence[Ranking], rows: list[int], depth: int) -> np.ndarray | None:
    """These lists as a (rows x depth) int64 matrix; None unless every target is an integer
    of 64 bits (a float or a string would compare otherwise in numpy than in a dict)."""
    try:
        packed = struct.pack(f"{len(rows) * depth}q", *chain.from_iterable(lists[r] for r in rows))
    except struct.error:
        return None
    return np.frombuffer(packed, dtype=np.int64).reshape(len(rows), depth)


def _union_taus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """tau-b per row of two (rows x depth) target matrices over each row's union, as
    `kendall_tau` computes it (NaN: a row that holds a target twice, left to it).

    With lists of equal depth d the union's x (positions in a) are 0..d-1, then d for the m
    targets only b holds (tied); its y (positions in b) are distinct but for a's m targets
    that b lacks (tied at d). So the untied pairs are known in closed form, and only the
    signs of y need comparing: within a's targets, and between them and b's own.
    """
    depth = a.shape[1]
    same = a[:, :, None] == b[:, None, :]  # same[r, i, j]: a's i-th is b's j-th
    y_of_a = np.where(same.any(axis=2), same.argmax(axis=2), depth).astype(np.int16)
    b_only = ~same.any(axis=1)  # b's targets missing from a, at y = their position
    first, second = np.triu_indices(depth, k=1)
    # x falls along a's list, so a pair agrees when y falls too: -sign(y_i - y_j).
    within_a = np.sign(y_of_a[:, first] - y_of_a[:, second]).sum(axis=1, dtype=np.int64)
    positions = np.arange(depth, dtype=np.int16)
    to_b_only = np.sign(y_of_a[:, :, None] - positions[None, None, :]) * b_only[:, None, :]
    concordance = -within_a - to_b_only.sum(axis=(1, 2), dtype=np.int64)
    only = b_only.sum(axis=1, dtype=np.int64)
    union = depth + only
    untied_x = depth * (depth - 1) // 2 + depth * only
    untied_y = union * (union - 1) // 2 - only * (only - 1) // 2
    taus = concordance / np.sqrt(untied_x * untied_y)
    repeats = (np.diff(np.sort(a, axis=1), axis=1) == 0).any(axis=1)
    repeats |= (np.diff(np.sort(b, axis=1), axis=1) == 0).any(axis=1)
    taus[repeats] = np.nan
    return taus


def _mean_tau(rankings_a: Rankings, rankings_b: Rankings) -> tuple[float | None, int, int]:
    """Return (mean tau or None, queries with a defined tau, queries where tau is undefined)."""
    common = [query for query in rankings_a if query in rankings_b]
    every = kendall_taus([rankings_a[q] for q in common], [rankings_b[q] for q in common])
    taus = [tau for tau in every if not math.isnan(tau)]
    undefined = len(every) - len(taus)
    return (sum(taus) / len(taus) if taus else None), len(taus), undefined


def _finite_or_none(value: float) -> float | None:
    """Return `value`, or None for NaN (JSON has no NaN)."""
    return None if math.isnan(value) else value


def diversity_report(rankings: Mapping[str, Rankings]) -> dict[str, Any]:
    """Return the pairwise diversity of annotators' rankings as a JSON-serialisable dict.

    `rankings[annotator][query]` is that annotator's top list for the query. One entry per
    ordered pair (A, B) of distinct annotators, sorted by name: the mean tau over the queries
    both ranked (tau is symmetric, so (A, B) and (B, A) agree) and where B ranks A's top-1.
    Means over no query are None.
    """
    names = sorted(rankings)
    pairs = []
    # tau is symmetric: once per unordered pair halves the (costly) scipy calls.
    taus = {(a, b): _mean_tau(rankings[a], rankings[b]) for a, b in combinations(names, 2)}
    for name_a, name_b in permutations(names, 2):
        rankings_a, rankings_b = rankings[name_a], rankings[name_b]
        tau, tau_queries, tau_undefined = taus[min(name_a, name_b), max(name_a, name_b)]
        top1 = top1_rank_stats(rankings_a, rankings_b)
        pairs.append(
            {
                "a": name_a,
                "b": name_b,
                "common_queries": sum(1 for query in rankings_a if query in rankings_b),
                "kendall_tau": {
                    "mean": tau,
                    "queries": tau_queries,
                    "undefined": tau_undefined,
                },
                "top1_of_a_in_b": {
                    "mean_rank": _finite_or_none(top1.mean_rank),
                    "queries": top1.queries,
                    "beyond_depth": top1.beyond_depth,
                    "beyond_depth_share": _finite_or_none(top1.beyond_depth_share),
                },
            }
        )
    return {
        "annotators": names,
        "queries": {name: len(rankings[name]) for name in names},
        "tau_variant": TAU_VARIANT,
        "beyond_depth_rank": "len(list of B) + 1",
        "pairs": pairs,
    }
