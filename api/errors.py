"""One error format for the whole API: `{"detail": message, "errors": {field: [messages]}}`.

`detail` always says what went wrong in one sentence; `errors` is there only for invalid
input (HTTP 400 from validation) and keys each message by its field, nested like the
request body (`{"config": {"k": ["…"]}}`). A refused service call (`ServiceError`) is a
400 with its message as `detail`; one refused for the object's state (`StateConflict`, e.g.
starting a batch twice) a 409, one refused for who asks (`NotPermitted`) a 403.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler

from annotation.errors import NotPermitted, ServiceError, StateConflict

from .parsers import PayloadTooLarge


class Refused(exceptions.APIException):
    """A service refused the request (wrong state, bad values); the message says why."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "the request was refused"
    default_code = "refused"


class Conflict(exceptions.APIException):
    """The resource is not in a state that allows this yet (e.g. a report before its data)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "the resource is not ready for this request"
    default_code = "conflict"


class ErrorSerializer(serializers.Serializer):
    """The body of every error response (for the schema)."""

    detail = serializers.CharField(help_text="What went wrong, in one sentence.")
    errors = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="Invalid input only: messages per field, nested like the request body.",
    )


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn any API error into the one error format; leave real crashes to Django (500)."""
    if isinstance(exc, StateConflict):
        exc = Conflict(str(exc))
    elif isinstance(exc, NotPermitted):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, ServiceError):
        exc = Refused(str(exc))
    elif isinstance(exc, RequestDataTooBig):  # Django's own cap, on multipart form fields
        exc = PayloadTooLarge(
            "the form fields are over DATA_UPLOAD_MAX_MEMORY_SIZE; send large content as a file"
        )
    elif isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        exc = exceptions.ParseError(str(exc))
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = response.data
        if not isinstance(errors, dict):
            errors = {api_settings.NON_FIELD_ERRORS_KEY: errors}
        response.data = {"detail": first_message(errors), "errors": errors}
    else:
        data = response.data
        detail = data.get("detail", data) if isinstance(data, dict) else data
        response.data = {"detail": str(detail)}
    return response


def first_message(errors: Any, path: tuple[str, ...] = ()) -> str:
    """Return the first message of nested validation errors, prefixed by its field path."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            field = () if key == api_settings.NON_FIELD_ERRORS_KEY else (str(key),)
            message = first_message(value, path + field)
            if message:
                return message
        return ""
    if isinstance(errors, list):
        for index, value in enumerate(errors):
            # A list of messages shares its field; a list of objects numbers its items.
            nested = (str(index),) if isinstance(value, dict | list) else ()
            message = first_message(value, path + nested)
            if message:
                return message
        return ""
    return f"{'.'.join(path)}: {errors}" if path else str(errors)
