"""The contract every machine annotator meets.

An annotator scores (image, caption) pairs of one corpus. Retrieval (`mitl.retrieval`) ranks
captions for images and images for captions from the same `Annotator.similarity`, so the two
directions can never disagree about a pair. Pure Python: no Django import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np


def _as_id_array(values: Any, field: str) -> np.ndarray:
    """Return `values` as a 1-D int64 array, or raise ValueError naming `field`."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"Corpus.{field} must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"Corpus.{field} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Corpus:
    """Everything an annotator may look at, rows in a fixed order.

    Row i of the image fields describes the same image; likewise for captions.
    `caption_image[c]` is the row (not the external id) of caption c's original image.
    """

    image_ids: np.ndarray
    caption_ids: np.ndarray
    caption_texts: tuple[str, ...]
    caption_image: np.ndarray
    image_paths: tuple[str | None, ...] | None = None
    image_labels: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        # Frozen, so coerce through object.__setattr__; annotators can then rely on int64 rows.
        for field in ("image_ids", "caption_ids", "caption_image"):
            object.__setattr__(self, field, _as_id_array(getattr(self, field), field))
        object.__setattr__(self, "caption_texts", tuple(self.caption_texts))
        n_images, n_captions = len(self.image_ids), len(self.caption_ids)
        if len(self.caption_texts) != n_captions:
            raise ValueError(
                f"Corpus has {n_captions} caption ids but {len(self.caption_texts)} texts"
            )
        if len(self.caption_image) != n_captions:
            raise ValueError(
                f"Corpus has {n_captions} caption ids but {len(self.caption_image)} "
                "caption_image rows"
            )
        if n_captions and (self.caption_image.min() < 0 or self.caption_image.max() >= n_images):
            raise ValueError(f"Corpus.caption_image must index rows 0..{n_images - 1}")
        if self.image_paths is not None:
            object.__setattr__(self, "image_paths", tuple(self.image_paths))
            if len(self.image_paths) != n_images:
                raise ValueError(
                    f"Corpus has {n_images} images but {len(self.image_paths)} image_paths"
                )
        if self.image_labels is not None:
            labels = tuple(tuple(row) for row in self.image_labels)
            object.__setattr__(self, "image_labels", labels)
            if len(labels) != n_images:
                raise ValueError(f"Corpus has {n_images} images but {len(labels)} image_labels")

    @property
    def n_images(self) -> int:
        """Return the number of image rows."""
        return len(self.image_ids)

    @property
    def n_captions(self) -> int:
        """Return the number of caption rows."""
        return len(self.caption_ids)


class AnnotatorError(Exception):
    """A user-facing problem: bad configuration, or a corpus the annotator cannot handle."""


