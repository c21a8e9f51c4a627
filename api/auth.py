"""Token authentication: trade a username and password for a token (`Authorization: Token …`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.authtoken.views import ObtainAuthToken


@extend_schema(tags=["auth"])
class TokenView(ObtainAuthToken):
    """Return the account's API token, creating it the first time (public).

    The same token comes back on every call; send it as `Authorization: Token <key>`.
    Wrong credentials are a 400 whose `errors.non_field_errors` says so.
    """
