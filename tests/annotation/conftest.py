"""Fixtures of the crowd-work tests (handout, submissions, review, their reads).

`test_import_jobs.py` defines a `tiny` of its own, which wins in that module.
"""

from __future__ import annotations

import pytest

from annotation.models import Caption, Dataset, Image

from .crowd_factories import N_PAIRS


@pytest.fixture
def tiny() -> Dataset:
    """Twelve images with one caption each, without image files."""
    dataset = Dataset.objects.create(name="tiny")
    for i in range(N_PAIRS):
        image = Image.objects.create(dataset=dataset, ext_id=i)
        Caption.objects.create(dataset=dataset, ext_id=100 + i, image=image, text=f"caption {i}")
    return dataset
