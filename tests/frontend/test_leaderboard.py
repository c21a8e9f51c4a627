"""The leaderboard page through Django's test client: access, upload, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Dataset, Evaluation, Release
from frontend.views import leaderboard as leaderboard_view
from mitl.release_files import I2T_FILE, T2I_FILE

pytestmark = pytest.mark.django_db

# Image queries 1, 2 and caption queries 11, 21 over captions 11-16 (image 1), 21-26 (image 2).
CAPTIONS = [11, 12, 13, 14, 15, 16, 21, 22, 23, 24, 25, 26]
IMAGES = list(range(1, 11))


@pytest.fixture
def release(tmp_path: Path) -> Release:
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / I2T_FILE).write_text(json.dumps({"1": [11, 12], "2": [21]}))
    (folder / T2I_FILE).write_text(json.dumps({"11": [1], "21": [2, 1]}))
    dataset = Dataset.objects.create(name="tiny")
    return Release.objects.create(
        dataset=dataset, name="tiny", version=1, rule="eccv", path=str(folder), manifest={}
    )


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ann", password="correct horse battery")


def rankings(first_caption: int = 11) -> dict:
    i2t_order = [first_caption, *[c for c in CAPTIONS if c != first_caption]]
    return {
        "i2t": {"1": i2t_order, "2": i2t_order[::-1]},
        "t2i": {"11": IMAGES, "21": IMAGES[::-1]},
    }


def upload(content: bytes | dict, name: str = "model.json") -> SimpleUploadedFile:
    data = json.dumps(content).encode() if isinstance(content, dict) else content
    return SimpleUploadedFile(name, data, content_type="application/json")


def url(release: Release) -> str:
    return reverse("frontend:leaderboard", args=[release.pk])


def test_anonymous_visitors_are_redirected_and_store_nothing(client, release):
    assert client.get(url(release)).status_code == 302
    response = client.post(url(release), {"model_name": "m", "rankings": upload(rankings())})
    assert response.status_code == 302
    assert not Evaluation.objects.exists()


def test_a_logged_in_user_sees_an_empty_board_that_says_tau_is_undefined(client, user, release):
    client.force_login(user)
    response = client.get(url(release))
    assert response.status_code == 200
    assert b"No model evaluated yet" in response.content
    assert b"undefined with fewer than two models" in response.content


def test_an_upload_is_evaluated_stored_and_shown(client, user, release):
    client.force_login(user)

    response = client.post(url(release), {"model_name": "clip-a", "rankings": upload(rankings())})

    assert response.status_code == 302 and response.url == url(release)
    evaluation = Evaluation.objects.get()
    assert (evaluation.model_name, evaluation.submitted_by) == ("clip-a", user)
    assert evaluation.metrics["i2t"]["recall@1"] == 0.5  # image 1 hits, image 2 misses
    page = client.get(url(release)).content.decode()
    assert "clip-a" in page and "map_at_r" in page and "0.5000" in page
    assert "Evaluated clip-a." in page


def test_two_models_give_a_tau_matrix_per_direction(client, user, release):
    client.force_login(user)
    client.post(url(release), {"model_name": "a", "rankings": upload(rankings(11))})
    client.post(url(release), {"model_name": "b", "rankings": upload(rankings(21))})

    page = client.get(url(release)).content.decode()

    assert Evaluation.objects.count() == 2
    assert 'id="agreement-i2t"' in page and 'id="agreement-t2i"' in page
    assert "undefined with fewer than two models" not in page


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not valid JSON"),
        ({"i2t": {}}, "missing: t2i"),
        ({"i2t": {"1": [11, 11]}, "t2i": {}}, "holds 11 twice"),
        ({"i2t": {"1": CAPTIONS}, "t2i": {"11": IMAGES, "21": IMAGES}}, "have no ranking"),
        ({**rankings(), "t2i": {"11": [1, 2], "21": IMAGES}}, "ndcg@10"),
        ({**rankings(), "t2i": {"11": [2**70, *IMAGES], "21": IMAGES}}, "at most 64 bits"),
        (b"[" * 100_000, "is not valid JSON"),
    ],
)
def test_a_bad_upload_shows_the_error_on_the_form_and_stores_nothing(
    client, user, release, content, message
):
    client.force_login(user)

    response = client.post(url(release), {"model_name": "m", "rankings": upload(content)})

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Evaluation.objects.exists()


def test_a_file_over_the_size_limit_is_refused(client, user, release, monkeypatch):
    monkeypatch.setattr(leaderboard_view, "MAX_UPLOAD_BYTES", 100)
    client.force_login(user)

    response = client.post(url(release), {"model_name": "m", "rankings": upload(rankings())})

    assert response.status_code == 400
    assert "the limit is" in response.content.decode()
    assert not Evaluation.objects.exists()


def test_a_missing_name_or_file_is_a_form_error(client, user, release):
    client.force_login(user)
    assert client.post(url(release), {"model_name": "m"}).status_code == 400
    response = client.post(url(release), {"rankings": upload(rankings())})
    assert response.status_code == 400
    assert not Evaluation.objects.exists()


def test_an_unknown_release_is_not_found(client, user):
    client.force_login(user)
    assert client.get(reverse("frontend:leaderboard", args=[999])).status_code == 404
