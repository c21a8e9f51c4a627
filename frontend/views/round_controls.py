"""The batch page's round controls (staff, POST): each calls one service and comes back."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from annotation.errors import ServiceError
from annotation.models import Batch
from pipeline.round_controls import ROUND_CONTROLS

from .access import staff_required


@staff_required
@require_POST
def batch_control(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Run one round control (POST `action`) on the batch and show its outcome on its page."""
    batch = get_object_or_404(Batch, pk=batch_id)
    control = ROUND_CONTROLS.get(request.POST.get("action", ""))
    if control is None:
        messages.error(request, "Unknown action.")
    else:
        try:
            messages.success(request, control(batch_id=batch.pk))
        except ServiceError as exc:  # the state does not allow it: say why, no 500
            messages.error(request, str(exc))
    return redirect("frontend:batch", batch_id=batch.pk)
