"""The annotator that ranks with an external model's exported vectors (no Django needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mitl.annotators import build_annotator
from mitl.annotators.base import AnnotatorError, Corpus
from mitl.annotators.precomputed_embeddings import PrecomputedEmbeddingAnnotator
from mitl.retrieval.both import retrieve_both
from mitl.retrieval.engines import plain_embeddings

N_IMAGES, PER_IMAGE, DIM = 5, 2, 3
IMAGE_IDS = np.arange(70, 70 + N_IMAGES)
CAPTION_IDS = np.arange(500, 500 + N_IMAGES * PER_IMAGE)


def make_corpus() -> Corpus:
    return Corpus(
        image_ids=IMAGE_IDS,
        caption_ids=CAPTION_IDS,
        caption_texts=tuple(f"caption {i}" for i in range(len(CAPTION_IDS))),
        caption_image=np.repeat(np.arange(N_IMAGES), PER_IMAGE),
    )


def vectors(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw (image, caption) vectors by corpus row, not unit length."""
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((N_IMAGES, DIM)) * 3,
        rng.standard_normal((len(CAPTION_IDS), DIM)) * 3,
    )


def write_shuffled(path: Path, images: np.ndarray, captions: np.ndarray, seed: int = 1) -> str:
    """Save the vectors with their ids shuffled, plus one id of each kind the corpus lacks."""
    rng = np.random.default_rng(seed)
    image_ids = np.r_[IMAGE_IDS, 9]
    caption_ids = np.r_[CAPTION_IDS, 8]
    image_rows = np.r_[images, np.full((1, DIM), 1e6)]
    caption_rows = np.r_[captions, np.full((1, DIM), -1e6)]
    i, c = rng.permutation(len(image_ids)), rng.permutation(len(caption_ids))
    np.savez(
        path,
        image_ids=image_ids[i],
        image_vectors=image_rows[i],
        caption_ids=caption_ids[c],
        caption_vectors=caption_rows[c],
    )
    return str(path)


def prepared(config: dict) -> PrecomputedEmbeddingAnnotator:
    annotator = build_annotator(kind="embeddings", name="external", config=config)
    assert isinstance(annotator, PrecomputedEmbeddingAnnotator)
    annotator.prepare(make_corpus())
    return annotator


def test_scores_are_cosines_of_the_file_vectors_matched_by_id(tmp_path: Path) -> None:
    images, captions = vectors(0)
    annotator = prepared({"vectors": write_shuffled(tmp_path / "v.npz", images, captions)})
    unit_images = images / np.linalg.norm(images, axis=1, keepdims=True)
    unit_captions = captions / np.linalg.norm(captions, axis=1, keepdims=True)
    scores = annotator.similarity(np.arange(N_IMAGES), np.arange(len(CAPTION_IDS)))
    np.testing.assert_allclose(scores, unit_images @ unit_captions.T, rtol=1e-5, atol=1e-6)
    assert scores.dtype == np.float32
    assert annotator.store is None and not annotator.uses_store  # never copied into the cache


def test_normalize_false_keeps_the_models_own_dot_product(tmp_path: Path) -> None:
    images, captions = vectors(2)
    path = write_shuffled(tmp_path / "v.npz", images, captions)
    annotator = prepared({"vectors": path, "normalize": False})
    scores = annotator.similarity(np.array([4, 0]), np.array([1, 9]))
    np.testing.assert_allclose(scores, images[[4, 0]] @ captions[[1, 9]].T, rtol=1e-5)


def test_retrieval_uses_the_fast_dot_product_path_and_ranks_like_brute_force(
    tmp_path: Path,
) -> None:
    images, captions = vectors(3)
    annotator = prepared({"vectors": write_shuffled(tmp_path / "v.npz", images, captions)})
    assert plain_embeddings(annotator) is not None  # the engines compute the blocks themselves
    full = annotator.similarity(np.arange(N_IMAGES), np.arange(len(CAPTION_IDS)))
    i2t, t2i = retrieve_both(
        annotator,
        np.arange(N_IMAGES),
        np.arange(len(CAPTION_IDS)),
        3,
        n_images=N_IMAGES,
        n_captions=len(CAPTION_IDS),
    )
    np.testing.assert_array_equal(i2t.indices, np.argsort(-full, axis=1, kind="stable")[:, :3])
    np.testing.assert_array_equal(t2i.indices, np.argsort(-full.T, axis=1, kind="stable")[:, :3])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.pop("caption_vectors"), "lacks the array(s) caption_vectors"),
        (lambda a: a.update(image_ids=a["image_ids"][1:]), "image_vectors must have shape"),
        (lambda a: a.update(image_ids=a["image_ids"][[0, 0, 2, 3, 4, 5]]), "repeats the id"),
        (lambda a: a.update(caption_ids=a["caption_ids"] + 1000), "caption ids are missing"),
        (lambda a: a.update(caption_vectors=a["caption_vectors"][:, :2]), "caption vectors 2"),
        (lambda a: a["image_vectors"].__setitem__((2, 1), np.nan), "NaN or infinite"),
        (lambda a: a.update(image_vectors=a["image_vectors"].astype(str)), "must be numbers"),
    ],
)
def test_a_bad_file_is_refused_with_a_message_naming_it(
    tmp_path: Path, change, message: str
) -> None:
    images, captions = vectors(4)
    path = tmp_path / "bad.npz"
    arrays = {
        "image_ids": np.r_[IMAGE_IDS, 9],
        "image_vectors": np.r_[images, np.ones((1, DIM))],
        "caption_ids": CAPTION_IDS.copy(),
        "caption_vectors": captions,
    }
    change(arrays)
    np.savez(path, **arrays)
    with pytest.raises(AnnotatorError, match="external") as caught:
        prepared({"vectors": str(path)})
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(AnnotatorError, match="must be a file path"):
        build_annotator(kind="embeddings", name="x", config={})
    with pytest.raises(AnnotatorError, match=r"must be an \.npz file"):
        build_annotator(kind="embeddings", name="x", config={"vectors": "v.npy"})
    with pytest.raises(AnnotatorError, match="is not an existing file"):
        build_annotator(kind="embeddings", name="x", config={"vectors": str(tmp_path / "n.npz")})
    single = tmp_path / "single.npz"
    with single.open("wb") as handle:
        np.save(handle, np.zeros(3))
    with pytest.raises(AnnotatorError, match="holds a single array"):
        prepared({"vectors": str(single)})
