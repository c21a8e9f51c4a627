"""Rate limits on password logins: the API's token endpoint and the web login page.

Both count attempts in the Django cache under the same two scopes, so guessing through
one and then the other gains nothing: `login-ip` per client address and `login-username`
per username tried. Every attempt counts, right or wrong: a person who logs in a few
times a minute never notices, a password guesser waits. The rates are
`REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]` (LOGIN_RATE_PER_IP and LOGIN_RATE_PER_USERNAME
in the environment), read on every request so a changed setting applies at once.

The counts are only as shared as the cache: the local-memory default counts per process,
so several web processes (gunicorn's workers) need CACHE_URL (Redis). DRF reads and
writes a count without a lock, so a burst of parallel attempts may pass a few over.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)

# DRF adds "Expected available in N seconds." (and the Retry-After header).
THROTTLED_MESSAGE = "too many login attempts from this address or for this username."


class RateLimitUnavailable(exceptions.APIException):
    """The cache that holds the attempt counts does not answer."""

    status_code = 503
    default_detail = (
        "logins are paused: the rate-limit store (CACHE_URL) does not answer; "
        "try again in a minute or ask an administrator to check Redis"
    )
    default_code = "rate_limit_unavailable"


class _LoginThrottle(SimpleRateThrottle):
    """Count POSTs only (showing the login form costs nothing); read the rate per request."""

    def get_rate(self) -> str | None:
        rates = api_settings.DEFAULT_THROTTLE_RATES
        if self.scope not in rates:
            raise ImproperlyConfigured(
                f'REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] has no rate for {self.scope!r}'
            )
        return rates[self.scope]

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method != "POST":
            return True
        try:
            return super().allow_request(request, view)
        except RedisError as exc:
            # Refuse rather than let guesses through uncounted; the log says why.
            logger.error("login rate limit: the cache does not answer (%s)", exc)
            raise RateLimitUnavailable() from exc


class LoginAddressThrottle(_LoginThrottle):
    """Limit login attempts per client address (REMOTE_ADDR, or NUM_PROXIES into XFF)."""

    scope = "login-ip"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class LoginUsernameThrottle(_LoginThrottle):
    """Limit login attempts per username, from any address."""

    scope = "login-username"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        username = login_username(request)
        if username is None:
            return None  # nothing to guess against; the address limit still counts it
        # A digest keeps the key short and free of whatever characters were sent.
        digest = hashlib.sha256(username.encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": digest}


def login_username(request: Any) -> str | None:
    """Return the username a login request tries, as the login forms read it (stripped)."""
    data = request.POST if isinstance(request, HttpRequest) else request.data
    value = data.get("username") if isinstance(data, Mapping) else None
    if value is None or isinstance(value, dict | list):
        return None
    username = str(value).strip()
    return username or None


def login_throttle_wait(request: HttpRequest) -> int | None:
    """Count a web login attempt under both login rates; return the seconds to wait if over.

    Raises RateLimitUnavailable when the cache does not answer.
    """
    waits = []
    for throttle in (LoginAddressThrottle(), LoginUsernameThrottle()):
        if not throttle.allow_request(request, None):
            waits.append(throttle.wait() or throttle.duration)
    return math.ceil(max(waits)) if waits else None
