"""A request that meets a database or cache outage gets a clean 503, never a 500.

While PostgreSQL restarts, every query fails with OperationalError; while Redis is down,
the login limits cannot count. Django turns an uncaught exception into its 500 handler
(DEBUG off), called inside the `except` block, so this handler still sees the exception:
an outage answers 503 with Retry-After (JSON under /api/, a short page elsewhere), so
clients and load balancers retry instead of reporting a bug; anything else stays a 500
(JSON in the API's error format under /api/, Django's page elsewhere).
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error

RETRY_AFTER_S = 10
SERVER_ERROR = "server error: the request failed on the server; the error is logged"
UNAVAILABLE = "The service is briefly unavailable (database or cache restarting); retry shortly."


def outage_error(exc: BaseException | None) -> bool:
    """True for the errors a database or cache outage raises."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # no Redis client: no cache outage to recognise
        return False
    return isinstance(exc, RedisConnectionError | RedisTimeoutError)


def server_error_or_outage(request: HttpRequest) -> HttpResponse:
    """Django's handler500: 503 for an outage, Django's own 500 page otherwise."""
    api = request.path.startswith("/api/")
    if not outage_error(sys.exc_info()[1]):
        return JsonResponse({"detail": SERVER_ERROR}, status=500) if api else server_error(request)
    if api:
        response: HttpResponse = JsonResponse({"detail": UNAVAILABLE}, status=503)
    else:
        response = HttpResponse(
            f"<!doctype html><title>Unavailable</title><p>{UNAVAILABLE}</p>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
