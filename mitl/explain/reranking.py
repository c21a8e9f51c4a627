"""How a model's rankings move when its caption queries are perturbed (paper 000, section 5).

Pure Python over numpy. The caller scores every image for the original and the perturbed
text of each query (`Annotator.text_similarity`); this module turns the two score
matrices into the rank of each query's best positive before and after, and summarises:
how many targets moved lower, higher or stayed, and Recall@K and MRR before and after.

A model whose targets barely move when "a red car" becomes "a blue car" does not read
colour: when fewer than BLIND_LOWER_SHARE of the perturbed queries lose rank, the report
calls the model blind to that kind of change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

RECALL_KS: tuple[int, ...] = (1, 5, 10)
BLIND_LOWER_SHARE = 0.2
EXAMPLES = 5
KIND_WORDS: dict[str, str] = {
    "antonym": "adjectives turned into their antonyms",
    "color_all": "colours",
    "color_in": "colours",
    "size": "sizes",
}


def positive_ranks(scores: np.ndarray, positives: np.ndarray) -> np.ndarray:
    """Return the 1-based rank of each row's best-scored positive among all columns.

    `positives` is a boolean mask of the same shape; a tie with a non-positive counts in the
    positive's favour (the rank a stable sort that prefers positives would give).
    """
    best = np.where(positives, scores, -np.inf).max(axis=1)
    above = (scores > best[:, None]) & ~positives
    return 1 + above.sum(axis=1)


def rank_metrics(ranks: np.ndarray) -> dict[str, float | None]:
    """Return Recall@1/5/10 and MRR of a vector of 1-based ranks."""
    if len(ranks) == 0:
        return {**{f"recall@{k}": None for k in RECALL_KS}, "mrr": None}
    metrics: dict[str, float | None] = {
        f"recall@{k}": float(np.mean(ranks <= k)) for k in RECALL_KS
    }
    metrics["mrr"] = float(np.mean(1.0 / ranks))
    return metrics


def movement(
    kind: str,
    before: np.ndarray,
    after: np.ndarray,
    *,
    queries: Sequence[int],
    originals: Sequence[str],
    texts: Sequence[str],
    total_queries: int,
) -> dict[str, Any]:
    """Summarise one perturbation kind: moves, metric deltas, examples and a verdict."""
    n = len(before)
    lower, higher = int(np.sum(after > before)), int(np.sum(after < before))
    same = n - lower - higher
    metrics_before, metrics_after = rank_metrics(before), rank_metrics(after)
    deltas = {
        name: (None if metrics_before[name] is None else metrics_after[name] - metrics_before[name])
        for name in metrics_before
    }
    change = after - before
    order = np.argsort(-np.abs(change), kind="stable")
    examples = [
        {
            "query": int(queries[i]),
            "original": originals[i],
            "perturbed": texts[i],
            "rank_before": int(before[i]),
            "rank_after": int(after[i]),
        }
        for i in order[:EXAMPLES]
    ]
    unmoved = [
        {"query": int(queries[i]), "original": originals[i], "perturbed": texts[i]}
        for i in np.flatnonzero(change == 0)[:EXAMPLES]
    ]
    share_lower = lower / n if n else None
    return {
        "kind": kind,
        "perturbed": n,
        "perturbed_share": n / total_queries if total_queries else None,
        "lower": lower,
        "higher": higher,
        "same": same,
        "shares": {
            "lower": share_lower,
            "higher": higher / n if n else None,
            "same": same / n if n else None,
        },
        "before": metrics_before,
        "after": metrics_after,
        "delta": deltas,
        "blind": share_lower is not None and share_lower < BLIND_LOWER_SHARE,
        "verdict": verdict(kind, share_lower, n),
        "examples": examples,
        "unmoved": unmoved,
    }


def verdict(kind: str, share_lower: float | None, perturbed: int) -> str:
    """Return one sentence a curator can act on."""
    words = KIND_WORDS.get(kind, kind)
    if share_lower is None or perturbed == 0:
        return f"no query could be perturbed ({words})"
    percent = f"{100 * share_lower:.0f}% of {perturbed}"
    if share_lower < BLIND_LOWER_SHARE:
        return f"blind to {words}: the positive moved lower for only {percent} perturbed queries"
    return f"reads {words}: the positive moved lower for {percent} perturbed queries"
