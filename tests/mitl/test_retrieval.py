"""Exact, deterministic top-k retrieval in both directions (no Django needed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from mitl.annotators.base import Annotator, Corpus, EmbeddingAnnotator
from mitl.retrieval.both import retrieve_both
from mitl.retrieval.topk import TopK, retrieve_i2t, retrieve_t2i, topk_rows


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
    monkeypatch.setattr("mitl.retrieval.topk._RANK_BATCH_ENTRIES", budget)
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


# retrieve_both: both directions from one pass.


class VectorsAnnotator(EmbeddingAnnotator):
    """Hold given vectors; EmbeddingAnnotator scores pairs by their plain dot product."""

    kind = "vectors"

    def __init__(self, images: np.ndarray, captions: np.ndarray) -> None:
        super().__init__(name="vectors", config={})
        self.image_vectors = np.asarray(images, dtype=np.float32)
        self.caption_vectors = np.asarray(captions, dtype=np.float32)

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ScaledVectorsAnnotator(VectorsAnnotator):
    """Override similarity, so retrieval must ask it rather than multiply the vectors."""

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        return -super().similarity(image_rows, caption_rows)


def exact_vectors(
    seed: int, n_images: int, n_captions: int, *, tied: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Return vectors whose dot products are exact in float32, whatever the summation order.

    Torch and numpy may add a dot product's terms in different orders; with small dyadic
    entries every order gives the same float32, so both paths can be compared bit for bit.
    `tied` draws from {-1, 0, 1} in 2 dimensions: a handful of distinct scores, ties everywhere.
    """
    rng = np.random.default_rng(seed)
    if tied:
        draw = lambda n: rng.integers(-1, 2, size=(n, 2)).astype(np.float32)  # noqa: E731
    else:
        draw = lambda n: (rng.integers(-1000, 1001, size=(n, 4)) / 1024).astype(np.float32)  # noqa: E731
    return draw(n_images), draw(n_captions)


