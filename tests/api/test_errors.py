"""One error format for every error: {"detail": message} plus "errors" for invalid input."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from rest_framework import serializers

from api.errors import first_message
from config.error_pages import bad_request, page_not_found
from config.outages import SERVER_ERROR, server_error_or_outage

pytestmark = pytest.mark.django_db


def test_a_validation_error_names_every_field_and_sums_up_the_first(staff, dataset):
    response = staff.post("/api/batches/", {"name": ""}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"detail", "errors"}
    assert set(body["errors"]) == {"dataset", "name", "config"}
    assert body["detail"] == "dataset: This field is required."


def test_a_call_refused_for_the_objects_state_is_a_409_with_its_message(staff, batch):
    staff.post(f"/api/batches/{batch.pk}/start/")
    response = staff.post(f"/api/batches/{batch.pk}/start/")

    assert response.status_code == 409
    assert response.json() == {"detail": f"batch {batch.pk} has already started (state retrieving)"}


def test_an_unknown_object_is_a_404_in_the_same_format(staff, db):
    response = staff.get("/api/batches/12345/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No Batch matches the given query."}


def test_an_unknown_api_path_is_a_json_404_not_an_html_page(ann):
    response = ann.get("/api/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "no API endpoint at /api/no-such-thing/"}


@pytest.mark.parametrize(
    "path", ["/api/datasets/a%0Ab/", "/api/datasets/%C3%A9%0A/stats/", "/api/%0A/"]
)
def test_a_path_with_a_new_line_is_a_json_404_too(ann, path):
    response = ann.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"].startswith("no API endpoint at /api/")


def test_djangos_own_404_and_400_under_api_are_json_and_pages_elsewhere(rf):
    api = page_not_found(rf.get("/api/x"), Http404("no"))
    page = page_not_found(rf.get("/work/x"), Http404("no"))
    refused = bad_request(rf.get("/api/x"), SuspiciousOperation("bad host"))

    assert (api.status_code, json.loads(api.content)) == (
        404,
        {"detail": "no API endpoint at /api/x"},
    )
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert refused.status_code == 400 and "detail" in json.loads(refused.content)


def test_a_crash_under_api_is_a_json_500(rf):
    try:
        raise ValueError("a bug")
    except ValueError:
        response = server_error_or_outage(rf.get("/api/batches/"))
    assert response.status_code == 500
    assert json.loads(response.content) == {"detail": SERVER_ERROR}


def test_a_wrong_method_is_a_405(staff, db):
    response = staff.delete("/api/batches/")
    assert response.status_code == 405
    assert response.json() == {"detail": 'Method "DELETE" not allowed.'}


def test_anonymous_is_a_401_that_names_the_token_scheme(anon, db):
    response = anon.get("/api/batches/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_an_annotator_on_a_staff_endpoint_is_a_403(ann, db):
    response = ann.get("/api/batches/")
    assert response.status_code == 403
    assert response.json() == {"detail": "staff only"}


def test_malformed_json_is_a_400_without_field_errors(staff, db):
    response = staff.post("/api/batches/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()) == {"detail"}
    assert response.json()["detail"].startswith("JSON parse error")


def test_json_nested_too_deeply_is_a_400_not_a_crash(staff, db):
    body = "[" * 100_000 + "]" * 100_000
    response = staff.post("/api/batches/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "JSON parse error - arrays or objects are nested too deeply"
    }


def test_a_json_body_over_the_upload_cap_is_a_413_that_names_the_setting(staff, settings, db):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    config = {"annotators": ["tfidf"], "note": "x" * 2000}
    response = staff.post("/api/batches/", {"name": "n", "config": config}, format="json")
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert "1.0 KB" in detail and "DATA_UPLOAD_MAX_MEMORY_SIZE" in detail


def test_multipart_form_fields_over_the_cap_are_a_413_in_the_same_format(staff, settings, db):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = staff.post("/api/batches/", {"name": "x" * 2000}, format="multipart")
    assert response.status_code == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["detail"]


def test_the_summary_follows_nested_fields_and_numbers_list_items():
    errors = {"answers": [{}, {"level": ["not a choice"]}]}
    assert first_message(errors) == "answers.1.level: not a choice"
    assert first_message({"non_field_errors": ["wrong password"]}) == "wrong password"
    assert first_message({"config": {"k": ["too big"]}}) == "config.k: too big"


def test_a_validation_error_that_is_a_plain_list_goes_under_non_field_errors():
    from api.errors import api_exception_handler

    response = api_exception_handler(serializers.ValidationError(["bad"]), {})
    assert response.data == {"detail": "bad", "errors": {"non_field_errors": ["bad"]}}
