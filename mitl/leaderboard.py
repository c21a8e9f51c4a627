"""How similarly two metrics order the models of a leaderboard (ECCV Caption, Table D.3).

Each metric orders the evaluated models by their scores; Kendall's tau-b between the
scores two metrics give the same models says how much the two orderings agree: 1 for
the same order, -1 for the reverse, ties neither agree nor disagree. ECCV Caption uses
it to show that COCO R@1 orders models unlike mAP@R on its extended positives.

A model without a value for a metric (e.g. COCO recalls, defined only for rankings of a
whole split) is left out of the pairs that involve that metric. tau is undefined (None)
with fewer than two models left, or when one metric gives them all the same score.

Pure Python (scipy for tau): no Django import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mitl.rank_correlation import kendall_tau_b

Scores = Mapping[str, Mapping[str, float | None]]  # model -> metric -> score


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
