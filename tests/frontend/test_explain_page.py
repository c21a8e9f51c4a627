"""The leaderboard's Explain link and page: a model's failures, concept by concept."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Dataset, Evaluation, Release
from tests.explain_data import evaluation_explanation

pytestmark = pytest.mark.django_db


def make_release(name: str = "tiny") -> Release:
    dataset = Dataset.objects.create(name=name)
    return Release.objects.create(
        dataset=dataset, name=name, version=1, rule="eccv", path=f"/releases/{name}", manifest={}
    )


def make_evaluation(release: Release, name: str, *, explained: bool = True) -> Evaluation:
    """A model submitted by "ann", the account `logged_in` logs in (when it exists)."""
    return Evaluation.objects.create(
        release=release,
        submitted_by=get_user_model().objects.filter(username="ann").first(),
        model_name=name,
        metrics={"i2t": {"recall@1": 0.5}, "t2i": {"recall@1": 0.25}},
        rankings_sha256=name.ljust(64, "0"),
        explanation=evaluation_explanation() if explained else None,
    )


@pytest.fixture
def release() -> Release:
    return make_release()


@pytest.fixture
def logged_in(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ann", password="x" * 20))
    return client


def explain_url(evaluation: Evaluation, release: Release | None = None) -> str:
    release_id = (release or evaluation.release).pk
    return reverse("frontend:explain", args=[release_id, evaluation.pk])


def test_the_leaderboard_links_only_models_with_an_explanation(logged_in, release):
    explained = make_evaluation(release, "clip-a")
    plain = make_evaluation(release, "clip-b", explained=False)

    page = logged_in.get(reverse("frontend:leaderboard", args=[release.pk])).content.decode()

    assert f'href="{explain_url(explained)}"' in page
    assert explain_url(plain) not in page
    assert page.count('class="explain-link"') == 1


def test_the_page_shows_the_worst_failures_concept_differences(logged_in, release):
    evaluation = make_evaluation(release, "clip-a")

    response = logged_in.get(explain_url(evaluation))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Explained failures: clip-a on tiny v1" in page
    assert "<dt>Missing (ground truth only)</dt><dd>ball</dd>" in page
    assert "<dt>Extra (retrieved only)</dt><dd>frisbee</dd>" in page
    assert "ball → frisbee (0.25)" in page and "dog 2 vs 1" in page
    image_url = f"/releases/{release.pk}/leaderboard/{evaluation.pk}/explain/images/1/"
    assert f'<img src="{image_url}"' in page
    assert "&lt;script&gt;alert" in page and "<script>alert" not in page
    assert "<svg" in page and ".explain-report" in page  # charts and their styles
    assert "instances (2 images)" in page


def test_an_evaluation_of_another_release_is_refused_to_its_submitter_and_a_404_to_staff(
    logged_in, release, client, django_user_model
):
    other = make_evaluation(make_release("other"), "clip-a")

    # For anyone but staff, an evaluation that is not theirs here is refused, found or not.
    assert logged_in.get(explain_url(other, release)).status_code == 403
    assert logged_in.get(explain_url(other)).status_code == 200
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    assert client.get(explain_url(other, release)).status_code == 404


def test_a_model_without_an_explanation_gets_a_message_that_says_why(logged_in, release):
    evaluation = make_evaluation(release, "clip-b", explained=False)

    response = logged_in.get(explain_url(evaluation))

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="no-explanation"' in page
    assert "had no image concepts when the model was evaluated" in page
    assert "import_instances" in page and "<svg" not in page
    assert release.path not in page  # the server's folders stay private


def test_anonymous_visitors_are_sent_to_log_in(client, release):
    evaluation = make_evaluation(release, "clip-a")

    response = client.get(explain_url(evaluation))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_another_account_sees_no_link_and_is_refused_but_staff_read_it(
    client, django_user_model, release
):
    evaluation = make_evaluation(release, "clip-a")  # "ann" does not exist: no submitter
    client.force_login(django_user_model.objects.create_user("worker", password="x" * 20))
    board = client.get(reverse("frontend:leaderboard", args=[release.pk])).content.decode()
    assert 'class="explain-link"' not in board
    assert client.get(explain_url(evaluation)).status_code == 403
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    assert client.get(explain_url(evaluation)).status_code == 200
