"""The model-bias report of a batch, for staff: the fragment `bias_report` writes, folded."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from annotation.errors import ServiceError
from annotation.models import Batch
from mitl.bias_html import BIAS_CSS
from pipeline.bias_page import bias_html_cached

from .access import staff_required


@staff_required
def bias_page(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show a batch's bias report of its current work, built once per state of that work."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    context = {"batch": batch, "css": mark_safe(BIAS_CSS), "report": None, "error": ""}
    try:
        # The renderer escapes every name and label it writes, so the fragment is safe.
        context["report"] = mark_safe(bias_html_cached(batch=batch))
    except ServiceError as exc:
        context["error"] = str(exc)
    return render(request, "frontend/bias.html", context)
