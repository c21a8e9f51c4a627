"""The leaderboard page through Django's test client: access, upload, refusals, the job page."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Caption, Dataset, Evaluation, EvaluationJob, Image, Release
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
    # Images 1-10; captions 11-16 of image 1, 21-26 of image 2.
    images = {ext_id: Image.objects.create(dataset=dataset, ext_id=ext_id) for ext_id in IMAGES}
    for caption in CAPTIONS:
        Caption.objects.create(
            dataset=dataset, image=images[caption // 10], ext_id=caption, text="c"
        )
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


def post(client, release: Release, name: str, content: bytes | dict, capture) -> object:
    """Upload rankings; the queued task runs once the request's transaction would commit."""
    with capture(execute=True):
        return client.post(url(release), {"model_name": name, "rankings": upload(content)})


def test_an_upload_is_scored_by_a_task_while_its_page_shows_progress(
    client, user, release, django_capture_on_commit_callbacks
):
    client.force_login(user)

    sent = json.dumps(rankings(), indent=1).encode()  # stored byte for byte, never re-encoded
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(url(release), {"model_name": "clip-a", "rankings": upload(sent)})

    job = EvaluationJob.objects.get()
    assert bytes(job.rankings_json) == sent
    page_url = reverse("frontend:leaderboard-job", args=[release.pk, job.pk])
    assert response.status_code == 302 and response.url == page_url
    assert (job.status, job.model_name, job.submitted_by) == ("queued", "clip-a", user)
    assert not Evaluation.objects.exists()  # nothing scored while the request waited
    waiting = client.get(page_url).content.decode()
    assert 'data-state="queued"' in waiting and "frontend/progress.js" in waiting
    assert len(queued) == 1
    queued[0]()  # the task: eager, as without a broker

    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.rankings_json) == ("done", 5, 5, None)
    evaluation = Evaluation.objects.get()
    assert (job.evaluation, evaluation.model_name, evaluation.submitted_by) == (
        evaluation,
        "clip-a",
        user,
    )
    assert evaluation.metrics["i2t"]["recall@1"] == 0.5  # image 1 hits, image 2 misses
    status = client.get(reverse("frontend:leaderboard-job-status", args=[release.pk, job.pk]))
    assert status.json()["state"] == "done" and status.json()["next_url"] == url(release)
    result = client.get(page_url).content.decode()
    assert 'id="job-metrics"' in result and "map_at_r" in result and "0.5000" in result
    board = client.get(url(release)).content.decode()
    assert "clip-a" in board and "0.5000" in board and page_url in board


def test_two_models_give_a_tau_matrix_per_direction(
    client, user, release, django_capture_on_commit_callbacks
):
    client.force_login(user)
    post(client, release, "a", rankings(11), django_capture_on_commit_callbacks)
    post(client, release, "b", rankings(21), django_capture_on_commit_callbacks)

    page = client.get(url(release)).content.decode()

    assert Evaluation.objects.count() == 2
    assert 'id="agreement-i2t"' in page and 'id="agreement-t2i"' in page
    assert "undefined with fewer than two models" not in page


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        ({"i2t": {}}, "missing: t2i"),
        ({"i2t": {"1": [11, 11]}, "t2i": {}}, "holds 11 twice"),
        ({**rankings(), "t2i": {"11": [2**70, *IMAGES], "21": IMAGES}}, "at most 64 bits"),
        (b"[" * 100_000, "not valid JSON"),
    ],
)
def test_a_bad_upload_shows_the_error_on_the_form_and_queues_nothing(
    client, user, release, content, message
):
    client.force_login(user)

    response = client.post(url(release), {"model_name": "m", "rankings": upload(content)})

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not EvaluationJob.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"i2t": {"1": CAPTIONS}, "t2i": {"11": IMAGES, "21": IMAGES}}, "have no ranking"),
        ({**rankings(), "t2i": {"11": [1, 2], "21": IMAGES}}, "ndcg@10"),
    ],
)
def test_rankings_that_cannot_be_scored_end_on_the_job_page_saying_why(
    client, user, release, content, message, django_capture_on_commit_callbacks
):
    client.force_login(user)

    response = post(client, release, "m", content, django_capture_on_commit_callbacks)

    assert response.status_code == 302
    page = client.get(response.url).content.decode()
    assert 'data-state="failed"' in page and message in page
    assert "Upload again" in page
    assert not Evaluation.objects.exists()


def test_another_accounts_model_name_is_a_form_error(client, user, release, django_user_model):
    Evaluation.objects.create(
        release=release,
        model_name="taken",
        metrics={},
        rankings_sha256="0" * 64,
        submitted_by=django_user_model.objects.create_user("someone"),
    )
    client.force_login(user)

    response = client.post(url(release), {"model_name": "taken", "rankings": upload(rankings())})

    assert response.status_code == 400
    assert "submitted by another account" in response.content.decode()
    assert not EvaluationJob.objects.exists()


