"""Releases (logged-in users): a page per version, its files, its zip and a positives CSV."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from annotation.models import Release
from annotation.selectors import release_zip
from mitl.markdown import markdown_render
from mitl.release_downloads import (
    positives_csv_lines,
    release_datasheet_read,
    release_file_path,
    release_files_list,
)
from mitl.release_files import I2T_FILE, QRELS_I2T_FILE, QRELS_T2I_FILE, T2I_FILE

# The formats the page offers by name: (label, file names, what they hold).
FORMATS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "ECCV Caption JSON",
        (I2T_FILE, T2I_FILE),
        "{query id: [positive ids]} per direction, as the ECCV Caption benchmark ships them",
    ),
    (
        "TREC qrels",
        (QRELS_I2T_FILE, QRELS_T2I_FILE),
        "query, 0, document, relevance per line, for trec_eval and ir_measures",
    ),
)
TEXT_TYPES = {".json": "application/json", ".csv": "text/csv", ".md": "text/markdown"}


@login_required
def release_page(request: HttpRequest, release_id: int) -> HttpResponse:
    """Show a release: its datasheet rendered, every file, the zip and the formats."""
    release = get_object_or_404(Release.objects.select_related("dataset"), pk=release_id)
    folder = Path(release.path)
    files = release_files_list(folder)
    names = {listed.name for listed in files}
    datasheet = release_datasheet_read(folder)
    context = {
        "release": release,
        "files": files,
        # The renderer escapes the whole datasheet before it adds any tag: the fragment is safe.
        "datasheet": None if datasheet is None else mark_safe(markdown_render(datasheet)),
        "formats": [
            {"label": label, "files": [n for n in file_names if n in names], "about": about}
            for label, file_names, about in FORMATS
        ],
        "has_positives": I2T_FILE in names and T2I_FILE in names,
        "has_zip": release_zip(release=release) is not None,
    }
    return render(request, "frontend/release.html", context)


@login_required
def release_file(request: HttpRequest, release_id: int, name: str) -> FileResponse:
    """Serve one file that the release's manifest lists; any other name is not found."""
    release = get_object_or_404(Release, pk=release_id)
    path = release_file_path(Path(release.path), name)
    if path is None:
        raise Http404(f"release {release} has no file {name!r}")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{release.name}-v{release.version}-{path.name}",
        content_type=TEXT_TYPES.get(path.suffix, "text/plain"),
    )


@login_required
def release_positives_csv(request: HttpRequest, release_id: int) -> StreamingHttpResponse:
    """Stream the release's positives as CSV (direction, query_id, positive_id)."""
    release = get_object_or_404(Release, pk=release_id)
    folder = Path(release.path)
    if release_file_path(folder, I2T_FILE) is None or release_file_path(folder, T2I_FILE) is None:
        raise Http404(f"release {release} has no ECCV Caption files")
    response = StreamingHttpResponse(positives_csv_lines(folder), content_type="text/csv")
    filename = f"{release.name}-v{release.version}-positives.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


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
