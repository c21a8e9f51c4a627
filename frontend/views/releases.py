"""Releases: download one as a zip (logged-in users)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest
from django.shortcuts import get_object_or_404

from annotation.models import Release
from annotation.selectors import release_zip


@login_required
def release_download(request: HttpRequest, release_id: int) -> FileResponse:
    """Stream the release's zip as an attachment named <name>-v<version>.zip."""
    release = get_object_or_404(Release, pk=release_id)
    bundle = release_zip(release=release)
    if bundle is None:
        raise Http404(f"release {release} has no zip file")
    return FileResponse(
        bundle.path.open("rb"),
        as_attachment=True,
        filename=bundle.filename,
        content_type="application/zip",
    )