@pytest.fixture(params=["numpy", "threshold", "threshold-dense-split", "topk"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on each path; small groups make the group selection work on small data.

    "threshold-dense-split" ranks keys in dense rows rather than by one packed sort (as for
    corpora too large to pack), splits every block's work into 3 threads and compares the
    columns a few rows at a time.
    """
    if request.param == "threshold-dense-split":
        monkeypatch.setattr("mitl.retrieval.keys._PACK_BITS", 0)
        monkeypatch.setattr("mitl.retrieval.threshold._PARTS", 3)
        monkeypatch.setattr("mitl.retrieval.threshold._MASK_ENTRIES", 600)
    monkeypatch.setattr("mitl.retrieval.threshold._ROW_GROUP", 4)
    monkeypatch.setattr("mitl.retrieval.threshold._COLUMN_GROUP", 3)
    monkeypatch.setattr("mitl.retrieval.torch_topk._ROW_GROUP", 4)
    monkeypatch.setattr("mitl.retrieval.torch_topk._COLUMN_GROUP", 2)
    monkeypatch.setattr("mitl.retrieval.both._TOPK_ON_CPU", request.param == "topk")
    return request.param


def annotator_for(path: str, images: np.ndarray, captions: np.ndarray) -> Annotator:
    """Return an annotator scoring images @ captions.T through the requested path."""
    if path == "numpy":
        return FixedAnnotator(images @ captions.T)
    return VectorsAnnotator(images, captions)


def both(
    annotator: Annotator, images: Any, captions: Any, k: int, **sizes: Any
) -> tuple[TopK, TopK]:
    return retrieve_both(
        annotator, np.asarray(images), np.asarray(captions), k, device="cpu", **sizes
    )


@pytest.mark.parametrize("tied", [False, True], ids=["random", "tied"])
@pytest.mark.parametrize(("k", "chunk_size"), [(1, 7), (5, 64), (13, None), (40, 33)])
def test_both_equals_the_one_way_retrievals(
    path: str, tied: bool, k: int, chunk_size: int | None
) -> None:
    images, captions = exact_vectors(k, 151, 307, tied=tied)
    matrix = images @ captions.T
    image_queries, caption_queries = np.arange(151), np.arange(307)
    i2t, t2i = both(
        annotator_for(path, images, captions),
        image_queries,
        caption_queries,
        k,
        n_images=151,
        n_captions=307,
        chunk_size=chunk_size,
    )
    reference = FixedAnnotator(matrix)
    expected_i2t = retrieve_i2t(reference, image_queries, k, n_captions=307)
    expected_t2i = retrieve_t2i(reference, caption_queries, k, n_images=151)
    assert_same(i2t, (expected_i2t.indices, expected_i2t.scores))
    assert_same(t2i, (expected_t2i.indices, expected_t2i.scores))
    assert_same(i2t, brute_force(matrix, k))
    assert_same(t2i, brute_force(matrix.T, k))


@pytest.mark.parametrize("tied", [False, True], ids=["random", "tied"])
def test_both_serves_query_subsets_with_repeats(path: str, tied: bool) -> None:
    images, captions = exact_vectors(5, 97, 203, tied=tied)
    matrix = images @ captions.T
    image_queries = np.array([96, 3, 3, 50, 0])
    caption_queries = np.array([7, 202, 7, 100])
    i2t, t2i = both(
        annotator_for(path, images, captions),
        image_queries,
        caption_queries,
        6,
        n_images=97,
        n_captions=203,
        chunk_size=10,
    )
    assert_same(i2t, brute_force(matrix[image_queries], 6))
    assert_same(t2i, brute_force(matrix.T[caption_queries], 6))


@pytest.mark.parametrize("side", ["images only", "captions only"])
def test_both_with_queries_on_one_side(path: str, side: str) -> None:
    images, captions = exact_vectors(8, 80, 190, tied=False)
    matrix = images @ captions.T
    image_queries = np.array([4, 70, 12]) if side == "images only" else np.array([], dtype=int)
    caption_queries = np.array([], dtype=int) if side == "images only" else np.array([189, 5])
    i2t, t2i = both(
        annotator_for(path, images, captions),
        image_queries,
        caption_queries,
        4,
        n_images=80,
        n_captions=190,
        chunk_size=9,
    )
    assert i2t.indices.shape == (len(image_queries), 4)
    assert t2i.indices.shape == (len(caption_queries), 4)
    if len(image_queries):
        assert_same(i2t, brute_force(matrix[image_queries], 4))
    if len(caption_queries):
        assert_same(t2i, brute_force(matrix.T[caption_queries], 4))


def test_both_only_scores_what_the_queries_need() -> None:
    matrix = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    annotator = FixedAnnotator(matrix)
    both(annotator, [1, 4], [], 2, n_images=6, n_captions=8, chunk_size=5)
    assert annotator.calls == [(2, 8)]  # the two query images, every caption
    annotator = FixedAnnotator(matrix)
    both(annotator, [], [2, 3], 2, n_images=6, n_captions=8, chunk_size=4)
    assert annotator.calls == [(4, 2), (2, 2)]  # every image, the two query captions


def test_both_caps_k_and_handles_empty_inputs(path: str) -> None:
    images, captions = exact_vectors(2, 4, 6, tied=True)
    matrix = images @ captions.T
    i2t, t2i = both(
        annotator_for(path, images, captions), [0, 3], [5], 50, n_images=4, n_captions=6
    )
    assert (i2t.k, t2i.k) == (6, 4)
    assert_same(i2t, brute_force(matrix[[0, 3]], 6))
    assert_same(t2i, brute_force(matrix.T[[5]], 4))
    i2t, t2i = both(annotator_for(path, images, captions), [], [], 3, n_images=4, n_captions=6)
    assert i2t.indices.shape == (0, 3) and t2i.indices.shape == (0, 3)


def test_both_ranks_a_constant_caption_by_image_row(path: str) -> None:
    # A zero caption vector ties every image at 0.0: the crowded case of the dense merge.
    images, captions = exact_vectors(3, 120, 40, tied=False)
    captions[17] = 0.0
    i2t, t2i = both(
        annotator_for(path, images, captions),
        np.arange(120),
        np.arange(40),
        3,
        n_images=120,
        n_captions=40,
        chunk_size=50,
    )
    np.testing.assert_array_equal(t2i.indices[17], [0, 1, 2])
    np.testing.assert_array_equal(t2i.scores[17], [0.0, 0.0, 0.0])
    assert_same(i2t, brute_force(images @ captions.T, 3))


def test_both_reports_progress_in_scanned_image_rows() -> None:
    images, captions = exact_vectors(4, 23, 41, tied=False)
    reports: list[tuple[int, int]] = []
    retrieve_both(
        VectorsAnnotator(images, captions),
        np.arange(23),
        np.arange(41),
        3,
        n_images=23,
        n_captions=41,
        chunk_size=10,
        device="cpu",
        progress=lambda done, total: reports.append((done, total)),
    )
    assert reports == [(10, 23), (20, 23), (23, 23)]


def test_both_gives_a_pair_the_same_score_in_both_directions() -> None:
    rng = np.random.default_rng(9)
    images = rng.standard_normal((60, 16)).astype(np.float32)
    captions = rng.standard_normal((90, 16)).astype(np.float32)
    i2t, t2i = both(
        VectorsAnnotator(images, captions),
        np.arange(60),
        np.arange(90),
        90,
        n_images=60,
        n_captions=90,
        chunk_size=25,
    )
    from_images = {
        (image, int(caption)): float(score)
        for image in range(60)
        for caption, score in zip(i2t.indices[image], i2t.scores[image], strict=True)
    }
    from_captions = {
        (int(image), caption): float(score)
        for caption in range(90)
        for image, score in zip(t2i.indices[caption][:60], t2i.scores[caption][:60], strict=True)
    }
    assert from_images == from_captions
    assert len(from_images) == 60 * 90


def test_both_asks_an_annotator_that_overrides_similarity() -> None:
    images, captions = exact_vectors(6, 30, 50, tied=False)
    i2t, t2i = both(
        ScaledVectorsAnnotator(images, captions),
        np.arange(30),
        np.arange(50),
        4,
        n_images=30,
        n_captions=50,
    )
    assert_same(i2t, brute_force(-(images @ captions.T), 4))
    assert_same(t2i, brute_force(-(images @ captions.T).T, 4))


def test_both_leaves_non_finite_vectors_to_similarity() -> None:
    images, captions = exact_vectors(6, 10, 12, tied=False)
    images[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        both(VectorsAnnotator(images, captions), [3], [], 2, n_images=10, n_captions=12)
    images[3, 0] = np.inf  # infinite scores: ranked by similarity() and topk_rows, as before
    annotator = VectorsAnnotator(images, captions)
    i2t, _ = both(annotator, [3], [], 2, n_images=10, n_captions=12)
    expected = retrieve_i2t(annotator, np.array([3]), 2, n_captions=12)
    assert_same(i2t, (expected.indices, expected.scores))
    assert np.isinf(i2t.scores).all()


def test_both_rejects_bad_arguments() -> None:
    annotator = FixedAnnotator(np.zeros((4, 5), dtype=np.float32))
    with pytest.raises(ValueError, match="k must be a positive integer"):
        both(annotator, [0], [0], 0, n_images=4, n_captions=5)
    with pytest.raises(ValueError, match=r"query image rows must lie in 0\.\.3"):
        both(annotator, [4], [], 1, n_images=4, n_captions=5)
    with pytest.raises(ValueError, match=r"query caption rows must lie in 0\.\.4"):
        both(annotator, [], [-1], 1, n_images=4, n_captions=5)
    with pytest.raises(ValueError, match="chunk_size"):
        both(annotator, [0], [], 1, n_images=4, n_captions=5, chunk_size=0)
    with pytest.raises(ValueError, match=r"expected \(4, 5\)"):
        both(
            IgnoresTargets(np.zeros((4, 6), dtype=np.float32)),
            [0],
            [0],
            1,
            n_images=4,
            n_captions=5,
        )


def test_both_passes_vector_problems_on_from_similarity() -> None:
    images, captions = exact_vectors(1, 5, 7, tied=False)
    unprepared = VectorsAnnotator(images, captions)
    unprepared.image_vectors = None
    with pytest.raises(RuntimeError, match="call prepare"):
        both(unprepared, [0], [], 1, n_images=5, n_captions=7)
    mismatched = VectorsAnnotator(images, captions[:, :3])
    with pytest.raises(ValueError, match="mismatch"):
        both(mismatched, [0], [0], 1, n_images=5, n_captions=7)
