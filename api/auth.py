"""Token authentication: trade a username and password for a token (`Authorization: Token …`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.login_limits import LOGIN_THROTTLES, THROTTLED_MESSAGE, login_throttle_wait
from annotation.strict_input import UnknownKeysRefused

from .errors import ErrorSerializer
from .parsers import FormParser, JSONParser, SmallMultiPartParser

WRONG_CREDENTIALS = "Unable to log in with provided credentials."


class TokenLoginSerializer(UnknownKeysRefused, AuthTokenSerializer):
    """A username and a password, nothing else; wrong ones are a 401, not invalid input."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        user = authenticate(
            request=self.context.get("request"),
            username=attrs["username"],
            password=attrs["password"],
        )
        if user is None:  # also an inactive account (ModelBackend)
            raise exceptions.AuthenticationFailed(WRONG_CREDENTIALS)
        return {**attrs, "user": user}


@extend_schema(tags=["auth"])
class TokenView(ObtainAuthToken):
    """Return the account's API token, creating it the first time (public).

    The same token comes back on every call; send it as `Authorization: Token <key>`.
    Wrong credentials are a 401. Attempts are limited per address, per username from one
    address and per username from every address (429 with `Retry-After` beyond a limit;
    503 with `Retry-After` while the cache that counts them does not answer).
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

    serializer_class = TokenLoginSerializer

    @extend_schema(
        responses={
            200: TokenLoginSerializer,
            401: OpenApiResponse(ErrorSerializer, description="Wrong username or password."),
        }
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().post(request, *args, **kwargs)

    def throttled(self, request: Request, wait: float | None) -> None:
        raise exceptions.Throttled(wait, detail=THROTTLED_MESSAGE)
