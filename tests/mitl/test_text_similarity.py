"""Free-text scoring (`text_similarity`) of the text-only annotators (no Django needed)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mitl.annotators import annotator_class, build_annotator
from mitl.annotators import bow as bow_module
from mitl.annotators.base import Annotator, AnnotatorError, Corpus
from mitl.annotators.object_labels import ObjectLabelsAnnotator
from mitl.annotators.text_embedding import TextEmbeddingAnnotator
from tests.mitl.test_bow_annotator import RANDOM_WORDS, make_corpus

# The model is a local directory; make sure nothing ever reaches for the Hugging Face Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Image 2 has a single caption, image 3 none, and caption 5 holds only stop words.
CAPTIONS = [
    ["a dog runs on the grass", "a brown dog playing in a park", "puppy on a lawn"],
    ["a red car parked on the street", "a vehicle by the road"],
    ["a plate of pasta with tomato sauce"],
    [],
    ["a man riding a red bicycle", "a cyclist on a city street", "a dog chasing a bike"],
]
ONLY_CAPTION = 5  # row of the single caption of image 2


def random_corpus(seed: int) -> Corpus:
    """Return random captions over a small vocabulary, some images with no or one caption."""
    rng = np.random.default_rng(seed)
    images = [
        [" ".join(rng.choice(RANDOM_WORDS, size=int(rng.integers(1, 7)))) for _ in range(count)]
        for count in rng.integers(0, 4, size=15)
    ]
    return make_corpus(images)


def scored_as_captions(annotator: Annotator, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
    """Return `text_similarity` of the captions' own texts standing in for themselves."""
    texts = [corpus.caption_texts[row] for row in rows]
    return annotator.text_similarity(texts, rows)


def assert_identity_perturbation(annotator: Annotator, corpus: Corpus, atol: float) -> None:
    """Check that each caption's own text scores every image exactly as the caption does."""
    # Repeated and shuffled rows: texts are independent of each other and of caption order.
    rows = np.random.default_rng(0).permutation(np.r_[np.arange(corpus.n_captions), 0, 2])
    scores = scored_as_captions(annotator, corpus, rows)
    assert scores.dtype == np.float32
    assert scores.shape == (len(rows), corpus.n_images)
    expected = annotator.similarity(np.arange(corpus.n_images), rows).T
    np.testing.assert_allclose(scores, expected, atol=atol)


# --- the contract --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "can"),
    [("bow", True), ("text_embedding", True), ("object_labels", False),
     ("precomputed", False), ("embeddings", False)],
)  # fmt: skip
def test_annotators_say_whether_they_score_free_text(kind: str, can: bool) -> None:
    assert annotator_class(kind).can_score_text is can


def test_an_annotator_without_it_refuses_naming_itself() -> None:
    labels = ObjectLabelsAnnotator(name="labels-test", config={})
    with pytest.raises(AnnotatorError, match=r"annotator 'labels-test' \(object_labels\)"):
        labels.text_similarity(["a dog"], np.array([-1]))


# --- bow -----------------------------------------------------------------------------------


def prepared_bow(corpus: Corpus, **config: bool) -> Annotator:
    annotator = build_annotator(kind="bow", name="bow-test", config=config)
    annotator.prepare(corpus)
    return annotator


@pytest.mark.parametrize("stop_words", [True, False])
@pytest.mark.parametrize("sublinear_tf", [True, False])
def test_bow_original_text_scores_like_its_caption(stop_words: bool, sublinear_tf: bool) -> None:
    corpus = random_corpus(seed=3)
    annotator = prepared_bow(corpus, stop_words=stop_words, sublinear_tf=sublinear_tf)
    assert_identity_perturbation(annotator, corpus, atol=1e-6)


