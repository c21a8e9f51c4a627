"""An embedding annotator backed by an open_clip model whose weights come from a local file.

Config
    model         open_clip architecture name, e.g. "ViT-B-32" or "mitl-tiny-clip" (required)
    checkpoint    path to the weights: a state_dict, or `{"state_dict": ...}` as open_clip's
                  training script writes it; a leading "module." on the keys is dropped (required)
    model_config  path to an open_clip model-config JSON (`embed_dim`, `vision_cfg`, `text_cfg`)
                  registered under `model` before the model is built, for custom architectures
    batch_size    images or captions per forward pass (default 64)
    device        "auto" (CUDA when available, else CPU, the default), "cpu" or "cuda"
    precision     "fp32" (default), "fp16" or "bf16"

Nothing is ever downloaded: the model is built untrained and the checkpoint is loaded into it,
strictly, so a checkpoint that does not fit the architecture fails loudly. The model, its
validation transform and its tokenizer are built once per annotator instance, on first use;
`prepare` does not build them at all when the embedding store already holds every vector.

Free texts (`text_similarity`) go through the text tower and are scored against the image
vectors; images are not represented by captions, so nothing is left out.

This module imports torch and open_clip at the top; the annotator registry imports it lazily,
so the web process does not pay for them at start-up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import torch
from PIL import Image

from mitl.annotators.base import AnnotatorError, Corpus, EmbeddingAnnotator, as_text_rows

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
DEFAULT_BATCH_SIZE = 64
# The keys open_clip's own registry requires of a model config.
MODEL_CONFIG_KEYS: tuple[str, ...] = ("embed_dim", "vision_cfg", "text_cfg")
_DDP_PREFIX = "module."
# How many offending image ids an error message lists.
_SHOWN_IDS = 5


def read_model_config(path: Path) -> dict[str, Any]:
    """Return the open_clip model config stored as JSON at `path`, or raise ValueError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read model config {path} ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"model config {path} is not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or not all(key in data for key in MODEL_CONFIG_KEYS):
        raise ValueError(
            f"model config {path} must be a JSON object with {', '.join(MODEL_CONFIG_KEYS)}"
        )
    return data


def register_model_config(name: str, config: Mapping[str, Any]) -> None:
    """Make `config` known to open_clip as architecture `name`, replacing any earlier one.

    open_clip's public `add_model_config` names a config after its file, so the config is
    written to a temporary `<name>.json` first; the registry keeps the parsed copy after
    the file is gone.
    """
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"model name must be a plain name, got {name!r}")
    with tempfile.TemporaryDirectory(prefix="mitl-open-clip-") as folder:
        path = Path(folder) / f"{name}.json"
        path.write_text(json.dumps(dict(config)), encoding="utf-8")
        open_clip.add_model_config(path)


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """Return the weights stored at `path`, unwrapped from `{"state_dict": ...}` if need be.

    Only tensors and plain containers are unpickled (`weights_only`), so a checkpoint cannot
    run code. Raise ValueError for a file that holds no state_dict.
    """
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise ValueError(f"checkpoint {path} does not exist") from exc
    except Exception as exc:  # torch raises pickle, zip and runtime errors alike
        raise ValueError(f"cannot read checkpoint {path}: {exc}") from exc
    if isinstance(data, Mapping) and "state_dict" in data:
        data = data["state_dict"]
    if (
        not isinstance(data, Mapping)
        or not data
        or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in data.items())
    ):
        raise ValueError(
            f"checkpoint {path} holds no state_dict (a mapping of parameter names to tensors)"
        )
    # Models saved from DistributedDataParallel carry the wrapper's prefix on every key.
    return {key.removeprefix(_DDP_PREFIX): value for key, value in data.items()}


class _DropRandomInitWarning(logging.Filter):
    """Drop open_clip's "initialized randomly" warning, untrue once a checkpoint is loaded."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No pretrained weights loaded")


@contextlib.contextmanager
def untrained_model_quietly() -> Iterator[None]:
    """Silence open_clip's random-initialisation warning while a model is being built."""
    # open_clip logs through the root logger, so that is where the filter goes.
    root, drop = logging.getLogger(), _DropRandomInitWarning()
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)


