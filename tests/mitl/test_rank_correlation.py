"""Kendall's tau-b between paired values: scipy's, with undefined cases as None."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from mitl.rank_correlation import kendall_tau_b


def test_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    assert kendall_tau_b([0.1, 0.5, 0.9], [10, 20, 30]) == 1.0
    assert kendall_tau_b([0.1, 0.5, 0.9], [30, 20, 10]) == -1.0


@pytest.mark.parametrize("seed", range(5))
def test_tau_matches_scipys_tau_b_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, 12).astype(float)  # few values: many ties
    y = rng.integers(0, 4, 12).astype(float)
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic)


@pytest.mark.parametrize("length", [2, 30, 256, 257, 600])
def test_short_and_long_lists_agree_with_scipy(length):
    """Lists up to 256 long are compared pair by pair, longer ones by scipy: same tau."""
    rng = np.random.default_rng(length)
    x = rng.integers(0, 8, length).astype(float)
    y = np.where(rng.random(length) < 0.5, x, rng.integers(0, 8, length))
    x[:2], y[:2] = (0, 1), (0, 1)  # never constant
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic, abs=1e-12)


def test_tied_pairs_neither_agree_nor_disagree():
    # Pairs (1, 2) tie in x and (2, 3) in y; the other four agree: tau = 4 / sqrt(5 * 5).
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)


def test_tau_is_undefined_for_fewer_than_two_models_or_a_constant_metric():
    assert kendall_tau_b([0.3], [0.4]) is None
    assert kendall_tau_b([], []) is None
    assert kendall_tau_b([0.3, 0.3, 0.3], [0.1, 0.2, 0.3]) is None
    assert kendall_tau_b([0.1, 0.2, 0.3], [0.3, 0.3, 0.3]) is None


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        kendall_tau_b([1, 2], [1])


def test_equal_infinities_tie_as_scipy_says():
    x = [float("inf"), float("inf"), 1.0, 2.0]
    y = [3.0, 1.0, 2.0, 4.0]
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic)
