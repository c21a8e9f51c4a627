"""The OpenAPI schema validates without a warning, and the docs page needs no CDN."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_schema_validates_with_no_warning(tmp_path: Path, capsys):
    out = tmp_path / "schema.yml"
    # --fail-on-warn raises on any warning; --validate checks it against the OpenAPI 3 spec.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))

    captured = capsys.readouterr()
    assert "Warning" not in captured.err and "Error" not in captured.err
    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    assert "/api/batches/{id}/cost/" in schema["paths"]
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_every_operation_documents_the_error_format(tmp_path: Path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    error = {"$ref": "#/components/schemas/Error"}

    create = schema["paths"]["/api/batches/"]["post"]["responses"]
    for code in ("400", "401", "403"):
        assert create[code]["content"]["application/json"]["schema"] == error
    assert "404" in schema["paths"]["/api/batches/{id}/"]["get"]["responses"]
    health = schema["paths"]["/api/health/"]["get"]
    assert "401" not in health["responses"] and {} in health["security"]  # public


def test_capped_bodies_and_rate_limits_are_documented(tmp_path: Path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    paths = yaml.safe_load(out.read_text())["paths"]
    error = {"$ref": "#/components/schemas/Error"}

    token = paths["/api/auth/token/"]["post"]["responses"]
    submit = paths["/api/releases/{release_id}/evaluations/"]["post"]
    assert token["429"]["content"]["application/json"]["schema"] == error
    assert submit["responses"]["413"]["content"]["application/json"]["schema"] == error
    assert list(submit["requestBody"]["content"]) == ["application/json"]
    assert "429" not in paths["/api/batches/"]["post"]["responses"]  # not rate-limited


def test_the_schema_is_served_to_logged_in_accounts(ann):
    response = ann.get("/api/schema/?format=json")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "MITL curation API"


def test_the_docs_page_loads_swagger_ui_from_this_server(ann):
    response = ann.get("/api/docs/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
