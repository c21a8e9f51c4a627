"""A synthetic dataset regenerated from the parameters its import recorded."""

from __future__ import annotations

import pytest

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, Image
from annotation.synthetic import synthetic_regenerate


def test_an_imported_synthetic_dataset_regenerates_its_images_and_captions(dataset):
    generated = synthetic_regenerate(dataset=dataset)
    images = set(Image.objects.filter(dataset=dataset).values_list("ext_id", flat=True))
    captions = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "text"))
    assert {scene.image_id for scene in generated.scenes} == images
    assert {c.caption_id: c.text for c in generated.captions} == captions


def test_a_dataset_without_recorded_parameters_has_no_known_truth(db):
    plain = Dataset.objects.create(name="plain")
    with pytest.raises(ServiceError, match="'plain' is not synthetic, so there is no known truth"):
        synthetic_regenerate(dataset=plain)
