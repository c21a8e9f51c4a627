"""Setting up a batch from its page (staff, POST): a new instructions version, and the pairs
of its qualification round. Each goes through the service its command uses
(`batch_instructions`, `batch_qualification`) and shows the service's refusal on the page.
"""

from __future__ import annotations

import io

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotation.errors import ServiceError
from annotation.instructions import instructions_current, instructions_save
from annotation.models import Batch
from annotation.qualification.pairs import (
    QualificationPairError,
    QualificationPairInput,
    qualification_pairs_draw,
    qualification_pairs_parse,
    qualification_pairs_set,
)
from mitl.instructions import content_examples

from .access import staff_required
from .wizard_instructions import InstructionsExamplesForm, examples_initial

MAX_PAIRS_BYTES = 1_000_000  # a round has at most 50 pairs: a larger file is not a pairs CSV


@staff_required
@require_http_methods(["GET", "POST"])
def instructions_new(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Save the batch's next instructions version from one row per answer (GET: the form,
    prefilled with the current version's examples)."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    current = instructions_current(batch=batch)
    if request.method == "POST":
        form = InstructionsExamplesForm(request.POST)
        if form.is_valid():
            try:
                saved = instructions_save(
                    batch=batch, examples=form.examples() or [], user=request.user
                )
            except ServiceError as exc:  # a foreign or invalid id: say which, no 500
                form.add_error(None, str(exc))
            else:
                count = len(saved.content["examples"])
                messages.success(
                    request,
                    f"Instructions version {saved.version} saved ({count} "
                    f"example{'s' if count != 1 else ''}): work handed out from now on "
                    "carries it.",
                )
                return redirect("frontend:batch", batch_id=batch.pk)
    else:
        initial = examples_initial(content_examples(current.content)) if current else {}
        form = InstructionsExamplesForm(initial=initial)
    context = {"batch": batch, "current": current, "examples_form": form}
    return render(request, "frontend/instructions_new.html", context)


@staff_required
@require_POST
def qualification_pairs(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Draw the round's pairs (POST `draw`) or set them from an uploaded CSV (`pairs`, the
    columns `batch_qualification --pairs` reads), and say how it went on the batch page."""
    batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
    try:
        if "draw" in request.POST:
            drawn = qualification_pairs_draw(batch=batch)
            outcome = (
                f"Drew {drawn} qualification pairs."
                if drawn
                else "Nothing drawn: the round has its pairs already, or the batch has no round."
            )
        else:
            outcome = _pairs_upload(request, batch)
    except ServiceError as exc:  # the service's refusal, said on the page (no 500)
        messages.error(request, str(exc))
    else:
        messages.success(request, outcome)
    return redirect("frontend:batch", batch_id=batch.pk)


def _pairs_upload(request: HttpRequest, batch: Batch) -> str:
    """Set the round's pairs from the uploaded CSV; raise ServiceError naming the bad line."""
    upload = request.FILES.get("pairs")
    if upload is None:
        raise ServiceError("choose a CSV file of pairs (image_id,caption_id,answer[,note])")
    if upload.size > MAX_PAIRS_BYTES:
        raise ServiceError(f"{upload.name} is too large for a file of qualification pairs")
    try:
        text = upload.read().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ServiceError(f"{upload.name} is not UTF-8 text: save it as CSV UTF-8") from None
    try:
        pairs, lines = qualification_pairs_parse(io.StringIO(text, newline=""))
    except ServiceError as exc:
        raise ServiceError(f"{upload.name} {exc}") from None
    return _pairs_set(batch, pairs, lines, upload.name)


def _pairs_set(
    batch: Batch, pairs: list[QualificationPairInput], lines: list[int], name: str
) -> str:
    """Make `pairs` the round; a refused pair is named by its line in the file."""
    try:
        stored = qualification_pairs_set(batch=batch, pairs=pairs)
    except QualificationPairError as exc:  # as the command says it: the file's line
        raise ServiceError(f"{name} line {lines[exc.index]}: {exc.reason}") from None
    return f"{stored} qualification pairs set from {name}."
