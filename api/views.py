"""Public views: the health check (load balancers and scripts poll it), and the API's 404."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions, serializers
from rest_framework.decorators import api_view, permission_classes, schema
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from config.celery import app


class HealthSerializer(serializers.Serializer):
    healthy = serializers.BooleanField()
    checks = serializers.DictField(
        child=serializers.CharField(),
        help_text="database, broker, cache (the shared cache, when CACHE_URL is set): ok, or the "
        "error.",
    )


def _failure(request: Request, exc: Exception) -> str:
    """Name the failure; only staff see the driver's message (it can name hosts and users)."""
    detail = str(exc) if request.user.is_staff else type(exc).__name__
    return f"error: {detail}"


@extend_schema(
    tags=["health"],
    responses={
        200: HealthSerializer,
        503: OpenApiResponse(HealthSerializer, description="A check failed."),
    },
)
@api_view(["GET"])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    """Report whether the database and (when configured) the Celery broker and the shared
    cache answer."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # a health check reports every failure instead of raising
        checks["database"] = _failure(request, exc)
    if settings.CELERY_BROKER_URL:
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = _failure(request, exc)
    else:
        checks["broker"] = "eager (no broker configured)"
    if settings.CACHE_URL:  # sessions fall back to the database, but logins are refused
        try:
            caches["default"].get("health-check")
            checks["cache"] = "ok"
        except Exception as exc:
            checks["cache"] = _failure(request, exc)
    healthy = all(not value.startswith("error") for value in checks.values())
    return Response({"healthy": healthy, "checks": checks}, status=200 if healthy else 503)


@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@permission_classes([AllowAny])
@schema(None)
def not_found(request: Request) -> Response:
    """Answer an unknown /api/ path with a JSON 404 (the one error format)."""
    raise exceptions.NotFound(f"no API endpoint at {request.path}")


class JsonErrors:
    """Render errors as JSON even on views whose pages are YAML or HTML (schema, docs)."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


class SchemaView(JsonErrors, SpectacularAPIView):
    """The OpenAPI 3 schema (YAML; `?format=json` for JSON), for logged-in accounts."""


class DocsView(JsonErrors, SpectacularSwaggerView):
    """Swagger UI over the schema, served from drf-spectacular-sidecar (no CDN)."""