class Annotator(ABC):
    """A machine annotator that scores every (image row, caption row) pair of one corpus.

    Subclasses list their accepted config keys in `config_keys`; the constructor rejects any
    other key so a typo in a run's configuration fails loudly instead of being ignored.
    """

    kind: ClassVar[str]
    config_keys: ClassVar[tuple[str, ...]] = ()
    # Whether `text_similarity` can score free texts (perturbed caption queries).
    can_score_text: ClassVar[bool] = False

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Store `name` and `config`, rejecting config keys the annotator does not know."""
        self.name = name
        if not isinstance(config, Mapping):
            raise AnnotatorError(
                f"{self.kind} annotator '{name}': config must be a mapping, "
                f"got {type(config).__name__}"
            )
        for key in config:
            if key not in self.config_keys:
                known = ", ".join(self.config_keys) or "none"
                raise AnnotatorError(
                    f"{self.kind} annotator '{name}': unknown config key '{key}' (known: {known})"
                )
        self.config: dict[str, Any] = dict(config)

    def _bool_option(self, key: str, default: bool) -> bool:
        """Return the boolean config value `key`, or raise AnnotatorError if it is not a bool."""
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise AnnotatorError(
                f"{self.kind} annotator '{self.name}': config key '{key}' must be true or false, "
                f"got {value!r}"
            )
        return value

    @abstractmethod
    def prepare(self, corpus: Corpus) -> None:
        """Fit or embed `corpus`; called once before any `similarity` call."""

    @abstractmethod
    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        """Return float32 scores of shape (len(image_rows), len(caption_rows)), higher = better.

        The same function serves image-to-text and text-to-image retrieval, so both directions
        rank every pair by the same number.
        """

    def text_similarity(self, texts: Sequence[str], caption_rows: np.ndarray) -> np.ndarray:
        """Return float32 scores (len(texts), n_images) of free texts against every image.

        `texts[k]` stands in for caption row `caption_rows[k]` (a perturbed version of it):
        where an annotator represents an image by its captions, that caption is left out of
        its own image, exactly as `similarity` leaves a caption out of its own image.
        `caption_rows[k]` may be -1 for a text that replaces no caption (nothing left out).
        Only annotators with `can_score_text` implement it.
        """
        raise AnnotatorError(f"annotator '{self.name}' ({self.kind}) cannot score free text")


Modality = Literal["image", "caption"]
# (what, done, total), e.g. ("embedding images", 512, 5000), for progress bars.
EmbedProgress = Callable[[str, int, int], None]


class EmbeddingStore(Protocol):
    """Where an embedding annotator keeps vectors between runs and batches.

    The platform binds one store to (annotator name, annotator version, dataset), so ids are
    the corpus' external ids; a new annotator version starts with an empty store.
    """

    def load(self, modality: Modality, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (found: bool mask over `ids`, vectors of the found ids in `ids` order)."""
        ...

    def save(self, modality: Modality, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Keep `vectors` (float32, one row per id) for later runs."""
        ...


class EmbeddingAnnotator(Annotator):
    """An annotator that embeds images and captions and scores pairs by their dot product.

    Subclasses implement `embed_images` and `embed_captions` (L2-normalised float32 rows).
    `prepare` reuses what `store` already holds and embeds only the missing items, so an
    item is embedded once per annotator version, whatever the number of batches.
    A subclass whose vectors already sit in a file sets `uses_store` to False.
    """

    uses_store: ClassVar[bool] = True

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        super().__init__(name=name, config=config)
        self.store: EmbeddingStore | None = None
        self.progress: EmbedProgress | None = None
        self.image_vectors: np.ndarray | None = None
        self.caption_vectors: np.ndarray | None = None

    @abstractmethod
    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return L2-normalised float32 vectors (len(rows), d) for these image rows."""

    @abstractmethod
    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return L2-normalised float32 vectors (len(rows), d) for these caption rows."""

    def prepare(self, corpus: Corpus) -> None:
        """Load or compute the vectors of every image and caption of `corpus`."""
        self.caption_vectors = self._vectors(corpus, "caption", corpus.caption_ids)
        self.image_vectors = self._vectors(corpus, "image", corpus.image_ids)

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        if self.image_vectors is None or self.caption_vectors is None:
            raise RuntimeError(f"annotator '{self.name}': call prepare() before similarity()")
        images = self.image_vectors[as_rows(image_rows, len(self.image_vectors), "image")]
        captions = self.caption_vectors[as_rows(caption_rows, len(self.caption_vectors), "caption")]
        return images @ captions.T

    def _vectors(self, corpus: Corpus, modality: Modality, ids: np.ndarray) -> np.ndarray:
        found = np.zeros(len(ids), dtype=bool)
        cached = None
        if self.store is not None and len(ids):
            found, cached = self.store.load(modality, ids)
        missing = np.flatnonzero(~found)
        embed = self.embed_images if modality == "image" else self.embed_captions
        fresh = embed(corpus, missing) if len(missing) else None
        if fresh is not None and self.store is not None:
            self.store.save(modality, ids[missing], fresh)
        parts = [part for part in (cached, fresh) if part is not None and len(part)]
        if not parts:
            return np.zeros((len(ids), 0), dtype=np.float32)
        vectors = np.empty((len(ids), parts[0].shape[1]), dtype=np.float32)
        if cached is not None and len(cached):
            vectors[found] = cached
        if fresh is not None:
            vectors[missing] = fresh
        return vectors


def as_rows(rows: Any, n: int, what: str) -> np.ndarray:
    """Return `rows` as a 1-D int64 array of indices into 0..n-1, or raise ValueError."""
    array = np.asarray(rows)
    if array.ndim != 1:
        raise ValueError(f"{what} rows must be 1-D, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} rows must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.min() < 0 or array.max() >= n:
        raise ValueError(f"{what} rows must lie in 0..{n - 1}")
    return array


def as_text_rows(rows: Any, n_texts: int, n_captions: int) -> np.ndarray:
    """Return the caption rows that `n_texts` free texts stand in for, as int64 in -1..n-1.

    -1 marks a text that replaces no caption; raise ValueError for anything else out of range.
    """
    array = np.asarray(rows)
    if array.ndim != 1 or len(array) != n_texts:
        raise ValueError(
            f"caption rows must be 1-D with one row per text ({n_texts}), got shape {array.shape}"
        )
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"caption rows must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.min() < -1 or array.max() >= n_captions:
        raise ValueError(f"caption rows must lie in 0..{n_captions - 1}, or be -1 for none")
    return array
