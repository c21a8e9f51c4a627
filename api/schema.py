"""OpenAPI generation: every operation documents the error responses it can give."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework.permissions import AllowAny

from .errors import ErrorSerializer

_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
_DESCRIPTIONS = {
    "400": "Invalid input (`errors` names the fields) or a refused action.",
    "401": "Not logged in: send `Authorization: Token <key>` or a session cookie.",
    "403": "Logged in, but this account may not do this (e.g. staff only).",
    "404": "No such object, or not one of yours.",
    "404-page": "No such page: `page` is past the last one.",
    "413": "The request body is over this endpoint's size cap; `detail` says the limit.",
    "429": "Too many attempts: wait the seconds of the `Retry-After` header, then try again.",
}


class ApiAutoSchema(AutoSchema):
    """Add the shared error body for 400 (writes, query parameters), 401/403 (non-public),
    404 (by id, or a page past the end of a list), 413 (writes), 429 (rate-limited).

    429 goes to the operations of rate-limited views (the token endpoint).
    """

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        error = self.resolve_serializer(ErrorSerializer, "response").ref
        responses = operation.setdefault("responses", {})
        for code in self._error_codes(operation):
            description = _DESCRIPTIONS[code]
            if code == "404" and "{" not in self.path:
                description = _DESCRIPTIONS["404-page"]
            responses.setdefault(
                code,
                {
                    "description": description,
                    "content": {"application/json": {"schema": error}},
                },
            )
        return operation

    def _error_codes(self, operation: dict[str, Any]) -> list[str]:
        codes = []
        queries = any(p.get("in") == "query" for p in operation.get("parameters", []))
        if self.method in _WRITE_METHODS or queries:
            codes.append("400")  # a body, or query parameters (filters, page numbers) to check
        permissions = self.view.get_permissions()
        if not all(isinstance(permission, AllowAny) for permission in permissions):
            codes += ["401", "403"]
        paginated = self._is_list_view() and self._get_paginator() is not None
        if "{" in self.path or paginated:
            codes.append("404")  # by id, or a page past the last one
        if self.method in _WRITE_METHODS:
            codes.append("413")  # every body is capped (api/parsers.py)
        if self.view.get_throttles():
            codes.append("429")
        return codes
