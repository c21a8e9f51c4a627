"""Training the tiny CLIP on a small synthetic dataset, and loading it as an annotator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from mitl import clip_training  # noqa: E402
from mitl.annotators.base import Corpus  # noqa: E402
from mitl.annotators.open_clip import OpenClipAnnotator  # noqa: E402
from mitl.clip_training_data import epoch_batches  # noqa: E402
from mitl.formats.captions import parse_captions_tsv  # noqa: E402


@pytest.fixture(scope="module")
def trained(synthetic_files: Path, tmp_path_factory: pytest.TempPathFactory):
    """Two short epochs on the 40-image synthetic dataset."""
    steps: list[tuple[int, int]] = []
    result = clip_training.train_tiny_clip(
        synthetic_files / "captions.tsv",
        synthetic_files / "images",
        tmp_path_factory.mktemp("clip-model"),
        epochs=2,
        batch_size=16,
        seed=3,
        progress=lambda step, total: steps.append((step, total)),
    )
    return result, steps


def test_training_lowers_the_loss_and_reports_progress(trained) -> None:
    result, steps = trained
    assert result.epochs == 2 and len(result.losses) == 2
    assert result.final_loss == result.losses[-1] < result.losses[0]
    assert 0.0 <= result.recall_at_5 <= 1.0
    total = steps[-1][1]
    assert [step for step, _ in steps] == list(range(1, total + 1))
    # 5 captions per image, one per round; 40 images in 3 batches of at most 16 per round.
    assert total == 2 * 5 * 3


def test_training_writes_config_checkpoint_and_report(trained) -> None:
    result, _ = trained
    out_dir = result.checkpoint_path.parent
    assert result.checkpoint_path == out_dir / "checkpoint.pt"
    assert result.model_config_path == out_dir / "model_config.json"
    config = json.loads(result.model_config_path.read_text(encoding="utf-8"))
    assert config == clip_training.TINY_MODEL_CONFIG
    report = json.loads((out_dir / "training.json").read_text(encoding="utf-8"))
    assert report["epochs"] == 2
    assert report["losses"] == pytest.approx(list(result.losses))
    assert report["recall_at_5"] == pytest.approx(result.recall_at_5)
    assert report["seconds"] > 0
    assert not list(out_dir.glob("*.partial"))
    assert clip_training.read_training_report(out_dir) == report


def test_trained_checkpoint_loads_through_the_annotator(trained, synthetic_files: Path) -> None:
    result, _ = trained
    config = result.annotator_config()
    assert config == clip_training.trained_model_config(result.checkpoint_path.parent)
    assert set(config) == {"model", "model_config", "checkpoint"}
    rows = parse_captions_tsv(synthetic_files / "captions.tsv")[:10]
    image_ids = sorted({row.image_id for row in rows})
    files = {row.image_id: row.file_name for row in rows}
    corpus = Corpus(
        image_ids=np.array(image_ids),
        caption_ids=np.array([row.caption_id for row in rows]),
        caption_texts=tuple(row.text for row in rows),
        caption_image=np.array([image_ids.index(row.image_id) for row in rows]),
        image_paths=tuple(str(synthetic_files / "images" / files[i]) for i in image_ids),
    )
    clip = OpenClipAnnotator(name="demo-clip", config=config | {"device": "cpu"})
    clip.prepare(corpus)
    scores = clip.similarity(np.arange(len(image_ids)), np.arange(len(rows)))
    assert scores.shape == (len(image_ids), len(rows))
    np.testing.assert_allclose(np.linalg.norm(clip.image_vectors, axis=1), 1.0, atol=1e-5)


def test_epoch_batches_use_every_caption_once_and_no_image_twice() -> None:
    # Image 2 has one caption, image 3 none: they must not break the rounds.
    caption_image = np.array([0, 0, 0, 1, 1, 1, 2, 4, 4, 4])
    rng = np.random.default_rng(0)
    batches = epoch_batches(caption_image, 5, 2, rng)
    used = np.concatenate(batches)
    assert set(used.tolist()) == set(range(len(caption_image)))
    for batch in batches:
        images = caption_image[batch]
        assert len(set(images.tolist())) == len(images) <= 2
    # Three rounds (the most captions of an image), four captioned images in two batches each.
    assert len(batches) == 3 * 2


def test_recall_counts_ties_against_the_caption() -> None:
    images = torch.eye(3)
    captions = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    # Caption 0 finds image 0 first, caption 1 belongs to image 0 too, caption 2 ties everywhere.
    recall = clip_training.caption_to_image_recall(images, captions, np.array([0, 0, 2]), k=1)
    assert recall == pytest.approx(2 / 3)


def test_clip_loss_is_low_for_matching_pairs_and_high_for_shuffled() -> None:
    features = torch.eye(4)
    scale = torch.tensor(np.log(100.0))
    matched = clip_training.clip_loss(features, features, scale)
    shuffled = clip_training.clip_loss(features, features.roll(1, dims=0), scale)
    assert float(matched) < 1e-3 < float(shuffled)
