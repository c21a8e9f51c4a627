"""The login page counts password attempts with the token endpoint's limits."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
LOGIN_URL = "/accounts/login/"


@pytest.fixture(autouse=True)
def _rates(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            "login-ip": "100/min",
            "login-username": "2/min",
            "login-account": "100/min",
        },
    }


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


def log_in(client: Client, password: str):
    return client.post(LOGIN_URL, {"username": "ann", "password": password})


def test_a_login_over_the_limit_is_a_429_that_does_not_log_in(client, annotator):
    for _ in range(2):
        wrong = log_in(client, "wrong")
        assert wrong.status_code == 200
        assert "did not match" in wrong.content.decode()

    refused = log_in(client, PASSWORD)

    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    page = refused.content.decode()
    assert "Too many login attempts" in page and "did not match" not in page
    assert 'value="ann"' in page  # the form keeps the username
    assert "_auth_user_id" not in client.session


def test_a_client_over_the_limit_leaves_the_owner_free_to_log_in(client, annotator):
    attacker = Client(REMOTE_ADDR="10.0.0.66")
    for _ in range(2):
        assert log_in(attacker, "wrong").status_code == 200
    assert log_in(attacker, PASSWORD).status_code == 429

    owner = Client(REMOTE_ADDR="10.0.0.9")
    assert log_in(owner, PASSWORD).status_code == 302
    assert owner.session["_auth_user_id"] == str(annotator.pk)


def test_showing_the_form_is_not_an_attempt(client, annotator):
    for _ in range(5):
        assert client.get(LOGIN_URL).status_code == 200
    response = log_in(client, PASSWORD)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(annotator.pk)


def test_the_api_and_the_page_share_the_counts(client, annotator):
    for _ in range(2):
        response = Client().post("/api/auth/token/", {"username": "ann", "password": "wrong"})
        assert response.status_code == 401
    assert log_in(client, PASSWORD).status_code == 429


def test_the_admin_logs_in_through_the_same_page(client):
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302
    assert response.url == f"{LOGIN_URL}?next=/admin/"
    assert client.get("/admin/").url.startswith("/admin/login/")


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/password_reset/",
        "/accounts/password_reset/done/",
        "/accounts/reset/MQ/set-password/",
        "/accounts/reset/done/",
    ],
)
def test_there_is_no_password_reset_by_email(client, annotator, url):
    # No mail server is configured: a reset form would send nothing (and log a traceback),
    # and it would take unlimited requests. Staff set passwords (README: accounts).
    assert client.get(url).status_code == 404
    assert client.post(url, {"email": "ann@example.org"}).status_code == 404


def test_log_out_and_password_change_still_work(client, annotator):
    client.force_login(annotator)
    assert client.get("/accounts/password_change/").status_code == 200
    changed = client.post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "another horse battery",
            "new_password2": "another horse battery",
        },
    )
    assert changed.status_code == 302 and changed.url == "/accounts/password_change/done/"

    assert client.post("/accounts/logout/").status_code == 302
    assert "_auth_user_id" not in client.session
