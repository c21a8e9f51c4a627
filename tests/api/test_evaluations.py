"""Evaluations: a model's rankings on a release, checked at once, become a leaderboard row
through a queued job."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Evaluation, EvaluationJob

from .conftest import rankings_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def submit(django_capture_on_commit_callbacks):
    """POST rankings; the queued task runs once the request's transaction would commit."""

    def post(client, release, name="oracle", rankings=None):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(
                f"/api/releases/{release.pk}/evaluations/",
                {"model_name": name, "rankings": rankings or rankings_for(release)},
                format="json",
            )

    return post


def test_rankings_are_queued_scored_by_the_task_and_a_resubmission_is_not_a_new_row(
    ann, release, submit
):
    first = submit(ann, release)

    assert first.status_code == 202
    assert first["Location"] == first.json()["url"]
    assert first.json()["status"] == "queued" and first.json()["evaluation"] is None
    job = ann.get(first["Location"]).json()
    assert (job["status"], job["error"], job["done"]) == ("done", "", job["total"])
    metrics = job["evaluation"]["metrics"]
    # Every positive is ranked first: a perfect model.
    assert metrics["i2t"]["recall@1"] == metrics["t2i"]["map_at_r"] == 1.0
    again = ann.get(submit(ann, release)["Location"]).json()
    assert again["evaluation"] == job["evaluation"]
    assert Evaluation.objects.count() == 1
    # The rankings are dropped once run.
    assert EvaluationJob.objects.filter(rankings_json__isnull=False).count() == 0


def test_the_leaderboard_lists_every_model_and_the_metric_agreement(ann, staff, release, submit):
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


def test_misshapen_rankings_are_a_400_under_rankings_and_queue_nothing(ann, release, submit):
    response = submit(ann, release, rankings={"i2t": {}})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["rankings"]
    assert 'exactly the keys "i2t" and "t2i"' in response.json()["errors"]["rankings"][0]
    assert not EvaluationJob.objects.exists() and not Evaluation.objects.exists()


def test_rankings_that_cannot_be_scored_end_in_a_failed_job_saying_why(ann, release, submit):
    response = submit(ann, release, rankings={"i2t": {}, "t2i": {}})

    assert response.status_code == 202
    job = ann.get(response["Location"]).json()
    assert job["status"] == "failed" and job["evaluation"] is None
    assert "queries have no ranking" in job["error"]
    assert not Evaluation.objects.exists()


def test_another_accounts_model_name_is_a_400_at_once(ann, staff, release, submit):
    submit(staff, release, "theirs")
    response = submit(ann, release, "theirs")
    assert response.status_code == 400
    assert "submitted by another account" in response.json()["errors"]["model_name"][0]
    assert EvaluationJob.objects.count() == 1


def test_a_job_is_seen_by_its_sender_and_staff_only(ann, staff, release, submit, django_user_model):
    url = submit(ann, release)["Location"]
    other = APIClient()
    other.force_login(django_user_model.objects.create_user("eve"))

    assert (ann.get(url).status_code, staff.get(url).status_code) == (200, 200)
    assert other.get(url).status_code == 404
    assert ann.get(url.replace(f"/{release.pk}/", "/999/")).status_code == 404


def test_an_unknown_release_is_a_404(ann, db):
    assert ann.get("/api/releases/999/evaluations/").status_code == 404


def test_rankings_over_the_size_limit_are_a_413_naming_the_limit_and_the_command(
    ann, release, settings, submit
):
    settings.EVALUATION_MAX_BODY_BYTES = 4096
    response = submit(ann, release)

    assert response.status_code == 413
    detail = response.json()["detail"]
    assert "over the size limit of 4.0 KB (EVALUATION_MAX_BODY_MB)" in detail
    assert "python manage.py evaluate" in detail and "--no-limits" in detail
    assert not EvaluationJob.objects.exists()


def test_a_ranking_deeper_than_the_limit_is_a_400_under_rankings(ann, release, settings, submit):
    settings.EVALUATION_MAX_RANKING_LENGTH = 50
    response = submit(ann, release)  # every query ranks all 200 captions or 40 images

    assert response.status_code == 400
    message = response.json()["errors"]["rankings"][0]
    assert "ids, more than the 50 accepted (the depth limit" in message
    assert not EvaluationJob.objects.exists()


def test_more_ranked_queries_than_the_dataset_holds_are_a_400(ann, release, submit):
    rankings = rankings_for(release)
    images = release.dataset.images.count()
    rankings["i2t"] = {str(10_000 + n): [1] for n in range(images + 1)}

    response = submit(ann, release, rankings=rankings)

    assert response.status_code == 400
    message = response.json()["errors"]["rankings"][0]
    assert f"ranks {images + 1} queries, more than the {images} there are to rank" in message
    assert not EvaluationJob.objects.exists()


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
    assert not EvaluationJob.objects.exists()


def test_rankings_come_as_json_only(ann, release):
    response = ann.post(
        f"/api/releases/{release.pk}/evaluations/",
        {"model_name": "m", "rankings": "{}"},
        format="multipart",
    )
    assert response.status_code == 415
    assert set(response.json()) == {"detail"}
