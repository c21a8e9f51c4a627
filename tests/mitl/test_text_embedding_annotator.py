"""The sentence-embedding annotator, on the packaged all-MiniLM-L6-v2 model (no Django needed)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mitl.annotators.base import AnnotatorError, Corpus, Modality
from mitl.annotators.text_embedding import TextEmbeddingAnnotator, default_model_path
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i

# The model is a local directory; make sure nothing ever reaches for the Hugging Face Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DOG = "a dog runs on the grass"
PUPPY = "a puppy running in a field"
CAR = "a red car parked on the street"
Encode = Callable[[list[str]], np.ndarray]
PASTA = "a plate of pasta with tomato sauce"


def make_corpus(captions_per_image: list[list[str]]) -> Corpus:
    """Build a text-only corpus whose image row i owns the captions listed at position i."""
    texts = [text for captions in captions_per_image for text in captions]
    owners = [row for row, captions in enumerate(captions_per_image) for _ in captions]
    return Corpus(
        image_ids=np.arange(100, 100 + len(captions_per_image)),
        caption_ids=np.arange(500, 500 + len(texts)),
        caption_texts=tuple(texts),
        caption_image=np.array(owners, dtype=np.int64),
    )


class CountingAnnotator(TextEmbeddingAnnotator):
    """Record the caption rows sent to the encoder."""

    def __init__(self, **config: object) -> None:
        super().__init__(name="minilm-test", config={"device": "cpu", **config})
        self.embedded: list[int] = []

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        self.embedded.extend(int(row) for row in rows)
        return super().embed_captions(corpus, rows)


class DictStore:
    """An in-memory EmbeddingStore keyed by (modality, external id)."""

    def __init__(self) -> None:
        self.vectors: dict[tuple[Modality, int], np.ndarray] = {}

    def load(self, modality: Modality, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = np.array([(modality, int(i)) in self.vectors for i in ids], dtype=bool)
        if not found.any():
            return found, np.zeros((0, 0), dtype=np.float32)
        return found, np.stack([self.vectors[(modality, int(i))] for i in ids[found]])

    def save(self, modality: Modality, ids: np.ndarray, vectors: np.ndarray) -> None:
        for item, vector in zip(ids, vectors, strict=True):
            self.vectors[(modality, int(item))] = np.array(vector, dtype=np.float32)


@pytest.fixture(scope="module")
def encode() -> Encode:
    """Load the model once for the module; annotators on the same path and device share it."""
    model = CountingAnnotator().model()

    def run(texts: list[str]) -> np.ndarray:
        vectors = model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
        return vectors.astype(np.float64)

    return run


def prepared(corpus: Corpus, **config: object) -> CountingAnnotator:
    annotator = CountingAnnotator(**config)
    annotator.prepare(corpus)
    return annotator


def full_matrix(annotator: TextEmbeddingAnnotator, corpus: Corpus) -> np.ndarray:
    return annotator.similarity(np.arange(corpus.n_images), np.arange(corpus.n_captions))


def test_default_model_path_is_the_packaged_minilm() -> None:
    path = default_model_path()
    assert path is not None and (path / "modules.json").is_file()
    assert CountingAnnotator().model_path == path


def test_missing_model_path_is_named() -> None:
    with pytest.raises(AnnotatorError, match="/no/such/model"):
        TextEmbeddingAnnotator(name="x", config={"model_path": "/no/such/model"})


@pytest.mark.parametrize(
    ("key", "value"),
    [("batch_size", 0), ("batch_size", True), ("batch_size", "8"), ("device", "tpu"),
     ("model_path", ""), ("model_path", 3)],
)  # fmt: skip
def test_bad_config_values_are_refused(key: str, value: object) -> None:
    with pytest.raises(AnnotatorError, match=key):
        TextEmbeddingAnnotator(name="x", config={key: value})


def test_paraphrases_rank_above_unrelated_captions(encode: Encode) -> None:
    corpus = make_corpus([[DOG], [PUPPY, "a small dog playing on a lawn"], [CAR], [PASTA]])
    annotator = prepared(corpus)
    top = retrieve_t2i(annotator, np.array([0]), 4, n_images=corpus.n_images)
    assert top.indices[0, 0] == 1  # the dog caption finds the puppy image
    # Its own image holds nothing else, so the pair scores exactly 0 (not 1).
    assert top.scores[0, list(top.indices[0]).index(0)] == 0
    scores = annotator.similarity(np.array([1]), np.arange(corpus.n_captions))[0]
    assert scores[0] > scores[3] and scores[0] > scores[4]  # dog above car and pasta


def test_matches_a_dense_reference(encode: Encode) -> None:
    captions = [[DOG, PASTA], [PUPPY], [CAR, "a vehicle parked by the road", PUPPY], []]
    corpus = make_corpus(captions)
    vectors = encode(list(corpus.caption_texts))
    expected = np.zeros((corpus.n_images, corpus.n_captions))
    for image in range(corpus.n_images):
        own = np.flatnonzero(corpus.caption_image == image)
        for caption in range(corpus.n_captions):
            others = [row for row in own if row != caption]
            if not others:
                continue
            mean = vectors[others].mean(axis=0)
            expected[image, caption] = vectors[caption] @ mean / np.linalg.norm(mean)
    actual = full_matrix(prepared(corpus), corpus)
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, atol=1e-5)


def test_leave_one_out_hides_the_caption_from_its_own_image(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], [CAR]])
    annotator = prepared(corpus)
    top = retrieve_t2i(annotator, np.array([0]), 3, n_images=corpus.n_images)
    # Image 0 would win with the dog caption in its mean; without it only pasta is left.
    assert top.indices[0, 0] == 1
    dog, pasta = encode([DOG, PASTA])
    assert annotator.similarity(np.array([0]), np.array([0]))[0, 0] == pytest.approx(
        dog @ pasta, abs=1e-5
    )
    # An image's only caption scores exactly 0 with it.
    assert annotator.similarity(np.array([1, 2]), np.array([2, 3])).diagonal().tolist() == [0, 0]


def test_similarity_is_the_same_whichever_side_is_the_query(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], [CAR, PASTA]])
    annotator = prepared(corpus)
    matrix = full_matrix(annotator, corpus)
    i2t = retrieve_i2t(annotator, np.arange(3), 5, n_captions=5)
    t2i = retrieve_t2i(annotator, np.arange(5), 3, n_images=3)
    np.testing.assert_array_equal(i2t.scores, np.take_along_axis(matrix, i2t.indices, axis=1))
    np.testing.assert_array_equal(t2i.scores, np.take_along_axis(matrix.T, t2i.indices, axis=1))


def test_store_is_reused_and_only_holds_caption_vectors(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], [CAR]])
    store = DictStore()
    first = CountingAnnotator()
    first.store = store
    first.prepare(corpus)
    assert sorted(first.embedded) == [0, 1, 2, 3]
    assert {modality for modality, _ in store.vectors} == {"caption"}

    second = CountingAnnotator()  # the platform builds a fresh annotator for every batch
    second.store = store
    second.prepare(corpus)
    assert second.embedded == []
    np.testing.assert_array_equal(full_matrix(second, corpus), full_matrix(first, corpus))

    grown = make_corpus([[DOG, PASTA], [PUPPY], [CAR, "a vehicle parked by the road"]])
    third = CountingAnnotator()
    third.store = store
    third.prepare(grown)
    assert third.embedded == [4]  # only the new caption goes through the encoder


def test_progress_is_reported_per_batch(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], [CAR, "a vehicle parked by the road"]])
    annotator = CountingAnnotator(batch_size=2)
    reports: list[tuple[str, int, int]] = []
    annotator.progress = lambda what, done, total: reports.append((what, done, total))
    annotator.prepare(corpus)
    assert reports == [("embedding captions", done, 5) for done in (2, 4, 5)]


def test_batching_does_not_change_the_vectors(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], [CAR, "a vehicle parked by the road"]])
    small, large = prepared(corpus, batch_size=1), prepared(corpus, batch_size=64)
    np.testing.assert_allclose(full_matrix(small, corpus), full_matrix(large, corpus), atol=1e-5)


def test_image_vectors_are_derived_from_the_captions(encode: Encode) -> None:
    corpus = make_corpus([[DOG, PASTA], [PUPPY], []])
    annotator = prepared(corpus)
    images = annotator.embed_images(corpus, np.arange(3))
    assert annotator.image_vectors is not None
    np.testing.assert_array_equal(images, annotator.image_vectors)
    np.testing.assert_allclose(np.linalg.norm(images[:2], axis=1), 1, atol=1e-6)
    assert not images[2].any()  # no captions: the zero vector, not NaN


def test_similarity_before_prepare_fails() -> None:
    with pytest.raises(RuntimeError, match="prepare"):
        CountingAnnotator().similarity(np.array([0]), np.array([0]))


def test_unloadable_model_directory_is_an_annotator_error(tmp_path: Path) -> None:
    config = {"model_path": str(tmp_path), "device": "cpu"}
    annotator = TextEmbeddingAnnotator(name="x", config=config)
    with pytest.raises(AnnotatorError, match=str(tmp_path)):
        annotator.prepare(make_corpus([[DOG]]))
