"""Who may call what: every endpoint for every role (anonymous, annotator, staff).

A role that must be refused gets a made-up id: the refusal has to come before any lookup,
so a missing check shows up as a 404 or a 200 instead of the expected 401 or 403.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import get_resolver, resolve

from annotation.models import Evaluation, EvaluationJob
from tests.explain_data import evaluation_explanation

from .conftest import ROLES, answers_for, rankings_for

pytestmark = pytest.mark.django_db

Fixtures = pytest.FixtureRequest


def _fixture(name: str, attribute: str = "pk") -> Callable[[Fixtures], Any]:
    return lambda request: getattr(request.getfixturevalue(name), attribute)


def _first(name: str) -> Callable[[Fixtures], Any]:
    return lambda request: getattr(request.getfixturevalue("dataset"), name).order_by("pk")[0].pk


PLACEHOLDERS: dict[str, Callable[[Fixtures], Any]] = {
    "dataset": _fixture("dataset", "name"),
    "image": _first("images"),
    "caption": _first("captions"),
    "positive_set": _first("positive_sets"),
    "annotator": lambda request: request.getfixturevalue("annotators")[0].pk,
    "batch": _fixture("batch"),
    "annotating": _fixture("annotating_batch"),
    "released": _fixture("released"),
    "assignment": _fixture("own_assignment"),
    "review": _fixture("flagged_assignment"),
    "release": _fixture("release"),
    # The annotator's own job: staff may follow it too.
    "evaluation_job": lambda request: (
        EvaluationJob.objects.create(
            release=request.getfixturevalue("release"),
            model_name="queued",
            submitted_by=request.getfixturevalue("annotator_user"),
        ).pk
    ),
    "evaluation": lambda request: (
        Evaluation.objects.create(
            release=request.getfixturevalue("release"),
            model_name="explained",
            metrics={},
            rankings_sha256="0" * 64,
            explanation=evaluation_explanation(),
        ).pk
    ),
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    expected: tuple[int, int, int]  # anonymous, annotator, staff
    body: Callable[[Fixtures], dict] | None = None
    needs: tuple[str, ...] = field(default=())  # fixtures an allowed call needs

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _create_batch(request: Fixtures) -> dict:
    request.getfixturevalue("annotators")
    return {
        "dataset": request.getfixturevalue("dataset").name,
        "name": "via api",
        "config": request.getfixturevalue("small_config"),
    }


def _submit(request: Fixtures) -> dict:
    return answers_for(request.getfixturevalue("own_assignment"))


def _evaluate(request: Fixtures) -> dict:
    return {"model_name": "oracle", "rankings": rankings_for(request.getfixturevalue("release"))}


REFUSED, STAFF_ONLY, READERS = (401, 401, 401), (401, 403, 200), (401, 200, 200)

ENDPOINTS = [
    Endpoint("GET", "/api/health/", (200, 200, 200)),
    Endpoint("GET", "/api/nothing/here/", (404, 404, 404)),
    Endpoint("GET", "/api/schema/", READERS),
    Endpoint("GET", "/api/docs/", READERS),
    # datasets: summaries for every account, contents for staff
    Endpoint("GET", "/api/datasets/", READERS, needs=("dataset",)),
    Endpoint("GET", "/api/datasets/{dataset}/", READERS),
    Endpoint("GET", "/api/datasets/{dataset}/stats/", STAFF_ONLY),
    Endpoint("GET", "/api/images/", STAFF_ONLY, needs=("dataset",)),
    Endpoint("GET", "/api/images/{image}/", STAFF_ONLY),
    Endpoint("GET", "/api/captions/", STAFF_ONLY, needs=("dataset",)),
    Endpoint("GET", "/api/captions/{caption}/", STAFF_ONLY),
    Endpoint("GET", "/api/positive-sets/", STAFF_ONLY, needs=("dataset",)),
    Endpoint("GET", "/api/positive-sets/{positive_set}/", STAFF_ONLY),
    Endpoint("GET", "/api/positive-sets/{positive_set}/pairs/", STAFF_ONLY),
    # machine annotators: read by all, created by staff
    Endpoint("GET", "/api/annotators/", READERS, needs=("annotators",)),
    Endpoint("GET", "/api/annotators/{annotator}/", READERS),
    Endpoint(
        "POST",
        "/api/annotators/",
        (401, 403, 201),
        body=lambda request: {"name": "bow-new", "kind": "bow", "config": {}},
    ),
    # batches: staff only
    Endpoint("GET", "/api/batches/", STAFF_ONLY, needs=("batch",)),
    Endpoint("GET", "/api/batches/{batch}/", STAFF_ONLY),
    Endpoint("GET", "/api/batches/{batch}/progress/", STAFF_ONLY),
    Endpoint("GET", "/api/batches/{batch}/cost/?reward=0.50", STAFF_ONLY),
    Endpoint("POST", "/api/batches/", (401, 403, 201), body=_create_batch),
    Endpoint(
        "POST",
        "/api/batches/estimate/",
        STAFF_ONLY,
        body=lambda request: {"config": request.getfixturevalue("small_config"), "reward": "0.5"},
    ),
    Endpoint("POST", "/api/batches/{batch}/start/", STAFF_ONLY),
    Endpoint("POST", "/api/batches/{batch}/cancel/", STAFF_ONLY),
    Endpoint(
        "POST",
        "/api/batches/{annotating}/control/",
        STAFF_ONLY,
        body=lambda request: {"action": "pause"},
    ),
    # reports: staff only
    Endpoint("GET", "/api/batches/{annotating}/diversity/", STAFF_ONLY),
    Endpoint("GET", "/api/batches/{released}/bias/", STAFF_ONLY),
    # crowd work: every account, its own assignments only
    Endpoint("GET", "/api/assignments/", READERS),
    Endpoint("POST", "/api/assignments/next/", READERS, needs=("annotating_batch",)),
    Endpoint("GET", "/api/assignments/{assignment}/", (401, 200, 404)),
    Endpoint("POST", "/api/assignments/{assignment}/submit/", (401, 201, 404), body=_submit),
    # reviews: staff only
    Endpoint("GET", "/api/reviews/", STAFF_ONLY, needs=("flagged_assignment",)),
    Endpoint("GET", "/api/reviews/{review}/", STAFF_ONLY),
    Endpoint("POST", "/api/reviews/{review}/approve/", STAFF_ONLY),
    Endpoint(
        "POST",
        "/api/reviews/{review}/reject/",
        STAFF_ONLY,
        body=lambda request: {"feedback": "the golden pair is clearly not a match"},
    ),
    # releases and evaluations: every account
    Endpoint("GET", "/api/releases/", READERS, needs=("release",)),
    Endpoint("GET", "/api/releases/{release}/", READERS),
    Endpoint("GET", "/api/releases/{release}/download/", READERS),
    Endpoint("GET", "/api/releases/{release}/evaluations/", READERS),
    Endpoint("POST", "/api/releases/{release}/evaluations/", (401, 202, 202), body=_evaluate),
    Endpoint("GET", "/api/releases/{release}/evaluations/jobs/{evaluation_job}/", READERS),
    # An explanation shows dataset images: staff and its submitter only.
    Endpoint("GET", "/api/releases/{release}/evaluations/{evaluation}/explanation/", STAFF_ONLY),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_each_role_gets_what_it_may(endpoint: Endpoint, role: str, request, client_for):
    expected = endpoint.expected[ROLES.index(role)]
    client = client_for(role)
    refused = expected in (401, 403)
    values = {
        name: "999" if refused else resolve(request)
        for name, resolve in PLACEHOLDERS.items()
        if "{" + name + "}" in endpoint.path
    }
    if not refused:
        for name in endpoint.needs:
            request.getfixturevalue(name)
    body = endpoint.body(request) if endpoint.body and not refused else None
    path = endpoint.path.format(**values)
    if endpoint.method == "GET":
        response = client.get(path)
    else:
        response = client.post(path, body, format="json")

    assert response.status_code == expected, getattr(response, "data", response)
    if expected >= 400:
        assert set(response.json()) == {"detail"}  # the one error format, nothing else
    if expected == 401:
        assert response["WWW-Authenticate"] == "Token"


def test_the_endpoint_table_covers_every_api_route():
    """A new endpoint without a row in this table (or a test of its own) fails here."""
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/")
    names = {
        pattern.name
        for pattern in api.url_patterns
        if not hasattr(pattern, "url_patterns")  # included modules (imports) test themselves
    }
    tested = {
        resolve(re.sub(r"\{[a-z_]+\}", "1", e.path.split("?")[0])).url_name for e in ENDPOINTS
    }
    assert names - tested == {"token"}  # tests/api/test_auth.py
