"""Token authentication: trade a username and password for a token (`Authorization: Token …`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request

from annotation.login_limits import LOGIN_THROTTLES, THROTTLED_MESSAGE, login_throttle_wait

from .parsers import FormParser, JSONParser, SmallMultiPartParser


@extend_schema(tags=["auth"])
class TokenView(ObtainAuthToken):
    """Return the account's API token, creating it the first time (public).

    The same token comes back on every call; send it as `Authorization: Token <key>`.
    Wrong credentials are a 400 whose `errors.non_field_errors` says so. Attempts are
    limited per address, per username from one address and per username from every
    address (429 with `Retry-After` beyond a limit; 503 with `Retry-After` while the cache
    that counts them does not answer).
    """

    # Capped bodies, as everywhere (ObtainAuthToken names DRF's own parsers); no file here.
    parser_classes = (FormParser, SmallMultiPartParser, JSONParser)
    throttle_classes = LOGIN_THROTTLES  # named for the schema's 429; counted below

    def check_throttles(self, request: Request) -> None:
        # The login page's count, in its order (annotation/login_limits.py), not DRF's
        # (which counts every throttle, even one after a refusal).
        wait = login_throttle_wait(request)
        if wait is not None:
            self.throttled(request, wait)

    def throttled(self, request: Request, wait: float | None) -> None:
        raise exceptions.Throttled(wait, detail=THROTTLED_MESSAGE)
