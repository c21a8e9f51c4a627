"""Password attempts on the token endpoint are limited per address, per username from one
address, and per username from every address (a higher cap)."""

from __future__ import annotations

import os
import uuid

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/auth/token/"


@pytest.fixture(autouse=True)
def _fast_hashes(settings) -> None:
    """Hash passwords cheaply: these tests check many of them."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rates(settings):
    """Set the two login rates for a test."""

    def set_rates(
        *,
        ip: str | None = "100/min",
        username: str | None = "100/min",
        account: str | None = "100/min",
    ) -> None:
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {
                "login-ip": ip,
                "login-username": username,
                "login-account": account,
            },
        }

    return set_rates


def attempt(username: str, password: str = "wrong", **extra):
    return APIClient().post(TOKEN_URL, {"username": username, "password": password}, **extra)


def assert_throttled(response) -> int:
    """A 429 in the API's error format with a Retry-After of at most a minute; return it."""
    assert response.status_code == 429, response.content
    assert set(response.json()) == {"detail"}
    assert "too many login attempts" in response.json()["detail"]
    wait = int(response["Retry-After"])
    assert 1 <= wait <= 60
    assert f"Expected available in {wait} second" in response.json()["detail"]
    return wait


def test_the_default_rate_stops_the_sixth_attempt_on_one_username(annotator_user):
    for _ in range(5):
        assert attempt("ann").status_code == 401

    # Even the right password: the attempt is refused before it is checked.
    assert_throttled(attempt("ann", PASSWORD))
    assert not Token.objects.exists()


def test_a_client_failing_on_purpose_locks_out_itself_not_the_owner(rates, annotator_user):
    # Five wrong tries a minute from anywhere used to keep the owner out of the account.
    rates(username="3/min")
    attacker = {"REMOTE_ADDR": "10.0.0.66"}
    for _ in range(3):
        assert attempt("ann", **attacker).status_code == 401

    assert_throttled(attempt("ann", PASSWORD, **attacker))
    assert_throttled(attempt(" ann ", PASSWORD, **attacker))  # the forms strip the username
    assert attempt("ann", PASSWORD, REMOTE_ADDR="10.0.0.9").status_code == 200  # the owner


def test_an_account_is_capped_over_every_address(rates, annotator_user, staff_user):
    rates(username="3/min", account="4/min")
    for n in range(4):  # guesses spread over addresses, each under its own limit
        assert attempt("ann", REMOTE_ADDR=f"10.0.1.{n}").status_code == 401

    assert_throttled(attempt("ann", PASSWORD, REMOTE_ADDR="10.0.1.9"))
    assert attempt("boss", PASSWORD, REMOTE_ADDR="10.0.1.9").status_code == 200  # not locked


def test_the_default_account_cap_needs_four_addresses_failing_at_once(annotator_user):
    # 5 a minute per username from one address, 20 from every address together; attempts
    # a client's own limit refused never count against the account's cap.
    def hammer(address: str) -> None:
        for _ in range(5):
            assert attempt("ann", REMOTE_ADDR=address).status_code == 401
        for _ in range(5):
            assert_throttled(attempt("ann", REMOTE_ADDR=address))

    for n in range(3):
        hammer(f"10.0.2.{n}")
    assert attempt("ann", PASSWORD, REMOTE_ADDR="10.0.2.99").status_code == 200  # 16 of 20

    for _ in range(4):
        assert attempt("ann", REMOTE_ADDR="10.0.2.3").status_code == 401  # 20 of 20
    assert_throttled(attempt("ann", PASSWORD, REMOTE_ADDR="10.0.2.98"))


def test_an_address_is_limited_whatever_usernames_it_tries(rates, annotator_user):
    rates(ip="3/min")
    for name in ("a", "b", "c"):
        assert attempt(name, REMOTE_ADDR="10.0.0.1").status_code == 401

    assert_throttled(attempt("ann", PASSWORD, REMOTE_ADDR="10.0.0.1"))
    assert attempt("ann", PASSWORD, REMOTE_ADDR="10.0.0.2").status_code == 200


def test_a_forged_forwarded_for_header_does_not_reset_the_address_count(rates, annotator_user):
    rates(ip="3/min")
    for n in range(3):
        forged = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": f"192.0.2.{n}"}
        assert attempt("x", **forged).status_code == 401

    forged = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    assert_throttled(attempt("ann", PASSWORD, **forged))


def test_behind_a_proxy_the_forwarded_address_is_the_client(rates, settings, annotator_user):
    rates(ip="2/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = {"REMOTE_ADDR": "10.9.9.9"}
    for _ in range(2):
        assert attempt("x", HTTP_X_FORWARDED_FOR="192.0.2.1", **proxy).status_code == 401

    assert_throttled(attempt("ann", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.1", **proxy))
    response = attempt("ann", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.2", **proxy)
    assert response.status_code == 200


def test_json_and_form_attempts_count_alike(rates, annotator_user):
    rates(username="2/min")
    client = APIClient()
    wrong, right = {"username": "ann", "password": "x"}, {"username": "ann", "password": PASSWORD}
    assert client.post(TOKEN_URL, wrong).status_code == 401  # multipart
    assert client.post(TOKEN_URL, wrong, format="json").status_code == 401
    assert_throttled(client.post(TOKEN_URL, right, format="json"))


def test_a_rate_set_to_off_lets_every_attempt_through(rates, annotator_user):
    rates(ip=None, username=None)
    for _ in range(12):
        assert attempt("ann").status_code == 401
    assert attempt("ann", PASSWORD).status_code == 200


def test_a_cache_that_does_not_answer_pauses_logins_with_a_503(settings, annotator_user):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        }
    }
    response = attempt("ann", PASSWORD)

    assert response.status_code == 503
    assert "CACHE_URL" in response.json()["detail"]
    assert response["Retry-After"] == "60"  # the detail says "try again in a minute"
    assert not Token.objects.exists()


def test_deeply_nested_json_is_a_400_not_a_crash(anon, db):
    body = '{"username": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = anon.post(TOKEN_URL, body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]


def test_a_body_over_the_cap_is_a_413_before_it_is_read(anon, settings, db):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = anon.post(TOKEN_URL, {"username": "ann", "password": "x" * 2000})
    assert response.status_code == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["detail"]


@pytest.mark.services
def test_with_a_redis_cache_every_process_shares_the_counts(rates, settings, annotator_user):
    """Counts live in Redis (CACHE_URL), where another web process reads the same ones."""
    from django.core.cache.backends.redis import RedisCache

    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    prefix = f"test-throttle-{uuid.uuid4().hex}"
    config = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    settings.CACHES = {"default": {**config, "KEY_PREFIX": prefix}}
    rates(username="2/min")
    other_process = RedisCache(url, {"KEY_PREFIX": prefix})
    try:
        assert attempt("ann").status_code == 401
        assert attempt("ann").status_code == 401
        assert_throttled(attempt("ann", PASSWORD))
        keys = [key for key in other_process._cache.get_client().scan_iter(f"{prefix}:*")]
        assert any(b"login-username" in key for key in keys)
    finally:
        client = other_process._cache.get_client()
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
