"""A leaderboard row's explanation: the concept failure metrics stored with it."""

from __future__ import annotations

import pytest

from annotation.models import Dataset, Evaluation, Release
from tests.explain_data import evaluation_explanation

pytestmark = pytest.mark.django_db


def make_release(name: str) -> Release:
    return Release.objects.create(
        dataset=Dataset.objects.create(name=name),
        name=name,
        version=1,
        rule="eccv",
        path=f"/releases/{name}",
        manifest={},
    )


def make_evaluation(release: Release, *, explained: bool = True) -> Evaluation:
    return Evaluation.objects.create(
        release=release,
        model_name="clip-a",
        metrics={"i2t": {"recall@1": 0.5}, "t2i": {"recall@1": 0.25}},
        rankings_sha256="0" * 64,
        explanation=evaluation_explanation() if explained else None,
    )


def url(release: Release, evaluation: Evaluation) -> str:
    return f"/api/releases/{release.pk}/evaluations/{evaluation.pk}/explanation/"


def test_the_stored_explanation_comes_back_as_it_was_stored(ann):
    release = make_release("tiny")
    evaluation = make_evaluation(release)

    response = ann.get(url(release, evaluation))

    assert response.status_code == 200
    body = response.json()
    # As stored, and an image with a file gets the login-protected page that serves it.
    expected = evaluation_explanation()
    expected["images"]["1"]["src"] = (
        f"/releases/{release.pk}/leaderboard/{evaluation.pk}/explain/images/1/"
    )
    assert body == expected
    worst = body["explanation"]["t2i"]["worst"][0]
    assert (worst["truth_image"], worst["retrieved_image"]) == (1, 2)
    assert worst["agnostic"]["missing"] == ["ball"]
    assert body["images"]["2"]["src"] is None


def test_an_evaluation_of_another_release_is_a_404_that_says_so(ann):
    release, other = make_release("tiny"), make_release("other")
    evaluation = make_evaluation(other)

    response = ann.get(url(release, evaluation))

    assert response.status_code == 404
    assert response.json() == {"detail": f"release {release.pk} has no evaluation {evaluation.pk}"}


def test_an_evaluation_without_an_explanation_is_a_404_that_says_why(ann):
    release = make_release("tiny")
    evaluation = make_evaluation(release, explained=False)

    response = ann.get(url(release, evaluation))

    assert response.status_code == 404
    detail = response.json()["detail"]
    assert detail.startswith(f"evaluation {evaluation.pk} (clip-a) has no explanation")
    assert "no image concepts" in detail and "import_instances" in detail


def test_anonymous_callers_are_refused_before_any_lookup(anon):
    release = make_release("tiny")
    evaluation = make_evaluation(release)

    response = anon.get(url(release, evaluation))

    assert response.status_code == 401
    assert set(response.json()) == {"detail"}


def test_the_schema_documents_the_explanation_and_its_404(staff):
    schema = staff.get("/api/schema/?format=json").json()

    operation = schema["paths"][
        "/api/releases/{release_id}/evaluations/{evaluation_id}/explanation/"
    ]["get"]
    assert set(operation["responses"]) >= {"200", "401", "403", "404"}
    assert "no explanation" in operation["responses"]["404"]["description"]
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    properties = schema["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]
    assert set(properties) == {"dataset", "concept_sources", "explanation", "images"}
