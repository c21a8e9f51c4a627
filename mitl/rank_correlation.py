"""Kendall's tau-b between two paired lists of values, for every report that compares orders.

Pure Python, numpy and scipy: no Django import.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Return Kendall's tau-b between paired values (None: undefined).

    Ties neither agree nor disagree. tau is undefined with fewer than two pairs, or when
    one list holds a single value (it ties every pair, so it orders nothing to compare).
    """
    if len(x) != len(y):
        raise ValueError(f"score lists differ in length ({len(x)} and {len(y)})")
    if len(x) < 2:
        return None  # scipy would warn about the sample size and return NaN
    # scipy.stats is imported here, not at start-up: the web process loads this module
    # with the leaderboard and the diversity report, and only they need it.
    from scipy.stats import kendalltau

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if (a == a[0]).all() or (b == b[0]).all():
        return None
    return float(kendalltau(a, b, variant="b").statistic)
