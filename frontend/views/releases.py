"""Releases: download one as a zip (logged-in users)."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest
from django.shortcuts import get_object_or_404

from annotation.models import Release
from mitl.releases import bundle_path


@login_required
def release_download(request: HttpRequest, release_id: int) -> FileResponse:
    """Stream the release's zip as an attachment named <name>-v<version>.zip."""
    release = get_object_or_404(Release, pk=release_id)
    path = bundle_path(Path(release.path))
    if not path.is_file():
        # A release written before releases had a zip, or whose files were moved away.
        raise Http404(f"release {release} has no zip at {path}")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{release.name}-v{release.version}.zip",
        content_type="application/zip",
    )
