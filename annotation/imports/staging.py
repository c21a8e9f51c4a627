"""Where import uploads wait for their job: `VAR_DIR/imports/<job id>/`, and its clean-up.

A request's uploads are copied under a `.new-<hex>` folder before its job exists, which
takes the job's id once the job is created. Messages never show the staging folder: a file
is named as it was uploaded (`public_message`).

A web process killed mid-request (gunicorn's timeout) leaves its `.new-<hex>` folder
behind; `import_staging_clean` (hourly from Celery beat, and `manage.py
import_staging_clean`) deletes such folders, and those of jobs that are over or gone,
once nothing in them has been written for a while.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone

from ..models import ImportJob, ImportStatus
from .requests import ImportRequestError, Upload

logger = logging.getLogger(__name__)

_NEW_PREFIX = ".new-"  # a request's uploads, staged before its job exists


def import_staging_root() -> Path:
    """Return the folder under which every import's uploads are staged."""
    return Path(settings.VAR_DIR) / "imports"


def import_staging_dir(job_id: int) -> Path:
    """Return the folder that holds a job's uploads until it has run."""
    return import_staging_root() / str(job_id)


def import_staging_new() -> Path:
    """Return a fresh folder name for a request's uploads, before its job exists."""
    return import_staging_root() / f"{_NEW_PREFIX}{uuid.uuid4().hex}"


def upload_stage(folder: Path, key: str, upload: Upload) -> str:
    """Copy one upload to `<folder>/<key>/<its own name>`; return that path under `folder`."""
    original = upload.name if isinstance(upload, UploadedFile) else Path(upload).name
    # Only the last part of the name, in safe characters: the name comes from the client.
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(original or "").name)[:100].lstrip(".")
    target = folder / key / (safe or key)
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(upload, UploadedFile):
        with target.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    else:
        try:
            shutil.copyfile(upload, target)
        except OSError as exc:
            raise ImportRequestError(f"{upload}: cannot read ({exc.strerror})", field=key) from exc
    return str(target.relative_to(folder))


def public_message(message: str, folder: Path, keys: Iterable[str]) -> str:
    """Drop the staging folder from a message: files are named as they were uploaded."""
    for key in keys:
        message = message.replace(f"{folder / key}/", "")
    return message.replace(f"{folder}/", "")


def import_staging_orphans(*, older_than: timedelta, now: datetime | None = None) -> list[Path]:
    """Return the staging folders no queued or running job needs, untouched for `older_than`.

    They are a request's uploads from before its job existed (`.new-<hex>`: the request
    died) and a job's (`<id>`) once it is done, failed or gone. A folder is as recent as
    the last write anywhere inside it, so an upload still being written is never taken,
    nor one whose job is still being committed. Anything else under the root is left alone.
    """
    root = import_staging_root()
    if not root.is_dir():
        return []
    folders: dict[Path, int | None] = {}
    for entry in root.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name.startswith(_NEW_PREFIX):
            folders[entry] = None
        elif entry.name.isdigit():
            folders[entry] = int(entry.name)
    in_use = set(
        ImportJob.objects.filter(
            pk__in=[job_id for job_id in folders.values() if job_id is not None],
            status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING],
        ).values_list("pk", flat=True)
    )
    cutoff = (now or timezone.now()).timestamp() - older_than.total_seconds()
    return sorted(
        folder
        for folder, job_id in folders.items()
        if job_id not in in_use and _last_written(folder) < cutoff
    )


def import_staging_clean(*, older_than: timedelta, now: datetime | None = None) -> list[Path]:
    """Delete the staging folders `import_staging_orphans` finds; return those deleted."""
    removed = []
    for folder in import_staging_orphans(older_than=older_than, now=now):
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            logger.warning("import staging: could not delete %s", folder)
        else:
            logger.info("import staging: deleted %s", folder)
            removed.append(folder)
    return removed


def _last_written(folder: Path) -> float:
    """Return the latest modification time of the folder and everything in it."""
    try:
        latest = folder.lstat().st_mtime
    except FileNotFoundError:  # deleted meanwhile: nothing left to clean
        return float("inf")
    for parent, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            try:
                latest = max(latest, os.lstat(os.path.join(parent, name)).st_mtime)
            except FileNotFoundError:  # deleted meanwhile (its job finished)
                continue
    return latest
