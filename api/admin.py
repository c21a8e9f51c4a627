"""The API's tokens in the Django admin: listed by account and revoked, never made or read.

A token is its account's password for the API: one made here for someone else, or a key
read off these pages, would let staff act as that account (a superuser's included). So
tokens are neither added nor edited, and their keys are not shown; deleting one revokes it
(the account gets a new one from `/api/token/` with its password).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy


def _token_name(token: TokenProxy) -> str:
    return f"API token of {token.user}"


# A token's own name is its key: the proxy (made for this admin only) is named by account
# instead, in titles, breadcrumbs, the delete page and the admin's history.
TokenProxy.__str__ = _token_name

admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class RevocableTokenAdmin(TokenAdmin):
    list_display = ("user", "created")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
