"""The PCME plausible-match annotator on instance labels (no Django needed)."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.annotators.base import AnnotatorError, Corpus
from mitl.annotators.object_labels import ObjectLabelsAnnotator
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i
from mitl.synthetic.generation import generate

# Image rows: 0 {cat, dog}, 1 {cat, dog}, 2 {cat}, 3 {cat, dog, car}, 4 {car}, 5 unlabelled.
LABELS: list[list[str]] = [
    ["cat", "dog"],
    ["dog", "cat"],
    ["cat"],
    ["car", "cat", "dog"],
    ["car"],
    [],
]


def make_corpus(labels: list[list[str]] | None, captions_per_image: int = 1) -> Corpus:
    """Build a corpus with `captions_per_image` captions per image, in image order."""
    n_images = len(labels) if labels is not None else 3
    owners = np.repeat(np.arange(n_images), captions_per_image)
    return Corpus(
        image_ids=np.arange(10, 10 + n_images),
        caption_ids=np.arange(100, 100 + len(owners)),
        caption_texts=tuple(f"caption {row}" for row in range(len(owners))),
        caption_image=owners,
        image_labels=None if labels is None else tuple(tuple(row) for row in labels),
    )


def prepared(corpus: Corpus, **config: object) -> ObjectLabelsAnnotator:
    annotator = ObjectLabelsAnnotator(name="labels-test", config=config)
    annotator.prepare(corpus)
    return annotator


def full_matrix(annotator: ObjectLabelsAnnotator, corpus: Corpus) -> np.ndarray:
    return annotator.similarity(np.arange(corpus.n_images), np.arange(corpus.n_captions))


def reference(corpus: Corpus, zeta: int) -> np.ndarray:
    """Score every pair with plain set arithmetic, straight from the documented formula."""
    assert corpus.image_labels is not None
    sets = [set(labels) for labels in corpus.image_labels]
    most = max(len(labels) for labels in sets)
    weight = 2 * most + 1
    expected = np.zeros((corpus.n_images, corpus.n_captions))
    for image, mine in enumerate(sets):
        for caption, owner in enumerate(corpus.caption_image):
            theirs = sets[owner]
            shared, differing = len(mine & theirs), len(mine ^ theirs)
            plausible = differing <= zeta and bool(mine) and bool(theirs)
            expected[image, caption] = plausible * weight * (most + 1) + weight * shared - differing
    return expected


def top_captions(annotator: ObjectLabelsAnnotator, image: int, n_captions: int) -> list[int]:
    return (
        retrieve_i2t(annotator, np.array([image]), n_captions, n_captions=n_captions)
        .indices[0]
        .tolist()
    )


@pytest.mark.parametrize("zeta", [0, 1, 2, 5])
def test_matches_the_documented_formula(zeta: int) -> None:
    corpus = make_corpus(LABELS, captions_per_image=2)
    actual = full_matrix(prepared(corpus, zeta=zeta), corpus)
    assert actual.dtype == np.float32
    np.testing.assert_array_equal(actual, reference(corpus, zeta))


def plausible_rows(annotator: ObjectLabelsAnnotator, image: int, corpus: Corpus) -> set[int]:
    """Return the captions scored as plausible matches of `image` (the bonus term is set)."""
    most = max(len(set(labels)) for labels in LABELS)
    bonus = (2 * most + 1) * (most + 1) - 2 * most  # the lowest plausible score
    scores = annotator.similarity(np.array([image]), np.arange(corpus.n_captions))[0]
    return set(np.flatnonzero(scores >= bonus).tolist())


def test_zeta_zero_accepts_only_identical_label_sets() -> None:
    corpus = make_corpus(LABELS)
    annotator = prepared(corpus, zeta=0)
    assert plausible_rows(annotator, 0, corpus) == {0, 1}
    assert plausible_rows(annotator, 4, corpus) == {4}
    assert top_captions(annotator, 0, corpus.n_captions)[:2] == [0, 1]


def test_zeta_one_allows_one_differing_label() -> None:
    corpus = make_corpus(LABELS)
    annotator = prepared(corpus, zeta=1)
    assert plausible_rows(annotator, 0, corpus) == {0, 1, 2, 3}
    assert plausible_rows(annotator, 4, corpus) == {4}  # {car} vs {cat, car, dog} differ twice


def test_ranking_puts_plausible_first_then_more_shared_then_fewer_differences() -> None:
    corpus = make_corpus(LABELS)
    annotator = prepared(corpus, zeta=1)
    # Equal label sets tie and fall to the lower row; the superset shares two labels, the subset
    # one. Then the implausible: no shared label, and the unlabelled image (2 differing labels)
    # before {car} (3 differing).
    assert top_captions(annotator, 0, corpus.n_captions) == [0, 1, 3, 2, 5, 4]
    t2i = retrieve_t2i(annotator, np.array([2]), corpus.n_images, n_images=corpus.n_images)
    assert t2i.indices[0].tolist() == [2, 0, 1, 3, 5, 4]


def test_non_plausible_pairs_still_rank_by_shared_labels() -> None:
    corpus = make_corpus(LABELS)
    annotator = prepared(corpus, zeta=0)
    assert top_captions(annotator, 0, corpus.n_captions) == [0, 1, 3, 2, 5, 4]


def test_captions_take_the_labels_of_their_original_image() -> None:
    corpus = make_corpus(LABELS, captions_per_image=3)
    matrix = full_matrix(prepared(corpus), corpus)
    for owner in range(corpus.n_images):
        columns = matrix[:, corpus.caption_image == owner]
        assert (columns == columns[:, :1]).all()


def test_repeated_labels_count_once() -> None:
    corpus = make_corpus([["person", "person", "dog"], ["person", "dog"], ["dog"]])
    matrix = full_matrix(prepared(corpus, zeta=0), corpus)
    assert matrix[0, 0] == matrix[0, 1] > matrix[0, 2]


def test_unlabelled_images_are_never_plausible() -> None:
    corpus = make_corpus([["cat"], [], []])
    matrix = full_matrix(prepared(corpus, zeta=1), corpus)
    assert matrix[1, 2] == 0  # two unlabelled images: nothing shared, nothing differs
    assert matrix[0, 1] < matrix[0, 0]


def test_synthetic_scene_labels_work() -> None:
    dataset = generate(n_images=12, seed=3)
    labels = [scene.labels for scene in dataset.scenes]
    corpus = make_corpus(labels, captions_per_image=2)
    annotator = prepared(corpus, zeta=1)
    np.testing.assert_array_equal(full_matrix(annotator, corpus), reference(corpus, 1))


@pytest.mark.parametrize("labels", [None, [[], [], []]])
def test_corpus_without_labels_is_refused(labels: list[list[str]] | None) -> None:
    with pytest.raises(AnnotatorError, match="dataset has no object labels"):
        prepared(make_corpus(labels))


@pytest.mark.parametrize("zeta", [-1, True, "1", 1.0])
def test_bad_zeta_is_refused(zeta: object) -> None:
    with pytest.raises(AnnotatorError, match="zeta"):
        ObjectLabelsAnnotator(name="x", config={"zeta": zeta})


def test_unknown_config_key_is_refused() -> None:
    with pytest.raises(AnnotatorError, match="zetta"):
        ObjectLabelsAnnotator(name="x", config={"zetta": 1})


def test_similarity_before_prepare_fails() -> None:
    with pytest.raises(RuntimeError, match="prepare"):
        ObjectLabelsAnnotator(name="x", config={}).similarity(np.array([0]), np.array([0]))


def test_empty_blocks_have_the_right_shape() -> None:
    corpus = make_corpus(LABELS)
    annotator = prepared(corpus)
    assert annotator.similarity(np.array([], dtype=np.int64), np.arange(3)).shape == (0, 3)
    assert annotator.similarity(np.arange(2), np.array([], dtype=np.int64)).shape == (2, 0)
