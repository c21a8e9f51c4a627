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
