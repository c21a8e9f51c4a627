"""OpenAPI generation: every operation documents the error responses it can give, and every
request body says what it refuses: unknown keys (`additionalProperties: false`, the strict
serializers of `annotation.strict_input`) and empty lists where one item is the least."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny

from annotation.strict_input import UnknownKeysRefused

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


# An operation extension: this write checks what no schema can state (names of stored
# objects, file contents, rules between values), so input the schema allows may still get a
# 400. The contract test (tests/api/test_schema_contract.py) allows that 400 here only.
BEYOND_SCHEMA = "x-checks-beyond-schema"


def beyond_schema(reason: str) -> dict[str, str]:
    """`extend_schema(extensions=...)` of a write whose checks go beyond its schema: why."""
    return {BEYOND_SCHEMA: reason}


def conflict(description: str) -> OpenApiResponse:
    """A documented 409: the object's state refuses the request (`annotation.errors`)."""
    return OpenApiResponse(ErrorSerializer, description=description)


# What DRF's CharField refuses that a plain `type: string` allows: NUL characters always,
# and text that is only spaces where blank text is refused (it trims first).
NO_NUL = "^[^\\u0000]*$"
NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


def _text_pattern(field: Any) -> str | None:
    """The pattern that says what a request's text field refuses, if its schema has none."""
    if not isinstance(field, serializers.CharField):  # slugs and e-mails keep their own
        return None
    return NOT_BLANK if field.trim_whitespace and not field.allow_blank else NO_NUL


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
        if BEYOND_SCHEMA in operation and "400" in responses:
            said = responses["400"].get("description") or _DESCRIPTIONS["400"]
            responses["400"]["description"] = (
                f"{said} Beyond this schema: {operation[BEYOND_SCHEMA]}"
            )
        return operation

    def _map_serializer(self, serializer: Any, direction: str, *args: Any) -> dict[str, Any]:
        schema = super()._map_serializer(serializer, direction, *args)
        if direction == "request" and isinstance(serializer, UnknownKeysRefused):
            schema["additionalProperties"] = False  # the serializer refuses other keys
        return schema

    def _map_serializer_field(self, field: Any, direction: str, *args: Any) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, *args)
        if getattr(field, "allow_empty", True) is False and schema.get("type") == "array":
            schema.setdefault("minItems", 1)  # `allow_empty=False`: an empty list is a 400
        pattern = _text_pattern(field) if direction == "request" else None
        if pattern and schema.get("type") == "string" and "pattern" not in schema:
            schema["pattern"] = pattern
        return schema

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
