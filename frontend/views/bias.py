"""The model-bias report of a batch, for staff: the same HTML fragment `bias_report` writes."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from annotation.errors import ServiceError
from annotation.models import Batch
from mitl.bias_html import BIAS_CSS, render_bias_html
from pipeline.bias import bias_report_build

from .access import staff_required


@staff_required
def bias_page(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Show a batch's bias report, computed from its current verdicts."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    context = {"batch": batch, "css": mark_safe(BIAS_CSS), "report": None, "error": ""}
    try:
        # The renderer escapes every name and label it writes, so the fragment is safe.
        context["report"] = mark_safe(
            render_bias_html(bias_report_build(batch=batch), standalone=False)
        )
    except ServiceError as exc:
        context["error"] = str(exc)
    return render(request, "frontend/bias.html", context)
