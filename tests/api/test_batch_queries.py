"""The API's batch creation with chosen queries: the dataset's own ids, errors by field."""

from __future__ import annotations

import pytest

from annotation.models import Batch
from tests.batch_queries import ext_ids, query_ids

pytestmark = pytest.mark.django_db


def test_the_api_takes_queries_and_names_them_in_errors(staff, dataset, annotators, small_config):
    images, captions = ext_ids(dataset)
    body = {"dataset": "small", "name": "api", "config": small_config}
    created = staff.post(
        "/api/batches/",
        {**body, "queries": {"images": images[:2], "captions": captions[:3]}},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert query_ids(Batch.objects.get(pk=created.json()["id"])) == (images[:2], captions[:3])

    unknown = staff.post("/api/batches/", {**body, "queries": {"images": [99999]}}, format="json")
    assert unknown.status_code == 400
    assert unknown.json()["errors"]["queries"] == ["the dataset has no image with id 99999"]
    malformed = staff.post("/api/batches/", {**body, "queries": {"images": "1"}}, format="json")
    assert malformed.status_code == 400 and "queries" in malformed.json()["errors"]
