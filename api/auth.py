"""Token authentication: trade a username and password for a token (`Authorization: Token …`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request

from annotation.login_limits import THROTTLED_MESSAGE, LoginAddressThrottle, LoginUsernameThrottle

from .parsers import FormParser, JSONParser, SmallMultiPartParser


@extend_schema(tags=["auth"])
class TokenView(ObtainAuthToken):
    """Return the account's API token, creating it the first time (public).

    The same token comes back on every call; send it as `Authorization: Token <key>`.
    Wrong credentials are a 400 whose `errors.non_field_errors` says so. Attempts are
    limited per address and per username (429 with `Retry-After` beyond the limit).
    """

    # Capped bodies, as everywhere (ObtainAuthToken names DRF's own parsers); no file here.
    parser_classes = (FormParser, SmallMultiPartParser, JSONParser)
    throttle_classes = (LoginAddressThrottle, LoginUsernameThrottle)

    def throttled(self, request: Request, wait: float | None) -> None:
        raise exceptions.Throttled(wait, detail=THROTTLED_MESSAGE)
