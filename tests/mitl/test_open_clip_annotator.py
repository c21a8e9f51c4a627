"""The open_clip annotator, on a tiny model with random weights saved to a local checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from mitl.annotators.base import AnnotatorError, Corpus  # noqa: E402
from mitl.annotators.open_clip import OpenClipAnnotator, read_state_dict  # noqa: E402
from mitl.clip_training import TINY_MODEL_CONFIG, create_tiny_model  # noqa: E402
from mitl.formats.captions import parse_captions_tsv  # noqa: E402

MODEL_NAME = "mitl-test-random-clip"
N_IMAGES = 6


@pytest.fixture(scope="module")
def random_weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model with random weights, saved as a plain and a wrapped state_dict."""
    folder = tmp_path_factory.mktemp("random-clip")
    torch.manual_seed(0)
    model, _, _ = create_tiny_model(MODEL_NAME, TINY_MODEL_CONFIG)
    state_dict = model.state_dict()
    config_path = folder / "model_config.json"
    config_path.write_text(json.dumps(TINY_MODEL_CONFIG), encoding="utf-8")
    plain, wrapped = folder / "plain.pt", folder / "wrapped.pt"
    torch.save(state_dict, plain)
    # As open_clip's training script and DistributedDataParallel write it.
    torch.save(
        {"epoch": 3, "state_dict": {f"module.{k}": v for k, v in state_dict.items()}}, wrapped
    )
    return {"config": config_path, "plain": plain, "wrapped": wrapped}


@pytest.fixture(scope="module")
def corpus(synthetic_files: Path) -> Corpus:
    """The first few synthetic images with their captions and image files."""
    rows = parse_captions_tsv(synthetic_files / "captions.tsv")
    image_ids = sorted({row.image_id for row in rows})[:N_IMAGES]
    files = {row.image_id: row.file_name for row in rows}
    captions = [row for row in rows if row.image_id in image_ids]
    return Corpus(
        image_ids=np.array(image_ids),
        caption_ids=np.array([row.caption_id for row in captions]),
        caption_texts=tuple(row.text for row in captions),
        caption_image=np.array([image_ids.index(row.image_id) for row in captions]),
        image_paths=tuple(str(synthetic_files / "images" / files[i]) for i in image_ids),
    )


def annotator(weights: dict[str, Path], checkpoint: str = "plain", **extra: object):
    config = {
        "model": MODEL_NAME,
        "model_config": str(weights["config"]),
        "checkpoint": str(weights[checkpoint]),
        "device": "cpu",
        "batch_size": 4,  # smaller than the corpus, so batching is exercised
    }
    return OpenClipAnnotator(name="clip-test", config=config | extra)


