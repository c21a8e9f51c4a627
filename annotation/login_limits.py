"""Rate limits on password logins: the API's token endpoint and the web login page.

Both count attempts in the Django cache under the same three scopes, so guessing through
one and then the other gains nothing: `login-ip` per client address (any username),
`login-username` per username *and* client address, and `login-account` per username from
every address. Every attempt counts, right or wrong: a person who logs in a few times a
minute never notices, a password guesser waits. An attacker's client that keeps failing on
purpose is held back by the first two, which leave the account's owner, from another
address, free to log in; only the higher `login-account` cap, against guessing spread
over many addresses, is shared by every client (an attacker needs several addresses at
once to reach it). The rates are `REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`
(LOGIN_RATE_PER_IP, LOGIN_RATE_PER_USERNAME and LOGIN_RATE_PER_ACCOUNT in the
environment), read on every request so a changed setting applies at once.

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


# What a client waits before trying again while the cache does not answer (Retry-After).
UNAVAILABLE_RETRY_S = 60


class RateLimitUnavailable(exceptions.APIException):
    """The cache that holds the attempt counts does not answer; DRF sends `wait` as
    Retry-After, and the login page does the same."""

    status_code = 503
    wait = UNAVAILABLE_RETRY_S
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
    """Limit login attempts per username from one client address: a client that fails on
    purpose locks itself out of the account, not the owner elsewhere."""

    scope = "login-username"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        username = login_username(request)
        if username is None:
            return None  # nothing to guess against; the address limit still counts it
        return self.cache_format % {
            "scope": self.scope,
            "ident": _digest(username, self.get_ident(request) or ""),  # no address: one bucket
        }


class LoginAccountThrottle(_LoginThrottle):
    """Limit login attempts per username from every address together: a higher cap, against
    guessing spread over many addresses."""

    scope = "login-account"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        username = login_username(request)
        if username is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": _digest(username)}


# In the order they count: the client's limits before the account's shared cap.
LOGIN_THROTTLES = (LoginAddressThrottle, LoginUsernameThrottle, LoginAccountThrottle)


def _digest(*parts: str) -> str:
    """A short key free of whatever characters were sent (a NUL never occurs in either)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def login_username(request: Any) -> str | None:
    """Return the username a login request tries, as the login forms read it (stripped)."""
    data = request.POST if isinstance(request, HttpRequest) else request.data
    value = data.get("username") if isinstance(data, Mapping) else None
    if value is None or isinstance(value, dict | list):
        return None
    username = str(value).strip()
    return username or None


def login_throttle_wait(request: Any) -> int | None:
    """Count a login attempt under the login rates in order; return the seconds to wait if
    one refuses it (the web login page and the token endpoint alike).

    The first rate that refuses stops the count: an attempt refused for its client (its
    address, or this username from it) never counts against the account's cap, so a client
    that keeps failing on purpose cannot lock the account's owner out from elsewhere.
    Raises RateLimitUnavailable when the cache does not answer.
    """
    for throttle in (throttle_class() for throttle_class in LOGIN_THROTTLES):
        if not throttle.allow_request(request, None):
            return math.ceil(throttle.wait() or throttle.duration)
    return None
