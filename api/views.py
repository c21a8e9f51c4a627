"""Thin API views; the REST API issue grows these into DRF viewsets."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import Batch
from annotation.selectors import batch_progress


@api_view(["GET"])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    """Report whether the database and (when configured) the Celery broker answer."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # a health check reports every failure instead of raising
        checks["database"] = f"error: {exc}"
    if settings.CELERY_BROKER_URL:
        from config.celery import app

        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"error: {exc}"
    else:
        checks["broker"] = "eager (no broker configured)"
    healthy = all(not value.startswith("error") for value in checks.values())
    return Response({"healthy": healthy, "checks": checks}, status=200 if healthy else 503)


@api_view(["GET"])
@permission_classes([IsAdminUser])
def batch_detail(request: Request, batch_id: int) -> Response:
    """Return a batch's state and per-stage progress."""
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        return Response({"detail": f"batch {batch_id} does not exist"}, status=404)
    return Response(
        {
            "id": batch.pk,
            "name": batch.name,
            "dataset": batch.dataset.name,
            "state": batch.state,
            "error": batch.error,
            "config": batch.config,
            "progress": batch_progress(batch=batch),
            "reports": batch.reports,
        }
    )
