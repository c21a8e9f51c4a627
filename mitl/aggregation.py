"""Aggregate the judgements of one pair into a verdict.

The ECCV Caption rule: "100% YES" and "Partially YES" make a positive vote; the label is
the majority of votes over approved assignments. A tie stays negative: a benchmark is
hurt more by a false positive than by a missed one. Each verdict also keeps the graded
score (ECCV Caption eq. E.4: 1, 0.5, 0, 0 averaged) and the answer distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .judgements import GRADED_SCORE, POSITIVE_LEVELS, Level


@dataclass(frozen=True)
class VerdictSpec:
    is_positive: bool
    score: float  # graded relevance in [0, 1]
    confidence: float  # share of votes that agree with the label
    distribution: dict[str, int]


def eccv_verdict(levels: Sequence[Level]) -> VerdictSpec:
    """Return the majority ECCV verdict of a non-empty list of answers."""
    if not levels:
        raise ValueError("cannot aggregate a pair without judgements")
    counts = Counter(Level(level) for level in levels)
    positive_votes = sum(n for level, n in counts.items() if level in POSITIVE_LEVELS)
    negative_votes = len(levels) - positive_votes
    score = sum(GRADED_SCORE[level] * n for level, n in counts.items()) / len(levels)
    is_positive = positive_votes > negative_votes
    agreeing = positive_votes if is_positive else negative_votes
    return VerdictSpec(
        is_positive=is_positive,
        score=score,
        confidence=agreeing / len(levels),
        distribution={level.value: counts.get(level, 0) for level in Level},
    )
