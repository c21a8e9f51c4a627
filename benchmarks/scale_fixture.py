"""The scale benchmark's world: a COCO-shaped dataset, exported embeddings and the truth.

At scale s: 5,000·s images with 5 captions each and the `original` positive set. Images
come in topics of `TOPIC_SIZE`: every caption of a topic's images truly fits every image
of the topic (so each caption has 4 positive images, each image 20 positive captions, as
the planted truth the simulated crowd answers from). Each of the 5 annotators exported
vectors (an `embeddings` annotator file): the topic's direction plus the annotator's own
noise, so the annotators find different subsets of the positives, as real models do.
Import it after `common.django_setup()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import dataset_create, original_positives_create

from annotation.models import (
    Batch,
    Dataset,
)
from pipeline.annotators import annotator_create
from pipeline.stages import batch_create

BASE_IMAGES = 5_000  # COCO 5K test split, as ECCV Caption
CAPTIONS_PER_IMAGE = 5
BASE_IMAGE_QUERIES = 1_261
BASE_CAPTION_QUERIES = 1_333
N_ANNOTATORS = 5
K = 5
TOPIC_SIZE = 4
DIMENSIONS = 64
# Each annotator's noise around the topic direction: from sharp to blurry.
NOISE = (1.0, 1.2, 1.4, 1.6, 1.8)


@dataclass(frozen=True)
class ScaleWorld:
    dataset: Dataset
    batch: Batch
    oracle_dir: Path
    vector_files: tuple[Path, ...]
    n_images: int
    n_captions: int
    n_image_queries: int
    n_caption_queries: int


def world_create(*, scale: int, workdir: Path, seed: int = 0) -> ScaleWorld:
    """Create the dataset, the annotators' vector files, the truth files and a draft batch."""
    n_images = BASE_IMAGES * scale
    dataset, image_pks, caption_pks = dataset_create(
        name=f"bench-scale-{scale}x",
        description="scale benchmark",
        n_images=n_images,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="caption {j} of image {n}",
    )
    original_positives_create(dataset)
    rng = np.random.default_rng(seed)
    topic_of_image = rng.permutation(n_images) // TOPIC_SIZE  # ext id -> topic
    topic_of_caption = np.repeat(topic_of_image, CAPTIONS_PER_IMAGE)
    oracle_dir = workdir / "truth"
    _truth_write(oracle_dir, topic_of_image)
    vector_files = tuple(
        _vectors_write(workdir / f"annotator-{a}.npz", topic_of_image, topic_of_caption, noise, rng)
        for a, noise in enumerate(NOISE)
    )
    names = []
    for a, path in enumerate(vector_files):
        name = f"bench-scale-{scale}x-{a}"
        annotator_create(name=name, kind="embeddings", config={"vectors": str(path)})
        names.append(name)
    n_image_queries = BASE_IMAGE_QUERIES * scale
    n_caption_queries = BASE_CAPTION_QUERIES * scale
    batch = batch_create(
        dataset=dataset,
        name=f"scale {scale}x",
        raw_config={
            "annotators": names,
            "n_image_queries": n_image_queries,
            "n_caption_queries": n_caption_queries,
            "k": K,
            "hit_size": 16,
            "assignments_per_hit": 1,
            "seed": seed,
        },
    )
    assert len(image_pks) == n_images and len(caption_pks) == n_images * CAPTIONS_PER_IMAGE
    return ScaleWorld(
        dataset=dataset,
        batch=batch,
        oracle_dir=oracle_dir,
        vector_files=vector_files,
        n_images=n_images,
        n_captions=len(caption_pks),
        n_image_queries=n_image_queries,
        n_caption_queries=n_caption_queries,
    )


def _truth_write(oracle_dir: Path, topic_of_image: np.ndarray) -> None:
    """ECCV-format truth: every image's positive captions (the other file stays empty)."""
    oracle_dir.mkdir(parents=True, exist_ok=True)
    members: dict[int, list[int]] = {}
    for image, topic in enumerate(topic_of_image.tolist()):
        members.setdefault(topic, []).append(image)
    image_to_caption = {
        str(image): [
            other * CAPTIONS_PER_IMAGE + j
            for other in members[topic]
            for j in range(CAPTIONS_PER_IMAGE)
        ]
        for image, topic in enumerate(topic_of_image.tolist())
    }
    (oracle_dir / "image_to_caption.json").write_text(json.dumps(image_to_caption))
    (oracle_dir / "caption_to_image.json").write_text("{}")


def _vectors_write(
    path: Path,
    topic_of_image: np.ndarray,
    topic_of_caption: np.ndarray,
    noise: float,
    rng: np.random.Generator,
) -> Path:
    """One annotator's export: topic direction + its noise, float32, ids by ext id."""
    n_topics = int(topic_of_image.max()) + 1
    topics = rng.standard_normal((n_topics, DIMENSIONS), dtype=np.float32)
    images = topics[topic_of_image] + noise * rng.standard_normal(
        (len(topic_of_image), DIMENSIONS), dtype=np.float32
    )
    captions = topics[topic_of_caption] + noise * rng.standard_normal(
        (len(topic_of_caption), DIMENSIONS), dtype=np.float32
    )
    np.savez(
        path,
        image_ids=np.arange(len(images)),
        image_vectors=images,
        caption_ids=np.arange(len(captions)),
        caption_vectors=captions,
    )
    return path
