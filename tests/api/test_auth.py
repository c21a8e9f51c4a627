"""Token authentication: a token for a username and password, then `Authorization: Token`."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["annotator_user", "staff_user"])
def test_any_account_gets_the_same_token_on_every_call(anon, who, request):
    user = request.getfixturevalue(who)
    first = anon.post("/api/auth/token/", {"username": user.username, "password": PASSWORD})
    again = anon.post(
        "/api/auth/token/", {"username": user.username, "password": PASSWORD}, format="json"
    )

    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() == {"token": Token.objects.get(user=user).key}


def test_wrong_credentials_are_a_401_that_says_so(anon, annotator_user):
    response = anon.post("/api/auth/token/", {"username": "ann", "password": "nope"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Unable to log in with provided credentials."}


def test_missing_credentials_name_the_fields(anon, db):
    response = anon.post("/api/auth/token/", {})
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"username", "password"}


def test_the_token_authenticates_without_a_session(anon, staff_user, batch):
    key = anon.post("/api/auth/token/", {"username": "boss", "password": PASSWORD}).json()["token"]
    client = APIClient()  # no cookie at all
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    listed = client.get("/api/batches/")
    created = client.post(f"/api/batches/{batch.pk}/cancel/")  # no CSRF token needed

    assert listed.status_code == 200 and listed.json()["count"] == 1
    assert created.status_code == 200 and created.json()["state"] == "cancelled"


def test_the_token_carries_the_role_of_its_account(anon, annotator_user):
    key = anon.post("/api/auth/token/", {"username": "ann", "password": PASSWORD}).json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/batches/").status_code == 403
    assert client.get("/api/assignments/").status_code == 200


def test_a_wrong_token_is_a_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    response = client.get("/api/datasets/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


def test_a_session_still_works_with_csrf_for_browser_pages(annotator_user, db):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(annotator_user)
    assert client.get("/api/assignments/").status_code == 200
    refused = client.post("/api/assignments/next/")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
