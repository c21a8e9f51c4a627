"""Exact, deterministic top-k retrieval in both directions (no Django needed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from mitl import retrieval
from mitl.annotators.base import Annotator, Corpus
from mitl.retrieval import TopK, retrieve_i2t, retrieve_t2i, topk_rows


class FixedAnnotator(Annotator):
    """Serve a fixed (n_images, n_captions) score matrix and record the blocks asked for."""

    kind = "fixed"

    def __init__(self, matrix: np.ndarray, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name="fixed", config=config or {})
        self.matrix = np.asarray(matrix, dtype=np.float32)
        self.calls: list[tuple[int, int]] = []

    def prepare(self, corpus: Corpus) -> None:
        pass

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        self.calls.append((len(image_rows), len(caption_rows)))
        return self.matrix[np.ix_(image_rows, caption_rows)]


def brute_force(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank each row by a full sort: score descending, then column ascending."""
    scores = np.asarray(scores, dtype=np.float32)
    indices = []
    for row in scores:
        order = sorted(range(len(row)), key=lambda column: (-row[column], column))[:k]
        indices.append(order)
    indices_array = np.array(indices, dtype=np.int64).reshape(len(scores), -1)
    return indices_array, np.take_along_axis(scores, indices_array, axis=1)


def assert_same(top: TopK, expected: tuple[np.ndarray, np.ndarray]) -> None:
    assert top.indices.dtype == np.int64
    assert top.scores.dtype == np.float32
    np.testing.assert_array_equal(top.indices, expected[0])
    np.testing.assert_array_equal(top.scores, expected[1])


