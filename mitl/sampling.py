"""Seeded sampling of image and caption queries."""

from __future__ import annotations

import numpy as np


def sample_ids(ids: np.ndarray, n: int, *, seed: int, stream: int) -> np.ndarray:
    """Return `n` distinct ids drawn without replacement, sorted, reproducible from the seed.

    `stream` separates the image and caption draws so changing one count never changes the
    other sample. Asking for more ids than exist raises ValueError with both numbers.
    """
    if n > len(ids):
        raise ValueError(f"asked for {n} queries but only {len(ids)} items are available")
    rng = np.random.default_rng([seed, stream])
    chosen = rng.choice(np.asarray(ids, dtype=np.int64), size=n, replace=False)
    return np.sort(chosen)


IMAGE_STREAM = 1
CAPTION_STREAM = 2
