"""Sessions when the shared cache (Redis) is down: pages keep working from the database,
logins are refused with a clear 503, and the health check names the cache."""

from __future__ import annotations

import os
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from annotation.sessions import SESSION_CACHE_SECONDS

pytestmark = pytest.mark.django_db

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: every call is refused at once
PASSWORD = "a-long-test-password"


def _use_cache(settings, url: str, prefix: str = "mitl-test") -> None:
    settings.CACHE_URL = url
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
        }
    }
    settings.SESSION_ENGINE = "annotation.sessions"


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("ann", password=PASSWORD)


def test_with_the_cache_down_a_logged_in_worker_still_gets_pages(settings, client, annotator):
    _use_cache(settings, DOWN)
    client.force_login(annotator)  # the session is written to the database all the same

    response = client.get("/work/")

    assert response.status_code == 200
    assert Session.objects.count() == 1


def test_with_the_cache_down_logging_out_ends_the_session_in_the_database(
    settings, client, annotator
):
    _use_cache(settings, DOWN)
    client.force_login(annotator)

    client.post("/accounts/logout/")

    assert Session.objects.count() == 0
    assert client.get("/work/").status_code == 302  # back to the login page


def test_with_the_cache_down_a_login_is_a_clear_503(settings, client, annotator):
    _use_cache(settings, DOWN)

    response = client.post("/accounts/login/", {"username": "ann", "password": PASSWORD})

    assert response.status_code == 503
    assert "rate-limit store" in response.content.decode()
    assert "_auth_user_id" not in client.session  # not logged in uncounted


def test_with_the_cache_down_the_health_check_names_it(settings, client):
    _use_cache(settings, DOWN)

    response = client.get("/api/health/")

    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["cache"].startswith("error")


@pytest.mark.services
def test_with_redis_up_a_session_is_cached_for_minutes_not_weeks(settings, client, annotator):
    from django.core.cache import caches

    _use_cache(
        settings,
        os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
        prefix=f"test-sessions-{uuid.uuid4().hex}",
    )
    client.force_login(annotator)
    store = client.session
    raw = caches["default"]._cache.get_client()
    key = caches["default"].make_and_validate_key(store.cache_key)
    try:
        assert client.get("/work/").status_code == 200
        ttl = raw.ttl(key)
        assert 0 < ttl <= SESSION_CACHE_SECONDS  # an outage-time logout is not undone for long
    finally:
        raw.delete(key)