def test_a_job_page_is_its_senders_and_staffs_only(
    client, user, release, django_user_model, django_capture_on_commit_callbacks
):
    client.force_login(user)
    page_url = post(client, release, "m", rankings(), django_capture_on_commit_callbacks).url
    status_url = page_url + "status/"
    client.force_login(django_user_model.objects.create_user("eve"))
    assert (client.get(page_url).status_code, client.get(status_url).status_code) == (404, 404)
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    assert (client.get(page_url).status_code, client.get(status_url).status_code) == (200, 200)


def test_a_missing_name_or_file_is_a_form_error(client, user, release):
    client.force_login(user)
    assert client.post(url(release), {"model_name": "m"}).status_code == 400
    response = client.post(url(release), {"rankings": upload(rankings())})
    assert response.status_code == 400
    assert not Evaluation.objects.exists()


def test_an_unknown_release_is_not_found(client, user):
    client.force_login(user)
    assert client.get(reverse("frontend:leaderboard", args=[999])).status_code == 404


# --- the limits: the API's, on the web too ------------------------------------------------------


def test_the_upload_is_held_to_the_apis_size_limit(client, user, release, settings):
    settings.EVALUATION_MAX_BODY_BYTES = 100
    client.force_login(user)

    response = client.post(url(release), {"model_name": "m", "rankings": upload(rankings())})

    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    size = len(json.dumps(rankings()).encode()) / 1024
    assert f"the rankings have {size:.1f} KB, over the size limit of 0.1 KB" in page
    assert "(EVALUATION_MAX_BODY_MB)" in page
    assert not EvaluationJob.objects.exists()


def test_the_form_says_the_limits_and_they_default_to_the_apis(client, user, release):
    client.force_login(user)
    page = html.unescape(client.get(url(release)).content.decode())
    assert "at most 20.0 MB, 1,000 ids per query, 10 image and 12 caption queries" in page


def test_the_upload_is_held_to_the_apis_depth_limit(client, user, release, settings):
    settings.EVALUATION_MAX_RANKING_LENGTH = 10
    client.force_login(user)

    response = client.post(url(release), {"model_name": "m", "rankings": upload(rankings())})

    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "the list of '1' has 12 ids, more than the 10 accepted (the depth limit, " in page
    assert not EvaluationJob.objects.exists()


def test_the_upload_is_held_to_the_datasets_query_count(client, user, release):
    client.force_login(user)
    too_many = {**rankings(), "i2t": {str(q): CAPTIONS for q in range(1, 12)}}  # 10 images

    response = client.post(url(release), {"model_name": "m", "rankings": upload(too_many)})

    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "rankings i2t ranks 11 queries, more than the 10 there are to rank" in page
    assert not EvaluationJob.objects.exists()


@pytest.mark.parametrize(
    ("content", "settings_over", "limit_words"),
    [
        (rankings(), {}, None),
        (rankings(), {"EVALUATION_MAX_RANKING_LENGTH": 10}, "the depth limit"),
        (rankings(), {"EVALUATION_MAX_BODY_BYTES": 100}, "over the size limit"),
        ({**rankings(), "t2i": {str(q): IMAGES for q in range(13)}}, {}, "there are to rank"),
        ({"i2t": {"1": [11, 11]}, "t2i": {}}, {}, "holds 11 twice"),
    ],
    ids=["valid", "too-deep", "too-large", "too-many-queries", "misshapen"],
)
def test_the_api_and_the_page_give_the_same_verdict_for_the_same_file(
    client, user, release, settings, content, settings_over, limit_words
):
    for name, value in settings_over.items():
        setattr(settings, name, value)
    client.force_login(user)
    api = APIClient()
    api.force_login(user)

    page = client.post(url(release), {"model_name": "web", "rankings": upload(content)})
    answer = api.post(
        f"/api/releases/{release.pk}/evaluations/",
        {"model_name": "api", "rankings": content},
        format="json",
    )

    if limit_words is None:
        assert (page.status_code, answer.status_code) == (302, 202)
        assert EvaluationJob.objects.count() == 2
        return
    assert page.status_code == 400 and answer.status_code in (400, 413)
    body = answer.json()
    refusal = body["errors"]["rankings"][0] if answer.status_code == 400 else body["detail"]
    shown = html.unescape(page.content.decode())
    assert limit_words in refusal and limit_words in shown
    if answer.status_code == 400:  # the same sentence (a size depends on the body's wrapping)
        assert f"model.json: {refusal}" in shown
    assert not EvaluationJob.objects.exists()
