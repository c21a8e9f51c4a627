"""Train a tiny open_clip model on a captions TSV and its image folder, on the CPU.

The model is small enough to learn the synthetic dataset (`mitl.synthetic`) in under a minute
on two cores, so the demo can run a real image-text annotator with no downloaded weights. It
is trained and evaluated on the same images: it shows that the pipeline works end to end, not
that the model generalises.

Training
    Images are preprocessed once with the model's validation transform (no augmentation: the
    captions name positions, which crops and flips would break) and kept in memory; captions
    are tokenised once (`mitl.clip_training_data`). An epoch visits every caption once, in
    rounds: each round pairs every image with one of its captions not yet used this epoch, so
    no batch holds the same image twice and the contrastive loss never treats a true pair as a
    negative. The loss is the symmetric InfoNCE of CLIP with a learnable logit scale; AdamW
    with a linear warm-up and a cosine decay does the optimisation. Everything is seeded, so a
    run is reproducible on the same machine and thread count.

    Only the rows of the token embedding that the captions use are trained (`_seen_vocabulary`):
    the other 49,000 rows of the tokenizer's vocabulary never get a gradient, and AdamW updated
    and decayed all 6.3M entries every step (the model's other weights are 0.6M). The seen rows
    learn exactly what they learned before, about 15% faster a step; the unseen ones keep their
    initial values (they used to decay towards zero) and are written back in the checkpoint, so
    open_clip's tokenizer and model load unchanged.

Outputs (`save_checkpoint`)
    out_dir/model_config.json   the architecture, as an open_clip model config
    out_dir/checkpoint.pt       the state_dict (written last, atomically)
    out_dir/training.json       epochs, loss per epoch, seconds, caption→image recall@5
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import torch
import torch.nn.functional as F

from mitl.annotators.open_clip import register_model_config, untrained_model_quietly
from mitl.clip_training_data import (
    TrainingData,
    TrainingDataError,
    epoch_batches,
    load_training_data,
)

TINY_MODEL_NAME = "mitl-tiny-clip"
# A ViT and a text transformer of two blocks each, 128 wide with 4 heads, 64-d embeddings.
# MLPs twice (not four times) the width make a training step about a third cheaper on the CPU
# and learn the synthetic scenes as well. The vocabulary is the default tokenizer's, so
# open_clip.get_tokenizer works unchanged.
TINY_MODEL_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "vision_cfg": {
        "image_size": 64,
        "patch_size": 8,
        "width": 128,
        "layers": 2,
        "head_width": 32,
        "mlp_ratio": 2.0,
    },
    "text_cfg": {
        "context_length": 32,
        "vocab_size": 49408,
        "width": 128,
        "heads": 4,
        "layers": 2,
        "mlp_ratio": 2.0,
    },
}
MODEL_CONFIG_FILE = "model_config.json"
CHECKPOINT_FILE = "checkpoint.pt"
TRAINING_FILE = "training.json"

DEFAULT_EPOCHS = 10
DEFAULT_BATCH_SIZE = 64
DEFAULT_LEARNING_RATE = 2e-3
DEFAULT_THREADS = 2
WEIGHT_DECAY = 0.1
WARMUP_SHARE = 0.05
# CLIP caps the logit scale at 100 so the softmax cannot grow arbitrarily sharp.
MAX_LOGIT_SCALE = math.log(100.0)
RECALL_K = 5

# (step, total steps) after each optimiser step.
TrainProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class TrainedModel:
    """Where a trained model was written, and how its training went."""

    model_name: str
    model_config_path: Path
    checkpoint_path: Path
    final_loss: float
    seconds: float
    recall_at_5: float
    losses: tuple[float, ...]
    epochs: int

    def annotator_config(self) -> dict[str, str]:
        """Return the open_clip annotator config that loads this model."""
        return annotator_config(self.model_name, self.model_config_path, self.checkpoint_path)


def annotator_config(
    model_name: str, model_config_path: Path, checkpoint_path: Path
) -> dict[str, str]:
    """Return the `open_clip` annotator config for a model written by `save_checkpoint`."""
    return {
        "model": model_name,
        "model_config": str(model_config_path),
        "checkpoint": str(checkpoint_path),
    }


def trained_model_config(out_dir: Path, model_name: str = TINY_MODEL_NAME) -> dict[str, str]:
    """Return the annotator config for the model `save_checkpoint` wrote into `out_dir`."""
    out_dir = Path(out_dir).resolve()
    return annotator_config(model_name, out_dir / MODEL_CONFIG_FILE, out_dir / CHECKPOINT_FILE)


# --- model and loss ---------------------------------------------------------------------


def create_tiny_model(
    model_name: str = TINY_MODEL_NAME, config: Mapping[str, Any] = TINY_MODEL_CONFIG
) -> tuple[torch.nn.Module, Callable, Callable]:
    """Register `config` as `model_name`; return an untrained model, val transform, tokenizer."""
    register_model_config(model_name, config)
    with untrained_model_quietly():  # untrained on purpose: it is about to be trained
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_name, pretrained=None, pretrained_image=False, pretrained_text=False
        )
    return model, preprocess, open_clip.get_tokenizer(model_name)


def clip_loss(
    image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """Return CLIP's symmetric InfoNCE loss; row i of each side is the matching pair."""
    image_features = F.normalize(image_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    logits = logit_scale.exp() * image_features @ text_features.T
    targets = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


def _optimizer(model: torch.nn.Module, learning_rate: float) -> torch.optim.Optimizer:
    """Return AdamW that decays matrices only, as CLIP does; gains, biases and scales are free."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    free = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": free, "weight_decay": 0.0}],
        lr=learning_rate,
        betas=(0.9, 0.98),
        eps=1e-6,
        # One fused kernel instead of a dozen passes over the 6M-entry token embedding per step.
        fused=True,
    )


def _learning_rate(step: int, total: int, peak: float) -> float:
    """Return the learning rate of `step`: linear warm-up, then cosine decay to zero."""
    warmup = max(1, round(total * WARMUP_SHARE))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@torch.inference_mode()
def embed_all(
    model: torch.nn.Module, data: TrainingData, batch_size: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return unit-length (image, caption) embeddings of every training item."""
    model.eval()
    images = torch.cat(
        [model.encode_image(chunk, normalize=True) for chunk in data.pixels.split(batch_size)]
    )
    captions = torch.cat(
        [model.encode_text(chunk, normalize=True) for chunk in data.tokens.split(batch_size)]
    )
    return images, captions


def caption_to_image_recall(
    images: torch.Tensor, captions: torch.Tensor, caption_image: np.ndarray, k: int = RECALL_K
) -> float:
    """Return the share of captions whose own image ranks in the top `k` of all images."""
    scores = captions @ images.T
    own = scores[torch.arange(len(captions)), torch.as_tensor(caption_image)]
    # Ties count against the caption, so a constant model scores 0 rather than 1.
    rank = (scores >= own[:, None]).sum(dim=1)
    return float((rank <= k).float().mean())


# --- training ---------------------------------------------------------------------------


def train_tiny_clip(
    captions_tsv: Path,
    images_dir: Path,
    out_dir: Path,
    *,
    epochs: int = DEFAULT_EPOCHS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = 0,
    progress: TrainProgress | None = None,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    threads: int | None = DEFAULT_THREADS,
) -> TrainedModel:
    """Train the tiny CLIP on the dataset, write it with `save_checkpoint`, return a summary.

    `threads` caps torch's CPU threads during training (restored afterwards); None leaves it.
    """
    if epochs < 1 or batch_size < 2:
        raise ValueError("training needs epochs >= 1 and batch_size >= 2")
    started = time.monotonic()
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        _seed_everything(seed)
        model, preprocess, tokenizer = create_tiny_model()
        data = load_training_data(captions_tsv, images_dir, preprocess, tokenizer)
        if data.n_images < 2:
            raise TrainingDataError(f"{captions_tsv}: training needs at least two images")
        with _seen_vocabulary(model, data) as seen_data:
            losses = _fit(model, seen_data, epochs, batch_size, seed, learning_rate, progress)
        recall = caption_to_image_recall(*embed_all(model, data), data.caption_image)
    finally:
        torch.set_num_threads(previous_threads)
    seconds = time.monotonic() - started
    config_path, checkpoint_path = save_checkpoint(
        model,
        out_dir,
        model_config=TINY_MODEL_CONFIG,
        training={
            "model_name": TINY_MODEL_NAME,
            "captions_tsv": str(captions_tsv),
            "images": data.n_images,
            "captions": len(data.caption_image),
            "epochs": epochs,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "seed": seed,
            "losses": losses,
            "final_loss": losses[-1],
            "seconds": round(seconds, 2),
            "recall_at_5": recall,
        },
    )
    return TrainedModel(
        model_name=TINY_MODEL_NAME,
        model_config_path=config_path,
        checkpoint_path=checkpoint_path,
        final_loss=losses[-1],
        seconds=seconds,
        recall_at_5=recall,
        losses=tuple(losses),
        epochs=epochs,
    )


@contextlib.contextmanager
def _seen_vocabulary(model: torch.nn.Module, data: TrainingData) -> Iterator[TrainingData]:
    """Train with a token embedding of the captions' tokens only; write it back afterwards.

    Yields `data` with the tokens renumbered into that embedding. The trained rows replace
    theirs in the full embedding on the way out, whatever happened inside.
    """
    full = model.token_embedding
    seen, renumbered = torch.unique(data.tokens, return_inverse=True)
    # from_pretrained: no random initialisation, so the seeded generator is left as it was.
    compact = torch.nn.Embedding.from_pretrained(full.weight.detach()[seen].clone(), freeze=False)
    model.token_embedding = compact
    try:
        yield dataclasses.replace(data, tokens=renumbered)
    finally:
        with torch.no_grad():
            full.weight[seen] = compact.weight
        model.token_embedding = full


def _fit(
    model: torch.nn.Module,
    data: TrainingData,
    epochs: int,
    batch_size: int,
    seed: int,
    learning_rate: float,
    progress: TrainProgress | None,
) -> list[float]:
    """Run the epochs; return the mean loss of each."""
    rng = np.random.default_rng(seed)
    plan = [
        epoch_batches(data.caption_image, data.n_images, batch_size, rng) for _ in range(epochs)
    ]
    total = sum(len(batches) for batches in plan)
    optimizer = _optimizer(model, learning_rate)
    model.train()
    losses: list[float] = []
    step = 0
    for batches in plan:
        epoch_loss = 0.0
        for captions in batches:
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(step, total, learning_rate)
            images = torch.as_tensor(data.caption_image[captions])
            loss = clip_loss(
                model.encode_image(data.pixels[images]),
                model.encode_text(data.tokens[torch.as_tensor(captions)]),
                model.logit_scale,
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                model.logit_scale.clamp_(0, MAX_LOGIT_SCALE)
            epoch_loss += loss.item()
            step += 1
            if progress is not None:
                progress(step, total)
        losses.append(epoch_loss / max(1, len(batches)))
    return losses


def save_checkpoint(
    model: torch.nn.Module,
    out_dir: Path,
    *,
    model_config: Mapping[str, Any],
    training: Mapping[str, Any],
) -> tuple[Path, Path]:
    """Write model_config.json, training.json and checkpoint.pt; return (config, checkpoint).

    The checkpoint is written last and renamed into place, so a checkpoint that exists is
    complete and comes with its config.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path = out_dir / MODEL_CONFIG_FILE
    config_path.write_text(json.dumps(dict(model_config), indent=2) + "\n", encoding="utf-8")
    (out_dir / TRAINING_FILE).write_text(
        json.dumps(dict(training), indent=2) + "\n", encoding="utf-8"
    )
    checkpoint_path = out_dir / CHECKPOINT_FILE
    partial = checkpoint_path.with_name(CHECKPOINT_FILE + ".partial")
    state_dict = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    torch.save(state_dict, partial)
    os.replace(partial, checkpoint_path)
    return config_path, checkpoint_path


def read_training_report(out_dir: Path) -> dict[str, Any]:
    """Return what training.json in `out_dir` says, or {} when it is missing or unreadable."""
    try:
        data = json.loads((Path(out_dir) / TRAINING_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
