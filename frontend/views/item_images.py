"""A HIT item's image as a response that says nothing about where it came from.

The stored file name can identify the original image (on COCO it names the image a caption
was written for), so a worker's browser gets a neutral name: `item-<id>.<ext>`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from django.http import FileResponse, Http404

from annotation.models import HITItem

_EXTENSION = re.compile(r"^\.[a-z0-9]{1,5}$")


def item_image_response(item: HITItem) -> FileResponse:
    """Serve `item`'s image (its `image` loaded) under a neutral name, cached privately."""
    if not item.image.file:
        raise Http404("this dataset has no image files")
    suffix = PurePosixPath(item.image.file.name).suffix.lower()
    name = f"item-{item.pk}{suffix if _EXTENSION.match(suffix) else ''}"
    response = FileResponse(item.image.file.open("rb"), filename=name)
    response["Cache-Control"] = "private, max-age=3600"
    return response
