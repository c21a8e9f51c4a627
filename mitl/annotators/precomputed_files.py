"""Read the files of the precomputed annotator and match their ids to the corpus.

External ids may be integers or strings of digits; a file's rows and columns are matched to
the corpus by id, whatever their order. Every error is an `AnnotatorError` that names the
file. A score matrix is read as a `ScoreMatrix`; `.npy` files are memory-mapped so only the
rows used are read. Pure Python: no Django import.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mitl.annotators.base import AnnotatorError

_ID_PATTERN = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class ScoreMatrix:
    """A file's score matrix and, for every corpus row and column, its place in the file."""

    values: np.ndarray  # (file images, file captions), maybe memory-mapped
    image_index: np.ndarray  # int64, corpus image row → file row
    caption_index: np.ndarray  # int64, corpus caption row → file column

    @property
    def shape(self) -> tuple[int, int]:
        """Return (corpus images, corpus captions)."""
        return len(self.image_index), len(self.caption_index)

    def block(self, images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        """Return the float32 scores of these corpus rows and columns."""
        file_rows = self.image_index[images]
        file_columns = self.caption_index[captions]
        return np.asarray(self.values[np.ix_(file_rows, file_columns)], dtype=np.float32)


def parse_id(value: Any) -> int | None:
    """Return `value` as an external id (an integer, or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str) and _ID_PATTERN.fullmatch(value.strip()):
        return int(value)
    return None


def parse_ids(values: Any, what: str, source: Path) -> np.ndarray:
    """Return `values` as int64 external ids, or raise AnnotatorError naming `source`."""
    try:
        array = np.asarray(values)
    except ValueError:  # ragged nesting
        array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise AnnotatorError(f"'{source}': {what} must be a flat list of ids")
    if np.issubdtype(array.dtype, np.integer) or array.size == 0:
        return array.astype(np.int64)
    # Report offending items as given: numpy may have turned 900 into 900.0 next to a float.
    items = list(values) if isinstance(values, list | tuple) else array.tolist()
    parsed = [parse_id(item) for item in items]
    if None in parsed:
        bad = items[parsed.index(None)]
        raise AnnotatorError(f"'{source}': {what} must hold integer ids, found {bad!r}")
    return np.asarray(parsed, dtype=np.int64)


def id_array(values: Any, what: str, source: Path) -> np.ndarray:
    """Return `values` as distinct int64 external ids, or raise AnnotatorError naming `source`."""
    ids = parse_ids(values, what, source)
    ordered = np.sort(ids)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated):
        raise AnnotatorError(f"'{source}': {what} repeats the id {repeated[0]}")
    return ids


class IdIndex:
    """Finds the row of external ids among a fixed array of distinct ids."""

    def __init__(self, ids: np.ndarray) -> None:
        """Index `ids`, whose position is the row."""
        self.order = np.argsort(ids, kind="stable")
        self.ordered = ids[self.order]

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (row of each id, whether it is present); absent ids get row 0."""
        if not len(self.ordered):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        found_at = np.minimum(np.searchsorted(self.ordered, ids), len(self.ordered) - 1)
        present = self.ordered[found_at] == ids
        return np.where(present, self.order[found_at], 0).astype(np.int64), present


def positions_in(
    file_ids: np.ndarray, corpus_ids: np.ndarray, what: str, source: Path
) -> np.ndarray:
    """Return the file position of every corpus id; a missing one raises AnnotatorError."""
    positions, present = IdIndex(file_ids).rows(corpus_ids)
    if not present.all():
        missing = corpus_ids[~present]
        raise AnnotatorError(
            f"'{source}': {len(missing)} of the dataset's {len(corpus_ids)} {what} ids are "
            f"missing (first: {missing[0]})"
        )
    return positions


def read_json(path: Path) -> Any:
    """Return the parsed JSON in `path`, or raise AnnotatorError naming it."""
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as JSON: {exc}") from exc


def load_npz(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Return the arrays `keys` of an `.npz` file, or raise AnnotatorError naming it."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as .npz: {exc}") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise AnnotatorError(f"'{path}': holds a single array, not an .npz archive")
    with archive:
        missing = [key for key in keys if key not in archive]
        if missing:
            raise AnnotatorError(f"'{path}': the archive lacks the array(s) {', '.join(missing)}")
        try:
            return {key: archive[key] for key in keys}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise AnnotatorError(f"'{path}': cannot read it as .npz: {exc}") from exc


def load_npy(path: Path) -> np.ndarray:
    """Return the array of an `.npy` file, memory-mapped so only the rows used are read."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as .npy: {exc}") from exc
    if not isinstance(array, np.ndarray):
        array.close()
        raise AnnotatorError(f"'{path}': is an .npz archive, not a single .npy array")
    return array


def check_matrix(values: np.ndarray, n_images: int, n_captions: int, source: Path) -> None:
    """Raise AnnotatorError unless `values` is a real (n_images, n_captions) matrix."""
    if values.ndim != 2 or values.shape != (n_images, n_captions):
        raise AnnotatorError(
            f"'{source}': scores must have shape (image ids, caption ids) = "
            f"{(n_images, n_captions)}, got {values.shape}"
        )
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise AnnotatorError(f"'{source}': scores must be real numbers, got dtype {values.dtype}")
