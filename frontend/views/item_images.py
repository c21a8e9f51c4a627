"""A dataset image as a response that says nothing about where it came from.

The stored file name can identify the original image (on COCO it names the image a caption
was written for), so a browser gets a neutral name: `pair-<number>.<ext>` for a pair of a
worker's HIT page (its number there: an item id would point at a golden added later,
`annotation.pages`), `item-<id>.<ext>` for staff, `explain-<image id>.<ext>` on an
explanation page.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from django.http import FileResponse, Http404

from annotation.models import HITItem, Image

_EXTENSION = re.compile(r"^\.[a-z0-9]{1,5}$")


def item_image_response(item: HITItem, *, number: int | None = None) -> FileResponse:
    """Serve `item`'s image (its `image` loaded) under a neutral name, cached privately:
    `pair-<number>` for the pair `number` of a worker's page, else `item-<id>` (staff)."""
    if not item.image.file:
        raise Http404("this dataset has no image files")
    stem = f"pair-{number}" if number is not None else f"item-{item.pk}"
    return neutral_image_response(item.image, stem)


def neutral_image_response(image: Image, stem: str) -> FileResponse:
    """Serve a stored image as `<stem>.<its extension>`, cached privately."""
    suffix = PurePosixPath(image.file.name).suffix.lower()
    name = f"{stem}{suffix if _EXTENSION.match(suffix) else ''}"
    response = FileResponse(image.file.open("rb"), filename=name)
    response["Cache-Control"] = "private, max-age=3600"
    return response
