"""The embedding cache: computed once per (annotator version, item), shared across batches."""

from __future__ import annotations

import numpy as np
import pytest

from annotation.models import Embedding, MachineAnnotator
from mitl.annotators.base import Corpus, EmbeddingAnnotator
from mitl.config import batch_config
from pipeline.embeddings import DatabaseEmbeddingStore

pytestmark = pytest.mark.django_db


class CountingAnnotator(EmbeddingAnnotator):
    """Embeds each item as a fixed random unit vector and counts what it had to compute."""

    kind = "counting"

    def __init__(self) -> None:
        super().__init__(name="counting", config={})
        self.embedded: list[tuple[str, int]] = []

    def fixed_vectors(self, ids: np.ndarray, salt: int) -> np.ndarray:
        rows = [np.random.default_rng([int(i), salt]).normal(size=8) for i in ids]
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        self.embedded += [("image", int(corpus.image_ids[r])) for r in rows]
        return self.fixed_vectors(corpus.image_ids[rows], 1)

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        self.embedded += [("caption", int(corpus.caption_ids[r])) for r in rows]
        return self.fixed_vectors(corpus.caption_ids[rows], 2)


def corpus(n_images: int) -> Corpus:
    return Corpus(
        image_ids=np.arange(10, 10 + n_images),
        caption_ids=np.arange(100, 100 + 2 * n_images),
        caption_texts=tuple(f"caption {i}" for i in range(2 * n_images)),
        caption_image=np.repeat(np.arange(n_images), 2),
    )


@pytest.fixture
def annotator_row():
    return MachineAnnotator.objects.create(name="clip", kind="open_clip", version="1")


def prepared(store: DatabaseEmbeddingStore, data: Corpus) -> CountingAnnotator:
    annotator = CountingAnnotator()
    annotator.store = store
    annotator.prepare(data)
    return annotator


def test_a_second_prepare_reads_every_vector_from_the_cache(dataset, annotator_row):
    store = DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset)
    first = prepared(store, corpus(5))
    second = prepared(store, corpus(5))

    assert len(first.embedded) == 15
    assert second.embedded == []
    np.testing.assert_array_equal(first.image_vectors, second.image_vectors)
    np.testing.assert_array_equal(first.caption_vectors, second.caption_vectors)
    assert Embedding.objects.count() == 15


def test_only_new_items_are_embedded_when_the_corpus_grows(dataset, annotator_row):
    store = DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset)
    prepared(store, corpus(3))
    grown = prepared(store, corpus(5))

    assert sorted(grown.embedded) == [
        ("caption", 106), ("caption", 107), ("caption", 108), ("caption", 109),
        ("image", 13), ("image", 14),
    ]  # fmt: skip
    # cached and fresh vectors land on the right rows
    expected = CountingAnnotator().fixed_vectors(np.arange(10, 15), 1)
    np.testing.assert_allclose(grown.image_vectors, expected, rtol=0, atol=0)


def test_a_new_annotator_version_invalidates_the_cache(dataset, annotator_row):
    prepared(DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset), corpus(3))
    annotator_row.version = "2"
    annotator_row.save()
    again = prepared(DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset), corpus(3))

    assert len(again.embedded) == 9
    assert set(Embedding.objects.values_list("version", flat=True)) == {"1", "2"}


def test_vectors_round_trip_bit_for_bit(dataset, annotator_row):
    store = DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset)
    ids = np.array([7, 3, 5])
    vectors = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
    store.save("image", ids, vectors)

    found, loaded = store.load("image", np.array([5, 4, 7]))

    assert found.tolist() == [True, False, True]
    np.testing.assert_array_equal(loaded, vectors[[2, 0]])
    assert store.count("caption") == 0


def test_saving_an_id_twice_keeps_the_first_vector(dataset, annotator_row):
    store = DatabaseEmbeddingStore(annotator=annotator_row, dataset=dataset)
    store.save("caption", np.array([1]), np.ones((1, 4), dtype=np.float32))
    store.save("caption", np.array([1]), np.zeros((1, 4), dtype=np.float32))  # a racing twin

    _, loaded = store.load("caption", np.array([1]))
    np.testing.assert_array_equal(loaded, np.ones((1, 4), dtype=np.float32))


def test_exported_vectors_are_read_from_their_file_and_never_copied_into_the_cache(
    dataset, tmp_path
):
    """The `embeddings` kind's file is its cache: preparing it, and warming a batch's
    annotators for parallel chunks, write no Embedding rows."""
    from pipeline.annotators import annotator_create
    from pipeline.corpus import corpus_load
    from pipeline.retrieve import annotator_prepare, embeddings_warm
    from pipeline.stages import batch_create

    loaded = corpus_load(dataset=dataset)
    rng = np.random.default_rng(0)
    path = tmp_path / "vectors.npz"
    np.savez(
        path,
        image_ids=loaded.corpus.image_ids,
        image_vectors=rng.normal(size=(loaded.corpus.n_images, 4)),
        caption_ids=loaded.corpus.caption_ids,
        caption_vectors=rng.normal(size=(loaded.corpus.n_captions, 4)),
    )
    row = annotator_create(name="exported", kind="embeddings", config={"vectors": str(path)})

    annotator = annotator_prepare(row=row, dataset=dataset, loaded=loaded)
    config = {"annotators": ["exported"], "n_image_queries": 5, "n_caption_queries": 5}
    batch = batch_create(dataset=dataset, name="b", raw_config=config)
    embeddings_warm(batch=batch, config=batch_config(batch), loaded=loaded)

    assert annotator.image_vectors.shape == (loaded.corpus.n_images, 4)
    assert not Embedding.objects.exists()
