"""Cached arrays of the relevance layer (matrices, embeddings) written safely."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def array_write(path: Path, array: np.ndarray) -> None:
    """Write an .npy file whole or not at all: a private temporary file, then a rename (the
    web and worker containers share the directory but not their process ids)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".partial.npy")
    try:
        with os.fdopen(handle, "wb") as stream:
            np.save(stream, array)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
