"""Compare positive sets: precision and recall of one set of pairs against another."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SetAgreement:
    precision: float  # share of predicted pairs that are true
    recall: float  # share of true pairs that are predicted
    predicted: int
    true: int
    both: int


def set_agreement(
    predicted: Mapping[str, Sequence[int]], truth: Mapping[str, Sequence[int]]
) -> SetAgreement:
    """Micro-average over all (query, target) pairs of the queries in `truth`."""
    predicted_pairs = {(q, t) for q, targets in predicted.items() if q in truth for t in targets}
    true_pairs = {(q, t) for q, targets in truth.items() for t in targets}
    return pairs_agreement(predicted_pairs, true_pairs)


def pairs_agreement(predicted: Collection[Hashable], truth: Collection[Hashable]) -> SetAgreement:
    """Precision and recall of one set of pairs against another (repeats count once)."""
    predicted_pairs, true_pairs = set(predicted), set(truth)
    both = len(predicted_pairs & true_pairs)
    return SetAgreement(
        precision=both / len(predicted_pairs) if predicted_pairs else 0.0,
        recall=both / len(true_pairs) if true_pairs else 0.0,
        predicted=len(predicted_pairs),
        true=len(true_pairs),
        both=both,
    )
