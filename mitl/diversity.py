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

Pure Python (scipy for tau): no Django import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, permutations
from typing import Any

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
        positions = _positions(ranking_b, f"ranking B of query {query!r}")
        position = positions.get(ranking_a[0])
        if position is None:
            beyond += 1
            ranks.append(len(ranking_b) + 1)
        else:
            ranks.append(position + 1)
    mean = sum(ranks) / len(ranks) if ranks else math.nan
    return Top1RankStats(mean_rank=mean, queries=len(ranks), beyond_depth=beyond)


def mean_rank_of_top1(rankings_a: Rankings, rankings_b: Rankings) -> float:
    """Return the mean 1-based rank B gives A's top-1 (beyond B's depth: len + 1; NaN if none)."""
    return top1_rank_stats(rankings_a, rankings_b).mean_rank


def _mean_tau(rankings_a: Rankings, rankings_b: Rankings) -> tuple[float | None, int, int]:
    """Return (mean tau or None, queries with a defined tau, queries where tau is undefined)."""
    taus: list[float] = []
    undefined = 0
    for query, ranking_a in rankings_a.items():
        ranking_b = rankings_b.get(query)
        if ranking_b is None:
            continue
        tau = kendall_tau(ranking_a, ranking_b)
        if math.isnan(tau):
            undefined += 1
        else:
            taus.append(tau)
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
