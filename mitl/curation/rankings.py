"""Every annotator's ranking of a query, and their reciprocal-rank fusion.

The shared ground of the adjudication policies (`policies`) and the learned fusion
(`learned`), which builds on them and is one of the policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Pair = tuple[int, int]  # (image pk, caption pk)
RRF_K = 60  # reciprocal rank fusion constant (Cormack, Clarke and Buettcher, SIGIR 2009)


@dataclass(frozen=True)
class QueryRankings:
    """Every annotator's ranking of one query, as pairs best first."""

    query_id: int
    lists: Mapping[int, Sequence[Pair]]  # annotator id → pairs
    group: str = ""  # queries of one group share yield estimates (the direction)
    # annotator id → similarity scores aligned with `lists` (optional: only the learned
    # policy's `score` features read them)
    scores: Mapping[int, Sequence[float]] = field(default_factory=dict)


def fused_ranking(lists: Mapping[int, Sequence[Pair]], rrf_k: int = RRF_K) -> list[Pair]:
    """Reciprocal rank fusion of several rankings; ties keep the first-seen order."""
    scores: dict[Pair, float] = {}
    for annotator in sorted(lists):
        for rank, pair in enumerate(lists[annotator], start=1):
            scores[pair] = scores.get(pair, 0.0) + 1.0 / (rrf_k + rank)
    order = {pair: i for i, pair in enumerate(scores)}
    return sorted(scores, key=lambda pair: (-scores[pair], order[pair]))
