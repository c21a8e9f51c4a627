"""What the tiny CLIP learns from: every image preprocessed once, every caption tokenised once.

Images are preprocessed with the model's validation transform (no augmentation: the captions
name positions, which crops and flips would break) and kept in memory. An epoch
(`epoch_batches`) visits every caption once, in rounds: each round pairs every image with one
of its captions not yet used this epoch, so no batch holds the same image twice and the
contrastive loss never treats a true pair as a negative. Pure Python: no Django import.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from mitl.formats.captions import parse_captions_tsv


class TrainingDataError(ValueError):
    """The captions TSV or the image folder cannot be used for training."""


@dataclass(frozen=True)
class TrainingData:
    """Every image as a preprocessed tensor and every caption as tokens, rows aligned."""

    pixels: torch.Tensor  # (n_images, 3, size, size)
    tokens: torch.Tensor  # (n_captions, context_length)
    caption_image: np.ndarray  # row of each caption's image

    @property
    def n_images(self) -> int:
        """Return the number of images."""
        return int(self.pixels.shape[0])


def load_training_data(
    captions_tsv: Path,
    images_dir: Path,
    preprocess: Callable[[Image.Image], torch.Tensor],
    tokenizer: Callable[[list[str]], torch.Tensor],
) -> TrainingData:
    """Read the TSV, preprocess every image once and tokenise every caption once."""
    rows = parse_captions_tsv(Path(captions_tsv))
    image_row: dict[int, int] = {}
    files: list[str] = []
    for row in rows:
        if row.image_id not in image_row:
            image_row[row.image_id] = len(files)
            files.append(row.file_name)
    pixels = torch.stack([_read_image(Path(images_dir) / name, preprocess) for name in files])
    return TrainingData(
        pixels=pixels,
        tokens=tokenizer([row.text for row in rows]),
        caption_image=np.array([image_row[row.image_id] for row in rows], dtype=np.int64),
    )


def _read_image(path: Path, preprocess: Callable[[Image.Image], torch.Tensor]) -> torch.Tensor:
    try:
        with Image.open(path) as image:
            return preprocess(image.convert("RGB"))
    except OSError as exc:
        raise TrainingDataError(f"cannot read image {path}: {exc}") from exc


def epoch_batches(
    caption_image: np.ndarray, n_images: int, batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Return one epoch of caption-row batches, each holding distinct images.

    Round r pairs every image with the r-th caption of a fresh shuffle of its captions
    (cycling through them for images with fewer captions than the most-captioned one), in a
    new random image order, cut into near-equal batches of at most `batch_size`.
    """
    by_image: list[list[int]] = [[] for _ in range(n_images)]
    for caption, image in enumerate(caption_image.tolist()):
        by_image[image].append(caption)
    captioned = [captions for captions in by_image if captions]
    if not captioned:
        return []
    shuffled = [rng.permutation(captions) for captions in captioned]
    rounds = max(len(captions) for captions in captioned)
    n_batches = math.ceil(len(captioned) / batch_size)
    batches: list[np.ndarray] = []
    for r in range(rounds):
        chosen = np.array([captions[r % len(captions)] for captions in shuffled], dtype=np.int64)
        batches.extend(np.array_split(chosen[rng.permutation(len(chosen))], n_batches))
    return batches
