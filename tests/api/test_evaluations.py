"""Evaluations: a model's rankings on a release become a leaderboard row."""

from __future__ import annotations

import pytest

from annotation.models import Evaluation

from .conftest import rankings_for

pytestmark = pytest.mark.django_db


def submit(client, release, name="oracle", rankings=None):
    return client.post(
        f"/api/releases/{release.pk}/evaluations/",
        {"model_name": name, "rankings": rankings or rankings_for(release)},
        format="json",
    )


def test_rankings_come_back_as_metrics_and_a_resubmission_is_not_a_new_row(ann, release):
    first = submit(ann, release)
    again = submit(ann, release)

    assert (first.status_code, again.status_code) == (201, 200)
    metrics = first.json()["metrics"]
    # Every positive is ranked first: a perfect model.
    assert metrics["i2t"]["recall@1"] == metrics["t2i"]["map_at_r"] == 1.0
    assert first.json() == again.json()
    assert Evaluation.objects.count() == 1


def test_the_leaderboard_lists_every_model_and_the_metric_agreement(ann, staff, release):
    perfect = rankings_for(release)
    reversed_ = {d: {q: ids[::-1] for q, ids in by_q.items()} for d, by_q in perfect.items()}
    submit(ann, release, "oracle", perfect)
    submit(staff, release, "contrarian", reversed_)

    board = ann.get(f"/api/releases/{release.pk}/evaluations/").json()

    assert [e["model_name"] for e in board["evaluations"]] == ["contrarian", "oracle"]
    assert "recall@1" in board["metrics"] and "map_at_r" in board["metrics"]
    assert set(board["agreement"]) == {"i2t", "t2i"}
    assert board["agreement"]["i2t"]["metrics"] == board["metrics"]
    assert "submitted_by" not in board["evaluations"][0]  # accounts stay private


@pytest.mark.parametrize(
    ("rankings", "words"),
    [
        ({"i2t": {}}, 'exactly the keys "i2t" and "t2i"'),
        ({"i2t": {}, "t2i": {}}, "queries have no ranking"),
    ],
)
def test_bad_rankings_are_a_400_under_rankings(ann, release, rankings, words):
    response = submit(ann, release, rankings=rankings)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["rankings"]
    assert words in response.json()["errors"]["rankings"][0]
    assert not Evaluation.objects.exists()


def test_an_unknown_release_is_a_404(ann, db):
    assert ann.get("/api/releases/999/evaluations/").status_code == 404


def test_rankings_over_the_body_cap_are_a_413_naming_the_limit_and_the_command(
    ann, release, settings
):
    settings.EVALUATION_MAX_BODY_BYTES = 4096
    response = submit(ann, release)

    assert response.status_code == 413
    detail = response.json()["detail"]
    assert "at most 4.0 KB (EVALUATION_MAX_BODY_MB)" in detail
    assert "python manage.py evaluate" in detail
    assert not Evaluation.objects.exists()


def test_a_ranking_longer_than_the_cap_is_a_400_under_rankings(ann, release, settings):
    settings.EVALUATION_MAX_RANKING_LENGTH = 50
    response = submit(ann, release)  # every query ranks all 200 captions or 40 images

    assert response.status_code == 400
    message = response.json()["errors"]["rankings"][0]
    assert "ids, more than the 50 accepted" in message
    assert not Evaluation.objects.exists()


def test_more_ranked_queries_than_the_dataset_holds_are_a_400(ann, release):
    rankings = rankings_for(release)
    images = release.dataset.images.count()
    rankings["i2t"] = {str(10_000 + n): [1] for n in range(images + 1)}

    response = submit(ann, release, rankings=rankings)

    assert response.status_code == 400
    message = response.json()["errors"]["rankings"][0]
    assert f"ranks {images + 1} queries, more than the {images} there are to rank" in message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"model_name": "m", "rankings": ', "JSON parse error"),
        ('{"model_name": "m", "rankings": ' + "[" * 50_000 + "]" * 50_000 + "}", "too deeply"),
        ('{"model_name": "m", "rankings": {"i2t": {"1": [2.0]}, "t2i": {}}}', "integer ids"),
        ('{"model_name": "m", "rankings": {"i2t": {"1": ["2"]}, "t2i": {}}}', "integer ids"),
        (
            '{"model_name": "m", "rankings": {"i2t": {"1": [' + str(2**64) + ']}, "t2i": {}}}',
            "at most 64 bits",
        ),
        ('{"model_name": "m", "rankings": {"i2t": {"x": [1]}, "t2i": {}}}', "not an integer id"),
    ],
)
def test_malformed_rankings_are_a_400_never_a_crash(ann, release, body, words):
    response = ann.post(
        f"/api/releases/{release.pk}/evaluations/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert words in response.json()["detail"]
    assert not Evaluation.objects.exists()


def test_rankings_come_as_json_only(ann, release):
    response = ann.post(
        f"/api/releases/{release.pk}/evaluations/",
        {"model_name": "m", "rankings": "{}"},
        format="multipart",
    )
    assert response.status_code == 415
    assert set(response.json()) == {"detail"}
