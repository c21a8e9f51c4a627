"""The packaged text encoders: pins, weight hashes, split archives, and each encoder's claims
(dimension, tokenizer, reference similarities) when its packages are installed."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mitl.annotators.base import AnnotatorError, Corpus
from mitl.annotators.encoders import (
    ENCODERS,
    EncoderMismatch,
    EncoderMissing,
    TextEncoder,
    encoder_missing,
    encoder_path,
    encoder_spec,
    unpack_split_zip,
    verify_weights,
)
from mitl.annotators.text_embedding import TextEmbeddingAnnotator, load_model
from mitl.relevance.proxies import proxy_build, proxy_unavailable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ABSENT = "mitl-no-such-encoder-package==0.0.1"
needs_mpnet = pytest.mark.skipif(
    encoder_missing("mpnet") is not None,
    reason="all-mpnet-base-v2's packages are not installed (make encoders)",
)

# Sentence pairs with the cosines each model gives them. MiniLM's first row is the one
# sentence-transformers' quickstart prints for all-MiniLM-L6-v2 (0.6660, 0.1046, 0.1411);
# mpnet's were measured here on the weights whose sha256 the registry pins.
WEATHER = ("The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium.")
EATING = ("A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse.")
REFERENCE = {
    "minilm": {WEATHER: (0.6660, 0.1046, 0.1411), EATING: (0.7553, 0.2474, 0.1442)},
    "mpnet": {WEATHER: (0.6817, 0.0492, 0.0421), EATING: (0.6601, 0.2464, 0.2232)},
}


def _absent(name: str) -> TextEncoder:
    """The named encoder, pinned to a package that does not exist."""
    return dataclasses.replace(ENCODERS[name], name="absent", requirements=(ABSENT,))


def test_an_unknown_encoder_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="known: minilm, mpnet"):
        encoder_spec("gte")


def test_a_missing_package_says_what_to_install() -> None:
    encoder = _absent("mpnet")
    with pytest.raises(EncoderMissing, match=f"install {ABSENT} to use the absent encoder"):
        encoder.locate(encoder)
    assert "make encoders" in encoder.install_hint()


def test_a_package_at_another_version_is_refused() -> None:
    encoder = dataclasses.replace(ENCODERS["minilm"], requirements=("numpy==0.0.1",))
    with pytest.raises(EncoderMissing, match=r"numpy \S+ is installed but .* pinned to 0.0.1"):
        encoder.locate(encoder)


def test_weights_are_checked_against_the_pinned_sha256(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    right = hashlib.sha256(b"weights").hexdigest()
    verify_weights(tmp_path, right, what="test")
    with pytest.raises(EncoderMismatch, match="does not have the pinned sha256"):
        verify_weights(tmp_path, hashlib.sha256(b"other").hexdigest(), what="test")
    with pytest.raises(EncoderMismatch, match="is missing"):
        verify_weights(tmp_path / "nowhere", right, what="test")


def _split_archive(tmp_path: Path, parts: int) -> list[Path]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model/config.json", '{"dim": 4}')
        archive.writestr("model/sub/desktop.ini", "[.ShellClassInfo]")
        archive.writestr("model/model.safetensors", b"\x00" * 5000)
        archive.writestr("elsewhere.txt", "not the model")
    data = buffer.getvalue()
    step = -(-len(data) // parts)
    paths = []
    for number in range(parts):
        path = tmp_path / f"archive.zip.{number + 1:03d}"
        path.write_bytes(data[number * step : (number + 1) * step])
        paths.append(path)
    return paths


def test_a_split_archive_is_joined_and_only_the_model_unpacked(tmp_path: Path) -> None:
    parts = _split_archive(tmp_path, 3)
    target = tmp_path / "out"
    unpack_split_zip(parts, target, "model/")
    assert (target / "model/config.json").read_text() == '{"dim": 4}'
    assert (target / "model/model.safetensors").stat().st_size == 5000
    assert not (target / "model/sub/desktop.ini").exists()
    assert not (target / "elsewhere.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".unpack")] == []


def test_a_missing_part_leaves_no_half_model(tmp_path: Path) -> None:
    parts = _split_archive(tmp_path, 3)
    target = tmp_path / "out"
    with pytest.raises(zipfile.BadZipFile):
        unpack_split_zip(parts[:2], target, "model/")
    assert not target.exists()


def test_the_annotator_names_the_encoder_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENCODERS, "absent", _absent("mpnet"))
    with pytest.raises(AnnotatorError, match=f"install {ABSENT} to use the absent encoder"):
        TextEmbeddingAnnotator(name="x", config={"encoder": "absent"})
    with pytest.raises(AnnotatorError, match="'encoder' must be one of"):
        TextEmbeddingAnnotator(name="x", config={"encoder": "gte"})
    with pytest.raises(AnnotatorError, match="either 'encoder' or 'model_path'"):
        TextEmbeddingAnnotator(name="x", config={"encoder": "minilm", "model_path": "/tmp"})


def test_the_mpnet_proxy_is_unavailable_without_its_packages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(ENCODERS, "mpnet", _absent("mpnet"))
    assert f"install {ABSENT}" in (proxy_unavailable("mpnet") or "")


def test_calibration_leaves_the_optional_encoder_out_unless_named() -> None:
    from pipeline.relevance_calibration import default_proxies

    assert "minilm" in default_proxies()
    assert "mpnet" not in default_proxies()


@pytest.mark.parametrize("name", list(ENCODERS))
def test_each_installed_encoder_matches_what_it_claims(name: str) -> None:
    missing = encoder_missing(name)
    if missing is not None:
        pytest.skip(missing)
    encoder = encoder_spec(name)
    model = load_model(str(encoder_path(name)), "cpu")
    assert model.get_sentence_embedding_dimension() == encoder.dim
    assert model.tokenizer.tokenize("A puppy running") == ["a", "puppy", "running"]
    for sentences, (near, far, other) in REFERENCE[name].items():
        vectors = model.encode(list(sentences), normalize_embeddings=True)
        cosines = vectors @ vectors.T
        assert vectors.shape == (3, encoder.dim)
        np.testing.assert_allclose(
            [cosines[0, 1], cosines[0, 2], cosines[1, 2]], [near, far, other], atol=2e-3
        )


@needs_mpnet
def test_an_mpnet_annotator_finds_the_paraphrase() -> None:
    texts = ("a dog runs on the grass", "a puppy running in a field", "a red car parked")
    corpus = Corpus(
        image_ids=np.arange(3),
        caption_ids=np.arange(10, 13),
        caption_texts=texts,
        caption_image=np.arange(3),
    )
    annotator = TextEmbeddingAnnotator(name="mpnet", config={"encoder": "mpnet", "device": "cpu"})
    annotator.prepare(corpus)
    assert annotator.caption_vectors is not None and annotator.caption_vectors.shape == (3, 768)
    scores = annotator.text_similarity(["a small dog playing on a lawn"], np.array([-1]))[0]
    assert int(np.argmax(scores)) in (0, 1) and scores[2] < min(scores[0], scores[1])


@needs_mpnet
def test_the_mpnet_proxy_reads_as_a_relevance(tmp_path: Path) -> None:
    texts = ["a dog runs on the grass", "a puppy running in a field", "a red car parked"]
    proxy = proxy_build("mpnet", texts, cache_dir=tmp_path)
    everything = np.arange(3)
    matrix = proxy.matrix(everything, everything)
    assert np.all((matrix >= 0) & (matrix <= 1 + 1e-5))
    assert np.diag(matrix) == pytest.approx(np.ones(3), abs=1e-5)
    assert matrix[0, 1] > matrix[0, 2] + 0.2
    cached = list(tmp_path.glob("mpnet-embeddings-*.npy"))
    assert len(cached) == 1 and np.load(cached[0]).shape == (3, 768)


def test_calibrating_with_a_missing_encoder_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mitl.relevance.images import CaptionCorpus
    from pipeline.relevance import DatasetCorpus
    from pipeline.relevance_calibration import calibration_report

    monkeypatch.setitem(ENCODERS, "mpnet", _absent("mpnet"))
    corpus = CaptionCorpus.of([1, 2], [10, 20], ["a dog", "a cat"])
    sts = tmp_path / "sts.csv"
    sts.write_text(
        "caption1,caption2,agg_score,sampling_method\n"
        "COCO_val2014:sentid:1,COCO_val2014:sentid:2,1.5,c2c_isim\n"
    )
    data = DatasetCorpus(corpus=corpus, dataset=None)
    with pytest.raises(RuntimeError, match=f"install {ABSENT}"):
        calibration_report(data, sits=None, sts=sts, proxies=["bow", "mpnet"])
