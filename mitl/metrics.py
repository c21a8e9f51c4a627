"""Retrieval metrics over rankings and positive sets (ids, not rows). Pure Python.

Recall@K is the hit rate (1 when any positive is in the top K), as in COCO evaluation;
Precision@K is the share of the top K that are positives. Every query of `positives`
must have a ranking: a missing one is an error, never a silent zero.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

Rankings = Mapping[int, Sequence[int]]
Positives = Mapping[int, Collection[int]]


def _hits(rankings: Rankings, positives: Positives, k: int) -> list[np.ndarray]:
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    missing = [q for q in positives if q not in rankings]
    if missing:
        raise ValueError(f"{len(missing)} queries have no ranking (first: {missing[0]})")
    return [
        np.fromiter((t in positives[q] for t in rankings[q][:k]), dtype=bool) for q in positives
    ]


def recall_at_k(rankings: Rankings, positives: Positives, k: int) -> float:
    """Return the share of queries with at least one positive in their top `k`."""
    hits = _hits(rankings, positives, k)
    return float(np.mean([h.any() for h in hits])) if hits else float("nan")


def precision_at_k(rankings: Rankings, positives: Positives, k: int) -> float:
    """Return the mean share of positives among each query's top `k` (short lists count k)."""
    hits = _hits(rankings, positives, k)
    return float(np.mean([h.sum() / k for h in hits])) if hits else float("nan")
