"""Request bodies with a size cap, read before anything is parsed.

DRF's JSON and form parsers read the body straight from the WSGI stream, so Django's
DATA_UPLOAD_MAX_MEMORY_SIZE (which guards `request.body`) never applies to them, and
`json` raises RecursionError (a 500) on deeply nested input. These parsers refuse a body
whose declared length is over the cap before reading a byte (413), read at most the cap,
and turn nesting too deep into a 400. Multipart bodies keep Django's own parser, which
caps the form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) and streams files to disk, except
where no file is expected (`SmallMultiPartParser`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import QueryDict
from rest_framework import exceptions, parsers, status
from rest_framework.settings import api_settings
from rest_framework.utils import json

TOO_DEEP = "arrays or objects are nested too deeply"


class PayloadTooLarge(exceptions.APIException):
    """The request body is over the endpoint's size cap; the message says the limit."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "payload_too_large"


def size_text(size: int) -> str:
    """Return a byte count the way the error messages write it ("2.5 MB", "12.0 KB")."""
    return f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 2**10:.1f} KB"


class _CappedParser(parsers.BaseParser):
    """Read the whole body, at most `max_bytes()` of it; subclasses parse the bytes."""

    max_bytes_setting = "DATA_UPLOAD_MAX_MEMORY_SIZE"

    def max_bytes(self) -> int | None:
        return getattr(settings, self.max_bytes_setting)

    def too_large(self, size: int, limit: int) -> str:
        """Say what is too large and how to fix it."""
        return (
            f"the request body has {size_text(size)}; this endpoint takes at most "
            f"{size_text(limit)} ({self.max_bytes_setting})"
        )

    def refuse_declared_length(self, parser_context: dict[str, Any] | None) -> None:
        """Refuse a body whose Content-Length is over the cap, before reading any of it."""
        limit = self.max_bytes()
        request = (parser_context or {}).get("request")
        meta = request.META if request is not None else {}
        try:
            declared = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if limit is not None and declared > limit:
            raise PayloadTooLarge(self.too_large(declared, limit))

    def read(self, stream: Any, parser_context: dict[str, Any] | None) -> bytes:
        self.refuse_declared_length(parser_context)
        limit = self.max_bytes()
        body = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(body) > limit:
            raise PayloadTooLarge(self.too_large(len(body), limit))
        return body


class JSONParser(_CappedParser):
    """DRF's JSON parser with a size cap; nesting too deep is a 400, not a crash."""

    media_type = "application/json"
    renderer_class = parsers.JSONParser.renderer_class

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        body = self.read(stream, parser_context)
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        parse_constant = json.strict_constant if api_settings.STRICT_JSON else None
        try:
            return json.loads(body.decode(encoding), parse_constant=parse_constant)
        except ValueError as exc:  # includes a body that is not text in `encoding`
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise exceptions.ParseError(f"JSON parse error - {TOO_DEEP}") from None


class FormParser(_CappedParser):
    """DRF's URL-encoded form parser with a size cap."""

    media_type = "application/x-www-form-urlencoded"

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> QueryDict:
        body = self.read(stream, parser_context)
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        return QueryDict(body, encoding=encoding)


class SmallMultiPartParser(_CappedParser, parsers.MultiPartParser):
    """Multipart forms of at most DATA_UPLOAD_MAX_MEMORY_SIZE in all, files included.

    For endpoints that take no file (the public token endpoint): Django's own parser caps
    the form fields but writes any file part to disk, however large.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        self.refuse_declared_length(parser_context)
        return parsers.MultiPartParser.parse(self, stream, media_type, parser_context)
