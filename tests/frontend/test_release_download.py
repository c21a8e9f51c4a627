"""Downloading a release: one zip, for logged-in users."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Release
from mitl.release_files import bundle_path
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(batch) -> Release:
    batch = run_to_release(batch)
    return Release.objects.get(batches=batch)


def url(release_id: int) -> str:
    return reverse("frontend:release-download", args=[release_id])


def test_anonymous_visitors_are_sent_to_log_in(client, release):
    response = client.get(url(release.pk))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_logged_in_user_gets_the_zip_as_an_attachment(client, release):
    client.force_login(get_user_model().objects.create_user("reader"))
    response = client.get(f"/releases/{release.pk}/download/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="small-v1.zip"'
    body = b"".join(response.streaming_content)
    assert body == bundle_path(Path(release.path)).read_bytes()
    assert body.startswith(b"PK")


def test_an_unknown_release_is_not_found(client, db):
    client.force_login(get_user_model().objects.create_user("reader"))
    assert client.get(url(999)).status_code == 404


def test_a_release_whose_zip_is_missing_is_not_found(client, release):
    bundle_path(Path(release.path)).unlink()
    client.force_login(get_user_model().objects.create_user("reader"))
    assert client.get(url(release.pk)).status_code == 404