def batches(rows: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """Yield consecutive slices of `rows` holding at most `size` items."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


class OpenClipAnnotator(EmbeddingAnnotator):
    """Scores a pair by the cosine similarity of open_clip's image and caption embeddings."""

    kind = "open_clip"
    config_keys = ("model", "checkpoint", "model_config", "batch_size", "device", "precision")
    can_score_text = True

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Validate the config and check that the files it names exist; load nothing yet."""
        super().__init__(name=name, config=config)
        self.model_name = self._text_option("model", required=True)
        self.checkpoint = Path(self._text_option("checkpoint", required=True))
        if not self.checkpoint.is_file():
            raise self._error(f"checkpoint file {self.checkpoint} does not exist")
        config_path = self._text_option("model_config", required=False)
        self.model_config = Path(config_path) if config_path else None
        if self.model_config is not None and not self.model_config.is_file():
            raise self._error(f"model_config file {self.model_config} does not exist")
        self.batch_size = self._batch_size_option()
        self.device_option = self._choice_option("device", DEVICES, "auto")
        self.precision = self._choice_option("precision", PRECISIONS, "fp32")
        self._model: torch.nn.Module | None = None
        self._preprocess: Callable[[Image.Image], torch.Tensor] | None = None
        self._tokenizer: Callable[[list[str]], torch.Tensor] | None = None
        self._device: torch.device | None = None

    # --- config -------------------------------------------------------------------------

    def _error(self, message: str) -> AnnotatorError:
        return AnnotatorError(f"{self.kind} annotator '{self.name}': {message}")

    def _text_option(self, key: str, *, required: bool) -> str:
        value = self.config.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            raise self._error(f"config key '{key}' must be a non-empty string, got {value!r}")
        return value.strip()

    def _batch_size_option(self) -> int:
        value = self.config.get("batch_size", DEFAULT_BATCH_SIZE)
        # bool is an int subclass; `true` as a batch size is a typo, not 1.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._error(f"config key 'batch_size' must be a positive integer, got {value!r}")
        return value

    def _choice_option(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.config.get(key, default)
        if value not in choices:
            raise self._error(
                f"config key '{key}' must be one of {', '.join(choices)}, got {value!r}"
            )
        return str(value)

    # --- model --------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Return whether the model has been built and its weights loaded."""
        return self._model is not None

    def _resolve_device(self) -> torch.device:
        if self.device_option == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device_option == "cuda" and not torch.cuda.is_available():
            raise self._error("device 'cuda' was asked for but CUDA is not available")
        return torch.device(self.device_option)

    def load(self) -> None:
        """Build the model, its validation transform and tokenizer, and load the checkpoint."""
        if self._model is not None:
            return
        device = self._resolve_device()
        if self.model_config is not None:
            try:
                register_model_config(self.model_name, read_model_config(self.model_config))
            except ValueError as exc:
                raise self._error(str(exc)) from exc
        elif self.model_name not in open_clip.list_models():
            raise self._error(
                f"unknown open_clip architecture '{self.model_name}'; name a built-in one or "
                "give model_config, the path of its JSON config"
            )
        try:
            # pretrained=None and no tower weights: the model starts untrained, never downloaded.
            with untrained_model_quietly():
                model, _, preprocess = open_clip.create_model_and_transforms(
                    self.model_name,
                    pretrained=None,
                    pretrained_image=False,
                    pretrained_text=False,
                    precision=self.precision,
                    device=device,
                )
            tokenizer = open_clip.get_tokenizer(self.model_name)
        except (RuntimeError, OSError, ValueError) as exc:
            raise self._error(f"cannot build open_clip model '{self.model_name}': {exc}") from exc
        self._load_weights(model)
        model.eval()
        self._model, self._preprocess, self._tokenizer = model, preprocess, tokenizer
        self._device = device

    def _load_weights(self, model: torch.nn.Module) -> None:
        try:
            state_dict = read_state_dict(self.checkpoint)
        except ValueError as exc:
            raise self._error(str(exc)) from exc
        try:
            result = model.load_state_dict(state_dict, strict=False)
        except RuntimeError as exc:  # shape mismatches raise even when not strict
            raise self._error(
                f"checkpoint {self.checkpoint} does not fit architecture '{self.model_name}': {exc}"
            ) from exc
        if result.missing_keys or result.unexpected_keys:
            raise self._error(
                f"checkpoint {self.checkpoint} does not fit architecture '{self.model_name}': "
                f"missing keys {_preview(result.missing_keys)}, "
                f"unexpected keys {_preview(result.unexpected_keys)}"
            )

    def _ready(self) -> tuple[torch.nn.Module, torch.device]:
        self.load()
        assert self._model is not None and self._device is not None
        return self._model, self._device

    # --- embedding ----------------------------------------------------------------------

    def prepare(self, corpus: Corpus) -> None:
        """Check that every image has a file, then embed what the store does not hold."""
        # Checked first so a text-only dataset fails before any caption is embedded.
        self._check_image_files(corpus, np.arange(corpus.n_images))
        super().prepare(corpus)

    def _check_image_files(self, corpus: Corpus, rows: np.ndarray) -> None:
        if corpus.image_paths is None:
            raise self._error("dataset has no image files; image-based annotators need them")
        missing = [int(corpus.image_ids[row]) for row in rows if corpus.image_paths[row] is None]
        if missing:
            shown = ", ".join(str(image_id) for image_id in missing[:_SHOWN_IDS])
            more = ", ..." if len(missing) > _SHOWN_IDS else ""
            raise self._error(
                f"{len(missing)} of {corpus.n_images} images have no file (image ids "
                f"{shown}{more}); image-based annotators need them"
            )

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return L2-normalised float32 image embeddings for these image rows."""
        self._check_image_files(corpus, rows)
        assert corpus.image_paths is not None
        model, device = self._ready()
        assert self._preprocess is not None
        dtype = open_clip.get_input_dtype(self.precision)
        parts: list[np.ndarray] = []
        for chunk in batches(np.asarray(rows, dtype=np.int64), self.batch_size):
            pixels = torch.stack([self._pixels(str(corpus.image_paths[row])) for row in chunk])
            with torch.inference_mode():
                features = model.encode_image(pixels.to(device=device, dtype=dtype))
            parts.append(_normalised(features))
            self._report("embedding images", sum(len(part) for part in parts), len(rows))
        return _stack(parts)

    def _pixels(self, path: str) -> torch.Tensor:
        assert self._preprocess is not None
        try:
            with Image.open(path) as image:
                return self._preprocess(image.convert("RGB"))
        except OSError as exc:
            raise self._error(f"cannot read image {path}: {exc}") from exc

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return L2-normalised float32 caption embeddings for these caption rows."""
        return self.embed_texts([corpus.caption_texts[row] for row in rows])

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Return L2-normalised float32 text-tower embeddings of `texts`, in batches."""
        model, device = self._ready()
        assert self._tokenizer is not None
        parts: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            tokens = self._tokenizer(list(texts[start : start + self.batch_size]))
            with torch.inference_mode():
                features = model.encode_text(tokens.to(device))
            parts.append(_normalised(features))
            self._report("embedding captions", sum(len(part) for part in parts), len(texts))
        return _stack(parts)

    def text_similarity(self, texts: Sequence[str], caption_rows: np.ndarray) -> np.ndarray:
        """Return float32 cosines (len(texts), n_images) of free texts with every image.

        `caption_rows` is only checked: an image is its pixels, so no caption is left out.
        """
        if self.image_vectors is None or self.caption_vectors is None:
            raise RuntimeError(f"annotator '{self.name}': call prepare() before text_similarity()")
        as_text_rows(caption_rows, len(texts), len(self.caption_vectors))
        if not texts or not len(self.image_vectors):
            return np.zeros((len(texts), len(self.image_vectors)), dtype=np.float32)
        return np.asarray(self.embed_texts(texts) @ self.image_vectors.T, dtype=np.float32)

    def _report(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, done, total)


def _normalised(features: torch.Tensor) -> np.ndarray:
    """Return `features` as unit-length float32 rows, normalised in fp32 whatever the precision."""
    features = features.float()
    features = features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return features.cpu().numpy().astype(np.float32, copy=False)


def _stack(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def _preview(keys: list[str]) -> str:
    shown = ", ".join(keys[:_SHOWN_IDS])
    return f"[{shown}{', ...' if len(keys) > _SHOWN_IDS else ''}]"
