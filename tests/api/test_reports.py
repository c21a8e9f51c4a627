"""Reports: a batch's diversity and bias, a dataset's statistics; 409 before their data."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_diversity_is_a_409_before_pooling_and_the_report_after(staff, batch):
    early = staff.get(f"/api/batches/{batch.pk}/diversity/")
    from pipeline.stages import batch_run_until

    batch_run_until(batch_id=batch.pk, until="building")
    ready = staff.get(f"/api/batches/{batch.pk}/diversity/")

    assert early.status_code == 409
    assert early.json()["detail"].startswith(f"batch {batch.pk} has no diversity report yet")
    assert ready.status_code == 200
    assert ready.json()["t2i"]["annotators"] == ["bow-plain", "tfidf"]


def test_bias_is_a_409_until_the_batch_has_verdicts(staff, annotating_batch):
    response = staff.get(f"/api/batches/{annotating_batch.pk}/bias/")
    assert response.status_code == 409
    assert "has no verdicts yet" in response.json()["detail"]


def test_bias_of_a_released_batch(staff, released):
    body = staff.get(f"/api/batches/{released.pk}/bias/").json()
    assert body["annotators"] == ["bow-plain", "tfidf"]
    assert body["batch"]["id"] == released.pk
    assert set(body["bias"]) == {"i2t", "t2i"}


def test_dataset_statistics_cover_every_positive_set(staff, released):
    body = staff.get("/api/datasets/small/stats/").json()
    names = [row["name"] for row in body["rows"]]
    assert names[0] == "original" and len(names) == 2  # original and the human-verified set
    assert body["original"] == "original"
    assert body["image_queries"] == 40


def test_dataset_statistics_over_an_unknown_set_are_a_404_naming_the_parameter(staff, dataset):
    response = staff.get("/api/datasets/small/stats/?queries_from=eccv")
    assert response.status_code == 404
    assert response.json() == {"detail": "queries_from: dataset 'small' has no positive set 'eccv'"}
