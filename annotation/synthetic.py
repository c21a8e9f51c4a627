"""A synthetic dataset's generated scenes and captions, with their truth, read back.

An import of the generator's files records its parameters as the dataset's
`meta["synthetic"]` (`mitl.synthetic.meta`); the dataset is regenerated from them whenever
its truth is needed: for the instructions' proposed examples, the simulated crowd, the demo's
agreement with the truth.
"""

from __future__ import annotations

from mitl.synthetic.meta import regenerate
from mitl.synthetic.scenes import SyntheticDataset

from .errors import ServiceError
from .models import Dataset


def synthetic_regenerate(*, dataset: Dataset) -> SyntheticDataset:
    """Regenerate a synthetic dataset (with its truth) from the parameters it was imported with."""
    params = dataset.meta.get("synthetic")
    if not params:
        raise ServiceError(f"dataset {dataset.name!r} is not synthetic, so there is no known truth")
    return regenerate(params)
