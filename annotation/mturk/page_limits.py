"""The public HIT page's limit per client address: new MTurk assignments opened per hour.

The page cannot check MTurk's ids (`verify`), so whoever previews a HIT can open it with
made-up ones, and each new (assignmentId, workerId) pair stores a row. A genuine worker
opens one assignment per HIT it accepts on MTurk, a handful an hour; a client that makes up
ids by the hundred is held back here (429, `Retry-After`) before it stores anything. The
rate is `REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["mturk-new-assignment"]`
(MTURK_NEW_ASSIGNMENT_RATE_PER_IP); the client address is DRF's (REMOTE_ADDR, or
NUM_PROXIES into X-Forwarded-For). Reloading a page already opened costs nothing.

A cache that does not answer lets the page through (and says so in the log): the rows
stay bounded per HIT by `hit_page.UNVERIFIED_SPARE`, which lives in the database.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.http import HttpRequest
from redis.exceptions import RedisError
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from .errors import TryLater

logger = logging.getLogger(__name__)


class NewAssignmentThrottle(SimpleRateThrottle):
    """Count new MTurk assignments per client address."""

    scope = "mturk-new-assignment"

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def new_assignment_admit(request: HttpRequest) -> None:
    """Count one new MTurk assignment for the request's client, or refuse it (`TryLater`)."""
    throttle = NewAssignmentThrottle()
    try:
        if throttle.allow_request(request, None):
            return
    except RedisError as exc:
        logger.error("MTurk page limit: the cache does not answer (%s); let through", exc)
        return
    wait = max(1, math.ceil(throttle.wait() or 1))
    raise TryLater(
        "too many new MTurk assignments from this address; if you accepted this HIT on "
        "MTurk, try again later or return it",
        retry_after=wait,
    )
