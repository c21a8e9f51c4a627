"""A release's page: datasheet, files, formats and the downloads, for logged-in users only."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Dataset, Release
from mitl.release_files import write_release_dir
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db

DATASHEET = """# Datasheet of tiny

Positives <script>alert(1)</script> found **by people**.

- one `id`
- two

| direction | positives |
|---|---|
| i2t | 3 |
"""


@pytest.fixture
def release(tmp_path: Path) -> Release:
    folder = tmp_path / "tiny" / "1"
    manifest = write_release_dir(
        folder,
        i2t={"1": [11, 12], "2": [21]},
        t2i={"11": [1], "21": [2]},
        judgements=[],
        stats={},
        manifest={"name": "tiny", "version": 1},
        text_files={
            "README.md": DATASHEET,
            "qrels_i2t.txt": "1 0 11 1\n",
            "qrels_t2i.txt": "11 0 1 1\n",
        },
    )
    return Release.objects.create(
        dataset=Dataset.objects.create(name="tiny"),
        name="tiny",
        version=1,
        rule="eccv",
        path=str(folder),
        manifest=manifest,
    )


@pytest.fixture
def reader(client):
    client.force_login(get_user_model().objects.create_user("reader"))
    return client


def page_url(release: Release) -> str:
    return reverse("frontend:release", args=[release.pk])


def file_url(release: Release, name: str) -> str:
    return reverse("frontend:release-file", args=[release.pk, name])


def test_anonymous_visitors_are_sent_to_log_in_everywhere(client, release):
    for url in (
        page_url(release),
        file_url(release, "README.md"),
        reverse("frontend:release-positives-csv", args=[release.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_the_page_renders_the_datasheet_escaped(reader, release):
    html = reader.get(page_url(release)).content.decode()
    assert "<h1>Datasheet of tiny</h1>" in html
    assert "<strong>by people</strong>" in html
    assert "<li>one <code>id</code></li>" in html
    assert "<th>direction</th>" in html and "<td>i2t</td>" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_page_lists_every_file_with_size_and_checksum(reader, release):
    html = reader.get(page_url(release)).content.decode()
    folder = Path(release.path)
    for path in folder.iterdir():
        assert file_url(release, path.name) in html
        assert hashlib.sha256(path.read_bytes()).hexdigest() in html
    assert reverse("frontend:release-download", args=[release.pk]) in html
    assert reverse("frontend:release-positives-csv", args=[release.pk]) in html
    assert "ECCV Caption JSON" in html and "TREC qrels" in html


@pytest.mark.parametrize("name", ["image_to_caption.json", "qrels_t2i.txt", "manifest.json"])
def test_a_listed_file_downloads_as_it_is(reader, release, name):
    response = reader.get(file_url(release, name))
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == (Path(release.path) / name).read_bytes()
    assert f'filename="tiny-v1-{name}"' in response["Content-Disposition"]


@pytest.mark.parametrize(
    "name", ["other.txt", "..", ".hidden", "%2E%2E%2Fsecret", "..%2F1.zip", "1.zip"]
)
def test_a_name_the_manifest_does_not_list_is_not_found(reader, release, name):
    (Path(release.path) / "other.txt").write_text("not in the manifest")
    (Path(release.path).parent / "secret").write_text("outside")
    url = f"/releases/{release.pk}/files/{name}"
    assert reader.get(url).status_code == 404


def test_the_positives_csv_has_every_pair_of_both_directions(reader, release):
    response = reader.get(reverse("frontend:release-positives-csv", args=[release.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    assert 'filename="tiny-v1-positives.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows == [
        ["direction", "query_id", "positive_id"],
        ["i2t", "1", "11"],
        ["i2t", "1", "12"],
        ["i2t", "2", "21"],
        ["t2i", "11", "1"],
        ["t2i", "21", "2"],
    ]


def test_an_unknown_release_is_not_found(reader, db):
    assert reader.get(reverse("frontend:release", args=[999])).status_code == 404
    assert reader.get("/releases/999/files/README.md").status_code == 404


def test_a_release_without_manifest_or_datasheet_still_shows(reader, release):
    for path in Path(release.path).iterdir():
        path.unlink()
    response = reader.get(page_url(release))
    assert response.status_code == 200
    assert "lists no file" in response.content.decode()
    assert reader.get(file_url(release, "README.md")).status_code == 404
    assert (
        reader.get(reverse("frontend:release-positives-csv", args=[release.pk])).status_code == 404
    )


def test_release_lists_link_to_the_release_page(reader, release):
    html = reader.get(reverse("frontend:home")).content.decode()
    assert f'href="{page_url(release)}"' in html


def test_a_pipeline_release_shows_its_datasheet_and_files(
    batch, client, django_user_model, django_capture_on_commit_callbacks
):
    batch = run_to_release(batch)
    release = Release.objects.get(batches=batch)
    client.force_login(django_user_model.objects.create_user("staffer", is_staff=True))
    html = client.get(page_url(release)).content.decode()
    assert '<div id="datasheet"' in html and "<h1>" in html
    assert file_url(release, "judgements.jsonl") in html
    staff_list = client.get(reverse("frontend:releases")).content.decode()
    assert f'href="{page_url(release)}"' in staff_list
    csv_body = b"".join(
        client.get(reverse("frontend:release-positives-csv", args=[release.pk])).streaming_content
    )
    folder = Path(release.path)
    expected = sum(
        len(positives)
        for name in ("image_to_caption.json", "caption_to_image.json")
        for positives in json.loads((folder / name).read_text()).values()
    )
    assert csv_body.decode().count("\n") == 1 + expected
    example = client.get(reverse("frontend:leaderboard-example", args=[release.pk])).content
    with django_capture_on_commit_callbacks(execute=True):  # the scoring task runs here
        response = client.post(
            reverse("frontend:leaderboard", args=[release.pk]),
            {
                "model_name": "example",
                "rankings": SimpleUploadedFile("example.json", example, "application/json"),
            },
        )
    assert response.status_code == 302  # evaluated: the example is a valid rankings file
    assert release.evaluations.filter(model_name="example").exists()
