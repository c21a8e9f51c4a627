"""The parameters a synthetic dataset is recorded with, and the dataset regenerated from them.

`files.write` stores them as synthetic.json and an import keeps them as the dataset's
`meta["synthetic"]`. Everything is deterministic from them, truth included, so the truth is
regenerated when needed, never stored. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mitl.synthetic.generation import generate
from mitl.synthetic.scenes import SyntheticDataset

GENERATOR = "mitl.synthetic"


def synthetic_meta(dataset: SyntheticDataset) -> dict[str, Any]:
    """Return the parameters that regenerate `dataset` (synthetic.json's content)."""
    return {
        "generator": GENERATOR,
        "seed": dataset.seed,
        "n_images": len(dataset.scenes),
        "captions_per_image": dataset.captions_per_image,
    }


def regenerate(meta: Mapping[str, Any]) -> SyntheticDataset:
    """Generate again the dataset these recorded parameters describe (see `synthetic_meta`)."""
    return generate(
        n_images=meta["n_images"],
        seed=meta["seed"],
        captions_per_image=meta["captions_per_image"],
    )
