"""Compare positive sets (precision and recall of one against another); say what one covers."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


def positive_set_coverage(*, source: str, queries: Mapping[str, Sequence[Any]] | None) -> str:
    """Say which queries a positive set covers, as every page and the API put it.

    A set that records its queries covers those; one that records none covers what its
    source implies: the original links cover every image and caption, a human-verified set
    its batch's queries, and an imported set queries nobody recorded (never "the whole
    dataset": an import that named no queries does not say it judged every one).
    """
    if queries and ("i2t" in queries or "t2i" in queries):
        images, captions = len(queries.get("i2t") or ()), len(queries.get("t2i") or ())
        return f"{images} image, {captions} caption queries"
    if source == "original":
        return "every image and caption (each caption's own image)"
    if source == "human":
        return "the queries of the batch that judged it"
    return "queries not recorded"
