"""The ranking helpers of the CPU engine: packed keys, each segment's best, threads."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.retrieval.keys import entry_keys, in_parallel, keys_top, sparse_flatnonzero, top_keys


@pytest.mark.parametrize("density", [0.0, 0.002, 0.01, 0.05, 0.2, 1.0])
@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 4096, 100_003])
def test_sparse_flatnonzero_finds_what_flatnonzero_finds(density: float, size: int) -> None:
    mask = np.random.default_rng(size).random(size) < density
    np.testing.assert_array_equal(sparse_flatnonzero(mask), np.flatnonzero(mask))


@pytest.mark.parametrize("pack_bits", [64, 0])
def test_top_keys_keeps_each_segments_best_keys_in_order(
    pack_bits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mitl.retrieval.keys._PACK_BITS", pack_bits)
    rng = np.random.default_rng(3)
    segments = np.concatenate([np.repeat(np.arange(50), 4), rng.integers(0, 50, 700)])
    segments[:300] = 7  # a crowded segment
    scores = rng.integers(-3, 4, len(segments)).astype(np.float32)  # many ties
    targets = rng.permutation(len(segments))
    top = top_keys(segments, entry_keys(scores, targets), 50, 4)
    for segment in range(50):
        mine = np.flatnonzero(segments == segment)
        order = np.lexsort((targets[mine], -scores[mine]))[:4]
        expected = keys_top(entry_keys(scores[mine][order], targets[mine][order])[None, :])
        found = keys_top(top[segment : segment + 1])
        np.testing.assert_array_equal(found.indices, expected.indices)
        np.testing.assert_array_equal(found.scores, expected.scores)


def test_in_parallel_covers_every_row_once() -> None:
    spans = in_parallel(lambda start, stop: (start, stop), 10, 3)
    assert spans == [(0, 3), (3, 6), (6, 10)]
    assert in_parallel(lambda start, stop: (start, stop), 2, 5) == [(0, 1), (1, 2)]
    assert in_parallel(lambda start, stop: (start, stop), 0, 4) == []
