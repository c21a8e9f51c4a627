"""Machine annotators: read by every account, registered by staff through the service."""

from __future__ import annotations

import pytest

from annotation.models import MachineAnnotator

pytestmark = pytest.mark.django_db


def test_staff_register_an_annotator_and_a_repeat_returns_it(staff, db):
    body = {"name": "tfidf-2", "kind": "bow", "config": {"stop_words": False}}
    first = staff.post("/api/annotators/", body, format="json")
    again = staff.post("/api/annotators/", body, format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json()
    assert (first.json()["version"], first.json()["config"]) == ("1", {"stop_words": False})
    assert MachineAnnotator.objects.count() == 1


def test_the_same_name_with_other_settings_is_refused(staff, annotators):
    response = staff.post(
        "/api/annotators/",
        {"name": "tfidf", "kind": "bow", "config": {"stop_words": False}},
        format="json",
    )
    assert response.status_code == 409
    assert response.json() == {
        "detail": "annotator 'tfidf' already exists with another kind, config or version"
    }


def test_an_unknown_kind_is_refused_with_the_registry_message(staff, db):
    response = staff.post("/api/annotators/", {"name": "x", "kind": "crystal-ball"}, format="json")
    assert response.status_code == 400
    assert "crystal-ball" in response.json()["detail"]
    assert not MachineAnnotator.objects.exists()


def test_a_config_that_is_not_an_object_names_the_field(staff, db):
    response = staff.post(
        "/api/annotators/", {"name": "x", "kind": "bow", "config": [1]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {"config": ["must be a JSON object"]}


def test_annotators_filter_by_kind(ann, annotators):
    assert ann.get("/api/annotators/?kind=bow").json()["count"] == 2
    assert ann.get("/api/annotators/?kind=open_clip").json()["count"] == 0
