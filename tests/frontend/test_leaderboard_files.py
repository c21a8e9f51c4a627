"""The leaderboard's extras: best values marked, sortable headers, CSV export, example rankings."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Caption, Dataset, Evaluation, Image, Release
from frontend.views.leaderboard_files import best_values
from frontend.views.leaderboard_jobs import RankingsUploadForm
from mitl.release_files import write_release_dir
from pipeline.evaluation_jobs import evaluation_limits

pytestmark = pytest.mark.django_db

I2T = {"1": [11, 12], "2": [21]}
T2I = {"11": [1], "12": [1], "21": [2, 1]}


@pytest.fixture
def release(tmp_path: Path) -> Release:
    folder = tmp_path / "tiny" / "1"
    manifest = write_release_dir(
        folder, i2t=I2T, t2i=T2I, judgements=[], stats={}, manifest={"name": "tiny"}
    )
    dataset = Dataset.objects.create(name="tiny")
    # The dataset: images 1-12, caption 10 * i + j of image i (j = 1, 2).
    for ext_id in range(1, 13):
        image = Image.objects.create(dataset=dataset, ext_id=ext_id)
        for j in (1, 2):
            Caption.objects.create(dataset=dataset, image=image, ext_id=10 * ext_id + j, text="c")
    return Release.objects.create(
        dataset=dataset,
        name="tiny",
        version=1,
        rule="eccv",
        path=str(folder),
        manifest=manifest,
    )


@pytest.fixture
def reader(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("reader"))
    return client


def two_models(release: Release) -> None:
    Evaluation.objects.create(
        release=release,
        model_name="alpha",
        metrics={"i2t": {"recall@1": 0.5, "map@r": 0.9}, "t2i": {"recall@1": 0.25}},
        rankings_sha256="0" * 64,
    )
    Evaluation.objects.create(
        release=release,
        model_name="beta",
        metrics={"i2t": {"recall@1": 0.75, "map@r": 0.1}, "t2i": {"recall@1": 0.25}},
        rankings_sha256="1" * 64,
    )


def board_url(release: Release) -> str:
    return reverse("frontend:leaderboard", args=[release.pk])


def test_anonymous_visitors_are_sent_to_log_in(client, release):
    for url in (
        reverse("frontend:leaderboard-csv", args=[release.pk]),
        reverse("frontend:leaderboard-example", args=[release.pk]),
        board_url(release) + "?format=csv",
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_best_values_are_the_highest_of_each_column_ignoring_gaps():
    assert best_values([[0.5, None, 0.2], [0.7, None, 0.2], [0.1, 0.3, None]]) == [0.7, 0.3, 0.2]
    assert best_values([]) == []


def test_the_best_value_of_each_metric_is_bold_and_marked(reader, release):
    two_models(release)
    html = reader.get(board_url(release)).content.decode()
    best = re.findall(r'<td class="best" data-value="([^"]*)"><strong>', html)
    # i2t recall@1 (beta 0.75), i2t map@r (alpha 0.9), t2i recall@1 (a tie: both 0.25).
    assert sorted(best) == ["0.25", "0.25", "0.75", "0.9"]
    assert html.count('class="best"') == 4


def test_the_headers_sort_with_a_script_and_the_server_order_stays(reader, release):
    two_models(release)
    html = reader.get(board_url(release)).content.decode()
    assert 'table id="leaderboard" class="sortable"' in html
    assert html.count('class="sort-header"') == 2 + 2 * 2  # model, submitted, 2 metrics × 2
    assert "frontend/leaderboard.js" in html
    assert html.index('data-value="alpha"') < html.index('data-value="beta"')


def test_the_csv_export_has_every_model_and_metric(reader, release):
    two_models(release)
    response = reader.get(reverse("frontend:leaderboard-csv", args=[release.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    assert 'filename="tiny-v1-leaderboard.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "model",
        "i2t:recall@1",
        "i2t:map@r",
        "t2i:recall@1",
        "t2i:map@r",
        "submitted_by",
        "submitted_at",
    ]
    assert [row[:5] for row in rows[1:]] == [
        ["alpha", "0.5", "0.9", "0.25", ""],
        ["beta", "0.75", "0.1", "0.25", ""],
    ]
    same = reader.get(board_url(release), {"format": "csv"})
    assert same.content == response.content


def test_the_page_links_the_csv_the_release_and_the_example(reader, release):
    html = reader.get(board_url(release)).content.decode()
    assert reverse("frontend:leaderboard-csv", args=[release.pk]) in html
    assert reverse("frontend:release", args=[release.pk]) in html
    assert reverse("frontend:leaderboard-example", args=[release.pk]) in html
    # The format hint is escaped: <image id> is text, not a tag.
    assert "&lt;image id&gt;" in html and "<image id>" not in html


def example(reader, release) -> bytes:
    response = reader.get(reverse("frontend:leaderboard-example", args=[release.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    return response.content


def test_the_example_ranks_every_query_positives_first(reader, release):
    data = json.loads(example(reader, release))
    assert set(data) == {"i2t", "t2i"}
    assert set(data["i2t"]) == set(I2T) and set(data["t2i"]) == set(T2I)
    for direction, truth in (("i2t", I2T), ("t2i", T2I)):
        for query, positives in truth.items():
            ranking = data[direction][query]
            assert ranking[: len(positives)] == positives
            assert len(ranking) == len(set(ranking)) <= 100
    assert data["i2t"]["2"][0] == 21
    assert sorted(data["i2t"]["2"]) == sorted(10 * i + j for i in range(1, 13) for j in (1, 2))
    assert sorted(data["t2i"]["11"]) == list(range(1, 13))


def test_the_example_passes_the_uploads_own_validation(
    reader, release, django_capture_on_commit_callbacks
):
    content = example(reader, release)
    form = RankingsUploadForm(
        {"model_name": "example"},
        {"rankings": SimpleUploadedFile("example.json", content, "application/json")},
        limits=evaluation_limits(release=release),
    )
    assert form.is_valid(), form.errors
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(
            board_url(release),
            {
                "model_name": "example",
                "rankings": SimpleUploadedFile("example.json", content, "application/json"),
            },
        )
    assert response.status_code == 302
    evaluation = Evaluation.objects.get(release=release, model_name="example")
    assert evaluation.metrics["i2t"]["recall@1"] == 1.0


def test_the_example_is_capped_at_100_ids_per_query(reader, tmp_path):
    folder = tmp_path / "big" / "1"
    captions = list(range(1000, 1300))
    write_release_dir(
        folder,
        i2t={"1": captions[:3]},
        t2i={str(c): [1] for c in captions},
        judgements=[],
        stats={},
        manifest={},
    )
    big = Release.objects.create(
        dataset=Dataset.objects.create(name="big"),
        name="big",
        version=1,
        rule="eccv",
        path=str(folder),
        manifest={},
    )
    data = json.loads(example(reader, big))
    assert len(data["i2t"]["1"]) == 100 and data["i2t"]["1"][:3] == captions[:3]


def test_a_release_without_its_positives_has_no_example(reader, release):
    (Path(release.path) / "image_to_caption.json").unlink()
    url = reverse("frontend:leaderboard-example", args=[release.pk])
    assert reader.get(url).status_code == 404
