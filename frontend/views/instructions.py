"""The instructions of the HIT pages, their example images, and the wizard's proposal.

The platform's HIT page shows the version stored with the assignment, with example images
served to the worker who holds it (or staff); MTurk's page shows the same, or in a preview
the batch's current version, with signed image links (its workers have no account).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotation.instructions import (
    instructions_current,
    instructions_example_image,
    instructions_examples_propose,
    instructions_first_time,
    instructions_shown,
)
from annotation.models import HIT, Assignment, Dataset, Instructions
from annotation.mturk.links import instructions_image_path, instructions_image_valid

from .access import staff_required
from .item_images import neutral_image_response


def instructions_image_url(assignment_id: int, example: int) -> str:
    """Return the platform's link to an example's image, for the worker who holds the HIT."""
    return reverse("frontend:instructions-image", args=[assignment_id, example])


def platform_instructions(*, assignment: Assignment) -> dict[str, Any]:
    """Return the platform HIT page's instructions, open on the worker's first HIT with them."""
    shown = instructions_shown(
        instructions=assignment.instructions,
        image_url=lambda _instructions, example: instructions_image_url(assignment.pk, example),
    )
    return {
        "instructions": shown,
        "instructions_open": instructions_first_time(assignment=assignment),
    }


def mturk_instructions(*, hit: HIT, assignment: Assignment | None) -> dict[str, Any]:
    """Return MTurk's HIT page instructions: the assignment's version, open on the worker's
    first HIT with it; in a preview (no assignment), the batch's current version, open."""
    if assignment is None:
        instructions = instructions_current(batch=hit.batch)
        open_now = True
    else:
        instructions = assignment.instructions
        open_now = instructions_first_time(assignment=assignment)
    shown = instructions_shown(instructions=instructions, image_url=instructions_image_path)
    return {"instructions": shown, "instructions_open": open_now}


@login_required
@require_GET
def instructions_image(request: HttpRequest, assignment_id: int, example: int) -> FileResponse:
    """Serve an example image of an assignment's instructions to its worker, or to staff."""
    assignments = Assignment.objects.select_related("instructions")
    if not request.user.is_staff:
        # Another worker's assignment is a 404 like a missing one: nothing to probe.
        assignments = assignments.filter(worker__user=request.user)
    assignment = get_object_or_404(assignments, pk=assignment_id)
    if assignment.instructions is None:
        raise Http404("no instructions")
    return _example_image(assignment.instructions, example)


@require_GET
def mturk_instructions_image(
    request: HttpRequest, instructions_id: int, example: int, signature: str
) -> FileResponse:
    """Serve an example image of an instructions version to whoever holds its signed link."""
    if not instructions_image_valid(
        instructions_id=instructions_id, example=example, signature=signature
    ):
        raise Http404("no such image")
    return _example_image(get_object_or_404(Instructions, pk=instructions_id), example)


def _example_image(instructions: Instructions, example: int) -> FileResponse:
    image = instructions_example_image(instructions=instructions, index=example)
    if image is None or not image.file:
        raise Http404("no such example image")
    return neutral_image_response(image, f"example-{instructions.pk}-{example}")


@staff_required
@require_GET
def instructions_proposal(request: HttpRequest) -> JsonResponse:
    """Return the examples proposed for a dataset (`?dataset=<id>`), as the wizard fills them."""
    try:
        dataset_id = int(request.GET.get("dataset", ""))
    except ValueError:
        return JsonResponse({"detail": "name a dataset: ?dataset=<id>"}, status=400)
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    seed = request.GET.get("seed", "0")
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    examples = instructions_examples_propose(
        dataset=dataset, seed=int(seed) if seed.isascii() and seed.isdigit() else 0
    )
    return JsonResponse({"examples": [example.to_json() for example in examples]})
