"""A database or cache outage answers a clean 503 with Retry-After; a bug stays a 500.

The handler is Django's handler500, called inside the `except` block of the failed
request; the soak run (tests/test_soak.py) shows it against a real PostgreSQL restart.
"""

from __future__ import annotations

import json

import pytest
from django.db import InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from config.outages import RETRY_AFTER_S, server_error_or_outage


def answer_after(exc: Exception, request):
    try:
        raise exc
    except Exception:
        return server_error_or_outage(request)


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("connection to server failed: Connection refused"),
        InterfaceError("connection already closed"),
        RedisConnectionError("Error 111 connecting to 127.0.0.1:6379"),
    ],
)
def test_an_outage_answers_503_with_retry_after(rf, exc):
    api = answer_after(exc, rf.get("/api/assignments/next/"))
    page = answer_after(exc, rf.get("/work/"))

    assert (api.status_code, page.status_code) == (503, 503)
    assert api["Retry-After"] == page["Retry-After"] == str(RETRY_AFTER_S)
    assert "unavailable" in json.loads(api.content)["detail"]
    assert page["Content-Type"].startswith("text/html") and b"retry" in page.content


def test_a_bug_stays_a_500(rf):
    response = answer_after(ValueError("a bug"), rf.get("/api/batches/"))
    assert response.status_code == 500
    assert "Retry-After" not in response


def test_django_uses_the_handler():
    from config import urls

    assert urls.handler500 == "config.outages.server_error_or_outage"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/auth/token/"])
def test_logins_paused_by_a_cache_outage_say_when_to_retry(client, settings, path):
    # The login limits refuse rather than count nowhere: a 503 that says when to come back.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        }
    }
    response = client.post(path, {"username": "ann", "password": "whatever"})

    assert response.status_code == 503
    assert response["Retry-After"] == "60"
    assert "try again in a minute" in response.content.decode()