class DictStore:
    """An in-memory EmbeddingStore that counts what it is asked for."""

    def __init__(self) -> None:
        self.vectors: dict[tuple[str, int], np.ndarray] = {}
        self.saved = 0

    def load(self, modality: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = np.array([(modality, int(i)) in self.vectors for i in ids], dtype=bool)
        rows = [self.vectors[(modality, int(i))] for i in ids[found]]
        if not rows:
            return found, np.zeros((0, 0), dtype=np.float32)
        return found, np.stack(rows).astype(np.float32)

    def save(self, modality: str, ids: np.ndarray, vectors: np.ndarray) -> None:
        for i, vector in zip(ids.tolist(), vectors, strict=True):
            self.vectors[(modality, i)] = vector.copy()
        self.saved += len(ids)


def test_vectors_are_unit_length_with_the_model_dimension(random_weights, corpus) -> None:
    clip = annotator(random_weights)
    clip.prepare(corpus)
    dim = TINY_MODEL_CONFIG["embed_dim"]
    assert clip.image_vectors.shape == (N_IMAGES, dim)
    assert clip.caption_vectors.shape == (corpus.n_captions, dim)
    for vectors in (clip.image_vectors, clip.caption_vectors):
        assert vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Random weights still tell different inputs apart.
    assert not np.allclose(clip.image_vectors[0], clip.image_vectors[1])


def test_similarity_is_the_dot_product(random_weights, corpus) -> None:
    clip = annotator(random_weights)
    clip.prepare(corpus)
    images, captions = np.array([2, 0, 5]), np.arange(corpus.n_captions)[::3]
    scores = clip.similarity(images, captions)
    assert scores.dtype == np.float32
    expected = clip.image_vectors[images] @ clip.caption_vectors[captions].T
    np.testing.assert_allclose(scores, expected, rtol=1e-6, atol=1e-6)


def test_loading_twice_and_both_checkpoint_formats_give_the_same_vectors(
    random_weights, corpus
) -> None:
    first = annotator(random_weights, "plain")
    again = annotator(random_weights, "plain")
    wrapped = annotator(random_weights, "wrapped")
    for clip in (first, again, wrapped):
        clip.prepare(corpus)
    for clip in (again, wrapped):
        np.testing.assert_array_equal(clip.image_vectors, first.image_vectors)
        np.testing.assert_array_equal(clip.caption_vectors, first.caption_vectors)


def test_read_state_dict_unwraps_and_strips_the_ddp_prefix(random_weights) -> None:
    plain, wrapped = (
        read_state_dict(random_weights["plain"]),
        read_state_dict(random_weights["wrapped"]),
    )
    assert plain.keys() == wrapped.keys()
    assert not any(key.startswith("module.") for key in wrapped)


def test_model_is_loaded_lazily_once_and_reports_progress(random_weights, corpus) -> None:
    clip = annotator(random_weights)
    assert not clip.loaded  # building the annotator (config validation) loads nothing
    events: list[tuple[str, int, int]] = []
    clip.progress = lambda what, done, total: events.append((what, done, total))
    clip.prepare(corpus)
    # One report per batch of 4: 4 then 6 images, 4, 8, ... captions.
    assert [e for e in events if e[0] == "embedding images"] == [
        ("embedding images", 4, N_IMAGES),
        ("embedding images", N_IMAGES, N_IMAGES),
    ]
    caption_done = [done for what, done, _ in events if what == "embedding captions"]
    assert caption_done == [*range(4, corpus.n_captions, 4), corpus.n_captions]
    model = clip._model
    clip.prepare(corpus)
    assert clip._model is model


def test_store_spares_a_second_prepare_all_embedding(random_weights, corpus, monkeypatch) -> None:
    store = DictStore()
    first = annotator(random_weights)
    first.store = store
    first.prepare(corpus)
    assert store.saved == corpus.n_images + corpus.n_captions

    calls: list[str] = []
    second = annotator(random_weights)
    second.store = store
    for method in ("embed_images", "embed_captions"):
        original = getattr(second, method)
        monkeypatch.setattr(
            second, method, lambda c, rows, m=method, f=original: calls.append(m) or f(c, rows)
        )
    second.prepare(corpus)
    assert calls == []
    assert not second.loaded  # everything came from the store: the model was never built
    np.testing.assert_array_equal(second.image_vectors, first.image_vectors)
    np.testing.assert_array_equal(second.caption_vectors, first.caption_vectors)


def test_missing_checkpoint_is_refused_with_its_path(random_weights, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "weights.pt"
    with pytest.raises(AnnotatorError, match=f"checkpoint file {missing} does not exist"):
        OpenClipAnnotator(name="clip", config={"model": MODEL_NAME, "checkpoint": str(missing)})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"pretrained": "openai"}, "unknown config key 'pretrained'"),
        ({"batch_size": 0}, "'batch_size' must be a positive integer"),
        ({"batch_size": True}, "'batch_size' must be a positive integer"),
        ({"device": "tpu"}, "'device' must be one of auto, cpu, cuda"),
        ({"precision": "int8"}, "'precision' must be one of fp32, fp16, bf16"),
        ({"model": ""}, "'model' must be a non-empty string"),
        ({"model_config": "/no/such/config.json"}, "model_config file /no/such/config.json"),
    ],
)
def test_bad_config_is_refused(random_weights, extra: dict, message: str) -> None:
    with pytest.raises(AnnotatorError, match=message):
        annotator(random_weights, **extra)


def test_model_key_is_required(random_weights) -> None:
    with pytest.raises(AnnotatorError, match="'model' must be a non-empty string"):
        OpenClipAnnotator(name="clip", config={"checkpoint": str(random_weights["plain"])})


def test_text_only_corpus_is_refused_before_any_embedding(random_weights, corpus) -> None:
    text_only = Corpus(
        image_ids=corpus.image_ids,
        caption_ids=corpus.caption_ids,
        caption_texts=corpus.caption_texts,
        caption_image=corpus.caption_image,
    )
    clip = annotator(random_weights)
    with pytest.raises(AnnotatorError, match="dataset has no image files; image-based annotators"):
        clip.prepare(text_only)
    assert not clip.loaded


def test_images_without_files_are_named(random_weights, corpus) -> None:
    paths = list(corpus.image_paths)
    paths[1] = None
    partial = Corpus(
        image_ids=corpus.image_ids,
        caption_ids=corpus.caption_ids,
        caption_texts=corpus.caption_texts,
        caption_image=corpus.caption_image,
        image_paths=tuple(paths),
    )
    with pytest.raises(AnnotatorError, match=rf"1 of {N_IMAGES} images have no file \(image ids"):
        annotator(random_weights).prepare(partial)


def test_unknown_architecture_without_model_config_is_refused(random_weights, corpus) -> None:
    clip = OpenClipAnnotator(
        name="clip",
        config={"model": "no-such-architecture", "checkpoint": str(random_weights["plain"])},
    )
    with pytest.raises(AnnotatorError, match="unknown open_clip architecture 'no-such-arch"):
        clip.prepare(corpus)


def test_checkpoint_of_another_architecture_is_refused(random_weights, corpus, tmp_path) -> None:
    other = dict(TINY_MODEL_CONFIG, embed_dim=32)
    config_path = tmp_path / "other.json"
    config_path.write_text(json.dumps(other), encoding="utf-8")
    clip = annotator(random_weights, model="mitl-test-other-clip", model_config=str(config_path))
    with pytest.raises(AnnotatorError, match="does not fit architecture 'mitl-test-other-clip'"):
        clip.prepare(corpus)


def test_a_file_without_a_state_dict_is_refused(random_weights, corpus, tmp_path) -> None:
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    clip = annotator(random_weights, checkpoint="plain")
    clip.checkpoint = junk
    with pytest.raises(AnnotatorError, match=f"cannot read checkpoint {junk}"):
        clip.prepare(corpus)
    torch.save({"epoch": 1}, junk)
    with pytest.raises(AnnotatorError, match="holds no state_dict"):
        clip.prepare(corpus)