@pytest.mark.parametrize("k", [1, 2, 5, 13, 29, 30, 31, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_topk_matches_full_sort_with_many_ties(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(17, 30)).astype(np.float32)
    assert_same(topk_rows(scores, k), brute_force(scores, k))


@pytest.mark.parametrize("k", [1, 3, 50])
def test_topk_matches_full_sort_on_continuous_scores(k: int) -> None:
    rng = np.random.default_rng(7)
    scores = rng.standard_normal((9, 50)).astype(np.float32)
    assert_same(topk_rows(scores, k), brute_force(scores, k))


@pytest.mark.parametrize("budget", [1, 40, 95])
def test_topk_is_the_same_in_small_row_batches(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    monkeypatch.setattr(retrieval, "_RANK_BATCH_ENTRIES", budget)
    rng = np.random.default_rng(11)
    scores = rng.integers(-2, 3, size=(19, 31)).astype(np.float64)
    assert_same(topk_rows(scores.T, 4), brute_force(scores.T, 4))
    assert_same(topk_rows(scores, 31), brute_force(scores, 31))


def test_topk_orders_negative_zero_and_infinities() -> None:
    scores = np.array([[0.0, -0.0, -np.inf, np.inf, -1.5, 2.0, -0.0, 0.0]], dtype=np.float32)
    top = topk_rows(scores, 8)
    np.testing.assert_array_equal(top.indices[0], [3, 5, 0, 1, 6, 7, 4, 2])


def test_topk_caps_k_at_the_number_of_targets() -> None:
    scores = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    top = topk_rows(scores, 10)
    assert top.k == 3
    np.testing.assert_array_equal(top.indices, [[1, 2, 0], [0, 1, 2]])
    np.testing.assert_array_equal(top.scores, [[3.0, 3.0, 1.0], [0.0, 0.0, 0.0]])


def test_topk_breaks_boundary_ties_by_lowest_index() -> None:
    # All but one target tie at the k-th place; argpartition alone could pick any of them.
    scores = np.zeros((3, 1000), dtype=np.float32)
    scores[:, 500] = 1.0
    top = topk_rows(scores, 4)
    np.testing.assert_array_equal(top.indices, [[500, 0, 1, 2]] * 3)


def test_topk_handles_empty_inputs() -> None:
    assert topk_rows(np.zeros((0, 5), dtype=np.float32), 3).indices.shape == (0, 3)
    assert topk_rows(np.zeros((4, 0), dtype=np.float32), 3).indices.shape == (4, 0)


@pytest.mark.parametrize("k", [0, -1])
def test_topk_rejects_non_positive_k(k: int) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        topk_rows(np.zeros((2, 2), dtype=np.float32), k)


def test_topk_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        topk_rows(np.array([[1.0, np.nan]], dtype=np.float32), 1)


@pytest.fixture
def matrix() -> np.ndarray:
    rng = np.random.default_rng(42)
    # Integer-valued scores so ties are common in both directions.
    return rng.integers(0, 5, size=(23, 41)).astype(np.float32)


@pytest.mark.parametrize("k", [1, 6, 100])
def test_chunk_size_does_not_change_results(matrix: np.ndarray, k: int) -> None:
    images = np.arange(matrix.shape[0])
    captions = np.arange(matrix.shape[1])
    i2t = [
        retrieve_i2t(FixedAnnotator(matrix), images, k, n_captions=41, chunk_size=size)
        for size in (1, 7, 1000)
    ]
    t2i = [
        retrieve_t2i(FixedAnnotator(matrix), captions, k, n_images=23, chunk_size=size)
        for size in (1, 7, 1000)
    ]
    for result in i2t[1:]:
        assert_same(result, (i2t[0].indices, i2t[0].scores))
    for result in t2i[1:]:
        assert_same(result, (t2i[0].indices, t2i[0].scores))
    assert_same(i2t[0], brute_force(matrix, k))
    assert_same(t2i[0], brute_force(matrix.T, k))


def test_chunks_and_progress(matrix: np.ndarray) -> None:
    annotator = FixedAnnotator(matrix)
    reports: list[tuple[int, int]] = []
    retrieve_i2t(
        annotator,
        np.arange(23),
        3,
        n_captions=41,
        chunk_size=10,
        progress=lambda done, total: reports.append((done, total)),
    )
    assert annotator.calls == [(10, 41), (10, 41), (3, 41)]
    assert reports == [(10, 23), (20, 23), (23, 23)]

    annotator = FixedAnnotator(matrix)
    reports.clear()
    retrieve_t2i(
        annotator,
        np.arange(41),
        3,
        n_images=23,
        chunk_size=20,
        progress=lambda done, total: reports.append((done, total)),
    )
    assert annotator.calls == [(23, 20), (23, 20), (23, 1)]
    assert reports == [(20, 41), (40, 41), (41, 41)]


def test_both_directions_give_a_pair_the_same_score(matrix: np.ndarray) -> None:
    rng = np.random.default_rng(3)
    scores = rng.random(matrix.shape).astype(np.float32)
    annotator = FixedAnnotator(scores)
    i2t = retrieve_i2t(annotator, np.arange(23), 41, n_captions=41, chunk_size=5)
    t2i = retrieve_t2i(annotator, np.arange(41), 23, n_images=23, chunk_size=5)
    from_images = {
        (int(image), int(caption)): float(score)
        for image, (captions, row) in enumerate(zip(i2t.indices, i2t.scores, strict=True))
        for caption, score in zip(captions, row, strict=True)
    }
    from_captions = {
        (int(image), int(caption)): float(score)
        for caption, (images, row) in enumerate(zip(t2i.indices, t2i.scores, strict=True))
        for image, score in zip(images, row, strict=True)
    }
    assert from_images == from_captions
    assert len(from_images) == 23 * 41


def test_query_subsets_keep_target_indices_global(matrix: np.ndarray) -> None:
    queries = np.array([5, 0, 22])
    top = retrieve_i2t(FixedAnnotator(matrix), queries, 4, n_captions=41, chunk_size=2)
    assert_same(top, brute_force(matrix[queries], 4))


@pytest.mark.parametrize("k", [0, -3])
def test_retrieval_rejects_non_positive_k(matrix: np.ndarray, k: int) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retrieve_i2t(FixedAnnotator(matrix), np.arange(3), k, n_captions=41)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retrieve_t2i(FixedAnnotator(matrix), np.arange(3), k, n_images=23)


class IgnoresTargets(FixedAnnotator):
    """A faulty annotator that always scores every caption it knows."""

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        return self.matrix[image_rows]


def test_retrieval_rejects_a_wrongly_shaped_block(matrix: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"expected \(3, 40\)"):
        retrieve_i2t(IgnoresTargets(matrix), np.arange(3), 2, n_captions=40)
