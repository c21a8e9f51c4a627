"""Pool annotators' top-k lists into de-duplicated candidate pairs that remember their origin.

A pair proposed by several annotators, or from both an image and a caption query, is judged
once. Candidates come out in a stable order: by query, then annotator, then rank, so the
same rankings always give the same candidates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankedList:
    """One annotator's ranking for one query (database ids)."""

    query_id: int
    annotator_id: int
    # pairs (image id, caption id) in rank order: the query item completes each target
    pairs: tuple[tuple[int, int], ...]
    scores: tuple[float, ...]


@dataclass(frozen=True)
class ProposalSpec:
    annotator_id: int
    query_id: int
    rank: int  # 1-based
    score: float


@dataclass
class PooledCandidate:
    image_id: int
    caption_id: int
    query_id: int  # the first query that proposed the pair
    proposals: list[ProposalSpec] = field(default_factory=list)


def pool_candidates(ranked_lists: Iterable[RankedList], *, k: int) -> list[PooledCandidate]:
    """Take the top `k` of every list and merge identical pairs, keeping every proposal."""
    by_pair: dict[tuple[int, int], PooledCandidate] = {}
    ordered = sorted(ranked_lists, key=lambda r: (r.query_id, r.annotator_id))
    for ranked in ordered:
        for rank, (pair, score) in enumerate(zip(ranked.pairs[:k], ranked.scores[:k], strict=True)):
            candidate = by_pair.get(pair)
            if candidate is None:
                candidate = PooledCandidate(
                    image_id=pair[0], caption_id=pair[1], query_id=ranked.query_id
                )
                by_pair[pair] = candidate
            candidate.proposals.append(
                ProposalSpec(
                    annotator_id=ranked.annotator_id,
                    query_id=ranked.query_id,
                    rank=rank + 1,
                    score=float(score),
                )
            )
    return list(by_pair.values())
