"""Invalid captions: the review list of original captions people judged "100% NO" (staff)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, InvalidReason
from pipeline.invalid_captions import (
    caption_mark_invalid,
    caption_unmark_invalid,
    invalid_captions_review,
)

from .access import staff_required


@staff_required
@require_http_methods(["GET", "POST"])
def invalid_captions(request: HttpRequest) -> HttpResponse:
    """List captions to review with their images; mark or unmark one (POST, then redirect)."""
    if request.method == "POST":
        raw_pk = request.POST.get("caption", "")
        caption = get_object_or_404(
            Caption, pk=int(raw_pk) if raw_pk.isascii() and raw_pk.isdigit() else 0
        )
        action = request.POST.get("action")
        try:
            if action == "mark":
                caption_mark_invalid(caption=caption, reason=request.POST.get("reason", ""))
                reason = caption.get_invalid_reason_display()
                messages.success(request, f"Caption {caption.ext_id} marked invalid ({reason}).")
            elif action == "unmark":
                caption_unmark_invalid(caption=caption)
                messages.success(request, f"Caption {caption.ext_id} is valid again.")
            else:
                messages.error(request, "Choose mark or unmark.")
        except ServiceError as exc:
            messages.error(request, str(exc))
        return redirect(request.get_full_path())
    datasets = Dataset.objects.order_by("name")
    chosen = datasets.filter(name=request.GET.get("dataset", "")).first()
    rows = [
        {
            "candidate": row,
            "caption": row.caption,
            "image_url": row.caption.image.file.url if row.caption.image.file else "",
        }
        for row in invalid_captions_review(dataset=chosen)
    ]
    context = {
        "rows": rows,
        "datasets": datasets,
        "chosen": chosen,
        "reasons": InvalidReason.choices,
    }
    return render(request, "frontend/invalid_captions.html", context)
