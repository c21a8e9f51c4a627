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


def make_evaluation(release: Release, *, explained: bool = True, by=None) -> Evaluation:
    return Evaluation.objects.create(
        release=release,
        submitted_by=by,
        model_name="clip-a",
        metrics={"i2t": {"recall@1": 0.5}, "t2i": {"recall@1": 0.25}},
        rankings_sha256="0" * 64,
        explanation=evaluation_explanation() if explained else None,
    )


def url(release: Release, evaluation: Evaluation) -> str:
    return f"/api/releases/{release.pk}/evaluations/{evaluation.pk}/explanation/"


def test_the_stored_explanation_comes_back_as_it_was_stored(ann, annotator_user):
    release = make_release("tiny")
    evaluation = make_evaluation(release, by=annotator_user)

    response = ann.get(url(release, evaluation))

    assert response.status_code == 200
    body = response.json()
    # As stored, without file names; an image with a file gets the page that serves it.
    expected = evaluation_explanation()
    for shown in expected["images"].values():
        del shown["file"]
    expected["images"]["1"]["src"] = (
        f"/releases/{release.pk}/leaderboard/{evaluation.pk}/explain/images/1/"
    )
    assert body == expected
    worst = body["explanation"]["t2i"]["worst"][0]
    assert (worst["truth_image"], worst["retrieved_image"]) == (1, 2)
    assert worst["agnostic"]["missing"] == ["ball"]
    assert body["images"]["2"]["src"] is None


def test_an_evaluation_of_another_release_is_a_404_that_says_so(staff, staff_user):
    release, other = make_release("tiny"), make_release("other")
    evaluation = make_evaluation(other, by=staff_user)

    response = staff.get(url(release, evaluation))

    assert response.status_code == 404
    assert response.json() == {"detail": f"release {release.pk} has no evaluation {evaluation.pk}"}


def test_an_evaluation_without_an_explanation_is_a_404_that_says_why(ann, annotator_user):
    release = make_release("tiny")
    evaluation = make_evaluation(release, explained=False, by=annotator_user)

    response = ann.get(url(release, evaluation))

    assert response.status_code == 404
    detail = response.json()["detail"]
    assert detail.startswith(f"evaluation {evaluation.pk} (clip-a) has no explanation")
    assert "no image concepts" in detail and "import_instances" in detail


def test_anonymous_callers_are_refused_before_any_lookup(anon, annotator_user):
    release = make_release("tiny")
    evaluation = make_evaluation(release, by=annotator_user)

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


def test_only_staff_and_the_submitter_read_an_explanation(ann, staff, staff_user):
    release = make_release("tiny")
    evaluation = make_evaluation(release, by=staff_user)  # not the annotator's model

    refused = ann.get(url(release, evaluation))
    allowed = staff.get(url(release, evaluation))

    assert refused.status_code == 403
    assert "submitted the model" in refused.json()["detail"]
    assert allowed.status_code == 200
    assert "file" not in allowed.json()["images"]["1"]  # stored names are not shown