def test_bow_texts_scored_in_blocks_match(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = make_corpus(CAPTIONS)
    annotator = prepared_bow(corpus)
    # Blocks smaller than the image count densify the other side of the product.
    monkeypatch.setattr(bow_module, "_TEXT_BLOCK", 2)
    assert_identity_perturbation(annotator, corpus, atol=1e-6)


def test_bow_a_changed_word_changes_the_scores() -> None:
    corpus = make_corpus(CAPTIONS)
    annotator = prepared_bow(corpus)
    rows = np.array([0, 0])
    original, changed = annotator.text_similarity(
        ["a dog runs on the grass", "a car runs on the grass"], rows
    )
    assert changed[1] > original[1]  # "car" now matches the car image
    assert changed[0] < original[0]  # and "dog" no longer matches its own image's captions


def test_bow_unknown_words_are_dropped() -> None:
    corpus = make_corpus(CAPTIONS)
    annotator = prepared_bow(corpus)
    rows = np.array([3, 3, -1])
    scores = annotator.text_similarity(
        ["a red car parked", "a red zzyzx car parked", "zzyzx qwerty"], rows
    )
    np.testing.assert_array_equal(scores[0], scores[1])
    np.testing.assert_array_equal(scores[2], 0)


def test_bow_empty_text_list() -> None:
    corpus = make_corpus(CAPTIONS)
    scores = prepared_bow(corpus).text_similarity([], np.array([], dtype=np.int64))
    assert scores.shape == (0, corpus.n_images) and scores.dtype == np.float32


def test_bow_text_similarity_before_prepare_fails() -> None:
    annotator = build_annotator(kind="bow", name="bow-test", config={})
    with pytest.raises(RuntimeError, match="prepare"):
        annotator.text_similarity(["a dog"], np.array([-1]))


# --- shared by both text-only annotators ---------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> TextEmbeddingAnnotator:
    """The packaged MiniLM annotator prepared on CAPTIONS, once for the module."""
    annotator = TextEmbeddingAnnotator(name="minilm-test", config={"device": "cpu"})
    annotator.prepare(make_corpus(CAPTIONS))
    return annotator


@pytest.fixture(params=["bow", "text_embedding"])
def text_only(request: pytest.FixtureRequest) -> Annotator:
    """Each text-only annotator, prepared on CAPTIONS."""
    if request.param == "bow":
        return prepared_bow(make_corpus(CAPTIONS))
    return request.getfixturevalue("minilm")


def test_a_text_replacing_no_caption_leaves_nothing_out(text_only: Annotator) -> None:
    text = CAPTIONS[2][0]
    replacing, free = text_only.text_similarity([text, text], np.array([ONLY_CAPTION, -1]))
    # Image 2 holds only this caption: left out, nothing remains; kept, it is the text itself.
    assert replacing[2] == 0
    assert free[2] == pytest.approx(1.0, abs=1e-5)
    others = np.arange(len(CAPTIONS)) != 2
    np.testing.assert_array_equal(replacing[others], free[others])


@pytest.mark.parametrize(
    ("rows", "message"),
    [(np.array([0]), "one row per text"), (np.array([0, -2]), "or be -1"),
     (np.array([0, 99]), "or be -1"), (np.array([0.0, 1.0]), "integers")],
)  # fmt: skip
def test_bad_caption_rows_are_refused(text_only: Annotator, rows: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        text_only.text_similarity(["a dog", "a cat"], rows)


# --- text_embedding ------------------------------------------------------------------------


def test_text_embedding_original_text_scores_like_its_caption(
    minilm: TextEmbeddingAnnotator,
) -> None:
    assert_identity_perturbation(minilm, make_corpus(CAPTIONS), atol=1e-5)


def test_text_embedding_a_changed_word_changes_the_scores(minilm: TextEmbeddingAnnotator) -> None:
    rows = np.array([3, 3])
    original, changed = minilm.text_similarity(
        ["a red car parked on the street", "a red cat parked on the street"], rows
    )
    assert not np.allclose(original, changed, atol=1e-3)
    assert changed[1] < original[1]  # a cat fits the car image's other caption less well


def test_text_embedding_empty_text_list(minilm: TextEmbeddingAnnotator) -> None:
    scores = minilm.text_similarity([], np.array([], dtype=np.int64))
    assert scores.shape == (0, len(CAPTIONS)) and scores.dtype == np.float32
