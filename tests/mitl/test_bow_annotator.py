"""The TF-IDF bag-of-words annotator and the annotator registry (no Django needed)."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from mitl.annotators import (
    AnnotatorError,
    BowAnnotator,
    Corpus,
    annotator_class,
    build_annotator,
)
from mitl.annotators.bow import STOP_WORDS, tokenize
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i


def make_corpus(captions_per_image: list[list[str]]) -> Corpus:
    """Build a corpus whose image row i owns the captions listed at position i."""
    texts = [text for captions in captions_per_image for text in captions]
    owners = [row for row, captions in enumerate(captions_per_image) for _ in captions]
    return Corpus(
        image_ids=np.arange(100, 100 + len(captions_per_image)),
        caption_ids=np.arange(500, 500 + len(texts)),
        caption_texts=tuple(texts),
        caption_image=np.array(owners, dtype=np.int64),
    )


def prepared(corpus: Corpus, **config: bool) -> BowAnnotator:
    annotator = build_annotator(kind="bow", name="bow-test", config=config)
    assert isinstance(annotator, BowAnnotator)
    annotator.prepare(corpus)
    return annotator


def full_matrix(annotator: BowAnnotator, corpus: Corpus) -> np.ndarray:
    return annotator.similarity(np.arange(corpus.n_images), np.arange(corpus.n_captions))


def reference_similarity(corpus: Corpus, *, stop_words: bool, sublinear_tf: bool) -> np.ndarray:
    """Score every pair with plain dense loops, straight from the documented definition."""
    documents = [Counter(tokenize(text, stop_words=stop_words)) for text in corpus.caption_texts]
    terms = sorted({term for document in documents for term in document})
    n = len(documents)
    vectors = np.zeros((n, len(terms)))
    for row, document in enumerate(documents):
        for column, term in enumerate(terms):
            count = document[term]
            if count:
                df = sum(term in other for other in documents)
                tf = 1 + math.log(count) if sublinear_tf else count
                vectors[row, column] = tf * (math.log((1 + n) / (1 + df)) + 1)
        norm = np.linalg.norm(vectors[row])
        if norm:
            vectors[row] /= norm

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        denominator = np.linalg.norm(a) * np.linalg.norm(b)
        return float(a @ b / denominator) if denominator else 0.0

    expected = np.zeros((corpus.n_images, n))
    for image in range(corpus.n_images):
        own = np.flatnonzero(corpus.caption_image == image)
        centroid = vectors[own].sum(axis=0)
        for caption in range(n):
            leave_out = centroid - vectors[caption] if caption in own else centroid
            expected[image, caption] = cosine(vectors[caption], leave_out)
    return expected


RANDOM_WORDS = [
    "dog",
    "cat",
    "man",
    "woman",
    "red",
    "blue",
    "ball",
    "field",
    "street",
    "bus",
    "a",
    "the",
    "on",
    "in",
    "of",
    "with",
]


@pytest.mark.parametrize("stop_words", [True, False])
@pytest.mark.parametrize("sublinear_tf", [True, False])
def test_matches_a_dense_reference(stop_words: bool, sublinear_tf: bool) -> None:
    rng = np.random.default_rng(5)
    images = []
    for _ in range(12):
        n_captions = int(rng.integers(0, 4))  # includes images without captions
        images.append(
            [
                " ".join(rng.choice(RANDOM_WORDS, size=int(rng.integers(1, 7))))
                for _ in range(n_captions)
            ]
        )
    corpus = make_corpus(images)
    annotator = prepared(corpus, stop_words=stop_words, sublinear_tf=sublinear_tf)
    scores = full_matrix(annotator, corpus)
    assert scores.dtype == np.float32
    expected = reference_similarity(corpus, stop_words=stop_words, sublinear_tf=sublinear_tf)
    np.testing.assert_allclose(scores, expected, atol=1e-6)


def test_identical_captions_make_two_images_rank_each_other_first() -> None:
    corpus = make_corpus(
        [
            ["A zebra grazing beside a wooden fence", "Striped animal near fence"],
            ["A zebra grazing beside a wooden fence", "Black and white horse by a rail"],
            ["Two men playing tennis on a clay court", "Tennis players at the net"],
            ["A red bus parked on a city street", "Double decker bus downtown"],
        ]
    )
    annotator = prepared(corpus)
    # Caption rows 0 and 2 are the identical texts of images 0 and 1.
    top = retrieve_i2t(annotator, np.array([0, 1]), 1, n_captions=corpus.n_captions)
    np.testing.assert_array_equal(top.indices[:, 0], [2, 0])
    assert (top.scores > 0.5).all()


def test_leave_one_out_hides_the_caption_from_its_own_image() -> None:
    corpus = make_corpus(
        [
            ["alpha bravo", "charlie delta", "echo foxtrot"],
            ["golf hotel", "india juliet"],
            ["kilo lima"],
        ]
    )
    scores = full_matrix(prepared(corpus), corpus)
    # Every word is unique, so only a caption's own vector could make it match its image.
    np.testing.assert_array_equal(scores, np.zeros_like(scores))


def test_leave_one_out_uses_the_other_captions() -> None:
    corpus = make_corpus([["dog running", "dog sleeping", "cat"], ["dog running"]])
    annotator = prepared(corpus)
    scores = full_matrix(annotator, corpus)
    # "dog sleeping" shares "dog" with a sibling, "cat" shares nothing.
    assert scores[0, 1] > 0
    assert scores[0, 2] == 0
    # Image 1's only caption has nothing left to compare against.
    assert scores[1, 3] == 0
    # Without leave-one-out image 0 would score its own "dog running" as well as image 1 does.
    assert 0 < scores[0, 0] < scores[0, 3]


def test_similarity_is_the_same_whichever_side_is_the_query() -> None:
    corpus = make_corpus(
        [
            ["a dog on a couch", "puppy sleeping on the sofa"],
            ["a cat on a couch", "kitten on a sofa"],
            ["people on a beach"],
            [],
        ]
    )
    annotator = prepared(corpus)
    matrix = full_matrix(annotator, corpus)
    # Single rows and columns, permuted and repeated, pick the same numbers out of the matrix.
    for image in range(corpus.n_images):
        row = annotator.similarity(np.array([image]), np.arange(corpus.n_captions))
        np.testing.assert_allclose(row[0], matrix[image], atol=1e-7)
    for caption in range(corpus.n_captions):
        column = annotator.similarity(np.arange(corpus.n_images), np.array([caption]))
        np.testing.assert_allclose(column[:, 0], matrix[:, caption], atol=1e-7)
    images, captions = np.array([2, 0, 0, 3]), np.array([4, 1, 0])
    np.testing.assert_allclose(
        annotator.similarity(images, captions), matrix[np.ix_(images, captions)], atol=1e-7
    )
    i2t = retrieve_i2t(annotator, np.arange(4), 5, n_captions=5, chunk_size=3)
    t2i = retrieve_t2i(annotator, np.arange(5), 4, n_images=4, chunk_size=2)
    for image in range(4):
        for caption, score in zip(i2t.indices[image], i2t.scores[image], strict=True):
            position = list(t2i.indices[caption]).index(image)
            assert t2i.scores[caption, position] == score


def test_stop_word_only_caption_scores_zero_without_nan() -> None:
    corpus = make_corpus([["the", "a photo of a dog"], ["there is a picture", "a dog"]])
    scores = full_matrix(prepared(corpus), corpus)
    assert not np.isnan(scores).any()
    np.testing.assert_array_equal(scores[:, 0], 0)
    np.testing.assert_array_equal(scores[:, 2], 0)
    assert scores[1, 1] > 0


def test_stop_words_can_be_kept() -> None:
    corpus = make_corpus([["the"], ["the"]])
    scores = full_matrix(prepared(corpus, stop_words=False), corpus)
    assert scores[1, 0] == pytest.approx(1.0)
    assert scores[0, 0] == 0


def test_stop_list_drops_function_words_and_medium_words() -> None:
    assert {"a", "an", "the", "of", "on", "in", "and", "with", "is", "are", "there"} <= STOP_WORDS
    assert {"photo", "picture", "image", "showing"} <= STOP_WORDS
    assert tokenize("A PHOTO of 2 Dogs, showing-tricks!") == ["2", "dogs", "tricks"]


def test_corpus_without_any_token_gives_zeros() -> None:
    corpus = make_corpus([["the of"], [], ["a an"]])
    scores = full_matrix(prepared(corpus), corpus)
    assert scores.shape == (3, 2)
    np.testing.assert_array_equal(scores, 0)


def test_similarity_before_prepare_fails() -> None:
    annotator = build_annotator(kind="bow", name="early", config={})
    with pytest.raises(RuntimeError, match="prepare"):
        annotator.similarity(np.arange(1), np.arange(1))


def test_out_of_range_rows_fail() -> None:
    corpus = make_corpus([["dog"]])
    with pytest.raises(ValueError, match="image rows"):
        prepared(corpus).similarity(np.array([1]), np.array([0]))


def test_unknown_config_key_is_named() -> None:
    with pytest.raises(AnnotatorError, match="unknown config key 'min_df'") as raised:
        build_annotator(kind="bow", name="tfidf", config={"min_df": 2})
    message = str(raised.value)
    assert "'tfidf'" in message
    assert "stop_words" in message and "sublinear_tf" in message


def test_non_boolean_option_is_rejected() -> None:
    with pytest.raises(AnnotatorError, match="'stop_words'"):
        build_annotator(kind="bow", name="tfidf", config={"stop_words": "yes"})


def test_unknown_kind_lists_known_kinds() -> None:
    with pytest.raises(
        AnnotatorError, match=re.escape("unknown annotator kind 'clip-xl'")
    ) as raised:
        build_annotator(kind="clip-xl", name="big", config={})
    assert "bow" in str(raised.value)
    assert annotator_class("bow") is BowAnnotator


def test_corpus_checks_its_shapes() -> None:
    with pytest.raises(ValueError, match="caption_image"):
        Corpus(
            image_ids=np.arange(2),
            caption_ids=np.arange(1),
            caption_texts=("dog",),
            caption_image=np.array([2]),
        )
    corpus = make_corpus([["dog", "cat"], []])
    assert (corpus.n_images, corpus.n_captions) == (2, 2)
    assert corpus.caption_image.dtype == np.int64
