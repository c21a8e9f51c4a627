"""Unknown input is refused, never ignored: body keys at any depth, and query parameters.

The walks read the generated schema, so an endpoint added later is covered without a line
here: every write's request body (and every object nested in it) must come from a strict
serializer (`annotation.strict_input`) that refuses a key it does not know, and say so
(`additionalProperties: false`); every list must refuse a query parameter it does not take.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from annotation.models import Batch, Judgement
from annotation.strict_input import UnknownKeysRefused

from .conftest import answers_for

UNKNOWN = "zz_unknown"
WRITES = ("post", "put", "patch")


@pytest.fixture(scope="module")
def generated() -> tuple[dict[str, Any], dict[str, Any]]:
    """The OpenAPI schema, and the serializer behind each of its components, by name."""
    generator = SchemaGenerator()
    spec = generator.get_schema(request=None, public=True)
    serializers = {
        name: component.object
        for (name, kind), component in generator.registry._components.items()
        if kind == "schemas"
    }
    return spec, serializers


def _refs(schema: Any) -> Iterator[str]:
    """Every component a schema fragment refers to, at any depth."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _request_components(spec: dict[str, Any]) -> dict[str, str]:
    """Each component a write's body uses, directly or nested, with the first operation."""
    found: dict[str, str] = {}
    pending = [
        (name, f"{method.upper()} {path}")
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if method in WRITES
        for name in _refs(operation.get("requestBody", {}))
    ]
    while pending:
        name, where = pending.pop()
        if name in found:
            continue
        found[name] = where
        component = spec["components"]["schemas"][name]
        if component.get("type") == "object":  # enums have no keys to refuse
            pending += [(nested, where) for nested in _refs(component)]
    return found


def test_every_write_body_refuses_an_unknown_key_at_every_depth(generated):
    spec, serializers = generated
    components = _request_components(spec)
    objects = {
        name: where
        for name, where in components.items()
        if spec["components"]["schemas"][name].get("type") == "object"
    }
    # The walk finds the bodies it must (a broken walk would check nothing).
    assert {"SubmissionRequest", "AnswerRequest", "BatchCreateRequest"} <= set(objects)

    for name, where in objects.items():
        serializer = serializers[name]
        assert isinstance(serializer, UnknownKeysRefused), f"{where}: {name} is not strict"
        assert spec["components"]["schemas"][name]["additionalProperties"] is False, name
        checked = type(serializer)(data={UNKNOWN: "1"}, context={})
        assert not checked.is_valid(), f"{where}: {name} took an unknown key"
        assert checked.errors[UNKNOWN] == [
            f"unknown field (known: {', '.join(checked.writable_fields_named())})"
        ], name


def test_every_list_refuses_an_unknown_query_parameter(generated, staff, annotating_batch):
    spec, _ = generated
    lists = [
        path
        for path, operations in spec["paths"].items()
        if "{" not in path
        and any(p["name"] == "page" for p in operations.get("get", {}).get("parameters", []))
    ]
    assert "/api/batches/" in lists and "/api/assignments/" in lists

    for path in lists:
        response = staff.get(f"{path}?{UNKNOWN}=1&page=1")
        assert response.status_code == 400, path
        body = response.json()
        assert list(body["errors"]) == [UNKNOWN], path
        assert body["detail"].startswith(f"{UNKNOWN}: unknown parameter (known: "), path
        assert "page_size" in body["detail"], path


def test_an_answer_with_a_role_is_refused_and_nothing_stored(ann, own_assignment):
    body = answers_for(own_assignment)
    body["answers"][1]["role"] = "golden_tp"
    url = f"/api/assignments/{own_assignment.pk}/submit/"

    response = ann.post(url, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "answers": [
            {},
            {
                "role": [
                    "unknown field (known: item, level, shortcomings, wrong_concepts, "
                    "other_text, elapsed_ms)"
                ]
            },
            *[{}] * (len(body["answers"]) - 2),
        ]
    }
    assert response.json()["detail"].startswith("answers.1.role: unknown field")
    assert not Judgement.objects.exists()


def test_a_submit_query_takes_take_next_only(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/?take_nxt=true"
    response = ann.post(url, answers_for(own_assignment), format="json")

    assert response.status_code == 400 and list(response.json()["errors"]) == ["take_nxt"]
    assert not Judgement.objects.exists()


def test_a_batch_with_an_unknown_top_level_key_is_not_created(
    staff, dataset, annotators, small_config
):
    body = {"dataset": "small", "name": "typo", "config": small_config, "skip_finishd": True}

    response = staff.post("/api/batches/", body, format="json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("skip_finishd: unknown field (known: dataset, ")
    assert not Batch.objects.exists()


def test_the_cost_refuses_an_unknown_query_parameter(staff, batch):
    response = staff.get(f"/api/batches/{batch.pk}/cost/?reward=0.50&rewards=0.10")
    assert response.status_code == 400
    assert response.json()["errors"] == {"rewards": ["unknown parameter (known: reward)"]}


def test_statistics_refuse_an_unknown_query_parameter(staff, dataset):
    response = staff.get("/api/datasets/small/stats/?query_from=original")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["query_from"]


def test_a_read_only_field_sent_is_refused(staff, db):
    body = {"name": "x", "kind": "bow", "id": 7}
    response = staff.post("/api/annotators/", body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"id": ["read-only field: it cannot be set"]}


@pytest.mark.parametrize("query", ["state=", "dataset=small&state="])
def test_an_empty_choice_filter_is_refused(staff, batch, query):
    response = staff.get(f"/api/batches/?{query}")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["state"]


def test_an_empty_source_filter_is_refused(staff, dataset):
    response = staff.get("/api/positive-sets/?source=")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["source"]


def test_an_empty_queries_from_is_refused_not_left_out(staff, dataset):
    response = staff.get("/api/datasets/small/stats/?queries_from=")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["queries_from"]


def test_a_json_value_of_another_type_is_refused_not_converted(staff, db):
    body = {"name": "x", "kind": "bow", "version": 2}
    response = staff.post("/api/annotators/", body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"version": ["must be a string (got number)"]}


def test_a_submission_is_json_only_as_the_schema_says(ann, own_assignment):
    url = f"/api/assignments/{own_assignment.pk}/submit/"
    response = ann.post(url, {"answers": "x"})  # multipart: no list of objects in a form
    assert response.status_code == 415
    assert not Judgement.objects.exists()
