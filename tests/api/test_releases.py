"""Releases: filters, the manifest, and the zip download."""

from __future__ import annotations

from pathlib import Path

import pytest

from mitl.release_files import bundle_path

pytestmark = pytest.mark.django_db


def test_releases_filter_by_dataset_and_name(ann, release):
    def ids(query: str) -> list[int]:
        return [row["id"] for row in ann.get(f"/api/releases/?{query}").json()["results"]]

    assert ids("dataset=small") == [release.pk]
    assert ids(f"name={release.name}&version=1") == [release.pk]
    assert ids("name=other") == ids("dataset=other") == []


def test_the_detail_carries_the_manifest_and_the_links(ann, release):
    body = ann.get(f"/api/releases/{release.pk}/").json()
    assert body["manifest"] == release.manifest
    assert body["batches"] == [b.pk for b in release.batches.all()]
    assert body["download_url"] == f"/api/releases/{release.pk}/download/"
    assert body["evaluations_url"] == f"/api/releases/{release.pk}/evaluations/"
    assert "manifest" not in ann.get("/api/releases/").json()["results"][0]


@pytest.mark.parametrize("accept", ["*/*", "application/zip"])
def test_the_download_is_the_zip_as_an_attachment(ann, release, accept):
    response = ann.get(f"/api/releases/{release.pk}/download/", HTTP_ACCEPT=accept)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="small-v1.zip"'
    assert b"".join(response.streaming_content) == bundle_path(Path(release.path)).read_bytes()


@pytest.mark.parametrize("accept", ["*/*", "application/zip"])
def test_a_missing_zip_is_a_json_404(ann, release, accept):
    bundle_path(Path(release.path)).unlink()
    response = ann.get(f"/api/releases/{release.pk}/download/", HTTP_ACCEPT=accept)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f"release {release} has no zip file"}
