"""The embedding cache: vectors computed once per (annotator version, item), in the database.

Kept in the database (not on a worker's disk) so every worker on every machine shares it.
"""

from __future__ import annotations

import numpy as np

from annotation.models import Dataset, Embedding, MachineAnnotator
from mitl.annotators.base import Modality

_SAVE_BATCH = 2000


class DatabaseEmbeddingStore:
    """An `EmbeddingStore` bound to one annotator version and one dataset."""

    def __init__(self, *, annotator: MachineAnnotator, dataset: Dataset) -> None:
        self.annotator = annotator
        self.dataset = dataset

    def _rows(self, modality: Modality):
        return Embedding.objects.filter(
            annotator=self.annotator,
            version=self.annotator.version,
            dataset=self.dataset,
            modality=modality,
        )

    def load(self, modality: Modality, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return which of `ids` are cached and their vectors, in `ids` order."""
        # Read the whole (annotator, version, dataset, modality) slice: an IN list of tens of
        # thousands of ids is slower and hits SQLite's variable limit.
        cached = dict(
            self._rows(modality).values_list("ext_id", "vector").iterator(chunk_size=5000)
        )
        found = np.fromiter((int(i) in cached for i in ids), dtype=bool, count=len(ids))
        if not found.any():
            return found, np.zeros((0, 0), dtype=np.float32)
        vectors = np.stack(
            [np.frombuffer(bytes(cached[int(i)]), dtype="<f4") for i in ids[found]]
        ).astype(np.float32, copy=False)
        return found, vectors

    def save(self, modality: Modality, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Store vectors; an id cached concurrently by another worker is left as it is."""
        little_endian = np.ascontiguousarray(vectors, dtype="<f4")
        Embedding.objects.bulk_create(
            [
                Embedding(
                    annotator=self.annotator,
                    version=self.annotator.version,
                    dataset=self.dataset,
                    modality=modality,
                    ext_id=int(item),
                    dim=little_endian.shape[1],
                    vector=little_endian[row].tobytes(),
                )
                for row, item in enumerate(ids)
            ],
            batch_size=_SAVE_BATCH,
            ignore_conflicts=True,
        )

    def count(self, modality: Modality) -> int:
        return self._rows(modality).count()
