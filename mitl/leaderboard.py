"""How similarly two metrics order the models of a leaderboard (ECCV Caption, Table D.3).

Each metric orders the evaluated models by their scores; Kendall's tau-b between the
scores two metrics give the same models says how much the two orderings agree: 1 for
the same order, -1 for the reverse, ties neither agree nor disagree. ECCV Caption uses
it to show that COCO R@1 orders models unlike mAP@R on its extended positives.

A model without a value for a metric (e.g. COCO recalls, defined only for rankings of a
whole split) is left out of the pairs that involve that metric. tau is undefined (None)
with fewer than two models left, or when one metric gives them all the same score.

Pure Python and numpy: no Django import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Scores = Mapping[str, Mapping[str, float | None]]  # model -> metric -> score


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Return Kendall's tau-b between two score lists of the same models (None: undefined)."""
    if len(x) != len(y):
        raise ValueError(f"score lists differ in length ({len(x)} and {len(y)})")
    if len(x) < 2:
        return None
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    upper = np.triu_indices(len(a), k=1)
    sign_a = np.sign(a[:, None] - a[None, :])[upper]
    sign_b = np.sign(b[:, None] - b[None, :])[upper]
    untied = np.count_nonzero(sign_a) * np.count_nonzero(sign_b)
    if untied == 0:
        return None
    return float(np.dot(sign_a, sign_b) / math.sqrt(untied))


@dataclass(frozen=True)
class Agreement:
    """Kendall's tau between every two metrics, over the models that have both."""

    metrics: list[str]
    tau: list[list[float | None]]  # tau[i][j] between metrics[i] and metrics[j]
    models: list[list[int]]  # how many models each tau is over


def metric_agreement(scores: Scores, metrics: Sequence[str]) -> Agreement:
    """Return the tau matrix between `metrics` over the models of `scores`."""
    tau: list[list[float | None]] = []
    counts: list[list[int]] = []
    for first in metrics:
        tau_row: list[float | None] = []
        count_row: list[int] = []
        for second in metrics:
            pairs = [
                (values[first], values[second])
                for values in scores.values()
                if _present(values.get(first)) and _present(values.get(second))
            ]
            count_row.append(len(pairs))
            tau_row.append(
                kendall_tau_b([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
            )
        tau.append(tau_row)
        counts.append(count_row)
    return Agreement(metrics=list(metrics), tau=tau, models=counts)


def _present(value: float | None) -> bool:
    return value is not None and not math.isnan(value)
